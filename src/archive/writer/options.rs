//! What `compress` takes (its options, the files a checkpoint may be coded against) and
//! what it reports (a summary, one entry per region).

use crate::archive::base::{BaseSet, OpenedSource};
use crate::archive::format::{RefOp, SourceRole};
use crate::error::Warning;
use crate::synth::{PriorChoice, SearchOptions, SearchStats};
use crate::tensor::Dtype;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// How to compress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressOptions {
    /// Search budget and limits for every region.
    pub search: SearchOptions,
    /// Worker threads (`None` = all cores). The output does not depend on it.
    pub jobs: Option<usize>,
    /// Replace an existing output file.
    pub force: bool,
    /// Check every synthesized program against the source before writing it
    /// ([`crate::dsl::matches`]: exactly what running it and comparing says); a program
    /// that differs is replaced by a literal, with a warning.
    pub verify: bool,
    /// Production prior ordering the search; [`PriorChoice::Auto`] calibrates on the
    /// input (DESIGN §6) when the prior can change the result
    /// ([`SearchOptions::prior_matters`]). Never changes what a program serializes to.
    pub prior: PriorChoice,
    /// The source's file name, stored in the archive for `decompress` to restore (no
    /// folders). [`compress_file`](crate::archive::compress_file) sets it from its input when `None`.
    pub file_name: Option<String>,
    /// What the file's tensors may be coded against (a base checkpoint, earlier shards
    /// of its folder): an archive with any reference record is format version 3.
    pub links: Option<Arc<Links>>,
}

/// The files a `.safetensors` file's tensors may be coded against (docs/design.md §12).
#[derive(Clone, Debug, Default)]
pub struct Links {
    /// The base checkpoint (`--base`): each tensor with a counterpart there
    /// ([`BaseSet::counterparts`]) is coded alone, against it by XOR or by subtraction,
    /// whichever of the three is smallest.
    pub base: Option<Arc<BaseSet>>,
    /// Earlier shards of the same checkpoint folder.
    pub shards: Vec<Arc<OpenedSource>>,
    /// Each non-empty tensor of `shards` by (xxh3-64 of its bytes, byte length, dtype):
    /// its shard (an index into `shards`) and position. A tensor with the same bytes is
    /// stored as a reference to it (the first one listed wins).
    pub shard_tensors: HashMap<(u64, u64, Dtype), (usize, usize)>,
}

impl PartialEq for Links {
    fn eq(&self, other: &Links) -> bool {
        let sums = |l: &Links| {
            l.shards
                .iter()
                .map(|s| (s.original_len(), s.checksum()))
                .collect::<Vec<_>>()
        };
        self.base == other.base
            && sums(self) == sums(other)
            && self.shard_tensors == other.shard_tensors
    }
}

impl Eq for Links {}

impl Links {
    /// Links to a base checkpoint only.
    pub fn base(base: BaseSet) -> Links {
        Links {
            base: Some(Arc::new(base)),
            ..Links::default()
        }
    }
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            search: SearchOptions::default(),
            jobs: None,
            force: false,
            verify: true,
            prior: PriorChoice::Auto,
            file_name: None,
            links: None,
        }
    }
}

/// What kind of region a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The source's header (length field and JSON text).
    Header,
    /// A tensor.
    Tensor,
    /// Bytes of the data region that no tensor owns.
    Gap,
}

/// What compressing one region gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionStat {
    /// The kind of region.
    pub kind: RegionKind,
    /// The tensor's name, or `(header)` / `(gap)`.
    pub label: String,
    /// The tensor's dtype (`None` for header and gaps, which are bytes).
    pub dtype: Option<Dtype>,
    /// The tensor's shape (empty for header and gaps).
    pub shape: Vec<u64>,
    /// Bytes of the original file this region restores (for the header, including the
    /// 8-byte length field).
    pub original_bytes: u64,
    /// Bytes of its record in the archive.
    pub archive_bytes: u64,
    /// Bytes of its program (part of `archive_bytes`).
    pub program_bytes: u64,
    /// The program's root operator (`lit`, `merge`, ...).
    pub root_op: &'static str,
    /// What the search did (a group's search is counted with its first tensor).
    pub search: SearchStats,
    /// Tensors sharing its record: 1 for a record of its own, the group's size for a
    /// tensor in a group (its `archive_bytes` and `program_bytes` are then its share,
    /// in proportion to its original bytes).
    pub group_size: usize,
    /// The tensor whose record its record copies (same bytes, stored once).
    pub copy_of: Option<String>,
    /// The tensor of another file its record is coded against.
    pub reference: Option<ReferenceStat>,
}

/// What a reference record is coded against ([`RegionStat::reference`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ReferenceStat {
    /// A base file, or another shard of the folder.
    pub role: SourceRole,
    /// The file's name as the archive records it.
    pub source: String,
    /// The tensor's name there.
    pub tensor: String,
    /// How the residual combines with it.
    pub op: RefOp,
}

impl RegionStat {
    /// The stat of an empty tensor, which has no record.
    pub(super) fn empty(info: &crate::archive::safetensors::TensorInfo) -> RegionStat {
        RegionStat {
            kind: RegionKind::Tensor,
            label: info.name.clone(),
            dtype: Some(info.dtype),
            shape: info.shape.clone(),
            original_bytes: 0,
            archive_bytes: 0,
            program_bytes: 0,
            root_op: "lit",
            search: SearchStats::default(),
            group_size: 0,
            copy_of: None,
            reference: None,
        }
    }
}

/// What [`compress_file`](crate::archive::compress_file) did.
#[derive(Clone, Debug)]
pub struct CompressSummary {
    /// The source file.
    pub input: PathBuf,
    /// The archive written.
    pub output: PathBuf,
    /// Length of the source in bytes.
    pub original_bytes: u64,
    /// Length of the archive in bytes.
    pub archive_bytes: u64,
    /// One entry per record, in archive order (header first).
    pub regions: Vec<RegionStat>,
    /// Unusual things in the source (all preserved) and synthesis fallbacks.
    pub warnings: Vec<Warning>,
}

impl CompressSummary {
    /// The tensor entries, in archive (data-offset) order.
    pub fn tensors(&self) -> impl Iterator<Item = &RegionStat> {
        self.regions.iter().filter(|r| r.kind == RegionKind::Tensor)
    }
}
