//! Entry points of the fuzz targets, shared with the replay test
//! (`tests/hostile_fuzz_replay.rs` includes this file with `#[path]`), so committed
//! crash inputs are replayed by a plain `cargo test` on stable Rust.
//!
//! Each entry takes arbitrary bytes and panics only when the library breaks a promise:
//! a panic inside the library, or a decode that reports success with wrong bytes.

use brevis::archive::safetensors::parse;
use brevis::archive::{no_progress, verify, CompressOptions};
use brevis::codec::{decode, CodecId, ALL_CODECS};
use brevis::dsl::{execute, read_program, Ty};
use brevis::tensor::ALL_DTYPES;
use brevis::Archive;
use std::path::Path;

/// Most output words a fuzzed program may produce (keeps each run small).
pub const MAX_FUZZ_WORDS: u64 = 1 << 20;

const WIDTHS: [u32; 4] = [8, 16, 32, 64];

/// A type from the first bytes: width, then a length that is usually small but may be
/// anything up to `u64::MAX` (to exercise the limits).
fn take_ty(data: &[u8]) -> Option<(Ty, &[u8])> {
    let (&sel, rest) = data.split_first()?;
    let width = WIDTHS[usize::from(sel & 3)];
    if sel & 4 != 0 {
        let bytes: [u8; 8] = rest.get(..8)?.try_into().ok()?;
        Some((Ty::new(width, u64::from_le_bytes(bytes)), &rest[8..]))
    } else {
        let bytes: [u8; 2] = rest.get(..2)?.try_into().ok()?;
        Some((
            Ty::new(width, u64::from(u16::from_le_bytes(bytes))),
            &rest[2..],
        ))
    }
}

/// Program reader and executor: read a program of a fuzzed type, run it if it reads.
pub fn program(data: &[u8]) {
    let Some((ty, body)) = take_ty(data) else {
        return;
    };
    let Ok(node) = read_program(body, ty) else {
        return;
    };
    assert_eq!(node.ty(), ty, "reader returned a node of another type");
    if let Ok(words) = execute(&node, MAX_FUZZ_WORDS) {
        assert_eq!(
            words.len() as u64,
            ty.len,
            "executor returned the wrong length"
        );
        assert_eq!(words.width(), ty.width, "executor returned the wrong width");
    }
}

/// One literal decoder on a fuzzed body.
pub fn literal(codec: CodecId, data: &[u8]) {
    let Some((ty, body)) = take_ty(data) else {
        return;
    };
    // The executor's limit applies before a literal is decoded; mirror it here.
    if ty.len > MAX_FUZZ_WORDS {
        return;
    }
    if let Ok(words) = decode(codec, body, ty.width, ty.len as usize) {
        assert_eq!(
            words.len() as u64,
            ty.len,
            "{} returned the wrong length",
            codec.name()
        );
        assert_eq!(
            words.width(),
            ty.width,
            "{} returned the wrong width",
            codec.name()
        );
    }
}

/// `rans8`'s SIMD decoder against its scalar one on a fuzzed body: the same words, or
/// an error from both (the kernels read ahead of the state they decode and map symbols
/// 32 or 64 at a time, by offset where the coded words span fewer than 256 values; the
/// scalar path checks every read and looks every symbol up).
pub fn rans8_simd(data: &[u8]) {
    let Some((ty, body)) = take_ty(data) else {
        return;
    };
    if ty.len > MAX_FUZZ_WORDS {
        return;
    }
    let n = ty.len as usize;
    let scalar = brevis::codec::rans8::decode_scalar(body, ty.width, n);
    // Both AVX2 kernels (gathers and scalar loads) too, whichever this processor runs.
    let avx2 = [
        brevis::codec::rans8::decode_avx2(body, ty.width, n),
        brevis::codec::rans8::decode_avx2_lookup(body, ty.width, n),
    ];
    for avx2 in avx2.into_iter().flatten() {
        match (&avx2, &scalar) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "rans8: AVX2 and scalar decode differ"),
            (Err(_), Err(_)) => {}
            _ => panic!("rans8: AVX2 and scalar differ in failing"),
        }
    }
    let simd = brevis::codec::rans8::decode(body, ty.width, n);
    match (simd, scalar) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "rans8: SIMD and scalar decode differ"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "rans8: SIMD {} but scalar {}",
            if a.is_ok() { "decodes" } else { "fails" },
            if b.is_ok() { "decodes" } else { "fails" }
        ),
    }
}

