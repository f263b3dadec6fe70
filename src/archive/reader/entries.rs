//! What an archive lists: its tensors, groups, gaps and regions, the items of its data
//! region in record order, and the options and summary of a restore.

use crate::archive::base::BaseSet;
use crate::archive::format::{RefOp, Settings};
use crate::dsl::Ty;
use crate::tensor::Dtype;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// Most bytes one region (the header, a tensor or a gap) may decode to: 64 GiB, well
/// above the largest single tensor of published checkpoints. A region is also refused
/// when an allocation of its size fails (e.g. under `ulimit -v`).
pub const MAX_REGION_BYTES: u64 = 1 << 36;

/// One tensor of an archive, as listed by the archive (its program is not decoded).
///
/// In a version-2 archive a tensor is stored in a record of its own, or with the small
/// tensors next to it in one *group* record ([`TensorEntry::group`]), or as a *copy* of
/// an earlier tensor with the same bytes ([`TensorEntry::copy_of`]); an empty tensor has
/// no record at all. Its name, dtype, shape and offsets come from the stored header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorEntry {
    /// The tensor's name (may hold control characters; see [`crate::shown::escape_name`]).
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its position among the source header's tensor entries.
    pub header_index: u64,
    /// Start of its bytes in the source's data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// xxh3-64 of the original bytes its record restores: its own bytes, or its group's
    /// (all of them) for a tensor in a group.
    pub checksum: u64,
    /// Byte range of its record in the archive (its group's record for a tensor in a
    /// group; empty for an empty tensor of a version-2 archive, which has no record).
    pub record: Range<usize>,
    /// Byte range of the program that restores it in the archive: its record's, its
    /// group's, or for a copy the program of the record it copies.
    pub program: Range<usize>,
    /// Name of the program's root operator (`lit`, `merge`, ...), read from its tag.
    pub root_op: &'static str,
    /// The group record it is stored in, an index into [`Archive::groups`](crate::archive::Archive::groups).
    pub group: Option<usize>,
    /// The tensor (an index into [`Archive::tensors`](crate::archive::Archive::tensors)) whose record this one's copies.
    pub copy_of: Option<usize>,
    /// The search settings that built its record (version-1 archives do not say).
    pub settings: Option<Settings>,
    /// For a tensor coded against a tensor of a source (a reference record, version 3):
    /// which, and how; its program then restores the residual.
    pub reference: Option<Reference>,
    /// Bytes of the archive counted for it ([`TensorEntry::archive_bytes`]).
    pub(super) share: u64,
    /// Bytes of program counted for it ([`TensorEntry::program_bytes`]).
    pub(super) program_share: u64,
}

impl TensorEntry {
    /// Bytes of the tensor in the original file.
    pub fn original_bytes(&self) -> u64 {
        self.end - self.begin
    }

    /// Bytes of its record in the archive (its framing, checksum and program). A tensor
    /// in a group is counted its share of the group's record, in proportion to its
    /// original bytes (the shares of a group add up to its record exactly).
    pub fn archive_bytes(&self) -> u64 {
        self.share
    }

    /// Bytes of its program (part of [`TensorEntry::archive_bytes`]); a tensor in a
    /// group is counted its share of the group's program, a copy none.
    pub fn program_bytes(&self) -> u64 {
        self.program_share
    }

    /// The tensor's type: its bytes as little-endian words of `dtype.word_bits()` bits
    /// (docs/design.md §2). For a tensor in a group, the program has its group's type
    /// ([`GroupEntry::ty`]).
    pub fn ty(&self) -> Ty {
        let width = self.dtype.word_bits();
        Ty::new(width, self.original_bytes() / u64::from(width / 8))
    }
}

