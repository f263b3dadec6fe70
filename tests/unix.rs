//! Unix verbs of the `brevis` command line: `extract`, `-` for standard input and output,
//! `-o DIR`, `-o /dev/null`, `decompress --salvage`, `completions` and `man`.

#![cfg(feature = "cli")]

mod support;

use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use support::{brevis, brevis_fed, ok, stderr, LAYER0};

/// The corpus's layer-0 checkpoint compressed into `dir` (as `name`.brv, from a copy
/// named `name`.safetensors): (source, archive).
fn layer0_archive(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let src = dir.join(format!("{name}.safetensors"));
    std::fs::copy(LAYER0, &src).expect("read ../shared/corpus");
    let archive = dir.join(format!("{name}.brv"));
    ok(&brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        archive.as_os_str(),
    ]));
    (src, archive)
}

/// Every tensor of a `.safetensors` file as (name, dtype, shape, bytes), sorted by name.
fn tensors_of(bytes: &[u8]) -> Vec<(String, String, Vec<usize>, Vec<u8>)> {
    let st = safetensors::SafeTensors::deserialize(bytes).expect("the safetensors crate reads it");
    let mut v: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| {
            (
                n,
                format!("{:?}", t.dtype()),
                t.shape().to_vec(),
                t.data().to_vec(),
            )
        })
        .collect();
    v.sort();
    v
}

fn names_in_dir(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn extract_writes_a_safetensors_file_the_reference_library_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (src, archive) = layer0_archive(dir.path(), "layer0");
    let original = std::fs::read(&src).unwrap();
    let all = tensors_of(&original);
    let out = dir.path().join("two.safetensors");
    // One large tensor with a record of its own, one small one stored in a group; given
    // in the reverse of their file order.
    let wanted = ["pooler.dense.weight", "embeddings.LayerNorm.bias"];
    let o = brevis([
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new(wanted[0]),
        OsStr::new(wanted[1]),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]);
    ok(&o);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(
        report["tensors"],
        serde_json::json!(["embeddings.LayerNorm.bias", "pooler.dense.weight"])
    );
    assert_eq!(report["metadata"], true);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(report["bytes"], bytes.len() as u64);
    let got = tensors_of(&bytes);
    let want: Vec<_> = all
        .iter()
        .filter(|t| wanted.contains(&t.0.as_str()))
        .cloned()
        .collect();
    assert_eq!(got.len(), 2);
    assert!(got == want, "extracted tensors differ from the original's");
    assert_eq!(want[1].3.len(), 384 * 384 * 2);
    // The original header's __metadata__ is kept, entry for entry.
    let meta = |b: &[u8]| {
        let (_, m) = safetensors::SafeTensors::read_metadata(b).unwrap();
        m.metadata().clone()
    };
    assert_eq!(meta(&bytes), meta(&original));
    assert!(meta(&bytes).is_some());
    // The header is padded to a multiple of 8 bytes and the tensors follow in the
    // original data order.
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(header_len % 8, 0);
    let data = &bytes[8 + header_len as usize..];
    assert_eq!(data.len(), 768 + 384 * 384 * 2);
    assert_eq!(&data[..768], want[0].3.as_slice());

    // The same tensors on standard output, byte for byte.
    let o = brevis([
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new(wanted[1]),
        OsStr::new(wanted[0]),
        OsStr::new("-o"),
        OsStr::new("-"),
    ]);
    ok(&o);
    assert!(
        o.stdout == bytes,
        "extract -o - differs from extract -o FILE"
    );
    assert!(stderr(&o).contains("2 tensors"), "{}", stderr(&o));

    // The existing output is not replaced without --force, and is with it.
    std::fs::write(&out, b"keep").unwrap();
    let again = [
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new(wanted[0]),
        OsStr::new("-o"),
        out.as_os_str(),
    ];
    let o = brevis(again);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "error: {}: already exists (use --force to replace it)\n",
            out.display()
        )
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");
    let o = brevis(again.iter().chain([&OsStr::new("-f")]));
    ok(&o);
    assert_eq!(tensors_of(&std::fs::read(&out).unwrap()).len(), 1);
}

