//! Nanoseconds per word of every literal codec on the field streams the search emits for
//! real checkpoints, beside a `memcpy` of the same decoded bytes (docs/bench.md, issue
//! 42). One thread; each figure the best of at least 5 runs and 0.3 s of this thread's
//! CPU time (`CLOCK_THREAD_CPUTIME_ID`: the machine may be shared, and time spent
//! waiting for a core is not the codec's).
//!
//! `cargo bench --bench literals [-- FILTER]`: the streams whose label holds FILTER.
//! Streams: the sign, the exponent with the top mantissa bits, and the rest of the
//! mantissa of the corpus's BF16 (minilm), F16 (whisper) and F32 (easyocr) weights, and
//! FP8's whole bytes, each the first 2^20 words of the file's float tensors.

use std::hint::black_box;
use std::time::Duration;

use brevis::codec::{self, select, CodecId};
use brevis::Words;

const CORPUS: &str = "../shared/corpus";

/// Thread CPU time.
fn now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Best CPU time of `f` over at least 5 runs and 0.3 s.
fn time<R>(mut f: impl FnMut() -> R) -> Duration {
    let mut best = Duration::MAX;
    let mut spent = Duration::ZERO;
    let mut runs = 0;
    while runs < 5 || spent < Duration::from_millis(300) {
        let t = now();
        black_box(f());
        let d = now().saturating_sub(t);
        best = best.min(d);
        spent += d;
        runs += 1;
    }
    best
}

/// The first `max` words of `dtype` tensors of corpus file `name`, as `width`-bit words.
fn words_of(name: &str, dtype: &str, width: u32, max: usize) -> Words {
    let path = format!("{CORPUS}/{name}");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hlen = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + hlen]).unwrap();
    let data = &bytes[8 + hlen..];
    let mut all = Vec::new();
    let wb = (width / 8) as usize;
    for t in header.as_object().unwrap().values() {
        if t.get("dtype").and_then(|d| d.as_str()) == Some(dtype) {
            let off = t["data_offsets"].as_array().unwrap();
            let (a, b) = (
                off[0].as_u64().unwrap() as usize,
                off[1].as_u64().unwrap() as usize,
            );
            all.extend_from_slice(&data[a..b]);
            if all.len() >= max * wb {
                break;
            }
        }
    }
    all.truncate(max * wb);
    Words::from_le_bytes(width, &all).unwrap()
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let n = 1 << 20;
    let bf16 = words_of("minilm-l6-v2-bf16.safetensors", "BF16", 16, n);
    let f16 = words_of("whisper-tiny-en-f16.safetensors", "F16", 16, n);
    let f32 = words_of("easyocr-english-g2-f32.safetensors", "F32", 32, n);
    let fp8 = words_of("minilm-l6-v2-fp8-mixed.safetensors", "F8_E4M3", 8, n);
    let streams: Vec<(&str, Words)> = vec![
        ("bf16 sign u1", bf16.map_to(1, |w| w >> 15)),
        ("bf16 exp+3 u11", bf16.map_to(11, |w| (w >> 4) & 0x7ff)),
        ("bf16 low u4", bf16.map_to(4, |w| w & 0xf)),
        ("f16 exp+3 u8", f16.map_to(8, |w| (w >> 7) & 0xff)),
        ("f16 low u7", f16.map_to(7, |w| w & 0x7f)),
        ("f32 exp+3 u11", f32.map_to(11, |w| (w >> 20) & 0x7ff)),
        ("f32 low u20", f32.map_to(20, |w| w & 0xfffff)),
        ("fp8 byte u8", fp8),
    ];
    println!(
        "{:<16} {:>8} {:>7} | {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} | memcpy   (ns per word: decode / encode; bytes per word)",
        "stream", "words", "", "rans8", "rans32", "rans", "huffman", "bitpack", "raw"
    );
    let codecs = [
        CodecId::Rans8,
        CodecId::Rans32,
        CodecId::Rans,
        CodecId::Huffman,
        CodecId::BitPack,
        CodecId::Raw,
    ];
    for (label, w) in &streams {
        if !label.contains(filter.as_str()) {
            continue;
        }
        let n = w.len() as f64;
        let mut dec = Vec::new();
        let mut enc = Vec::new();
        let mut size = Vec::new();
        for &c in &codecs {
            let Some(e) = select::encode_with(c, w) else {
                dec.push("-".to_string());
                enc.push("-".to_string());
                size.push("-".to_string());
                continue;
            };
            let d = time(|| codec::decode(c, &e.body, w.width(), w.len()).unwrap());
            let t = time(|| select::encode_with(c, w));
            dec.push(format!("{:.2}", d.as_secs_f64() * 1e9 / n));
            enc.push(format!("{:.2}", t.as_secs_f64() * 1e9 / n));
            size.push(format!("{:.3}", e.body.len() as f64 / n));
        }
        let bytes: Vec<u8> = {
            let mut v = Vec::new();
            w.write_le_bytes(&mut v);
            v
        };
        let copy = time(|| bytes.clone());
        println!(
            "{label:<16} {:>8} {:>7} | {} | {:.2}",
            w.len(),
            "decode",
            dec.iter().map(|s| format!("{s:>9}")).collect::<String>(),
            copy.as_secs_f64() * 1e9 / n
        );
        println!(
            "{:<16} {:>8} {:>7} | {}",
            "",
            "",
            "encode",
            enc.iter().map(|s| format!("{s:>9}")).collect::<String>()
        );
        println!(
            "{:<16} {:>8} {:>7} | {}",
            "",
            "",
            "B/word",
            size.iter().map(|s| format!("{s:>9}")).collect::<String>()
        );
    }
}
