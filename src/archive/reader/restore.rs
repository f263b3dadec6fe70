//! Restoring the original file from an archive: streamed in order, checked against the
//! whole-file checksum (then region by region to name a damaged one), and with
//! `--salvage`, every region that does not restore zero-filled and listed.

use super::entries::{DamagedRegion, DecompressOptions, DecompressSummary, Item};
use super::stream::{self, Decoded};
use super::Archive;
use crate::archive::pool::resolve_jobs;
use crate::archive::progress::ProgressEvent;
use crate::error::{ArchiveError, Error, Result};
use crate::files::{
    check_output, open_direct, persist, temp_beside, write_all_at, SyncAhead, Target,
};
use crate::hash::Xxh3;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

impl Archive {
    /// Streams the original file into `out`: the 8-byte header length, the header, then
    /// every region, decoded in parallel on `jobs` threads (`None` = all cores) and
    /// checked against the whole-file checksum; when that does not match, the archive is
    /// decoded once more with each region checked against its own checksum, so that the
    /// error names the region (one hash of every byte on the way that succeeds, not two).
    /// Memory stays bounded by the largest region (or region part) and the thread count,
    /// not the archive's size (see `src/archive/stream.rs`); `out` receives chunks of at
    /// most 1 MiB.
    ///
    /// # Errors
    /// [`Error::Archive`] if a program is malformed; [`Error::Mismatch`] if decoded bytes
    /// differ from a stored checksum (naming the first region that differs, or the whole
    /// file when every region matched); [`Error::Io`] (labelled `name`) if `out` fails.
    /// After an error `out` holds a partial or wrong file.
    pub fn write_original<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
    ) -> Result<()> {
        self.require_sources()?;
        match self.write_checked(out, jobs, progress, name, false) {
            Err(whole @ Error::Mismatch { .. }) => {
                // Which region differs: the cold path of a damaged archive.
                self.write_checked(&mut std::io::sink(), jobs, &|_| {}, name, true)?;
                Err(whole)
            }
            r => r,
        }
    }

    /// [`Archive::write_original`]'s pass: the whole file hashed, and with `each_region`
    /// every region too (its mismatch returned first).
    fn write_checked<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
        each_region: bool,
    ) -> Result<()> {
        let write_err = |e| Error::io(name, "cannot write", e);
        let mut hasher = Xxh3::new();
        let mut region = Xxh3::new();
        stream::decode_all_with_progress(
            self,
            resolve_jobs(jobs),
            progress,
            &mut |d| {
                match d {
                    Decoded::Begin(unit) => {
                        if unit.first {
                            region.reset();
                            if unit.item == Item::Header {
                                let field = self.head.header_len.to_le_bytes();
                                hasher.update(&field);
                                out.write_all(&field).map_err(write_err)?;
                            }
                        }
                    }
                    Decoded::Bytes(b) => {
                        if each_region {
                            region.update(b);
                        }
                        hasher.update(b);
                        out.write_all(b).map_err(write_err)?;
                    }
                    Decoded::End(unit) if each_region => {
                        let (expected, actual) = (self.item_checksum(unit.item), region.digest());
                        if unit.last && actual != expected {
                            return Err(Error::Mismatch {
                                path: self.path.clone(),
                                region: self.item_region(unit.item),
                                expected,
                                actual,
                            });
                        }
                    }
                    Decoded::End(_) => {}
                    Decoded::Failed(_, e) => return Err(e),
                }
                Ok(())
            },
            &|| false,
        )?;
        let actual = hasher.digest();
        if actual != self.head.file_checksum {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: "whole file".to_string(),
                expected: self.head.file_checksum,
                actual,
            });
        }
        Ok(())
    }

    /// Restores the original file at `output` through a temporary file in its folder,
    /// synced and renamed into place only when every checksum matched (with
    /// [`DecompressOptions::salvage`]: whatever was damaged, once the damaged regions
    /// are zero-filled).
    ///
    /// # Errors
    /// [`Error::SameFile`] if `output` is this archive; [`Error::OutputExists`] if it
    /// exists and `opts.force` is false; otherwise as [`Archive::write_original`] (with
    /// salvage, as [`Archive::write_salvaged`]).
    pub fn decompress_to(
        &self,
        output: &Path,
        opts: &DecompressOptions,
        progress: &dyn Fn(ProgressEvent<'_>),
    ) -> Result<DecompressSummary> {
        if let Some(base) = &opts.base {
            self.attach_base(base)?;
        }
        if opts.salvage {
            self.require_base()?;
        } else {
            self.require_sources()?;
        }
        check_output(&self.path, output, opts.force)?;
        let evict = crate::files::EvictReplaced::start(output, opts.force);
        let mut tmp = temp_beside(output)?;
        // The records are hashed on a thread of their own while the file is restored
        // (one more pass over the archive, which at the end took 5% of a decompression).
        let stop = AtomicBool::new(false);
        let (records_intact, damaged) = std::thread::scope(|scope| -> Result<_> {
            let hashing = std::thread::Builder::new()
                .name("brevis-records".into())
                .spawn_scoped(scope, || self.records_intact_unless(&stop))
                .ok();
            let restored = (|| {
                let mut w = SyncAhead::new(tmp.as_file_mut());
                let damaged = if opts.salvage {
                    self.write_salvaged(&mut w, opts.jobs, progress, output, Salvage::Mark)?
                } else {
                    self.write_original(&mut w, opts.jobs, progress, output)?;
                    Vec::new()
                };
                w.finish(output)?;
                Ok(damaged)
            })();
            if restored.is_err() {
                // Nothing waits for the hash of an archive that did not restore.
                stop.store(true, Ordering::Relaxed);
            }
            let hashed = hashing.and_then(|h| h.join().ok().flatten());
            let damaged = restored?;
            Ok((hashed.unwrap_or_else(|| self.records_intact()), damaged))
        })?;
        if !damaged.is_empty() {
            zero_fill(tmp.as_file(), &damaged, output)?;
        }
        drop(evict);
        persist(tmp, output, opts.force)?;
        Ok(DecompressSummary {
            output: output.to_path_buf(),
            original_bytes: self.head.original_len,
            records_intact,
            damaged,
        })
    }

    /// [`Archive::decompress_to`] for any [`Target`]: a file as there, a character
    /// device or standard output written in order (checked all the same, but the bytes
    /// written before a damaged region was found stay written; with salvage, each
    /// region is held until it is proved, so nothing unproved is written).
    ///
    /// # Errors
    /// As [`Archive::decompress_to`]; [`Error::Io`] if the device cannot be opened.
    pub fn decompress_into(
        &self,
        target: &Target,
        opts: &DecompressOptions,
        progress: &dyn Fn(ProgressEvent<'_>),
    ) -> Result<DecompressSummary> {
        if let Target::File(output) = target {
            return self.decompress_to(output, opts, progress);
        }
        if let Some(base) = &opts.base {
            self.attach_base(base)?;
        }
        if opts.salvage {
            self.require_base()?;
        } else {
            self.require_sources()?;
        }
        let path = target.path();
        let mut w = open_direct(target)?;
        let damaged = if opts.salvage {
            self.write_salvaged(&mut w, opts.jobs, progress, path, Salvage::Hold)?
        } else {
            self.write_original(&mut w, opts.jobs, progress, path)?;
            Vec::new()
        };
        w.flush().map_err(|e| Error::io(path, "cannot write", e))?;
        Ok(DecompressSummary {
            output: path.to_path_buf(),
            original_bytes: self.head.original_len,
            records_intact: self.records_intact(),
            damaged,
        })
    }

    /// Writes what can be restored of a damaged archive to `out`, as `decompress
    /// --salvage` does ([`DecompressOptions::salvage`]): every region whose bytes match
    /// their checksum, and zeros for every other one (a tensor, group, gap or region of
    /// a large tensor that does not decode or does not match, or whose record an archive
    /// opened without its index lacks), each held in memory until it is checked. Returns
    /// the regions zero-filled, in file order (empty when the whole file restored).
    ///
    /// # Errors
    /// As [`Archive::write_salvaged`]: the header record does not restore (it names
    /// every tensor), `out` fails, or a source is not attached.
    pub fn salvage_to<W: Write>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
    ) -> Result<Vec<DamagedRegion>> {
        self.require_base()?;
        self.write_salvaged(out, jobs, progress, name, Salvage::Hold)
    }

    /// [`Archive::write_original`] that goes on past damage: a region (tensor, group or
    /// gap) whose program does not decode, or whose bytes do not match its checksum,
    /// is written as zeros of its length and returned as a [`DamagedRegion`]. With
    /// [`Salvage::Hold`] each region's bytes are held in memory until its checksum is
    /// checked (for an output that cannot be rewritten); with [`Salvage::Mark`] they
    /// are written at once and the caller must zero the returned ranges afterwards
    /// ([`zero_fill`]). The whole-file checksum is checked only when nothing is damaged.
    ///
    /// # Errors
    /// [`Error::Archive`] if the header record does not decode and
    /// [`Error::Mismatch`] if it does not match its checksum (nothing can be salvaged
    /// without it); [`Error::Mismatch`] for the whole file when every region matched
    /// but the file does not; [`Error::Io`] if `out` fails.
    pub(crate) fn write_salvaged<W: Write + ?Sized>(
        &self,
        out: &mut W,
        jobs: Option<usize>,
        progress: &dyn Fn(ProgressEvent<'_>),
        name: &Path,
        mode: Salvage,
    ) -> Result<Vec<DamagedRegion>> {
        static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
        let write_err = |e| Error::io(name, "cannot write", e);
        let mut hasher = Xxh3::new();
        let mut region = Xxh3::new();
        let mut damaged = Vec::new();
        // The region being restored: where it starts in the file, its length (without
        // the header's length field), bytes of it seen so far, and why it is damaged.
        let mut start = 0u64;
        let mut len = 0u64;
        let mut seen = 0u64;
        let mut why: Option<String> = None;
        let mut held: Vec<u8> = Vec::new();
        let mut pos = 0u64;
        let header_failed = |e: Error| -> Error {
            match e {
                Error::Archive { path, source } => Error::Archive {
                    path,
                    source: ArchiveError::DamagedRecord {
                        what: format!(
                            "the header record does not decode ({source}); it names every \
                             tensor, so nothing can be salvaged"
                        ),
                    },
                },
                other => other,
            }
        };
        let zeros = |out: &mut W, mut n: u64, held: &mut Vec<u8>| -> Result<()> {
            while n > 0 {
                let k = n.min(ZEROS.len() as u64) as usize;
                match mode {
                    Salvage::Hold => held.extend_from_slice(&ZEROS[..k]),
                    Salvage::Mark => out.write_all(&ZEROS[..k]).map_err(write_err)?,
                }
                n -= k as u64;
            }
            Ok(())
        };
        // The unit being restored when it is one region of a regions record (format 4),
        // checked alone: its hash, bytes seen and why it is damaged; and whether a region
        // of the current item was found damaged (then the item's own checksum, which
        // covers that region, is not reported again).
        let mut unit_hash = Xxh3::new();
        let mut unit_seen = 0u64;
        let mut unit_why: Option<String> = None;
        let mut region_damaged = false;
        stream::decode_all_with_progress(
            self,
            resolve_jobs(jobs),
            progress,
            &mut |d| {
                let unit = match &d {
                    Decoded::Begin(u) | Decoded::End(u) | Decoded::Failed(u, _) => Some(*u),
                    Decoded::Bytes(_) => None,
                };
                let is_begin = matches!(d, Decoded::Begin(_));
                let is_end = matches!(d, Decoded::End(_));
                if let Some(u) = unit.filter(|u| u.first && !is_end) {
                    region.reset();
                    held.clear();
                    why = None;
                    seen = 0;
                    region_damaged = false;
                    len = self.item_original_bytes(u.item);
                    if u.item == Item::Header {
                        let field = self.head.header_len.to_le_bytes();
                        hasher.update(&field);
                        out.write_all(&field).map_err(write_err)?;
                        pos += 8;
                        len -= 8;
                    }
                    start = pos;
                }
                if unit.is_some_and(|u| u.check.is_some()) && !is_end {
                    unit_hash.reset();
                    unit_seen = 0;
                    unit_why = None;
                }
                match d {
                    Decoded::Begin(_) => {}
                    Decoded::Bytes(b) => {
                        // Never more than the region holds, whatever a program gives.
                        let room = (len - seen).min(b.len() as u64) as usize;
                        if room < b.len() && why.is_none() {
                            why = Some(format!("decodes to more than its {len} bytes"));
                        }
                        let b = &b[..room];
                        region.update(b);
                        unit_hash.update(b);
                        seen += room as u64;
                        unit_seen += room as u64;
                        match mode {
                            Salvage::Hold => held.extend_from_slice(b),
                            Salvage::Mark => {
                                hasher.update(b);
                                out.write_all(b).map_err(write_err)?;
                            }
                        }
                    }
                    Decoded::Failed(u, e) => {
                        if u.item == Item::Header {
                            return Err(header_failed(e));
                        }
                        let reason = match self.lost_reason(u.item) {
                            Some(lost) => lost.to_string(),
                            None => e.to_string(),
                        };
                        if u.check.is_some() {
                            unit_why.get_or_insert(reason);
                        } else if why.is_none() {
                            why = Some(reason);
                        }
                        let n = u.bytes.min(len - seen);
                        zeros(out, n, &mut held)?;
                        seen += n;
                        unit_seen += n;
                    }
                    Decoded::End(_) => {}
                }
                // A region checked alone, at its end.
                if let Some(u) = unit.filter(|_| !is_begin) {
                    if let Some(c) = u.check {
                        if unit_why.is_none() && unit_seen < u.bytes {
                            unit_why =
                                Some(format!("decodes to {unit_seen} of its {} bytes", u.bytes));
                        }
                        let actual = unit_hash.digest();
                        if unit_why.is_none() && actual != c.checksum {
                            unit_why = Some(format!(
                                "checksum mismatch: stored {:016x}, decoded {actual:016x}",
                                c.checksum
                            ));
                        }
                        if let Some(reason) = unit_why.take() {
                            region_damaged = true;
                            let words = u.bytes
                                / crate::tensor::container_bytes(self.item_program(u.item).1.width)
                                    as u64;
                            damaged.push(DamagedRegion {
                                file: None,
                                region: format!(
                                    "{}, region {} of {} (words [{}, {}))",
                                    self.item_region(u.item),
                                    c.index + 1,
                                    c.count,
                                    c.first_word,
                                    c.first_word + words
                                ),
                                tensors: self.item_tensors(u.item),
                                offset: start + c.offset,
                                bytes: u.bytes,
                                reason,
                            });
                            if mode == Salvage::Hold {
                                let at = c.offset as usize;
                                let end = (at + u.bytes as usize).min(held.len());
                                held[at.min(end)..end].fill(0);
                            }
                        }
                    }
                }
                let Some(u) = unit.filter(|u| u.last && !is_begin) else {
                    return Ok(());
                };
                if seen < len {
                    if why.is_none() {
                        why = Some(format!("decodes to {seen} of its {len} bytes"));
                    }
                    zeros(out, len - seen, &mut held)?;
                }
                let (expected, actual) = (self.item_checksum(u.item), region.digest());
                if why.is_none() && !region_damaged && actual != expected {
                    if u.item == Item::Header {
                        return Err(Error::Mismatch {
                            path: self.path.clone(),
                            region: "header (it names every tensor, so nothing can be salvaged)"
                                .to_string(),
                            expected,
                            actual,
                        });
                    }
                    why = Some(format!(
                        "checksum mismatch: stored {expected:016x}, decoded {actual:016x}"
                    ));
                }
                if let Some(reason) = why.take() {
                    // Damage found in the item as a whole: all of it is zero-filled
                    // (what its regions reported is part of it).
                    damaged.retain(|d: &DamagedRegion| d.offset < start || d.offset >= start + len);
                    damaged.push(DamagedRegion {
                        file: None,
                        region: self.item_region(u.item),
                        tensors: self.item_tensors(u.item),
                        offset: start,
                        bytes: len,
                        reason,
                    });
                    if mode == Salvage::Hold {
                        held.clear();
                        held.resize(len as usize, 0);
                    }
                }
                if mode == Salvage::Hold {
                    hasher.update(&held);
                    out.write_all(&held).map_err(write_err)?;
                    held.clear();
                }
                pos = start + len;
                Ok(())
            },
            &|| false,
        )?;
        let actual = hasher.digest();
        // An archive opened without its index has no whole-file checksum to check.
        if damaged.is_empty() && self.head.indexless.is_none() && actual != self.head.file_checksum
        {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: "whole file".to_string(),
                expected: self.head.file_checksum,
                actual,
            });
        }
        Ok(damaged)
    }
}

/// How [`Archive::write_salvaged`] keeps unproved bytes out of its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Salvage {
    /// Hold each region in memory until its checksum is checked (standard output).
    Hold,
    /// Write at once; the caller zeroes the damaged ranges afterwards ([`zero_fill`]).
    Mark,
}

/// Overwrites the bytes of every damaged region in the complete restored `file` with
/// zeros, then syncs it.
///
/// # Errors
/// [`Error::Io`] naming `name` if a write or the sync fails.
fn zero_fill(file: &File, damaged: &[DamagedRegion], name: &Path) -> Result<()> {
    static ZEROS: [u8; 1 << 16] = [0; 1 << 16];
    for d in damaged {
        let mut at = d.offset;
        let end = d.offset + d.bytes;
        while at < end {
            let k = (end - at).min(ZEROS.len() as u64) as usize;
            write_all_at(file, &ZEROS[..k], at).map_err(|e| Error::io(name, "cannot write", e))?;
            at += k as u64;
        }
    }
    file.sync_all()
        .map_err(|e| Error::io(name, "cannot sync", e))
}
