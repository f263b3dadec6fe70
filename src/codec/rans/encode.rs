//! The encoder: a [`Plan`] (set, precision, frequencies and their mode) from a histogram,
//! sized exactly without writing, and the interleaved-state encoding of the payload, in
//! the classic and the wide layout (with SIMD kernels for the wide one).

use super::freqs::write_freqs;
use super::model::{
    clamp_bits, entropy_bits, least_table_bits, log2_table, model_bits, payload_lower_bound_in,
    quantize, quantize_rounded, top_scale,
};
use super::model::{plan_freqs, FreqMode};
use super::{lanes, Layout, MAX_SCALE_BITS, RANS_L, WIDE_LANES};

use crate::codec::bitio::BitWriter;
use crate::codec::table::{
    count_bits, plan_set, write_count, write_set, SetPlan, SymbolIndex, Word,
};
use crate::codec::{CodecId, Stream, MAX_TABLE_SYMBOLS};
use crate::tensor::with_buf;
use crate::tensor::{bits_needed, container_bytes, mask, Words};

/// An rANS encoding of one stream planned from its histogram: everything but the payload.
#[derive(Clone, Debug)]
pub struct Plan {
    pub(super) syms: Vec<u64>,
    pub(super) freqs: Vec<u32>,
    pub(super) scale: u32,
    pub(super) set: SetPlan,
    pub(super) freq_mode: FreqMode,
    /// Exact bits of the table before the byte padding.
    pub table_bits: u64,
    /// Ideal payload size `sum c_i log2(M / f_i)` in bits under the quantized model.
    pub ideal_bits: f64,
    pub(super) n: usize,
    pub(super) layout: Layout,
}