#[test]
fn extract_of_an_unknown_tensor_names_it_and_the_nearest_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = layer0_archive(dir.path(), "layer0");
    let out = dir.path().join("x.safetensors");
    let before = names_in_dir(dir.path());
    let o = brevis([
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new("pooler.dense.bias"),
        OsStr::new("pooler.dense.weigth"),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let a = archive.display();
    assert_eq!(
        stderr(&o),
        format!(
            "error: {a}: no tensor named \"pooler.dense.weigth\" (did you mean \
             \"pooler.dense.weight\"?); list them with `brevis ls {a}`\n"
        )
    );
    assert_eq!(names_in_dir(dir.path()), before);
    // --json names the kind.
    let o = brevis([
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new("nothing.like.it.at.all.here"),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "no_such_tensor");
    assert_eq!(
        v["error"],
        format!(
            "{a}: no tensor named \"nothing.like.it.at.all.here\"; list them with `brevis ls {a}`"
        )
    );
    assert_eq!(names_in_dir(dir.path()), before);
}

#[test]
fn extract_takes_tensors_from_the_shards_of_a_folder_archive() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    let a = support::safetensors_bytes(&[
        ("a.w", "F32", vec![4], (0..16u8).collect()),
        ("a.b", "U8", vec![3], vec![7, 8, 9]),
    ]);
    let b = support::safetensors_bytes(&[("b.w", "I16", vec![2, 2], (20..28u8).collect())]);
    std::fs::write(ckpt.join("model-00001-of-00002.safetensors"), &a).unwrap();
    std::fs::write(ckpt.join("model-00002-of-00002.safetensors"), &b).unwrap();
    let archive = dir.path().join("ckpt.brv");
    ok(&brevis([
        OsStr::new("compress"),
        ckpt.as_os_str(),
        OsStr::new("-o"),
        archive.as_os_str(),
    ]));
    let out = dir.path().join("x.safetensors");
    ok(&brevis([
        OsStr::new("extract"),
        archive.as_os_str(),
        OsStr::new("b.w"),
        OsStr::new("a.w"),
        OsStr::new("-o"),
        out.as_os_str(),
    ]));
    let got = tensors_of(&std::fs::read(&out).unwrap());
    assert_eq!(
        got,
        vec![
            (
                "a.w".to_string(),
                "F32".to_string(),
                vec![4],
                (0..16u8).collect()
            ),
            (
                "b.w".to_string(),
                "I16".to_string(),
                vec![2, 2],
                (20..28u8).collect()
            ),
        ]
    );
}

#[test]
fn compress_from_stdin_and_decompress_to_stdout_pipe_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(LAYER0).expect("read ../shared/corpus");
    let archive = dir.path().join("x.brv");
    // cat X | brevis compress - -o x.brv
    let o = brevis_fed(
        [
            OsStr::new("compress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            archive.as_os_str(),
        ],
        &original,
    );
    ok(&o);
    assert!(
        o.stdout.starts_with(b"standard input -> "),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // brevis decompress x.brv -o - | cmp - X
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("-"),
    ]);
    ok(&o);
    assert_eq!(o.stdout.len(), original.len());
    assert!(
        o.stdout == original,
        "decompress -o - differs from the original"
    );
    // The status line went to stderr.
    assert!(
        stderr(&o).starts_with(&format!(
            "{} -> standard output: 4247680 bytes",
            archive.display()
        )),
        "{}",
        stderr(&o)
    );
    // Standard input to standard output, and the archive equals the file's.
    let o = brevis_fed(["compress", "-", "-o", "-"], &original);
    ok(&o);
    assert!(o.stdout == std::fs::read(&archive).unwrap());

    // Standard input with no -o is a usage error saying -o is needed.
    let o = brevis_fed(["compress", "-"], &original);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with(
            "error: reading from standard input (`-`) needs -o OUT: the archive's file name"
        ),
        "{}",
        stderr(&o)
    );
    // --json and -o - both want standard output.
    let o = brevis(["decompress", "x.brv", "-o", "-", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "usage");
    // Standard input that is not a .safetensors file: an error naming it, no archive.
    let bad = dir.path().join("bad.brv");
    let o = brevis_fed(
        [
            OsStr::new("compress"),
            OsStr::new("-"),
            OsStr::new("-o"),
            bad.as_os_str(),
        ],
        b"not a checkpoint",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("error: standard input: "),
        "{}",
        stderr(&o)
    );
    assert!(!bad.exists());
}

