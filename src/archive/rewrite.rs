//! Rewriting an archive with other programs for some tensors (e.g. a better program found
//! by a longer search), without the source `.safetensors` file.
//!
//! Every record but the replaced ones is copied byte for byte; a replaced record keeps
//! its checksum (and, in version 1, its name, position, dtype, shape and offsets) and
//! gets the new program.
//! The index is rebuilt (record lengths, checksum of the records); the original file's
//! length and whole-file checksum are unchanged, since it restores the same bytes. The
//! layout is [`super::format`]'s.

use super::format::{self, TensorMeta};
use super::reader::Archive;
use crate::dsl::{execute, program_bytes, Node};
use crate::error::{ArchiveError, Error, Result};
use crate::files::{persist, temp_beside};
use crate::hash::{xxh3_64, Xxh3};
use crate::tensor::words_into_le_bytes;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Writes a copy of the archive `src` to `dst` in which the record of tensor `i` (an
/// index into [`Archive::tensors`]) holds `program` for every `(i, program)` of
/// `replacements`; returns the length of the new archive in bytes. For a tensor in a
/// group the program restores the whole group ([`Archive::program`] gives its current
/// one); a tensor stored as a copy gets a record of its own.
///
/// Each new program is run first and must restore the record exactly (its type is the
/// record's and its output matches the stored checksum); nothing is written otherwise.
/// The archive keeps its format version. The index records `settings` as what built
/// each replaced record when given (version 2 and later; version 1 records none), and
/// keeps every other record's settings.
/// The copy is written to a temporary file beside `dst`, synced and renamed into place.
/// An existing `dst`, including `src` itself, is replaced only when `overwrite` is true
/// (replacing `src` is safe: the old file is read through its own mapping until the
/// rename).
///
/// # Errors
/// [`Error::Io`] or [`Error::Archive`] if `src` cannot be opened or is damaged (its record
/// bytes must match their stored checksum); [`ArchiveError::NoSuchTensor`] for a bad
/// index; [`Error::Internal`] if a program has the wrong type or fails to run;
/// [`Error::Mismatch`] if its output differs from the tensor; [`Error::SameFile`] or
/// [`Error::OutputExists`] if `dst` exists and `overwrite` is false; [`Error::Io`] if the
/// new file cannot be written.
pub fn rewrite_with_programs(
    src: &Path,
    dst: &Path,
    replacements: &[(usize, Node)],
    settings: Option<format::Settings>,
    overwrite: bool,
) -> Result<u64> {
    let each: Vec<(usize, &Node, Option<format::Settings>)> = replacements
        .iter()
        .map(|(i, p)| (*i, p, settings))
        .collect();
    rewrite_with_each(src, dst, &each, overwrite)
}

/// [`rewrite_with_programs`] with the settings that built each new program given with
/// it (`None`: the record keeps its own).
///
/// # Errors
/// As [`rewrite_with_programs`].
pub fn rewrite_with_each(
    src: &Path,
    dst: &Path,
    replacements: &[(usize, &Node, Option<format::Settings>)],
    overwrite: bool,
) -> Result<u64> {
    if let Ok(meta) = fs::metadata(dst) {
        if meta.is_dir() {
            return Err(Error::io(
                dst,
                "cannot write",
                std::io::Error::other("is a directory"),
            ));
        }
        if !overwrite {
            return Err(if same_file(src, dst) {
                Error::SameFile {
                    path: dst.to_path_buf(),
                }
            } else {
                Error::OutputExists {
                    path: dst.to_path_buf(),
                }
            });
        }
    }
    let archive = Archive::open(src)?;
    let file = File::open(src).map_err(|e| Error::io(src, "cannot open", e))?;
    let map = crate::files::map_file(&file).map_err(|e| Error::io(src, "cannot map", e))?;
    let mut tmp = temp_beside(dst)?;
    let len = {
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        let len = rewrite_into(&archive, &map, replacements, Check::Programs, &mut w)
            .map_err(|e| e.into_error(dst))?;
        w.flush().map_err(|e| Error::io(dst, "cannot write", e))?;
        len
    };
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::io(dst, "cannot sync", e))?;
    persist(tmp, dst, overwrite)?;
    Ok(len)
}

