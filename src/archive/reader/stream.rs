//! Decoding a whole archive in bounded memory (DESIGN §8), for [`Archive::write_original`]
//! and the verifiers: regions are decoded on the pool and handed to the calling thread in
//! source order as little-endian byte chunks, so nothing holds the restored file.
//!
//! What bounds the resident set:
//!
//! - **Units.** A region whose program is a root `Concat` (the writer splits tensors of
//!   more than [`super::writer::REGION_WORDS`] words so) and that restores more than
//!   [`SPLIT_BYTES`] is decoded as several units of consecutive children, each of at
//!   least [`UNIT_BYTES`] (or what is left), so a worker holds one region's program and
//!   words, not the tensor's. Other regions are one unit each.
//! - **Bytes in flight.** A unit is started only while the decoded bytes of the units
//!   started and not yet handed on stay within `(jobs + 1)` times the largest unit (and
//!   at most 64 units per thread); a unit larger than that starts alone.
//! - **Mapped pages.** A worker releases the archive's pages of the program bytes it read
//!   as soon as the program is parsed ([`Archive::release`]).
//!
//! Children's byte ranges are found on the calling thread just before their unit starts,
//! by reading each child with the program reader: it refuses trailing bytes and says
//! where the child ended. A child that does not read makes its region one unit again,
//! whose decoding then reports the error exactly as for an unsplit region.

use super::entries::{Item, RegionSpan, MAX_REGION_BYTES};
use super::Archive;
use crate::archive::format::Cursor;
use crate::archive::pool::build_pool;
use crate::archive::progress::ProgressEvent;
use crate::dsl::fused::execute_into;
use crate::dsl::{program_end, Ty};
use crate::error::{Error, Result};
use crate::tensor::container_bytes;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Regions restoring more bytes than this whose program is a root `Concat` are decoded
/// child by child.
pub const SPLIT_BYTES: u64 = 16 << 20;

/// Fewest decoded bytes per unit of a split region (the last unit may be smaller).
pub const UNIT_BYTES: u64 = 8 << 20;

/// Most units in flight per worker thread (bounds the count when units are small; the
/// bytes are bounded by the budget). With 3, a worker decoding the many small regions
/// of a checkpoint (norms, biases) waited for the calling thread to hash and write
/// them: `decompress --jobs 1` of minilm-l6-v2-bf16 took 65 ms, with 64 60 ms (medians
/// of 21 alternated runs).
const UNITS_PER_THREAD: usize = 64;

/// Bytes per chunk handed to the sink (and per write of the output).
const CHUNK_BYTES: usize = 1 << 20;

/// A run of consecutive children `first..end` of a region's root `Concat`, restoring
/// `words` words.
#[derive(Clone, Debug)]
struct Group {
    first: usize,
    end: usize,
    words: u64,
}

/// How one region is decoded.
#[derive(Clone, Debug)]
struct Plan {
    item: Item,
    /// `None`: the whole program at once.
    split: Option<Split>,
}

#[derive(Clone, Debug)]
struct Split {
    /// Absolute archive offset of the first child's bytes.
    children_start: usize,
    /// Words of every child.
    lens: Vec<u64>,
    groups: Vec<Group>,
    /// A regions record's regions (format 4): each child's program bytes, where its
    /// bytes start in the region and its checksum; one unit each.
    regions: Option<std::sync::Arc<[RegionSpan]>>,
}

/// What a worker decodes.
#[derive(Clone, Debug)]
enum Work {
    Whole,
    /// Each child's program bytes (absolute range) and type.
    Children(Vec<(Range<usize>, Ty)>),
}

/// One unit of decoding work.
#[derive(Clone, Debug)]
pub(crate) struct Unit {
    pub item: Item,
    work: Work,
    /// Decoded bytes.
    pub bytes: u64,
    /// First unit of its region.
    pub first: bool,
    /// Last unit of its region.
    pub last: bool,
    /// For one region of a regions record (format 4), checked alone: which of how many,
    /// where its bytes start in the item's bytes, and its checksum.
    pub check: Option<UnitCheck>,
}

