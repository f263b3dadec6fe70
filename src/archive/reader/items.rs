//! What validating an archive produces ([`Structure`]: its [`Head`] and the items of its
//! data region) and how it is laid out: the records of a format-2 or later archive laid
//! over the items the source header gives, in order, each checked against what it
//! covers ([`Assign`]).

use super::entries::{
    group_shares, GapEntry, GroupEntry, Item, LostEntry, Reference, RegionSpan, TensorEntry,
};
use crate::archive::format::{self, RecordV2, Settings, SourceEntry};
use crate::dsl::Ty;
use crate::error::ArchiveError;
use crate::hash::xxh3_64;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// Everything [`parse_structure`] learns from an archive.
pub(super) struct Structure {
    pub(super) head: Head,
    pub(super) tensors: Vec<TensorEntry>,
    pub(super) gaps: Vec<GapEntry>,
    pub(super) groups: Vec<GroupEntry>,
    pub(super) items: Vec<Item>,
    pub(super) regions: HashMap<Item, Arc<[RegionSpan]>>,
    pub(super) lost: Vec<LostEntry>,
}

pub(super) fn corrupt(what: impl Into<String>) -> ArchiveError {
    ArchiveError::Corrupt { what: what.into() }
}

/// A record found damaged once the archive's trailer and index have been read.
pub(super) fn damaged_record(what: impl Into<String>) -> ArchiveError {
    ArchiveError::DamagedRecord { what: what.into() }
}

/// What an archive's file header, trailer, index and header record say: the fields of a
/// [`Structure`] (and of the `Archive` it opens) that do not come from laying records
/// over items.
pub(super) struct Head {
    pub(super) header_len: u64,
    pub(super) header_checksum: u64,
    pub(super) header_record: Range<usize>,
    pub(super) header_program: Range<usize>,
    pub(super) original_len: u64,
    pub(super) file_checksum: u64,
    pub(super) records_checksum: u64,
    pub(super) records_end: usize,
    pub(super) version: u16,
    /// The program wire version the file header declares (bytes 10..12).
    pub(super) wire: u16,
    pub(super) file_name: Option<String>,
    pub(super) settings: Vec<Settings>,
    /// The sources reference records take tensors from (version 3).
    pub(super) sources: Vec<SourceEntry>,
    /// For an archive opened without its index ([`Archive::open_for_salvage`]): what is
    /// wrong with it, and where the records found end.
    pub(super) indexless: Option<String>,
}

/// A record as [`Assign::place`] takes it.
pub(super) struct RecIn {
    /// Its bytes in the archive.
    pub(super) range: Range<usize>,
    /// Items it covers.
    pub(super) items: u64,
    /// The settings that built it (`None`: not known, the index being lost).
    pub(super) settings: Option<Settings>,
    /// What it holds (never the header).
    pub(super) record: RecordV2,
}

/// What a data record restores, for the copies that name it: its type, checksum,
/// program range, first tensor and regions.
pub(super) struct Stored {
    pub(super) ty: Ty,
    pub(super) checksum: u64,
    pub(super) program: Range<usize>,
    pub(super) tensor: Option<usize>,
    pub(super) regions: Option<Arc<[RegionSpan]>>,
}

/// An item of the data region: a non-empty tensor (by position in the tensors) or a gap.
pub(super) enum It {
    Tensor(usize),
    Gap(u64, u64),
}

/// Lays the records of a version-2 or later archive over the items of the data region
/// its header lays out, in order, checking each against what it covers.
pub(super) struct Assign<'b> {
    pub(super) bytes: &'b [u8],
    pub(super) version: u16,
    pub(super) sources: usize,
    pub(super) tensors: Vec<TensorEntry>,
    pub(super) its: Vec<It>,
    pub(super) next: usize,
    pub(super) stored: Vec<Option<Stored>>,
    pub(super) gaps: Vec<GapEntry>,
    pub(super) groups: Vec<GroupEntry>,
    pub(super) items: Vec<Item>,
    pub(super) regions: HashMap<Item, Arc<[RegionSpan]>>,
    pub(super) lost: Vec<LostEntry>,
}

