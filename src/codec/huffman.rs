//! Canonical Huffman code over the distinct words of a stream (at most
//! [`MAX_TABLE_SYMBOLS`]), code lengths limited to [`MAX_CODE_LEN`] bits.
//!
//! # Body
//!
//! One LSB-first bit stream (see [`super::bitio`]), zero-padded to a whole byte:
//!
//! 1. the symbol count `m` and the sorted symbol set ([`super::table`]);
//! 2. for `m >= 2`, the code length of every symbol in symbol order, each in `1..=16`:
//!    one mode bit, then
//!    * mode 0, fixed width: `min - 1` in 4 bits, `w` in 3 bits (0..=4), then each
//!      `len - min` in `w` bits;
//!    * mode 1, deltas: the first length minus one in 4 bits, then for each next length
//!      `0` (same), `10s` (one more if `s = 0`, one less if `s = 1`) or `11` and the
//!      length minus one in 4 bits;
//!
//!    the encoder writes the shorter (ties: mode 0). The lengths must form a complete
//!    prefix code (Kraft sum exactly 1);
//! 3. the payload: each word's code, canonical codes (shorter first, then by symbol value)
//!    written most significant code bit first. With `m = 1` the payload is empty.
//!
//! Code lengths are optimal for the limit: plain Huffman when it fits in 16 bits,
//! otherwise package-merge (Larmore and Hirschberg 1990).

use super::bitio::{peek64, BitReader, BitWriter};
use super::table::{
    check_width, count_bits, plan_set, read_count, read_set, try_constant, try_filled, write_count,
    write_set, SetPlan, SymbolIndex, Word,
};
use super::{CodecError, MAX_TABLE_SYMBOLS};
use crate::tensor::with_buf;
use crate::tensor::{container_bytes, WordBuf, Words};

const NAME: &str = "huffman";

/// Longest code, in bits.
pub const MAX_CODE_LEN: u32 = 16;

/// Bits resolved by one lookup in the decoder's primary table; longer codes take a
/// canonical search.
const PRIMARY_BITS: u32 = 12;

/// Bytes a Huffman body for `counts` (of `n` words, at least two distinct) can never be
/// smaller than, given its count and set fields (`head` bits): the mode bit, at least 4
/// bits and a bit per later length, and a payload of at least the larger of
/// [`super::rans::floor_ideal_bits`] at [`MAX_CODE_LEN`] and the payload of the
/// unlimited Huffman code ([`unlimited_payload_bits`]; no code, limited or not, codes the
/// counts in fewer bits). The one table with no bit per length (fixed width 0: every
/// length equal, so `m` is a power of two) is bounded by its payload of `log2 m` bits per
/// word. `sorted`: the counts in ascending order.
pub(crate) fn body_lower_bound(sorted: &[u64], n: usize, head: u64) -> u64 {
    let m = sorted.len();
    let payload = (super::rans::floor_ideal_bits(sorted, MAX_CODE_LEN) * (1.0 - 1e-9))
        .max(unlimited_payload_bits(sorted) as f64);
    let general = head as f64 + 1.0 + 4.0 + (m as f64 - 1.0) + payload;
    let bits = if m.is_power_of_two() {
        let flat = head as f64 + 1.0 + 7.0 + n as f64 * f64::from(m.trailing_zeros());
        general.min(flat)
    } else {
        general
    };
    (bits / 8.0).floor() as u64
}

/// Code lengths (1..=16) of symbols with the given counts (all >= 1, at most 65,536 of
/// them), minimizing the total coded bits under the length limit. A single symbol gets
/// length 0; no symbol gets an empty list.
pub fn code_lengths(counts: &[u64], limit: u32) -> Vec<u8> {
    let m = counts.len();
    if m <= 1 {
        return vec![0; m];
    }
    // Ascending (count, index). With at most 2^16 symbols and counts under 2^48 that is
    // one u64 key each, sorted unstably (the keys are distinct) instead of by pairs.
    let order: Vec<u32> = if m <= 1 << 16 && counts.iter().all(|&c| c < 1 << 48) {
        let mut keys: Vec<u64> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| c << 16 | i as u64)
            .collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| (k & 0xFFFF) as u32).collect()
    } else {
        let mut order: Vec<u32> = (0..m as u32).collect();
        order.sort_by_key(|&i| (counts[i as usize], i));
        order
    };
    let w: Vec<u64> = order.iter().map(|&i| counts[i as usize]).collect();
    let mut depth = huffman_depths(&w);
    if depth.iter().any(|&d| u32::from(d) > limit) {
        depth = package_merge(&w, limit);
    }
    let mut lens = vec![0u8; m];
    for (k, &i) in order.iter().enumerate() {
        lens[i as usize] = depth[k];
    }
    lens
}

