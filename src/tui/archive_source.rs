//! The real [`Source`]: an opened `.brv` archive. Opening reads only the index and record
//! headers ([`Archive::open`]); programs are read and run when a view asks for them, and
//! verification goes through the library's [`verify_until`] (the CLI's `verify` with a
//! stop between tensors).

use super::model::{Check, RecordInfo, Sharing, Source, TensorRow, VerifyOutcome};
use crate::archive::reader::Item;
use crate::archive::{rewrite_with_each, verify_until, Archive, CheckStatus, ProgressEvent};
use crate::dsl::Node;
use std::cell::Cell;
use std::path::Path;

/// An opened archive and its table rows.
pub struct ArchiveSource {
    archive: Archive,
    rows: Vec<TensorRow>,
}

impl ArchiveSource {
    /// Opens the archive at `path` (memory-mapped, nothing decoded).
    ///
    /// # Errors
    /// The library's error as a readable line when the file cannot be read or is not a
    /// valid archive.
    pub fn open(path: &Path) -> Result<ArchiveSource, String> {
        let a = Archive::open(path).map_err(|e| e.to_string())?;
        if let Some(b) = super::super::tui::session_base() {
            a.attach_base(b).map_err(|e| e.to_string())?;
        }
        Ok(ArchiveSource::new(a))
    }

    /// Wraps an opened archive.
    pub fn new(archive: Archive) -> ArchiveSource {
        let rows = archive
            .tensors()
            .iter()
            .map(|t| TensorRow {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                original_bytes: t.original_bytes(),
                archive_bytes: t.archive_bytes(),
                root_op: match t.reference {
                    Some(r) => format!(
                        "{}-{}",
                        r.op.name(),
                        archive.sources()[r.source].role.name()
                    ),
                    None => t.root_op.to_string(),
                },
            })
            .collect();
        ArchiveSource { archive, rows }
    }

    /// The archive.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }
}

impl Source for ArchiveSource {
    fn path(&self) -> Option<std::path::PathBuf> {
        Some(self.archive.path().to_path_buf())
    }

    fn rewrite(
        &self,
        dst: &Path,
        changes: &[(usize, &Node, Option<crate::archive::format::Settings>)],
        overwrite: bool,
    ) -> Result<u64, String> {
        rewrite_with_each(self.archive.path(), dst, changes, overwrite).map_err(|e| e.to_string())
    }

    fn rewritten_len(
        &self,
        changes: &[(usize, &Node, Option<crate::archive::format::Settings>)],
    ) -> Result<u64, String> {
        crate::archive::rewritten_len(&self.archive, changes).map_err(|e| e.to_string())
    }

