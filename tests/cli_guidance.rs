//! What the command line tells a new user (issue 41): figures that agree (`compress
//! --json`'s shares of a group record, `literal_fallback`), `ls` on tiny tensors,
//! `verify --against`'s verdict, `--help`'s order, what to do about a damaged archive,
//! and a README that shows what the programs show.

#![cfg(feature = "cli")]

mod support;

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};
use support::{brevis, json_of, stderr, stdout, CORPUS};

#[test]
fn compress_json_shares_of_group_records_hold_their_program_and_fallback_means_unrestored() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(CORPUS).join("fracast0-f32.safetensors");
    let out = dir.path().join("f.brv");
    let v = json_of(&brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]));
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 47);
    let get = |name: &str| {
        tensors
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in the report"))
    };
    // Shared apart, a tensor's share of its record holds its share of the program (the
    // issue: 642 archive bytes, 643 program bytes; format 4 and rans8 moved both).
    for t in tensors {
        let (a, p) = (
            t["archive_bytes"].as_u64().unwrap(),
            t["program_bytes"].as_u64().unwrap(),
        );
        assert!(
            a >= p,
            "{}: archive_bytes {a} < program_bytes {p}",
            t["name"]
        );
    }
    let up = get("core.block.ffn.up.bias");
    assert_eq!(
        (up["archive_bytes"].as_u64(), up["program_bytes"].as_u64()),
        (Some(643), Some(643))
    );
    // No program failed to restore, so nothing is a fallback, whatever the search kept
    // (core.block.dw_bias's group kept literals for some of its tensors).
    assert!(v["warnings"].as_array().unwrap().is_empty());
    for t in tensors {
        assert_eq!(t["literal_fallback"], false, "{}", t["name"]);
    }
    assert_eq!(get("core.block.dw_bias")["root_op"], "concat");

    // ls --json of the archive counts the same shares.
    let l = json_of(&brevis([
        OsStr::new("ls"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]));
    for t in l["tensors"].as_array().unwrap() {
        let c = get(t["name"].as_str().unwrap());
        assert_eq!(t["archive_bytes"], c["archive_bytes"], "{}", t["name"]);
        assert_eq!(t["program_bytes"], c["program_bytes"], "{}", t["name"]);
    }
}

/// `literal_fallback` is set where a program did not restore its tensor: the writer's
/// test hook makes every synthesized program wrong, `compress` writes again with each
/// program checked, and every tensor (alone or in a group) is stored as literals.
#[test]
fn literal_fallback_marks_the_tensors_whose_program_did_not_restore() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(CORPUS).join("fracast0-f32.safetensors");
    let out = dir.path().join("f.brv");
    let o = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args([
            OsStr::new("compress"),
            src.as_os_str(),
            OsStr::new("-o"),
            out.as_os_str(),
            OsStr::new("--json"),
        ])
        .env("BREVIS_TEST_FAULT", "bad-program")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v = json_of(&o);
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 47);
    for t in tensors {
        assert_eq!(t["literal_fallback"], true, "{}", t["name"]);
    }
    assert!(!v["warnings"].as_array().unwrap().is_empty());
}

#[test]
fn ls_shows_the_bytes_a_tiny_tensor_grew_by_not_a_percentage() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.safetensors");
    // A 2-byte I16 scalar alone in its record, and a 1 KiB F32 vector.
    let vector: Vec<u8> = (0..256u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    std::fs::write(
        &src,
        support::safetensors_bytes(&[
            ("heads", "I16", vec![], 6i16.to_le_bytes().to_vec()),
            ("w", "F32", vec![256], vector),
        ]),
    )
    .unwrap();
    let out = dir.path().join("s.brv");
    assert!(brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str()
    ])
    .status
    .success());
    let l = json_of(&brevis([
        OsStr::new("ls"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]));
    let heads = &l["tensors"][0];
    assert_eq!(heads["name"], "heads");
    let grew = heads["archive_bytes"].as_u64().unwrap() - 2;
    assert!(grew > 0);
    let o = brevis([OsStr::new("ls"), out.as_os_str()]);
    let text = stdout(&o);
    let row = text.lines().find(|l| l.ends_with("  heads")).unwrap();
    assert!(row.contains(&format!("  +{grew} B  ")), "{text}");
    assert!(!row.contains('%'), "{text}");
    // JSON keeps the percentage for scripts.
    assert!(heads["reduction_percent"].as_f64().unwrap() < 0.0);
}