/// Payload bits of the unlimited Huffman code for the ascending weights `w`: the sum of
/// its internal nodes' weights (each word pays a bit per node above its leaf), by the
/// two-queue method without the tree, O(m). The least payload of any prefix code for
/// these counts (Huffman 1952), so a bound on every length-limited one. Saturates.
pub(crate) fn unlimited_payload_bits(w: &[u64]) -> u64 {
    debug_assert!(w.is_sorted());
    let m = w.len();
    if m < 2 {
        return 0;
    }
    let mut iw = Vec::with_capacity(m - 1);
    let (mut li, mut ni) = (0usize, 0usize);
    let mut total = 0u64;
    for _ in 0..m - 1 {
        let mut pick = || {
            if li < m && (ni >= iw.len() || w[li] <= iw[ni]) {
                li += 1;
                w[li - 1]
            } else {
                ni += 1;
                iw[ni - 1]
            }
        };
        let node = pick().saturating_add(pick());
        iw.push(node);
        total = total.saturating_add(node);
    }
    total
}

/// Unlimited Huffman code lengths of ascending weights (two-queue method, O(m)).
fn huffman_depths(w: &[u64]) -> Vec<u8> {
    let m = w.len();
    let mut iw = vec![0u64; m - 1]; // internal node weights, in creation order
    let mut parent = vec![0u32; 2 * m - 1]; // leaves 0..m, internal m..
    let (mut li, mut ni) = (0usize, 0usize);
    for k in 0..m - 1 {
        let pick = |li: &mut usize, ni: &mut usize| -> (usize, u64) {
            if *li < m && (*ni >= k || w[*li] <= iw[*ni]) {
                *li += 1;
                (*li - 1, w[*li - 1])
            } else {
                *ni += 1;
                (m + *ni - 1, iw[*ni - 1])
            }
        };
        let (a, wa) = pick(&mut li, &mut ni);
        let (b, wb) = pick(&mut li, &mut ni);
        iw[k] = wa.saturating_add(wb);
        parent[a] = (m + k) as u32;
        parent[b] = (m + k) as u32;
    }
    let mut d = vec![0u32; 2 * m - 1];
    for node in (0..2 * m - 2).rev() {
        d[node] = d[parent[node] as usize] + 1;
    }
    d[..m].iter().map(|&x| x.min(255) as u8).collect()
}

/// Length-limited code lengths of ascending weights by package-merge, O(m * limit).
/// Requires `2 <= m <= 2^limit`.
fn package_merge(w: &[u64], limit: u32) -> Vec<u8> {
    let m = w.len();
    let cap = 2 * m - 2; // items selected from the top list
                         // flags[j]: for the list at depth limit - j, whether each item is a package.
    let mut flags: Vec<Vec<bool>> = Vec::with_capacity(limit as usize);
    let mut prev: Vec<u64> = w[..m.min(cap)].to_vec();
    flags.push(vec![false; prev.len()]);
    for _ in 1..limit {
        let packages: Vec<u64> = prev
            .chunks_exact(2)
            .map(|p| p[0].saturating_add(p[1]))
            .collect();
        let mut list = Vec::with_capacity(cap);
        let mut f = Vec::with_capacity(cap);
        let (mut i, mut j) = (0, 0);
        while list.len() < cap && (i < m || j < packages.len()) {
            if i < m && (j >= packages.len() || w[i] <= packages[j]) {
                list.push(w[i]);
                f.push(false);
                i += 1;
            } else {
                list.push(packages[j]);
                f.push(true);
                j += 1;
            }
        }
        prev = list;
        flags.push(f);
    }
    // Walk back from the top list: the first `k` items of each list are selected, the
    // packages among them select twice as many items of the list below.
    let mut leaves_taken = Vec::with_capacity(flags.len());
    let mut k = cap;
    for f in flags.iter().rev() {
        let k_here = k.min(f.len());
        debug_assert_eq!(k_here, k);
        let p = f[..k_here].iter().filter(|&&x| x).count();
        leaves_taken.push(k_here - p);
        k = 2 * p;
    }
    (0..m)
        .map(|i| leaves_taken.iter().filter(|&&t| i < t).count() as u8)
        .collect()
}

