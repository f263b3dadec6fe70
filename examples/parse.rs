//! Probe (not shipped): `parse FILE NAME N` times the match finder (`backref::parse`) on
//! each tensor whose name contains NAME, N times, and prints what it found.
use brevis::tensor::Words;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let n: usize = args[3].parse().unwrap();
    for (i, t) in src.tensors().iter().enumerate() {
        if !t.name.contains(args[2].as_str()) {
            continue;
        }
        let w = Words::from_le_bytes(t.dtype.word_bits(), src.tensor_bytes(i)).unwrap();
        let p = brevis::synth::backref::parse(&w);
        let t0 = Instant::now();
        for _ in 0..n {
            std::hint::black_box(brevis::synth::backref::parse(&w));
        }
        let s = t0.elapsed().as_secs_f64() / n as f64;
        eprintln!(
            "{}: {} words, {} matched, {} tokens: {:.2} ms, {:.1} ns/word",
            t.name,
            w.len(),
            p.matched,
            p.runs.len(),
            s * 1e3,
            s * 1e9 / w.len() as f64
        );
    }
}