/// What a unit that is one region of a regions record is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UnitCheck {
    /// Its position among the record's regions.
    pub index: usize,
    /// How many regions the record has.
    pub count: usize,
    /// Its first word among the record's words.
    pub first_word: u64,
    /// Where its bytes start among the item's bytes.
    pub offset: u64,
    /// xxh3-64 of its bytes.
    pub checksum: u64,
}

/// The children of a root `Concat` of type `ty`, from its program bytes: where the
/// children start (relative to the program) and each child's length in words. `None`
/// when the program is not a well-formed `Concat` header (the reader will say why).
///
/// Mirrors the `Concat` layout of [`crate::dsl::wire`]: tag `0x30`, LEB128 `k`, LEB128
/// lengths of children `1..k-1`, the last one being what remains.
pub(crate) fn concat_header(program: &[u8], ty: Ty) -> Option<(usize, Vec<u64>)> {
    let mut c = Cursor::new(program, "program");
    if c.u8().ok()? != 0x30 {
        return None;
    }
    let k = c.uleb().ok()?;
    if k < 2 || k > ty.len || k > crate::dsl::wire::MAX_NODES as u64 {
        return None;
    }
    let mut lens = Vec::with_capacity(k as usize);
    let mut used = 0u64;
    for _ in 0..k - 1 {
        let l = c.uleb().ok()?;
        used = used.checked_add(l).filter(|&u| l >= 1 && u < ty.len)?;
        lens.push(l);
    }
    lens.push(ty.len - used);
    Some((c.pos(), lens))
}

fn plan(archive: &Archive, item: Item) -> Plan {
    let whole = Plan { item, split: None };
    // A tensor coded against a source is combined with the source's bytes whole.
    if archive.is_reference(item) {
        return whole;
    }
    if let Some(regions) = archive.item_regions(item) {
        // Each region is a unit, checked against its own checksum: damage in one costs
        // that region only.
        let groups = (0..regions.len())
            .map(|c| Group {
                first: c,
                end: c + 1,
                words: regions[c].words,
            })
            .collect();
        return Plan {
            item,
            split: Some(Split {
                children_start: regions[0].program.start,
                lens: regions.iter().map(|r| r.words).collect(),
                groups,
                regions: Some(regions.clone()),
            }),
        };
    }
    let Item::Tensor(_) = item else {
        return whole;
    };
    let (program, ty) = archive.item_program(item);
    let word_bytes = container_bytes(ty.width) as u64;
    let bytes = archive.item_original_bytes(item);
    if bytes <= SPLIT_BYTES || bytes > MAX_REGION_BYTES {
        return whole;
    }
    let Some((header, lens)) = concat_header(archive.program_slice(&program), ty) else {
        return whole;
    };
    let mut groups = Vec::new();
    let mut first = 0;
    let mut words = 0u64;
    for (c, &l) in lens.iter().enumerate() {
        words += l;
        if words * word_bytes >= UNIT_BYTES || c + 1 == lens.len() {
            groups.push(Group {
                first,
                end: c + 1,
                words,
            });
            first = c + 1;
            words = 0;
        }
    }
    if groups.len() < 2 {
        return whole;
    }
    Plan {
        item,
        split: Some(Split {
            children_start: program.start + header,
            lens,
            groups,
            regions: None,
        }),
    }
}

/// Yields the units of every region in order, finding children's byte ranges lazily.
struct Units<'a> {
    archive: &'a Archive,
    plans: std::vec::IntoIter<Plan>,
    /// The split region being cut: its plan, next group, next child's start.
    current: Option<(Plan, usize, usize)>,
}

