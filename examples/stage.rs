//! Probe (not shipped): `stage histogram|parse FILE NAME N` times one stage of the search
//! N times on each tensor of FILE whose name contains NAME: `stats::histogram` of its
//! words, or the match finder (`backref::parse`), and prints what it found. `KEEP=1`
//! keeps freed memory as the CLI does (`keep_freed_memory`).
use brevis::tensor::Words;
use std::time::Instant;

fn main() {
    if std::env::var_os("KEEP").is_some() {
        brevis::keep_freed_memory();
    }
    let args: Vec<String> = std::env::args().collect();
    let stage = args[1].as_str();
    let bytes = std::fs::read(&args[2]).unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let n: usize = args[4].parse().unwrap();
    for (i, t) in src.tensors().iter().enumerate() {
        if !t.name.contains(args[3].as_str()) {
            continue;
        }
        let w = Words::from_le_bytes(t.dtype.word_bits(), src.tensor_bytes(i)).unwrap();
        let found = match stage {
            "histogram" => {
                let d = brevis::stats::histogram(&w, usize::MAX).unwrap().len();
                format!("{d} distinct")
            }
            "parse" => {
                let p = brevis::synth::backref::parse(&w);
                format!("{} matched, {} tokens", p.matched, p.runs.len())
            }
            _ => panic!("the stage is histogram or parse"),
        };
        let t0 = Instant::now();
        for _ in 0..n {
            match stage {
                "histogram" => drop(std::hint::black_box(brevis::stats::histogram(
                    &w,
                    usize::MAX,
                ))),
                _ => drop(std::hint::black_box(brevis::synth::backref::parse(&w))),
            }
        }
        let s = t0.elapsed().as_secs_f64() / n as f64;
        eprintln!(
            "{}: {} words, {found}: {:.1} us, {:.2} ns/word",
            t.name,
            w.len(),
            s * 1e6,
            s * 1e9 / w.len() as f64
        );
    }
}
