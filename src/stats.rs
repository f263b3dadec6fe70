//! Histograms and empirical entropies of word streams, shared by the literal codecs, the
//! synthesizer's size estimates and the TUI's "why this size" view.

use crate::tensor::{WordBuf, Words};

/// Counts of each distinct word, sorted by word value ascending.
///
/// Returns `None` when the stream has more than `max_distinct` distinct words (the
/// counting stops early, so a wide stream with many values costs little).
///
/// One pass over the stream: dense counters for 8-bit containers and for long 16-bit
/// streams, a radix sort for short 16-bit streams, an open-addressing hash table for
/// wider words.
pub fn histogram(words: &Words, max_distinct: usize) -> Option<Vec<(u64, u64)>> {
    let out = match words.buf() {
        WordBuf::U8(v) => dense_u8(v),
        WordBuf::U16(v) if v.len() >= DENSE_U16_WORDS => dense_u16(v),
        WordBuf::U16(v) => radix_runs_u16(v),
        WordBuf::U32(v) if v.len() <= RADIX_U32_WORDS => radix_runs_u32(v, words.width()),
        WordBuf::U32(v) => sparse(v.iter().map(|&x| u64::from(x)), v.len(), max_distinct)?,
        WordBuf::U64(v) => sparse(v.iter().copied(), v.len(), max_distinct)?,
    };
    (out.len() <= max_distinct).then_some(out)
}

/// 16-bit streams of at least this many words are counted in a table of 2^16 counters;
/// shorter ones (the search's 4,096-word samples among them) are sorted: clearing and
/// scanning the table costs more than two radix passes below about 2^15 words.
const DENSE_U16_WORDS: usize = 1 << 15;

fn dense_u8(v: &[u8]) -> Vec<(u64, u64)> {
    // Eight interleaved tables of 32-bit counts (8 KiB), so that repeated bytes do not
    // serialize on one counter; the bytes read eight at a time as one 64-bit word. A
    // chunk of at most 2^32 - 1 bytes cannot overflow a count.
    let mut totals = [0u64; 256];
    for chunk in v.chunks(u32::MAX as usize) {
        let mut t = [[0u32; 256]; 8];
        let mut eights = chunk.chunks_exact(8);
        for c in &mut eights {
            let w = u64::from_le_bytes(c.try_into().expect("eight bytes"));
            for (j, t) in t.iter_mut().enumerate() {
                t[(w >> (8 * j)) as usize & 0xFF] += 1;
            }
        }
        for &x in eights.remainder() {
            t[0][usize::from(x)] += 1;
        }
        for (s, total) in totals.iter_mut().enumerate() {
            *total += t.iter().map(|t| u64::from(t[s])).sum::<u64>();
        }
    }
    totals
        .iter()
        .enumerate()
        .filter_map(|(s, &c)| (c > 0).then_some((s as u64, c)))
        .collect()
}

fn dense_u16(v: &[u16]) -> Vec<(u64, u64)> {
    if v.len() < u32::MAX as usize {
        return with_u16_counts(|t| {
            for &x in v {
                t[usize::from(x)] += 1;
            }
            drain_counts(t)
        });
    }
    let mut t = vec![0u64; 65_536];
    for &x in v {
        t[usize::from(x)] += 1;
    }
    t.iter()
        .enumerate()
        .filter_map(|(s, &c)| (c > 0).then_some((s as u64, c)))
        .collect()
}

thread_local! {
    static U16_COUNTS: std::cell::RefCell<Box<[u32; 1 << 16]>> = std::cell::RefCell::new(
        vec![0u32; 1 << 16]
            .into_boxed_slice()
            .try_into()
            .expect("2^16 counters"),
    );
}

/// Runs `f` on this thread's table of 2^16 counters, all zero on entry; `f` must leave
/// them zero ([`drain_counts`]). One table per thread, kept across calls: a fresh
/// zeroed 256 KiB table per histogram cost its clearing and page faults on every
/// 16-bit tensor.
pub(crate) fn with_u16_counts<R>(f: impl FnOnce(&mut [u32; 1 << 16]) -> R) -> R {
    U16_COUNTS.with(|t| f(&mut t.borrow_mut()))
}

