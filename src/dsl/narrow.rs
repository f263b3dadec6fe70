//! The narrow float formats of `dequant` and their exact arithmetic (issue 29: values
//! of a narrower format hidden in a wider dtype).
//!
//! A `dequant` node recomputes each output word bit for bit from a code (8 bits: FP8
//! E4M3 or E5M2; 16 bits: F16 or BF16, wire version 4) and a scale, exactly as a
//! dequantizing script does in `float32`:
//!
//! 1. the code's value `x` as an `f32`: [`Code::value`] (every E4M3, E5M2, F16 and
//!    BF16 value is exact in `f32`);
//! 2. the product `p = x * s` of `f32`s, with `s = f32::from_bits(scale)`, rounded to
//!    nearest, ties to even (IEEE 754 binary32 multiplication);
//! 3. `p` rounded to the output format, to nearest, ties to even ([`Out::round`]); a
//!    product that is NaN gives the format's canonical quiet NaN (positive, payload
//!    `0b10...0`), whatever its sign or payload, so the result never depends on the
//!    machine's NaN propagation.
//!
//! A `dequant` without scales (a cast, 16-bit codes only) takes every scale as `1.0`:
//! step 2 is then exact (`x * 1.0 = x` for every non-NaN `x`, signed zeros and
//! subnormals included), so a cast to `F32` is the exact upcast `codes.float()` but for
//! NaN payloads.
//!
//! This is `(codes.float() * scales).to(bfloat16)` in PyTorch (step 3 there too rounds
//! to nearest even; its NaN handling differs only in the payload), and the dequantization
//! of FP8 checkpoints with per-row or per-block scales (OCP 8-bit floating point
//! specification, 2023, for the E4M3 and E5M2 encodings).

/// The code formats: 8-bit (OCP FP8) and 16-bit (IEEE binary16, bfloat16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// Sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; `S.1111.111` is
    /// NaN; largest finite 448.
    E4M3,
    /// Sign, 5 exponent bits (bias 15), 2 mantissa bits: the top byte of an IEEE
    /// binary16, infinities and NaNs included; largest finite 57,344.
    E5M2,
    /// IEEE binary16: sign, 5 exponent bits (bias 15), 10 mantissa bits (wire
    /// version 4).
    F16,
    /// bfloat16, the top half of a binary32: sign, 8 exponent bits, 7 mantissa bits
    /// (wire version 4).
    BF16,
}

impl Code {
    /// The value of code `c` (its low [`Code::width`] bits) as an `f32`, exactly. E4M3
    /// NaN codes give `f32::NAN` with the code's sign; F16 and BF16 NaNs keep sign and
    /// payload (shifted into the wider mantissa).
    pub fn value(self, c: u16) -> f32 {
        match self {
            Code::F16 => return f16_to_f32(c),
            Code::BF16 => return f32::from_bits(u32::from(c) << 16),
            Code::E4M3 | Code::E5M2 => {}
        }
        let c = c as u8;
        let sign = if c & 0x80 != 0 { -1.0f32 } else { 1.0 };
        match self {
            Code::E4M3 => {
                let (e, m) = (i32::from((c >> 3) & 0xf), f32::from(c & 7));
                if e == 15 && m == 7.0 {
                    return f32::NAN.copysign(sign);
                }
                let mag = if e == 0 {
                    m * (-9f32).exp2()
                } else {
                    (8.0 + m) * ((e - 10) as f32).exp2()
                };
                sign * mag
            }
            Code::E5M2 => f16_to_f32(u16::from(c) << 8),
            Code::F16 | Code::BF16 => unreachable!("returned above"),
        }
    }

    /// The values of [`Code::value`] of codes `0..256`, by code (all the codes of an
    /// 8-bit format).
    pub fn table(self) -> [f32; 256] {
        std::array::from_fn(|c| self.value(c as u16))
    }

