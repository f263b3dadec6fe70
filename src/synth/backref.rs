//! The bounded match finder that proposes `backref` (DESIGN §6; LZ77 parsing).
//!
//! A hole whose words repeat runs of earlier words (a JSON header's keys, a tensor's
//! repeated rows) is parsed into literal words and tokens (literal run, match length,
//! distance), the four children of [`crate::dsl::Op::BackRef`]. The parse is greedy with
//! one step of lazy matching (a match is deferred when the next position starts a longer
//! one) over hash chains of the positions where each [`min_match`]-word window occurs,
//! walking at most [`CHAIN`] earlier positions per window and stopping at a match of
//! [`NICE`] words. Time is `O(n * CHAIN)` word comparisons at worst, memory one `u32` per
//! word plus the hash heads.
//!
//! Gated so that streams without reuse cost little: only streams of at least
//! [`MIN_WORDS`] words of 8 bits or wider, not nearly distinct ([`stats::nearly_distinct`],
//! which rules out every float tensor of trained weights at once); in the first
//! [`PROBE_WORDS`] words enough windows must repeat ([`reuses_enough`], a tenth of a
//! parse's cost); then those words are parsed and the whole stream only when the probe's
//! parse, sized by the search's own literal estimates, comes under [`GAIN`] of the
//! probe's literal.

use super::astar::lit_node_estimate;
use crate::stats;
use crate::tensor::{bits_needed, WordBuf, Words};

/// Earlier positions tried per window.
pub const CHAIN: usize = 16;
/// A match this long ends the chain walk.
pub const NICE: usize = 256;
/// Shortest stream the finder parses.
pub const MIN_WORDS: usize = 64;
/// Longest stream the finder parses (4 Mi words).
pub const MAX_WORDS: usize = 1 << 22;
/// Words parsed first to decide whether the whole stream is worth parsing.
pub const PROBE_WORDS: usize = 1 << 14;
/// The parse is proposed only when its children's estimated bytes are at most this
/// fraction of the literal's.
pub const GAIN: f64 = 0.9;

/// Shortest match in words for streams of `width` bits: 4 bytes, 3 16-bit words, 2
/// wider words (shorter matches cost more as a token than as literals).
pub fn min_match(width: u32) -> usize {
    match width {
        0..=8 => 4,
        9..=16 => 3,
        _ => 2,
    }
}

/// A parse: the four children of `backref`, in order, and the words matched. Two
/// parses are equal when their streams are (whether their estimate was computed yet
/// does not count).
#[derive(Clone, Debug)]
pub struct Parse {
    /// The literal words, of the stream's width.
    pub lits: Words,
    /// Per token, the literal words it writes first.
    pub runs: Words,
    /// Per token, the words it copies.
    pub lens: Words,
    /// Per token, the copy's distance in words minus one.
    pub dists: Words,
    /// Per token, the copy's mode (bit 0 backward, bit 1 top bit flipped); `None` when
    /// every copy is forward and unflipped.
    pub modes: Option<Words>,
    /// Words written by copies (the stream's length minus `lits.len()`).
    pub matched: usize,
    /// Each child's [`lit_node_estimate`] (in [`Parse::children`]' order), once
    /// computed: the gate, the search's comparison of the rows' and the columns'
    /// parses, and the search's sizes of the children all take them.
    estimates: std::cell::OnceCell<Vec<u64>>,
}

impl PartialEq for Parse {
    fn eq(&self, other: &Parse) -> bool {
        (
            &self.lits,
            &self.runs,
            &self.lens,
            &self.dists,
            &self.modes,
            self.matched,
        ) == (
            &other.lits,
            &other.runs,
            &other.lens,
            &other.dists,
            &other.modes,
            other.matched,
        )
    }
}

impl Eq for Parse {}

impl Parse {
    /// The children `[lits, runs, lens, dists]` and `modes` when present, for
    /// [`crate::dsl::Node::backref`].
    pub fn children(self) -> Vec<Words> {
        let mut out = vec![self.lits, self.runs, self.lens, self.dists];
        out.extend(self.modes);
        out
    }

    /// Estimated bytes of the children as literals (the search's estimate).
    pub fn estimate(&self) -> u64 {
        self.estimates().iter().sum::<u64>() + 8
    }