/// [`drain_counts`] of a table in which only the words of `v` were counted: a short
/// stream's counters are found through its words and sorted, not by a scan of all 2^16
/// (a 4,096-word sample's histogram took 4 times as long to drain as to count, and the
/// search counts many: a fifth of silero's compression).
pub(crate) fn drain_counts_of(t: &mut [u32; 1 << 16], v: &[u16]) -> Vec<(u64, u64)> {
    if v.len() >= 1 << 13 {
        return drain_counts(t);
    }
    let mut out = Vec::new();
    for &x in v {
        let c = &mut t[usize::from(x)];
        if *c > 0 {
            out.push((u64::from(x), u64::from(*c)));
            *c = 0;
        }
    }
    out.sort_unstable_by_key(|&(x, _)| x);
    out
}

/// The `(word, count)` pairs of the nonzero counters of `t`, ascending, leaving every
/// counter zero.
pub(crate) fn drain_counts(t: &mut [u32; 1 << 16]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (s, c) in t.iter_mut().enumerate() {
        if *c > 0 {
            out.push((s as u64, u64::from(*c)));
            *c = 0;
        }
    }
    out
}

/// The histogram of a short 16-bit stream, too short to pay for clearing a dense table:
/// a two-pass LSD radix sort (low byte, then high byte), then the runs of equal words.
fn radix_runs_u16(v: &[u16]) -> Vec<(u64, u64)> {
    let mut lo = [0usize; 256];
    let mut hi = [0usize; 256];
    for &x in v {
        lo[usize::from(x & 0xFF)] += 1;
        hi[usize::from(x >> 8)] += 1;
    }
    let starts = |counts: &mut [usize; 256]| {
        let mut at = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
    };
    starts(&mut lo);
    starts(&mut hi);
    let mut by_lo = vec![0u16; v.len()];
    for &x in v {
        let slot = &mut lo[usize::from(x & 0xFF)];
        by_lo[*slot] = x;
        *slot += 1;
    }
    let mut sorted = vec![0u16; v.len()];
    for &x in &by_lo {
        let slot = &mut hi[usize::from(x >> 8)];
        sorted[*slot] = x;
        *slot += 1;
    }
    runs(sorted.into_iter().map(u64::from))
}

