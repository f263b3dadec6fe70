//! What encoding one record gives: its program, or a copy of an earlier record, a
//! reference to a source's tensor, and the regions of a large tensor (the sink hashes
//! the record's bytes).

use crate::archive::format::RefOp;
use crate::dsl::Node;
use crate::error::Warning;
use crate::synth::SearchStats;

/// One encoded record: its program (serialized as it is written), or no program when
/// the worker found that an earlier record may hold the same bytes (the sink then
/// writes a copy, or encodes it after all). The sink hashes the record's bytes.
pub(super) struct Encoded {
    pub(super) program: Option<Node>,
    /// Set when `program` is a residual against a source tensor.
    pub(super) reference: Option<Chosen>,
    /// Set when `program` is a root `concat` of the record's regions, in order.
    pub(super) regions: Option<Vec<RegionSum>>,
    pub(super) search: SearchStats,
    pub(super) warning: Option<Warning>,
}

/// A reference record's choice: source `source` (an index into [`Linked::sources`]),
/// its tensor `tensor`, that tensor's checksum, and the op.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chosen {
    pub(super) source: usize,
    pub(super) tensor: usize,
    pub(super) source_checksum: u64,
    pub(super) op: RefOp,
}

/// One region of a record whose program is a `concat` of regions: its words and the
/// xxh3-64 of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RegionSum {
    pub(super) words: u64,
    pub(super) checksum: u64,
}