/// The decoding path (`dsl::fused::execute_into`: a merge's fields decoded block by
/// block into the output's words, a `rans8` field shifted into place, packed fields
/// OR-ed in by SIMD) against the reference executor on a fuzzed program: the same bytes,
/// or an error from both.
pub fn fused(data: &[u8]) {
    let Some((ty, body)) = take_ty(data) else {
        return;
    };
    if ty.len > MAX_FUZZ_WORDS {
        return;
    }
    let Ok(node) = read_program(body, ty) else {
        return;
    };
    let reference = execute(&node, MAX_FUZZ_WORDS);
    let mut out = vec![0x5Au8; ty.len as usize * brevis::tensor::container_bytes(ty.width)];
    let fused = brevis::dsl::fused::execute_into(&node, &mut out);
    match (reference, fused) {
        (Ok(words), Ok(())) => {
            let mut want = Vec::new();
            words.write_le_bytes(&mut want);
            assert!(
                want == out,
                "fused decode differs from the reference executor"
            );
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "reference {} but fused {}",
            if a.is_ok() { "decodes" } else { "fails" },
            if b.is_ok() { "decodes" } else { "fails" }
        ),
    }
}

/// The bucket decoder on a fuzzed body, with a context stream (F32-like words cut from
/// the input, cycled to the literal's length) when the first byte is odd, and none when
/// it is even.
pub fn literal_bucket(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some((ty, body)) = take_ty(rest) else {
        return;
    };
    if ty.len > MAX_FUZZ_WORDS {
        return;
    }
    let n = ty.len as usize;
    let context = (sel & 1 == 1).then(|| {
        brevis::Words::from_fn(32, n + usize::from(sel >> 1), |i| {
            let b = body.get(i % body.len().max(1)).copied().unwrap_or(0);
            u64::from(b) << 23 | i as u64 & 0x7f_ffff
        })
    });
    let ctx = context
        .as_ref()
        .map(|words| brevis::codec::bucket::Context {
            words,
            start: usize::from(sel >> 1),
        });
    if let Ok(words) = brevis::codec::select::decode_in(CodecId::Bucket, body, ty.width, n, ctx) {
        assert_eq!(words.len(), n, "bucket returned the wrong length");
        assert_eq!(words.width(), ty.width, "bucket returned the wrong width");
    }
    // The block decoder in each build (baseline, AVX2's eight-word steps, this
    // processor's: AVX-512's sixteen) gives the reference decoder's words, or gives up
    // exactly where it refuses.
    use brevis::codec::bucket::{decode_blocks, decode_reference, Build};
    let want = decode_reference(body, ty.width, n, ctx).ok();
    for build in [Build::Portable, Build::Avx2, Build::Best] {
        let got = decode_blocks(body, ty.width, n, ctx, build);
        assert_eq!(
            got, want,
            "bucket block decoder ({build:?}) differs from the reference"
        );
    }
}

/// Every literal decoder, chosen by the first byte.
pub fn literal_any(data: &[u8]) {
    if let Some((&c, rest)) = data.split_first() {
        literal(ALL_CODECS[usize::from(c) % ALL_CODECS.len()], rest);
    }
}

/// Archive reader: open, verify, decode every tensor, restore the original; and the
/// same archive opened for salvage (its records walked when its index is unreadable),
/// salvaged.
pub fn archive(data: &[u8]) {
    on_pool(|| archive_on_pool(data));
}

fn archive_on_pool(data: &[u8]) {
    if let Ok(a) = Archive::from_bytes_for_salvage(data.to_vec(), "fuzz.brv") {
        if a.original_len() <= 64 << 20 {
            let mut out = Vec::new();
            if let Ok(damaged) = a.salvage_to(&mut out, Some(1), &no_progress, Path::new("s")) {
                assert_eq!(
                    out.len() as u64,
                    a.original_len(),
                    "salvaged the wrong length"
                );
                for d in damaged {
                    assert!(
                        d.offset + d.bytes <= a.original_len(),
                        "damage past the end"
                    );
                }
            }
        }
    }
    let Ok(a) = Archive::from_bytes(data.to_vec(), "fuzz.brv") else {
        return;
    };
    // A fuzzed index may declare a huge original file; decoding is bounded by the
    // archive's own limits, but keep the fuzzer's memory small.
    if a.original_len() > 64 << 20 {
        return;
    }
    let _ = verify(&a, Some(1), &no_progress);
    for i in 0..a.tensors().len() {
        let _ = a.decode_tensor(i);
    }
    let _ = a.header_bytes();
    let mut out = Vec::new();
    if a.write_original(&mut out, Some(1), &no_progress, Path::new("out"))
        .is_ok()
    {
        assert_eq!(
            out.len() as u64,
            a.original_len(),
            "restored the wrong length"
        );
        assert_eq!(
            xxhash_rust::xxh3::xxh3_64(&out),
            a.file_checksum(),
            "restored bytes differ from the file checksum"
        );
    }
}

