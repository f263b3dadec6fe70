//! Verification (DESIGN §7, §9): prove a decode bit-exact from the stored checksums alone,
//! or byte-compare it with the original file. The CLI and the TUI both call these.

use super::pool::resolve_jobs;
use super::progress::ProgressEvent;
use super::reader::stream::{self, decode_all, Decoded};
use super::reader::{Archive, Item};
use crate::error::{Error, Result};
use crate::hash::Xxh3;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Outcome of decoding one region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    /// The decoded bytes match the stored checksum.
    Ok,
    /// The decoded bytes differ from the stored checksum.
    Mismatch {
        /// Checksum (xxh3-64) stored in the archive.
        expected: u64,
        /// Checksum of the decoded bytes.
        actual: u64,
    },
    /// The program could not be read or run.
    Undecodable {
        /// Why.
        what: String,
    },
}

/// One region's check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionCheck {
    /// `header`, `tensor "name"` or `gap at data bytes [b, e)`.
    pub region: String,
    /// Index in [`Archive::tensors`] for a tensor, else `None`.
    pub tensor: Option<usize>,
    /// Original bytes of the region.
    pub bytes: u64,
    /// The outcome.
    pub status: CheckStatus,
}

/// What [`verify`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// One check per record, in archive order (header first).
    pub regions: Vec<RegionCheck>,
    /// Whether the whole restored file matches the stored whole-file checksum (false if
    /// any region could not be decoded).
    pub file_checksum_ok: bool,
    /// Whether the archive's records (names, shapes, offsets, programs) are intact, by
    /// the archive's own checksum of them.
    pub records_intact: bool,
    /// Length of the original file in bytes.
    pub original_bytes: u64,
}

impl VerifyReport {
    /// Whether every region and the whole file matched.
    pub fn is_ok(&self) -> bool {
        self.file_checksum_ok
            && self.records_intact
            && self.regions.iter().all(|r| r.status == CheckStatus::Ok)
    }

    /// The regions that did not match.
    pub fn failures(&self) -> impl Iterator<Item = &RegionCheck> {
        self.regions.iter().filter(|r| r.status != CheckStatus::Ok)
    }
}

