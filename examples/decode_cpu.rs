//! Scratch benchmark: decode archives in memory (`write_original` to a sink), one
//! worker, and print the best wall time and the best process CPU time (all threads,
//! `getrusage`) per run: CPU time is what a loaded machine distorts least.
use brevis::archive::{no_progress, Archive};
use std::path::Path;
use std::time::Instant;

fn cpu() -> f64 {
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(r.ru_utime) + t(r.ru_stime)
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap();
        let a = Archive::from_bytes(bytes, Path::new(&path)).unwrap();
        let n = a.original_len() as f64;
        let (mut bw, mut bc) = (f64::MAX, f64::MAX);
        for _ in 0..runs {
            let (w0, c0) = (Instant::now(), cpu());
            a.write_original(&mut std::io::sink(), Some(1), &no_progress, Path::new("x"))
                .unwrap();
            bw = bw.min(w0.elapsed().as_secs_f64());
            bc = bc.min(cpu() - c0);
        }
        println!(
            "{:<45} wall {:7.1} MB/s  cpu {:7.1} MB/s",
            Path::new(&path).file_name().unwrap().to_string_lossy(),
            n / bw / 1e6,
            n / bc / 1e6
        );
    }
}
