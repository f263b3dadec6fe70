//! Sources and archives, both ways: the sources an archive's reference records are coded
//! against (attached, required, their tensors' bytes), and an archive as the source of
//! another (a base given as a `.brv` file, or a sibling shard of a compressed folder, its
//! tensors decoded on demand).

use super::entries::{Item, Reference};
use super::Archive;
use crate::archive::base::{is_archive_file, BaseSet, DecodeSource, OpenedSource, SourceTensor};
use crate::archive::format::{SourceEntry, SourceRole};
use crate::error::{Error, Result};
use crate::hash::xxh3_64;
use std::path::Path;
use std::sync::{Arc, OnceLock};

impl DecodeSource for Archive {
    fn decode_source_tensor(&self, t: usize) -> Result<Vec<u8>> {
        Archive::decode_source_tensor(self, t)
    }
}

impl OpenedSource {
    /// Opens a `.safetensors` file (memory-mapped, parsed, hashed whole) or a Brevis
    /// archive of one (its length and checksum read from its index; nothing decoded).
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Source`] if a `.safetensors` file is
    /// not valid; [`Error::Archive`] if an archive is damaged; [`Error::Invalid`] of kind
    /// `wrong_base` for an archive that is itself coded against sources.
    pub fn open(path: &Path) -> Result<OpenedSource> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if is_archive_file(path) {
            let a = Archive::open(path)?;
            if !a.sources().is_empty() {
                return Err(Error::Invalid {
                    path: path.to_path_buf(),
                    what: "cannot be a base",
                    detail: "it is coded against a base of its own; give that archive's \
                             original (decompress it first)"
                        .to_string(),
                    kind: "wrong_base",
                });
            }
            return Ok(OpenedSource::from_archive(a, name));
        }
        OpenedSource::of_path(path, name)
    }

    /// A source read from archive `a` (another shard of a folder archive, say), named
    /// `name`: each tensor decoded when asked for. A tensor of `a` that is itself taken
    /// from a shard is refused then (sources are one level deep).
    pub fn from_archive(a: Archive, name: String) -> OpenedSource {
        let tensors = a
            .tensors()
            .iter()
            .map(|t| SourceTensor {
                name: t.name.clone(),
                dtype: t.dtype,
                shape: t.shape.clone(),
                bytes: t.original_bytes(),
            })
            .collect();
        OpenedSource::decoded(
            a.path().to_path_buf(),
            name,
            a.original_len(),
            a.file_checksum(),
            tensors,
            Box::new(a),
        )
    }
}

impl Archive {
    /// The source `i` attached to it, if any.
    pub fn attached(&self, i: usize) -> Option<&Arc<OpenedSource>> {
        self.links.get(i).and_then(OnceLock::get)
    }

    /// Attaches `source` as source `i` (of [`Archive::sources`]): what its reference
    /// records to it decode against. A source already attached stays.
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `wrong_base` naming `source`'s path if it is not the
    /// file the archive pins (its length or checksum differs), saying what differs.
    pub fn attach(&self, i: usize, source: Arc<OpenedSource>) -> Result<()> {
        let Some(entry) = self.head.sources.get(i) else {
            return Ok(());
        };
        if !source.matches(entry) {
            return Err(Error::Invalid {
                path: source.path().to_path_buf(),
                what: "is not the base this archive was made against",
                detail: format!(
                    "{} was coded against {} {:?} of {} bytes with xxh3 {:016x}; this file \
                     is {} bytes with xxh3 {:016x}",
                    crate::shown::shown_path(&self.path),
                    entry.role.name(),
                    entry.name,
                    entry.original_len,
                    entry.checksum,
                    source.original_len(),
                    source.checksum()
                ),
                kind: "wrong_base",
            });
        }
        let _ = self.links[i].set(source);
        Ok(())
    }

    /// Whether the archive lists a base checkpoint among its sources (role
    /// [`SourceRole::Base`]): its reference records need that base attached.
    pub fn needs_base(&self) -> bool {
        self.head.sources.iter().any(|e| e.role == SourceRole::Base)
    }

    /// Attaches the files of `base` to the archive's base sources: each to the base file
    /// of the same length and checksum (the name may differ).
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `wrong_base`, naming the base and what differs, when a
    /// base source has no such file in `base`.
    pub fn attach_base(&self, base: &BaseSet) -> Result<()> {
        for (i, entry) in self.head.sources.iter().enumerate() {
            if entry.role != SourceRole::Base || self.attached(i).is_some() {
                continue;
            }
            match base.sources.iter().find(|s| s.matches(entry)) {
                Some(s) => self.attach(i, s.clone())?,
                None => {
                    let named = base.sources.iter().find(|s| s.name() == entry.name);
                    let what = match named {
                        Some(s) => format!(
                            "its {:?} is {} bytes with xxh3 {:016x}",
                            s.name(),
                            s.original_len(),
                            s.checksum()
                        ),
                        None => format!(
                            "it holds no file of that length and checksum (nor one named \
                             {:?})",
                            entry.name
                        ),
                    };
                    return Err(Error::Invalid {
                        path: base.path().to_path_buf(),
                        what: "is not the base this archive was made against",
                        detail: format!(
                            "{} was coded against {:?} of {} bytes with xxh3 {:016x}; {what}",
                            crate::shown::shown_path(&self.path),
                            entry.name,
                            entry.original_len,
                            entry.checksum
                        ),
                        kind: "wrong_base",
                    });
                }
            }
        }
        Ok(())
    }

    /// Refuses to go on while a source some record is coded against is not attached:
    /// what `decompress`, `verify` and `extract` check before anything is written.
    ///
    /// # Errors
    /// [`Error::Invalid`] of kind `base_missing` naming the archive and the source
    /// (`--base` for a base; the folder for a sibling shard).
    pub fn require_sources(&self) -> Result<()> {
        for (i, e) in self.head.sources.iter().enumerate() {
            if self.attached(i).is_none() {
                return Err(self.missing_source(e));
            }
        }
        Ok(())
    }

    /// [`Archive::require_sources`] for a salvage: the base must be given (a user's
    /// omission, said before anything is written), but another shard of a folder may be
    /// missing (too damaged to open), which costs only the tensors taken from it.
    ///
    /// # Errors
    /// As [`Archive::require_sources`], for a base source only.
    pub fn require_base(&self) -> Result<()> {
        for (i, e) in self.head.sources.iter().enumerate() {
            if e.role == SourceRole::Base && self.attached(i).is_none() {
                return Err(self.missing_source(e));
            }
        }
        Ok(())
    }

    pub(super) fn missing_source(&self, e: &SourceEntry) -> Error {
        let hint = match e.role {
            SourceRole::Base => {
                "pass it with --base (a .safetensors file, a checkpoint \
                                 folder or an archive of it)"
            }
            SourceRole::Shard => {
                "it is another shard of the folder archive: open the folder, \
                                  not the shard alone"
            }
        };
        Error::Invalid {
            path: self.path.clone(),
            what: "needs its base",
            detail: format!(
                "it is coded against {} {:?} ({} bytes, xxh3 {:016x}), which is not given; {hint}",
                e.role.name(),
                e.name,
                e.original_len,
                e.checksum
            ),
            kind: "base_missing",
        }
    }

    /// The bytes tensor `t` restores, for an archive used as a source
    /// ([`OpenedSource`]): as [`Archive::decode_tensor`], refusing a tensor that is
    /// itself coded against another shard (sources are one level deep).
    pub(crate) fn decode_source_tensor(&self, t: usize) -> Result<Vec<u8>> {
        let e = self.tensor(t)?;
        if let Some(r) = e.reference {
            if self.head.sources[r.source].role == SourceRole::Shard {
                return Err(self.decode_err(
                    Item::Tensor(t),
                    "a tensor taken from another shard is itself taken from a shard",
                ));
            }
        }
        self.decode_tensor(t)
    }

    /// The source tensor's bytes of a reference record of `item`, checked: the source
    /// attached, the tensor there, of the record's byte length and checksum.
    pub(super) fn source_bytes(
        &self,
        item: Item,
        r: &Reference,
        bytes: u64,
    ) -> Result<std::borrow::Cow<'_, [u8]>> {
        let entry = &self.head.sources[r.source];
        let src = self
            .attached(r.source)
            .ok_or_else(|| self.missing_source(entry))?;
        let t = usize::try_from(r.tensor)
            .ok()
            .filter(|&t| t < src.tensors().len())
            .ok_or_else(|| {
                self.decode_err(
                    item,
                    format!(
                        "coded against tensor #{} of {:?}, which has {}",
                        r.tensor,
                        entry.name,
                        src.tensors().len()
                    ),
                )
            })?;
        let info = &src.tensors()[t];
        if info.bytes != bytes {
            return Err(self.decode_err(
                item,
                format!(
                    "coded against {:?} of {:?}, of {} bytes, but restores {bytes}",
                    info.name, entry.name, info.bytes
                ),
            ));
        }
        let data = src.tensor_bytes(t)?;
        if src.hashed_whole() {
            // Attached only once the whole file's length and xxh3 matched the archive's
            // pin (`attach`), so the tensor is the one the record was coded against;
            // hashing it again cost a tenth of decoding a fine-tune (whisper-tiny-en-f16's
            // merged LoRA). A file changed since is caught by the restored file's checksum.
            return Ok(data);
        }
        let actual = xxh3_64(&data);
        if actual != r.source_checksum {
            return Err(Error::Invalid {
                path: src.path().to_path_buf(),
                what: "is not the base this archive was made against",
                detail: format!(
                    "its tensor {:?} has xxh3 {actual:016x}; {} needs {:016x}",
                    info.name,
                    crate::shown::shown_path(&self.path),
                    r.source_checksum
                ),
                kind: "wrong_base",
            });
        }
        Ok(data)
    }
}
