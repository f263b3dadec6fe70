//! Resource limits (issue 5): files that declare a 1 TiB header, 2^60 elements or a
//! 4 GiB literal fail fast with a clean error (exit code 1, one `error:` line, no panic,
//! no output left behind) while the CLI runs under `ulimit -v` of 256 MiB.

#![cfg(feature = "cli")]

mod support;

use brevis::archive::format;
use brevis::dsl::wire::Sink;
use brevis::Dtype;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::CASES;
use xxhash_rust::xxh3::xxh3_64;

/// The memory cap in KiB (256 MiB).
const CAP_KIB: u64 = 256 * 1024;

/// Runs `brevis <args>` under the memory cap.
fn capped(args: &[&Path]) -> Output {
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {CAP_KIB}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .env("RAYON_NUM_THREADS", "2");
    cmd.output().expect("run sh")
}

/// Asserts a clean refusal: exit `code` (1, or 3 for a damaged record of an archive
/// that opened), one `error:` line naming `file`, no panic.
fn assert_clean_error(out: &Output, file: &Path, code: i32, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}: {stderr}",
        file.display()
    );
    assert!(
        !stderr.contains("panicked"),
        "{}: panic: {stderr}",
        file.display()
    );
    assert!(
        !stderr.contains("memory allocation"),
        "{}: abort: {stderr}",
        file.display()
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{}: not one line: {stderr}", file.display());
    assert!(lines[0].starts_with("error: "), "{stderr}");
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(
        lines[0].contains(&*name),
        "message does not name the file: {stderr}"
    );
    let lower = lines[0].to_lowercase();
    assert!(
        words.iter().any(|w| lower.contains(w)),
        "{}: message names none of {words:?}: {stderr}",
        file.display()
    );
}

fn only_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn huge_declaration_cases_fail_cleanly_under_256_mib() {
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "B15_declared_header_1TiB.safetensors",
            "compress",
            &["header length"],
        ),
        (
            "B25_offsets_over_4GiB_truncated.safetensors",
            "compress",
            &["past the data region"],
        ),
        (
            "B11_shape_larger_than_data.safetensors",
            "compress",
            &["needs"],
        ),
        (
            "B13_git_lfs_pointer.safetensors",
            "compress",
            &["header length", "shorter"],
        ),
        (
            "B27_zstd_frame_claims_1TiB.archive",
            "decompress",
            &["not a brevis archive"],
        ),
    ];
    for (file, stage, words) in cases {
        let input = Path::new(CASES).join(file);
        if !input.exists() {
            eprintln!("skipped: {} is missing", input.display());
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("out");
        let out = capped(&[Path::new(stage), &input, Path::new("-o"), &output]);
        assert_clean_error(&out, &input, 1, words);
        assert!(
            only_entries(dir.path()).is_empty(),
            "{file}: left files behind"
        );
    }
}

/// An archive with one tensor record whose program is `program`; everything else
/// (header record, index, trailer, checksums) is consistent.
fn crafted(dtype: Dtype, shape: &[u64], program: &[u8]) -> Vec<u8> {
    let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let data_len = elements
        .and_then(|n| dtype.byte_len(n))
        .unwrap_or(u64::MAX / 2);
    let json = format!(
        r#"{{"t":{{"dtype":"{}","shape":{shape:?},"data_offsets":[0,{data_len}]}}}}"#,
        dtype.name()
    );
    let mut out = format::file_header().to_vec();
    let mut header_program = vec![0x10];
    header_program.put_uleb(json.len() as u64);
    header_program.extend_from_slice(json.as_bytes());
    let start = out.len();
    format::header_record_head_v2(&mut out, json.len() as u64, xxh3_64(json.as_bytes()));
    out.extend_from_slice(&header_program);
    let header_len = out.len() - start;
    let start = out.len();
    format::data_record_head(&mut out, 0);
    out.extend_from_slice(program);
    let tensor_len = out.len() - start;
    let index = format::IndexV2 {
        original_len: 8 + json.len() as u64 + data_len,
        file_checksum: 0,
        records_checksum: xxh3_64(&out[16..]),
        file_name: "t.safetensors".into(),
        settings: vec![format::Settings {
            budget: 1,
            max_depth: 8,
            max_nodes: 64,
            prior: format::PriorKind::Uniform,
            prior_digest: 0,
            level: None,
        }],
        sources: Vec::new(),
        record_lens: vec![header_len as u64, tensor_len as u64],
        records: vec![(1, 0)],
    };
    let index_offset = out.len() as u64;
    let mut index_bytes = Vec::new();
    format::write_index_v2(&mut index_bytes, &index);
    out.extend_from_slice(&index_bytes);
    out.extend_from_slice(&format::trailer(index_offset, &index_bytes));
    out
}