    /// Each child's [`lit_node_estimate`], in [`Parse::children`]' order.
    fn estimates(&self) -> &[u64] {
        self.estimates.get_or_init(|| {
            [&self.lits, &self.runs, &self.lens, &self.dists]
                .into_iter()
                .chain(&self.modes)
                .map(lit_node_estimate)
                .collect()
        })
    }

    /// [`Parse::children`], with each child's [`lit_node_estimate`] when it was
    /// computed (by [`Parse::estimate`]).
    pub fn children_estimated(self) -> (Vec<Words>, Option<Vec<u64>>) {
        let mut p = self;
        let sizes = p.estimates.take();
        (p.children(), sizes)
    }
}

/// The parse of `t` to propose as `backref`, when the gates pass (see the module doc).
pub fn propose(t: &Words) -> Option<Parse> {
    if !may_parse(t) {
        return None;
    }
    propose_unchecked(t)
}

/// [`propose`] without the [`may_parse`] gate, for a caller that has checked it: the
/// probe's [reuse](reuses_enough) and [parse](probe_pays), then the whole stream's.
pub fn propose_unchecked(t: &Words) -> Option<Parse> {
    propose_unchecked_with(t, &|| lit_node_estimate(t))
}

/// [`propose_unchecked`] given `lit`, which returns [`lit_node_estimate`] of `t` (a
/// caller that has it, or will need it, counts it once).
pub fn propose_unchecked_with(t: &Words, lit: &dyn Fn() -> u64) -> Option<Parse> {
    let n = t.len();
    let probe = t.slice(0, n.min(PROBE_WORDS));
    if !reuses_enough(&probe) || (n > PROBE_WORDS && !probe_pays(&probe)) {
        return None;
    }
    parse_if_pays_with(t, lit)
}

/// The parse of `t` when it [pays](probe_pays) (no other gate).
pub fn parse_if_pays(t: &Words) -> Option<Parse> {
    parse_if_pays_with(t, &|| lit_node_estimate(t))
}

/// [`parse_if_pays`] given `lit`, which returns [`lit_node_estimate`] of `t` or of any
/// reordering of its words (the estimate counts the words, not their order).
pub fn parse_if_pays_with(t: &Words, lit: &dyn Fn() -> u64) -> Option<Parse> {
    let p = parse(t);
    pays(&p, t.len(), lit).then_some(p)
}

/// Whether a stream like `t` (its width, length and distinctness) is parsed at all.
pub fn may_parse(t: &Words) -> bool {
    (MIN_WORDS..=MAX_WORDS).contains(&t.len())
        && t.width() >= 8
        && !(t.width() > 16 && stats::nearly_distinct(t))
}

/// Whether the parse of `probe`, the first [`PROBE_WORDS`] words of a stream, says the
/// whole stream is worth parsing. Callers check [`reuses_enough`] first: it rules out
/// most streams at a fraction of the parse's cost.
pub fn probe_pays(probe: &Words) -> bool {
    pays(&parse(probe), probe.len(), &|| lit_node_estimate(probe))
}

/// Whether at least 1/[`REUSE_SHARE`] of the windows of [`min_match`] words in `probe`
/// occur earlier in it, in any of the parse's modes: a necessary condition, up to hash
/// collisions, for a parse that copies a quarter of the stream in matches of three words
/// or more (a match of `L` words starts `L - min_match + 1` repeated windows). One
/// direct-mapped table of the latest position per hash, no chains, no match extension:
/// about a tenth of the parse's time on streams without reuse (trained weights).
pub fn reuses_enough(probe: &Words) -> bool {
    let modes = probe.width() >= 16;
    let need = probe.len().div_ceil(REUSE_SHARE);
    let repeated = match probe.buf() {
        WordBuf::U8(v) => repeated_windows(v, probe.width(), modes, need),
        WordBuf::U16(v) => repeated_windows(v, probe.width(), modes, need),
        WordBuf::U32(v) => repeated_windows(v, probe.width(), modes, need),
        WordBuf::U64(v) => repeated_windows(v, probe.width(), modes, need),
    };
    repeated * REUSE_SHARE >= probe.len()
}

