//! Literal codecs (docs/design.md §4; paper §3.2, "Physical literal coding").
//!
//! A `Lit` node stores a word stream in the smallest complete encoding among four codecs:
//! raw words, fixed-width bit packing, canonical Huffman and rANS (two codec ids, one per
//! layout of the states, by stream length). Each codec module keeps
//! its encoder and decoder side by side. The *body* of an encoding is everything the codec
//! needs besides the stream's type (width `b` in bits and length `n` in words, which the
//! program's type rules supply): parameters, tables and payload. Its length in bytes is
//! framed by the wire format, so a decoder is always handed exactly its body and must
//! consume all of it.
//!
//! Every decoder is total: on a body that is inconsistent with `(b, n)` it returns a
//! [`CodecError`], never panics, and never allocates more than `n` words plus what the
//! body's own length justifies (besides decoding tables of bounded size: at most 2^12
//! Huffman entries and 2^16 rANS slots). An `n` too large to allocate is an error, not an
//! abort.

use crate::tensor::Words;

/// Defines `fn $name(args) -> ret` as a call of `$inner` (an `#[inline(always)]` function
/// of the same signature), compiled a second time with the x86-64 target feature
/// `$feature` (a string literal such as `"lzcnt"`) and that build picked at run time
/// when the processor has it. The two builds compute the same result.
///
/// Used where the baseline x86-64 build is measurably slow: the table planners take a
/// bit length (`leading_zeros`) several times per value, each a `bsr` with a fix-up for
/// 0 without `lzcnt` (a quarter of minilm's rANS planning); the bit packer's loops
/// vectorize twice as wide with AVX2 (its share of minilm's compression 5.8% -> 4.1%).
macro_rules! feature_fn {
    ($feature:tt; $(#[$m:meta])* $vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $ret:ty)? = $inner:path;) => {
        $(#[$m])*
        $vis fn $name($($a: $t),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!($feature) {
                #[target_feature(enable = $feature)]
                fn with_feature($($a: $t),*) $(-> $ret)? {
                    $inner($($a),*)
                }
                // SAFETY: the processor has the feature (checked above).
                return unsafe { with_feature($($a),*) };
            }
            $inner($($a),*)
        }
    };
}
pub(crate) use feature_fn;

pub mod bitio;
pub mod bitpack;
pub mod bucket;
pub mod huffman;
pub mod rans;
pub mod rans8;
pub mod raw;
pub mod select;
pub mod table;

pub use select::{
    all_sizes, decode, encode_best, encode_best_with_histogram, encode_stream_with_histogram,
    Encoded,
};

/// Stable numeric identity of a literal codec, as stored in the wire format. The numeric
/// order is also the tie-break order when two codecs produce bodies of equal size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum CodecId {
    /// Each word in `ceil(b/8)` little-endian bytes.
    Raw = 0,
    /// One byte `k` (bits per word), then every word in `k` bits, LSB first.
    BitPack = 1,
    /// Canonical Huffman code over the distinct words (at most [`MAX_TABLE_SYMBOLS`]).
    Huffman = 2,
    /// Static rANS over the distinct words (at most [`MAX_TABLE_SYMBOLS`]), 1 to 4
    /// interleaved states; written for streams shorter than [`rans::WIDE_MIN_WORDS`].
    Rans = 3,
    /// The same rANS with 32 interleaved states read in rounds, which SIMD decodes
    /// ([`rans::Layout::Wide`]); written for streams of at least
    /// [`rans::WIDE_MIN_WORDS`] words.
    Rans32 = 4,
    /// Each word's bit-length bucket, entropy coded by one of the codecs above, plus its
    /// extra bits raw, optionally offset by a context stream's field ([`bucket`]; wire
    /// version 5). Not in [`ALL_CODECS`]: the general search does not try it; reference
    /// records code their residuals with it.
    Bucket = 5,
    /// Static rANS over at most 256 symbols (rarer words escaped to a literal of their
    /// own) at a precision of at most 12 bits, 32 states with 16-bit renormalization:
    /// one lookup a word, decoded with SIMD ([`rans8`]; wire version 6).
    Rans8 = 6,
}

/// All codecs in tie-break order.
pub const ALL_CODECS: [CodecId; 6] = [
    CodecId::Raw,
    CodecId::BitPack,
    CodecId::Huffman,
    CodecId::Rans,
    CodecId::Rans32,
    CodecId::Rans8,
];

impl CodecId {
    /// Inverse of `as u8`; `None` for an unknown tag.
    pub fn from_u8(tag: u8) -> Option<CodecId> {
        match tag {
            5 => Some(CodecId::Bucket),
            6 => Some(CodecId::Rans8),
            t => ALL_CODECS.get(usize::from(t)).copied(),
        }
    }

    /// Lowercase name used in the program text form (`raw`, `bitpack`, `huffman`, `rans`,
    /// `rans32`, `bucket`).
    pub fn name(self) -> &'static str {
        match self {
            CodecId::Raw => "raw",
            CodecId::BitPack => "bitpack",
            CodecId::Huffman => "huffman",
            CodecId::Rans => "rans",
            CodecId::Rans32 => "rans32",
            CodecId::Bucket => "bucket",
            CodecId::Rans8 => "rans8",
        }
    }

    /// The rANS layout of a rANS codec; `None` for the others.
    pub fn rans_layout(self) -> Option<rans::Layout> {
        match self {
            CodecId::Rans => Some(rans::Layout::Classic),
            CodecId::Rans32 => Some(rans::Layout::Wide),
            _ => None,
        }
    }

    /// Inverse of [`CodecId::name`].
    pub fn from_name(name: &str) -> Option<CodecId> {
        ALL_CODECS
            .iter()
            .copied()
            .chain([CodecId::Bucket])
            .find(|c| c.name() == name)
    }
}

