//! The version-2 layout on real tensors: small tensors share group records and come out
//! smaller than a whole-stream field coder, a tensor stored twice costs one copy record,
//! records depend only on their own bytes, and the archive records its settings and the
//! source's file name.

use brevis::archive::safetensors::parse;
use brevis::archive::{compress_file, no_progress, rewrite, verify, Archive, CompressOptions};
use brevis::synth::SearchOptions;
use std::path::{Path, PathBuf};
use support::CORPUS;

mod support;
use support::safetensors_bytes;

/// Tensor `name` of corpus file `file`: its dtype name, shape and bytes.
fn corpus_tensor(file: &str, name: &str) -> (String, Vec<u64>, Vec<u8>) {
    let bytes = std::fs::read(Path::new(CORPUS).join(file)).expect("read the corpus file");
    let src = parse(&bytes).expect("parse");
    let i = src
        .tensors()
        .iter()
        .position(|t| t.name == name)
        .unwrap_or_else(|| panic!("{file} has no {name}"));
    let t = &src.tensors()[i];
    (
        t.dtype.name().to_string(),
        t.shape.clone(),
        src.tensor_bytes(i).to_vec(),
    )
}

fn compress(dir: &Path, name: &str, file: &[u8], opts: &CompressOptions) -> (PathBuf, Archive) {
    let input = dir.join(format!("{name}.safetensors"));
    std::fs::write(&input, file).unwrap();
    let out = dir.join(format!("{name}.brv"));
    compress_file(&input, &out, opts, &no_progress).unwrap();
    let a = Archive::open(&out).unwrap();
    let mut back = Vec::new();
    a.write_original(&mut back, Some(2), &no_progress, Path::new("out"))
        .unwrap();
    assert!(back == file, "{name}: restored bytes differ");
    (out, a)
}

/// Bytes of the order-0 field bound of ZipNN's model on one stream of F32 words: sign
/// and exponent (9 bits) coded at their empirical entropy over the whole stream, the 23
/// mantissa bits stored as they are; no tables counted.
fn zipnn_style_bound(words: &[u32]) -> f64 {
    let mut counts = vec![0u64; 512];
    for &w in words {
        counts[(w >> 23) as usize] += 1;
    }
    let n = words.len() as f64;
    let h: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    n * (h + 23.0) / 8.0
}

/// A checkpoint of many small tensors, made from real ones (silero's LSTM matrices cut
/// into 512 tensors of 128 words, biases cut into 32 of 32 words): small tensors share
/// group records, each decodes alone, and all of them together take fewer bytes than
/// the whole-stream bound of ZipNN's model over all their words.
#[test]
fn small_tensors_in_groups_beat_a_whole_stream_field_coder() {
    let file = "silero-vad-16k-f32.safetensors";
    let mut tensors = Vec::new();
    let mut words: Vec<u32> = Vec::new();
    for (source, size) in [
        ("lstm_cell.weight_ih", 512),
        ("lstm_cell.weight_hh", 512),
        ("lstm_cell.bias_ih", 128),
        ("lstm_cell.bias_hh", 128),
    ] {
        let (_, _, bytes) = corpus_tensor(file, source);
        for (k, part) in bytes.chunks(size).enumerate() {
            tensors.push((
                format!("{source}.{k}"),
                "F32",
                vec![(size / 4) as u64],
                part.to_vec(),
            ));
            words.extend(
                part.chunks(4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap())),
            );
        }
    }
    assert_eq!(tensors.len(), 2 * 512 + 2 * 16);
    let dir = tempfile::tempdir().unwrap();
    let (_, a) = compress(
        dir.path(),
        "small",
        &safetensors_bytes(&tensors),
        &CompressOptions::default(),
    );
    assert!(!a.groups().is_empty());
    assert!(
        a.tensors().iter().all(|t| t.group.is_some()),
        "every tensor is in a group"
    );
    for g in a.groups() {
        assert!(g.end - g.begin <= brevis::archive::writer::GROUP_BYTES);
    }
    let data: u64 = a.tensors().iter().map(|t| t.archive_bytes()).sum();
    let bound = zipnn_style_bound(&words);
    assert!(
        (data as f64) < bound,
        "tensor records {data} bytes, whole-stream bound {bound:.0}"
    );
    // Each tensor alone, through its group.
    for (i, t) in a.tensors().iter().enumerate() {
        assert_eq!(a.decode_tensor(i).unwrap(), tensors[i].3, "{}", t.name);
    }
    assert!(verify(&a, Some(2), &no_progress).unwrap().is_ok());
}