#[test]
fn crafted_bombs_fail_cleanly_under_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    let bombs: Vec<(&str, Vec<u8>, i32, &[&str])> = vec![
        // One Const node declaring 2^40 bytes.
        (
            "const_1tib.brv",
            crafted(Dtype::U8, &[1 << 40], &[0x20, 0]),
            1,
            &["declares"],
        ),
        // 2^60 elements of U8 (2^60 bytes).
        (
            "const_2p60.brv",
            crafted(Dtype::U8, &[1 << 60], &[0x20, 7]),
            1,
            &["declares"],
        ),
        // 2^60 elements of F32: 2^65 bits, more than 64 bits can count.
        (
            "f32_2p60.brv",
            crafted(Dtype::F32, &[1 << 60], &[0x20, 7]),
            3,
            &["does not match", "not a valid .safetensors header"],
        ),
        // A shape whose element count overflows 64 bits.
        (
            "shape_overflow.brv",
            crafted(Dtype::F32, &[1 << 40, 1 << 40], &[0x20, 7]),
            3,
            &[
                "does not match",
                "damaged",
                "not a valid .safetensors header",
            ],
        ),
        // 4 GiB of words from a 1-byte bit-packed literal (k = 0): fits the per-region
        // limit, not the memory cap.
        (
            "bitpack_4gib.brv",
            crafted(Dtype::U8, &[1 << 32], &[0x11, 1, 0]),
            1,
            &["declares"],
        ),
        // A raw literal whose body length field says 4 GiB.
        (
            "raw_4gib.brv",
            crafted(Dtype::U8, &[1 << 32], &[0x10, 0x80, 0x80, 0x80, 0x80, 0x10]),
            1,
            &["truncated", "damaged"],
        ),
    ];
    for (name, bytes, code, words) in bombs {
        let input = dir.path().join(name);
        std::fs::write(&input, &bytes).unwrap();
        let outdir = tempfile::tempdir().unwrap();
        let output = outdir.path().join("out.safetensors");
        let out = capped(&[Path::new("decompress"), &input, Path::new("-o"), &output]);
        assert_clean_error(&out, &input, code, words);
        assert!(
            only_entries(outdir.path()).is_empty(),
            "{name}: left files behind"
        );
        // verify and show must not panic or abort either.
        for cmd in ["verify", "ls"] {
            let out = capped(&[Path::new(cmd), &input]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("panicked"), "{cmd} {name}: {stderr}");
            assert!(
                out.status.code().is_some(),
                "{cmd} {name}: killed: {stderr}"
            );
        }
        let out = capped(&[Path::new("show"), &input, Path::new("t")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && out.status.code().is_some(),
            "show {name}: {stderr}"
        );
    }
}

/// The same bombs through the library, without a memory cap: the per-region limit
/// refuses what no machine could hold, before allocating.
#[test]
fn library_refuses_regions_over_the_limit() {
    let a = brevis::Archive::from_bytes(crafted(Dtype::U8, &[1 << 40], &[0x20, 0]), "b.brv")
        .expect("structure is valid");
    let e = a.decode_tensor(0).unwrap_err().to_string();
    assert!(
        e.contains("b.brv") && e.contains("tensor \"t\"") && e.contains("1099511627776"),
        "{e}"
    );
    let report = brevis::verify(&a, Some(1), &brevis::archive::no_progress).unwrap();
    assert!(!report.is_ok());
}
