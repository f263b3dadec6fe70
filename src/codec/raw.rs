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

/// Checks that `body` holds exactly `n` words of `width` bits: the errors of [`decode`]
/// for a body of the wrong length.
pub(crate) fn check_len(body: &[u8], width: u32, n: usize) -> Result<(), CodecError> {
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
    Ok(())
}

/// Words [`matches_field`] decodes at a time.
const CHECK_CHUNK: usize = 4096;

/// Whether `body` decodes to exactly field `(shift, width)` of `src` (as [`decode`] and
/// a comparison say), with no buffer of the stream's length: for the whole of `src`
/// when its words fill the bytes each takes (9 to 16 bits in 2, say) the body is
/// compared with their little-endian bytes as they are (on little-endian machines;
/// equal bytes are valid words, as the source's are); anything else is decoded
/// [`CHECK_CHUNK`] words at a time and compared with its part of the field.
///
/// # Errors
/// As [`decode`]; `Ok(false)` may come before an error further on.
pub fn matches_field(body: &[u8], src: &Words, shift: u32, width: u32) -> Result<bool, CodecError> {
    let n = src.len();
    check_len(body, width, n)?;
    let nb = width.div_ceil(8) as usize;
    let whole = shift == 0 && width == src.width() && nb == container_bytes(width);
    if whole && cfg!(target_endian = "little") {
        // Every pattern of a whole container is a valid word: nothing to refuse.
        let bytes: &[u8] = crate::with_buf!(src.buf(), v => bytemuck::cast_slice(v));
        return Ok(body == bytes);
    }
    for (k, c) in body.chunks(CHECK_CHUNK * nb).enumerate() {
        let words = decode(c, width, c.len() / nb)?;
        if !super::select::buf_equals_field(words.buf(), src, k * CHECK_CHUNK, shift, width) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Decodes `n` words of `width` bits from exactly `body`. Words that fill their
/// container's bytes (8, 9-16, 17-32 in 4 bytes... when `ceil(width / 8)` is the
/// container's size) are read in bulk and then checked to fit; the others (17-24 bits
/// in 3 bytes, say) one at a time.
pub fn decode(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    check_len(body, width, n)?;
    let nb = width.div_ceil(8) as usize;
    let m = mask(width);
    let too_wide = |v: u64| CodecError::Invalid {
        codec: NAME,
        what: format!("word {v} does not fit in {width} bits"),
    };
    if nb == container_bytes(width) {
        let whole = Words::from_le_bytes(8 * nb as u32, body).ok_or(CodecError::Invalid {
            codec: NAME,
            what: "body length".into(),
        })?;
        let buf = whole.into_buf();
        // All the words or-ed together (a loop that vectorizes), then the first too wide.
        #[allow(clippy::unnecessary_cast)] // `with_buf!` casts every container
        let bits = crate::with_buf!(&buf, v => v.iter().fold(0u64, |a, &x| a | x as u64));
        if bits & !m != 0 {
            #[allow(clippy::unnecessary_cast)]
            let v = crate::with_buf!(&buf, v => v.iter().map(|&x| x as u64).find(|&x| x & !m != 0));
            return Err(too_wide(v.unwrap_or(bits)));
        }
        return Ok(Words::from_buf_trusted(width, buf));
    }
    let mut out = Words::with_capacity(width, n);
    for c in body.chunks_exact(nb) {
        let mut a = [0u8; 8];
        a[..nb].copy_from_slice(c);
        let v = u64::from_le_bytes(a);
        if v & !m != 0 {
            return Err(too_wide(v));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check without decoding answers as decoding and comparing does: whole streams
    /// of 8, 12, 16, 32 and 64 bits and fields of them, equal, with a word changed at
    /// either end or across a chunk, cut or too long (the decoder's errors), and a word
    /// too wide for its field (an error or a mismatch, never a match).
    #[test]
    fn check_agrees_with_decode() {
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let n = 2 * CHECK_CHUNK + 5;
        for bits in [8u32, 12, 16, 32, 64] {
            let src = Words::from_u64s(
                bits,
                &(0..n as u64)
                    .map(|i| mix(i) & mask(bits))
                    .collect::<Vec<_>>(),
            );
            let fields = [
                (0, bits),
                (0, bits / 2),
                (bits / 2, bits - bits / 2),
                (bits - 3, 3),
            ];
            for (shift, width) in fields {
                let field = crate::tensor::extract(src.buf(), shift, width);
                let mut body = Vec::new();
                encode(&field, &mut body);
                assert!(
                    matches_field(&body, &src, shift, width).unwrap(),
                    "{bits} {shift}+{width}"
                );
                let nb = width.div_ceil(8) as usize;
                for at in [0, CHECK_CHUNK, n - 1] {
                    let mut changed = body.clone();
                    changed[at * nb] ^= 1;
                    let decoded = decode(&changed, width, n).map(|w| w == field);
                    assert_eq!(decoded, Ok(false), "{bits} {shift}+{width} at {at}");
                    assert_eq!(matches_field(&changed, &src, shift, width), Ok(false));
                }
                assert!(matches!(
                    matches_field(&body[1..], &src, shift, width),
                    Err(CodecError::Truncated { .. })
                ));
                let mut long = body.clone();
                long.push(0);
                assert!(matches!(
                    matches_field(&long, &src, shift, width),
                    Err(CodecError::TrailingBytes { .. })
                ));
                if width % 8 != 0 {
                    // The last word's top byte set: wider than the field.
                    let mut wide = body.clone();
                    let last = wide.len() - 1;
                    wide[last] = 0xFF;
                    assert!(decode(&wide, width, n).is_err());
                    assert_ne!(matches_field(&wide, &src, shift, width), Ok(true));
                }
            }
        }
    }
}
