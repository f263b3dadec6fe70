//! The `brevis` command line: JSON output shapes, default names, refusing to clobber,
//! exit codes (0 ok, 1 error, 2 usage, 3 verification mismatch), help text.

#![cfg(feature = "cli")]

mod support;

use serde_json::{json, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{brevis, brevis_env, json_of, CASES};

fn case(name: &str) -> PathBuf {
    Path::new(CASES).join(name)
}

/// The failure object a `--json` run that exits 1 prints on stdout.
fn json_failure<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(args: I) -> Value {
    let o = brevis(args);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(v["ok"], false, "{v}");
    v
}

/// `compress SRC -o OUT --prior PRIOR --json` (that must fail): its failure object.
fn compress_with_prior_fails(src: &Path, out: &Path, prior: &Path) -> Value {
    json_failure([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--prior"),
        prior.as_os_str(),
        OsStr::new("--json"),
    ])
}

/// The bytes of a `.safetensors` file: `header`'s length (8 bytes, little-endian), then
/// `header`, then `data`.
fn safetensors_bytes(header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(data);
    bytes
}

/// Copies a case into `dir` and compresses it there; returns (source, archive).
fn compressed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let src = dir.join(name);
    std::fs::copy(case(name), &src).expect("copy case");
    let o = brevis([OsStr::new("compress"), src.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (src.clone(), src.with_extension("brv"))
}

#[test]
fn compress_json_lists_every_tensor_and_the_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let src = case("B07_gap_between.safetensors");
    let out = dir.path().join("g.brv");
    let v = json_of(&brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert_eq!(v["original_bytes"], 128);
    assert_eq!(v["archive_bytes"], std::fs::metadata(&out).unwrap().len());
    let tensors = v["tensors"].as_array().unwrap();
    let names: Vec<&str> = tensors
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    for t in tensors {
        for key in [
            "dtype",
            "shape",
            "original_bytes",
            "archive_bytes",
            "program_bytes",
            "root_op",
        ] {
            assert!(!t[key].is_null(), "tensor lacks {key}: {t}");
        }
    }
    assert_eq!(v["gaps"].as_array().unwrap().len(), 1);
    assert!(v["header"]["archive_bytes"].as_u64().unwrap() > 0);
    let warnings = v["warnings"].as_array().unwrap();
    assert!(warnings
        .iter()
        .any(|w| w.as_str().unwrap().contains("belong to no tensor")));
    // Success says so as every other command's JSON does (it had no "ok": a tester), and
    // so does decompress.
    assert_eq!(v["ok"], true);
    let back = dir.path().join("g.safetensors");
    let d = json_of(&brevis([
        OsStr::new("decompress"),
        out.as_os_str(),
        OsStr::new("-o"),
        back.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert_eq!(d["ok"], true, "{d}");
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&src).unwrap());
}

#[test]
fn ls_show_and_verify_json_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = compressed(dir.path(), "B20_mixed_dtypes.safetensors");

    let ls = json_of(&brevis([
        OsStr::new("ls"),
        archive.as_os_str(),
        OsStr::new("--json"),
    ]));
    let tensors = ls["tensors"].as_array().unwrap();
    assert!(!tensors.is_empty());
    let sum: u64 = tensors
        .iter()
        .map(|t| t["original_bytes"].as_u64().unwrap())
        .sum();
    assert!(sum > 0 && sum < ls["original_bytes"].as_u64().unwrap());
    for t in tensors {
        for key in [
            "name",
            "dtype",
            "shape",
            "begin",
            "end",
            "archive_bytes",
            "root_op",
        ] {
            assert!(!t[key].is_null(), "ls entry lacks {key}: {t}");
        }
    }

    let name = tensors[0]["name"].as_str().unwrap();
    let show = json_of(&brevis([
        OsStr::new("show"),
        archive.as_os_str(),
        OsStr::new(name),
        OsStr::new("--json"),
    ]));
    assert_eq!((&show["name"], &show["ok"]), (&json!(name), &json!(true)));
    assert!(show["program"].as_str().unwrap().contains(" : u"));
    let nodes = show["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["depth"], 0);
    let own: u64 = nodes.iter().map(|n| n["own_bytes"].as_u64().unwrap()).sum();
    assert_eq!(own, show["program_bytes"].as_u64().unwrap());
    assert_eq!(
        own + show["framing_bytes"].as_u64().unwrap(),
        show["archive_bytes"].as_u64().unwrap(),
        "node sizes and framing add up to the record"
    );
    assert_eq!(nodes[0]["subtree_bytes"], show["program_bytes"]);

    let v = json_of(&brevis([
        OsStr::new("verify"),
        archive.as_os_str(),
        OsStr::new("--json"),
    ]));
    assert_eq!(v["ok"], true);
    assert_eq!(v["file_checksum_ok"], true);
    assert_eq!(v["failed"], 0);
    assert!(v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "ok"));
}

#[test]
fn ls_escapes_control_characters_in_names() {
    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = compressed(dir.path(), "B32_control_chars_in_names.safetensors");
    let o = brevis([OsStr::new("ls"), archive.as_os_str()]);
    assert!(o.status.success());
    let controls: Vec<u8> = o
        .stdout
        .iter()
        .copied()
        .filter(|&b| (b < 0x20 && b != b'\n') || b == 0x7f)
        .collect();
    assert!(
        controls.is_empty(),
        "raw control bytes reached stdout: {controls:?}"
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(!text.contains('\u{9b}'), "raw C1 control reached stdout");
    assert!(text.contains("\\x1b"), "ESC shown escaped:\n{text}");
    // Every row has the same columns before the name.
    let lines: Vec<&str> = text.lines().collect();
    let name_col = lines[0].find("NAME").unwrap();
    for l in &lines[1..lines.len() - 1] {
        assert!(l.len() >= name_col && l.is_char_boundary(name_col), "{l:?}");
    }
}

/// A record whose tensor name was damaged after writing (a byte of it changed) is still
/// listed, but `ls` warns, naming the record and what the stored header says, and exits
/// 3; `--json` says so in `records_match_header` and `disagreements`. A sound archive
/// lists with exit 0 and `records_match_header: true`.
#[test]
fn ls_of_a_damaged_tensor_name_warns_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    // Records of format version 1 repeat their tensor's name (version 2 keeps it in the
    // header record only): a committed version-1 archive.
    let archive = v1_b20(dir.path());
    let o = brevis([OsStr::new("ls"), OsStr::new("--json"), archive.as_os_str()]);
    let v = json_of(&o);
    assert_eq!(
        (&v["records_match_header"], &v["ok"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(v["disagreements"], serde_json::json!([]));
    let name = v["tensors"][0]["name"].as_str().unwrap().to_string();

    // Change the first byte of the first record's copy of that name.
    // The stored header comes first, the tensor records after it: the last copy.
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = bytes
        .windows(name.len())
        .rposition(|w| w == name.as_bytes())
        .expect("the name is in the archive");
    bytes[at] ^= 0x20;
    let damaged = dir.path().join("damaged.brv");
    std::fs::write(&damaged, &bytes).unwrap();
    let mut changed = name.clone().into_bytes();
    changed[0] ^= 0x20;
    let changed = String::from_utf8(changed).unwrap();

    let warning = format!(
        "warning: {}: record of tensor {changed:?}: the header names it {name:?}; the \
         archive is damaged (`brevis verify` checks every record)\n",
        damaged.display()
    );
    let o = brevis([OsStr::new("ls"), damaged.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&changed));
    assert_eq!(String::from_utf8_lossy(&o.stderr), warning);
    // `show` of any tensor of the damaged archive says the same, exit 3.
    let o = brevis([
        OsStr::new("show"),
        damaged.as_os_str(),
        OsStr::new(&changed),
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&changed));
    assert_eq!(String::from_utf8_lossy(&o.stderr), warning);
    // `show` of the name the header gives: the same warning and an error that points to
    // it, exit 3 (it said only "no tensor named", exit 1).
    let o = brevis([OsStr::new("show"), damaged.as_os_str(), OsStr::new(&name)]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&warning)
            && err.contains(&format!(
                "error: {}: no tensor named {name:?} (",
                damaged.display()
            ))
            && err.ends_with(
                "; the archive's records disagree with the header it stores (see the \
                 warnings above)\n"
            ),
        "{err}"
    );
    let o = brevis([OsStr::new("ls"), OsStr::new("--json"), damaged.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["records_match_header"], &v["ok"]),
        (&json!(false), &json!(false))
    );
    assert_eq!(
        v["disagreements"],
        serde_json::json!([format!(
            "record of tensor {changed:?}: the header names it {name:?}"
        )])
    );
    // The same byte changed so that the name is not UTF-8: the record cannot be read,
    // which is damage found in an archive that opened, exit 3 too (it was 1).
    let mut unreadable = std::fs::read(&archive).unwrap();
    unreadable[at] ^= 0x80;
    let unreadable_path = dir.path().join("unreadable.brv");
    std::fs::write(&unreadable_path, &unreadable).unwrap();
    for cmd in [vec!["verify"], vec!["ls"], vec!["show", &name]] {
        let mut args: Vec<&OsStr> = cmd.iter().map(OsStr::new).collect();
        args.insert(1, unreadable_path.as_os_str());
        let o = brevis(args);
        assert_eq!(o.status.code(), Some(3), "{cmd:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("damaged archive: record 1 at byte ")
                && err.contains(": tensor name is not UTF-8"),
            "{cmd:?}: {err}"
        );
    }
    // `verify` names the record and says the data itself decodes right (it printed
    // "FAILED: 0 of N regions differ"), exit 3.
    let o = brevis([OsStr::new("verify"), damaged.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let d = damaged.display();
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with(&format!("{d}: FAILED: the archive's records")));
    assert_eq!(
        lines[1],
        format!("{d}: FAILED: record of tensor {changed:?}: the header names it {name:?}")
    );
    assert!(
        lines[2].starts_with(&format!("{d}: the data decodes right: all ")),
        "{text}"
    );
    // `--json` names it too (it said only `"records_intact": false`).
    let o = brevis([
        OsStr::new("verify"),
        OsStr::new("--json"),
        damaged.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["ok"], &v["records_intact"], &v["failed"]),
        (&json!(false), &json!(false), &json!(0))
    );
    assert_eq!(
        v["disagreements"],
        json!([format!(
            "record of tensor {changed:?}: the header names it {name:?}"
        )])
    );
}

/// A tensor that grows by a few bytes (every 16-bit value once: nothing to gain) shows
/// its change, not as "-0.0%" (found by a tester): since issue 41, as the bytes its
/// record adds (`+N B`), as for a scalar.
#[test]
fn ls_shows_a_small_growth_with_two_decimals() {
    let dir = tempfile::tempdir().unwrap();
    let n = 65_536usize;
    // Every value once, ordered by a hash of it: no pattern the search finds.
    let mix = |x: u64| {
        let z = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut values: Vec<u16> = (0..=u16::MAX).collect();
    values.sort_by_key(|&v| mix(u64::from(v)));
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let header = format!(
        r#"{{"perm":{{"dtype":"U16","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        data.len()
    );
    let file = safetensors_bytes(header.as_bytes(), &data);
    let input = dir.path().join("perm.safetensors");
    std::fs::write(&input, &file).unwrap();
    let archive = dir.path().join("perm.brv");
    let o = brevis([
        OsStr::new("compress"),
        input.as_os_str(),
        OsStr::new("-o"),
        archive.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = brevis([OsStr::new("ls"), archive.as_os_str()]);
    let text = String::from_utf8(o.stdout).unwrap();
    let row = text.lines().find(|l| l.contains("perm")).unwrap();
    let l: Value = serde_json::from_slice(
        &brevis([OsStr::new("ls"), archive.as_os_str(), OsStr::new("--json")]).stdout,
    )
    .unwrap();
    let grew = l["tensors"][0]["archive_bytes"].as_u64().unwrap() - 2 * n as u64;
    assert!(grew > 0 && grew < 64, "{grew}");
    assert!(
        row.contains(&format!(" +{grew} B ")) && !row.contains("-0.0%"),
        "{row}"
    );
}

#[test]
fn default_names_and_refusing_to_clobber() {
    let dir = tempfile::tempdir().unwrap();
    let (src, archive) = compressed(dir.path(), "B02_scalars.safetensors");
    assert!(archive.exists(), "x.safetensors -> x.brv");
    let before = std::fs::read(&archive).unwrap();

    // Compressing again refuses to replace the archive.
    let o = brevis([OsStr::new("compress"), src.as_os_str()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: ") && err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&archive).unwrap(), before);

    // Decompressing next to the source refuses to replace the source.
    let o = brevis([OsStr::new("decompress"), archive.as_os_str()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        std::fs::read(&src).unwrap(),
        std::fs::read(case("B02_scalars.safetensors")).unwrap()
    );

    // With --force both work, and the result is the original.
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("--force"),
    ]);
    assert!(o.status.success());
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-f"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(&src).unwrap(),
        std::fs::read(case("B02_scalars.safetensors")).unwrap()
    );

    // Output == input is refused, even with --force.
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        src.as_os_str(),
        OsStr::new("--force"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("output is the input"));
    assert_eq!(
        std::fs::read(&src).unwrap(),
        std::fs::read(case("B02_scalars.safetensors")).unwrap()
    );

    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".brevis-")),
        "{names:?}"
    );
}

#[test]
fn exit_codes_usage_error_and_mismatch() {
    assert_eq!(
        brevis(["compress", "--no-such-flag", "x"]).status.code(),
        Some(2)
    );
    assert_eq!(brevis(["frobnicate"]).status.code(), Some(2));
    // `-o -` is not a file named `-` (a tester found one written): standard output for
    // compress and decompress (tests/unix.rs), a usage error for calibrate.
    let o = brevis(["calibrate", "in", "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("standard output"));
    for cmd in ["compress", "decompress", "calibrate"] {
        // `-o ""` said "cannot rename into place" after the work (found by a tester).
        let o = brevis([cmd, "in", "-o", ""]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("the output path is empty"));
    }
    assert_eq!(
        brevis(["verify", "/no/such/file.brv"]).status.code(),
        Some(1)
    );
    // `-o nope/` names a folder: refused before the work, not at the final rename.
    let dir = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    let nope = format!("{}/nope/", dir.path().display());
    let o = brevis([
        OsStr::new("compress"),
        demo.as_os_str(),
        OsStr::new("-o"),
        OsStr::new(&nope),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("error: {nope}: cannot write: names a folder (it ends with a slash): give the file's name too\n")
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // `-o afile/x.brv` with `afile` a file says which part is not a folder.
    let afile = dir.path().join("afile");
    std::fs::write(&afile, b"x").unwrap();
    let inside = afile.join("x.brv");
    let o = brevis([
        OsStr::new("compress"),
        demo.as_os_str(),
        OsStr::new("-o"),
        inside.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!(
            "cannot create a temporary file in its folder: {} is a file, not a folder",
            afile.display()
        )),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = compressed(dir.path(), "B17_known_le_values.safetensors");
    let o = brevis([
        OsStr::new("show"),
        archive.as_os_str(),
        OsStr::new("no such tensor"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no tensor named"));

    // Damage the last byte of the largest tensor's program: decoding then differs from
    // the stored checksum (or fails), which is a verification mismatch.
    let a = brevis::Archive::open(&archive).unwrap();
    let t = a
        .tensors()
        .iter()
        .max_by_key(|t| t.program_bytes())
        .unwrap();
    let pos = t.program.end - 1;
    drop(a);
    let mut bytes = std::fs::read(&archive).unwrap();
    bytes[pos] ^= 0x01;
    let bad = dir.path().join("bad.brv");
    std::fs::write(&bad, &bytes).unwrap();
    let o = brevis([OsStr::new("verify"), bad.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAILED"));
    let out = dir.path().join("bad.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        bad.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert!(matches!(o.status.code(), Some(1 | 3)), "{:?}", o.status);
    assert!(!out.exists(), "a failed decompression left its output");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

#[test]
fn verify_against_reports_a_different_file() {
    let dir = tempfile::tempdir().unwrap();
    let (src, archive) = compressed(dir.path(), "B24_trailing_bytes.safetensors");
    let o = brevis([
        OsStr::new("verify"),
        archive.as_os_str(),
        OsStr::new("--against"),
        src.as_os_str(),
    ]);
    assert!(o.status.success());
    let mut other = std::fs::read(&src).unwrap();
    *other.last_mut().unwrap() ^= 0xff;
    let other_path = dir.path().join("other.safetensors");
    std::fs::write(&other_path, &other).unwrap();
    let o = brevis([
        OsStr::new("verify"),
        archive.as_os_str(),
        OsStr::new("--against"),
        other_path.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["against"]["identical"], false);
    assert_eq!(v["against"]["first_difference"], other.len() as u64 - 1);
}

/// `bench --jobs 1` prints one compress and one decompress column (it printed each
/// twice, as "1 thread" and "all 1 threads"); `--jobs 2` prints both.
#[test]
fn bench_prints_the_all_threads_columns_only_for_more_than_one() {
    let file = case("B20_mixed_dtypes.safetensors");
    let heading = |jobs: &str| {
        let o = brevis([
            OsStr::new("bench"),
            file.as_os_str(),
            OsStr::new("--jobs"),
            OsStr::new(jobs),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        let head: Vec<String> = out
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        head
    };
    let cols = |h: &[String]| {
        h.iter()
            .filter(|c| c.contains("MB/s"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(cols(&heading("1")), ["MB/s(1)", "MB/s(1)"]);
    assert_eq!(
        cols(&heading("2")),
        ["MB/s(1)", "MB/s(2)", "MB/s(1)", "MB/s(2)"]
    );
}

#[test]
fn bench_json_reports_every_file() {
    let v = json_of(&brevis([
        OsStr::new("bench"),
        case("B20_mixed_dtypes.safetensors").as_os_str(),
        case("B22_float_specials.safetensors").as_os_str(),
        OsStr::new("--jobs"),
        OsStr::new("2"),
        OsStr::new("--json"),
    ]));
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    let kernel = v["rans8_kernel"].as_str().unwrap();
    assert!(
        [
            "avx512 gathers",
            "avx2 gathers",
            "avx2 scalar loads",
            "scalar"
        ]
        .contains(&kernel),
        "{kernel}"
    );
    for f in files {
        for key in [
            "original_bytes",
            "archive_bytes",
            "compress_mb_s_1",
            "compress_mb_s_all",
            "decompress_mb_s_1",
            "decompress_mb_s_all",
        ] {
            assert!(f[key].is_number(), "bench lacks {key}: {f}");
        }
    }
}

/// `bench --json` names the `rans8` decoding kernel its runs used, and the environment
/// picks it: `BREVIS_NO_SIMD` the scalar decoder, `BREVIS_RANS8_KERNEL` one of the two
/// AVX2 kernels (on a processor with AVX2 and without AVX-512, whose kernel comes first).
#[test]
fn bench_json_names_the_rans8_kernel_the_environment_picks() {
    let kernel = |env: &[(&str, &str)]| {
        let v = json_of(&brevis_env(
            [
                OsStr::new("bench"),
                case("B22_float_specials.safetensors").as_os_str(),
                OsStr::new("--runs"),
                OsStr::new("1"),
                OsStr::new("--json"),
            ],
            env,
        ));
        v["rans8_kernel"].as_str().unwrap().to_string()
    };
    assert_eq!(kernel(&[("BREVIS_NO_SIMD", "1")]), "scalar");
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && !is_x86_feature_detected!("avx512f") {
        let gather = kernel(&[("BREVIS_RANS8_KERNEL", "gather")]);
        assert_eq!(gather, "avx2 gathers");
        let lookup = kernel(&[("BREVIS_RANS8_KERNEL", "lookup")]);
        assert_eq!(lookup, "avx2 scalar loads");
    }
}

#[test]
fn every_command_has_help() {
    for cmd in ["compress", "decompress", "verify", "ls", "show", "bench"] {
        let o = brevis([cmd, "--help"]);
        assert!(o.status.success(), "{cmd} --help");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("Usage:") && text.len() > 200,
            "{cmd} --help:\n{text}"
        );
    }
    let o = brevis(["--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("Exit codes"));
}

/// Asserts that `o` failed with exit `code` and that its stderr holds every fragment.
fn fails_with(o: &Output, code: i32, fragments: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for f in fragments {
        assert!(err.contains(f), "stderr lacks {f:?}:\n{err}");
    }
}

/// Compresses the checkpoint folder `ckpt` into the folder archive `archive`; panics if
/// that fails.
fn compressed_folder(ckpt: &Path, archive: &Path) -> PathBuf {
    let o = brevis([
        OsStr::new("compress"),
        ckpt.as_os_str(),
        OsStr::new("-o"),
        archive.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    archive.to_path_buf()
}

/// A copy of the two-shard checkpoint case at `dir/ckpt`.
fn shard_folder(dir: &Path) -> PathBuf {
    let to = dir.join("ckpt");
    std::fs::create_dir(&to).unwrap();
    for e in std::fs::read_dir(case("B28_shards_ok")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

/// `compress` and `calibrate` on a named pipe blocked in `open` until killed, and so did
/// `decompress`, `verify`, `ls` and `show`, while a device read as an empty archive (found
/// by testers): an input that is not a regular file is refused before it is opened.
#[test]
fn a_named_pipe_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.safetensors");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("mkfifo unavailable; skipped");
        return;
    }
    let out = dir.path().join("out.brv");
    for args in [
        vec![
            OsStr::new("compress"),
            fifo.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
        vec![
            OsStr::new("calibrate"),
            fifo.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
        vec![
            OsStr::new("decompress"),
            fifo.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ],
        vec![OsStr::new("verify"), fifo.as_os_str()],
        vec![OsStr::new("ls"), fifo.as_os_str()],
        vec![OsStr::new("show"), fifo.as_os_str(), OsStr::new("x")],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_brevis"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if start.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(1),
            "{args:?} hung or did not fail"
        );
        let text = String::from_utf8_lossy(&o.stderr);
        assert!(text.contains("is not a regular file"), "{text}");
        assert!(text.contains("pipe.safetensors"), "{text}");
        assert!(!out.exists());
    }
    if Path::new("/dev/zero").exists() {
        let o = brevis(["ls", "/dev/zero"]);
        fails_with(&o, 1, &["/dev/zero", "is not a regular file"]);
    }
}

/// `calibrate DIR` said "Is a directory" and `calibrate` on a file without tensors "0
/// tensors ()": a checkpoint folder (or its index) is calibrated on its first shard, as
/// the message says, and a prior learned from nothing says it is uniform.
#[test]
fn calibrate_takes_a_folder_on_its_first_shard() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let first = ckpt.join("model-00001-of-00002.safetensors");
    let index = ckpt.join("model.safetensors.index.json");
    let calibrate = |input: &Path, out: &Path| {
        brevis([
            OsStr::new("calibrate"),
            input.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ])
    };
    let mut priors = Vec::new();
    for (k, input) in [&ckpt, &index, &first].into_iter().enumerate() {
        let out = dir.path().join(format!("p{k}.json"));
        let o = calibrate(input, &out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stderr).to_string();
        let on = format!("calibrated on {}: ", first.display());
        assert!(text.contains(&on), "{text}");
        let p: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        priors.push(p["counts"].clone());
    }
    assert!(priors[2].as_object().is_some_and(|c| !c.is_empty()));
    assert_eq!(priors[0], priors[2]);
    assert_eq!(priors[1], priors[2]);
    let out = dir.path().join("empty.json");
    let o = calibrate(&case("B01_only_empty.safetensors"), &out);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(
        text.contains("no tensor of two or more words, so uniform"),
        "{text}"
    );
    // Never into the folder it reads: not over a shard or the index, even with
    // --force, and not beside them (as compress refuses its archive there).
    let shard_bytes = std::fs::read(&first).unwrap();
    for (input, out) in [
        (&ckpt, first.clone()),
        (&index, first.clone()),
        (&ckpt, index.clone()),
        (&index, ckpt.join("prior.json")),
    ] {
        let o = brevis([
            OsStr::new("calibrate"),
            input.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
            OsStr::new("--force"),
        ]);
        fails_with(&o, 1, &["cannot write: is inside the input folder"]);
    }
    assert_eq!(std::fs::read(&first).unwrap(), shard_bytes);
    assert!(!ckpt.join("prior.json").exists());
    let none = dir.path().join("none");
    std::fs::create_dir(&none).unwrap();
    fails_with(
        &calibrate(&none, &dir.path().join("none.json")),
        1,
        &["none: cannot calibrate: the folder holds no .safetensors file"],
    );
}

/// `bench DIR` said "Is a directory": a checkpoint folder (or its index) is measured shard
/// by shard, as `compress DIR` compresses it; a folder without shards is a clear error.
#[test]
fn bench_measures_every_shard_of_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let index = ckpt.join("model.safetensors.index.json");
    for input in [&ckpt, &index] {
        let v = json_of(&brevis([
            OsStr::new("bench"),
            input.as_os_str(),
            OsStr::new("--budget"),
            OsStr::new("0"),
            OsStr::new("--json"),
        ]));
        let files: Vec<&str> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file"].as_str().unwrap())
            .collect();
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files[0].ends_with("model-00001-of-00002.safetensors"));
        assert!(files[1].ends_with("model-00002-of-00002.safetensors"));
    }
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = brevis([OsStr::new("bench"), empty.as_os_str()]);
    fails_with(
        &o,
        1,
        &["empty: cannot bench: the folder holds no .safetensors file"],
    );
}

/// `compress x.brv` reported a header length of 91574445101634 bytes: an archive given
/// where a `.safetensors` file is expected is named as one, with the command it needs.
#[test]
fn an_archive_given_to_compress_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = compressed(dir.path(), "B02_scalars.safetensors");
    let out = dir.path().join("again.brv");
    let o = brevis([
        OsStr::new("compress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    let message = format!(
        "error: {} is a Brevis archive, not a .safetensors file (did you mean `brevis decompress`?)",
        archive.display()
    );
    fails_with(&o, 1, &[&message]);
    assert!(!out.exists());
    fails_with(
        &brevis([OsStr::new("bench"), archive.as_os_str()]),
        1,
        &[&message],
    );
    let prior = dir.path().join("prior.json");
    let o = brevis([
        OsStr::new("calibrate"),
        archive.as_os_str(),
        OsStr::new("-o"),
        prior.as_os_str(),
    ]);
    fails_with(&o, 1, &[&message]);
    assert!(!prior.exists());
}

/// `ls model.safetensors.index.json` said "wrong magic bytes", `ls DIR` "is a directory":
/// the commands that take an archive say what the input is and that `compress` takes it.
#[test]
fn archive_commands_say_what_a_source_is() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let shard = ckpt.join("model-00001-of-00002.safetensors");
    let index = ckpt.join("model.safetensors.index.json");
    let inputs = [
        (&shard, "is a .safetensors file"),
        (&index, "is a safetensors shard index"),
        (&ckpt, "is a folder without brevis-folder.json"),
    ];
    for (input, what) in inputs {
        let message = format!(
            "error: {} {what}, not a Brevis archive (did you mean `brevis compress`?)",
            input.display()
        );
        for args in [
            vec!["verify"],
            vec!["ls"],
            vec!["show", "--", "a"],
            vec!["decompress"],
        ] {
            let mut argv: Vec<&OsStr> = vec![OsStr::new(args[0]), input.as_os_str()];
            argv.extend(args[1..].iter().map(OsStr::new));
            fails_with(&brevis(&argv), 1, &[&message]);
        }
    }
    // Nothing was restored next to the inputs.
    let mut names: Vec<String> = std::fs::read_dir(&ckpt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
            "model.safetensors.index.json"
        ]
    );
}

/// `--jobs 100000` was silently clamped to 256: it is a usage error naming the range.
#[test]
fn jobs_beyond_the_limit_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (src, archive) = compressed(dir.path(), "B02_scalars.safetensors");
    let runs = [
        vec![OsStr::new("compress"), src.as_os_str()],
        vec![OsStr::new("decompress"), archive.as_os_str()],
        vec![OsStr::new("verify"), archive.as_os_str()],
        vec![OsStr::new("bench"), src.as_os_str()],
    ];
    for mut argv in runs {
        argv.extend([OsStr::new("--jobs"), OsStr::new("100000")]);
        fails_with(
            &brevis(&argv),
            2,
            &["invalid value '100000' for '--jobs <N>': 100000 is not in 0..=256"],
        );
    }
    let o = brevis([
        OsStr::new("verify"),
        archive.as_os_str(),
        OsStr::new("--jobs"),
        OsStr::new("256"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `bench --report` without `--json` printed the table without the report: the report
/// exists only in JSON, so the flag requires `--json` (a usage error without it).
#[test]
fn bench_report_requires_json() {
    let src = case("B02_scalars.safetensors");
    let o = brevis([OsStr::new("bench"), src.as_os_str(), OsStr::new("--report")]);
    fails_with(
        &o,
        2,
        &[
            "the following required arguments were not provided",
            "--json",
        ],
    );
    let v = json_of(&brevis([
        OsStr::new("bench"),
        src.as_os_str(),
        OsStr::new("--report"),
        OsStr::new("--json"),
    ]));
    assert!(v["files"][0]["search"]["tensors"].is_array(), "{v}");
}

/// Inputs of the wrong kind for `compress` and `bench`, found by a tester: a folder
/// archive (or its manifest) to `compress` blamed missing shards; a JSON file, a header
/// length; a folder without shards was archived as an empty checkpoint; `bench` on a folder
/// whose index names a missing shard measured the rest; `bench --ablation --json` printed
/// markdown.
#[test]
fn compress_and_bench_name_wrong_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let archive = compressed_folder(&ckpt, &dir.path().join("ckpt.brv"));
    let manifest = archive.join("brevis-folder.json");
    for input in [&archive, &manifest] {
        let o = brevis([OsStr::new("compress"), input.as_os_str()]);
        fails_with(&o, 1, &["is a Brevis folder archive", "brevis decompress"]);
    }
    let index = ckpt.join("model.safetensors.index.json");
    let empty = dir.path().join("configs");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("config.json"), b"{}").unwrap();
    let o = brevis([OsStr::new("compress"), empty.as_os_str()]);
    fails_with(&o, 1, &["configs", "holds no .safetensors file"]);
    assert!(!dir.path().join("configs.brv").exists());
    let missing = dir.path().join("missing");
    std::fs::create_dir(&missing).unwrap();
    for e in std::fs::read_dir(case("B28_shards_missing")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), missing.join(e.file_name())).unwrap();
    }
    let o = brevis([OsStr::new("bench"), missing.as_os_str()]);
    fails_with(&o, 1, &["model-00002-of-00002.safetensors"]);
    for extra in ["--json", "--budget=3", "--uniform"] {
        let o = brevis([
            OsStr::new("bench"),
            OsStr::new("--ablation"),
            OsStr::new(extra),
            index.as_os_str(),
        ]);
        fails_with(&o, 2, &["cannot be used with"]);
    }
}

/// A copied file whose length disagrees with the folder manifest is reported as a length
/// mismatch (found by a tester: the message showed two equal checksums), and a missing
/// copied file is named where it is stored, not in the temporary output folder.
#[test]
fn folder_copy_damage_names_the_length_and_the_stored_file() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let archive = compressed_folder(&ckpt, &dir.path().join("ckpt.brv"));
    let manifest = archive.join("brevis-folder.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    // As a manifest from before `files_xxh3`, which would refuse any changed entry at
    // once (tests/folder.rs): the length checks below are what such a manifest gets.
    m.as_object_mut().unwrap().remove("files_xxh3").unwrap();
    let index = "model.safetensors.index.json";
    let entry = m["files"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|f| f["path"] == index)
        .unwrap();
    let bytes = entry["bytes"].as_u64().unwrap();
    entry["bytes"] = (bytes + 1).into();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let out = dir.path().join("restored");
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    // The file is intact (it has the manifest's checksum): the length field is what is
    // damaged, so the manifest is named (exit 1), not a mismatch of two equal checksums.
    let says = format!(
        "it says {} bytes for \"{index}\", whose stored file",
        bytes + 1
    );
    fails_with(
        &o,
        1,
        &["brevis-folder.json: damaged folder manifest", &says],
    );
    assert!(!out.exists());
    entry_restore(&manifest, &mut m, index, bytes);
    // A stored file one byte longer than the manifest says: a mismatch (exit 3) giving
    // both lengths.
    let mut text = std::fs::read(archive.join(index)).unwrap();
    text.push(b' ');
    std::fs::write(archive.join(index), &text).unwrap();
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    let says = format!("({} bytes, the manifest says {bytes})", bytes + 1);
    fails_with(&o, 3, &[index, &says]);
    assert!(!out.exists());
    std::fs::remove_file(archive.join(index)).unwrap();
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    let stored = archive.join(index);
    fails_with(&o, 1, &[&format!("{}: cannot read", stored.display())]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains(".brevis-"));
}

/// A file inside a folder archive that its manifest does not name is warned about by
/// `verify` and `ls` (and listed as `unlisted` in their JSON) and by `decompress`, which
/// does not restore it; all still succeed (a tester saw it ignored in silence).
#[test]
fn files_the_manifest_does_not_name_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = shard_folder(dir.path());
    let archive = compressed_folder(&ckpt, &dir.path().join("ckpt.brv"));
    std::fs::create_dir(archive.join("extra")).unwrap();
    std::fs::write(archive.join("extra/notes.txt"), b"mine").unwrap();
    let warning = format!(
        "warning: {}: not named by the folder's manifest, so not restored",
        archive.join("extra/notes.txt").display()
    );
    let o = brevis([
        OsStr::new("verify"),
        OsStr::new("--json"),
        archive.as_os_str(),
    ]);
    fails_with(&o, 0, &[&warning]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["ok"], &v["unlisted"]),
        (&json!(true), &json!(["extra/notes.txt"]))
    );
    let o = brevis([OsStr::new("ls"), OsStr::new("--json"), archive.as_os_str()]);
    fails_with(&o, 0, &[&warning]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unlisted"], json!(["extra/notes.txt"]));
    let out = dir.path().join("restored");
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    fails_with(&o, 0, &[&warning]);
    assert!(!out.join("extra").exists());
    // Without it, no warning and an empty list.
    std::fs::remove_dir_all(archive.join("extra")).unwrap();
    let o = brevis([
        OsStr::new("verify"),
        OsStr::new("--json"),
        archive.as_os_str(),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unlisted"], json!([]));
}

fn entry_restore(manifest: &Path, m: &mut serde_json::Value, path: &str, bytes: u64) {
    for f in m["files"].as_array_mut().unwrap() {
        if f["path"] == path {
            f["bytes"] = bytes.into();
        }
    }
    std::fs::write(manifest, serde_json::to_vec(&*m).unwrap()).unwrap();
}

/// `verify` of a folder archive says what is wrong in a damaged shard, as `verify` of the
/// shard alone does (found by a tester: it printed only `FAILED: SHARD`).
#[test]
fn folder_verify_names_the_damaged_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    std::fs::copy(demo, ckpt.join("model.safetensors")).unwrap();
    let archive = compressed_folder(&ckpt, &dir.path().join("ckpt.brv"));
    // One bit in the middle of the shard lands in a tensor's program.
    let shard = archive.join("model.brv");
    let mut b = std::fs::read(&shard).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x10;
    std::fs::write(&shard, b).unwrap();
    let o = brevis([OsStr::new("verify"), archive.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let report = String::from_utf8_lossy(&o.stdout);
    let want = "FAILED: model.safetensors: tensor \"encoder.layer.0.intermediate.dense.weight\": \
                cannot decode";
    assert!(report.contains(want), "{report}");
    let o = brevis([
        OsStr::new("verify"),
        archive.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failures = v["files"][0]["failures"].as_array().unwrap();
    assert!(failures[0]
        .as_str()
        .unwrap()
        .contains("encoder.layer.0.intermediate.dense.weight"));
}

/// `show` takes a name as `ls` prints it (escaped) as well as the raw name; in a
/// compressed folder it says which shard archive holds the tensor.
#[test]
fn show_takes_names_as_ls_prints_them_and_names_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"a\nb":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"c\\d":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#;
    let mut header = header.as_bytes().to_vec();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let bytes = safetensors_bytes(&header, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let folder = dir.path().join("ckpt");
    std::fs::create_dir(&folder).unwrap();
    let src = folder.join("model.safetensors");
    std::fs::write(&src, &bytes).unwrap();
    let brv = dir.path().join("m.brv");
    let packed = dir.path().join("ckpt.brv");
    for (from, to) in [(&src, &brv), (&folder, &packed)] {
        let o = brevis([
            OsStr::new("compress"),
            from.as_os_str(),
            OsStr::new("-o"),
            to.as_os_str(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let ls = String::from_utf8(brevis([OsStr::new("ls"), brv.as_os_str()]).stdout).unwrap();
    assert!(ls.contains(" a\\nb\n") && ls.contains(" c\\\\d\n"), "{ls}");
    let first_line = |archive: &Path, name: &str| {
        let o = brevis([OsStr::new("show"), archive.as_os_str(), OsStr::new(name)]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    for name in ["a\nb", "a\\nb"] {
        assert!(
            first_line(&brv, name).starts_with("tensor a\\nb  U8 [4]"),
            "{name}"
        );
    }
    for name in ["c\\d", "c\\\\d"] {
        assert!(
            first_line(&brv, name).starts_with("tensor c\\\\d  U8 [4]"),
            "{name}"
        );
    }
    let shard = packed.join("model.brv");
    assert!(
        first_line(&packed, "a\\nb")
            .starts_with(&format!("tensor a\\nb (in {})  U8 [4]", shard.display())),
        "{}",
        first_line(&packed, "a\\nb")
    );
}

/// A command asked for `--json` prints a JSON object on stdout when it fails too (it
/// printed nothing: a script had nothing to parse), with the message and the exit code;
/// the message still goes to stderr. Checked on an error (exit 1) and on damage found
/// while opening (exit 3).
#[test]
fn json_commands_print_an_object_when_they_fail() {
    for cmd in ["verify", "ls", "decompress"] {
        let o = brevis([cmd, "--json", "/no/such/file.brv"]);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        let v: Value = serde_json::from_slice(&o.stdout).expect(cmd);
        let msg = "/no/such/file.brv: cannot open: No such file or directory (os error 2)";
        assert_eq!(
            v,
            json!({"ok": false, "error": msg, "kind": "io", "exit_code": 1}),
            "{cmd}"
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!("error: {msg}\n")
        );
    }
    let o = brevis(["show", "--json", "/no/such/file.brv", "w"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&v["exit_code"], &v["kind"]), (&json!(1), &json!("io")));
    // Usage errors too (a tester saw nothing on stdout), but not a request for help.
    let o = brevis(["verify", "--json", "--jobs", "999", "x.brv"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let msg = "invalid value '999' for '--jobs <N>': 999 is not in 0..=256";
    assert_eq!(
        v,
        json!({"ok": false, "error": msg, "kind": "usage", "exit_code": 2})
    );
    let o = brevis(["ls", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["error"],
        "the following required arguments were not provided: <INPUT>"
    );
    let o = brevis(["ls", "--json", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(serde_json::from_slice::<Value>(&o.stdout).is_err());

    // A tensor name that is not UTF-8: damage found in an archive that opened, exit 3
    // (in a record of format version 1, which repeats the name).
    let dir = tempfile::tempdir().unwrap();
    let archive = damaged_v1_b20(dir.path(), |a, bytes| {
        let name = a.tensors()[0].name.as_bytes();
        let at = bytes.windows(name.len()).rposition(|w| w == name).unwrap();
        bytes[at] ^= 0x80;
    });
    let o = brevis([
        OsStr::new("verify"),
        OsStr::new("--json"),
        archive.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["ok"], &v["exit_code"], &v["kind"]),
        (&json!(false), &json!(3), &json!("damaged_record"))
    );
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .ends_with(": tensor name is not UTF-8"),
        "{v}"
    );
}

/// `ls` of an archive whose stored header checksum is damaged names the archive once in
/// its warning (it said `X: the stored header cannot be checked: X: header: ...`).
#[test]
fn a_header_checksum_warning_names_the_archive_once() {
    let dir = tempfile::tempdir().unwrap();
    // Inside the header record's stored checksum (the record starts at byte 16), in an
    // archive of format version 1, whose header record may be damaged without losing
    // the tensors (their records repeat the header's entries).
    let archive = damaged_v1_b20(dir.path(), |_, bytes| bytes[19] ^= 0xFF);
    let o = brevis([OsStr::new("ls"), archive.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    let name = archive.display().to_string();
    assert!(
        err.starts_with(&format!(
            "warning: {name}: the stored header cannot be checked: header: checksum mismatch: stored "
        )) && err.matches(&name).count() == 1,
        "{err}"
    );
}

/// A copy under `dir` of the committed format-version-1 archive of `B20_mixed_dtypes`.
fn v1_b20(dir: &Path) -> PathBuf {
    let archive = dir.join("B20_mixed_dtypes.brv");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1/B20_mixed_dtypes.brv"),
        &archive,
    )
    .unwrap();
    archive
}

/// [`v1_b20`] with its bytes changed by `damage` (given the archive, to find its
/// records): the damaged archive's path.
fn damaged_v1_b20(dir: &Path, damage: impl FnOnce(&brevis::Archive, &mut Vec<u8>)) -> PathBuf {
    let archive = v1_b20(dir);
    let mut bytes = std::fs::read(&archive).unwrap();
    damage(&brevis::Archive::open(&archive).unwrap(), &mut bytes);
    std::fs::write(&archive, &bytes).unwrap();
    archive
}

/// `B20_mixed_dtypes` compressed under `dir`, then its bytes changed by `damage` (given
/// the archive as written, to find its records): the damaged archive's path.
fn damaged_b20(dir: &Path, damage: impl FnOnce(&brevis::Archive, &mut Vec<u8>)) -> PathBuf {
    let (_, archive) = compressed(dir, "B20_mixed_dtypes.safetensors");
    let mut bytes = std::fs::read(&archive).unwrap();
    damage(&brevis::Archive::open(&archive).unwrap(), &mut bytes);
    std::fs::write(&archive, &bytes).unwrap();
    archive
}

/// A damaged stored checksum of one tensor, with the data intact: `verify` says the
/// stored checksums are damaged, not the data (it said "1 of 10 regions differ").
#[test]
fn verify_blames_a_damaged_stored_checksum_not_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let archive = damaged_b20(dir.path(), |a, bytes| {
        let t = &a.tensors()[0];
        let stored = t.checksum.to_le_bytes();
        let at = t.record.start
            + bytes[t.record.clone()]
                .windows(8)
                .position(|w| w == stored)
                .expect("the record holds its checksum");
        bytes[at] ^= 0x01;
    });
    let o = brevis([OsStr::new("verify"), archive.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines().last().unwrap().ends_with(
            "FAILED: 1 of 10 regions do not match their stored checksums, but the whole \
             file (1098 bytes) matches its own: the stored checksums are damaged, not the data"
        ),
        "{text}"
    );
}

/// `ls` of an archive whose tensor program does not start with an operator's tag lists
/// its root as `?`, warns naming the tensor and exits 3 (it exited 0 silently).
#[test]
fn ls_warns_about_a_program_with_no_operator() {
    let dir = tempfile::tempdir().unwrap();
    let mut name = String::new();
    let archive = damaged_b20(dir.path(), |a, bytes| {
        name = a.tensors()[0].name.clone();
        bytes[a.tensors()[0].program.start] = 0xFF;
    });
    let o = brevis([OsStr::new("ls"), archive.as_os_str()]);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "warning: {}: tensor {name:?}: its program does not start with an operator; \
             the archive is damaged",
            archive.display()
        )),
        "{err}"
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.ends_with(&name)).unwrap();
    assert!(row.contains(" ? "), "{row}");
}

/// A file name holding an escape sequence, a line break and a bell is printed escaped in
/// messages (as tensor names are), so it cannot recolour the terminal or fake a line.
#[test]
fn paths_in_messages_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let name = "ev\u{1b}[31mil\nname\u{7}.safetensors";
    let src = dir.path().join(name);
    let whole = std::fs::read(case("B02_scalars.safetensors")).unwrap();
    std::fs::write(&src, &whole[..20]).unwrap();
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert!(
        !stderr.contains(['\u{1b}', '\u{7}']) && stderr.trim_end().lines().count() == 1,
        "{stderr:?}"
    );
    assert!(
        stderr.contains("ev\\x1b[31mil\\nname\\x07.safetensors: "),
        "{stderr:?}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("ev\\x1b[31mil\\nname\\x07"),
        "{v}"
    );
    assert!(!dir.path().join("ev\u{1b}[31mil\nname\u{7}.brv").exists());
}

/// A run stopped by SIGTERM with `--json` still gives a script its failure object on
/// stdout: kind `interrupted`, exit code 128 + 15.
#[test]
fn an_interrupted_json_run_says_so_on_stdout() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/minilm-l6-v2-bf16.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.brv");
    let child = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args([
            OsStr::new("compress"),
            src.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
        ])
        .args(["--budget", "5000", "--jobs", "1", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the handler to be in place, far shorter than the job.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(v["ok"], false);
    assert_eq!(v["kind"], "interrupted");
    assert_eq!(v["exit_code"], 143);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "interrupted by signal 15; 1 temporary file or folder removed, no output written"
        ),
        "{msg}"
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// What a tester found in the JSON and the order of checks: a temporary left by a killed
/// run is in the report's `warnings`; a prior that is not text is `invalid_prior`; a
/// missing input is reported as missing even where its archive's name exists; a report
/// that cannot be printed says the archive was written.
#[test]
fn json_warnings_prior_kinds_input_first_and_unprintable_reports() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.safetensors");
    std::fs::copy(case("B02_scalars.safetensors"), &src).unwrap();
    // A process id that no longer runs.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let stale = dir.path().join(format!(".brevis-{pid}-AbC123.tmp"));
    std::fs::write(&stale, b"left").unwrap();
    let out = dir.path().join("s.brv");
    let v = json_of(&brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]));
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains(&format!(
            ".brevis-{pid}-AbC123.tmp: a temporary file left by brevis process {pid}"
        ))),
        "{warnings:?}"
    );
    assert!(stale.exists(), "nothing removes it");

    let v = compress_with_prior_fails(&src, &dir.path().join("p.brv"), &out);
    assert_eq!(v["kind"], "invalid_prior", "{v}");

    std::fs::write(dir.path().join("nothere.brv"), b"").unwrap();
    let v = json_failure([
        OsStr::new("compress"),
        dir.path().join("nothere.safetensors").as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(v["kind"], "io", "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("nothere.safetensors: cannot open"),
        "{v}"
    );

    let full = std::fs::File::create("/dev/full");
    if let Ok(full) = full {
        let o = Command::new(env!("CARGO_BIN_EXE_brevis"))
            .args([OsStr::new("compress"), src.as_os_str(), OsStr::new("-o")])
            .arg(dir.path().join("f.brv"))
            .arg("--json")
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("f.brv was written, but its report could not be: stdout"),
            "{stderr}"
        );
        assert!(dir.path().join("f.brv").exists());
    }
}

/// With stderr full, a job still reports on stdout and exits with its own code (writing
/// a warning or the error line panicked: exit 101, `--json` printed nothing).
#[test]
fn a_full_stderr_does_not_stop_the_report() {
    let Ok(full) = std::fs::File::options().write(true).open("/dev/full") else {
        eprintln!("SKIPPED: no /dev/full");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.brv");
    // B07 has a gap: a warning is printed before the report.
    let o = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args([
            OsStr::new("compress"),
            case("B07_gap_between.safetensors").as_os_str(),
        ])
        .args([OsStr::new("-o"), out.as_os_str(), OsStr::new("--json")])
        .stderr(full.try_clone().unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert!(!v["warnings"].as_array().unwrap().is_empty());
    let o = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(["compress", "/nonexistent.safetensors", "--json"])
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "io");
}

/// A `--prior` that is a device or a named pipe is refused before it is opened (it was
/// read without end from /dev/zero, and waited forever on a FIFO).
#[test]
fn a_prior_must_be_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("prior.json");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let mut priors = vec![PathBuf::from("/dev/zero")];
    if made.is_ok_and(|s| s.success()) {
        priors.push(fifo);
    }
    for prior in priors {
        let src = case("B02_scalars.safetensors");
        let v = compress_with_prior_fails(&src, &dir.path().join("p.brv"), &prior);
        assert_eq!(v["kind"], "io", "{v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .ends_with("cannot read: is not a regular file (a pipe, socket or device)"),
            "{v}"
        );
    }
}

/// JSON reports escape the C1 controls (U+0080-U+009F) of names: valid JSON raw, but a
/// terminal may take U+009B for the start of an escape sequence.
#[test]
fn json_escapes_c1_controls_in_names() {
    let dir = tempfile::tempdir().unwrap();
    let header = "{\"a\u{9b}2J\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
    let bytes = safetensors_bytes(header.as_bytes(), &[1, 2, 3, 4]);
    let src = dir.path().join("c1.safetensors");
    std::fs::write(&src, &bytes).unwrap();
    let out = dir.path().join("c1.brv");
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        !text.contains('\u{9b}') && text.contains("a\\u009b2J"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["tensors"][0]["name"], "a\u{9b}2J");
    let o = brevis([OsStr::new("ls"), out.as_os_str(), OsStr::new("--json")]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        !text.contains('\u{9b}') && text.contains("a\\u009b2J"),
        "{text}"
    );
}

/// `ls --json` and `show` say how each tensor is stored in a version-2 archive (its own
/// record, a group of small neighbours, a copy of an identical tensor) and the settings
/// that built it, and `ls --json` the format version and the source's file name.
#[test]
fn ls_and_show_say_how_each_tensor_is_stored_and_with_which_settings() {
    let dir = tempfile::tempdir().unwrap();
    // a, b: 64 words each (grouped); big and its copy: 20,000 words of a ramp.
    let big: Vec<u8> = (0..20_000u32)
        .flat_map(|i| (i as f32 * 0.001).to_le_bytes())
        .collect();
    let mut data = vec![1u8; 512];
    data.extend_from_slice(&big);
    data.extend_from_slice(&big);
    let header = r#"{"a":{"dtype":"F32","shape":[64],"data_offsets":[0,256]},"b":{"dtype":"F32","shape":[64],"data_offsets":[256,512]},"big":{"dtype":"F32","shape":[20000],"data_offsets":[512,80512]},"tied":{"dtype":"F32","shape":[20000],"data_offsets":[80512,160512]}}"#.to_string();
    let src = dir.path().join("m.safetensors");
    std::fs::write(&src, safetensors_bytes(header.as_bytes(), &data)).unwrap();
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("--budget"),
        OsStr::new("2"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let archive = src.with_extension("brv");
    let v = json_of(&brevis([
        OsStr::new("ls"),
        OsStr::new("--json"),
        archive.as_os_str(),
    ]));
    assert_eq!(
        (&v["format_version"], &v["file_name"]),
        (&json!(4), &json!("m.safetensors"))
    );
    let t = v["tensors"].as_array().unwrap();
    let stored: Vec<&str> = t.iter().map(|t| t["stored_as"].as_str().unwrap()).collect();
    assert_eq!(stored, ["group", "group", "record", "copy"]);
    assert_eq!(t[0]["group"]["tensors"], 2);
    assert_eq!(t[0]["group"]["first"], "a");
    assert_eq!(t[3]["copy_of"], "big");
    // A budget above 1 calibrates the prior on the file: recorded by its digest.
    let st = &t[2]["settings"];
    assert_eq!(
        (
            &st["budget"],
            &st["max_depth"],
            &st["max_nodes"],
            &st["prior"],
            &st["level"]
        ),
        (
            &json!(2),
            &json!(4),
            &json!(64),
            &json!("calibrated"),
            &json!("default")
        )
    );
    let digest = st["prior_digest"].as_str().unwrap();
    assert!(
        digest.len() == 16 && digest != "0000000000000000",
        "{digest}"
    );
    assert!(t.iter().all(|x| x["settings"] == *st));
    // The copy costs its reference only: its frame (marker and kind, length, item
    // count) and the record index.
    assert_eq!(t[3]["archive_bytes"], 4);
    let o = brevis([OsStr::new("show"), archive.as_os_str(), OsStr::new("tied")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(
            "a copy of tensor big: its record is a reference to that one's (the program \
             below is the one it copies)\nbuilt with --level default --budget 2 --max-depth 4 \
             --max-nodes 64, \
             prior calibrated ("
        ) && text.contains(&format!("({digest})\n")),
        "{text}"
    );
    let o = brevis([OsStr::new("show"), archive.as_os_str(), OsStr::new("b")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("stored in a group record of 2 tensors"),
        "{text}"
    );
}

/// `--level fast` codes a corpus file's large tensors in the fixed field layout (no
/// search), restores it byte for byte, and is refused with `--budget`; numbers name the
/// levels as names do; `bench --level fast` reports the level.
#[test]
fn the_fast_level_round_trips_and_refuses_a_budget() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/minilm-l6-v2-bf16-layer0.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let arc = dir.path().join("f.brv");
    let back = dir.path().join("f.safetensors");
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        arc.as_os_str(),
        OsStr::new("--level"),
        OsStr::new("1"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = brevis([
        OsStr::new("decompress"),
        arc.as_os_str(),
        OsStr::new("-o"),
        back.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap());
    // The query weights: the sign, the exponent with the top mantissa bits in rans8, the
    // rest of the mantissa packed.
    let o = brevis([
        OsStr::new("show"),
        arc.as_os_str(),
        OsStr::new("encoder.layer.0.attention.self.query.weight"),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("merge fields[1,"), "{text}");
    assert!(text.contains("lit rans8"), "{text}");
    // The level is recorded with the record's settings, and shown.
    assert!(
        text.contains("built with --level fast --budget 0 "),
        "{text}"
    );
    let v = json_of(&brevis([
        OsStr::new("ls"),
        OsStr::new("--json"),
        arc.as_os_str(),
    ]));
    let levels: std::collections::BTreeSet<_> = v["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["settings"]["level"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(levels, ["fast".to_string()].into());
    let o = brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        dir.path().join("g.brv").as_os_str(),
        OsStr::new("--level"),
        OsStr::new("fast"),
        OsStr::new("--budget"),
        OsStr::new("2"),
    ]);
    // A usage error: exit 2, as the help says, and `kind` usage with --json.
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--level fast"));
    assert!(!dir.path().join("g.brv").exists());
    for command in ["compress", "bench"] {
        let o = brevis([
            OsStr::new(command),
            src.as_os_str(),
            OsStr::new("--level"),
            OsStr::new("fast"),
            OsStr::new("--budget"),
            OsStr::new("1"),
            OsStr::new("--json"),
        ]);
        assert_eq!(o.status.code(), Some(2), "{command}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["kind"], "usage", "{command}");
        assert_eq!(v["exit_code"], 2, "{command}");
    }
    let o = brevis(["compress", "x.safetensors", "--level", "turbo"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fast (1), default (2) or max (3)"));
    let v = json_of(&brevis([
        OsStr::new("bench"),
        OsStr::new("--json"),
        OsStr::new("--runs"),
        OsStr::new("1"),
        OsStr::new("--jobs"),
        OsStr::new("1"),
        OsStr::new("--level"),
        OsStr::new("fast"),
        src.as_os_str(),
    ]));
    assert_eq!(v["files"][0]["level"], "fast");
    assert_eq!(v["files"][0]["budget"], 0);
    // The archive bench measures is the one compress wrote (the file's name included;
    // found by a tester: 24 bytes short on fracast0-f32).
    assert_eq!(
        v["files"][0]["archive_bytes"],
        std::fs::metadata(&arc).unwrap().len()
    );
}
