//! Damage detection on a real archive (issue 5): an archive made from
//! `../shared/corpus/silero-vad-16k-f32.safetensors` is damaged by flipping thousands of
//! seeded random bits plus every bit of its framing (file header, every record's fields
//! before its program, the index and the trailer), and truncated at every length of the
//! framing plus a stride through the records. Each damaged copy must be refused at open
//! or fail verification; nothing may panic; and any decode that reports success must
//! return the original bytes ("never lie").

use brevis::archive::safetensors::parse;
use brevis::archive::writer::write_archive;
use brevis::archive::{no_progress, verify, CompressOptions};
use brevis::Archive;
use std::collections::BTreeSet;
use std::path::Path;

const SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/silero-vad-16k-f32.safetensors"
);

/// Random bits flipped in the record bytes (on top of every framing bit).
const RANDOM_FLIPS: usize = 4000;
/// Every this many damaged copies that open, also restore the whole file and verify.
const FULL_CHECK_EVERY: usize = 64;

struct Fixture {
    src: Vec<u8>,
    brv: Vec<u8>,
    /// Original bytes of every tensor, in archive order.
    tensors: Vec<Vec<u8>>,
    /// Byte ranges of each tensor record and program (archive order).
    records: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    header_record_end: usize,
    index_start: usize,
}

fn fixture() -> Option<Fixture> {
    let src = std::fs::read(SOURCE).ok()?;
    let parsed = parse(&src).expect("corpus file parses");
    let opts = CompressOptions {
        jobs: Some(2),
        ..CompressOptions::default()
    };
    let mut brv = Vec::new();
    write_archive(
        &parsed,
        &mut brv,
        &opts,
        &no_progress,
        Path::new("silero.brv"),
    )
    .unwrap();
    let a = Archive::from_bytes(brv.clone(), "silero.brv").unwrap();
    let tensors = (0..a.tensors().len())
        .map(|i| a.decode_tensor(i).unwrap())
        .collect();
    let records: Vec<_> = a
        .tensors()
        .iter()
        .map(|t| (t.record.clone(), t.program.clone()))
        .collect();
    let header_record_end = 16 + a.header_archive_bytes() as usize;
    let index_start =
        u64::from_le_bytes(brv[brv.len() - 32..brv.len() - 24].try_into().unwrap()) as usize;
    assert!(a.gaps().is_empty(), "the fixture has no gaps");
    Some(Fixture {
        src,
        brv,
        tensors,
        records,
        header_record_end,
        index_start,
    })
}

/// splitmix64: a seeded generator without dependencies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Bytes of the file header holding the program wire version (design §7.1).
const WIRE_FIELD: std::ops::Range<usize> = 10..12;

#[derive(Default, Debug)]
struct Tally {
    refused: usize,
    caught: usize,
}

/// Checks one damaged copy whose damage lies in `bytes` of the archive.
fn check(f: &Fixture, bad: Vec<u8>, pos: usize, what: &str, tally: &mut Tally, full: bool) {
    let Ok(a) = Archive::from_bytes(bad, "damaged.brv") else {
        tally.refused += 1;
        return;
    };
    // The file header's wire version (bytes 10..12) is under no checksum: changed to
    // another version this reader reads, the archive opens, and a program newer than the
    // version declared is refused at decode. Restoring must then fail or be exact.
    if WIRE_FIELD.contains(&pos) {
        let mut out = Vec::new();
        if a.write_original(&mut out, Some(1), &no_progress, Path::new("o"))
            .is_ok()
        {
            assert!(
                out == f.src,
                "{what}: relabelled wire version restored wrong bytes"
            );
        }
        tally.caught += 1;
        return;
    }
    // Every record byte is covered by the records checksum, every index byte by the
    // index checksum in the trailer: verification must notice.
    assert!(!a.records_intact(), "{what}: opened with intact records");
    tally.caught += 1;
    // Never lie: a tensor that decodes is the original. Only the record holding the
    // damaged byte can decode differently (the full check below covers the rest).
    assert_eq!(
        a.tensors().len(),
        f.tensors.len(),
        "{what}: tensor count changed"
    );
    for (i, orig) in f.tensors.iter().enumerate() {
        if !f.records[i].0.contains(&pos) {
            continue;
        }
        if let Ok(bytes) = a.decode_tensor(i) {
            assert!(&bytes == orig, "{what}: tensor {i} decoded to wrong bytes");
        }
    }
    let header = (pos < f.header_record_end).then(|| a.header_bytes());
    if let Some(Ok(h)) = header {
        assert!(
            h == f.src[8..8 + h.len()],
            "{what}: header decoded to wrong bytes"
        );
    }
    if full {
        let report = verify(&a, Some(1), &no_progress).unwrap();
        assert!(!report.is_ok(), "{what}: verification passed");
        let mut out = Vec::new();
        if a.write_original(&mut out, Some(1), &no_progress, Path::new("o"))
            .is_ok()
        {
            assert!(out == f.src, "{what}: restored wrong bytes");
        }
    }
}