impl Plan {
    /// Plans the coder for a stream of `n` words of `width` bits with histogram `hist`
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
        Plan::planned(hist, width, n, syms, set, quantize, false)
    }

    /// [`Plan::with_set`] with frequencies from proportional rounding
    /// ([`quantize_rounded`]) instead of the optimal quantizer: O(m) per precision, for
    /// the search's size estimates. At each precision its ideal payload is never below the
    /// optimal quantizer's (so [`Plan::lower_bound`] of an estimate is no bound), and on
    /// large streams it is within a small fraction of a bit per thousand words of it.
    /// Streams of at least `2^16` words try the precisions from the highest down (where
    /// their best lies), so a few are tried instead of all.
    pub(crate) fn estimate(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
    ) -> Plan {
        let down = n >= 1 << MAX_SCALE_BITS;
        Plan::planned(hist, width, n, syms, set, quantize_rounded, down)
    }

    fn planned(
        hist: &[(u64, u64)],
        width: u32,
        n: usize,
        syms: Vec<u64>,
        set: SetPlan,
        quantize: fn(&[u64], u32) -> Vec<u32>,
        down: bool,
    ) -> Plan {
        debug_assert!(hist.len() <= MAX_TABLE_SYMBOLS);
        let head = count_bits(width, n) + set.bits;
        let m = syms.len();
        let mut plan = Plan {
            syms,
            freqs: Vec::new(),
            scale: 0,
            set,
            freq_mode: FreqMode::Fixed(0),
            table_bits: head,
            ideal_bits: 0.0,
            n,
            layout: Layout::for_len(n),
        };
        if m <= 1 {
            return plan;
        }
        let counts: Vec<u64> = hist.iter().map(|&(_, c)| c).collect();
        let smin = bits_needed(m as u64 - 1).max(1);
        let lg = log2_table();
        // No model codes below the empirical entropy: once the table alone would lose
        // to the best so far, or two precisions in a row did worse, stop. (Stopping at the
        // first worse one going down saved 2% of minilm's compression time but changed
        // the chosen program of some streams, larger or smaller: docs/bench.md.)
        let entropy = entropy_bits(hist);
        let mut best = f64::INFINITY;
        let top = top_scale(Layout::for_len(n), m);
        let scales: Box<dyn Iterator<Item = u32>> = if down {
            Box::new((smin..=top).rev())
        } else {
            Box::new(smin..=top)
        };
        let least_table = least_table_bits(head, m);
        for scale in scales {
            // Going down, a precision whose rare words alone cost more than the best so
            // far is not quantized: the test below would skip it with any frequencies.
            if down
                && best.is_finite()
                && least_table.div_ceil(8) as f64 * 8.0 + entropy + clamp_bits(&counts, scale)
                    >= best
            {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let freqs = quantize(&counts, scale);
            let ideal = model_bits(&counts, &freqs, scale, lg);
            // The precision's total is at least its least table and its payload: when
            // that cannot beat the best so far (going down, where the stop test needs no
            // table), the frequencies need not be planned.
            if down && least_table.div_ceil(8) as f64 * 8.0 + ideal >= best {
                if scale + 2 <= plan.scale {
                    break;
                }
                continue;
            }
            let (freq_mode, fbits) = plan_freqs(&freqs);
            let table_bits = head + 4 + fbits;
            let total = table_bits.div_ceil(8) as f64 * 8.0 + ideal;
            if total < best {
                best = total;
                plan.freqs = freqs;
                plan.scale = scale;
                plan.freq_mode = freq_mode;
                plan.table_bits = table_bits;
                plan.ideal_bits = ideal;
            }
            let stop = if down {
                scale + 2 <= plan.scale
            } else {
                table_bits as f64 + entropy >= best || scale >= plan.scale + 2
            };
            if stop {
                break;
            }
        }
        plan
    }

    /// The codec of the body: the layout [`Layout::for_len`] picks for the stream.
    pub fn codec(&self) -> CodecId {
        self.layout.codec()
    }

    /// Bytes of the table, padding included.
    pub fn table_bytes(&self) -> u64 {
        self.table_bits.div_ceil(8)
    }

    /// A size in bytes the body can never be smaller than, from the ideal payload size
    /// and the worst-case loss of each coding and renormalization step. Used to skip
    /// encoding when rANS cannot win.
    pub fn lower_bound(&self) -> u64 {
        if self.syms.len() <= 1 {
            return self.table_bytes();
        }
        self.table_bytes()
            + payload_lower_bound_in(self.layout, self.ideal_bits, self.n, self.scale)
    }

    fn write_table(&self, out: Vec<u8>, width: u32) -> Vec<u8> {
        let mut w = BitWriter::from_vec(out);
        write_count(&mut w, self.syms.len(), width, self.n);
        write_set(&mut w, &self.syms, width, &self.set);
        if self.syms.len() >= 2 {
            w.write(u64::from(self.scale - 1), 4);
            write_freqs(&mut w, &self.freqs, self.freq_mode);
        }
        w.finish()
    }

    pub(super) fn enc_syms(&self) -> Vec<EncSym> {
        let mut cum = 0u32;
        self.freqs
            .iter()
            .map(|&f| {
                let e = EncSym::new(cum, f, self.scale);
                cum += f;
                e
            })
            .collect()
    }

    /// Appends the body for `words` (the stream the plan was made from).
    pub fn encode(&self, words: &Words, out: &mut Vec<u8>) {
        self.encode_stream(Stream::Words(words), out);
    }

    /// [`Plan::encode`] for a stream that may be a bit field of wider words
    /// ([`Stream::Field`]; the plan made from the field's words): a field of words of at
    /// most 16 bits is read in place, each word shifted and masked as the encoder reads
    /// it; a field of wider words is extracted first. The body is the one the field's
    /// own words give.
    pub fn encode_stream(&self, stream: Stream<'_>, out: &mut Vec<u8>) {
        let (words, shift, m) = stream.parts();
        if matches!(stream, Stream::Field { .. }) && container_bytes(words.width()) > 2 {
            return self.encode(&stream.to_words(), out);
        }
        let width = stream.width();
        let start = out.len();
        *out = self.write_table(std::mem::take(out), width);
        if self.syms.len() < 2 {
            return;
        }
        let payload_at = out.len();
        let enc = self.enc_syms();
        let index = SymbolIndex::new(&self.syms, width, self.n);
        // Room for the payload (its ideal size, plus a little for the coding losses) and
        // the sink's last step, so that encoding never moves the buffer.
        let ideal = (self.ideal_bits / 8.0) as usize;
        let step = (ideal / 4).clamp(64, MAX_SINK_STEP);
        let mut sink = ByteSink {
            buf: std::mem::take(out),
            len: payload_at,
            step,
        };
        sink.buf.reserve(ideal + ideal / 64 + step + 2 * BLOCK + 64);
        let x = with_buf!(words.buf(), v => run_lanes(v, self.layout, &index, &enc, self.scale, (shift, m), &mut sink));
        *out = sink.buf;
        out.truncate(sink.len);
        // Reversed below, so the first state comes first, little-endian.
        for xi in x.iter().rev() {
            out.extend_from_slice(&xi.to_be_bytes());
        }
        out[payload_at..].reverse();
        if out.capacity() - out.len() > 4096 {
            // The room left is given back (in place: no copy).
            out.shrink_to_fit();
        }
        debug_assert!(out.len() - start >= self.table_bytes() as usize);
    }

    /// Exact body size in bytes for `words` (the stream the plan was made from), by
    /// running the encoder without storing its output.
    pub fn size(&self, words: &Words) -> u64 {
        if self.syms.len() < 2 {
            return self.table_bytes();
        }
        let enc = self.enc_syms();
        let index = SymbolIndex::new(&self.syms, words.width(), self.n);
        let mut count = ByteCount(0);
        with_buf!(words.buf(), v => run_lanes(v, self.layout, &index, &enc, self.scale, (0, mask(words.width())), &mut count));
        self.table_bytes() + self.layout.state_bytes(self.n) + count.0
    }
}