#[test]
fn output_into_a_folder_and_to_dev_null() {
    let dir = tempfile::tempdir().unwrap();
    let (src, archive) = layer0_archive(dir.path(), "model-a");
    let original = std::fs::read(&src).unwrap();
    // compress -o DIR: DIR/NAME.brv.
    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    ok(&brevis([
        OsStr::new("compress"),
        src.as_os_str(),
        OsStr::new("-o"),
        into.as_os_str(),
    ]));
    assert_eq!(names_in_dir(&into), ["model-a.brv"]);
    assert_eq!(
        std::fs::read(into.join("model-a.brv")).unwrap(),
        std::fs::read(&archive).unwrap()
    );
    // decompress -o DIR: DIR/<the file name the archive records>, even when the
    // archive was renamed.
    let renamed = dir.path().join("renamed.brv");
    std::fs::rename(&archive, &renamed).unwrap();
    let back = dir.path().join("back");
    std::fs::create_dir(&back).unwrap();
    ok(&brevis([
        OsStr::new("decompress"),
        renamed.as_os_str(),
        OsStr::new("-o"),
        back.as_os_str(),
    ]));
    assert_eq!(names_in_dir(&back), ["model-a.safetensors"]);
    assert!(std::fs::read(back.join("model-a.safetensors")).unwrap() == original);
    // Again: the file in the folder exists and is not replaced without --force.
    std::fs::write(back.join("model-a.safetensors"), b"keep").unwrap();
    let args = [
        OsStr::new("decompress"),
        renamed.as_os_str(),
        OsStr::new("-o"),
        back.as_os_str(),
    ];
    let o = brevis(args);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("already exists (use --force to replace it)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(back.join("model-a.safetensors")).unwrap(),
        b"keep"
    );
    ok(&brevis(args.iter().chain([&OsStr::new("--force")])));
    assert!(std::fs::read(back.join("model-a.safetensors")).unwrap() == original);
    assert_eq!(names_in_dir(&back), ["model-a.safetensors"]);

    // -o /dev/null, for benchmarking: written directly, no --force needed, and it stays
    // a character device.
    for args in [
        vec![OsStr::new("compress"), src.as_os_str()],
        vec![OsStr::new("decompress"), renamed.as_os_str()],
        vec![
            OsStr::new("extract"),
            renamed.as_os_str(),
            OsStr::new("pooler.dense.bias"),
        ],
    ] {
        let o = brevis(
            args.iter()
                .chain([&OsStr::new("-o"), &OsStr::new("/dev/null")]),
        );
        ok(&o);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(" -> /dev/null: "),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // No temporary file was left anywhere.
    for d in [dir.path(), &into, &back] {
        assert!(
            names_in_dir(d).iter().all(|n| !n.starts_with(".brevis-")),
            "{d:?}"
        );
    }
}

/// `B20_mixed_dtypes`-like checkpoint of the corpus, compressed, with one byte in the
/// middle of `tensor`'s program flipped: (original, damaged archive).
fn damaged_layer0(dir: &Path, tensor: &str) -> (Vec<u8>, PathBuf) {
    let (src, archive) = layer0_archive(dir, "layer0");
    let mut bytes = std::fs::read(&archive).unwrap();
    let a = brevis::Archive::open(&archive).unwrap();
    let t = &a.tensors()[a.find(tensor).unwrap()];
    let at = t.program.start + t.program.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&archive, &bytes).unwrap();
    (std::fs::read(src).unwrap(), archive)
}

