//! A `.safetensors` file of some of an archive's tensors, decoded through the index one
//! tensor at a time ([`extract`]).
//!
//! The new file's header keeps the original header's `__metadata__` (its keys and
//! values in their order) and lists the chosen tensors in the order of the original
//! header, with their dtypes and shapes; their bytes follow in the original data order,
//! packed from offset 0 (the offsets are rewritten). The header is padded with spaces to
//! a multiple of 8 bytes, as the reference writer does, so every tensor stays aligned.

use super::reader::Archive;
use crate::error::{ArchiveError, Error, Result};
use std::io::Write;
use std::path::Path;

/// The tensors to take from one archive: indices into [`Archive::tensors`] (in any
/// order; each taken once).
#[derive(Debug)]
pub struct Part<'a> {
    /// The archive.
    pub archive: &'a Archive,
    /// Its tensors to take.
    pub tensors: Vec<usize>,
}

/// What [`extract`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractSummary {
    /// The tensors written, in data order (part by part).
    pub tensors: Vec<String>,
    /// Bytes of the new file.
    pub bytes: u64,
    /// Bytes of its JSON header (padding included).
    pub header_len: u64,
    /// Whether the header carries a `__metadata__` map.
    pub metadata: bool,
    /// The parts whose `__metadata__` differs from the first part's, which is the one
    /// kept (archive paths; a folder's shards can disagree).
    pub metadata_differs: Vec<std::path::PathBuf>,
}

/// The `__metadata__` map of an archive's stored header, in file order.
///
/// # Errors
/// As [`Archive::header_bytes`]; [`Error::Archive`] if the header does not parse.
fn metadata_of(a: &Archive) -> Result<Option<Vec<(String, String)>>> {
    let header = a.header_bytes()?;
    let data_len = a.original_len().saturating_sub(8 + a.header_len());
    let parsed = super::safetensors::parse_header(&header, data_len).map_err(|e| {
        Error::archive(
            a.path(),
            ArchiveError::Decode {
                region: "header".to_string(),
                what: format!("the restored header is not a .safetensors header: {e}"),
            },
        )
    })?;
    Ok(parsed.metadata)
}

/// A JSON string literal of `s`.
fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Writes a `.safetensors` file of the tensors of `parts` to `out` (see the module doc):
/// each tensor is decoded through the index and checked against its stored checksum
/// before its bytes are written, one tensor (or one group record) in memory at a time.
/// `name` labels write errors.
///
/// # Errors
/// As [`Archive::header_bytes`] and [`Archive::decode_tensor`] (a damaged tensor is
/// [`Error::Mismatch`] or [`ArchiveError::Decode`]; bytes already written are then
/// to be discarded); [`ArchiveError::NoSuchTensor`] for an index out of range;
/// [`Error::Io`] if `out` fails.
pub fn extract<W: Write + ?Sized>(
    parts: &[Part<'_>],
    out: &mut W,
    name: &Path,
) -> Result<ExtractSummary> {
    // Each part's tensors, deduplicated, in data order (the archive's order).
    let mut chosen: Vec<Vec<usize>> = Vec::with_capacity(parts.len());
    for p in parts {
        let count = p.archive.tensors().len();
        let mut ts = p.tensors.clone();
        if let Some(&bad) = ts.iter().find(|&&i| i >= count) {
            return Err(Error::archive(
                p.archive.path(),
                ArchiveError::NoSuchTensor { index: bad, count },
            ));
        }
        ts.sort_unstable();
        ts.dedup();
        chosen.push(ts);
    }

    // The metadata of the first part; the others' compared with it.
    let mut metadata = None;
    let mut metadata_differs = Vec::new();
    for (k, p) in parts.iter().enumerate() {
        let m = metadata_of(p.archive)?;
        if k == 0 {
            metadata = m;
        } else if m != metadata {
            metadata_differs.push(p.archive.path().to_path_buf());
        }
    }

    // Offsets in data order; entries in the original header's order.
    let mut entries: Vec<(usize, u64, String)> = Vec::new();
    let mut offset = 0u64;
    for (part, (p, ts)) in parts.iter().zip(&chosen).enumerate() {
        for &i in ts {
            let t = &p.archive.tensors()[i];
            let end = offset + t.original_bytes();
            let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
            let entry = format!(
                "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{offset},{end}]}}",
                json_str(&t.name),
                t.dtype.name(),
                shape.join(",")
            );
            entries.push((part, t.header_index, entry));
            offset = end;
        }
    }
    entries.sort_by_key(|&(part, index, _)| (part, index));
    let mut header = String::from("{");
    if let Some(m) = &metadata {
        let kv: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
            .collect();
        header.push_str(&format!("\"__metadata__\":{{{}}}", kv.join(",")));
        if !entries.is_empty() {
            header.push(',');
        }
    }
    let listed: Vec<&str> = entries.iter().map(|(_, _, e)| e.as_str()).collect();
    header.push_str(&listed.join(","));
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }

    let write_err = |e| Error::io(name, "cannot write", e);
    let header_len = header.len() as u64;
    out.write_all(&header_len.to_le_bytes())
        .map_err(write_err)?;
    out.write_all(header.as_bytes()).map_err(write_err)?;
    let mut names = Vec::new();
    for (p, ts) in parts.iter().zip(&chosen) {
        let a = p.archive;
        // The last group record decoded: consecutive small tensors share one.
        let mut group: Option<(usize, Vec<u8>)> = None;
        for &i in ts {
            let t = &a.tensors()[i];
            match t.group {
                Some(g) => {
                    if group.as_ref().is_none_or(|(k, _)| *k != g) {
                        group = Some((g, a.decode_group(g)?));
                    }
                    let (_, bytes) = group.as_ref().expect("decoded just above");
                    let at = (t.begin - a.groups()[g].begin) as usize;
                    let part =
                        bytes
                            .get(at..at + t.original_bytes() as usize)
                            .ok_or_else(|| Error::Internal {
                                path: a.path().to_path_buf(),
                                what: format!("tensor {:?} lies outside its group", t.name),
                            })?;
                    out.write_all(part).map_err(write_err)?;
                }
                None => {
                    let bytes = a.decode_tensor(i)?;
                    out.write_all(&bytes).map_err(write_err)?;
                }
            }
            names.push(t.name.clone());
        }
    }
    Ok(ExtractSummary {
        tensors: names,
        bytes: 8 + header_len + offset,
        header_len,
        metadata: metadata.is_some(),
        metadata_differs,
    })
}
