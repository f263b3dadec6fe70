//! Probe (not shipped): `pack [N]` times the fast level's field packing
//! (`bitpack::encode_k_stream` of one field of BF16-like words) in ns a word, beside a
//! copy of the words, best of 15 runs.
use brevis::codec::{bitpack, Stream};
use brevis::tensor::Words;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1 << 20, |a| a.parse().expect("a word count"));
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let words = Words::from_fn(16, n, |_| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        seed >> 48
    });
    let best = |f: &mut dyn FnMut()| {
        (0..15)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e9 / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    };
    let mut out = Vec::new();
    let copy = best(&mut || {
        out.clear();
        words.write_le_bytes(&mut out);
        std::hint::black_box(&out);
    });
    println!("copy of the words: {copy:.3} ns a word");
    for (shift, width) in [(15, 1), (0, 4), (0, 5), (0, 6), (0, 7), (0, 3), (8, 8)] {
        let stream = Stream::Field {
            words: &words,
            shift,
            width,
        };
        let t = best(&mut || {
            out.clear();
            bitpack::encode_k_stream(stream, width, &mut out);
            std::hint::black_box(&out);
        });
        println!(
            "field [{shift}, {}) at {width} bits: {t:.3} ns a word",
            shift + width
        );
    }
}