/// Decodes every region of `archive` on `jobs` threads (`None` = all cores) and compares
/// it with the stored per-region and whole-file checksums. Damage is reported in the
/// [`VerifyReport`], not as an error.
///
/// # Errors
/// [`Error::Internal`] only if the worker pool cannot start or a worker panics.
pub fn verify(
    archive: &Archive,
    jobs: Option<usize>,
    progress: &dyn Fn(ProgressEvent<'_>),
) -> Result<VerifyReport> {
    let report = verify_until(archive, jobs, progress, &|| false)?;
    Ok(report.expect("never stopped"))
}

/// [`verify`] that can be stopped: `stop` is polled before each region is checked (in
/// record order, between tensors), and once it returns true no further region is
/// reported and `Ok(None)` is returned (the few regions already being decoded on the
/// pool finish first; the rest are skipped).
///
/// # Errors
/// As [`verify`].
pub fn verify_until(
    archive: &Archive,
    jobs: Option<usize>,
    progress: &dyn Fn(ProgressEvent<'_>),
    stop: &dyn Fn() -> bool,
) -> Result<Option<VerifyReport>> {
    archive.require_sources()?;
    let items = archive.items();
    let mut regions = Vec::with_capacity(items.len());
    let mut hasher = Xxh3::new();
    let mut region = Xxh3::new();
    let mut whole_ok = true;
    // The region whose decoding failed: its other units are ignored.
    let mut failed: Option<Item> = None;
    let mut skipping = false;
    progress(ProgressEvent::Begin {
        items: items.len(),
        bytes: archive.original_len(),
    });
    let mut report = |item: Item, status: CheckStatus| {
        let bytes = archive.item_original_bytes(item);
        progress(ProgressEvent::Item {
            label: archive.item_label(item),
            bytes,
        });
        regions.push(RegionCheck {
            region: archive.item_region(item),
            tensor: match item {
                Item::Tensor(i) => Some(i),
                _ => None,
            },
            bytes,
            status,
        });
    };
    let done = decode_all(
        archive,
        resolve_jobs(jobs),
        &mut |d| {
            match d {
                Decoded::Begin(unit) => {
                    skipping = failed == Some(unit.item);
                    if unit.first {
                        region.reset();
                        if unit.item == Item::Header {
                            hasher.update(&archive.header_len().to_le_bytes());
                        }
                    }
                }
                Decoded::Bytes(b) => {
                    if !skipping {
                        region.update(b);
                        hasher.update(b);
                    }
                }
                Decoded::End(unit) => {
                    if unit.last && !skipping {
                        let expected = archive.item_checksum(unit.item);
                        let actual = region.digest();
                        let status = if actual == expected {
                            CheckStatus::Ok
                        } else {
                            CheckStatus::Mismatch { expected, actual }
                        };
                        report(unit.item, status);
                    }
                }
                Decoded::Failed(unit, e) => {
                    if failed != Some(unit.item) {
                        failed = Some(unit.item);
                        whole_ok = false;
                        let what = undecodable_reason(&e);
                        report(unit.item, CheckStatus::Undecodable { what });
                    }
                }
            }
            Ok(())
        },
        stop,
    )?;
    if !done {
        return Ok(None);
    }
    progress(ProgressEvent::End);
    Ok(Some(VerifyReport {
        regions,
        file_checksum_ok: whole_ok && hasher.digest() == archive.file_checksum(),
        records_intact: archive.records_intact(),
        original_bytes: archive.original_len(),
    }))
}

/// What [`verify_against`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareReport {
    /// Whether the decoded archive equals the file byte for byte.
    pub identical: bool,
    /// Offset of the first differing byte (or of the end of the shorter one).
    pub first_difference: Option<u64>,
    /// Length of the given file in bytes.
    pub file_bytes: u64,
    /// Length of the decoded archive in bytes.
    pub decoded_bytes: u64,
}

/// Decodes `archive` and compares it byte for byte with the file at `original`.
///
/// # Errors
/// [`Error::Io`] if `original` cannot be read; [`Error::Archive`] if a program cannot be
/// decoded (a checksum mismatch shows up as a difference, not an error).
pub fn verify_against(
    archive: &Archive,
    original: &Path,
    jobs: Option<usize>,
    progress: &dyn Fn(ProgressEvent<'_>),
) -> Result<CompareReport> {
    let file = File::open(original).map_err(|e| Error::io(original, "cannot open", e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(original, "cannot read", e))?;
    if meta.is_dir() {
        return Err(Error::io(
            original,
            "cannot compare with",
            std::io::Error::other("is a directory (a folder archive is compared with a folder)"),
        ));
    }
    let len = meta.len();
    // Read in order alongside the decoding, so neither side is held in memory.
    let mut theirs = std::io::BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::new();
    let mut at = 0u64;
    let mut first_difference: Option<u64> = None;
    let mut compare = |ours: &[u8], at: &mut u64| -> Result<()> {
        if first_difference.is_none() {
            buf.clear();
            (&mut theirs)
                .take(ours.len() as u64)
                .read_to_end(&mut buf)
                .map_err(|e| Error::io(original, "cannot read", e))?;
            let n = buf.len();
            if let Some(p) = ours[..n].iter().zip(&buf).position(|(a, b)| a != b) {
                first_difference = Some(*at + p as u64);
            } else if n < ours.len() {
                first_difference = Some(*at + n as u64);
            }
        }
        *at += ours.len() as u64;
        Ok(())
    };
    stream::decode_all_with_progress(
        archive,
        resolve_jobs(jobs),
        progress,
        &mut |d| match d {
            Decoded::Begin(unit) => {
                if unit.first && unit.item == Item::Header {
                    compare(&archive.header_len().to_le_bytes(), &mut at)?;
                }
                Ok(())
            }
            Decoded::Bytes(b) => compare(b, &mut at),
            Decoded::End(_) => Ok(()),
            Decoded::Failed(_, e) => Err(e),
        },
        &|| false,
    )?;
    let first_difference = first_difference.or((at != len).then_some(at.min(len)));
    Ok(CompareReport {
        identical: first_difference.is_none(),
        first_difference,
        file_bytes: len,
        decoded_bytes: at,
    })
}

/// The reason of a decode error, without the archive path (the report names it).
fn undecodable_reason(e: &Error) -> String {
    match e {
        Error::Archive { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// Where [`check_restores`] found the archive not to restore its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotRestored {
    /// The region (`tensor "w"`, `header`, `gap at data bytes [b, e)`, `whole file`)
    /// and, inside a group, the tensor holding the first wrong byte.
    pub region: String,
    /// What went wrong: the reader's refusal, or the first byte that differs.
    pub what: String,
}

/// Decodes `archive` as `decompress` does (the same reader, the same order of records,
/// copy and reference records through what they name) and compares the result with
/// `original` byte for byte: what `compress` runs on the archive it has just written,
/// before it puts it in place (issue 38: a copy record the reader refused had passed a
/// check of the writer's own programs). `Ok(None)` if every byte comes back.
///
/// # Errors
/// [`Error::Invalid`] of kind `base_missing` if a source of the archive is not attached;
/// [`Error::Internal`] if the pool cannot start or a worker panics. A record that cannot
/// be decoded is a [`NotRestored`], not an error.
pub fn check_restores(
    archive: &Archive,
    original: &[u8],
    jobs: Option<usize>,
) -> Result<Option<NotRestored>> {
    archive.require_sources()?;
    let mut at = 0usize;
    let mut found: Option<NotRestored> = None;
    let mut current = Item::Header;
    // The region of the item holding byte `offset` of the original, naming the tensor
    // of a group that holds it.
    let region_at = |item: Item, offset: usize| -> String {
        let region = archive.item_region(item);
        if let Item::Group(_) = item {
            let data = 8 + archive.header_len() as usize;
            if let Some(t) = offset.checked_sub(data).and_then(|o| {
                archive
                    .tensors()
                    .iter()
                    .find(|t| (t.begin..t.end).contains(&(o as u64)))
            }) {
                return format!("{region}, in tensor {:?}", t.name);
            }
        }
        region
    };
    let compare = |ours: &[u8], item: Item, at: &mut usize, found: &mut Option<NotRestored>| {
        if found.is_none() {
            let theirs = original.get(*at..).unwrap_or_default();
            let n = ours.len().min(theirs.len());
            let wrong = ours[..n]
                .iter()
                .zip(&theirs[..n])
                .position(|(a, b)| a != b)
                .or((n < ours.len()).then_some(n));
            if let Some(p) = wrong {
                *found = Some(NotRestored {
                    region: region_at(item, *at + p),
                    what: format!("byte {} of the file differs", *at + p),
                });
            }
        }
        *at += ours.len();
    };
    decode_all(
        archive,
        resolve_jobs(jobs),
        &mut |d| {
            match d {
                Decoded::Begin(unit) => {
                    current = unit.item;
                    if unit.first && unit.item == Item::Header {
                        compare(
                            &archive.header_len().to_le_bytes(),
                            unit.item,
                            &mut at,
                            &mut found,
                        );
                    }
                }
                Decoded::Bytes(b) => compare(b, current, &mut at, &mut found),
                Decoded::End(_) => {}
                Decoded::Failed(unit, e) => {
                    if found.is_none() {
                        found = Some(NotRestored {
                            region: archive.item_region(unit.item),
                            what: undecodable_reason(&e),
                        });
                    }
                }
            }
            Ok(())
        },
        &|| false,
    )?;
    if found.is_none() && at != original.len() {
        found = Some(NotRestored {
            region: "whole file".to_string(),
            what: format!("restores {at} bytes of {}", original.len()),
        });
    }
    Ok(found)
}
