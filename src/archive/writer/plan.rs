//! The records of an archive, planned before any is encoded: the header, then each
//! non-empty region alone or small tensors of one dtype grouped; and what encoding one
//! gives.

use super::options::{RegionKind, RegionStat};
use crate::archive::base::Counterpart;
use crate::archive::safetensors::{Region, SourceFile};
use crate::dsl::Ty;
use crate::synth::SearchStats;
use crate::tensor::Dtype;

/// Tensors of fewer bytes than this may share a group record with their neighbours
/// (same dtype, next to each other in the data region): tables, framing and
/// checksums are then paid once for the group. 64 KiB is 16 Ki F32 words, where a
/// tensor's own tables cost well under 1% of it.
pub const GROUP_TENSOR_BYTES: u64 = 64 << 10;

/// Most bytes of one group record: decoding one tensor of a group decodes the group.
pub const GROUP_BYTES: u64 = 1 << 20;

/// What a record of the archive holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RecordKind {
    /// The source header (record 0).
    Header,
    /// One tensor.
    Tensor(usize),
    /// Bytes no tensor owns.
    Gap { begin: u64, end: u64 },
    /// Consecutive small tensors of one dtype.
    Group,
}

/// One record to write: its kind and the items (indices into the data items, the
/// non-empty regions in offset order) it covers.
#[derive(Clone, Debug)]
pub(super) struct PlannedRecord {
    pub(super) kind: RecordKind,
    /// Indices of its tensors in [`SourceFile::tensors`] (one for a tensor record, the
    /// members of a group, none otherwise).
    pub(super) tensors: Vec<usize>,
    /// Its data items, as a range of indices into the non-empty regions.
    pub(super) items: std::ops::Range<usize>,
    pub(super) begin: u64,
    pub(super) end: u64,
}

impl PlannedRecord {
    /// The source bytes it restores (the JSON header for record 0).
    pub(super) fn source<'a>(&self, src: &SourceFile<'a>) -> &'a [u8] {
        match self.kind {
            RecordKind::Header => src.header(),
            _ => &src.data()[self.begin as usize..self.end as usize],
        }
    }

    /// Whether a record with the same bytes can be a copy of this one (a tensor of its
    /// own: copies are for tied or repeated tensors).
    pub(super) fn copyable(&self) -> bool {
        matches!(self.kind, RecordKind::Tensor(_))
    }

    /// The dtype its words are read as (`None`: bytes).
    pub(super) fn dtype(&self, src: &SourceFile<'_>) -> Option<Dtype> {
        self.tensors.first().map(|&t| src.tensors()[t].dtype)
    }

    /// The width in bits of the words its program restores (8 for the header and gaps).
    pub(super) fn word_bits(&self, src: &SourceFile<'_>) -> u32 {
        self.dtype(src).map_or(8, Dtype::word_bits)
    }

    /// The type of the words its program restores.
    pub(super) fn ty(&self, src: &SourceFile<'_>) -> Ty {
        let width = self.word_bits(src);
        Ty::new(width, self.source(src).len() as u64 * 8 / u64::from(width))
    }

    /// Appends the [`RegionStat`]s of its items (and of the empty tensors before each)
    /// to `stats`; returns each one's progress label and original bytes. The record's
    /// `len` bytes and `program` bytes are shared among a group's tensors in proportion
    /// to their original bytes (the shares add up exactly). `copy_of`: the tensor whose
    /// record this one copies.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn report(
        &self,
        src: &SourceFile<'_>,
        empties: &mut std::iter::Peekable<impl Iterator<Item = usize>>,
        stats: &mut Vec<RegionStat>,
        len: u64,
        program: u64,
        root_op: &'static str,
        search: &SearchStats,
        copy_of: Option<&str>,
    ) -> Vec<(String, u64)> {
        let mut shown = Vec::new();
        // Empty tensors at or before data offset `at` (they come first at an offset).
        let mut empties_before = |at: u64, stats: &mut Vec<RegionStat>, shown: &mut Vec<_>| {
            while let Some(&t) = empties.peek() {
                let info = &src.tensors()[t];
                if info.begin > at {
                    break;
                }
                empties.next();
                stats.push(RegionStat::empty(info));
                shown.push((info.name.clone(), 0));
            }
        };
        let plain = |kind, label: &str, dtype, original_bytes| RegionStat {
            kind,
            label: label.to_string(),
            dtype,
            shape: Vec::new(),
            original_bytes,
            archive_bytes: len,
            program_bytes: program,
            root_op,
            search: search.clone(),
            group_size: 1,
            copy_of: None,
            reference: None,
        };
        match self.kind {
            RecordKind::Header => {
                let original = src.data_start() as u64;
                stats.push(plain(RegionKind::Header, "(header)", None, original));
                shown.push(("(header)".to_string(), original));
            }
            RecordKind::Gap { begin, end } => {
                empties_before(begin, stats, &mut shown);
                stats.push(plain(RegionKind::Gap, "(gap)", None, end - begin));
                shown.push(("(gap)".to_string(), end - begin));
            }
            RecordKind::Tensor(_) | RecordKind::Group => {
                let sizes: Vec<u64> = self
                    .tensors
                    .iter()
                    .map(|&t| src.tensors()[t].byte_len())
                    .collect();
                let shares = crate::archive::reader::group_shares(len, program, &sizes);
                for (k, (&t, (archive_bytes, program_bytes))) in
                    self.tensors.iter().zip(shares).enumerate()
                {
                    let info = &src.tensors()[t];
                    empties_before(info.begin, stats, &mut shown);
                    stats.push(RegionStat {
                        kind: RegionKind::Tensor,
                        label: info.name.clone(),
                        dtype: Some(info.dtype),
                        shape: info.shape.clone(),
                        original_bytes: info.byte_len(),
                        archive_bytes,
                        program_bytes,
                        root_op,
                        // A group's search is counted once, with its first tensor.
                        search: if k == 0 {
                            search.clone()
                        } else {
                            SearchStats {
                                unrestored: search.unrestored,
                                ..SearchStats::default()
                            }
                        },
                        group_size: self.tensors.len(),
                        copy_of: copy_of.map(str::to_string),
                        reference: None,
                    });
                    shown.push((info.name.clone(), info.byte_len()));
                }
            }
        }
        shown
    }
}