    /// Bits per code: 8 (E4M3, E5M2) or 16 (F16, BF16).
    pub fn width(self) -> u32 {
        match self {
            Code::E4M3 | Code::E5M2 => 8,
            Code::F16 | Code::BF16 => 16,
        }
    }

    /// The largest finite magnitude.
    pub fn max(self) -> f32 {
        match self {
            Code::E4M3 => 448.0,
            Code::E5M2 => 57_344.0,
            Code::F16 => 65_504.0,
            Code::BF16 => f32::from_bits(0x7F7F_0000),
        }
    }

    /// Stable number on the wire (0 E4M3, 1 E5M2, 2 F16, 3 BF16; 2 and 3 need wire
    /// version 4).
    pub fn id(self) -> u8 {
        match self {
            Code::E4M3 => 0,
            Code::E5M2 => 1,
            Code::F16 => 2,
            Code::BF16 => 3,
        }
    }

    /// Inverse of [`Code::id`].
    pub fn from_id(id: u8) -> Option<Code> {
        match id {
            0 => Some(Code::E4M3),
            1 => Some(Code::E5M2),
            2 => Some(Code::F16),
            3 => Some(Code::BF16),
            _ => None,
        }
    }

    /// Lowercase name (`e4m3`, `e5m2`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Code::E4M3 => "e4m3",
            Code::E5M2 => "e5m2",
            Code::F16 => "f16",
            Code::BF16 => "bf16",
        }
    }

    /// The dtype whose words these codes are (`F8_E4M3`, `F8_E5M2`, `F16`, `BF16`): what
    /// the search reads a codes hole as.
    pub fn dtype(self) -> crate::tensor::Dtype {
        use crate::tensor::Dtype;
        match self {
            Code::E4M3 => Dtype::F8E4M3,
            Code::E5M2 => Dtype::F8E5M2,
            Code::F16 => Dtype::F16,
            Code::BF16 => Dtype::BF16,
        }
    }
}

/// The output formats: the tensor's dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Out {
    /// bfloat16: the top half of a binary32.
    Bf16,
    /// IEEE binary16.
    F16,
    /// IEEE binary32 (step 3 is then the identity).
    F32,
}

impl Out {
    /// Bits per word: 16, 16, 32.
    pub fn width(self) -> u32 {
        match self {
            Out::Bf16 | Out::F16 => 16,
            Out::F32 => 32,
        }
    }

    /// `p` rounded to this format, to nearest, ties to even; overflow gives infinity;
    /// NaN gives the canonical quiet NaN (`0x7FC0`, `0x7E00`, `0x7FC0_0000`).
    pub fn round(self, p: f32) -> u64 {
        if p.is_nan() {
            return match self {
                Out::Bf16 => 0x7FC0,
                Out::F16 => 0x7E00,
                Out::F32 => 0x7FC0_0000,
            };
        }
        let b = p.to_bits();
        match self {
            Out::Bf16 => u64::from((b + 0x7FFF + ((b >> 16) & 1)) >> 16),
            Out::F16 => u64::from(f32_to_f16(b)),
            Out::F32 => u64::from(b),
        }
    }

    /// The value of word `w` of this format as an `f32` (exact).
    pub fn value(self, w: u64) -> f32 {
        match self {
            Out::Bf16 => f32::from_bits((w as u32) << 16),
            Out::F16 => f16_to_f32(w as u16),
            Out::F32 => f32::from_bits(w as u32),
        }
    }

    /// Stable number on the wire (0 bfloat16, 1 binary16, 2 binary32).
    pub fn id(self) -> u8 {
        match self {
            Out::Bf16 => 0,
            Out::F16 => 1,
            Out::F32 => 2,
        }
    }

    /// Inverse of [`Out::id`].
    pub fn from_id(id: u8) -> Option<Out> {
        match id {
            0 => Some(Out::Bf16),
            1 => Some(Out::F16),
            2 => Some(Out::F32),
            _ => None,
        }
    }