/// Where the encoder's renormalization bytes go.
pub(super) trait Sink {
    /// Makes room for `n` more emissions.
    fn reserve(&mut self, n: usize);
    /// Emits the low `nb` (0..=2) bytes of `x`, lowest first.
    fn emit(&mut self, x: u32, nb: u32);

    /// Runs a SIMD encoder `f` on the sink: it gets the room after the bytes so far
    /// (none when only counting) and returns the bytes it shed, which then count as
    /// emitted; `false` (nothing emitted) if it declined.
    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool;

    /// Emits the bytes states `0 .. r` of a wide-layout group shed (`nb[j]` bytes of
    /// `before[j]`, the state before), in the reverse of the order the decoder reads
    /// them: the second round, then the first, each from the last state down.
    #[inline(always)]
    fn emit_wide_group(&mut self, before: &[u32; WIDE_LANES], nb: &[u32; WIDE_LANES], r: usize) {
        // A state shedding two bytes reads the upper one in the first round.
        for j in (0..r).rev() {
            self.emit(before[j], u32::from(nb[j] == 2));
        }
        for j in (0..r).rev() {
            self.emit(before[j] >> (8 * (nb[j] >> 1)), u32::from(nb[j] >= 1));
        }
    }
}

/// Appends to a byte vector: two bytes are always written, `nb` kept.
pub(super) struct ByteSink {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
    /// Bytes the initialized length grows by at least when it runs short.
    pub(super) step: usize,
}

impl Sink for ByteSink {
    fn reserve(&mut self, n: usize) {
        let need = self.len + 2 * n;
        if self.buf.len() < need {
            // Zero only what is added, a step at a time: the capacity was reserved for
            // the whole payload ([`Plan::encode`]), so the buffer is neither reallocated
            // nor cleared twice.
            self.buf.resize(need.max(self.buf.len() + self.step), 0);
        }
    }

    #[inline(always)]
    fn emit(&mut self, x: u32, nb: u32) {
        if let Some(d) = self.buf.get_mut(self.len..self.len + 2) {
            d.copy_from_slice(&(x as u16).to_le_bytes());
        }
        self.len += nb as usize;
    }

    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool {
        let Some(room) = self.buf.get_mut(self.len..) else {
            return false;
        };
        f(Some(room)).map(|k| self.len += k).is_some()
    }
}

/// Largest step of [`ByteSink`]'s initialized length.
pub(super) const MAX_SINK_STEP: usize = 1 << 16;

/// Counts the bytes only.
pub(super) struct ByteCount(pub(super) u64);

impl Sink for ByteCount {
    fn reserve(&mut self, _: usize) {}

    #[inline(always)]
    fn emit(&mut self, _: u32, nb: u32) {
        self.0 += u64::from(nb);
    }

    fn simd(&mut self, f: impl FnOnce(Option<&mut [u8]>) -> Option<usize>) -> bool {
        f(None).map(|k| self.0 += k as u64).is_some()
    }

    #[inline(always)]
    fn emit_wide_group(&mut self, _: &[u32; WIDE_LANES], nb: &[u32; WIDE_LANES], r: usize) {
        self.0 += u64::from(nb[..r].iter().sum::<u32>());
    }
}

/// Encoder constants of one symbol (Giesen's `RansEncSymbol`): `x / f` by a multiply.
#[derive(Clone, Copy, Debug)]
pub(super) struct EncSym {
    pub(super) x_max: u32,
    pub(super) rcp: u32,
    pub(super) shift: u32,
    pub(super) bias: u32,
    pub(super) cmpl: u32,
}

