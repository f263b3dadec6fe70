//! Profiling loop (not shipped): `small FILE MAXB N [NAME]` searches every tensor of FILE
//! under MAXB bytes (whose name contains NAME, when given) N times, at the default level,
//! for `perf record`.
use brevis::synth::{synthesize_matrix, Prior, SearchOptions};
use brevis::tensor::{Dtype, Words};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).unwrap();
    let maxb: usize = args[2].parse().unwrap();
    let reps: usize = args[3].parse().unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut ts = vec![];
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
        if e - b > maxb || e == b || args.get(4).is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let shape = v["shape"].as_array().unwrap();
        let rows = (shape.len() >= 2).then(|| shape[0].as_u64().unwrap());
        ts.push((
            rows,
            name.clone(),
            dtype,
            Arc::new(Words::from_le_bytes(dtype.word_bits(), &data[b..e]).unwrap()),
        ));
    }
    let opts = SearchOptions::default();
    let prior = Prior::uniform();
    let t0 = Instant::now();
    let mut total = 0u64;
    let mut inb = 0usize;
    for _ in 0..reps {
        for (rows, _, d, w) in &ts {
            total += synthesize_matrix(w, Some(*d), *rows, &opts, &prior).bytes;
            inb += w.len() * w.width().div_ceil(8) as usize;
        }
    }
    let s = t0.elapsed().as_secs_f64();
    eprintln!(
        "{} tensors, {} bytes -> {} ; {:.1} us per tensor, {:.2} MB/s",
        ts.len(),
        inb / reps,
        total / reps as u64,
        s * 1e6 / (ts.len() * reps) as f64,
        inb as f64 / s / 1e6
    );
}
