//! Probe (not shipped): `histo FILE NAME N` times `stats::histogram` of one tensor's words.
use brevis::tensor::Words;
use std::time::Instant;

fn main() {
    if std::env::var_os("KEEP").is_some() {
        brevis::keep_freed_memory();
    }
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let n: usize = args[3].parse().unwrap();
    for (i, t) in src.tensors().iter().enumerate() {
        if !t.name.contains(args[2].as_str()) {
            continue;
        }
        let w = Words::from_le_bytes(t.dtype.word_bits(), src.tensor_bytes(i)).unwrap();
        let t0 = Instant::now();
        let mut d = 0;
        for _ in 0..n {
            d = brevis::stats::histogram(&w, usize::MAX).unwrap().len();
        }
        let s = t0.elapsed().as_secs_f64() / n as f64;
        eprintln!(
            "{} {} words, {} distinct: {:.1} us, {:.2} ns/word",
            t.name,
            w.len(),
            d,
            s * 1e6,
            s * 1e9 / w.len() as f64
        );
    }
}