impl EncSym {
    pub(super) fn new(cum: u32, freq: u32, scale: u32) -> EncSym {
        let m = 1u32 << scale;
        let x_max = ((RANS_L >> scale) << 8) * freq;
        let cmpl = m - freq;
        if freq < 2 {
            // q = x - 1 for x >= 1; bias makes x + bias + (x - 1)(M - 1) = x M + cum.
            EncSym {
                x_max,
                rcp: u32::MAX,
                shift: 0,
                bias: cum + m - 1,
                cmpl,
            }
        } else {
            let shift = 32 - (freq - 1).leading_zeros(); // ceil(log2 freq)
            let rcp = (1u64 << (shift + 31)).div_ceil(u64::from(freq)) as u32;
            EncSym {
                x_max,
                rcp,
                shift: shift - 1,
                bias: cum,
                cmpl,
            }
        }
    }

    /// Bytes (0, 1 or 2) state `v` sheds to come into this symbol's interval.
    #[inline(always)]
    fn renorm_bytes(&self, v: u32) -> u32 {
        // x < 2^31 and x_max >= 2^15: at most two bytes, the second iff
        // x >> 8 >= x_max, that is x >= 256 x_max.
        u32::from(v >= self.x_max) + u32::from(u64::from(v) >= u64::from(self.x_max) << 8)
    }

    /// Encodes the symbol into a state already in its interval.
    #[inline(always)]
    fn code(&self, v: u32) -> u32 {
        let q = ((u64::from(v) * u64::from(self.rcp)) >> 32) as u32 >> self.shift;
        v.wrapping_add(self.bias)
            .wrapping_add(q.wrapping_mul(self.cmpl))
    }

    /// Renormalizes `x` into this symbol's interval and encodes the symbol.
    #[inline(always)]
    pub(super) fn put<K: Sink>(&self, x: &mut u32, sink: &mut K) {
        let v = *x;
        let nb = self.renorm_bytes(v);
        sink.emit(v, nb);
        *x = self.code(v >> (8 * nb));
    }
}

/// Encodes the values `(w >> shift) & (2^width - 1)` of the words `w` of `v` (`width` the
/// index's, `shift` 0 for the words themselves) as symbols at `scale`-bit precision,
/// backwards, with the states of `layout`; returns the final states. The wide layout
/// over 8- and 16-bit words with a dense index takes the SIMD encoder where the
/// processor has one.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_lanes<T: Word, S: Sink>(
    v: &[T],
    layout: Layout,
    index: &SymbolIndex,
    enc: &[EncSym],
    scale: u32,
    (shift, m): (u32, u64),
    sink: &mut S,
) -> Vec<u32> {
    fn go<T: Word, S: Sink>(
        v: &[T],
        layout: Layout,
        idx: impl Fn(T) -> usize,
        enc: &[EncSym],
        fast: Option<Fast<'_, T>>,
        sink: &mut S,
    ) -> Vec<u32> {
        match (layout, lanes(v.len())) {
            (Layout::Wide, _) => run_wide(v, idx, enc, fast, sink).to_vec(),
            (Layout::Classic, 1) => run::<T, S, 1>(v, idx, enc, sink).to_vec(),
            (Layout::Classic, 2) => run::<T, S, 2>(v, idx, enc, sink).to_vec(),
            (Layout::Classic, _) => run::<T, S, 4>(v, idx, enc, sink).to_vec(),
        }
    }
    match index {
        SymbolIndex::Dense(t) => {
            let simd = (layout == Layout::Wide)
                .then(super::simd::encoder::<T>)
                .flatten()
                .map(|f| (f, enc_entries(t, enc, scale)));
            let fast = simd.as_ref().map(|(f, tab)| (*f, &tab[..], scale, shift));
            go(
                v,
                layout,
                |w: T| t[((w.into() >> shift) & m) as usize] as usize,
                enc,
                fast,
                sink,
            )
        }
        SymbolIndex::Hashed(_) => go(
            v,
            layout,
            |w: T| index.get((w.into() >> shift) & m),
            enc,
            None,
            sink,
        ),
    }
}

/// A SIMD encoder of whole wide groups with its per-value table, the precision and the
/// shift of the words' field.
pub(super) type Fast<'a, T> = (super::simd::EncFn<T>, &'a [super::simd::EncEntry], u32, u32);

