//! Bucket codec: each word as its bit-length *bucket*, entropy coded, plus the
//! bucket's extra bits stored raw. The scheme of DEFLATE's length and distance codes,
//! JPEG's magnitude categories and zstd's offset codes, for streams whose words are
//! small integers of widely varying magnitude: a fine-tune's residual against its base
//! (docs/design.md §7), where a fixed split into fields wastes bits on the magnitudes
//! the split does not fit.
//!
//! Word `v` (after ZigZag, when the body says so) has bucket `k = bits_needed(v)`
//! (0 for `v = 0`, else `floor(log2 v) + 1`, at most `b`); its extra bits are the
//! `k - 1` bits below its leading one.
//!
//! **Context.** With the context flag, the bucket stream is coded as *symbols*
//! `s = k + e` for `k >= 1` (and `s = 0` for `k = 0`), where `e` is a bit field of the
//! word at the same position in a *context* stream the decoder is given: for a
//! reference record, its base tensor's words, and the field is their exponent. A
//! fine-tune's change of a weight is about the same size whatever the weight's
//! magnitude, so its residual in units of the weight's last place has a bucket about
//! `C - e`; the symbols `k + e` then cluster around `C` and one table codes them at
//! nearly the conditional entropy `H(k | e)` (fracast0-f32's optimizer steps: 2.55
//! bits per bucket against 3.27 without the context). A body with the flag is refused
//! where no context is given ([`decode`] with `None`).
//!
//! Body layout:
//!
//! | bytes | field |
//! | --- | --- |
//! | 1 | flags: bit 0 ZigZag (the words are `b`-bit two's complement, coded as their ZigZag), bit 1 context; other bits 0 |
//! | 2 | with the context flag only: the field's shift and width in bits (width 1..=16, `shift + width <=` the context's width) |
//! | 1 | the symbols' width `w` in bits, 1..=32 |
//! | 1 | the symbols' codec id (raw, bit packing, Huffman or rANS; not this codec) |
//! | 4 | the symbols' body length `m` in bytes, `u32` little-endian |
//! | m | the symbols' body: `n` words of `w` bits |
//! | rest | the extra bits, LSB first, word after word (`k - 1` bits for each word of bucket `k >= 2`), zero padded to a byte |

use super::bitio::{BitReader, BitWriter};
use super::{CodecError, CodecId};
use crate::tensor::{bits_needed, mask, Words};

const NAME: &str = "bucket";

/// Flag bit: the words are two's complement, coded as their ZigZag.
pub const FLAG_ZIGZAG: u8 = 1;
/// Flag bit: the buckets are offset by a field of a context stream.
pub const FLAG_CONTEXT: u8 = 2;

/// The context a literal's words are coded against: the words `words[start..start + n]`
/// line up with the literal's `n` words.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The whole context stream (a reference record's base tensor, as words of its
    /// width).
    pub words: &'a Words,
    /// The position in `words` of the literal's first word.
    pub start: usize,
}

/// The bit field of a context word that offsets the bucket: `(c >> shift) & (2^width - 1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's lowest bit.
    pub shift: u32,
    /// The field's width in bits, 1..=16.
    pub width: u32,
}

/// How [`encode`] codes the words.
#[derive(Clone, Copy, Debug)]
pub struct Params<'a> {
    /// Whether the words are two's complement, coded as their ZigZag.
    pub zigzag: bool,
    /// The context and the field of it that offsets the bucket; `None` for none.
    pub context: Option<(Context<'a>, Field)>,
}

/// Whether `body` has the context flag (is coded against a context stream).
pub fn has_context(body: &[u8]) -> bool {
    body.first().is_some_and(|f| f & FLAG_CONTEXT != 0)
}

fn unzigzag(z: u64, width: u32) -> u64 {
    crate::dsl::MapFn::ZigZag.invert(z, width)
}

fn zigzag(v: u64, width: u32) -> u64 {
    crate::dsl::MapFn::ZigZag.apply(v, width)
}

/// The context field of each of `n` words from `ctx.start`, or the error that the
/// context is too short or too narrow for the field.
fn context_field(ctx: Context<'_>, field: Field, n: usize) -> Result<Words, CodecError> {
    let end = ctx.start.checked_add(n).filter(|&e| e <= ctx.words.len());
    let Some(end) = end else {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: format!(
                "{n} words from position {} of a context of {} words",
                ctx.start,
                ctx.words.len()
            ),
        });
    };
    if field.width == 0 || field.width > 16 || field.shift + field.width > ctx.words.width() {
        return Err(CodecError::Invalid {
            codec: NAME,
            what: format!(
                "context field of {} bits at bit {} of {}-bit words",
                field.width,
                field.shift,
                ctx.words.width()
            ),
        });
    }
    let part = ctx.words.slice(ctx.start, end);
    Ok(crate::tensor::extract(part.buf(), field.shift, field.width))
}