#[test]
fn damaged_silero_archive_is_refused_or_caught() {
    let Some(f) = fixture() else {
        eprintln!("skipped: {SOURCE} is missing");
        return;
    };
    let len = f.brv.len();
    // The framing: file header and header record, every tensor record's fields before its
    // program (plus the first program byte, its root tag), the index and the trailer.
    let mut framing: BTreeSet<usize> = (0..f.header_record_end).collect();
    for (rec, prog) in &f.records {
        framing.extend(rec.start..=prog.start.min(rec.end - 1));
    }
    framing.extend(f.index_start..len);
    let mut tally = Tally::default();
    let mut opened = 0usize;
    for &pos in &framing {
        for bit in 0..8 {
            let mut bad = f.brv.clone();
            bad[pos] ^= 1 << bit;
            let before = tally.caught;
            check(
                &f,
                bad,
                pos,
                &format!("byte {pos} bit {bit}"),
                &mut tally,
                false,
            );
            opened += tally.caught - before;
        }
    }
    let framing_bits = framing.len() * 8;
    let mut rng = Rng(0x5eed_b7e5);
    for k in 0..RANDOM_FLIPS {
        let pos = (rng.next() % len as u64) as usize;
        let bit = rng.next() % 8;
        let mut bad = f.brv.clone();
        bad[pos] ^= 1 << bit;
        let full = k % FULL_CHECK_EVERY == 0;
        check(
            &f,
            bad,
            pos,
            &format!("random byte {pos} bit {bit}"),
            &mut tally,
            full,
        );
    }
    eprintln!(
        "archive {len} bytes; {framing_bits} framing bits + {RANDOM_FLIPS} random bits: \
         {} refused at open, {} caught by checksums ({opened} of them framing)",
        tally.refused, tally.caught
    );
}

#[test]
fn truncated_silero_archive_is_refused() {
    let Some(f) = fixture() else {
        eprintln!("skipped: {SOURCE} is missing");
        return;
    };
    let len = f.brv.len();
    let mut lengths: BTreeSet<usize> = (0..=f.header_record_end + 64).collect();
    for (rec, prog) in &f.records {
        lengths.extend(rec.start..=prog.start);
        lengths.insert(rec.end);
    }
    lengths.extend(f.index_start.saturating_sub(64)..len);
    lengths.extend((0..len).step_by(211));
    for &n in &lengths {
        assert!(
            Archive::from_bytes(f.brv[..n].to_vec(), "cut.brv").is_err(),
            "prefix of {n} bytes opened"
        );
    }
    // Appending bytes is refused too.
    let mut longer = f.brv.clone();
    longer.push(0);
    assert!(Archive::from_bytes(longer, "long.brv").is_err());
    eprintln!("{} truncations refused", lengths.len());
}

/// A small archive (several dtypes, an empty tensor, leading and trailing gaps): every
/// single bit flipped and every truncation.
#[test]
fn every_bit_of_a_small_archive() {
    let header = r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"e":{"dtype":"BF16","shape":[0,3],"data_offsets":[12,12]},"a":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]},"c":{"dtype":"U8","shape":[40],"data_offsets":[18,58]}}"#;
    let mut src = (header.len() as u64).to_le_bytes().to_vec();
    src.extend_from_slice(header.as_bytes());
    src.extend_from_slice(&[9, 9, 9, 9]);
    src.extend_from_slice(&1.5f32.to_le_bytes());
    src.extend_from_slice(&f32::NAN.to_le_bytes());
    src.extend_from_slice(&[0x80, 0x3f, 0x00, 0x80, 0xc0, 0x7f]);
    src.extend((0..40u8).map(|i| i / 3));
    src.extend_from_slice(b"tail");
    let parsed = parse(&src).unwrap();
    let mut brv = Vec::new();
    let opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    write_archive(&parsed, &mut brv, &opts, &no_progress, Path::new("s")).unwrap();
    let (mut refused, mut caught) = (0, 0);
    for pos in 0..brv.len() {
        for bit in 0..8 {
            let mut bad = brv.clone();
            bad[pos] ^= 1 << bit;
            let Ok(a) = Archive::from_bytes(bad, "t") else {
                refused += 1;
                continue;
            };
            caught += 1;
            let report = verify(&a, Some(1), &no_progress).unwrap();
            // The wire version may become another readable one (see `check`); the
            // restore below must then still be exact.
            assert!(
                !report.is_ok() || WIRE_FIELD.contains(&pos),
                "byte {pos} bit {bit} went unnoticed"
            );
            let mut out = Vec::new();
            if a.write_original(&mut out, Some(1), &no_progress, Path::new("o"))
                .is_ok()
            {
                assert_eq!(out, src, "byte {pos} bit {bit} restored wrong bytes");
            }
        }
    }
    for n in 0..brv.len() {
        assert!(Archive::from_bytes(brv[..n].to_vec(), "t").is_err());
    }
    eprintln!("{} bits: {refused} refused, {caught} caught", brv.len() * 8);
}