#[test]
fn verify_against_a_different_file_says_failed_and_never_ok() {
    let dir = tempfile::tempdir().unwrap();
    let layer0 = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let out = dir.path().join("l.brv");
    assert!(brevis([
        OsStr::new("compress"),
        layer0.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str()
    ])
    .status
    .success());
    let mut other = std::fs::read(&layer0).unwrap();
    let n = other.len();
    other[n - 1] ^= 1;
    let other_path = dir.path().join("other.safetensors");
    std::fs::write(&other_path, other).unwrap();
    let o = brevis([
        OsStr::new("verify"),
        out.as_os_str(),
        OsStr::new("--against"),
        other_path.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    let text = stdout(&o);
    assert!(!text.contains(": ok:"), "{text}");
    assert_eq!(
        text,
        format!(
            "{a}: the archive is sound: 23 tensors, 0 gaps, header and whole file (4247680 \
             bytes) match their checksums\n{a}: FAILED: differs from {b} at byte {} (decoded \
             4247680 bytes, file 4247680 bytes)\n",
            n - 1,
            a = out.display(),
            b = other_path.display()
        )
    );
    // Against the original: ok, and identical.
    let o = brevis([
        OsStr::new("verify"),
        out.as_os_str(),
        OsStr::new("--against"),
        layer0.as_os_str(),
    ]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(
        text.contains(": ok: 23 tensors") && text.contains(": identical to"),
        "{text}"
    );
}

#[test]
fn top_level_help_lists_the_commands_before_the_exit_codes() {
    let o = brevis(["--help"]);
    assert!(o.status.success());
    let text = stdout(&o);
    let commands = text.find("Commands:").expect("a list of commands");
    let exit = text.find("Exit codes:").expect("the exit codes");
    assert!(commands < exit, "{text}");
    // Only the two paragraphs of what brevis is come first.
    assert!(text[..commands].lines().count() <= 10, "{text}");
    // -h stays short.
    let short = stdout(&brevis(["-h"]));
    assert!(
        short.contains("Commands:") && !short.contains("Exit codes:"),
        "{short}"
    );
}

#[test]
fn a_damaged_archive_on_decompress_mentions_salvage() {
    let dir = tempfile::tempdir().unwrap();
    let layer0 = Path::new(CORPUS).join("minilm-l6-v2-bf16-layer0.safetensors");
    let good = dir.path().join("l.brv");
    assert!(brevis([
        OsStr::new("compress"),
        layer0.as_os_str(),
        OsStr::new("-o"),
        good.as_os_str()
    ])
    .status
    .success());
    // Damage the middle of the archive: inside the largest tensor's program.
    let mut bytes = std::fs::read(&good).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    let bad = dir.path().join("bad.brv");
    std::fs::write(&bad, &bytes).unwrap();
    let restored = dir.path().join("r.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        bad.as_os_str(),
        OsStr::new("-o"),
        restored.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("; `brevis decompress --salvage` restores every other tensor and zero-fills the damaged ones"),
        "{err}"
    );
    // The kind and exit code are the damage's, not changed by the hint.
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        Some(v["exit_code"].as_i64().unwrap() as i32),
        o.status.code()
    );
    assert!(
        ["checksum_mismatch", "damaged_record", "undecodable_record"]
            .contains(&v["kind"].as_str().unwrap()),
        "{v}"
    );
    assert!(!restored.exists());
    // What the hint says works: --salvage writes the file (exit 3).
    let o = brevis([
        OsStr::new("decompress"),
        bad.as_os_str(),
        OsStr::new("-o"),
        restored.as_os_str(),
        OsStr::new("--salvage"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(!stderr(&o).contains("--salvage` restores"));
    // An archive cut short after its header record (the 711-byte record at byte 16):
    // the hint, and --salvage restores the tensor whose record is whole (exit 3).
    let cut = dir.path().join("cut.brv");
    std::fs::write(&cut, &bytes[..1000]).unwrap();
    let restored = dir.path().join("c.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        cut.as_os_str(),
        OsStr::new("-o"),
        restored.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).ends_with(
            "the end marker is missing (truncated or damaged archive); `brevis decompress \
             --salvage` restores the tensors whose records are whole and zero-fills the others\n"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!restored.exists());
    let o = brevis([
        OsStr::new("decompress"),
        cut.as_os_str(),
        OsStr::new("-o"),
        restored.as_os_str(),
        OsStr::new("--salvage"),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let zero_filled: usize = v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["tensors"].as_array().unwrap().len())
        .sum();
    assert_eq!(zero_filled, 22, "{v}");
    // Cut inside the header record, which names every tensor: nothing can be salvaged,
    // and no hint.
    std::fs::write(&cut, &bytes[..200]).unwrap();
    let o = brevis([
        OsStr::new("decompress"),
        cut.as_os_str(),
        OsStr::new("-o"),
        dir.path().join("d.safetensors").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stderr(&o).contains("--salvage"), "{}", stderr(&o));
}

#[cfg(feature = "tui")]
/// The README's demo screen: its title line and tensor rows are what `brevis-tui` shows
/// of the built-in demo (compressed as the demo compresses it: `demo.safetensors` with
/// the default options), and the README says how to open an archive with its base.
#[test]
fn the_readme_shows_what_the_programs_show() {
    use brevis::archive::{compress_file, no_progress, Archive, CompressOptions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("demo.safetensors");
    std::fs::copy(root.join("assets/demo.safetensors"), &src).unwrap();
    let out = dir.path().join("demo.brv");
    compress_file(&src, &out, &CompressOptions::default(), &no_progress).unwrap();
    let a = Archive::open(&out).unwrap();
    let thousands = |n: u64| {
        let s = n.to_string();
        let mut o = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                o.push(',');
            }
            o.push(c);
        }
        o
    };
    let pct = |o: u64, n: u64| format!("{:.2}%", (1.0 - n as f64 / o as f64) * 100.0);
    let title = format!(
        "{} tensors · {} → {} bytes · {} smaller",
        a.tensors().len(),
        thousands(a.original_len()),
        thousands(a.archive_len()),
        pct(a.original_len(), a.archive_len())
    );
    let line = readme
        .lines()
        .find(|l| l.starts_with(" brevis-tui  /tmp/brevis-tui-demo-"))
        .expect("the README's demo title line");
    assert!(line.ends_with(&title), "README: {line}\nprogram: {title}");
    // Each tensor row shown: `#  name  dtype  shape  original  archive  reduction  root`.
    let mut rows = 0;
    for l in readme.lines() {
        let cells: Vec<&str> = l
            .trim_start_matches(['▶', ' '])
            .split_whitespace()
            .collect();
        let Some(i) = cells.first().and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        let Some(t) = a
            .tensors()
            .get(i)
            .filter(|t| cells.get(1) == Some(&t.name.as_str()))
        else {
            continue;
        };
        let n = cells.len();
        assert_eq!(
            cells[n - 4..],
            [
                thousands(t.original_bytes()).as_str(),
                thousands(t.archive_bytes()).as_str(),
                pct(t.original_bytes(), t.archive_bytes()).as_str(),
                t.root_op
            ],
            "README row: {l}"
        );
        rows += 1;
    }
    assert!(rows >= 6, "{rows} rows of the demo table found");
    let total_line = readme
        .lines()
        .find(|l| l.trim_start().starts_with("total of 23 tensors"))
        .expect("the table's total row");
    let (orig, arch): (u64, u64) = a
        .tensors()
        .iter()
        .map(|t| (t.original_bytes(), t.archive_bytes()))
        .fold((0, 0), |s, x| (s.0 + x.0, s.1 + x.1));
    let cells: Vec<&str> = total_line.split_whitespace().collect();
    assert_eq!(
        cells[cells.len() - 3..],
        [
            thousands(orig).as_str(),
            thousands(arch).as_str(),
            pct(orig, arch).as_str()
        ],
        "README: {total_line}"
    );
    // brevis-tui --base: in the README, and an option brevis-tui has.
    assert!(
        readme.contains("brevis-tui ft.brv --base "),
        "README names brevis-tui --base"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("--base <BASE>"));
}