/// The body for `words` coded as `params` says; the symbols take the smallest of the
/// other codecs ([`super::encode_best`]).
///
/// # Panics
/// If the context is shorter than the words or its field does not lie inside its words.
pub fn encode(words: &Words, params: Params<'_>) -> Vec<u8> {
    let width = words.width();
    let n = words.len();
    let offsets = params
        .context
        .map(|(ctx, field)| context_field(ctx, field, n).expect("the context covers the words"));
    let mut symbols = Vec::with_capacity(n);
    let mut extra = BitWriter::new();
    for (i, v) in words.iter().enumerate() {
        let z = if params.zigzag { zigzag(v, width) } else { v };
        let k = bits_needed(z);
        if k >= 2 {
            extra.write(z & mask(k - 1), k - 1);
        }
        let s = match &offsets {
            Some(o) if k > 0 => u64::from(k) + o.get(i),
            _ => u64::from(k),
        };
        symbols.push(s);
    }
    let max = symbols.iter().copied().max().unwrap_or(0);
    let sym_width = bits_needed(max).max(1);
    let symbols = Words::from_u64s(sym_width, &symbols);
    let inner = super::encode_best(&symbols);
    let mut out = Vec::new();
    let flags =
        u8::from(params.zigzag) * FLAG_ZIGZAG + u8::from(params.context.is_some()) * FLAG_CONTEXT;
    out.push(flags);
    if let Some((_, field)) = params.context {
        out.push(field.shift as u8);
        out.push(field.width as u8);
    }
    out.push(sym_width as u8);
    out.push(inner.codec as u8);
    let len = u32::try_from(inner.body.len()).expect("a literal's symbols fit in 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&inner.body);
    out.extend_from_slice(&extra.finish());
    out
}

/// Bytes of `body` before the extra bits that are parameters and tables: the header and
/// the symbols' table (their codec's [`super::select::table_len`]); the whole body if it
/// does not parse.
pub fn table_len(body: &[u8], n: usize) -> Result<u64, CodecError> {
    let h = header(body)?;
    let inner = &body[h.symbols.clone()];
    Ok(h.symbols.start as u64 + super::select::table_len(h.codec, inner, h.sym_width, n))
}

/// A body's fields before the extra bits.
struct Header {
    flags: u8,
    field: Option<Field>,
    sym_width: u32,
    codec: CodecId,
    /// Where the symbols' body lies in the body.
    symbols: std::ops::Range<usize>,
}

fn header(body: &[u8]) -> Result<Header, CodecError> {
    let mut at = 0;
    let flags = byte(body, &mut at)?;
    if flags & !(FLAG_ZIGZAG | FLAG_CONTEXT) != 0 {
        return Err(invalid(format!("unknown flags {flags:#04x}")));
    }
    let field = if flags & FLAG_CONTEXT != 0 {
        Some(Field {
            shift: u32::from(byte(body, &mut at)?),
            width: u32::from(byte(body, &mut at)?),
        })
    } else {
        None
    };
    let sym_width = u32::from(byte(body, &mut at)?);
    if !(1..=32).contains(&sym_width) {
        return Err(invalid(format!(
            "symbol width {sym_width}, expected 1..=32"
        )));
    }
    let codec_id = byte(body, &mut at)?;
    let codec = match CodecId::from_u8(codec_id) {
        Some(c) if c != CodecId::Bucket => c,
        _ => return Err(invalid(format!("symbol codec {codec_id}"))),
    };
    let mut len = [0u8; 4];
    for b in &mut len {
        *b = byte(body, &mut at)?;
    }
    let len = u64::from(u32::from_le_bytes(len));
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| at.checked_add(l))
        .filter(|&e| e <= body.len())
        .ok_or(CodecError::Truncated {
            codec: NAME,
            needed: (at as u64).saturating_add(len),
            available: body.len() as u64,
        })?;
    Ok(Header {
        flags,
        field,
        sym_width,
        codec,
        symbols: at..end,
    })
}

fn invalid(what: String) -> CodecError {
    CodecError::Invalid { codec: NAME, what }
}

fn byte(body: &[u8], at: &mut usize) -> Result<u8, CodecError> {
    let b = *body.get(*at).ok_or(CodecError::Truncated {
        codec: NAME,
        needed: *at as u64 + 1,
        available: body.len() as u64,
    })?;
    *at += 1;
    Ok(b)
}