/// [`reuses_enough`] asks for at least one window in this many to be repeated.
pub const REUSE_SHARE: usize = 16;

/// [`repeated_windows`]'s direct-mapped table, kept by each thread across calls and
/// cleared at the start of each: per slot a check of the latest window hashed to it and
/// its position plus one (0: empty), with twice as many slots as windows. The table of
/// a 16 Ki-word probe is 256 KiB; a fresh one per call was about a tenth of a BF16
/// checkpoint's search in page faults, while clearing a kept one also brings it into
/// the cache its lookups then hit. Check and position share one 8-byte slot, so that a
/// window costs one cache line.
#[derive(Default)]
struct Slots {
    slots: Vec<Slot>,
}

/// One entry of [`Slots`]: 32 bits of the window's canonical key's hash above the
/// slot index's bits, with the window's orientation in the low two (which of its four
/// keys, forward, flipped, backward, both, is the canonical one: bit 0 the flip, bit 1
/// the reversal), and the window's position plus one.
#[derive(Clone, Copy, Default)]
struct Slot {
    check: u32,
    tag: u32,
}

impl Slots {
    /// The first `len` slots, cleared.
    fn begin(&mut self, len: usize) -> &mut [Slot] {
        if self.slots.len() < len {
            self.slots.resize(len, Slot::default());
        }
        let slots = &mut self.slots[..len];
        slots.fill(Slot::default());
        slots
    }
}

thread_local! {
    static SLOTS: std::cell::RefCell<Slots> = std::cell::RefCell::new(Slots::default());
}

/// The windows of [`min_match`] words in `v` whose words occur earlier (forward, and
/// with `with_modes` also backward and with the top bit flipped, as [`parse`] matches),
/// found through a direct-mapped table of the latest position per key (so a repeat is
/// missed when a later window took its slot); counting stops at `need`. A window is one
/// key: its words packed into a `u64` when they fit (8-bit words 4 to a key, 16-bit 3,
/// 32-bit 2), else a 64-bit hash of them (a collision there counts a false repeat,
/// which only costs the parse that follows). With the modes a window is looked up and
/// recorded by its canonical key, the least of its four keys (itself, flipped, reversed,
/// both), which a window and each of its three images share: one table access a window
/// instead of four. The two windows' orientations say which mode relates them; a
/// backward source must end before the window starts.
fn repeated_windows<T: Copy + Into<u64>>(
    v: &[T],
    width: u32,
    with_modes: bool,
    need: usize,
) -> usize {
    const MUL: u64 = 0x9E37_79B9_7F4A_7C15;
    let n = v.len();
    let min = min_match(width);
    if n < min {
        return 0;
    }
    let lane = 8 * std::mem::size_of::<T>();
    let top = 1u64 << (width - 1);
    let bits = (usize::BITS - (n - 1).leading_zeros() + 1).clamp(10, 21);
    // The canonical key's hash and orientation of a window of keys `keys` (forward,
    // flipped, backward, both).
    let canonical = |keys: [u64; 4]| {
        let (mut c, mut orient) = (keys[0], 0u32);
        if with_modes {
            for (t, &q) in keys.iter().enumerate().skip(1) {
                if q < c {
                    (c, orient) = (q, t as u32);
                }
            }
        }
        (c.wrapping_mul(MUL), orient)
    };
    SLOTS.with(|cell| {
        let mut table = cell.borrow_mut();
        let slots = table.begin(1 << bits);
        let mut repeated = 0;
        // Window `i` of keys `keys`: counted when a window of the same canonical key was
        // recorded (a backward source ending before the window starts), then recorded.
        let mut visit = |i: usize, keys: [u64; 4]| {
            let (h, orient) = canonical(keys);
            let check = ((h >> (32 - bits)) as u32 & !3) | orient;
            let slot = &mut slots[(h >> (64 - bits)) as usize];
            let found = (slot.check ^ check) & !3 == 0
                && slot.tag != 0
                && ((slot.check ^ check) & 2 == 0 || slot.tag as usize - 1 + min <= i);
            repeated += usize::from(found);
            *slot = Slot {
                check,
                tag: i as u32 + 1,
            };
            repeated >= need
        };
        if lane * min <= 64 {
            // Packed, first word lowest; the backward key has the first word highest.
            // Both roll by one word per position.
            let all = if lane * min == 64 {
                u64::MAX
            } else {
                (1u64 << (lane * min)) - 1
            };
            let flip = (0..min).fold(0, |m, j| m | top << (j * lane));
            let (mut k, mut r) = (0u64, 0u64);
            for (j, &w) in v[..min - 1].iter().enumerate() {
                k |= w.into() << ((j + 1) * lane);
                r = (r << lane) | w.into();
            }
            for (i, &w) in v[min - 1..].iter().enumerate() {
                k = (k >> lane) | w.into() << ((min - 1) * lane);
                r = ((r << lane) & all) | w.into();
                if visit(i, [k, k ^ flip, r, r ^ flip]) {
                    break;
                }
            }
        } else {
            let key =
                |it: &mut dyn Iterator<Item = u64>| it.fold(0, |h, w| (h ^ w).wrapping_mul(MUL));
            for (i, w) in v.windows(min).enumerate() {
                let k = key(&mut w.iter().map(|&x| x.into()));
                let keys = if with_modes {
                    [
                        k,
                        key(&mut w.iter().map(|&x| x.into() ^ top)),
                        key(&mut w.iter().rev().map(|&x| x.into())),
                        key(&mut w.iter().rev().map(|&x| x.into() ^ top)),
                    ]
                } else {
                    [k; 4]
                };
                if visit(i, keys) {
                    break;
                }
            }
        }
        repeated
    })
}