impl Units<'_> {
    fn next_unit(&mut self) -> Option<Unit> {
        if let Some((plan, g, at)) = self.current.take() {
            return Some(self.cut(plan, g, at));
        }
        let plan = self.plans.next()?;
        match &plan.split {
            None => Some(self.whole(plan.item, true)),
            Some(s) => {
                let at = s.children_start;
                Some(self.cut(plan, 0, at))
            }
        }
    }

    fn whole(&self, item: Item, first: bool) -> Unit {
        Unit {
            item,
            work: Work::Whole,
            bytes: self.archive.item_original_bytes(item),
            first,
            last: true,
            check: None,
        }
    }

    /// The unit of group `g` of a split region, its first child starting at `at`.
    fn cut(&mut self, plan: Plan, g: usize, mut at: usize) -> Unit {
        let item = plan.item;
        let split = plan.split.as_ref().expect("only split plans are cut");
        let group = &split.groups[g];
        let (program, ty) = self.archive.item_program(item);
        let mut children = Vec::with_capacity(group.end - group.first);
        let last = g + 1 == split.groups.len();
        if let Some(regions) = &split.regions {
            // A regions record: the table says where each child is.
            let r = &regions[g];
            children.push((r.program.clone(), Ty::new(ty.width, r.words)));
            if !last {
                self.current = Some((plan.clone(), g + 1, 0));
            }
            let first_word: u64 = regions[..g].iter().map(|r| r.words).sum();
            return Unit {
                item,
                work: Work::Children(children),
                bytes: r.words * container_bytes(ty.width) as u64,
                first: g == 0,
                last,
                check: Some(UnitCheck {
                    index: g,
                    count: regions.len(),
                    first_word,
                    offset: r.offset,
                    checksum: r.checksum,
                }),
            };
        }
        for c in group.first..group.end {
            let child_ty = Ty::new(ty.width, split.lens[c]);
            let end = if c + 1 == split.lens.len() {
                Some(program.end)
            } else {
                // The child must end before the program does (the last child ends it).
                let bytes = self.archive.program_slice(&(at..program.end));
                match program_end(bytes, child_ty) {
                    Ok(len) if len > 0 && len < bytes.len() => Some(at + len),
                    _ => None,
                }
            };
            let Some(end) = end else {
                // Decoding the whole program reports the error where it is.
                return self.whole(item, g == 0);
            };
            children.push((at..end, child_ty));
            at = end;
        }
        let bytes = group.words * container_bytes(ty.width) as u64;
        if !last {
            self.current = Some((plan, g + 1, at));
        }
        Unit {
            item,
            work: Work::Children(children),
            bytes,
            first: g == 0,
            last,
            check: None,
        }
    }
}

/// Decodes a unit's bytes (its children's, or the whole region's) into a buffer from
/// `pool`. Checks the output size first and releases the program's mapped pages once it
/// is read.
fn decode_unit(archive: &Archive, unit: &Unit, pool: &BufferPool) -> Result<Held> {
    if let Some(why) = archive.lost_reason(unit.item) {
        return Err(Error::archive(
            archive.path(),
            crate::error::ArchiveError::DamagedRecord {
                what: format!("{}: {why}", archive.item_region(unit.item)),
            },
        ));
    }
    match &unit.work {
        Work::Whole => {
            let (program, ty) = archive.item_program(unit.item);
            let node = archive.read_at(unit.item, &program, ty)?;
            // The program's literal bodies are the mapped pages themselves: released once
            // it has run.
            let run = || {
                archive.check_decoded_size(unit.item, unit.bytes)?;
                if archive.is_reference(unit.item) {
                    // Combined with its source tensor's bytes.
                    return archive.run_item(unit.item, &node, ty).map(Held::from);
                }
                // The program's bytes: the header's 8-byte length field is not among them.
                let mut out = pool.take(ty.len as usize * container_bytes(ty.width));
                execute_into(&node, &mut out).map_err(|e| archive.decode_err(unit.item, e))?;
                Ok(out)
            };
            let out = run();
            archive.release(&program);
            out
        }
        Work::Children(children) => {
            archive.check_decoded_size(unit.item, unit.bytes)?;
            let mut out = pool.take(unit.bytes as usize);
            let mut at = 0usize;
            for (range, ty) in children {
                let node = archive.read_at(unit.item, range, *ty)?;
                let len = ty.len as usize * container_bytes(ty.width);
                let ran = execute_into(&node, &mut out[at..at + len]);
                archive.release(range);
                ran.map_err(|e| archive.decode_err_at(unit.item, range.start, e))?;
                at += len;
            }
            Ok(out)
        }
    }
}