/// Canonical codes (most significant code bit first) for valid code lengths.
fn canonical_codes(lens: &[u8]) -> Vec<u32> {
    let mut bl_count = [0u32; MAX_CODE_LEN as usize + 1];
    for &l in lens {
        bl_count[usize::from(l)] += 1;
    }
    bl_count[0] = 0;
    let mut next = [0u32; MAX_CODE_LEN as usize + 2];
    let mut code = 0u32;
    for bits in 1..=MAX_CODE_LEN as usize {
        code = (code + bl_count[bits - 1]) << 1;
        next[bits] = code;
    }
    lens.iter()
        .map(|&l| {
            let c = next[usize::from(l)];
            next[usize::from(l)] += 1;
            c
        })
        .collect()
}

/// `code` of `len` bits with its bit order reversed, so that writing it LSB-first puts
/// its most significant bit first.
#[inline]
fn reversed(code: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        code.reverse_bits() >> (32 - u32::from(len))
    }
}

/// How the code lengths are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LensMode {
    None,
    Fixed { min: u8, w: u32 },
    Delta,
}

fn delta_cost(prev: u8, l: u8) -> u64 {
    match l.abs_diff(prev) {
        0 => 1,
        1 => 3,
        _ => 6,
    }
}

fn plan_lens(lens: &[u8]) -> (LensMode, u64) {
    if lens.len() <= 1 {
        return (LensMode::None, 0);
    }
    let min = lens.iter().copied().min().unwrap_or(1);
    let max = lens.iter().copied().max().unwrap_or(1);
    let w = crate::tensor::bits_needed(u64::from(max - min));
    let fixed = 1 + 4 + 3 + lens.len() as u64 * u64::from(w);
    let delta = 1 + 4 + lens.windows(2).map(|p| delta_cost(p[0], p[1])).sum::<u64>();
    if delta < fixed {
        (LensMode::Delta, delta)
    } else {
        (LensMode::Fixed { min, w }, fixed)
    }
}

fn write_lens(wr: &mut BitWriter, lens: &[u8], mode: LensMode) {
    match mode {
        LensMode::None => {}
        LensMode::Fixed { min, w } => {
            wr.write(0, 1);
            wr.write(u64::from(min - 1), 4);
            wr.write(u64::from(w), 3);
            for &l in lens {
                wr.write(u64::from(l - min), w);
            }
        }
        LensMode::Delta => {
            wr.write(1, 1);
            wr.write(u64::from(lens[0] - 1), 4);
            for p in lens.windows(2) {
                let (a, b) = (p[0], p[1]);
                if a == b {
                    wr.write(0, 1);
                } else if b == a + 1 {
                    wr.write(0b001, 3); // bits 1, 0, s=0
                } else if b + 1 == a {
                    wr.write(0b101, 3); // bits 1, 0, s=1
                } else {
                    wr.write(0b11, 2);
                    wr.write(u64::from(b - 1), 4);
                }
            }
        }
    }
}

