//! Scratch probe (not shipped): synthesize every tensor of a file, print totals.
use brevis::synth::{synthesize, SearchOptions};
use brevis::tensor::{Dtype, Words};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[1];
    let budget: u64 = args.get(2).map_or(1, |s| s.parse().unwrap());
    let verbose = args.get(3).is_some();
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut total_in = 0u64;
    let mut total_out = 0u64;
    let t0 = Instant::now();
    let mut ops = std::collections::BTreeMap::<String, (u64, u64)>::new();
    for (name, v) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        let dtype = Dtype::from_name(v["dtype"].as_str().unwrap()).unwrap();
        let off = v["data_offsets"].as_array().unwrap();
        let (b, e) = (
            off[0].as_u64().unwrap() as usize,
            off[1].as_u64().unwrap() as usize,
        );
        let words = Words::from_le_bytes(dtype.word_bits(), &data[b..e]).unwrap();
        let t = Instant::now();
        let s = synthesize(
            &words,
            Some(dtype),
            &SearchOptions {
                budget,
                ..Default::default()
            },
        );
        total_in += (e - b) as u64;
        total_out += s.bytes;
        let key = brevis::dsl::text::node_label(&s.program);
        let ent = ops.entry(key).or_default();
        ent.0 += (e - b) as u64;
        ent.1 += s.bytes;
        if verbose {
            println!(
                "{name:60} {dtype:6} {:>10} -> {:>10} {:6.2}% {:?}\n{}",
                e - b,
                s.bytes,
                100.0 * (1.0 - s.bytes as f64 / (e - b) as f64),
                t.elapsed(),
                s.program
            );
        }
    }
    let el = t0.elapsed();
    for (k, (i, o)) in ops {
        println!(
            "  {k:30} {i:>12} -> {o:>12} {:6.2}%",
            100.0 * (1.0 - o as f64 / i as f64)
        );
    }
    println!("{path}: tensors {total_in} -> {total_out}  reduction {:.3}%  (file {} bytes, header {n})  {:.2}s  {:.1} MB/s",
        100.0 * (1.0 - total_out as f64 / total_in as f64), bytes.len(), el.as_secs_f64(), total_in as f64 / el.as_secs_f64() / 1e6);
}
