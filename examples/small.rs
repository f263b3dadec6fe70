//! Profiling loop (not shipped): `small FILE MAXB N [NAME]` searches every tensor of FILE
//! under MAXB bytes (whose name contains NAME, when given) N times, at the default level,
//! for `perf record`; `LEVEL=fast` (or `max`) at that level instead.
use brevis::synth::{synthesize_matrix, Prior, SearchOptions};
use brevis::tensor::Words;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).unwrap();
    let maxb: usize = args[2].parse().unwrap();
    let reps: usize = args[3].parse().unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let mut ts = vec![];
    for (i, t) in src.tensors().iter().enumerate() {
        let data = src.tensor_bytes(i);
        if data.len() > maxb
            || data.is_empty()
            || args.get(4).is_some_and(|f| !t.name.contains(f.as_str()))
        {
            continue;
        }
        let rows = (t.shape.len() >= 2).then(|| t.shape[0]);
        let words = Words::from_le_bytes(t.dtype.word_bits(), data).unwrap();
        ts.push((rows, t.dtype, Arc::new(words)));
    }
    let mut opts = SearchOptions::default();
    opts.level = match std::env::var("LEVEL").as_deref() {
        Ok("fast") => brevis::synth::Level::Fast,
        Ok("max") => brevis::synth::Level::Max,
        _ => brevis::synth::Level::Default,
    };
    opts.budget = opts.level.budget();
    let prior = Prior::uniform();
    let t0 = Instant::now();
    let mut total = 0u64;
    let mut inb = 0usize;
    for _ in 0..reps {
        for (rows, d, w) in &ts {
            total += synthesize_matrix(w, Some(*d), *rows, &opts, &prior).bytes;
            inb += w.len() * w.width().div_ceil(8) as usize;
        }
    }
    let s = t0.elapsed().as_secs_f64();
    if std::env::var_os("PER").is_some() {
        for (rows, d, w) in &ts {
            let t = Instant::now();
            let mut b = 0;
            for _ in 0..reps {
                b = synthesize_matrix(w, Some(*d), *rows, &opts, &prior).bytes;
            }
            eprintln!(
                "{:8} words {:?} -> {:8} bytes {:8.1} us",
                w.len(),
                rows,
                b,
                t.elapsed().as_secs_f64() * 1e6 / reps as f64
            );
        }
    }
    eprintln!(
        "{} tensors, {} bytes -> {} ; {:.1} us per tensor, {:.2} MB/s",
        ts.len(),
        inb / reps,
        total / reps as u64,
        s * 1e6 / (ts.len() * reps) as f64,
        inb as f64 / s / 1e6
    );
}
