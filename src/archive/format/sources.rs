//! What reference records name: the sources an archive is coded against and the op that
//! combines a residual with a source tensor (formats 3 and 4).

use super::cursor::Cursor;
use crate::dsl::wire::Sink;

/// How a reference record's residual words `r` combine with the source tensor's words
/// `s` (both of the tensor's word width `b`) into the tensor's words `w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefOp {
    /// `w = s ^ r` (BitX's XOR, ZipLLM §4).
    Xor = 0,
    /// `w = s + r mod 2^b`: `r` is the difference of the words as unsigned integers.
    Sub = 1,
}

impl RefOp {
    /// `xor` or `sub`.
    pub fn name(self) -> &'static str {
        match self {
            RefOp::Xor => "xor",
            RefOp::Sub => "sub",
        }
    }

    pub(super) fn from_u8(b: u8) -> Option<RefOp> {
        match b {
            0 => Some(RefOp::Xor),
            1 => Some(RefOp::Sub),
            _ => None,
        }
    }
}

/// What a source of a version-3 archive is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceRole {
    /// A file of the base checkpoint (`--base`): a `.safetensors` file, or a shard of a
    /// base folder.
    Base = 0,
    /// Another shard of the same checkpoint folder (tensors stored once across shards).
    Shard = 1,
}

impl SourceRole {
    /// `base` or `shard`.
    pub fn name(self) -> &'static str {
        match self {
            SourceRole::Base => "base",
            SourceRole::Shard => "shard",
        }
    }

    pub(super) fn from_u8(b: u8) -> Option<SourceRole> {
        match b {
            0 => Some(SourceRole::Base),
            1 => Some(SourceRole::Shard),
            _ => None,
        }
    }
}

/// A source of a version-3 archive: an original `.safetensors` file that reference
/// records take tensors from, pinned by its length and checksum.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct SourceEntry {
    /// Base or sibling shard.
    pub role: SourceRole,
    /// Its name: a base file's name (for a base folder, the shard's path inside it, `/`
    /// separated), or a sibling shard's path inside the folder.
    pub name: String,
    /// Length of its original bytes.
    pub original_len: u64,
    /// xxh3-64 of its original bytes (the whole `.safetensors` file).
    pub checksum: u64,
}

pub(super) fn put_source(out: &mut Vec<u8>, s: &SourceEntry) {
    out.push(s.role as u8);
    out.put_uleb(s.name.len() as u64);
    out.extend_from_slice(s.name.as_bytes());
    out.put_uleb(s.original_len);
    out.extend_from_slice(&s.checksum.to_le_bytes());
}

pub(super) fn read_source(c: &mut Cursor<'_>) -> Result<SourceEntry, String> {
    let role = c.u8()?;
    let role = SourceRole::from_u8(role).ok_or_else(|| format!("unknown source role {role}"))?;
    let len = c.uleb()?;
    let name = std::str::from_utf8(c.take(len)?)
        .map_err(|_| "a source's name is not UTF-8".to_string())?
        .to_string();
    let original_len = c.uleb()?;
    let checksum = c.u64()?;
    Ok(SourceEntry {
        role,
        name,
        original_len,
        checksum,
    })
}