/// The records of `src`, in order: the header, then the data region's non-empty
/// regions, each a record of its own except runs of consecutive tensors of one dtype
/// under [`GROUP_TENSOR_BYTES`] each, which share a record of up to [`GROUP_BYTES`].
pub(super) fn plan_records(
    src: &SourceFile<'_>,
    linked: &[Option<Counterpart>],
) -> Vec<PlannedRecord> {
    let mut plan = vec![PlannedRecord {
        kind: RecordKind::Header,
        tensors: Vec::new(),
        items: 0..0,
        begin: 0,
        end: 0,
    }];
    let tensors = src.tensors();
    // A tensor with a counterpart elsewhere gets a record of its own, which can be a
    // reference record.
    let small = |t: usize| tensors[t].byte_len() < GROUP_TENSOR_BYTES && linked[t].is_none();
    let mut item = 0usize;
    for r in src.regions() {
        match *r {
            Region::Tensor(t) if tensors[t].begin == tensors[t].end => continue,
            Region::Tensor(t) => {
                let info = &tensors[t];
                let joins = plan.last().is_some_and(|last| {
                    let first = last.tensors.first().copied();
                    matches!(last.kind, RecordKind::Tensor(_) | RecordKind::Group)
                        && first.is_some_and(|f| small(f) && tensors[f].dtype == info.dtype)
                        && small(t)
                        && last.end == info.begin
                        && info.end - last.begin <= GROUP_BYTES
                });
                if joins {
                    let last = plan.last_mut().expect("checked above");
                    last.kind = RecordKind::Group;
                    last.tensors.push(t);
                    last.items.end = item + 1;
                    last.end = info.end;
                } else {
                    plan.push(PlannedRecord {
                        kind: RecordKind::Tensor(t),
                        tensors: vec![t],
                        items: item..item + 1,
                        begin: info.begin,
                        end: info.end,
                    });
                }
            }
            Region::Gap { begin, end } => plan.push(PlannedRecord {
                kind: RecordKind::Gap { begin, end },
                tensors: Vec::new(),
                items: item..item + 1,
                begin,
                end,
            }),
        }
        item += 1;
    }
    plan
}