/// The words a literal encodes: a stream of words, or one bit field of every word of a
/// wider stream. A field (a `merge` child, DESIGN §3) is read in place by the encoders
/// that can (rANS and bit packing over words of at most 16 bits); the others get it
/// extracted ([`Stream::to_words`]). Either way the body is the one the field's own
/// words would give.
#[derive(Clone, Copy, Debug)]
pub enum Stream<'a> {
    /// The words themselves.
    Words(&'a Words),
    /// Bits `[shift, shift + width)` of each word of `words`, as words of `width` bits:
    /// `(x >> shift) & (2^width - 1)`. `shift + width <= words.width()`, `width >= 1`.
    Field {
        /// The wider words.
        words: &'a Words,
        /// The field's lowest bit.
        shift: u32,
        /// The field's width in bits.
        width: u32,
    },
}

impl<'a> Stream<'a> {
    /// Bits per word of the stream (the field's width for a field).
    pub fn width(&self) -> u32 {
        match *self {
            Stream::Words(w) => w.width(),
            Stream::Field { width, .. } => width,
        }
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        match *self {
            Stream::Words(w) | Stream::Field { words: w, .. } => w.len(),
        }
    }

    /// Whether the stream has no words.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The words read, their shift (0 for a whole stream) and the mask of the stream's
    /// width: word `i` of the stream is `(words[i] >> shift) & mask`.
    pub fn parts(&self) -> (&'a Words, u32, u64) {
        match *self {
            Stream::Words(w) => (w, 0, crate::tensor::mask(w.width())),
            Stream::Field {
                words,
                shift,
                width,
            } => (words, shift, crate::tensor::mask(width)),
        }
    }

    /// The stream's own words: borrowed for a whole stream, extracted for a field.
    pub fn to_words(&self) -> std::borrow::Cow<'a, Words> {
        match *self {
            Stream::Words(w) => std::borrow::Cow::Borrowed(w),
            Stream::Field {
                words,
                shift,
                width,
            } => std::borrow::Cow::Owned(crate::tensor::extract(words.buf(), shift, width)),
        }
    }
}

/// Table-based codecs (Huffman, rANS) apply only to streams with at most this many
/// distinct words (docs/design.md §4).
pub const MAX_TABLE_SYMBOLS: usize = 65_536;

/// Why a literal body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The body ended before the decoder had what it needed.
    #[error("{codec} body truncated: needed {needed} bytes, had {available}")]
    Truncated {
        codec: &'static str,
        needed: u64,
        available: u64,
    },
    /// The body holds bytes the decoder did not consume.
    #[error("{codec} body has {extra} trailing bytes")]
    TrailingBytes { codec: &'static str, extra: u64 },
    /// A table, parameter or payload contradicts itself or the stream's type.
    #[error("{codec} body invalid: {what}")]
    Invalid { codec: &'static str, what: String },
}