/// Safetensors header parser.
pub fn safetensors(data: &[u8]) {
    if let Ok(src) = parse(data) {
        let _ = src.regions();
    }
}

/// A one-tensor safetensors file of `dtype` holding `data`, cut to a whole number of
/// elements that fill whole bytes (a sub-byte dtype's elements must: 6-bit elements come
/// in fours).
pub fn one_tensor_file(dtype: brevis::Dtype, data: &[u8]) -> Vec<u8> {
    let bits = u64::from(dtype.element_bits());
    let mut n = data.len() as u64 * 8 / bits;
    while n > 0
        && (!(n * bits).is_multiple_of(8)
            || dtype.byte_len(n).is_some_and(|b| b > data.len() as u64))
    {
        n -= 1;
    }
    let len = dtype.byte_len(n).unwrap_or(0) as usize;
    let header = format!(
        r#"{{"t":{{"dtype":"{}","shape":[{n}],"data_offsets":[0,{len}]}}}}"#,
        dtype.name()
    );
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data[..len]);
    file
}

/// Round trip: the bytes as a tensor of the dtype the first byte picks, compressed with
/// the search budget the second byte picks, then restored; the result must be the input.
pub fn roundtrip(data: &[u8]) {
    let [d, b, rest @ ..] = data else {
        return;
    };
    let dtype = ALL_DTYPES[usize::from(*d) % ALL_DTYPES.len()];
    roundtrip_dtype(dtype, u64::from(b % 8), rest);
}

/// Round trip of `data` as a tensor of `dtype` with search `budget`.
pub fn roundtrip_dtype(dtype: brevis::Dtype, budget: u64, data: &[u8]) {
    on_pool(|| roundtrip_on_pool(dtype, budget, data));
}

fn roundtrip_on_pool(dtype: brevis::Dtype, budget: u64, data: &[u8]) {
    let file = one_tensor_file(dtype, data);
    let src = parse(&file).expect("the fuzz harness builds valid files");
    let mut opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    opts.search.budget = budget;
    let mut brv = Vec::new();
    brevis::archive::writer::write_archive(&src, &mut brv, &opts, &no_progress, Path::new("m"))
        .expect("compressing a valid file failed");
    let a = Archive::from_bytes(brv, "m.brv").expect("own archive refused");
    let mut out = Vec::new();
    a.write_original(&mut out, Some(1), &no_progress, Path::new("o"))
        .expect("own archive did not restore");
    assert!(out == file, "{dtype}: round trip changed the bytes");
}

/// The single-threaded rayon pool every entry that compresses or decodes runs on: the
/// library runs a job of one thread on the pool it is called from, so no entry starts a
/// thread (threads started and ended by every run left thread-local destructor records
/// that LeakSanitizer reported as leaks, stopping `archive` and `roundtrip` after
/// 24-155 k runs), and none is paid for.
fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "brevis-fuzz".to_string())
            .build()
            .expect("one thread")
    })
    .install(f)
}

