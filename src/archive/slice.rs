//! Reading part of one tensor (DESIGN §8): the bytes of a range of it, decoding only the
//! regions of its program that the range needs.
//!
//! A tensor of more than [`super::writer::REGION_WORDS`] words is stored as a root
//! `Concat` of regions (whole rows of a matrix where a row fits), each with its own
//! program. [`Archive::decode_tensor_range`] reads the `Concat`'s header for the regions'
//! lengths in words, finds where each region's program ends with the program reader
//! (without running it), and runs only the programs of the regions that overlap the range.
//! This is what `get_slice` of the Python package calls, so that a row range of a large
//! matrix (the shard of one device) costs the regions of those rows, not the matrix.
//!
//! The stored checksum covers the whole tensor, so a part decoded from some of its
//! regions cannot be checked against it: [`TensorPart::checked`] says whether the whole
//! tensor was decoded (every region needed, or a tensor that is not split: a single
//! program, a tensor in a group record, a reference to a base) and checked.

use super::reader::stream::concat_header;
use super::reader::{Archive, Item};
use crate::dsl::{execute, program_end, Ty};
use crate::error::{ArchiveError, Error, Result};
use crate::tensor::container_bytes;
use std::ops::Range;

/// What [`Archive::decode_tensor_range`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPart {
    /// The tensor's original bytes in the range asked for (little-endian words).
    pub bytes: Vec<u8>,
    /// Bytes decoded to get them, in bytes of the original: the tensor's length when it
    /// was decoded whole (its group's for a tensor in a group), else the length of the
    /// regions decoded (none for an empty range).
    pub decoded_bytes: u64,
    /// Whether the whole tensor (or its group) was decoded and matched its stored
    /// checksum; false when only some of its regions were decoded (their bytes are what
    /// the programs produce, unchecked).
    pub checked: bool,
}