/// Decodes a body of `n` words of `width` bits; `context` is the stream a body with the
/// context flag is coded against (ignored by one without).
///
/// # Errors
/// [`CodecError::Invalid`] for unknown flags, a context flag with no context (or one
/// too short, or a field outside its words), a symbol codec that is this codec or
/// unknown, a symbol that is no bucket of `width`-bit words; [`CodecError::Truncated`]
/// and [`CodecError::TrailingBytes`] for a body of the wrong length; the symbol codec's
/// errors.
pub fn decode(
    body: &[u8],
    width: u32,
    n: usize,
    context: Option<Context<'_>>,
) -> Result<Words, CodecError> {
    let h = header(body)?;
    let offsets = match (h.field, context) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(invalid(
                "coded against its base tensor's words, which were not given \
                 (decode the record with its base)"
                    .into(),
            ))
        }
        (Some(field), Some(ctx)) => Some(context_field(ctx, field, n)?),
    };
    let (flags, sym_width, codec, end) = (h.flags, h.sym_width, h.codec, h.symbols.end);
    let symbols = super::decode(codec, &body[h.symbols], sym_width, n)?;
    let mut extra = BitReader::new(&body[end..], NAME);
    let mut out: Vec<u64> = super::table::try_with_capacity(n, NAME)?;
    let zig = flags & FLAG_ZIGZAG != 0;
    let offsets = offsets.map(|o| o.to_u64s());
    for (i, s) in symbols.to_u64s().into_iter().enumerate() {
        let k = match &offsets {
            Some(o) if s > 0 => s.checked_sub(o[i]).filter(|&k| k >= 1),
            _ => Some(s),
        };
        let k = match k {
            Some(k) if k <= u64::from(width) => k as u32,
            _ => {
                return Err(invalid(format!(
                    "symbol {s} of word {i} is no bucket of {width}-bit words"
                )))
            }
        };
        let z = match k {
            0 => 0,
            1 => 1,
            k => (1u64 << (k - 1)) | extra.read(k - 1)?,
        };
        out.push(if zig { unzigzag(z, width) } else { z });
    }
    extra.finish()?;
    Ok(Words::from_u64s(width, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_words() -> Words {
        // F32-like context words with exponents 120..=127.
        Words::from_u64s(
            32,
            &(0..64u64).map(|i| (120 + i % 8) << 23).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_worked_example_has_its_exact_body() {
        // Words 0, 1, 5 (bucket 3, extra bits 01), 2 (bucket 2, extra bit 0).
        let words = Words::from_u64s(8, &[0, 1, 5, 2]);
        let body = encode(
            &words,
            Params {
                zigzag: false,
                context: None,
            },
        );
        // flags 0, symbol width 2, the symbols 0 1 3 2 bit-packed (codec 1, a body of 2
        // bytes: 2 bits per word, then 0b10_11_01_00), extra bits 01 then 0 -> 0b001.
        assert_eq!(body, vec![0, 2, 1, 2, 0, 0, 0, 2, 0b1011_0100, 0b001]);
        assert_eq!(decode(&body, 8, 4, None).unwrap(), words);
    }

    #[test]
    fn zigzag_and_context_round_trip() {
        let ctx = ctx_words();
        let field = Field {
            shift: 23,
            width: 8,
        };
        let vals: Vec<u64> = (0..48u64)
            .map(|i| ((i as i64 - 24) * 37) as u64 & 0xffff_ffff)
            .collect();
        let words = Words::from_u64s(32, &vals);
        for zigzag in [false, true] {
            for with_ctx in [false, true] {
                let c = Context {
                    words: &ctx,
                    start: 16,
                };
                let params = Params {
                    zigzag,
                    context: with_ctx.then_some((c, field)),
                };
                let body = encode(&words, params);
                assert_eq!(decode(&body, 32, 48, Some(c)).unwrap(), words);
                if with_ctx {
                    let e = decode(&body, 32, 48, None).unwrap_err();
                    assert!(e.to_string().contains("base tensor"), "{e}");
                    // A context too short for the words.
                    let short = Context {
                        words: &ctx,
                        start: 17,
                    };
                    assert!(matches!(
                        decode(&body, 32, 48, Some(short)),
                        Err(CodecError::Invalid { .. })
                    ));
                }
            }
        }
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_an_error() {
        let words = Words::from_u64s(16, &[3, 900, 0, 65535, 7, 7, 7, 1]);
        let body = encode(
            &words,
            Params {
                zigzag: true,
                context: None,
            },
        );
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], 16, 8, None).is_err(), "cut {cut}");
        }
        let mut long = body.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, 16, 8, None),
            Err(CodecError::TrailingBytes { .. })
        ));
        let mut flags = body;
        flags[0] |= 0x80;
        assert!(matches!(
            decode(&flags, 16, 8, None),
            Err(CodecError::Invalid { .. })
        ));
    }
}