/// The SIMD encoder's per-value table from a dense index (`u32::MAX`: not a symbol;
/// `2^width` entries) and the symbols' constants at precision `scale`.
pub(super) fn enc_entries(index: &[u32], enc: &[EncSym], scale: u32) -> Vec<super::simd::EncEntry> {
    index
        .iter()
        .map(|&i| {
            enc.get(i as usize).map_or([0; 2], |e| {
                let m = 1u32 << scale;
                let freq = m - e.cmpl;
                // The bias is the start of the symbol's slots, plus M - 1 for a frequency
                // of 1 (see `EncSym::new`); the SIMD encoder adds that back.
                let cum = if freq < 2 { e.bias - (m - 1) } else { e.bias };
                debug_assert!(freq < 1 << 16 && cum < 1 << 16);
                [freq | cum << 16, e.rcp]
            })
        })
        .collect()
}

/// Encodes `v` backwards in the wide layout, word `i` into state `i mod 32`; returns the
/// final states.
pub(super) fn run_wide<T: Word, S: Sink>(
    v: &[T],
    idx: impl Fn(T) -> usize,
    enc: &[EncSym],
    fast: Option<Fast<'_, T>>,
    sink: &mut S,
) -> [u32; WIDE_LANES] {
    /// Encodes one group (states `0 .. group.len()`) and emits its bytes.
    #[inline(always)]
    fn group<T: Word, S: Sink>(
        group: &[T],
        x: &mut [u32; WIDE_LANES],
        idx: &impl Fn(T) -> usize,
        enc: &[EncSym],
        sink: &mut S,
    ) {
        let mut nb = [0u32; WIDE_LANES];
        let mut before = [0u32; WIDE_LANES];
        for (j, &w) in group.iter().enumerate() {
            let e = &enc[idx(w)];
            let v = x[j];
            let c = e.renorm_bytes(v);
            nb[j] = c;
            before[j] = v;
            x[j] = e.code(v >> (8 * c));
        }
        sink.emit_wide_group(&before, &nb, group.len());
    }
    let mut x = [RANS_L; WIDE_LANES];
    let full = v.len() / WIDE_LANES * WIDE_LANES;
    // Two emissions per word.
    sink.reserve(2 * WIDE_LANES);
    group(&v[full..], &mut x, &idx, enc, sink);
    for block in v[..full].rchunks(BLOCK) {
        sink.reserve(2 * block.len());
        if let Some((f, tab, scale, shift)) = fast {
            if sink.simd(|out| f(block, tab, scale, shift, &mut x, out)) {
                continue;
            }
        }
        for g in block.chunks_exact(WIDE_LANES).rev() {
            group(g, &mut x, &idx, enc, sink);
        }
    }
    x
}

/// Words encoded between two [`Sink::reserve`] calls.
pub(super) const BLOCK: usize = 4096;

/// Encodes `v` backwards, word `i` into state `i mod K`; returns the final states.
pub(super) fn run<T: Word, S: Sink, const K: usize>(
    v: &[T],
    idx: impl Fn(T) -> usize,
    enc: &[EncSym],
    sink: &mut S,
) -> [u32; K] {
    let mut x = [RANS_L; K];
    let full = v.len() / K * K;
    sink.reserve(K);
    for (i, &w) in v.iter().enumerate().skip(full).rev() {
        enc[idx(w)].put(&mut x[i % K], sink);
    }
    // Blocks are multiples of K, so groups stay aligned to word indices.
    for block in v[..full].rchunks(BLOCK) {
        sink.reserve(block.len());
        for group in block.chunks_exact(K).rev() {
            for j in (0..K).rev() {
                enc[idx(group[j])].put(&mut x[j], sink);
            }
        }
    }
    x
}

/// Exact body size in bytes for `words` (which must have at most [`MAX_TABLE_SYMBOLS`]
/// distinct words, as in its histogram `hist`).
pub fn size(words: &Words, hist: &[(u64, u64)]) -> u64 {
    Plan::new(hist, words.width(), words.len()).size(words)
}

/// Appends the body for `words` in `layout`; `None` (nothing appended) if the stream has
/// more than [`MAX_TABLE_SYMBOLS`] distinct words or `layout` is not the one
/// [`Layout::for_len`] picks for its length (each codec applies to its lengths only).
pub fn encode(words: &Words, out: &mut Vec<u8>, layout: Layout) -> Option<()> {
    if layout != Layout::for_len(words.len()) {
        return None;
    }
    let hist = crate::stats::histogram(words, MAX_TABLE_SYMBOLS)?;
    Plan::new(&hist, words.width(), words.len()).encode(words, out);
    Some(())
}