/// Whether parse `p` of a stream of `n` words copies a quarter of it and comes under
/// [`GAIN`] of its literal's estimate `lit()`, by the search's estimates.
fn pays(p: &Parse, n: usize, lit: &dyn Fn() -> u64) -> bool {
    p.matched * 4 >= n && (p.estimate() as f64) <= GAIN * lit() as f64
}

/// Parses `t` into literals and tokens (greedy, one step lazy; see the module doc).
/// Every token writes at least one word; the last may be literals only. Streams of 16
/// bits or wider are also matched backward and with the top bit flipped (the modes of
/// [`crate::dsl::Op::BackRef`]; a float tensor's mirrored or negated rows). Running
/// [`crate::dsl::exec::back_references`] on the result gives `t` back.
pub fn parse(t: &Words) -> Parse {
    let modes = t.width() >= 16;
    match t.buf() {
        WordBuf::U8(v) => parse_in(v, t.width(), modes),
        WordBuf::U16(v) => parse_in(v, t.width(), modes),
        WordBuf::U32(v) => parse_in(v, t.width(), modes),
        WordBuf::U64(v) => parse_in(v, t.width(), modes),
    }
}

/// A match: words, distance field (distance minus one), mode.
#[derive(Clone, Copy, Debug, Default)]
struct Match {
    len: usize,
    dist: usize,
    mode: u64,
}