/// Reads `m >= 2` code lengths and checks they form a complete code of at most 16 bits.
fn read_lens(r: &mut BitReader<'_>, m: usize) -> Result<Vec<u8>, CodecError> {
    let mut lens = Vec::with_capacity(m);
    if r.read_bit()? {
        let mut l = r.read(4)? as u8 + 1;
        lens.push(l);
        for _ in 1..m {
            if r.read_bit()? {
                if r.read_bit()? {
                    l = r.read(4)? as u8 + 1;
                } else if r.read_bit()? {
                    l = l.wrapping_sub(1);
                } else {
                    l += 1;
                }
            }
            if !(1..=MAX_CODE_LEN as u8).contains(&l) {
                return Err(r.invalid(format!("code length {l}, expected 1..=16")));
            }
            lens.push(l);
        }
    } else {
        let min = r.read(4)? + 1;
        let w = r.read(3)? as u32;
        if w > 4 {
            return Err(r.invalid(format!("code length width {w}, expected at most 4")));
        }
        for _ in 0..m {
            let l = min + r.read(w)?;
            if l > u64::from(MAX_CODE_LEN) {
                return Err(r.invalid(format!("code length {l}, expected 1..=16")));
            }
            lens.push(l as u8);
        }
    }
    let kraft: u64 = lens
        .iter()
        .map(|&l| 1u64 << (MAX_CODE_LEN - u32::from(l)))
        .sum();
    if kraft != 1 << MAX_CODE_LEN {
        return Err(r.invalid(format!(
            "code lengths have kraft sum {kraft}/65536, expected 65536/65536"
        )));
    }
    Ok(lens)
}

/// A Huffman encoding of one stream, planned from its histogram: everything but the
/// payload bits themselves.
#[derive(Clone, Debug)]
pub struct Plan {
    syms: Vec<u64>,
    lens: Vec<u8>,
    set: SetPlan,
    lens_mode: LensMode,
    /// Exact bits of the count, set and lengths fields.
    pub table_bits: u64,
    /// Exact bits of the payload.
    pub payload_bits: u64,
}

impl Plan {
    /// Plans the code for a stream of `n` words of `width` bits with histogram `hist`
    /// (distinct words ascending with their counts, at most [`MAX_TABLE_SYMBOLS`]).
    pub fn new(hist: &[(u64, u64)], width: u32, n: usize) -> Plan {
        let syms: Vec<u64> = hist.iter().map(|&(s, _)| s).collect();
        let set = plan_set(&syms, width);
        Plan::with_set(hist, width, n, syms, set)
    }

    /// [`Plan::new`] with the symbols and their set encoding already worked out.
    pub(crate) fn with_set(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
    ) -> Plan {
        debug_assert!(hist.len() <= MAX_TABLE_SYMBOLS);
        let counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
        let lens = code_lengths(&counts, MAX_CODE_LEN);
        let (lens_mode, lens_bits) = plan_lens(&lens);
        let payload_bits = counts
            .iter()
            .zip(&lens)
            .map(|(&c, &l)| c * u64::from(l))
            .sum();
        Plan {
            table_bits: count_bits(width, n) + set.bits + lens_bits,
            syms,
            lens,
            set,
            lens_mode,
            payload_bits,
        }
    }

    /// Exact body size in bytes.
    pub fn size(&self) -> u64 {
        (self.table_bits + self.payload_bits).div_ceil(8)
    }

    /// Appends the body for `words` (the stream the plan was made from).
    pub fn encode(&self, words: &Words, out: &mut Vec<u8>) {
        let width = words.width();
        let n = words.len();
        let mut w = BitWriter::from_vec(std::mem::take(out));
        w.reserve(self.size() as usize);
        write_count(&mut w, self.syms.len(), width, n);
        write_set(&mut w, &self.syms, width, &self.set);
        write_lens(&mut w, &self.lens, self.lens_mode);
        if self.syms.len() >= 2 {
            let codes = canonical_codes(&self.lens);
            // Code (bit-reversed) above 5 bits of length, by symbol index.
            let packed: Vec<u32> = codes
                .iter()
                .zip(&self.lens)
                .map(|(&c, &l)| reversed(c, l) << 5 | u32::from(l))
                .collect();
            let index = SymbolIndex::new(&self.syms, width, n);
            with_buf!(words.buf(), v => put_codes(v, &index, &packed, &mut w));
        }
        *out = w.finish();
    }
}

fn put_codes<T: Word>(v: &[T], index: &SymbolIndex, packed: &[u32], w: &mut BitWriter) {
    for &x in v {
        let p = packed[index.get(x.into())];
        w.write(u64::from(p >> 5), p & 31);
    }
}

/// Exact body size in bytes for a stream with histogram `hist`.
pub fn size(hist: &[(u64, u64)], width: u32, n: usize) -> u64 {
    Plan::new(hist, width, n).size()
}