/// Reads choices from fuzz bytes; past their end every choice is 0.
pub struct Choices<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Choices<'a> {
    /// Choices read from `data`.
    pub fn new(data: &'a [u8]) -> Choices<'a> {
        Choices { data, at: 0 }
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let v = if n > 256 {
            usize::from(self.byte()) << 8 | usize::from(self.byte())
        } else {
            usize::from(self.byte())
        };
        v % n
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// A JSON string literal of `s` (control characters, quotes and backslashes escaped).
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A valid `.safetensors` file built from fuzz choices (the writer fuzzer's input,
/// `src/archive/safetensors.rs` says what is valid): up to 7 tensors of any dtype
/// (sub-byte ones in whole bytes), empty ones at any offset (inside others' bytes too),
/// scalars, shapes of rank 0 to 3, payloads random, constant, a ramp, or the bytes of
/// an earlier tensor under its own name, dtype and width; laid out in another order than
/// the header lists them, with gaps before tensors and trailing bytes; an optional
/// `__metadata__` anywhere among the entries; compact or spaced JSON, leading
/// whitespace, padding. Small: at most a few hundred bytes of data.
pub fn safetensors_of(c: &mut Choices<'_>) -> Vec<u8> {
    use brevis::tensor::ALL_DTYPES;
    struct T {
        name: String,
        dtype: brevis::Dtype,
        shape: Vec<u64>,
        bytes: Vec<u8>,
    }
    let count = c.below(8);
    let mut tensors: Vec<T> = Vec::with_capacity(count);
    for k in 0..count {
        let name = match c.below(8) {
            0 => format!("layer.{k}.weight"),
            1 => format!("t\u{1b}[{k}m"),
            2 => format!("τ{k}"),
            3 => format!("w\"{k}\\"),
            4 if k == 0 => String::new(),
            _ => format!("t{k}"),
        };
        let dtype = ALL_DTYPES[c.below(ALL_DTYPES.len())];
        let bits = u64::from(dtype.element_bits());
        // Elements fill whole bytes: 4-bit ones come in pairs, 6-bit ones in fours.
        let step = match bits {
            4 => 2,
            6 => 4,
            _ => 1,
        };
        let mode = c.below(8);
        let mut elements = if c.below(4) == 0 {
            c.below(160) as u64
        } else {
            c.below(12) as u64
        } / step
            * step;
        // The bytes of an earlier tensor under this dtype, when they make whole elements.
        let copied = (mode == 2 && !tensors.is_empty())
            .then(|| tensors[c.below(tensors.len())].bytes.clone())
            .filter(|b| !b.is_empty() && (b.len() as u64 * 8).is_multiple_of(bits));
        if let Some(b) = &copied {
            elements = b.len() as u64 * 8 / bits;
        }
        if mode == 0 {
            elements = 0;
        }
        let scalar = elements == step && step == 1 && c.below(2) == 0;
        let shape = if scalar {
            Vec::new()
        } else if elements == 0 {
            match c.below(3) {
                0 => vec![0],
                1 => vec![3, 0],
                _ => vec![0, 2, 5],
            }
        } else {
            match c.below(4) {
                0 | 1 => vec![elements],
                2 => {
                    let rows = (1..=elements)
                        .rev()
                        .find(|r| elements.is_multiple_of(*r) && *r <= 8)
                        .unwrap_or(1);
                    vec![rows, elements / rows]
                }
                _ => vec![1, elements, 1],
            }
        };
        let len = dtype.byte_len(elements).expect("small") as usize;
        let bytes = match (copied, mode) {
            (Some(b), _) => b,
            (None, 3) => vec![c.byte(); len],
            (None, 4) => {
                let (a, d) = (c.byte(), c.byte());
                (0..len)
                    .map(|i| a.wrapping_add(d.wrapping_mul(i as u8)))
                    .collect()
            }
            (None, 5) => {
                // NaN payloads and signed zeros of a float dtype's width.
                let pat = [0x00, 0x80, 0xc0, 0x7f, 0xff, 0x01];
                (0..len).map(|i| pat[(i + c.below(6)) % 6]).collect()
            }
            _ => c.bytes(len),
        };
        tensors.push(T {
            name,
            dtype,
            shape,
            bytes,
        });
    }
    // Names are unique: a repeated one gets its position.
    for k in 0..tensors.len() {
        if tensors[..k].iter().any(|t| t.name == tensors[k].name) {
            tensors[k].name = format!("{}#{k}", tensors[k].name);
        }
    }
    // The data region: non-empty tensors in another order, gaps before some, trailing
    // bytes; empty tensors anywhere.
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, c.below(i + 1));
    }
    let mut data = Vec::new();
    let mut offsets = vec![(0u64, 0u64); tensors.len()];
    for &t in &order {
        if tensors[t].bytes.is_empty() {
            continue;
        }
        if c.below(4) == 0 {
            let n = 1 + c.below(5);
            data.extend(c.bytes(n));
        }
        let begin = data.len() as u64;
        data.extend_from_slice(&tensors[t].bytes);
        offsets[t] = (begin, data.len() as u64);
    }
    if c.below(3) == 0 {
        let n = 1 + c.below(8);
        data.extend(c.bytes(n));
    }
    for (t, o) in tensors.iter().zip(offsets.iter_mut()) {
        if t.bytes.is_empty() {
            let at = c.below(data.len() + 1) as u64;
            *o = (at, at);
        }
    }
    // The header: entries in another order, metadata among them, spacing.
    let spaced = c.below(2) == 0;
    let (colon, comma) = if spaced { (": ", ", ") } else { (":", ",") };
    let mut entries: Vec<String> = Vec::new();
    let mut listed: Vec<usize> = (0..tensors.len()).collect();
    for i in (1..listed.len()).rev() {
        listed.swap(i, c.below(i + 1));
    }
    for &t in &listed {
        let tn = &tensors[t];
        let shape: Vec<String> = tn.shape.iter().map(|d| d.to_string()).collect();
        let (b, e) = offsets[t];
        let fields = [
            format!("\"dtype\"{colon}\"{}\"", tn.dtype.name()),
            format!("\"shape\"{colon}[{}]", shape.join(comma)),
            format!("\"data_offsets\"{colon}[{b}{comma}{e}]"),
        ];
        let fields = if c.below(3) == 0 {
            format!("{}{comma}{}{comma}{}", fields[2], fields[0], fields[1])
        } else {
            fields.join(comma)
        };
        entries.push(format!("{}{colon}{{{fields}}}", json_str(&tn.name)));
    }
    if c.below(2) == 0 {
        let pairs: Vec<String> = (0..c.below(3))
            .map(|i| {
                let n = c.below(6);
                let v: String = c
                    .bytes(n)
                    .iter()
                    .map(|&b| char::from(b'a' + b % 26))
                    .collect();
                format!("{}{colon}{}", json_str(&format!("k{i}")), json_str(&v))
            })
            .collect();
        let at = c.below(entries.len() + 1);
        entries.insert(
            at,
            format!("\"__metadata__\"{colon}{{{}}}", pairs.join(comma)),
        );
    }
    let mut header = String::new();
    if c.below(6) == 0 {
        header.push_str(" \n");
    }
    header.push('{');
    header.push_str(&entries.join(comma));
    header.push('}');
    match c.below(3) {
        0 => {
            while !header.len().is_multiple_of(8) {
                header.push(' ');
            }
        }
        1 => header.push_str("   "),
        _ => {}
    }
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    file
}

/// `file` with the bytes of its first non-empty tensor changed (every byte XOR 0x5a):
/// a base that differs from it in one tensor. `file` itself when it has none.
pub fn one_tensor_changed(file: &[u8]) -> Vec<u8> {
    let src = parse(file).expect("a valid file");
    let mut out = file.to_vec();
    let start = src.data_start();
    if let Some(t) = src.tensors().iter().find(|t| t.begin != t.end) {
        for b in &mut out[start + t.begin as usize..start + t.end as usize] {
            *b ^= 0x5a;
        }
    }
    out
}

/// What a file is coded against in [`writer_round_trip`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseChoice {
    /// No base.
    None,
    /// The file itself.
    Itself,
    /// The file with one tensor changed ([`one_tensor_changed`]).
    OneChanged,
}