/// The length in bytes of the archive [`rewrite_with_each`] would write from `archive`
/// with each `(tensor, program, settings)` of `replacements`, computed without writing
/// and by the same code: the records' new lengths (a regions record's table in format 4)
/// and the index rebuilt as the rewrite rebuilds it (a new settings entry, lengths whose
/// LEB128 form grows). The programs are not run here (writing runs them), nor are the
/// records' checksums checked.
///
/// # Errors
/// [`ArchiveError::NoSuchTensor`] for a bad index, [`Error::Internal`] for a tensor with
/// no record (empty) or a program of another type, and the errors of reading the
/// archive's index.
pub fn rewritten_len(
    archive: &Archive,
    replacements: &[(usize, &Node, Option<format::Settings>)],
) -> Result<u64> {
    let src = archive.path();
    let file = File::open(src).map_err(|e| Error::io(src, "cannot open", e))?;
    let map = crate::files::map_file(&file).map_err(|e| Error::io(src, "cannot map", e))?;
    rewrite_into(
        archive,
        &map,
        replacements,
        Check::Nothing,
        &mut std::io::sink(),
    )
    .map_err(|e| e.into_error(src))
}

/// What [`rewrite_into`] checks before it writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Every new program is run and must restore its record's checksum; the old records
    /// must match the index's checksum of them.
    Programs,
    /// Nothing: only the lengths written are wanted (a regions record's checksums are
    /// written as 0, the same length).
    Nothing,
}

/// An error of [`rewrite_into`]: the archive's, or one writing to the sink (named by the
/// caller, who knows the file).
enum RewriteError {
    Archive(Error),
    Write(std::io::Error),
}

impl RewriteError {
    fn into_error(self, dst: &Path) -> Error {
        match self {
            Self::Archive(e) => e,
            Self::Write(e) => Error::io(dst, "cannot write", e),
        }
    }
}

impl From<Error> for RewriteError {
    fn from(e: Error) -> Self {
        Self::Archive(e)
    }
}

