//! Fine-tunes made from real weights (issue 30's test data), shared by `tests/base.rs`
//! and `examples/finetunes.rs` (included with `#[path]`). Each constructor takes a
//! base checkpoint's tensors and returns a related checkpoint's, deterministically (a
//! fixed SplitMix64 stream per constructor):
//!
//! - [`lora_merge`]: a low-rank adapter merged into every matrix, `W + B·A` with rank 8,
//!   the product's standard deviation 2% of the matrix's, rounded to the dtype (how a
//!   merged LoRA fine-tune is published);
//! - [`optimizer_steps`]: three small dense steps on every float tensor, each weight
//!   moved by `lr·N(0, 1)` per step with `lr = 2e-5`, then rounded (a few steps of a
//!   full fine-tune, saved in the training dtype);
//! - [`head_only`]: every tensor identical but the last matrix, drawn afresh with the
//!   same scale (a retrained classification head);
//! - [`tied_copy`]: the base plus a copy of its largest matrix under a new name (an
//!   output projection tied to the embedding, stored twice).

#![allow(dead_code)]

use brevis::dsl::narrow::{f16_to_f32, f32_to_f16};

/// A tensor: name, dtype, shape, bytes (little-endian).
pub type Tensor = (String, String, Vec<u64>, Vec<u8>);

/// The tensors of a `.safetensors` file's bytes, in data-offset order.
pub fn tensors_of(bytes: &[u8]) -> Vec<Tensor> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out: Vec<(u64, Tensor)> = header
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| {
            let off = &v["data_offsets"];
            let (b, e) = (off[0].as_u64().unwrap(), off[1].as_u64().unwrap());
            let shape = v["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            let dtype = v["dtype"].as_str().unwrap().to_string();
            (
                b,
                (
                    k.clone(),
                    dtype,
                    shape,
                    data[b as usize..e as usize].to_vec(),
                ),
            )
        })
        .collect();
    out.sort_by_key(|(b, _)| *b);
    out.into_iter().map(|(_, t)| t).collect()
}

/// SplitMix64, and standard normal deviates by Box-Muller.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

/// Whether `dtype` is a float type these constructors change.
pub fn is_float(dtype: &str) -> bool {
    matches!(dtype, "BF16" | "F16" | "F32")
}

/// The values of a float tensor's bytes.
pub fn values(dtype: &str, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        "BF16" => bytes
            .chunks_exact(2)
            .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
            .collect(),
        "F16" => bytes
            .chunks_exact(2)
            .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        "F32" => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        d => panic!("not a float dtype: {d}"),
    }
}

/// `f32` to BF16 bits, rounding to nearest even (NaN kept quiet).
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// Float values as a tensor's bytes of `dtype`, rounded to nearest even.
pub fn bytes_of(dtype: &str, v: &[f32]) -> Vec<u8> {
    match dtype {
        "BF16" => v.iter().flat_map(|&x| to_bf16(x).to_le_bytes()).collect(),
        "F16" => v
            .iter()
            .flat_map(|&x| f32_to_f16(x.to_bits()).to_le_bytes())
            .collect(),
        "F32" => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        d => panic!("not a float dtype: {d}"),
    }
}

fn std_dev(v: &[f32]) -> f32 {
    let n = v.len().max(1) as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    var.sqrt() as f32
}

fn is_matrix(t: &Tensor) -> bool {
    is_float(&t.1) && t.2.len() == 2 && t.2[0] >= 16 && t.2[1] >= 16
}

/// `W + B·A` on every matrix (rank 8, the product's deviation 2% of the matrix's).
pub fn lora_merge(base: &[Tensor]) -> Vec<Tensor> {
    let mut rng = Rng::new(0x104a);
    let rank = 8usize;
    base.iter()
        .map(|t| {
            if !is_matrix(t) {
                return t.clone();
            }
            let (rows, cols) = (t.2[0] as usize, t.2[1] as usize);
            let mut w = values(&t.1, &t.3);
            let s = std_dev(&w);
            // std(B·A) = sqrt(rank) * sa * sb; take sa = sb.
            let each = (0.02 * s / (rank as f32).sqrt()).sqrt();
            let b: Vec<f32> = (0..rows * rank).map(|_| rng.normal() * each).collect();
            let a: Vec<f32> = (0..rank * cols).map(|_| rng.normal() * each).collect();
            for i in 0..rows {
                for j in 0..cols {
                    let mut d = 0f32;
                    for k in 0..rank {
                        d += b[i * rank + k] * a[k * cols + j];
                    }
                    w[i * cols + j] += d;
                }
            }
            (t.0.clone(), t.1.clone(), t.2.clone(), bytes_of(&t.1, &w))
        })
        .collect()
}