impl Archive {
    /// The bytes `range` (byte offsets within the tensor, `range.end` at most its length)
    /// of tensor `i`, decoding only the regions of its program that overlap `range` when
    /// its program is a root `Concat` of regions; any other tensor, or a range that needs
    /// every region, is decoded whole and checked ([`Archive::decode_tensor`]).
    ///
    /// # Errors
    /// [`ArchiveError::NoSuchTensor`] for a bad index; [`ArchiveError::Decode`] for a
    /// range past the tensor's end or a program that does not read or run; as
    /// [`Archive::decode_tensor`] for a tensor decoded whole ([`Error::Mismatch`] if it
    /// differs from its checksum).
    pub fn decode_tensor_range(&self, i: usize, range: Range<u64>) -> Result<TensorPart> {
        let Some(t) = self.tensors().get(i) else {
            return Err(Error::archive(
                self.path(),
                ArchiveError::NoSuchTensor {
                    index: i,
                    count: self.tensors().len(),
                },
            ));
        };
        let len = t.original_bytes();
        if range.start > range.end || range.end > len {
            return Err(self.decode_err(
                Item::Tensor(i),
                format!(
                    "bytes [{}, {}) asked for, of a tensor of {len} bytes",
                    range.start, range.end
                ),
            ));
        }
        let whole = |this: &Archive| -> Result<TensorPart> {
            let all = this.decode_tensor(i)?;
            let decoded_bytes = match t.group {
                Some(g) => this.groups()[g].end - this.groups()[g].begin,
                None => len,
            };
            Ok(TensorPart {
                bytes: all[range.start as usize..range.end as usize].to_vec(),
                decoded_bytes,
                checked: true,
            })
        };
        if range.is_empty() {
            return Ok(TensorPart {
                bytes: Vec::new(),
                decoded_bytes: 0,
                checked: false,
            });
        }
        let item = Item::Tensor(i);
        if t.group.is_some() || t.record.is_empty() || self.is_reference(item) {
            return whole(self);
        }
        let (program, ty) = self.item_program(item);
        let word_bytes = container_bytes(ty.width) as u64;
        let bytes = self.program_slice(&program);
        let Some((header, lens)) = concat_header(bytes, ty) else {
            return whole(self);
        };
        // The regions overlapping `range`, by word offsets; each child's program bytes
        // are found by reading the children before it (no program is run).
        let mut at = header;
        let mut word = 0u64;
        let mut needed: Vec<(Range<usize>, Ty, u64)> = Vec::new();
        for (c, &n) in lens.iter().enumerate() {
            let child_ty = Ty::new(ty.width, n);
            let end = if c + 1 == lens.len() {
                bytes.len()
            } else {
                match program_end(&bytes[at..], child_ty) {
                    Ok(l) if l > 0 && at + l < bytes.len() => at + l,
                    // Decoding the whole program reports the error where it is.
                    _ => return whole(self),
                }
            };
            let (first, last) = (word * word_bytes, (word + n) * word_bytes);
            if first < range.end && range.start < last {
                needed.push((at..end, child_ty, first));
            }
            if last >= range.end {
                break;
            }
            at = end;
            word += n;
        }
        if needed.len() == lens.len() || needed.is_empty() {
            return whole(self);
        }
        let first_byte = needed[0].2;
        let decoded_bytes: u64 = needed.iter().map(|(_, ty, _)| ty.len * word_bytes).sum();
        self.check_decoded_size(item, decoded_bytes)?;
        let mut out = Vec::with_capacity(decoded_bytes as usize);
        for (r, child_ty, _) in &needed {
            let abs = program.start + r.start..program.start + r.end;
            let node = self.read_at(item, &abs, *child_ty)?;
            let words =
                execute(&node, child_ty.len).map_err(|e| self.decode_err_at(item, abs.start, e))?;
            words.write_le_bytes(&mut out);
        }
        let from = (range.start - first_byte) as usize;
        let to = (range.end - first_byte) as usize;
        out.truncate(to);
        out.drain(..from);
        Ok(TensorPart {
            bytes: out,
            decoded_bytes,
            checked: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::archive::safetensors::parse;
    use crate::archive::writer::write_archive;
    use crate::archive::{no_progress, Archive, CompressOptions};
    use std::path::Path;

    /// A U16 matrix of 1536 rows of 1024 words (1.5 Mi words: two regions of 1 Mi words
    /// and 0.5 Mi words) and a small F32 vector.
    fn source() -> Vec<u8> {
        let (rows, cols) = (1536usize, 1024usize);
        let n = rows * cols * 2;
        let header = format!(
            r#"{{"m":{{"dtype":"U16","shape":[{rows},{cols}],"data_offsets":[0,{n}]}},"v":{{"dtype":"F32","shape":[2],"data_offsets":[{n},{}]}}}}"#,
            n + 8
        );
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        for i in 0..rows * cols {
            let w = ((i * 2654435761) >> 7) as u16 & 0x0fff;
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.extend_from_slice(&1.5f32.to_le_bytes());
        v.extend_from_slice(&(-0.0f32).to_le_bytes());
        v
    }

    fn archive(src: &[u8]) -> Archive {
        let parsed = parse(src).unwrap();
        let mut out = Vec::new();
        let opts = CompressOptions {
            jobs: Some(1),
            ..CompressOptions::default()
        };
        write_archive(&parsed, &mut out, &opts, &no_progress, Path::new("mem")).unwrap();
        Archive::from_bytes(out, "mem").unwrap()
    }

    #[test]
    fn a_row_range_decodes_only_the_regions_it_overlaps() {
        let src = source();
        let a = archive(&src);
        let m = a.find("m").unwrap();
        assert_eq!(a.tensors()[m].root_op, "concat");
        let data = &src[src.len() - 8 - 1536 * 1024 * 2..src.len() - 8];
        let row = 2048u64;
        // Rows 10..20 lie in the first region (1 Mi words = 1024 rows): 2 MiB decoded.
        let p = a.decode_tensor_range(m, 10 * row..20 * row).unwrap();
        assert_eq!(p.bytes, &data[10 * 2048..20 * 2048]);
        assert_eq!(p.decoded_bytes, 2 << 20);
        assert!(!p.checked);
        // Rows 1100..1200: the second region only, 1 MiB.
        let p = a.decode_tensor_range(m, 1100 * row..1200 * row).unwrap();
        assert_eq!(p.bytes, &data[1100 * 2048..1200 * 2048]);
        assert_eq!(p.decoded_bytes, 1 << 20);
        // Across the boundary: both regions, so the whole tensor, checked.
        let p = a.decode_tensor_range(m, 1000 * row..1100 * row).unwrap();
        assert_eq!(p.bytes, &data[1000 * 2048..1100 * 2048]);
        assert_eq!(p.decoded_bytes, 3 << 20);
        assert!(p.checked);
        // An empty range decodes nothing; a small tensor (one program) is decoded whole.
        let p = a.decode_tensor_range(m, 5..5).unwrap();
        assert!(p.bytes.is_empty() && p.decoded_bytes == 0);
        let v = a.find("v").unwrap();
        let p = a.decode_tensor_range(v, 4..8).unwrap();
        assert_eq!(p.bytes, (-0.0f32).to_le_bytes());
        assert!(p.checked);
        // Past the end: an error, not a panic.
        let e = a.decode_tensor_range(v, 4..9).unwrap_err();
        assert!(e.to_string().contains("bytes [4, 9) asked for"), "{e}");
        assert!(a.decode_tensor_range(7, 0..1).is_err());
    }
}