/// The `(word, count)` pairs of the runs of equal words of a sorted stream.
fn runs(sorted: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for x in sorted {
        match out.last_mut() {
            Some((s, c)) if *s == x => *c += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

/// 32-bit containers of at most this many words are counted by sorting (three passes of
/// a radix sort, then the runs): five to ten times faster than hashing each word when
/// most words are distinct (a float's mantissas), and bounded, since the stream is short.
/// Longer ones are hashed, which stops once `max_distinct` is passed.
const RADIX_U32_WORDS: usize = 1 << 17;

/// The histogram of a stream of 32-bit containers holding `width`-bit words: an LSD
/// radix sort in passes of 11 bits (a pass whose digit is the same for every word is
/// skipped), then the runs of equal words.
fn radix_runs_u32(v: &[u32], width: u32) -> Vec<(u64, u64)> {
    const BITS: u32 = 11;
    if v.len() <= SORT_U32_WORDS {
        let mut sorted = v.to_vec();
        sorted.sort_unstable();
        return runs(sorted.into_iter().map(u64::from));
    }
    // The counts of every pass's digit in one pass over the words (the counts of a
    // digit do not depend on the order the words are in).
    let passes = width.div_ceil(BITS).min(3) as usize;
    let digit = |x: u32, p: usize| ((x >> (p as u32 * BITS)) & ((1 << BITS) - 1)) as usize;
    let mut starts = [[0u32; 1 << BITS]; 3];
    for &x in v {
        for (p, s) in starts.iter_mut().enumerate().take(passes) {
            s[digit(x, p)] += 1;
        }
    }
    RADIX_U32.with(|bufs| {
        let (cur, next) = &mut *bufs.borrow_mut();
        cur.clear();
        cur.extend_from_slice(v);
        next.resize(v.len(), 0);
        for (p, starts) in starts.iter_mut().enumerate().take(passes) {
            if starts.contains(&(v.len() as u32)) {
                continue;
            }
            let mut at = 0;
            for c in starts.iter_mut() {
                let n = *c;
                *c = at;
                at += n;
            }
            for &x in cur.iter() {
                let slot = &mut starts[digit(x, p)];
                next[*slot as usize] = x;
                *slot += 1;
            }
            std::mem::swap(cur, next);
        }
        runs(cur[..v.len()].iter().map(|&x| u64::from(x)))
    })
}

/// 32-bit streams of at most this many words are sorted by comparison: the radix
/// sort's three tables of 2,048 counters cost more to clear and sum than a short sort.
const SORT_U32_WORDS: usize = 512;

thread_local! {
    /// The radix sort's two buffers, kept by each thread across calls.
    static RADIX_U32: std::cell::RefCell<(Vec<u32>, Vec<u32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

fn sparse(it: impl Iterator<Item = u64>, n: usize, max_distinct: usize) -> Option<Vec<(u64, u64)>> {
    let mut map: U64Map<u64> = U64Map::with_capacity(n.min(max_distinct).min(1024));
    for x in it {
        *map.entry(x) += 1;
        if map.len() > max_distinct {
            return None;
        }
    }
    let mut out: Vec<(u64, u64)> = map.iter().collect();
    out.sort_unstable();
    Some(out)
}

/// Words [`nearly_distinct`] looks at.
pub const DISTINCT_PROBE: usize = 4096;

/// Whether nearly every word of `words` is distinct (at least 95% of the probed words
/// occur once among them), judged on at most [`DISTINCT_PROBE`] evenly spaced words, in
/// one sort of those words: `false` for streams of fewer than 256 words.
///
/// Such a stream has more distinct words than its probe by far: under a uniform
/// distribution over `D` words, a probe of `s` words keeps 95% singletons only when
/// `D > s / -ln(0.95)`, about 20 `s` (80,000 words for a full probe), more than the
/// table codecs can take ([`crate::codec::MAX_TABLE_SYMBOLS`]). [`beyond_tables`] and the
/// synthesizer's sampled size estimates use it to skip counting wide fields (a float's
/// mantissa, whole 32-bit words) that no table codec can code.
pub fn nearly_distinct(words: &Words) -> bool {
    if words.len() < 256 {
        return false;
    }
    let probe = sorted_probe(words);
    let m = probe.len();
    let singletons = runs(probe.into_iter())
        .iter()
        .filter(|&&(_, c)| c == 1)
        .count();
    singletons * 20 >= m * 19
}

/// At most [`DISTINCT_PROBE`] evenly spaced words of `words` (every `ceil(n / 4096)`-th
/// from the first), sorted: what [`nearly_distinct`] judges a stream by (the fast
/// level's tests of few values count the same words, [`probe_has_more_than`]).
pub fn sorted_probe(words: &Words) -> Vec<u64> {
    let mut probe: Vec<u64> = probe_words(words).collect();
    probe.sort_unstable();
    probe
}

/// The probe's words in stream order: every `ceil(n / 4096)`-th from the first.
fn probe_words(words: &Words) -> impl Iterator<Item = u64> + '_ {
    let n = words.len();
    (0..n)
        .step_by(n.div_ceil(DISTINCT_PROBE).max(1))
        .map(|i| words.get(i))
}

/// Whether the probe of [`sorted_probe`] (the same words, unsorted) holds more than
/// `limit` distinct words: counted in a hash set, stopping as soon as it does. What the
/// fast level's tests of few values ask; ordinary weights exceed their limits within a
/// few hundred words, where sorting the probe took 60 us a tensor.
pub fn probe_has_more_than(words: &Words, limit: usize) -> bool {
    let mut seen: U64Map<()> = U64Map::with_capacity(limit.saturating_add(1).min(DISTINCT_PROBE));
    for w in probe_words(words) {
        seen.entry(w);
        if seen.len() > limit {
            return true;
        }
    }
    false
}

/// Whether a stream certainly has more distinct words than the table codecs take
/// ([`crate::codec::MAX_TABLE_SYMBOLS`], 65,536), judged without counting them: it is
/// wider than 16 bits, at least twice that long, and [`nearly_distinct`] (its probe of
/// 4,096 words then implies about 80,000 distinct words or more; a stream of exactly
/// 65,536 equally likely words gives a probe of 93.75% singletons on average).
///
/// Shorter nearly-distinct streams are counted: a table of their words can still pay
/// when the words cluster (float words of a few exponents: the sorted table's gaps are
/// cheap), which bit packing cannot see.
pub fn beyond_tables(words: &Words) -> bool {
    words.width() > 16
        && words.len() >= 2 * crate::codec::MAX_TABLE_SYMBOLS
        && nearly_distinct(words)
}

/// Open-addressing hash map from `u64` keys (linear probing, Fibonacci hashing,
/// power-of-two capacity kept at most half full). Faster than `HashMap` for the
/// histogram and symbol-index lookups of the codecs.
#[derive(Clone, Debug)]
pub(crate) struct U64Map<V> {
    keys: Vec<u64>,
    vals: Vec<V>,
    used: Vec<bool>,
    len: usize,
    /// `64 - log2(capacity)`.
    shift: u32,
}

impl<V: Copy + Default> U64Map<V> {
    /// A map with room for `n` keys before it grows.
    pub(crate) fn with_capacity(n: usize) -> U64Map<V> {
        let cap = n.saturating_mul(2).max(16).next_power_of_two();
        U64Map {
            keys: vec![0; cap],
            vals: vec![V::default(); cap],
            used: vec![false; cap],
            len: 0,
            shift: 64 - cap.trailing_zeros(),
        }
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn home(&self, k: u64) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The value of `k`, if present.
    #[inline]
    pub(crate) fn get(&self, k: u64) -> Option<V> {
        let m = self.keys.len() - 1;
        let mut i = self.home(k);
        loop {
            if !self.used[i] {
                return None;
            }
            if self.keys[i] == k {
                return Some(self.vals[i]);
            }
            i = (i + 1) & m;
        }
    }

    /// The value of `k`, inserted as `V::default()` if absent.
    #[inline]
    pub(crate) fn entry(&mut self, k: u64) -> &mut V {
        let m = self.keys.len() - 1;
        let mut i = self.home(k);
        loop {
            if !self.used[i] {
                break;
            }
            if self.keys[i] == k {
                return &mut self.vals[i];
            }
            i = (i + 1) & m;
        }
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
            return self.entry(k);
        }
        self.used[i] = true;
        self.keys[i] = k;
        self.len += 1;
        &mut self.vals[i]
    }

    fn grow(&mut self) {
        let mut bigger = U64Map::with_capacity(self.keys.len());
        for (k, v) in self.iter() {
            *bigger.entry(k) = v;
        }
        *self = bigger;
    }

    /// All `(key, value)` pairs, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        (0..self.keys.len())
            .filter(|&i| self.used[i])
            .map(|i| (self.keys[i], self.vals[i]))
    }
}

/// Order-0 empirical entropy in bits per word of a histogram (0 for an empty one).
pub fn entropy_bits(counts: impl IntoIterator<Item = u64> + Clone) -> f64 {
    let total: u64 = counts.clone().into_iter().sum();
    if total == 0 {
        return 0.0;
    }
    let t = total as f64;
    let mut h = 0.0;
    // Each small count's term computed once (the same value every time): most distinct
    // words of a wide stream occur once or a few times, and `log2` was most of the time.
    let mut memo = [None::<f64>; 64];
    let term = |c: u64| {
        let p = c as f64 / t;
        p * p.log2()
    };
    for c in counts {
        if c > 0 {
            h -= match memo.get_mut(c as usize) {
                Some(m) => *m.get_or_insert_with(|| term(c)),
                None => term(c),
            };
        }
    }
    h
}

/// Order-0 empirical entropy of a stream in bits per word, or `None` if it has more than
/// `max_distinct` distinct words.
pub fn stream_entropy_bits(words: &Words, max_distinct: usize) -> Option<f64> {
    histogram(words, max_distinct).map(|h| entropy_bits(h.iter().map(|&(_, c)| c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draining a table through the counted words gives the full scan's pairs, and
    /// leaves the table zero, short streams and long.
    #[test]
    fn draining_through_the_words_equals_the_full_scan() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for n in [0usize, 1, 7, 384, 4096, 8191, 8192, 20_000] {
            let v: Vec<u16> = (0..n)
                .map(|i| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    // Clustered words and a few far ones, repeats included.
                    if i % 17 == 0 {
                        (s >> 48) as u16
                    } else {
                        (s % 97) as u16 * 3
                    }
                })
                .collect();
            let count = |t: &mut [u32; 1 << 16]| v.iter().for_each(|&x| t[usize::from(x)] += 1);
            let full = with_u16_counts(|t| {
                count(t);
                drain_counts(t)
            });
            let through = with_u16_counts(|t| {
                count(t);
                let d = drain_counts_of(t, &v);
                assert!(t.iter().all(|&c| c == 0), "n = {n}");
                d
            });
            assert_eq!(through, full, "n = {n}");
            assert_eq!(full.iter().map(|p| p.1).sum::<u64>(), n as u64);
        }
    }

    #[test]
    fn histogram_and_entropy_exact() {
        let w = Words::from_u64s(16, &[3, 1, 3, 3, 1, 2, 3, 3]);
        assert_eq!(histogram(&w, 10).unwrap(), vec![(1, 2), (2, 1), (3, 5)]);
        assert!(histogram(&w, 2).is_none());
        let two = Words::from_u64s(1, &[0, 1, 0, 1]);
        assert_eq!(stream_entropy_bits(&two, 10), Some(1.0));
        let w32 = Words::from_u64s(32, &[7, 7, 9]);
        assert_eq!(histogram(&w32, 2).unwrap(), vec![(7, 2), (9, 1)]);
        assert_eq!(entropy_bits([4u64]), 0.0);
    }

    #[test]
    fn histogram_paths_agree() {
        // Long 16-bit streams take the dense path, short ones the sort path, wide words
        // the hash path: all must give the same sorted counts.
        let vals: Vec<u64> = (0..10_000u64).map(|i| (i * i * 7919) % 300).collect();
        let mut expect = vec![0u64; 300];
        for &v in &vals {
            expect[v as usize] += 1;
        }
        let expect: Vec<(u64, u64)> = expect
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(s, &c)| (s as u64, c))
            .collect();
        for width in [9, 16, 24, 32, 64] {
            let w = Words::from_u64s(width, &vals);
            assert_eq!(histogram(&w, 65_536).unwrap(), expect, "width {width}");
            let short = Words::from_u64s(width, &vals[..100]);
            let h = histogram(&short, 65_536).unwrap();
            assert_eq!(h.iter().map(|&(_, c)| c).sum::<u64>(), 100);
        }
        // Bytes: every count against a plain count, at lengths around the eight-byte
        // loads.
        for n in (0..=17).chain([1001, 4096 + 3]) {
            let bytes = Words::from_fn(8, n, |i| ((i as u64 * 2_654_435_761) >> 7) % 97 * 2);
            let mut plain = [0u64; 256];
            bytes.iter().for_each(|x| plain[x as usize] += 1);
            let plain: Vec<(u64, u64)> = (0..256u64)
                .filter(|&s| plain[s as usize] > 0)
                .map(|s| (s, plain[s as usize]))
                .collect();
            assert_eq!(histogram(&bytes, 256).unwrap(), plain, "{n} bytes");
        }
        let bytes = Words::from_fn(8, 1001, |i| i as u64 * 7);
        let h = histogram(&bytes, 256).unwrap();
        assert_eq!(h.len(), 256);
        assert_eq!((h[0], h[255]), ((0, 4), (255, 4)));
        assert!(histogram(&bytes, 255).is_none());
        assert!(histogram(&Words::from_fn(32, 5000, |i| i as u64), 4999).is_none());
        // 32-bit words sorted (up to 2^17 words) or hashed (longer): the same counts,
        // against an ordered map; words whose top digit is shared skip a radix pass.
        for (n, top) in [(1 << 17, 0x7Fu64), (1 << 17, 0), ((1 << 17) + 1, 0x7F)] {
            let vals: Vec<u64> = (0..n as u64)
                .map(|i| ((i * 2_654_435_761) % 20_000) | ((i % 3 * top) << 24))
                .collect();
            let mut expect = std::collections::BTreeMap::new();
            for &v in &vals {
                *expect.entry(v).or_insert(0u64) += 1;
            }
            let got = histogram(&Words::from_u64s(32, &vals), 65_536).unwrap();
            assert!(got == expect.into_iter().collect::<Vec<_>>(), "{n} words");
        }
    }

    #[test]
    fn short_16_bit_histogram_is_sorted_by_both_bytes() {
        // Words that order differently by low byte and by high byte: a radix sort with
        // its passes swapped would list 0xFF00 before 0x0102.
        let w = Words::from_u64s(16, &[0x0102, 0x0201, 0x0102, 0xFF00, 0x00FF]);
        assert_eq!(
            histogram(&w, 10).unwrap(),
            vec![(0x00FF, 1), (0x0102, 2), (0x0201, 1), (0xFF00, 1)]
        );
        // 4,095 words over the whole 16-bit range (the longest stream the radix path
        // takes), 500 of them twice, against counts from an ordered map.
        let vals: Vec<u64> = (0..4095u64)
            .map(|i| (i * 40_503 + i / 7) % 65_536)
            .collect();
        let mut twice = vals.clone();
        twice.truncate(3595);
        twice.extend_from_slice(&vals[..500]);
        let mut expect = std::collections::BTreeMap::new();
        for &v in &twice {
            *expect.entry(v).or_insert(0u64) += 1;
        }
        let got = histogram(&Words::from_u64s(16, &twice), 65_536).unwrap();
        assert_eq!(got, expect.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn nearly_distinct_exact_cases() {
        // 10,000 distinct words (a probe of every third: 3,334 distinct).
        assert!(nearly_distinct(
            &Words::from_fn(32, 10_000, |i| i as u64 * 7919)
        ));
        // 10% of the probe repeated: 90% singletons.
        let v: Vec<u64> = (0..4096u64)
            .map(|i| if i % 10 == 0 { 1 } else { i })
            .collect();
        assert!(!nearly_distinct(&Words::from_u64s(32, &v)));
        // 4% of the probe repeated in pairs: 96% singletons.
        let v: Vec<u64> = (0..4096u64)
            .map(|i| if i % 50 == 1 { i - 1 } else { i })
            .collect();
        assert!(nearly_distinct(&Words::from_u64s(32, &v)));
        // A few hundred values over a long stream, and a stream too short to judge.
        assert!(!nearly_distinct(&Words::from_fn(23, 100_000, |i| (i
            as u64
            * 31)
            % 300)));
        assert!(!nearly_distinct(&Words::from_fn(32, 255, |i| i as u64)));
    }

    #[test]
    fn u64_map_grows_and_finds() {
        let mut m: U64Map<u32> = U64Map::with_capacity(1);
        for i in 0..5000u64 {
            *m.entry(i << 40) = i as u32;
        }
        assert_eq!(m.len(), 5000);
        for i in 0..5000u64 {
            assert_eq!(m.get(i << 40), Some(i as u32));
        }
        assert_eq!(m.get(1), None);
    }
}