    /// Lowercase name (`bf16`, `f16`, `f32`).
    pub fn name(self) -> &'static str {
        match self {
            Out::Bf16 => "bf16",
            Out::F16 => "f16",
            Out::F32 => "f32",
        }
    }
}

/// An IEEE binary16 as an `f32`, exactly (subnormals, infinities; a NaN keeps its sign
/// and payload, shifted into the wider mantissa).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let (e, m) = (u32::from((h >> 10) & 0x1f), u32::from(h & 0x3ff));
    let bits = match e {
        0 if m == 0 => sign,
        0 => {
            // Subnormal: m * 2^-24, normalized.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((113 - shift) << 23) | (m << 13)
        }
        31 => sign | 0x7F80_0000 | (m << 13),
        _ => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// The binary32 with bits `x` rounded to binary16, to nearest, ties to even (overflow
/// to infinity, underflow through the subnormals to zero; a NaN becomes a quiet NaN
/// with the top of its payload).
pub fn f32_to_f16(x: u32) -> u16 {
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    if exp == 0 {
        // Below 2^-126: far under half the smallest subnormal.
        return sign;
    }
    let e = exp - 112;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let round = |v: u32, shift: u32| -> u32 {
        let (q, rem, half) = (v >> shift, v & ((1 << shift) - 1), 1 << (shift - 1));
        q + u32::from(rem > half || (rem == half && q & 1 == 1))
    };
    if e <= 0 {
        let shift = (14 - e) as u32;
        if shift > 24 {
            return sign;
        }
        return sign | round(man | 0x80_0000, shift) as u16;
    }
    // A carry out of the mantissa steps the exponent (to infinity at the top).
    sign | round(((e as u32) << 23) | man, 13) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_values_of_worked_codes() {
        let t = Code::E4M3.table();
        assert_eq!(t[0x00], 0.0);
        assert_eq!(t[0x01], 2f32.powi(-9));
        assert_eq!(t[0x08], 2f32.powi(-6));
        assert_eq!(t[0x38], 1.0);
        assert_eq!(t[0x7E], 448.0);
        assert_eq!(t[0xFE], -448.0);
        assert!(t[0x7F].is_nan() && t[0xFF].is_nan());
        assert_eq!(Code::E5M2.value(0x3C), 1.0);
        assert_eq!(Code::E5M2.value(0x7B), 57_344.0);
        assert_eq!(Code::E5M2.value(0x7C), f32::INFINITY);
    }

    /// binary16 <-> binary32 against every binary16 word, and rounding worked examples.
    #[test]
    fn f16_conversions_are_exact_and_round_to_nearest_even() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert_eq!(f32_to_f16(f.to_bits()) & 0x7e00, 0x7e00);
            } else {
                assert_eq!(f32_to_f16(f.to_bits()), h, "{h:#06x}");
            }
        }
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even (1).
        assert_eq!(f32_to_f16((1.0f32 + 2f32.powi(-11)).to_bits()), 0x3c00);
        assert_eq!(
            f32_to_f16((1.0f32 + 3.0 * 2f32.powi(-11)).to_bits()),
            0x3c02
        );
        assert_eq!(f32_to_f16(65_520f32.to_bits()), 0x7c00);
        assert_eq!(f32_to_f16(2f32.powi(-25).to_bits()), 0x0000);
        assert_eq!(f32_to_f16((1.5 * 2f32.powi(-25)).to_bits()), 0x0001);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(Out::Bf16.round(1.0), 0x3F80);
        // 1 + 2^-8 ties between 1 and 1 + 2^-7: to even.
        assert_eq!(Out::Bf16.round(1.0 + 2f32.powi(-8)), 0x3F80);
        assert_eq!(Out::Bf16.round(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert_eq!(Out::Bf16.round(f32::NAN), 0x7FC0);
        assert_eq!(Out::Bf16.round(f32::MAX), 0x7F80);
    }
}