impl<'b> Assign<'b> {
    /// Tensors in data order (empty ones at their offset), and the items: non-empty
    /// tensors (by position in `tensors`) and gaps.
    pub(super) fn new(
        bytes: &'b [u8],
        version: u16,
        parsed: &crate::archive::safetensors::ParsedHeader,
        sources: usize,
    ) -> Assign<'b> {
        use crate::archive::safetensors::Region;
        let mut tensors: Vec<TensorEntry> = Vec::with_capacity(parsed.tensors.len());
        let mut its = Vec::with_capacity(parsed.regions.len());
        for r in &parsed.regions {
            match *r {
                Region::Tensor(t) => {
                    let info = &parsed.tensors[t];
                    if info.begin != info.end {
                        its.push(It::Tensor(tensors.len()));
                    }
                    tensors.push(TensorEntry {
                        name: info.name.clone(),
                        dtype: info.dtype,
                        shape: info.shape.clone(),
                        header_index: info.header_index as u64,
                        begin: info.begin,
                        end: info.end,
                        checksum: xxh3_64(&[]),
                        record: 0..0,
                        program: 0..0,
                        root_op: "lit",
                        group: None,
                        copy_of: None,
                        settings: None,
                        reference: None,
                        share: 0,
                        program_share: 0,
                    });
                }
                Region::Gap { begin, end } => its.push(It::Gap(begin, end)),
            }
        }
        let items = vec![Item::Header];
        Assign {
            bytes,
            version,
            sources,
            tensors,
            its,
            next: 0,
            stored: vec![None],
            gaps: Vec::new(),
            groups: Vec::new(),
            items,
            regions: HashMap::new(),
            lost: Vec::new(),
        }
    }

    /// Lays record `r` over the next items. Changes nothing when it fails.
    pub(super) fn place(&mut self, r: usize, rec: RecIn) -> Result<(), ArchiveError> {
        let RecIn {
            range,
            items: count,
            settings,
            record,
        } = rec;
        let bad =
            |what: String| damaged_record(format!("record {r} at byte {}: {what}", range.start));
        let abs = |p: Range<usize>| range.start + p.start..range.start + p.end;
        let tensors = &self.tensors;
        let left = self.its.len() - self.next;
        let count = usize::try_from(count)
            .ok()
            .filter(|&c| c >= 1 && c <= left)
            .ok_or_else(|| bad(format!("covers {count} items, {left} are left")))?;
        let mine = &self.its[self.next..self.next + count];
        // The record's type, and what it restores.
        let (ty, first_tensor, kind) = match mine {
            [It::Gap(b, e)] => (Ty::new(8, e - b), None, 0),
            [It::Tensor(t)] => (tensors[*t].ty(), Some(*t), 1),
            many => {
                let ts: Vec<usize> = many
                    .iter()
                    .map(|i| match i {
                        It::Tensor(t) => Some(*t),
                        It::Gap(..) => None,
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| bad("a group holds a gap".to_string()))?;
                let dtype = tensors[ts[0]].dtype;
                if ts.iter().any(|&t| tensors[t].dtype != dtype) {
                    return Err(bad("a group holds tensors of several dtypes".to_string()));
                }
                let bytes: u64 = ts.iter().map(|&t| tensors[t].original_bytes()).sum();
                let width = dtype.word_bits();
                (Ty::new(width, bytes / u64::from(width / 8)), Some(ts[0]), 2)
            }
        };
        let mut reference = None;
        let mut regions = None;
        let (checksum, program, copy_of) = match record {
            RecordV2::Header { .. } => return Err(bad("a second header record".to_string())),
            RecordV2::Data { checksum, program } => (checksum, abs(program), None),
            RecordV2::Regions {
                checksum,
                regions: heads,
                program,
            } => {
                let program = abs(program);
                regions = Some(region_spans(&heads, &program, ty).map_err(bad)?);
                (checksum, program, None)
            }
            RecordV2::Ref {
                checksum,
                source,
                tensor,
                source_checksum,
                op,
                program,
            } => {
                if kind != 1 {
                    return Err(bad(
                        "a reference record covers something else than one tensor".to_string(),
                    ));
                }
                let source = usize::try_from(source)
                    .ok()
                    .filter(|&s| s < self.sources)
                    .ok_or_else(|| {
                        bad(format!(
                            "coded against source #{source}, but the archive lists {}",
                            self.sources
                        ))
                    })?;
                reference = Some(Reference {
                    source,
                    tensor,
                    source_checksum,
                    op,
                });
                (checksum, abs(program), None)
            }
            RecordV2::Copy { of } => {
                let target = usize::try_from(of)
                    .ok()
                    .filter(|&j| (1..r).contains(&j))
                    .and_then(|j| self.stored.get(j)?.as_ref())
                    .ok_or_else(|| {
                        bad(format!(
                            "copies record {of}, which is not an earlier data record"
                        ))
                    })?;
                if !format::copy_allowed(self.version, target.ty, ty) {
                    let named = first_tensor
                        .map(|t| format!(" (tensor {:?})", tensors[t].name))
                        .unwrap_or_default();
                    return Err(bad(format!(
                        "copies record {of} of type {}, but restores {ty}{named}",
                        target.ty
                    )));
                }
                regions = target.regions.clone();
                (target.checksum, target.program.clone(), target.tensor)
            }
        };
        // Checked: from here on nothing fails.
        self.next += count;
        let stored = (copy_of.is_none() && reference.is_none()).then(|| Stored {
            ty,
            checksum,
            program: program.clone(),
            tensor: first_tensor,
            regions: regions.clone(),
        });
        while self.stored.len() < r {
            self.stored.push(None);
        }
        self.stored.push(stored);
        // (The program of a record cut short runs past the bytes present.)
        let root_op = format::root_op_name(self.bytes.get(program.start..).unwrap_or_default());
        let record = range;
        let item = match (kind, mine) {
            (0, [It::Gap(begin, end)]) => {
                let item = Item::Gap(self.gaps.len());
                self.gaps.push(GapEntry {
                    begin: *begin,
                    end: *end,
                    checksum,
                    record,
                    program,
                });
                item
            }
            (1, [It::Tensor(t)]) => {
                let e = &mut self.tensors[*t];
                e.checksum = checksum;
                e.share = record.len() as u64;
                e.program_share = if copy_of.is_some() {
                    0
                } else {
                    program.len() as u64
                };
                e.record = record;
                e.program = program;
                e.root_op = root_op;
                e.copy_of = copy_of;
                e.settings = settings;
                e.reference = reference;
                Item::Tensor(*t)
            }
            _ => {
                let ts: Vec<usize> = mine
                    .iter()
                    .filter_map(|i| match i {
                        It::Tensor(t) => Some(*t),
                        It::Gap(..) => None,
                    })
                    .collect();
                let (lo, hi) = (ts[0], ts[ts.len() - 1] + 1);
                let k = self.groups.len();
                let tensors = &mut self.tensors;
                // Shares of the record and program in proportion to the original bytes,
                // the rounding put on the last one, so that they add up exactly.
                let sizes: Vec<u64> = ts.iter().map(|&t| tensors[t].original_bytes()).collect();
                let shares = group_shares(record.len() as u64, program.len() as u64, &sizes);
                for (&t, share) in ts.iter().zip(shares) {
                    let e = &mut tensors[t];
                    e.checksum = checksum;
                    e.record = record.clone();
                    e.program = program.clone();
                    e.root_op = root_op;
                    e.group = Some(k);
                    e.copy_of = copy_of;
                    e.settings = settings;
                    (e.share, e.program_share) = share;
                }
                self.groups.push(GroupEntry {
                    tensors: lo..hi,
                    begin: tensors[lo].begin,
                    end: tensors[hi - 1].end,
                    dtype: tensors[lo].dtype,
                    checksum,
                    record,
                    program,
                    settings,
                });
                Item::Group(k)
            }
        };
        self.items.push(item);
        if let Some(spans) = regions {
            self.regions.insert(item, spans);
        }
        Ok(())
    }

    /// Refuses records that do not cover every item.
    pub(super) fn finish(&self) -> Result<(), ArchiveError> {
        if self.next != self.its.len() {
            return Err(damaged_record(format!(
                "the records cover {} of the {} tensors and gaps the header lays out",
                self.next,
                self.its.len()
            )));
        }
        Ok(())
    }

    /// Makes every item no record covered a lost one, lost for `why`.
    pub(super) fn lose_rest(&mut self, why: &str) {
        for it in &self.its[self.next..] {
            let (begin, end, tensor) = match *it {
                It::Tensor(t) => (self.tensors[t].begin, self.tensors[t].end, Some(t)),
                It::Gap(b, e) => (b, e, None),
            };
            self.items.push(Item::Lost(self.lost.len()));
            self.lost.push(LostEntry {
                begin,
                end,
                tensor,
                why: why.to_string(),
            });
        }
        self.next = self.its.len();
    }

    pub(super) fn into_structure(self, h: Head) -> Structure {
        Structure {
            head: h,
            tensors: self.tensors,
            gaps: self.gaps,
            groups: self.groups,
            items: self.items,
            regions: self.regions,
            lost: self.lost,
        }
    }
}