#[test]
fn salvage_restores_every_other_tensor_and_zero_fills_the_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    let damaged = "pooler.dense.weight";
    let (original, archive) = damaged_layer0(dir.path(), damaged);
    let out = dir.path().join("out.safetensors");

    // Without --salvage: an error, and no output.
    let o = brevis([
        OsStr::new("decompress"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains(&format!("tensor \"{damaged}\"")),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());

    let o = brevis([
        OsStr::new("decompress"),
        OsStr::new("--salvage"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
        OsStr::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let restored = std::fs::read(&out).unwrap();
    assert_eq!(restored.len(), original.len());
    // The damaged tensor's bytes are zeros; everything else is the original's.
    let st = safetensors::SafeTensors::deserialize(&original).unwrap();
    let (header_len, _) = safetensors::SafeTensors::read_metadata(&original).unwrap();
    let start = 8 + header_len;
    let mut expected = original.clone();
    let range = st
        .tensors()
        .into_iter()
        .find(|(n, _)| n == damaged)
        .map(|(_, t)| {
            let at = t.data().as_ptr() as usize - original.as_ptr() as usize;
            at..at + t.data().len()
        })
        .unwrap();
    assert!(range.start >= start);
    expected[range.clone()].fill(0);
    assert!(
        restored == expected,
        "salvaged bytes differ from the original outside {range:?}"
    );
    for (name, t) in tensors_of(&restored).iter().zip(tensors_of(&original)) {
        if name.0 == damaged {
            assert!(name.3.iter().all(|&b| b == 0));
        } else {
            assert!(name.3 == t.3, "{} differs", name.0);
        }
    }
    // Named on stderr and in the JSON report.
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "damaged: tensor \"{damaged}\": {} bytes at file offset {} zero-filled: ",
            range.len(),
            range.start
        )),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["checksums_ok"], false);
    let list = v["damaged"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["tensors"], serde_json::json!([damaged]));
    assert_eq!(list[0]["offset"], range.start as u64);
    assert_eq!(list[0]["bytes"], range.len() as u64);

    // To standard output: the same bytes, exit 3.
    let o = brevis([
        OsStr::new("decompress"),
        OsStr::new("--salvage"),
        archive.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("-"),
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(o.stdout == expected, "salvage to standard output differs");

    // An intact archive salvages to the original, exit 0.
    let (_, good) = layer0_archive(dir.path(), "good");
    let o = brevis([
        OsStr::new("decompress"),
        OsStr::new("--salvage"),
        good.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("-"),
    ]);
    ok(&o);
    assert!(o.stdout == original);
}

#[test]
fn salvage_of_a_damaged_group_zero_fills_each_of_its_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let (original, archive) = damaged_layer0(dir.path(), "embeddings.LayerNorm.bias");
    let a = brevis::Archive::open(&archive).unwrap();
    let t = &a.tensors()[a.find("embeddings.LayerNorm.bias").unwrap()];
    let group = &a.groups()[t.group.expect("a small tensor is stored in a group")];
    let members: Vec<String> = a.tensors()[group.tensors.clone()]
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(members.len() >= 2, "{members:?}");
    let out = dir.path().join("out.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        OsStr::new("--salvage"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let names: Vec<String> = members.iter().map(|n| format!("tensor \"{n}\"")).collect();
    assert!(
        stderr(&o).starts_with(&format!("damaged: {}: ", names.join(", "))),
        "{}",
        stderr(&o)
    );
    for (got, want) in tensors_of(&std::fs::read(&out).unwrap())
        .iter()
        .zip(tensors_of(&original))
    {
        if members.contains(&got.0) {
            assert!(got.3.iter().all(|&b| b == 0), "{}", got.0);
        } else {
            assert!(got.3 == want.3, "{} differs", got.0);
        }
    }
}

#[test]
fn salvage_says_it_cannot_work_without_the_header_record() {
    let dir = tempfile::tempdir().unwrap();
    let (_, archive) = layer0_archive(dir.path(), "layer0");
    let mut bytes = std::fs::read(&archive).unwrap();
    // The header record is the first record, from byte 16: damage its middle.
    let a = brevis::Archive::open(&archive).unwrap();
    let at = 16 + a.header_archive_bytes() as usize / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&archive, &bytes).unwrap();
    let out = dir.path().join("out.safetensors");
    let o = brevis([
        OsStr::new("decompress"),
        OsStr::new("--salvage"),
        archive.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("record 0 (the header)"), "{err}");
    assert!(
        err.ends_with(
            "; --salvage cannot help: it restores the tensors around damaged tensor records, \
             and needs the header record (which names every tensor) intact (and for an \
             archive of format 3 or earlier the index and the trailer too); nothing was \
             written\n"
        ),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn completions_and_man_page_come_from_the_command_definitions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = brevis(["completions", shell]);
        ok(&o);
        let text = String::from_utf8(o.stdout).unwrap();
        for cmd in ["compress", "decompress", "extract", "completions", "man"] {
            assert!(text.contains(cmd), "{shell}: no {cmd}");
        }
    }
    let o = brevis(["completions", "bash"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("_brevis() {"));
    assert_eq!(brevis(["completions", "tcsh"]).status.code(), Some(2));
    let o = brevis(["man"]);
    ok(&o);
    let page = String::from_utf8(o.stdout).unwrap();
    assert!(page.contains(".TH brevis 1"), "{page}");
    assert!(page.contains("brevis\\-extract"), "{page}");
    // --help documents the exit code of a salvage.
    let o = brevis(["--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains(
            "decompress --salvage exits 3 when it wrote the file (or folder) with damaged \
             tensors zero-filled (they are listed on stderr), and 1 when nothing can be \
             salvaged"
        ),
        "{help}"
    );
}
