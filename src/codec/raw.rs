//! Raw words: each word in `ceil(b/8)` little-endian bytes. No parameters.

use super::CodecError;
use crate::tensor::{container_bytes, mask, Words};

const NAME: &str = "raw";

/// Exact body size in bytes for `n` words of `width` bits.
pub fn size(width: u32, n: usize) -> u64 {
    n as u64 * width.div_ceil(8) as u64
}

/// Appends the body for `words`.
pub fn encode(words: &Words, out: &mut Vec<u8>) {
    let nb = words.width().div_ceil(8) as usize;
    if nb == container_bytes(words.width()) {
        words.write_le_bytes(out);
    } else {
        for w in words.iter() {
            out.extend_from_slice(&w.to_le_bytes()[..nb]);
        }
    }
}

/// Decodes `n` words of `width` bits from exactly `body`.
pub fn decode(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    let nb = width.div_ceil(8) as usize;
    let need = (n as u64).saturating_mul(nb as u64);
    if (body.len() as u64) < need {
        return Err(CodecError::Truncated {
            codec: NAME,
            needed: need,
            available: body.len() as u64,
        });
    }
    if body.len() as u64 > need {
        return Err(CodecError::TrailingBytes {
            codec: NAME,
            extra: body.len() as u64 - need,
        });
    }
    let m = mask(width);
    let mut out = Words::with_capacity(width, n);
    for c in body.chunks_exact(nb) {
        let mut a = [0u8; 8];
        a[..nb].copy_from_slice(c);
        let v = u64::from_le_bytes(a);
        if v & !m != 0 {
            return Err(CodecError::Invalid {
                codec: NAME,
                what: format!("word {v} does not fit in {width} bits"),
            });
        }
        out.push(v);
    }
    Ok(out)
}
