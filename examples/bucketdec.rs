//! Probe (not shipped): `bucketdec BASE FT N` codes every 16-bit tensor of FT as its XOR
//! with BASE's tensor of the same name in the bucket codec against the base's exponent,
//! then times `bucket::decode_combined` of them all N times beside a copy of the bytes.
use brevis::codec::bucket::{self, Combine, Context, Field, Params};
use brevis::tensor::Words;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bb, fb) = (
        std::fs::read(&args[1]).unwrap(),
        std::fs::read(&args[2]).unwrap(),
    );
    let n: usize = args[3].parse().unwrap();
    let (base, ft) = (
        brevis::archive::safetensors::parse(&bb).unwrap(),
        brevis::archive::safetensors::parse(&fb).unwrap(),
    );
    let mut jobs = vec![];
    for (i, t) in ft.tensors().iter().enumerate() {
        if t.dtype.word_bits() != 16 {
            continue;
        }
        let Some(j) = base.tensors().iter().position(|b| b.name == t.name) else {
            continue;
        };
        let (fw, bw) = (ft.tensor_bytes(i), base.tensor_bytes(j));
        if fw.len() != bw.len() || fw.len() < 4096 {
            continue;
        }
        let x: Vec<u8> = fw.iter().zip(bw).map(|(a, b)| a ^ b).collect();
        let words = Words::from_le_bytes(16, &x).unwrap();
        let ctx = Words::from_le_bytes(16, bw).unwrap();
        let field = if args.get(4).is_some_and(|s| s == "bf16") {
            Field { shift: 7, width: 8 }
        } else {
            Field {
                shift: 10,
                width: 5,
            }
        };
        let body = bucket::encode(
            &words,
            Params {
                zigzag: false,
                context: Some((
                    Context {
                        words: &ctx,
                        start: 0,
                    },
                    field,
                )),
            },
        );
        jobs.push((body, bw.to_vec(), fw.to_vec()));
    }
    let words: usize = jobs.iter().map(|j| j.1.len() / 2).sum();
    let bytes: usize = jobs.iter().map(|j| j.0.len()).sum();
    let mut out = Vec::new();
    for (b, base, want) in &jobs {
        out.clear();
        bucket::decode_combined(b, 16, base.len() / 2, base, Combine::Xor, &mut out).unwrap();
        assert_eq!(&out, want);
    }
    let t = Instant::now();
    for _ in 0..n {
        for (b, base, _) in &jobs {
            out.clear();
            bucket::decode_combined(b, 16, base.len() / 2, base, Combine::Xor, &mut out).unwrap();
        }
    }
    let s = t.elapsed().as_secs_f64() / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        for (_, base, _) in &jobs {
            out.clear();
            out.extend_from_slice(base);
        }
    }
    let c = t.elapsed().as_secs_f64() / n as f64;
    eprintln!(
        "{} tensors, {} words, body {} bytes: decode {:.2} ms, {:.3} ns/word; copy {:.3} ns/word",
        jobs.len(),
        words,
        bytes,
        s * 1e3,
        s * 1e9 / words as f64,
        c * 1e9 / words as f64
    );
}