/// Three steps of `lr·N(0, 1)` on every float tensor with `lr = 2e-5` (Adam's steps are
/// about `lr` in size whatever the weight's scale), rounded to the dtype.
pub fn optimizer_steps(base: &[Tensor]) -> Vec<Tensor> {
    let mut rng = Rng::new(0xada4);
    let lr = 2e-5f32;
    base.iter()
        .map(|t| {
            if !is_float(&t.1) || t.3.is_empty() {
                return t.clone();
            }
            let mut w = values(&t.1, &t.3);
            for x in &mut w {
                for _ in 0..3 {
                    *x += lr * rng.normal();
                }
            }
            (t.0.clone(), t.1.clone(), t.2.clone(), bytes_of(&t.1, &w))
        })
        .collect()
}

/// Every tensor identical but the last matrix, drawn afresh with its deviation.
pub fn head_only(base: &[Tensor]) -> Vec<Tensor> {
    let mut rng = Rng::new(0x4ead);
    let last = base.iter().rposition(is_matrix).expect("a matrix");
    base.iter()
        .enumerate()
        .map(|(i, t)| {
            if i != last {
                return t.clone();
            }
            let s = std_dev(&values(&t.1, &t.3));
            let n = t.2.iter().product::<u64>() as usize;
            let w: Vec<f32> = (0..n).map(|_| rng.normal() * s).collect();
            (t.0.clone(), t.1.clone(), t.2.clone(), bytes_of(&t.1, &w))
        })
        .collect()
}

/// The base plus a copy of its largest matrix named `lm_head.weight` (tied, stored twice).
pub fn tied_copy(base: &[Tensor]) -> Vec<Tensor> {
    let largest = base
        .iter()
        .filter(|t| is_matrix(t))
        .max_by_key(|t| t.3.len())
        .expect("a matrix")
        .clone();
    let mut out = base.to_vec();
    out.push((
        "lm_head.weight".to_string(),
        largest.1,
        largest.2,
        largest.3,
    ));
    out
}

/// The constructions, by name, in the order the README lists them.
pub const KINDS: [&str; 4] = ["lora-merge", "optimizer-steps", "head-only", "tied-copy"];

/// The fine-tune of kind `kind` (one of [`KINDS`]) of `base`.
pub fn make(kind: &str, base: &[Tensor]) -> Vec<Tensor> {
    match kind {
        "lora-merge" => lora_merge(base),
        "optimizer-steps" => optimizer_steps(base),
        "head-only" => head_only(base),
        "tied-copy" => tied_copy(base),
        k => panic!("unknown kind {k}"),
    }
}

/// BitX (ZipLLM, NSDI 2026, §4): each fine-tune tensor XORed with its base counterpart
/// (same name, dtype and length; a tensor with none is taken as it is), the XOR words
/// split into byte planes (for 16-bit words, ZipLLM's exponent byte and sign+mantissa
/// byte: bits 14..7 and bit 15 with bits 6..0 of BF16; the high and low bytes of other
/// widths), each plane of each tensor compressed with zstd at level 3. Returns the total
/// compressed bytes (headers not counted).
pub fn bitx_bytes(fine: &[Tensor], base: &[Tensor]) -> u64 {
    let mut total = 0u64;
    for t in fine {
        let other = base
            .iter()
            .find(|b| b.0 == t.0 && b.1 == t.1 && b.3.len() == t.3.len());
        let x: Vec<u8> = match other {
            Some(b) => t.3.iter().zip(&b.3).map(|(p, q)| p ^ q).collect(),
            None => t.3.clone(),
        };
        let width = match t.1.as_str() {
            "BF16" | "F16" | "I16" | "U16" => 2,
            "F32" | "I32" | "U32" => 4,
            "F64" | "I64" | "U64" => 8,
            _ => 1,
        };
        let planes: Vec<Vec<u8>> = if t.1 == "BF16" {
            let (mut e, mut sm) = (Vec::new(), Vec::new());
            for c in x.chunks_exact(2) {
                let w = u16::from_le_bytes([c[0], c[1]]);
                e.push(((w >> 7) & 0xff) as u8);
                sm.push((((w >> 15) << 7) | (w & 0x7f)) as u8);
            }
            vec![e, sm]
        } else {
            (0..width)
                .map(|k| x.iter().skip(k).step_by(width).copied().collect())
                .collect()
        };
        for p in planes {
            total += zstd::bulk::compress(&p, 3).expect("zstd").len() as u64;
        }
    }
    total
}