fn parse_in<T: Copy + Eq + Into<u64>>(v: &[T], width: u32, with_modes: bool) -> Parse {
    let n = v.len();
    let min = min_match(width);
    let top = 1u64 << (width - 1);
    let bits = (usize::BITS - n.leading_zeros()).clamp(10, 18);
    let mut head = vec![u32::MAX; 1 << bits];
    let mut prev = vec![u32::MAX; n];
    let hash_of = |words: &mut dyn Iterator<Item = u64>| -> usize {
        let mut h: u64 = 0;
        for x in words {
            h = (h ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        (h >> (64 - bits)) as usize
    };
    // The hash of the window at `i` as a source: its words forward.
    let hash = |i: usize| hash_of(&mut v[i..i + min].iter().map(|&x| x.into()));
    let insert = |i: usize, head: &mut [u32], prev: &mut [u32]| {
        if i + min <= n {
            let h = hash(i);
            prev[i] = head[h];
            head[h] = i as u32;
        }
    };
    let modes: &[u64] = if with_modes { &[0, 2, 1, 3] } else { &[0] };
    // The longest match of the words at `i` with earlier ones, over the modes.
    let find = |i: usize, head: &[u32], prev: &[u32]| -> Match {
        let mut best = Match::default();
        if i + min > n {
            return best;
        }
        let limit = n - i;
        let at = |k: usize| -> u64 { v[i + k].into() };
        for &mode in modes {
            let x = if mode & 2 != 0 { top } else { 0 };
            // A source window forward equal to the target's window (reversed for mode
            // bit 0), flipped by `x`.
            let h = if mode & 1 == 0 {
                hash_of(&mut (0..min).map(|k| at(k) ^ x))
            } else {
                hash_of(&mut (0..min).rev().map(|k| at(k) ^ x))
            };
            let mut j = head[h];
            for _ in 0..CHAIN {
                if j == u32::MAX {
                    break;
                }
                let jj = j as usize;
                j = prev[jj];
                // A source replaces the best only if longer, so it must match at the
                // best's length: one comparison rules most sources out before their
                // match is extended (zlib's test; the same parse, several times
                // faster on a JSON header).
                let b = best.len;
                let (len, dist) = if mode & 1 == 0 {
                    if b >= limit || v[jj + b].into() ^ x != at(b) {
                        continue;
                    }
                    let len = (0..limit)
                        .take_while(|&k| v[jj + k].into() ^ x == at(k))
                        .count();
                    (len, i - jj - 1)
                } else {
                    let s = jj + min - 1;
                    if s >= i {
                        continue;
                    }
                    let lim = limit.min(s + 1);
                    if b >= lim || v[s - b].into() ^ x != at(b) {
                        continue;
                    }
                    let len = (0..lim)
                        .take_while(|&k| v[s - k].into() ^ x == at(k))
                        .count();
                    (len, i - 1 - s)
                };
                if len > best.len {
                    best = Match { len, dist, mode };
                    if len >= NICE || len == limit {
                        break;
                    }
                }
            }
            if best.len >= NICE || best.len == limit {
                break;
            }
        }
        if best.len >= min {
            best
        } else {
            Match::default()
        }
    };
    let mut lits: Vec<u64> = Vec::new();
    let mut tokens: Vec<[u64; 4]> = Vec::new();
    let mut run_start = 0;
    let mut i = 0;
    // The match at `i + 1` found by the lazy test at `i`, when the test deferred: the
    // next step's own, as nothing is inserted in between.
    let mut deferred: Option<Match> = None;
    while i < n {
        let m = deferred.take().unwrap_or_else(|| find(i, &head, &prev));
        insert(i, &mut head, &mut prev);
        if m.len == 0 {
            i += 1;
            continue;
        }
        if m.len < NICE {
            let later = find(i + 1, &head, &prev);
            if later.len > m.len {
                deferred = Some(later);
                i += 1;
                continue;
            }
        }
        lits.extend(v[run_start..i].iter().map(|&x| x.into()));
        tokens.push([(i - run_start) as u64, m.len as u64, m.dist as u64, m.mode]);
        for k in i + 1..i + m.len {
            insert(k, &mut head, &mut prev);
        }
        i += m.len;
        run_start = i;
    }
    if run_start < n {
        lits.extend(v[run_start..].iter().map(|&x| x.into()));
        tokens.push([(n - run_start) as u64, 0, 0, 0]);
    }
    let stream = |f: usize| {
        let vals: Vec<u64> = tokens.iter().map(|t| t[f]).collect();
        let w = bits_needed(vals.iter().copied().max().unwrap_or(0)).max(1);
        Words::from_u64s(w, &vals)
    };
    Parse {
        matched: n - lits.len(),
        lits: Words::from_u64s(width, &lits),
        runs: stream(0),
        lens: stream(1),
        dists: stream(2),
        modes: tokens.iter().any(|t| t[3] != 0).then(|| stream(3)),
        estimates: std::cell::OnceCell::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::exec::back_references;
    use crate::test_util::lcg;

    fn round_trip(t: &Words) -> Parse {
        let p = parse(t);
        let back = back_references(
            t.len(),
            &p.lits,
            &p.runs,
            &p.lens,
            &p.dists,
            p.modes.as_ref(),
        )
        .unwrap();
        assert_eq!(&back, t);
        assert_eq!(p.matched, t.len() - p.lits.len());
        p
    }

    /// A worked example: "abcdabcdabcdX" is 4 literals, one overlapping copy of 8 words
    /// at distance 4, then one literal.
    #[test]
    fn parse_of_a_worked_example() {
        let t = Words::from_le_bytes(8, b"abcdabcdabcdX").unwrap();
        let p = round_trip(&t);
        assert_eq!(p.lits, Words::from_le_bytes(8, b"abcdX").unwrap());
        assert_eq!(p.runs.to_u64s(), vec![4, 1]);
        assert_eq!(p.lens.to_u64s(), vec![8, 0]);
        assert_eq!(p.dists.to_u64s(), vec![3, 0]);
        assert_eq!((p.runs.width(), p.lens.width(), p.dists.width()), (3, 4, 2));
    }

    #[test]
    fn parses_round_trip_on_every_container() {
        let mut next = lcg(7);
        for width in [8, 12, 16, 24, 32, 64] {
            // Random words with copied stretches, some overlapping, some at the end.
            let mut v: Vec<u64> = Vec::new();
            while v.len() < 5000 {
                if v.len() > 10 && next().is_multiple_of(3) {
                    let d = 1 + (next() as usize % v.len().min(300));
                    for _ in 0..(next() % 40) {
                        v.push(v[v.len() - d]);
                    }
                } else {
                    v.push(next() % 50);
                }
            }
            let t = Words::from_u64s(width, &v);
            let p = round_trip(&t);
            assert!(p.matched > 1000, "width {width}: {} matched", p.matched);
        }
        // No reuse at all: one token of literals.
        let t = Words::from_u64s(16, &(0..1000).collect::<Vec<_>>());
        let p = round_trip(&t);
        assert_eq!((p.matched, p.runs.to_u64s()), (0, vec![1000]));
        // A constant stream: one literal, one copy of the rest at distance 1.
        let t = Words::filled(8, 9, 777);
        let p = round_trip(&t);
        assert_eq!(p.lens.to_u64s(), vec![776]);
        assert_eq!(p.dists.to_u64s(), vec![0]);
    }

    /// The parse's exact shape (literal words, tokens, words copied, the sum of the
    /// distances) on streams of copied stretches at every container and mode: what the
    /// match finder chose before the chain walk skipped sources that cannot be longer
    /// than the best (session 28; the archives of every corpus file were unchanged).
    #[test]
    fn parses_keep_their_exact_shape() {
        let mut next = lcg(12345);
        let mut got = Vec::new();
        for width in [8, 16, 32, 64] {
            let top = 1u64 << (width - 1);
            let mut v: Vec<u64> = Vec::new();
            while v.len() < 20_000 {
                let r = next() % 6;
                if v.len() > 10 && r < 3 {
                    let d = 1 + (next() as usize % v.len().min(2000));
                    let from = v.len() - d;
                    for k in 0..(next() % 60) as usize {
                        let x = match r {
                            0 => v[from + k],
                            // Backward and flipped copies (modes of 16 bits and wider).
                            1 => v[from.saturating_sub(k)],
                            _ => v[from + k] ^ top,
                        };
                        v.push(x);
                    }
                } else {
                    v.push(next() % 20);
                }
            }
            let p = round_trip(&Words::from_u64s(width, &v));
            let dists: u64 = p.dists.iter().sum();
            got.push((width, p.lits.len(), p.runs.len(), p.matched, dists));
        }
        assert_eq!(
            got,
            vec![
                (8, 2025, 1130, 17982, 1599067),
                (16, 597, 658, 19454, 720337),
                (32, 406, 946, 19605, 1123135),
                (64, 370, 958, 19657, 984668)
            ]
        );
    }

    /// 32-bit words: a ramp, its mirror image, then the ramp with the top bit flipped:
    /// two copies, one backward, one flipped.
    #[test]
    fn mirrored_and_negated_words_are_copied_backward_and_flipped() {
        let ramp: Vec<u64> = (1..=50u64).map(|i| i * 1000 + 7).collect();
        let mut v = ramp.clone();
        v.extend(ramp.iter().rev());
        v.extend(ramp.iter().map(|x| x ^ (1 << 31)));
        let p = round_trip(&Words::from_u64s(32, &v));
        assert_eq!(p.lits.len(), 50);
        assert_eq!(p.runs.to_u64s(), vec![50, 0]);
        assert_eq!(p.lens.to_u64s(), vec![50, 50]);
        assert_eq!(p.dists.to_u64s(), vec![0, 99]);
        assert_eq!(p.modes.map(|m| m.to_u64s()), Some(vec![1, 2]));
        // Bytes are matched forward only.
        let bytes: Vec<u8> = (0..60).chain((0..60).rev()).collect();
        let p = round_trip(&Words::from_le_bytes(8, &bytes).unwrap());
        assert_eq!((p.modes, p.matched), (None, 0));
    }

    /// The reuse gate: counts of repeated windows on worked examples, and the verdict on
    /// words without reuse.
    #[test]
    fn repeated_windows_count_every_mode() {
        // "abcdabcdabcdX": windows at 4..=8 repeat the one 4 words earlier.
        assert_eq!(repeated_windows(b"abcdabcdabcdX", 8, false, usize::MAX), 5);
        // Counting stops at the number asked for.
        assert_eq!(repeated_windows(b"abcdabcdabcdX", 8, false, 3), 3);
        // A ramp of 50 words and its mirror: the mirror's 48 windows occur backward.
        let ramp: Vec<u32> = (1..=50u32).map(|i| i * 1000 + 7).collect();
        let mut v = ramp.clone();
        v.extend(ramp.iter().rev());
        assert_eq!(repeated_windows(&v, 32, true, usize::MAX), 49);
        assert_eq!(repeated_windows(&v, 32, false, usize::MAX), 0);
        // Then negated: 49 more windows, flipped.
        v.extend(ramp.iter().map(|x| x ^ (1 << 31)));
        assert_eq!(repeated_windows(&v, 32, true, usize::MAX), 98);
        // A backward source must end before the window starts: in a, b, a the window
        // (b, a) reversed is the window before it, which it overlaps; in a, b, c, b, a the
        // last window's is two words back and counts, (c, b)'s overlaps and does not.
        let (a, b, c) = (7u32, 9, 11);
        assert_eq!(repeated_windows(&[a, b, a], 32, true, usize::MAX), 0);
        assert_eq!(repeated_windows(&[a, b, c, b, a], 32, true, usize::MAX), 1);
        // Forward copies may overlap: a run of one word repeats at every window.
        assert_eq!(repeated_windows(&[a; 6], 32, true, usize::MAX), 4);
        // 64-bit words are hashed, not packed: the same counts.
        let wide: Vec<u64> = v.iter().map(|&x| u64::from(x) << 32 | 5).collect();
        assert_eq!(repeated_windows(&wide, 64, true, usize::MAX), 98);
        // Pseudo-random 16-bit words have next to no repeated 3-word windows.
        let mut seed = 1u64;
        let t = Words::from_fn(16, PROBE_WORDS, |_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            seed >> 48
        });
        assert!(!reuses_enough(&t));
        let json = br#"{"a.weight":{"dtype":"F32","shape":[64],"data_offsets":[0,256]},"#;
        let text: Vec<u8> = (0..40).flat_map(|_| json.iter().copied()).collect();
        assert!(reuses_enough(&Words::from_le_bytes(8, &text).unwrap()));
    }

    #[test]
    fn proposed_only_where_reuse_pays() {
        let json = br#"{"a.weight":{"dtype":"F32","shape":[64],"data_offsets":[0,256]},"#;
        let text: Vec<u8> = (0..40).flat_map(|_| json.iter().copied()).collect();
        assert!(propose(&Words::from_le_bytes(8, &text).unwrap()).is_some());
        // Distinct 32-bit words: ruled out before parsing.
        let t = Words::from_u64s(
            32,
            &(0..100_000u64)
                .map(|i| i * 2_654_435_761 % (1 << 32))
                .collect::<Vec<_>>(),
        );
        assert!(propose(&t).is_none());
        // Too short, too narrow.
        assert!(propose(&Words::filled(8, 1, 63)).is_none());
        assert!(propose(&Words::filled(7, 1, 1000)).is_none());
    }
}