/// Output buffers handed back by the sink once their bytes are used, for the next
/// units: decoding into memory already faulted in and touched, not a fresh allocation
/// per tensor (page faults and zeroing were a quarter of decompression's time). A
/// buffer keeps every byte it ever held, so a unit smaller than the buffer's last takes
/// it without zeroing it again (3-5% of a decompression on Zen 3).
#[derive(Default)]
struct BufferPool {
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// A unit's decoded bytes: the first `len` bytes of `buf` (a pooled buffer; what lies
/// beyond them is left from earlier units).
pub(crate) struct Held {
    buf: Vec<u8>,
    len: usize,
}

impl From<Vec<u8>> for Held {
    fn from(buf: Vec<u8>) -> Held {
        Held {
            len: buf.len(),
            buf,
        }
    }
}

impl std::ops::Deref for Held {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

impl BufferPool {
    /// Buffers kept at most (the units in flight are bounded too).
    const KEEP: usize = 8;

    /// A buffer of `len` bytes (their contents unspecified: the caller writes them all).
    fn take(&self, len: usize) -> Held {
        let mut v = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            // The smallest buffer that holds `len`, else the largest (grown).
            let pick = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= len)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)
                .or_else(|| (0..free.len()).max_by_key(|&i| free[i].capacity()));
            pick.map(|i| free.swap_remove(i)).unwrap_or_default()
        };
        if v.len() < len {
            v.resize(len, 0);
        }
        Held { buf: v, len }
    }

    /// Hands `held`'s buffer back, every byte it holds.
    fn give(&self, held: Held) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < Self::KEEP {
            free.push(held.buf);
        }
    }
}