/// Compresses `file` (a valid `.safetensors` file) in memory at `level` with search
/// `budget` (ignored at the fast level, which takes no budget),
/// coded against `base`, with the writer's own program check off (the archive must
/// restore without it), then checks that the archive restores `file` byte for byte,
/// that every tensor decodes alone to its bytes, and that the archive cut at byte
/// `cut` (taken modulo its length) salvages every tensor whose record precedes the cut
/// and zero-fills only what it names.
///
/// # Panics
/// When any of that fails: a bug in the library.
pub fn writer_round_trip(
    file: &[u8],
    level: brevis::synth::Level,
    budget: u64,
    base: BaseChoice,
    cut: usize,
) {
    use brevis::archive::base::{BaseSet, OpenedSource};
    use brevis::archive::writer::{write_archive, Links};
    let src = parse(file).expect("the generator makes valid files");
    let set = match base {
        BaseChoice::None => None,
        BaseChoice::Itself => Some(file.to_vec()),
        BaseChoice::OneChanged => Some(one_tensor_changed(file)),
    }
    .map(|b| {
        let s = OpenedSource::from_bytes(b, "base.safetensors", Path::new("base.safetensors"))
            .expect("a valid base");
        std::sync::Arc::new(BaseSet::from_sources(
            vec![s],
            Path::new("base.safetensors"),
        ))
    });
    let mut opts = CompressOptions {
        jobs: Some(1),
        verify: false,
        ..CompressOptions::default()
    };
    opts.search.level = level;
    opts.search.budget = if level == brevis::synth::Level::Fast {
        level.budget()
    } else {
        budget
    };
    if let Some(set) = &set {
        opts.links = Some(std::sync::Arc::new(Links {
            base: Some(set.clone()),
            ..Links::default()
        }));
    }
    let brv = on_pool(|| {
        let mut brv = Vec::new();
        write_archive(&src, &mut brv, &opts, &no_progress, Path::new("m"))
            .expect("compressing a valid file failed");
        brv
    });
    let a = Archive::from_bytes(brv.clone(), "m.brv").expect("own archive refused");
    if let Some(set) = &set {
        a.attach_base(set).expect("the base it was made against");
    }
    let out = on_pool(|| {
        let mut out = Vec::new();
        a.write_original(&mut out, Some(1), &no_progress, Path::new("o"))
            .expect("own archive did not restore");
        out
    });
    assert!(
        out == file,
        "budget {budget}, {base:?}: round trip changed the bytes"
    );
    let data = src.data_start();
    for (i, t) in a.tensors().iter().enumerate() {
        let bytes = on_pool(|| a.decode_tensor(i)).expect("a tensor did not decode alone");
        assert!(
            bytes == file[data + t.begin as usize..data + t.end as usize],
            "budget {budget}, {base:?}: tensor {:?} decoded alone differs",
            t.name
        );
    }
    // The archive cut short: every tensor whose record lies before the cut restores.
    let cut = cut % (brv.len() + 1);
    let Ok(cut_archive) = Archive::from_bytes_for_salvage(brv[..cut].to_vec(), "cut.brv") else {
        // Nothing to salvage: the header record is cut.
        assert!(cut < a.header_archive_bytes() as usize + 16 || cut < 16 + 1);
        return;
    };
    if let Some(set) = &set {
        cut_archive
            .attach_base(set)
            .expect("the base it was made against");
    }
    let mut salvaged = Vec::new();
    let damaged =
        on_pool(|| cut_archive.salvage_to(&mut salvaged, Some(1), &no_progress, Path::new("s")))
            .expect("a cut archive whose header record is whole salvages");
    assert_eq!(salvaged.len(), file.len(), "salvage wrote another length");
    let mut expected = file.to_vec();
    for d in &damaged {
        expected[d.offset as usize..(d.offset + d.bytes) as usize].fill(0);
    }
    assert!(
        salvaged == expected,
        "cut at {cut}: salvage wrote other bytes than it named"
    );
    for t in a.tensors() {
        if t.record.end <= cut && t.begin != t.end {
            let at = (data as u64 + t.begin)..(data as u64 + t.end);
            assert!(
                !damaged
                    .iter()
                    .any(|d| d.offset < at.end && at.start < d.offset + d.bytes),
                "cut at {cut}: tensor {:?}, whose record ends at {}, was not salvaged: {damaged:?}",
                t.name,
                t.record.end
            );
        }
    }
}

/// The writer fuzzer: a valid `.safetensors` file built from the input
/// ([`safetensors_of`]), compressed at the budget (0, 1 or 2), against the base (none,
/// itself, one tensor changed) and at the level (default twice in three, fast) the
/// first byte picks, restored and compared byte
/// for byte, each tensor decoded alone, and the archive cut where the second byte says
/// salvaged ([`writer_round_trip`]).
pub fn writer(data: &[u8]) {
    let [sel, cut, rest @ ..] = data else {
        return;
    };
    let base = match (sel / 3) % 3 {
        0 => BaseChoice::None,
        1 => BaseChoice::Itself,
        _ => BaseChoice::OneChanged,
    };
    let file = safetensors_of(&mut Choices::new(rest));
    // A cut anywhere, scaled over the archive's length by the byte.
    let level = if (sel / 9) % 3 == 2 {
        brevis::synth::Level::Fast
    } else {
        brevis::synth::Level::Default
    };
    writer_round_trip(
        &file,
        level,
        u64::from(sel % 3),
        base,
        usize::from(*cut) * 4099,
    );
}
