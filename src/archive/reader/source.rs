//! An archive as the source of another archive's reference records: a base given as a
//! `.brv` file, or a sibling shard of a compressed folder, its tensors decoded on demand.

use super::Archive;
use crate::archive::base::{is_archive_file, DecodeSource, OpenedSource, SourceTensor};
use crate::error::{Error, Result};
use std::path::Path;

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
