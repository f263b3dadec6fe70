//! Throughput of the literal codecs on a real BF16 checkpoint (single thread).
//!
//! `cargo bench --bench codec [-- FILE]`. Every BF16 tensor of the file is concatenated
//! into one stream of 16-bit words, which is also split into its high and low bytes.
//! Rates are in MB/s (10^6 bytes) of the decoded stream in its container (1 byte per
//! 8-bit word, 2 per 16-bit word) per second of CPU time, best of several runs.

use std::hint::black_box;
use std::time::{Duration, Instant};

use brevis::codec::{self, select, CodecId};
use brevis::stats::histogram;
use brevis::Words;

const DEFAULT: &str = "../shared/corpus/minilm-l6-v2-bf16.safetensors";

fn bf16_stream(path: &str) -> Words {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hlen = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + hlen]).unwrap();
    let data = &bytes[8 + hlen..];
    let mut all = Vec::new();
    for t in header.as_object().unwrap().values() {
        if t.get("dtype").and_then(|d| d.as_str()) == Some("BF16") {
            let off = t["data_offsets"].as_array().unwrap();
            let (a, b) = (
                off[0].as_u64().unwrap() as usize,
                off[1].as_u64().unwrap() as usize,
            );
            all.extend_from_slice(&data[a..b]);
        }
    }
    Words::from_le_bytes(16, &all).unwrap()
}

/// CPU time this thread has run, from Linux's schedstat (wall time elsewhere): the
/// machine may be shared, and time spent waiting for a core is not the codec's.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

fn now() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    cpu_time().unwrap_or_else(|| START.get_or_init(Instant::now).elapsed())
}

/// Best CPU time of `f` over at least 5 runs and about a second.
fn time<R>(mut f: impl FnMut() -> R) -> Duration {
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 5 || start.elapsed() < Duration::from_secs(1) {
        let t = now();
        black_box(f());
        best = best.min(now().saturating_sub(t));
        runs += 1;
    }
    best
}

fn rate(bytes: usize, d: Duration) -> String {
    format!("{:8.0}", bytes as f64 / d.as_secs_f64() / 1e6)
}

fn main() {
    // Arguments: an optional path, and `--only OP STREAM` to loop one operation (for
    // `perf stat`), OP in rans-enc, rans-dec, huf-enc, huf-dec, bp-enc, bp-dec, best,
    // rans-plan, huf-plan; STREAM in high, low, u11 (sign dropped, exponent and top 2
    // mantissa bits, as BF16's fields[1,11,4]), sign, low4 (its other two fields), word,
    // tensor (the first 2^20 words).
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .iter()
        .find(|a| !a.starts_with('-') && a.contains('/'))
        .cloned()
        .unwrap_or_else(|| DEFAULT.to_string());
    if let Some(i) = args.iter().position(|a| a == "--only") {
        let (op, which) = (args[i + 1].as_str(), args[i + 2].as_str());
        let words = bf16_stream(&path);
        let w = match which {
            "high" => words.map_to(8, |w| w >> 8),
            "low" => words.map_to(8, |w| w & 0xFF),
            "u11" => words.map_to(11, |w| (w >> 4) & 0x7FF),
            "sign" => words.map_to(1, |w| w >> 15),
            "low4" => words.map_to(4, |w| w & 0xF),
            // One large tensor's worth of whole words (thousands of distinct ones).
            "tensor" => words.slice(0, words.len().min(1 << 20)),
            _ => words,
        };
        if op.ends_with("-plan") {
            // Table planning alone, from the histogram.
            let hist = histogram(&w, codec::MAX_TABLE_SYMBOLS).expect("a table codec applies");
            // 100 plans per timing: the CPU clock ticks in milliseconds.
            let per = time(|| {
                for _ in 0..100 {
                    if op == "huf-plan" {
                        black_box(codec::huffman::Plan::new(&hist, w.width(), w.len()).size());
                    } else {
                        black_box(codec::rans::Plan::new(&hist, w.width(), w.len()).table_bytes());
                    }
                }
            })
            .as_secs_f64()
                / 100.0;
            println!(
                "{op} {which}: {} distinct words, best {:.3} ms cpu",
                hist.len(),
                per * 1e3
            );
            return;
        }
        let c = if op.starts_with("huf") {
            CodecId::Huffman
        } else if op.starts_with("bp") {
            CodecId::BitPack
        } else {
            codec::rans::Layout::for_len(w.len()).codec()
        };
        let e = select::encode_with(c, &w).unwrap();
        let per = time(|| match op {
            "rans-enc" | "huf-enc" | "bp-enc" => drop(black_box(select::encode_with(c, &w))),
            "best" => drop(black_box(select::encode_best(&w))),
            _ => drop(black_box(
                codec::decode(c, &e.body, w.width(), w.len()).unwrap(),
            )),
        })
        .as_secs_f64();
        println!(
            "{op} {which}: {} words, best {:.2} ms cpu, {:.2} ns per word",
            w.len(),
            per * 1e3,
            per * 1e9 / w.len() as f64
        );
        return;
    }
    let words = bf16_stream(&path);
    println!("{path}: {} BF16 words", words.len());
    let streams = [
        ("high byte", words.map_to(8, |w| w >> 8)),
        ("low byte", words.map_to(8, |w| w & 0xFF)),
        ("sign bit", words.map_to(1, |w| w >> 15)),
        ("low 4", words.map_to(4, |w| w & 0xF)),
        ("u11", words.map_to(11, |w| (w >> 4) & 0x7FF)),
        ("bf16 word", words),
    ];
    println!(
        "{:>9} {:>8} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8} {:>8}   (MB/s of decoded words)",
        "stream",
        "hist",
        "best",
        "sizes",
        "",
        "rans-enc",
        "rans-dec",
        "huf-enc",
        "huf-dec",
        "bp-dec"
    );
    for (label, w) in &streams {
        let bytes = w.len() * brevis::tensor::container_bytes(w.width());
        let hist = time(|| histogram(w, codec::MAX_TABLE_SYMBOLS));
        let best = time(|| select::encode_best(w));
        let sizes = time(|| select::all_sizes(w));
        let mut cols = Vec::new();
        let rans = codec::rans::Layout::for_len(w.len()).codec();
        for c in [rans, CodecId::Huffman, CodecId::BitPack] {
            let e = select::encode_with(c, w).unwrap();
            if c != CodecId::BitPack {
                cols.push(rate(bytes, time(|| select::encode_with(c, w))));
            }
            cols.push(rate(
                bytes,
                time(|| codec::decode(c, &e.body, w.width(), w.len()).unwrap()),
            ));
        }
        println!(
            "{label:>9} {} {} {} {:>8} | {}",
            rate(bytes, hist),
            rate(bytes, best),
            rate(bytes, sizes),
            "",
            cols.join(" ")
        );
    }
}