/// The shares of a group record of `record` bytes, `program` of them its program, among
/// tensors of `sizes` original bytes (in data order): (archive bytes, program bytes) per
/// tensor. The record is shared in proportion to the original bytes, the rounding put on
/// the last one, so that the shares add up to it exactly; so is the program, except that
/// no tensor's program share exceeds its record share (rounded independently, a tensor
/// of fracast0-f32 had 642 archive bytes and 643 program bytes). The writer's report and
/// the reader's listing count the same shares.
pub(crate) fn group_shares(record: u64, program: u64, sizes: &[u64]) -> Vec<(u64, u64)> {
    let total = sizes.iter().sum::<u64>().max(1);
    let upto_share =
        |whole: u64, upto: u64| (u128::from(whole) * u128::from(upto) / u128::from(total)) as u64;
    let program = program.min(record);
    let (mut upto, mut record_done, mut program_done) = (0u64, 0u64, 0u64);
    let mut out = Vec::with_capacity(sizes.len());
    for (k, &n) in sizes.iter().enumerate() {
        upto += n;
        let last = k + 1 == sizes.len();
        let record_to = if last {
            record
        } else {
            upto_share(record, upto)
        };
        let share = record_to - record_done;
        // The program shared in proportion too, but never past the record's share: the
        // program bytes a tensor is not given here go to the next (the framing between
        // the program's cumulative share and the record's bounds what is carried, so the
        // last tensor's record share holds the rest of the program).
        let program_to = if last {
            program
        } else {
            upto_share(program, upto).min(program_done + share)
        };
        out.push((share, program_to - program_done));
        record_done = record_to;
        program_done = program_to;
    }
    out
}

#[cfg(test)]
mod group_share_tests {
    use super::group_shares;

    #[test]
    fn shares_add_up_and_each_record_share_holds_its_program_share() {
        // The case of the issue: two shares rounded apart gave 642 and 643.
        let s = group_shares(48, 39, &[32, 32]);
        assert_eq!(s, vec![(24, 19), (24, 20)]);
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for _ in 0..2000 {
            let k = 1 + (next() % 12) as usize;
            let sizes: Vec<u64> = (0..k).map(|_| next() % 3000).collect();
            let program = next() % 5000;
            let record = program + next() % 20;
            let s = group_shares(record, program, &sizes);
            assert_eq!(s.iter().map(|x| x.0).sum::<u64>(), record, "{sizes:?}");
            assert_eq!(s.iter().map(|x| x.1).sum::<u64>(), program, "{sizes:?}");
            assert!(
                s.iter().all(|&(a, p)| a >= p),
                "{record} {program} {sizes:?}: {s:?}"
            );
        }
    }
}

/// What a reference record codes its tensor against (docs/design.md §12): tensor
/// `tensor` (in data order) of source `source` (an index into [`Archive::sources`](crate::archive::Archive::sources)),
/// whose bytes have xxh3-64 `source_checksum`; the record's program restores the
/// residual, which [`RefOp`] combines with the source tensor's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reference {
    /// Index into [`Archive::sources`](crate::archive::Archive::sources).
    pub source: usize,
    /// Position of the source's tensor among the source's tensors, in data order.
    pub tensor: u64,
    /// xxh3-64 of the source tensor's bytes.
    pub source_checksum: u64,
    /// How the residual combines with the source's words.
    pub op: RefOp,
}

/// A group record of a version-2 archive: consecutive small tensors of one dtype, coded
/// as one stream (the concatenation of their words) by one program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// Its tensors, a range of indices into [`Archive::tensors`](crate::archive::Archive::tensors) (consecutive in data
    /// order).
    pub tensors: Range<usize>,
    /// Start of its bytes in the data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// The dtype of its tensors.
    pub dtype: Dtype,
    /// xxh3-64 of its original bytes.
    pub checksum: u64,
    /// Byte range of its record in the archive.
    pub record: Range<usize>,
    /// Byte range of its program in the archive.
    pub program: Range<usize>,
    /// The search settings that built it.
    pub settings: Option<Settings>,
}

impl GroupEntry {
    /// The program's type: the group's bytes as little-endian words of its dtype.
    pub fn ty(&self) -> Ty {
        let width = self.dtype.word_bits();
        Ty::new(width, (self.end - self.begin) / u64::from(width / 8))
    }
}