    fn why(
        &self,
        progress: &dyn Fn(u64, u64, &str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<Option<crate::job::why::WhyReport>, String> {
        Ok(crate::job::why::analyse(&self.archive, progress, cancel))
    }

    fn record(&self, i: usize) -> Option<RecordInfo> {
        let t = self.archive.tensors().get(i)?;
        let record_bytes = t.record.len() as u64;
        let (sharing, program_bytes) = if t.record.is_empty() {
            (Sharing::Empty, 0)
        } else if let Some(of) = t.copy_of {
            (Sharing::Copy { of }, 0)
        } else if let Some(g) = t.group.and_then(|g| self.archive.groups().get(g)) {
            let sharing = Sharing::Group {
                tensors: g.tensors.len(),
                members: g.tensors.clone().collect(),
                share: t.archive_bytes(),
                group_original: g.end - g.begin,
            };
            (sharing, t.program.len() as u64)
        } else if let Some(r) = t.reference {
            let e = &self.archive.sources()[r.source];
            let source = self.archive.attached(r.source);
            let tensor = source
                .and_then(|s| s.tensors().get(r.tensor as usize))
                .map_or_else(|| format!("#{}", r.tensor), |t| t.name.clone());
            let sharing = Sharing::Reference {
                op: r.op.name(),
                role: e.role.name(),
                source: e.name.clone(),
                tensor,
                attached: source.is_some(),
            };
            (sharing, t.program.len() as u64)
        } else {
            (Sharing::Own, t.program.len() as u64)
        };
        let rest = record_bytes.saturating_sub(program_bytes);
        // Format 4 frames a record (marker and kind, length, item count) where earlier
        // formats had its kind byte.
        let (head, head_bytes) = if self.archive.version() >= 4 {
            (
                "record frame: kind, length, items",
                self.archive.record_frame_bytes(i),
            )
        } else {
            ("record kind", 1)
        };
        let after = rest.saturating_sub(head_bytes);
        let regions = self.archive.tensor_regions(i).len();
        let framing = match (self.archive.version(), &sharing) {
            (_, Sharing::Empty) => Vec::new(),
            (1, _) => vec![(
                "record kind, name, dtype, shape, offsets, checksum, program length",
                rest,
            )],
            (_, Sharing::Copy { .. }) => {
                vec![(head, head_bytes), ("index of the copied record", after)]
            }
            (_, Sharing::Reference { .. }) => vec![
                (head, head_bytes),
                ("checksum of the bytes it restores", 8),
                (
                    "source, tensor, its checksum and op",
                    after.saturating_sub(8),
                ),
            ],
            _ if regions > 0 => vec![
                (head, head_bytes),
                ("checksum of the bytes it restores", 8),
                (
                    "its regions' words, program lengths and checksums",
                    after.saturating_sub(8),
                ),
            ],
            _ => vec![
                (head, head_bytes),
                ("checksum of the bytes it restores", after),
            ],
        };
        Some(RecordInfo {
            record_bytes,
            program_bytes,
            framing,
            sharing,
            settings: t.settings,
        })
    }

    fn reopen(&self) -> Result<std::sync::Arc<dyn Source>, String> {
        let a = Archive::open(self.archive.path()).map_err(|e| e.to_string())?;
        // The sources attached now stay attached.
        for i in 0..a.sources().len() {
            if let Some(s) = self.archive.attached(i) {
                a.attach(i, s.clone()).map_err(|e| e.to_string())?;
            }
        }
        Ok(std::sync::Arc::new(ArchiveSource::new(a)))
    }

    fn title(&self) -> String {
        self.archive.path().display().to_string()
    }

    fn rows(&self) -> &[TensorRow] {
        &self.rows
    }

    fn file_sizes(&self) -> (u64, u64) {
        (self.archive.original_len(), self.archive.archive_len())
    }

    fn program(&self, i: usize) -> Result<Node, String> {
        self.archive.program(i).map_err(|e| e.to_string())
    }

    fn decode(&self, i: usize) -> Result<Vec<u8>, String> {
        self.archive.decode_tensor(i).map_err(|e| e.to_string())
    }

    fn decode_record(&self, i: usize) -> Result<Vec<u8>, String> {
        let group = self.archive.tensors().get(i).and_then(|t| t.group);
        match group.and_then(|g| self.archive.groups().get(g)) {
            Some(g) => {
                let mut out = Vec::new();
                for t in g.tensors.clone() {
                    out.extend(self.decode(t)?);
                }
                Ok(out)
            }
            None => self.decode(i),
        }
    }

    fn context(&self, i: usize) -> Option<crate::tensor::Words> {
        self.archive.base_words(i).ok().flatten()
    }

    fn verify_tensor(&self, i: usize) -> Check {
        match self.archive.decode_tensor(i) {
            Ok(_) => Check::Exact,
            Err(e) if e.is_mismatch() => Check::Mismatch(e.to_string()),
            Err(e) => Check::Failed(e.to_string()),
        }
    }

    fn verify_all(
        &self,
        progress: &dyn Fn(u64, u64, &str),
        cancel: &dyn Fn() -> bool,
    ) -> VerifyOutcome {
        let total = Cell::new(0u64);
        let done = Cell::new(0u64);
        let report = verify_until(
            &self.archive,
            None,
            &|ev| match ev {
                ProgressEvent::Begin { items, .. } => {
                    total.set(items as u64);
                    progress(0, items as u64, "");
                }
                ProgressEvent::Item { label, .. } => {
                    done.set(done.get() + 1);
                    progress(done.get(), total.get(), label);
                }
                ProgressEvent::End => {}
            },
            cancel,
        );
        let mut out = VerifyOutcome {
            tensor: None,
            tensors: self.rows.len(),
            exact: 0,
            failures: Vec::new(),
            whole_file: None,
            seconds: 0.0,
        };
        match report {
            Ok(None) => out.failures.push("cancelled".into()),
            Ok(Some(r)) => {
                // Tensors each region restores: one, a group's, or none (the header, a
                // gap). The report has one check per item, in item order.
                let items = self.archive.items();
                let tensors_in =
                    |k: usize, c: &crate::archive::verify::RegionCheck| match items.get(k) {
                        _ if items.len() != r.regions.len() => usize::from(c.tensor.is_some()),
                        Some(Item::Tensor(_)) => 1,
                        Some(Item::Group(g)) => {
                            self.archive.groups().get(*g).map_or(0, |g| g.tensors.len())
                        }
                        _ => 0,
                    };
                // Empty tensors have no record: nothing to decode, nothing to differ.
                out.exact += self
                    .archive
                    .tensors()
                    .iter()
                    .filter(|t| t.record.is_empty())
                    .count();
                for (k, c) in r.regions.iter().enumerate() {
                    match &c.status {
                        CheckStatus::Ok => out.exact += tensors_in(k, c),
                        CheckStatus::Mismatch { expected, actual } => out.failures.push(format!(
                            "{}: checksum mismatch: stored {expected:016x}, decoded {actual:016x}",
                            c.region
                        )),
                        CheckStatus::Undecodable { what } => out
                            .failures
                            .push(format!("{}: cannot decode: {what}", c.region)),
                    }
                }
                out.whole_file = Some(r.file_checksum_ok);
            }
            Err(e) => out.failures.push(e.to_string()),
        }
        out
    }
}