/// Appends the body for `words`; `None` (nothing appended) if the stream has more than
/// [`MAX_TABLE_SYMBOLS`] distinct words.
pub fn encode(words: &Words, out: &mut Vec<u8>) -> Option<()> {
    let hist = crate::stats::histogram(words, MAX_TABLE_SYMBOLS)?;
    Plan::new(&hist, words.width(), words.len()).encode(words, out);
    Some(())
}

/// The parsed table of a body and the reader positioned at its payload.
struct Table<'a> {
    syms: Vec<u64>,
    lens: Vec<u8>,
    reader: BitReader<'a>,
}

fn read_table<'a>(body: &'a [u8], width: u32, n: usize) -> Result<Table<'a>, CodecError> {
    let mut r = BitReader::new(body, NAME);
    let m = read_count(&mut r, width, n)?;
    let syms = read_set(&mut r, m, width)?;
    let lens = if m >= 2 {
        read_lens(&mut r, m)?
    } else {
        vec![0; m]
    };
    Ok(Table {
        syms,
        lens,
        reader: r,
    })
}

/// Bits of the table (count, symbol set, code lengths) at the start of `body`.
///
/// # Errors
/// When the table itself is invalid or truncated.
pub fn table_bits(body: &[u8], width: u32, n: usize) -> Result<u64, CodecError> {
    check_width(width, NAME)?;
    Ok(read_table(body, width, n)?.reader.position())
}

/// Decodes `n` words of `width` bits from exactly `body`.
///
/// # Errors
/// A truncated body, a table inconsistent with `(width, n)` (count, set, code lengths
/// that are not a complete prefix code), a payload that runs past the body, trailing
/// bytes or nonzero padding.
pub fn decode(body: &[u8], width: u32, n: usize) -> Result<Words, CodecError> {
    check_width(width, NAME)?;
    let Table { syms, lens, reader } = read_table(body, width, n)?;
    let m = syms.len();
    if m <= 1 {
        reader.finish()?;
        return match syms.first() {
            Some(&s) => try_constant(width, s, n, NAME),
            None => Ok(Words::empty(width)),
        };
    }
    // Every code is at least one bit: refuse before allocating `n` words.
    if n as u64 > reader.bits_left() {
        return Err(reader.truncated(n as u64));
    }
    let mut r = reader;
    let buf = match container_bytes(width) {
        1 => WordBuf::U8(decode_payload(&mut r, &syms, &lens, n)?),
        2 => WordBuf::U16(decode_payload(&mut r, &syms, &lens, n)?),
        4 => WordBuf::U32(decode_payload(&mut r, &syms, &lens, n)?),
        _ => WordBuf::U64(decode_payload(&mut r, &syms, &lens, n)?),
    };
    r.finish()?;
    // Every word came from a validated table (symbols < 2^width) or a field of at most
    // `width` bits.
    Ok(Words::from_buf_trusted(width, buf))
}

#[derive(Clone, Copy, Default)]
struct Entry<T> {
    sym: T,
    /// Code length, 0 for a code longer than the primary table.
    len: u8,
}

/// Decodes `n` codes starting at the reader's position, then advances it.
fn decode_payload<T: Word>(
    r: &mut BitReader<'_>,
    syms: &[u64],
    lens: &[u8],
    n: usize,
) -> Result<Vec<T>, CodecError> {
    let codes = canonical_codes(lens);
    let maxlen = u32::from(lens.iter().copied().max().unwrap_or(1));
    let pbits = maxlen.min(PRIMARY_BITS);
    let mut primary = vec![Entry::<T>::default(); 1 << pbits];
    for (i, (&c, &l)) in codes.iter().zip(lens).enumerate() {
        if u32::from(l) <= pbits {
            let e = Entry {
                sym: T::from_u64(syms[i]),
                len: l,
            };
            let rev = reversed(c, l) as usize;
            for slot in (rev..1 << pbits).step_by(1 << l) {
                primary[slot] = e;
            }
        }
    }
    let long = LongCodes::new(syms, lens, pbits, maxlen);
    let pmask = (1u64 << pbits) - 1;
    let decode_one = |v: u64| -> Option<(T, u32)> {
        let e = primary[(v & pmask) as usize];
        if e.len != 0 {
            Some((e.sym, u32::from(e.len)))
        } else {
            long.find(v)
        }
    };
    let no_code = || r.invalid("no code matches the payload bits".into());
    let data = r.data();
    let mut pos = r.position();
    let mut out = try_filled(T::default(), n, NAME)?;
    // A 64-bit window holds at least 57 bits: that many codes of `maxlen` bits.
    let per = (57 / maxlen).max(1) as usize;
    let mut groups = out.chunks_exact_mut(per);
    for group in &mut groups {
        let w = peek64(data, pos);
        let mut used = 0u32;
        for o in group.iter_mut() {
            let (s, l) = decode_one(w >> used).ok_or_else(no_code)?;
            *o = s;
            used += l;
        }
        pos += u64::from(used);
    }
    for o in groups.into_remainder() {
        let (s, l) = decode_one(peek64(data, pos)).ok_or_else(no_code)?;
        *o = s;
        pos += u64::from(l);
    }
    r.skip(pos - r.position())?;
    Ok(out)
}