/// Writes the rewritten archive (`bytes`, the mapped file of `archive`) to `w`: the file
/// header, every record (the replaced ones new), the rebuilt index and the trailer;
/// returns the bytes written.
fn rewrite_into(
    archive: &Archive,
    bytes: &[u8],
    replacements: &[(usize, &Node, Option<format::Settings>)],
    check: Check,
    w: &mut dyn Write,
) -> std::result::Result<u64, RewriteError> {
    let src = archive.path();
    let corrupt = |what: String| Error::archive(src, ArchiveError::Corrupt { what });
    if bytes.len() as u64 != archive.archive_len() {
        return Err(corrupt("the file changed while it was read".into()).into());
    }

    // New records by their start offset, after checking every program.
    let mut new_records: BTreeMap<usize, (usize, Vec<u8>, Option<format::Settings>)> =
        BTreeMap::new();
    for &(i, program, settings) in replacements {
        let t = archive.tensors().get(i).ok_or_else(|| {
            Error::archive(
                src,
                ArchiveError::NoSuchTensor {
                    index: i,
                    count: archive.tensors().len(),
                },
            )
        })?;
        // What the record holding the tensor restores: the tensor, or its group.
        let group = t.group.map(|g| &archive.groups()[g]);
        let (region, ty) = match group {
            Some(g) => (
                format!("group of {} tensors holding {:?}", g.tensors.len(), t.name),
                g.ty(),
            ),
            None => (format!("tensor {:?}", t.name), t.ty()),
        };
        let internal = |what: String| Error::Internal {
            path: src.to_path_buf(),
            what: format!("{region}: new program {what}"),
        };
        if t.record.is_empty() {
            return Err(internal("has no record to go in: the tensor is empty".into()).into());
        }
        if program.ty() != ty {
            return Err(internal(format!(
                "has type {}, the record restores {ty}",
                program.ty(),
            ))
            .into());
        }
        let restored = match check {
            Check::Programs => {
                let words =
                    execute(program, ty.len).map_err(|e| internal(format!("fails: {e}")))?;
                let restored = words_into_le_bytes(words);
                let actual = xxh3_64(&restored);
                if actual != t.checksum {
                    return Err(Error::Mismatch {
                        path: src.to_path_buf(),
                        region,
                        expected: t.checksum,
                        actual,
                    }
                    .into());
                }
                Some(restored)
            }
            Check::Nothing => None,
        };
        let body = program_bytes(program);
        let mut record = Vec::new();
        if archive.version() >= 4 {
            let items = group.map_or(1, |g| g.tensors.len() as u64);
            let regions = region_heads(program, restored.as_deref());
            let head = match &regions {
                Some(regions) => format::HeadV4::Regions {
                    items,
                    checksum: t.checksum,
                    regions,
                },
                None => format::HeadV4::Data {
                    items,
                    checksum: t.checksum,
                },
            };
            format::record_head_v4(&mut record, &head, body.len() as u64);
            record.extend_from_slice(&body);
        } else if archive.version() >= 2 {
            format::data_record_head(&mut record, t.checksum);
            record.extend_from_slice(&body);
        } else {
            let meta = TensorMeta {
                name: t.name.clone(),
                header_index: t.header_index,
                dtype: t.dtype,
                shape: t.shape.clone(),
                begin: t.begin,
                end: t.end,
                checksum: t.checksum,
            };
            format::write_tensor_record(&mut record, &meta, &body);
        }
        new_records.insert(t.record.start, (t.record.end, record, settings));
    }

    // The old index: where every record starts and ends.
    let n = bytes.len();
    let trailer = bytes
        .get(n.saturating_sub(format::TRAILER_LEN)..)
        .filter(|t| t.len() == format::TRAILER_LEN)
        .ok_or_else(|| corrupt("no trailer".into()))?;
    let field =
        |k: usize| u64::from_le_bytes(trailer[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
    let (index_offset, index_len) = (field(0), field(1));
    let index_bytes = usize::try_from(index_offset)
        .ok()
        .zip(usize::try_from(index_len).ok())
        .and_then(|(o, l)| bytes.get(o..o.checked_add(l)?))
        .ok_or_else(|| corrupt("index out of bounds".into()))?;
    let mut v4 = if archive.version() >= 4 {
        Some(format::read_index_v4(index_bytes).map_err(corrupt)?)
    } else {
        None
    };
    let (old_lens, old_records_checksum, mut v2) = if let Some(index) = &v4 {
        (index.record_lens.clone(), index.records_checksum, None)
    } else if archive.version() >= 2 {
        let index = format::read_index_v2(index_bytes, archive.version()).map_err(corrupt)?;
        (
            index.record_lens.clone(),
            index.records_checksum,
            Some(index),
        )
    } else {
        let index = format::read_index(index_bytes).map_err(corrupt)?;
        (index.record_lens, index.records_checksum, None)
    };

    let hashing = check == Check::Programs;
    let mut old_hasher = Xxh3::new();
    let mut new_hasher = Xxh3::new();
    let mut record_lens = Vec::with_capacity(old_lens.len());
    let mut offset = format::FILE_HEADER_LEN as u64;
    w.write_all(&bytes[..format::FILE_HEADER_LEN])
        .map_err(RewriteError::Write)?;
    let mut at = format::FILE_HEADER_LEN;
    for (k, &len) in old_lens.iter().enumerate() {
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= n)
            .ok_or_else(|| corrupt(format!("record at byte {at} runs past the end")))?;
        let old = &bytes[at..end];
        if hashing {
            old_hasher.update(old);
        }
        let out: &[u8] = match new_records.get(&at) {
            Some((old_end, record, settings)) if *old_end == end => {
                // The settings entry of the replaced record (record k is tensor record
                // k - 1), added to the index when new.
                if let (Some(s), Some(r)) = (settings, k.checked_sub(1)) {
                    if let Some(index) = v2.as_mut() {
                        let e = settings_entry(&mut index.settings, *s);
                        if let Some(entry) = index.records.get_mut(r) {
                            entry.1 = e;
                        }
                    }
                    if let Some(index) = v4.as_mut() {
                        let e = settings_entry(&mut index.settings, *s);
                        if let Some(entry) = index.record_settings.get_mut(r) {
                            *entry = e;
                        }
                    }
                }
                record
            }
            Some(_) => return Err(corrupt(format!("record at byte {at} has two lengths")).into()),
            None => old,
        };
        if hashing {
            new_hasher.update(out);
        }
        w.write_all(out).map_err(RewriteError::Write)?;
        record_lens.push(out.len() as u64);
        offset += out.len() as u64;
        at = end;
    }
    if hashing && old_hasher.digest() != old_records_checksum {
        return Err(
            corrupt("its records do not match their stored checksum (run verify)".into()).into(),
        );
    }
    let mut tail = Vec::new();
    match (v2, v4) {
        (_, Some(old)) => format::write_index_v4(
            &mut tail,
            &format::IndexV4 {
                records_checksum: new_hasher.digest(),
                record_lens,
                ..old
            },
        ),
        (Some(old), _) => format::write_index_v2(
            &mut tail,
            &format::IndexV2 {
                records_checksum: new_hasher.digest(),
                record_lens,
                ..old
            },
        ),
        (None, None) => {
            let old = format::read_index(index_bytes).map_err(corrupt)?;
            format::write_index(
                &mut tail,
                &format::Index {
                    records_checksum: new_hasher.digest(),
                    record_lens,
                    ..old
                },
            )
        }
    }
    let trailer = format::trailer(offset, &tail);
    tail.extend_from_slice(&trailer);
    w.write_all(&tail).map_err(RewriteError::Write)?;
    offset += tail.len() as u64;
    Ok(offset)
}

/// The index of settings `s` in `all`, added at the end when new.
fn settings_entry(all: &mut Vec<format::Settings>, s: format::Settings) -> u64 {
    match all.iter().position(|&o| o == s) {
        Some(k) => k as u64,
        None => {
            all.push(s);
            (all.len() - 1) as u64
        }
    }
}

/// The regions table of a regions record (format 4) for `program`, a root `concat`
/// restoring `restored` (little-endian bytes): each child's words, program bytes and the
/// checksum of its bytes (0 when `restored` is `None`: the table's length is the same),
/// so that a damaged child costs its own bytes only. `None` for a program of another
/// root.
fn region_heads(program: &Node, restored: Option<&[u8]>) -> Option<Vec<format::RegionHead>> {
    let crate::dsl::Op::Concat(children) = program.op() else {
        return None;
    };
    let word_bytes = crate::tensor::container_bytes(program.ty().width);
    let mut at = 0usize;
    let mut out = Vec::with_capacity(children.len());
    for c in children {
        let n = c.ty().len as usize * word_bytes;
        let checksum = match restored {
            Some(r) => xxh3_64(r.get(at..at + n)?),
            None => 0,
        };
        out.push(format::RegionHead {
            words: c.ty().len,
            program_len: crate::dsl::program_len(c),
            checksum,
        });
        at += n;
    }
    Some(out)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{compress_file, no_progress, verify, CompressOptions};
    use crate::tensor::Words;

    /// `dir/m.brv`, compressed with the defaults from two tensors of two dtypes (records
    /// of their own): `a`, a U8 ramp 0..8, and `b`, four I8 nines.
    fn two_tensor_archive(dir: &Path) -> std::path::PathBuf {
        let header = br#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"I8","shape":[4],"data_offsets":[8,12]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0, 1, 2, 3, 4, 5, 6, 7, 9, 9, 9, 9]);
        let input = dir.join("m.safetensors");
        fs::write(&input, &file).unwrap();
        let brv = dir.join("m.brv");
        compress_file(&input, &brv, &CompressOptions::default(), &no_progress).unwrap();
        brv
    }

    #[test]
    fn a_replaced_program_round_trips_and_other_records_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let brv = two_tensor_archive(dir.path());
        let old = Archive::open(&brv).unwrap();
        let lit = Node::lit(&Words::from_u64s(8, &[0, 1, 2, 3, 4, 5, 6, 7]));
        let out = dir.path().join("m.new.brv");
        let len = rewrite_with_programs(&brv, &out, &[(0, lit.clone())], None, false).unwrap();
        let new = Archive::open(&out).unwrap();
        assert_eq!(new.archive_len(), len);
        assert_eq!(new.program(0).unwrap(), lit);
        assert_eq!(new.program(1).unwrap(), old.program(1).unwrap());
        assert!(verify(&new, Some(1), &no_progress).unwrap().is_ok());
        // Never over an existing file unless allowed, and never a wrong program.
        assert!(matches!(
            rewrite_with_programs(&brv, &brv, &[(0, lit.clone())], None, false),
            Err(Error::SameFile { .. })
        ));
        assert!(matches!(
            rewrite_with_programs(&brv, &out, &[(0, lit)], None, false),
            Err(Error::OutputExists { .. })
        ));
        let wrong = Node::lit(&Words::from_u64s(8, &[0, 1, 2, 3, 4, 5, 6, 8]));
        let other = dir.path().join("bad.brv");
        assert!(matches!(
            rewrite_with_programs(&brv, &other, &[(0, wrong)], None, false),
            Err(Error::Mismatch { .. })
        ));
        assert!(!other.exists());
    }

    /// The settings given are recorded for the replaced record only; a rewrite without
    /// settings keeps every record's own.
    #[test]
    fn a_replaced_record_records_the_settings_that_built_it() {
        let dir = tempfile::tempdir().unwrap();
        let brv = two_tensor_archive(dir.path());
        let built = Archive::open(&brv).unwrap().tensors()[1].settings;
        assert_eq!(built.map(|s| s.budget), Some(1));
        let searched = format::Settings {
            budget: 4096,
            max_depth: 6,
            max_nodes: 64,
            prior: format::PriorKind::Given,
            prior_digest: 0x0123_4567_89ab_cdef,
            level: Some(crate::synth::Level::Max),
        };
        let lit = Node::lit(&Words::from_u64s(8, &[0, 1, 2, 3, 4, 5, 6, 7]));
        let out = dir.path().join("m.new.brv");
        rewrite_with_programs(&brv, &out, &[(0, lit.clone())], Some(searched), false).unwrap();
        let new = Archive::open(&out).unwrap();
        assert_eq!(new.tensors()[0].settings, Some(searched));
        assert_eq!(new.tensors()[1].settings, built);
        let kept = dir.path().join("m.kept.brv");
        rewrite_with_programs(&brv, &kept, &[(0, lit)], None, false).unwrap();
        assert_eq!(Archive::open(&kept).unwrap().tensors()[0].settings, built);
    }

    /// [`rewritten_len`] says the length the rewrite writes, new settings entries and
    /// all, for each tensor's own settings.
    #[test]
    fn the_length_of_a_rewrite_is_known_before_it_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let brv = two_tensor_archive(dir.path());
        let old = Archive::open(&brv).unwrap();
        let a = Node::lit(&Words::from_u64s(8, &[0, 1, 2, 3, 4, 5, 6, 7]));
        let b = Node::constant(crate::dsl::Ty::new(8, 4), 9).unwrap();
        let s = |budget| format::Settings {
            budget,
            max_depth: 4,
            max_nodes: 64,
            prior: format::PriorKind::Uniform,
            prior_digest: 0,
            level: (budget == 1).then_some(crate::synth::Level::Default),
        };
        let cases: Vec<Vec<(usize, &Node, Option<format::Settings>)>> = vec![
            vec![(0, &a, None)],
            vec![(0, &a, Some(s(32)))],
            vec![(0, &a, Some(s(32))), (1, &b, Some(s(32)))],
            vec![(0, &a, Some(s(300))), (1, &b, Some(s(1)))],
            vec![(1, &b, None)],
        ];
        for (k, c) in cases.iter().enumerate() {
            let out = dir.path().join(format!("m{k}.brv"));
            let written = rewrite_with_each(&brv, &out, c, false).unwrap();
            assert_eq!(rewritten_len(&old, c).unwrap(), written, "case {k}");
            let new = Archive::open(&out).unwrap();
            for &(i, _, s) in c {
                let want = s.or(old.tensors()[i].settings);
                assert_eq!(new.tensors()[i].settings, want, "case {k}");
            }
        }
    }
}