/// The regions of a regions record whose program (absolute range `program`) restores
/// `ty`: each child of the root `concat` at the program's end, with its words, its
/// byte offset in the record's bytes and its checksum.
pub(super) fn region_spans(
    heads: &[format::RegionHead],
    program: &Range<usize>,
    ty: Ty,
) -> Result<Arc<[RegionSpan]>, String> {
    let words: u64 = heads
        .iter()
        .try_fold(0u64, |a, h| a.checked_add(h.words).filter(|_| h.words >= 1))
        .ok_or_else(|| "a region of no words".to_string())?;
    if words != ty.len {
        return Err(format!(
            "its regions hold {words} words, its items {}",
            ty.len
        ));
    }
    let total: u64 = heads.iter().map(|h| h.program_len).sum();
    // `read_record_v4` checked that the regions' programs fit the program.
    let mut at = program.end - total as usize;
    let word_bytes = u64::from(crate::tensor::container_bytes(ty.width) as u32);
    let mut offset = 0u64;
    let mut spans = Vec::with_capacity(heads.len());
    for h in heads {
        if h.program_len == 0 {
            return Err("a region with an empty program".to_string());
        }
        let end = at + h.program_len as usize;
        spans.push(RegionSpan {
            words: h.words,
            offset,
            program: at..end,
            checksum: h.checksum,
        });
        offset += h.words * word_bytes;
        at = end;
    }
    Ok(spans.into())
}