/// Canonical decoding of codes longer than the primary table: the next 16 code bits,
/// most significant first, are compared with the left-justified end of each length's
/// code range.
struct LongCodes<T> {
    /// Symbols ordered by (code length, value).
    sorted: Vec<T>,
    /// Per length: first code, index of its symbol in `sorted`, end of the range
    /// left-justified to 16 bits.
    base: [u32; MAX_CODE_LEN as usize + 1],
    first_index: [u32; MAX_CODE_LEN as usize + 1],
    limit: [u32; MAX_CODE_LEN as usize + 1],
    pbits: u32,
    maxlen: u32,
}

impl<T: Word> LongCodes<T> {
    fn new(syms: &[u64], lens: &[u8], pbits: u32, maxlen: u32) -> LongCodes<T> {
        if maxlen <= pbits {
            // Every code is in the primary table: [`LongCodes::find`] looks at no
            // length and finds nothing.
            return LongCodes {
                sorted: Vec::new(),
                base: [0; MAX_CODE_LEN as usize + 1],
                first_index: [0; MAX_CODE_LEN as usize + 1],
                limit: [0; MAX_CODE_LEN as usize + 1],
                pbits,
                maxlen,
            };
        }
        let mut count = [0u32; MAX_CODE_LEN as usize + 1];
        for &l in lens {
            count[usize::from(l)] += 1;
        }
        // Symbols ordered by (length, index): a counting sort by length, each length's
        // symbols in index order (a comparison sort here was two thirds of decoding a
        // short tensor's Huffman literal).
        let mut next = [0usize; MAX_CODE_LEN as usize + 1];
        let mut at = 0;
        for (l, c) in count.iter().enumerate() {
            next[l] = at;
            at += *c as usize;
        }
        let mut sorted = vec![T::from_u64(0); syms.len()];
        for (&sym, &l) in syms.iter().zip(lens) {
            let l = usize::from(l);
            sorted[next[l]] = T::from_u64(sym);
            next[l] += 1;
        }
        count[0] = 0;
        let mut base = [0u32; MAX_CODE_LEN as usize + 1];
        let mut first_index = [0u32; MAX_CODE_LEN as usize + 1];
        let mut limit = [0u32; MAX_CODE_LEN as usize + 1];
        let (mut code, mut index) = (0u32, 0u32);
        for l in 1..=MAX_CODE_LEN as usize {
            code = (code + count[l - 1]) << 1;
            index += count[l - 1];
            base[l] = code;
            first_index[l] = index;
            limit[l] = (code + count[l]) << (MAX_CODE_LEN as usize - l);
        }
        LongCodes {
            sorted,
            base,
            first_index,
            limit,
            pbits,
            maxlen,
        }
    }

