//! Encoder probe (not shipped): `enc` prints the nanoseconds a symbol of
//! `rans8::Plan::encode` (the best of 15 runs, one thread) on the first 2^22 words of
//! minilm's BF16 exponent-and-top-3 field and of its FP8 bytes, for A/B runs of the
//! SIMD field encoders (docs/bench.md, session 33).
use brevis::codec::rans8::Plan;
use brevis::codec::Stream;
use brevis::tensor::Dtype;
use brevis::Words;
use std::time::Instant;

/// The first `max` words of the `dtype` tensors of `path`.
fn words_of(path: &str, dtype: Dtype, width: u32, max: usize) -> Words {
    let bytes = std::fs::read(path).unwrap();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let mut all = Vec::new();
    for (i, t) in src.tensors().iter().enumerate() {
        if t.dtype == dtype {
            all.extend_from_slice(src.tensor_bytes(i));
        }
    }
    all.truncate(max * (width as usize / 8));
    Words::from_le_bytes(width, &all).unwrap()
}

fn main() {
    let c = "../shared/corpus";
    let n = 1 << 22;
    let bf16 = words_of(
        &format!("{c}/minilm-l6-v2-bf16.safetensors"),
        Dtype::BF16,
        16,
        n,
    );
    let fp8 = words_of(
        &format!("{c}/minilm-l6-v2-fp8-mixed.safetensors"),
        Dtype::F8E4M3,
        8,
        n,
    );
    for (label, w, shift, width) in [("bf16 exp+3", &bf16, 4u32, 11u32), ("fp8 byte", &fp8, 0, 8)] {
        let field = w.map_to(width, |x| (x >> shift) & ((1 << width) - 1));
        let hist = brevis::stats::histogram(&field, 1 << 20).unwrap();
        let plan = Plan::new(&hist, width, w.len()).unwrap();
        let mut best = f64::MAX;
        for _ in 0..15 {
            let mut out = Vec::new();
            let t = Instant::now();
            plan.encode(
                Stream::Field {
                    words: w,
                    shift,
                    width,
                },
                &mut out,
            );
            best = best.min(t.elapsed().as_secs_f64());
            std::hint::black_box(&out);
        }
        println!(
            "{label:12} {} words {:.3} ns a symbol",
            w.len(),
            best * 1e9 / w.len() as f64
        );
    }
}
