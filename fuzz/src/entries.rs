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
}

/// Every literal decoder, chosen by the first byte.
pub fn literal_any(data: &[u8]) {
    if let Some((&c, rest)) = data.split_first() {
        literal(ALL_CODECS[usize::from(c) % ALL_CODECS.len()], rest);
    }
}

/// Archive reader: open, verify, decode every tensor, restore the original.
pub fn archive(data: &[u8]) {
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
