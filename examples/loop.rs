//! Profiling loop (not shipped): `loop c|d FILE N [LEVEL]` compresses (c) or decompresses
//! (d) FILE in memory N times with one worker at LEVEL (fast, default or max; default
//! when not given), for `perf record`.
use brevis::archive::{no_progress, writer::write_archive, Archive, CompressOptions};
use std::path::Path;

fn main() {
    brevis::keep_freed_memory();
    let args: Vec<String> = std::env::args().collect();
    let (mode, path, n) = (
        &args[1],
        Path::new(&args[2]),
        args[3].parse::<usize>().unwrap(),
    );
    let bytes = std::fs::read(path).unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let level = match args.get(4).map(String::as_str) {
        Some("fast") => brevis::synth::Level::Fast,
        Some("max") => brevis::synth::Level::Max,
        _ => brevis::synth::Level::Default,
    };
    let mut opts = CompressOptions {
        jobs: Some(1),
        verify: false,
        ..CompressOptions::default()
    };
    opts.search.level = level;
    opts.search.budget = level.budget();
    let mut out = Vec::new();
    write_archive(&src, &mut out, &opts, &no_progress, path).unwrap();
    let t = std::time::Instant::now();
    if mode == "c" {
        let mut v = Vec::new();
        for _ in 0..n {
            let t = std::time::Instant::now();
            let mut o = Vec::with_capacity(bytes.len() / 2);
            write_archive(&src, &mut o, &opts, &no_progress, path).unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        eprintln!("{:.2?}", &v[..v.len().min(20)]);
    } else {
        let archive = Archive::from_bytes(out, path).unwrap();
        let mut v = Vec::new();
        for _ in 0..n {
            let t = std::time::Instant::now();
            archive
                .write_original(&mut std::io::sink(), Some(1), &no_progress, path)
                .unwrap();
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        eprintln!("{:.2?}", &v[..v.len().min(20)]);
    }
    let s = t.elapsed().as_secs_f64() / n as f64;
    eprintln!(
        "{:.3} ms/run, {:.1} MB/s",
        s * 1e3,
        bytes.len() as f64 / s / 1e6
    );
}