/// What the sink of [`decode_all`] receives for each unit, in source order.
pub(crate) enum Decoded<'a> {
    /// The unit decoded; its bytes follow as [`Decoded::Bytes`] chunks, then
    /// [`Decoded::End`].
    Begin(&'a Unit),
    /// The next bytes of the unit's region.
    Bytes(&'a [u8]),
    /// The unit's bytes are done.
    End(&'a Unit),
    /// The unit could not be decoded.
    Failed(&'a Unit, Error),
}

/// Decodes every region of `archive` on `jobs` threads in bounded memory (see the module
/// doc) and hands the results to `sink` on the calling thread, in source order. A region
/// that cannot be decoded is handed on as [`Decoded::Failed`]; the sink decides whether
/// to go on (returning `Ok`) or stop (an error, returned as is).
///
/// `stop` is polled before each unit is handed on; once it returns true nothing more is
/// decoded and `Ok(false)` is returned (`Ok(true)` when everything was handed on).
///
/// # Errors
/// The sink's error; [`Error::Internal`] if the pool cannot start or a worker panics.
pub(crate) fn decode_all(
    archive: &Archive,
    jobs: usize,
    sink: &mut dyn FnMut(Decoded<'_>) -> Result<()>,
    stop: &dyn Fn() -> bool,
) -> Result<bool> {
    let internal = |what: String| Error::Internal {
        path: archive.path().to_path_buf(),
        what,
    };
    let pool = build_pool(jobs).map_err(internal)?;
    let plans: Vec<Plan> = archive
        .items()
        .iter()
        .map(|&item| plan(archive, item))
        .collect();
    let largest = plans
        .iter()
        .map(|p| match &p.split {
            None => archive.item_original_bytes(p.item),
            Some(s) => {
                let wb = container_bytes(archive.item_program(p.item).1.width) as u64;
                s.groups.iter().map(|g| g.words * wb).max().unwrap_or(0)
            }
        })
        .max()
        .unwrap_or(0);
    let threads = pool.current_num_threads().max(1);
    let budget = largest.saturating_mul(threads as u64 + 1);
    let max_units = threads * UNITS_PER_THREAD;
    let mut units = Units {
        archive,
        plans: plans.into_iter(),
        current: None,
    };

    let halt = AtomicBool::new(false);
    let halt_ref = &halt;
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<Result<Held>>)>();
    let buffers = BufferPool::default();
    let pool_ref = &buffers;
    pool.in_place_scope(|scope| {
        let mut pending: VecDeque<Unit> = VecDeque::new();
        let mut in_flight = 0u64;
        let mut next_seq = 0usize;
        let mut next_sink = 0usize;
        let mut lookahead: Option<Unit> = None;
        let mut exhausted = false;
        let mut ready: BTreeMap<usize, Option<Result<Held>>> = BTreeMap::new();
        let result = (|| {
            loop {
                while pending.len() < max_units {
                    if lookahead.is_none() && !exhausted {
                        lookahead = units.next_unit();
                        exhausted = lookahead.is_none();
                    }
                    let Some(unit) = lookahead.take() else {
                        break;
                    };
                    if !pending.is_empty() && in_flight.saturating_add(unit.bytes) > budget {
                        lookahead = Some(unit);
                        break;
                    }
                    let tx = tx.clone();
                    let seq = next_seq;
                    let job = unit.clone();
                    scope.spawn(move |_| {
                        if halt_ref.load(Ordering::Relaxed) {
                            let _ = tx.send((seq, None));
                            return;
                        }
                        let r =
                            catch_unwind(AssertUnwindSafe(|| decode_unit(archive, &job, pool_ref)))
                                .ok();
                        let _ = tx.send((seq, r));
                    });
                    in_flight += unit.bytes;
                    pending.push_back(unit);
                    next_seq += 1;
                }
                if pending.is_empty() {
                    return Ok(true);
                }
                // A sender lives in this frame, so `recv` only returns a message; every
                // spawned task sends exactly one.
                let Ok((seq, r)) = pool.recv(&rx) else {
                    return Err(internal("worker channel closed".to_string()));
                };
                ready.insert(seq, r);
                while let Some(r) = ready.remove(&next_sink) {
                    let unit = pending.pop_front().expect("one pending unit per result");
                    if stop() {
                        return Ok(false);
                    }
                    match r {
                        Some(Ok(bytes)) => {
                            sink(Decoded::Begin(&unit))?;
                            for b in bytes.chunks(CHUNK_BYTES) {
                                sink(Decoded::Bytes(b))?;
                            }
                            pool_ref.give(bytes);
                            sink(Decoded::End(&unit))?;
                        }
                        Some(Err(e)) => sink(Decoded::Failed(&unit, e))?,
                        None => {
                            return Err(internal(format!(
                                "worker panicked on {}",
                                archive.item_region(unit.item)
                            )))
                        }
                    }
                    in_flight -= unit.bytes;
                    next_sink += 1;
                }
            }
        })();
        if !matches!(result, Ok(true)) {
            halt.store(true, Ordering::Relaxed);
        }
        result
    })
}

/// [`decode_all`] with progress events: `Begin`, one `Item` per region once its last
/// unit is handed on, and `End` when everything was.
pub(crate) fn decode_all_with_progress(
    archive: &Archive,
    jobs: usize,
    progress: &dyn Fn(ProgressEvent<'_>),
    sink: &mut dyn FnMut(Decoded<'_>) -> Result<()>,
    stop: &dyn Fn() -> bool,
) -> Result<bool> {
    progress(ProgressEvent::Begin {
        items: archive.items().len(),
        bytes: archive.original_len(),
    });
    let done = decode_all(
        archive,
        jobs,
        &mut |d| {
            let item = match &d {
                Decoded::End(u) if u.last => Some(u.item),
                Decoded::Failed(u, _) => Some(u.item),
                _ => None,
            };
            sink(d)?;
            if let Some(item) = item {
                progress(ProgressEvent::Item {
                    label: archive.item_label(item),
                    bytes: archive.item_original_bytes(item),
                });
            }
            Ok(())
        },
        stop,
    )?;
    if done {
        progress(ProgressEvent::End);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::safetensors::parse;
    use crate::archive::writer::write_archive;
    use crate::archive::{no_progress, verify, CompressOptions};
    use std::path::Path;

    /// One U8 tensor of 20 Mi words (over `REGION_WORDS`: a `Concat` of twenty regions)
    /// and a small F32 tensor.
    fn big_source() -> Vec<u8> {
        let n: usize = 20 << 20;
        let header = format!(
            r#"{{"big":{{"dtype":"U8","shape":[{n}],"data_offsets":[0,{n}]}},"small":{{"dtype":"F32","shape":[2],"data_offsets":[{n},{}]}}}}"#,
            n + 8
        );
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend((0..n).map(|i| ((i >> 10) as u8) & 0x0f | ((i % 3) as u8) << 4));
        v.extend_from_slice(&1.5f32.to_le_bytes());
        v.extend_from_slice(&(-0.0f32).to_le_bytes());
        v
    }

    fn archive_bytes(src: &[u8]) -> Vec<u8> {
        let parsed = parse(src).unwrap();
        let opts = CompressOptions {
            jobs: Some(2),
            ..CompressOptions::default()
        };
        let mut out = Vec::new();
        write_archive(&parsed, &mut out, &opts, &no_progress, Path::new("mem")).unwrap();
        out
    }

    fn units(a: &Archive) -> Vec<Unit> {
        let mut u = Units {
            archive: a,
            plans: a
                .items()
                .iter()
                .map(|&i| plan(a, i))
                .collect::<Vec<_>>()
                .into_iter(),
            current: None,
        };
        std::iter::from_fn(|| u.next_unit()).collect()
    }

    #[test]
    fn a_large_concat_region_is_decoded_in_units_and_damage_is_reported_once() {
        let src = big_source();
        let bytes = archive_bytes(&src);
        let a = Archive::from_bytes(bytes.clone(), "mem").unwrap();
        let big = a.find("big").unwrap();
        assert_eq!(a.tensors()[big].root_op, "concat");

        // The big tensor (twenty 1 MiB regions, a regions record) is twenty units of one
        // region each, checked against its own checksum, whose children tile its
        // program; others are whole.
        let all = units(&a);
        let parts: Vec<&Unit> = all.iter().filter(|u| u.item == Item::Tensor(big)).collect();
        let sizes: Vec<u64> = parts.iter().map(|u| u.bytes).collect();
        assert_eq!(sizes, vec![1 << 20; 20]);
        let ends: Vec<(bool, bool)> = parts.iter().map(|u| (u.first, u.last)).collect();
        assert_eq!(ends[0], (true, false));
        assert_eq!(ends[1], (false, false));
        assert_eq!(ends[19], (false, true));
        let checks: Vec<UnitCheck> = parts.iter().map(|u| u.check.unwrap()).collect();
        assert_eq!(checks[3].index, 3);
        assert_eq!(checks[3].count, 20);
        assert_eq!(checks[3].offset, 3 << 20);
        let big_bytes = &src[src.len() - 8 - (20 << 20)..src.len() - 8];
        assert_eq!(
            checks[3].checksum,
            crate::hash::xxh3_64(&big_bytes[3 << 20..4 << 20])
        );
        let program = a.tensors()[big].program.clone();
        let ranges: Vec<Range<usize>> = parts
            .iter()
            .flat_map(|u| match &u.work {
                Work::Children(c) => c.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(),
                Work::Whole => panic!("split region decoded whole"),
            })
            .collect();
        assert!(ranges[0].start > program.start);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!(ranges.last().unwrap().end, program.end);
        assert_eq!(all.len(), a.items().len() + 19);

        for jobs in [1, 2, 3] {
            let mut out = Vec::new();
            a.write_original(&mut out, Some(jobs), &no_progress, Path::new("o"))
                .unwrap();
            assert!(out == src, "jobs {jobs}: restored bytes differ");
        }
        let report = verify(&a, Some(2), &no_progress).unwrap();
        assert!(report.is_ok());
        assert_eq!(report.regions.len(), a.items().len());

        // Damage in the last child's bytes, then in the first child's first byte (its
        // unit fails alone): restoring fails, verifying reports the tensor once, and
        // nothing panics.
        for pos in [program.end - 1, ranges[0].start] {
            let mut bad = bytes.clone();
            bad[pos] ^= 0x5a;
            let a = Archive::from_bytes(bad, "mem").unwrap();
            let mut out = Vec::new();
            assert!(
                a.write_original(&mut out, Some(2), &no_progress, Path::new("o"))
                    .is_err(),
                "byte {pos}: damage went unnoticed"
            );
            let report = verify(&a, Some(2), &no_progress).unwrap();
            assert!(!report.is_ok());
            assert_eq!(report.regions.len(), a.items().len(), "byte {pos}");
            let failed: Vec<_> = report.failures().collect();
            assert_eq!(failed.len(), 1, "byte {pos}: {failed:?}");
            assert_eq!(failed[0].tensor, Some(big));
        }
    }
}