/// At the fast level a group of small tensors is coded as one stream (its tensors are not
/// also coded one by one: that cost fracast0-f32 four times the group's time for at most
/// 0.015 points): every group's program is the layout's `merge` of its whole words, not
/// a `concat` of programs per tensor, and every tensor decodes alone through it. The
/// default level keeps the smaller of the two on the same file (here, one by one).
#[test]
fn the_fast_level_codes_a_group_as_one_stream() {
    let Ok(file) = std::fs::read(Path::new(CORPUS).join("fracast0-f32.safetensors")) else {
        eprintln!("skipped: fracast0-f32.safetensors is missing");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let roots = |level: brevis::synth::Level| {
        let mut opts = CompressOptions::default();
        opts.search.level = level;
        opts.search.budget = level.budget();
        let (_, a) = compress(dir.path(), &format!("fracast0-{level:?}"), &file, &opts);
        assert!(!a.groups().is_empty());
        for (i, t) in a.tensors().iter().enumerate() {
            let back = a.decode_tensor(i).unwrap();
            assert_eq!(back.len() as u64, t.original_bytes(), "{}", t.name);
        }
        let mut roots: Vec<String> = a
            .groups()
            .iter()
            .map(|g| {
                let p = a.program(g.tensors.start).unwrap();
                brevis::dsl::text::node_label(&p)
            })
            .collect();
        roots.dedup();
        roots
    };
    assert_eq!(
        roots(brevis::synth::Level::Fast),
        ["merge fields[1,10,21]".to_string()]
    );
    assert_eq!(roots(brevis::synth::Level::Default), ["concat".to_string()]);
}

/// A tensor stored under a second name (tied weights) costs a copy record: at most 1% +
/// 4 KiB more than the file without it; both names decode, the second says what it
/// copies.
#[test]
fn a_tensor_stored_twice_costs_one_copy_record() {
    let (dtype, shape, bytes) =
        corpus_tensor("silero-vad-16k-f32.safetensors", "lstm_cell.weight_ih");
    let (d2, s2, other) = corpus_tensor("silero-vad-16k-f32.safetensors", "conv1.weight");
    let once = vec![
        (
            "a".to_string(),
            dtype.as_str(),
            shape.clone(),
            bytes.clone(),
        ),
        ("b".to_string(), d2.as_str(), s2.clone(), other.clone()),
    ];
    let mut twice = once.clone();
    twice.push((
        "a_tied".to_string(),
        dtype.as_str(),
        shape.clone(),
        bytes.clone(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let opts = CompressOptions::default();
    let (_, one) = compress(dir.path(), "once", &safetensors_bytes(&once), &opts);
    let (_, two) = compress(dir.path(), "twice", &safetensors_bytes(&twice), &opts);
    let (a, b) = (one.archive_len(), two.archive_len());
    assert!(
        b as f64 <= a as f64 * 1.01 + 4096.0,
        "{a} bytes once, {b} with a copy"
    );
    let tied = two.find("a_tied").unwrap();
    let t = &two.tensors()[tied];
    assert_eq!(t.copy_of, two.find("a"));
    assert!(
        t.archive_bytes() <= 4,
        "a copy record is {} bytes",
        t.archive_bytes()
    );
    assert_eq!(two.decode_tensor(tied).unwrap(), bytes);
    assert!(verify(&two, Some(1), &no_progress).unwrap().is_ok());
}

/// Records depend only on their own bytes and the options: two checkpoints that differ
/// in one tensor's bytes (and in their tensors' names) share every other record byte
/// for byte, so storage that dedups chunks finds what they share.
#[test]
fn records_depend_only_on_their_own_bytes() {
    let file = "silero-vad-16k-f32.safetensors";
    let names = [
        "conv1.weight",
        "conv2.weight",
        "lstm_cell.weight_ih",
        "conv1.bias",
    ];
    let base: Vec<(String, String, Vec<u64>, Vec<u8>)> = names
        .iter()
        .map(|n| {
            let (d, s, b) = corpus_tensor(file, n);
            (n.to_string(), d, s, b)
        })
        .collect();
    #[allow(clippy::type_complexity)]
    fn as_ref<'a>(
        v: &'a [(String, String, Vec<u64>, Vec<u8>)],
        prefix: &str,
    ) -> Vec<(String, &'a str, Vec<u64>, Vec<u8>)> {
        v.iter()
            .map(|(n, d, s, b)| (format!("{prefix}{n}"), d.as_str(), s.clone(), b.clone()))
            .collect()
    }
    let mut changed = base.clone();
    for x in changed[1].3.iter_mut().step_by(97) {
        *x ^= 1;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = CompressOptions::default();
    let (pa, a) = compress(
        dir.path(),
        "a",
        &safetensors_bytes(&as_ref(&base, "")),
        &opts,
    );
    let (pb, b) = compress(
        dir.path(),
        "b",
        &safetensors_bytes(&as_ref(&changed, "model.")),
        &opts,
    );
    let (ba, bb) = (std::fs::read(pa).unwrap(), std::fs::read(pb).unwrap());
    let mut same = 0;
    for (i, (ta, tb)) in a.tensors().iter().zip(b.tensors()).enumerate() {
        let (ra, rb) = (&ba[ta.record.clone()], &bb[tb.record.clone()]);
        if i == 1 {
            assert_ne!(ra, rb);
        } else {
            assert_eq!(ra, rb, "record of {}", ta.name);
            same += 1;
        }
    }
    assert_eq!(same, 3);
}

/// The archive keeps the search settings that built it and the source's file name.
#[test]
fn settings_and_file_name_are_kept() {
    let (d, s, b) = corpus_tensor("fracast0-f32.safetensors", "core.block.pw.weight");
    let file = safetensors_bytes(&[("w".to_string(), d.as_str(), s, b)]);
    let dir = tempfile::tempdir().unwrap();
    let (_, a) = compress(dir.path(), "plain", &file, &CompressOptions::default());
    assert_eq!(a.version(), 4);
    assert_eq!(a.file_name(), Some("plain.safetensors"));
    let set = a.tensors()[0].settings.unwrap();
    assert_eq!((set.budget, set.max_depth, set.max_nodes), (1, 4, 64));
    assert_eq!(set.prior, brevis::archive::format::PriorKind::Uniform);
    assert_eq!(set.prior_digest, 0);
    let opts = CompressOptions {
        search: SearchOptions {
            budget: 3,
            max_depth: 5,
            ..SearchOptions::default()
        },
        ..CompressOptions::default()
    };
    let (_, c) = compress(dir.path(), "calibrated", &file, &opts);
    let set = c.settings()[0];
    assert_eq!((set.budget, set.max_depth), (3, 5));
    assert_eq!(set.prior, brevis::archive::format::PriorKind::Calibrated);
    assert_ne!(set.prior_digest, 0);
    // The same input and options give the same bytes, whatever the output is called
    // (the calibrated prior's digest once hashed the path it was learned from).
    let again = dir.path().join("again.brv");
    let input = dir.path().join("calibrated.safetensors");
    compress_file(&input, &again, &opts, &no_progress).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("calibrated.brv")).unwrap(),
        std::fs::read(again).unwrap()
    );
}

/// A group's program is replaced as a whole (the TUI's `w` on a tensor of a group), and
/// the copy still restores every tensor.
#[test]
fn a_group_program_is_replaced_whole() {
    let (d, _, b) = corpus_tensor("fracast0-f32.safetensors", "core.block.pw.weight");
    let tensors: Vec<_> = b
        .chunks(1024)
        .take(4)
        .enumerate()
        .map(|(k, part)| (format!("t{k}"), d.as_str(), vec![256], part.to_vec()))
        .collect();
    let file = safetensors_bytes(&tensors);
    let dir = tempfile::tempdir().unwrap();
    let (path, a) = compress(dir.path(), "g", &file, &CompressOptions::default());
    assert_eq!(a.groups().len(), 1);
    let g = &a.groups()[0];
    let words = brevis::tensor::Words::from_le_bytes(32, &file[file.len() - 4096..]).unwrap();
    let lit = brevis::dsl::Node::lit(&words);
    assert_eq!(lit.ty(), g.ty());
    let out = dir.path().join("g2.brv");
    rewrite::rewrite_with_programs(&path, &out, &[(2, lit.clone())], None, false).unwrap();
    let new = Archive::open(&out).unwrap();
    assert_eq!(new.program(0).unwrap(), lit);
    assert!(verify(&new, Some(1), &no_progress).unwrap().is_ok());
    // A program of the tensor's own type does not fit its group's record.
    let own =
        brevis::dsl::Node::lit(&brevis::tensor::Words::from_le_bytes(32, &tensors[2].3).unwrap());
    assert!(rewrite::rewrite_with_programs(
        &path,
        &dir.path().join("g3.brv"),
        &[(2, own)],
        None,
        false
    )
    .is_err());
}