    /// The symbol and code length at the start of `v` (payload bits, LSB-first).
    #[inline(never)]
    fn find(&self, v: u64) -> Option<(T, u32)> {
        let c16 = u32::from((v as u16).reverse_bits());
        for l in self.pbits + 1..=self.maxlen {
            let l = l as usize;
            if c16 < self.limit[l] {
                let k = self.first_index[l] + (c16 >> (MAX_CODE_LEN as usize - l)) - self.base[l];
                return self.sorted.get(k as usize).map(|&s| (s, l as u32));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::histogram;

    /// Counts of 2^48 and more take the pairwise sort instead of packed keys: the same
    /// lengths for the same counts scaled, ties (broken by index) included.
    #[test]
    fn code_lengths_agree_across_sort_paths() {
        let counts: Vec<u64> = (0..700u64).map(|i| 1 + (i * i * 7919) % 997 / 3).collect();
        let scaled: Vec<u64> = counts.iter().map(|&c| c << 40).collect();
        assert!(scaled.iter().any(|&c| c >= 1 << 48));
        for limit in [10, 16] {
            let lens = code_lengths(&counts, limit);
            assert_eq!(code_lengths(&scaled, limit), lens, "limit {limit}");
            assert!(lens.iter().all(|&l| (1..=limit as u8).contains(&l)));
        }
        // Equal counts: the lower index gets the shorter code when lengths must differ.
        assert_eq!(code_lengths(&[5, 5, 5], 16), vec![2, 2, 1]);
    }

    fn body(values: &[u64], width: u32) -> Vec<u8> {
        let words = Words::from_u64s(width, values);
        let mut out = Vec::new();
        encode(&words, &mut out).unwrap();
        let hist = histogram(&words, MAX_TABLE_SYMBOLS).unwrap();
        assert_eq!(size(&hist, width, values.len()), out.len() as u64);
        assert_eq!(decode(&out, width, values.len()).unwrap(), words);
        out
    }

    fn plan_syms(hist: &[(u64, u64)]) -> Vec<u64> {
        hist.iter().map(|&(s, _)| s).collect()
    }

    #[test]
    fn lengths_are_optimal_and_limited() {
        assert_eq!(code_lengths(&[5], 16), vec![0]);
        assert_eq!(code_lengths(&[1, 1], 16), vec![1, 1]);
        assert_eq!(code_lengths(&[1, 2, 4, 8], 16), vec![3, 3, 2, 1]);
        assert_eq!(code_lengths(&[10, 1, 1, 1, 1], 16), vec![1, 3, 3, 3, 3]);
        // Fibonacci weights make a 9-deep chain; a limit of 4 forces package-merge.
        let fib = [1u64, 1, 2, 3, 5, 8, 13, 21, 34, 55];
        let plain = code_lengths(&fib, 16);
        assert_eq!(plain, vec![9, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
        let limited = code_lengths(&fib, 4);
        assert!(limited.iter().all(|&l| (1..=4).contains(&l)), "{limited:?}");
        let kraft: f64 = limited.iter().map(|&l| 0.5f64.powi(l.into())).sum();
        assert_eq!(kraft, 1.0);
        // Package-merge is optimal: compare with every length vector in 1..=4.
        let cost = |ls: &[u8]| {
            fib.iter()
                .zip(ls)
                .map(|(&w, &l)| w * u64::from(l))
                .sum::<u64>()
        };
        let mut best = u64::MAX;
        for code in 0..4u32.pow(10) {
            let ls: Vec<u8> = (0..10)
                .map(|i| (code / 4u32.pow(i) % 4 + 1) as u8)
                .collect();
            if ls.iter().map(|&l| 16u32 >> l).sum::<u32>() <= 16 {
                best = best.min(cost(&ls));
            }
        }
        assert_eq!(cost(&limited), best);
        // The unlimited code's payload, without the tree: 363 bits for the Fibonacci
        // chain (sum of weight times depth), no more than any limited code's.
        assert_eq!(unlimited_payload_bits(&fib), cost(&plain));
        assert_eq!(cost(&plain), 363);
        assert!(unlimited_payload_bits(&fib) <= cost(&limited));
        assert_eq!(unlimited_payload_bits(&[1, 2, 4, 8]), 3 + 6 + 8 + 8);
        assert_eq!(unlimited_payload_bits(&[7]), 0);
        assert_eq!(unlimited_payload_bits(&[]), 0);
    }

    /// The body bound never exceeds a body: streams whose unlimited Huffman code is
    /// deeper than the limit (rare words), and flat ones.
    #[test]
    fn body_lower_bound_holds() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for (m, skew) in [(3usize, 1u32), (40, 3), (700, 9), (3000, 14), (256, 0)] {
            let values: Vec<u64> = (0..20_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Geometric-ish skew: low symbols far more frequent.
                    (x % m as u64) >> ((x >> 40) % u64::from(skew + 1))
                })
                .collect();
            let words = Words::from_u64s(16, &values);
            let hist = crate::stats::histogram(&words, MAX_TABLE_SYMBOLS).unwrap();
            let mut counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
            counts.sort_unstable();
            let plan = Plan::new(&hist, 16, values.len());
            let head = count_bits(16, values.len()) + plan_set(&plan_syms(&hist), 16).bits;
            let lb = body_lower_bound(&counts, values.len(), head);
            assert!(
                lb <= plan.size(),
                "m {m}: bound {lb} > body {}",
                plan.size()
            );
        }
    }

    #[test]
    fn tiny_body_exact() {
        // Width 8, words [5, 5, 5, 7]. n = 4, so the count field is 2 bits (m - 1 = 1).
        // Set {5, 7}: gaps 5 and 1. Rice k = 1 costs 4 + 2 bits plus the 8-bit header (14);
        // Exp-Golomb ties at 14 (the lower mode wins), runs cost 21.
        // Lengths [1, 1]: delta mode 1 + 4 + 1 = 6 bits beats fixed 8. Codes 5 -> 0, 7 -> 1.
        let b = body(&[5, 5, 5, 7], 8);
        let mut w = BitWriter::new();
        w.write(1, 2); // m - 1
        w.write(0, 2); // set mode 0 (Rice)
        w.write(1, 6); // k = 1
        w.write_rice(5, 1);
        w.write_rice(1, 1);
        w.write(1, 1); // lengths: delta mode
        w.write(0, 4); // first length - 1
        w.write(0, 1); // same length
        for bit in [0, 0, 0, 1] {
            w.write(bit, 1);
        }
        assert_eq!(b, w.finish());
        assert_eq!(b, vec![0b0001_0001, 0b1111_0000, 0b0000_0001, 0b0000_0010]);
    }

    #[test]
    fn single_symbol_and_empty() {
        // One symbol: count field (n = 3 -> cap 3 -> 2 bits, value 0) and the word in 8 bits.
        assert_eq!(body(&[9, 9, 9], 8), vec![9 << 2, 0]);
        assert_eq!(body(&[9], 8), vec![9]);
        assert_eq!(body(&[], 8), Vec::<u8>::new());
        // Width 1: count bit 1 (m = 2), set implied, lengths "1 0000 0", payload 1 0 1.
        assert_eq!(body(&[1, 0, 1], 1), vec![0b1000_0011, 0b10]);
    }

    #[test]
    fn long_codes_use_the_slow_path() {
        // Fibonacci counts over 22 symbols: plain Huffman would go 21 deep, so
        // package-merge limits the code to 16 bits, beyond the 12-bit primary table.
        let mut values = Vec::new();
        let (mut a, mut b) = (1usize, 1usize);
        for s in 0..22u64 {
            values.extend(std::iter::repeat_n(s * 3, a));
            (a, b) = (b, a + b);
        }
        values.reverse();
        body(&values, 7);
        let words = Words::from_u64s(7, &values);
        let hist = histogram(&words, MAX_TABLE_SYMBOLS).unwrap();
        let plan = Plan::new(&hist, 7, values.len());
        assert_eq!(plan.lens.iter().copied().max(), Some(16));
    }

    #[test]
    fn hostile_tables_are_refused() {
        let good = body(&[1, 2, 3, 3, 3, 3, 200, 17], 8);
        for cut in 0..good.len() {
            assert!(decode(&good[..cut], 8, 8).is_err(), "cut {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode(&long, 8, 8),
            Err(CodecError::TrailingBytes { .. })
        ));
        // Incomplete code: m = 2 (width 1 all present) with lengths [1, 2].
        let mut w = BitWriter::new();
        w.write(1, 1); // m - 1 = 1 with cap 2
        w.write(1, 1); // delta mode
        w.write(0, 4); // first length 1
        w.write(0b001, 3); // +1 -> 2
        w.write(0, 2);
        let bad = w.finish();
        let err = decode(&bad, 1, 2).unwrap_err();
        assert!(err.to_string().contains("kraft"), "{err}");
    }
}