/// Bytes of the source's data region that no tensor owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GapEntry {
    /// Start in the data region.
    pub begin: u64,
    /// End (exclusive).
    pub end: u64,
    /// xxh3-64 of the bytes.
    pub checksum: u64,
    /// Byte range of its record in the archive.
    pub record: Range<usize>,
    /// Byte range of its program in the archive.
    pub program: Range<usize>,
}

/// A region in record order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Item {
    Header,
    Tensor(usize),
    Gap(usize),
    Group(usize),
    /// A tensor or gap whose record was not found: an archive opened without its index
    /// ([`Archive::open_for_salvage`]) cut or damaged before it.
    Lost(usize),
}

/// One region of a large tensor (or gap) stored with a checksum of its own (a regions
/// record, format 4): the child of the record's root `concat` that restores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionSpan {
    /// Words it restores.
    pub words: u64,
    /// Where its bytes start among the record's restored bytes, in bytes.
    pub offset: u64,
    /// Byte range of its program (the `concat`'s child) in the archive.
    pub program: Range<usize>,
    /// xxh3-64 of the original bytes it restores.
    pub checksum: u64,
}

/// A tensor or gap of an archive opened without its index whose record was not found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LostEntry {
    /// Start of its bytes in the data region.
    pub(super) begin: u64,
    /// End (exclusive).
    pub(super) end: u64,
    /// The tensor (an index into [`Archive::tensors`]), or `None` for a gap.
    pub(super) tensor: Option<usize>,
    /// Why its record was not found.
    pub(super) why: String,
}

/// How to decompress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecompressOptions {
    /// Worker threads (`None` = all cores).
    pub jobs: Option<usize>,
    /// Replace an existing output file.
    pub force: bool,
    /// Restore what can be restored of a damaged archive: every region whose bytes
    /// match their checksum is written, every other one (a tensor, group or gap whose
    /// program does not decode or does not restore its checksum) is zero-filled and
    /// listed in [`DecompressSummary::damaged`] instead of failing the job. The header
    /// record cannot be salvaged (it names every tensor).
    pub salvage: bool,
    /// The base checkpoint the archive was coded against (`--base`), attached before
    /// anything is written ([`Archive::attach_base`](crate::archive::Archive::attach_base)).
    pub base: Option<Arc<BaseSet>>,
}

/// A region that [`DecompressOptions::salvage`] zero-filled in the restored file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DamagedRegion {
    /// For a folder archive, the file it is in (its path in the folder, `/`-separated);
    /// `None` (and left out of JSON) for a single archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// What it is: `tensor "w"`, `group of 3 tensors "a" to "c"`, `gap at data bytes
    /// [8, 10)`, `tensor "w", region 2 of 12 (words [1048576, 2097152))`, or for a
    /// folder archive's file that cannot be restored at all, `the whole file`.
    pub region: String,
    /// The tensors whose bytes it holds, in data order (none for a gap).
    pub tensors: Vec<String>,
    /// Where its bytes start in the restored file, in bytes.
    pub offset: u64,
    /// Its length in bytes, all zeros in the restored file.
    pub bytes: u64,
    /// Why: the decoder's error, or the checksum mismatch.
    pub reason: String,
}

/// What [`Archive::decompress_to`](crate::archive::Archive::decompress_to) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecompressSummary {
    /// The file written.
    pub output: PathBuf,
    /// Its length in bytes.
    pub original_bytes: u64,
    /// Whether the archive's records hash to their stored checksum
    /// ([`Archive::records_intact`](crate::archive::Archive::records_intact)); damage there (a name, a shape) can leave the
    /// restored bytes, which their own checksums prove, untouched.
    pub records_intact: bool,
    /// With [`DecompressOptions::salvage`]: the regions zero-filled because they did not
    /// restore (empty when the whole file did, and always without salvage).
    pub damaged: Vec<DamagedRegion>,
}
