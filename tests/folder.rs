//! Checkpoint folders as one job (DESIGN §8): a corpus checkpoint split into 3 shards with
//! a `model.safetensors.index.json` round-trips byte for byte through the CLI and the
//! library; an index that maps a tensor to a shard that lacks it is refused.

#![cfg(feature = "cli")]

mod support;

use brevis::archive::folder::{compress_folder, FileKind, Folder};
use brevis::archive::{CompressOptions, DecompressOptions};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::Output;
use support::{brevis, stderr, stdout};

/// A shard being built: its header entries, its data bytes, its tensor names.
type Shard = (Map<String, Value>, Vec<u8>, Vec<String>);

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpus/minilm-l6-v2-bf16-layer0.safetensors"
);

/// Splits the corpus file into `k` shards (tensors dealt round-robin) plus an index and a
/// config file in `dir`. Returns the tensor names of each shard.
fn split_into_shards(dir: &Path, k: usize) -> Vec<Vec<String>> {
    let bytes = std::fs::read(CORPUS).expect("read the corpus checkpoint");
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut shards: Vec<Shard> = (0..k)
        .map(|_| (Map::new(), Vec::new(), Vec::new()))
        .collect();
    let tensors = header.iter().filter(|(name, _)| *name != "__metadata__");
    for (i, (name, info)) in tensors.enumerate() {
        let off = &info["data_offsets"];
        let (b, e) = (off[0].as_u64().unwrap(), off[1].as_u64().unwrap());
        let (h, d, names) = &mut shards[i % k];
        let begin = d.len() as u64;
        d.extend_from_slice(&data[b as usize..e as usize]);
        let mut info = info.clone();
        info["data_offsets"] = json!([begin, d.len() as u64]);
        h.insert(name.clone(), info);
        names.push(name.clone());
    }
    let mut weight_map = Map::new();
    let mut total = 0;
    let mut names_per_shard = Vec::new();
    for (s, (h, d, names)) in shards.into_iter().enumerate() {
        let file = format!("model-{:05}-of-{k:05}.safetensors", s + 1);
        let mut text = serde_json::to_vec(&Value::Object(h)).unwrap();
        while !text.len().is_multiple_of(8) {
            text.push(b' ');
        }
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&text);
        out.extend_from_slice(&d);
        std::fs::write(dir.join(&file), out).unwrap();
        total += d.len();
        for n in &names {
            weight_map.insert(n.clone(), json!(file));
        }
        names_per_shard.push(names);
    }
    let index = json!({"metadata": {"total_size": total}, "weight_map": weight_map});
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::to_string_pretty(&index).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), b"{\"hidden_size\": 384}\n").unwrap();
    names_per_shard
}

fn assert_same_folder(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    let mut back: Vec<_> = std::fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    back.sort();
    assert_eq!(names, back, "same files");
    for n in names {
        let x = std::fs::read(a.join(&n)).unwrap();
        let y = std::fs::read(b.join(&n)).unwrap();
        assert!(x == y, "{n:?} differs after the round trip");
    }
}

#[test]
fn three_shard_checkpoint_round_trips_byte_for_byte_through_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    let shards = split_into_shards(&src, 3);
    assert!(shards.iter().all(|s| !s.is_empty()));

    // Given as the index JSON; the default output is `ckpt.brv/`.
    let c = brevis([
        Path::new("compress"),
        &src.join("model.safetensors.index.json"),
    ]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let archive = tmp.path().join("ckpt.brv");
    assert!(archive.join("brevis-folder.json").is_file());
    assert!(archive.join("model-00002-of-00003.brv").is_file());

    for cmd in ["verify", "ls"] {
        let o = brevis([Path::new(cmd), &archive]);
        assert!(
            o.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let restored = tmp.path().join("restored");
    let d = brevis([
        Path::new("decompress"),
        &archive,
        Path::new("-o"),
        &restored,
    ]);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    assert_same_folder(&src, &restored);

    // Not replaced without --force.
    let again = brevis([
        Path::new("decompress"),
        &archive,
        Path::new("-o"),
        &restored,
    ]);
    assert_eq!(again.status.code(), Some(1));
}

#[test]
fn library_opens_a_compressed_folder_and_finds_tensors() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    let shards = split_into_shards(&src, 3);
    let out = tmp.path().join("ckpt.brv");
    let opts = CompressOptions {
        jobs: Some(2),
        ..CompressOptions::default()
    };
    let s = compress_folder(&src, &out, &opts, &|_, _| {}).unwrap();
    assert_eq!(s.shards.len(), 3);
    assert_eq!(s.copied.len(), 2);

    let f = Folder::open(&out).unwrap();
    assert_eq!(f.shards().count(), 3);
    assert_eq!(
        f.files()
            .iter()
            .filter(|x| x.kind == FileKind::Copy)
            .count(),
        2
    );
    let name = &shards[2][0];
    let (arch, i) = f.find_tensor(name).unwrap().expect("tensor found");
    assert!(arch.path().ends_with("model-00003-of-00003.brv"));
    assert!(!arch.decode_tensor(i).unwrap().is_empty());
    assert!(f
        .verify(Some(1), &|_, _| {})
        .unwrap()
        .iter()
        .all(|(_, c)| c.is_ok()));

    let restored = tmp.path().join("back");
    f.decompress_to(&restored, &DecompressOptions::default(), &|_, _| {})
        .unwrap();
    assert_same_folder(&src, &restored);
}

#[test]
fn index_mapping_a_tensor_to_the_wrong_shard_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    split_into_shards(&src, 3);
    let index = src.join("model.safetensors.index.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    v["weight_map"]["no.such.tensor"] = json!("model-00001-of-00003.safetensors");
    std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
    let out = tmp.path().join("out.brv");
    let o = brevis([Path::new("compress"), &src, Path::new("-o"), &out]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no.such.tensor"), "{err}");
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only the source folder remains");
}

/// An index naming a shard outside the folder, or a folder, is refused as an invalid
/// index naming the shard and its tensor; one naming an absent file as a missing shard.
#[test]
fn index_naming_a_path_outside_or_a_folder_is_an_invalid_index() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    split_into_shards(&src, 3);
    std::fs::create_dir(src.join("sub")).unwrap();
    let index = src.join("model.safetensors.index.json");
    let original: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    let out = tmp.path().join("out.brv");
    for (shard, says) in [
        (
            "../x.safetensors",
            "invalid shard index: shard \"../x.safetensors\" (of tensor \"extra\") is not a path inside the checkpoint folder",
        ),
        (
            "/etc/passwd",
            "invalid shard index: shard \"/etc/passwd\" (of tensor \"extra\") is not a path inside the checkpoint folder",
        ),
        (
            "sub",
            "invalid shard index: shard \"sub\" (of tensor \"extra\") is a folder, not a .safetensors file",
        ),
        (
            "gone.safetensors",
            "incomplete checkpoint: missing shard \"gone.safetensors\" (named by the index; tensors no shard holds: \"extra\")",
        ),
    ] {
        let mut v = original.clone();
        v["weight_map"]["extra"] = json!(shard);
        std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
        let o = brevis([Path::new("compress"), &src, Path::new("-o"), &out]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{shard}: {err}");
        assert!(!out.exists());
    }
}

/// Folders with no file below them are not kept, and compress says so: the outermost
/// such folder of each branch, once.
#[test]
fn empty_folders_are_named_in_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    split_into_shards(&src, 2);
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::create_dir(src.join("logs")).unwrap();
    std::fs::create_dir(src.join("keep")).unwrap();
    std::fs::write(src.join("keep/notes.txt"), b"kept").unwrap();
    let out = tmp.path().join("out.brv");
    let o = brevis([Path::new("compress"), &src, Path::new("-o"), &out]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let warn = |d: &str| {
        format!(
            "warning: {}: empty folder \"{d}\" is not kept (an archive folder holds files only)\n",
            src.display()
        )
    };
    assert_eq!(stderr(&o), format!("{}{}", warn("a"), warn("logs")));
    let back = tmp.path().join("back");
    let d = brevis([Path::new("decompress"), &out, Path::new("-o"), &back]);
    assert!(d.status.success(), "{}", stderr(&d));
    assert_eq!(std::fs::read(back.join("keep/notes.txt")).unwrap(), b"kept");
    assert!(!back.join("logs").exists());
}

/// `--force` does not delete what the archive would not restore, an empty folder
/// included, when compressing onto a previous archive folder or decompressing onto a
/// previous restore. An index may spell a shard `./name`.
#[test]
fn force_keeps_empty_folders_and_index_names_may_start_with_dot_slash() {
    let (tmp, src, archive) = compressed_three_shards();
    std::fs::create_dir(archive.join("mine")).unwrap();
    let o = brevis([
        Path::new("compress"),
        &src,
        Path::new("-o"),
        &archive,
        Path::new("--force"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("holds the empty folder \"mine\", which is not part of the archive folder"),
        "{}",
        stderr(&o)
    );
    assert!(archive.join("mine").is_dir());
    std::fs::remove_dir(archive.join("mine")).unwrap();
    let back = tmp.path().join("back");
    let d = brevis([Path::new("decompress"), &archive, Path::new("-o"), &back]);
    assert!(d.status.success(), "{}", stderr(&d));
    std::fs::create_dir_all(back.join("notes/old")).unwrap();
    let d = brevis([
        Path::new("decompress"),
        &archive,
        Path::new("-o"),
        &back,
        Path::new("--force"),
    ]);
    assert_eq!(d.status.code(), Some(1), "{}", stderr(&d));
    assert!(
        stderr(&d)
            .contains("holds the empty folder \"notes\", which this archive does not restore"),
        "{}",
        stderr(&d)
    );
    assert!(back.join("notes/old").is_dir());
    // `./model-00001-of-00003.safetensors` names the shard beside the index.
    let index = src.join("model.safetensors.index.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    for (_, shard) in v["weight_map"].as_object_mut().unwrap().iter_mut() {
        *shard = json!(format!("./{}", shard.as_str().unwrap()));
    }
    std::fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();
    let again = tmp.path().join("again.brv");
    let o = brevis([Path::new("compress"), &src, Path::new("-o"), &again]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// In a new temporary folder: the corpus file split into three shards as `ckpt/`
/// ([`split_into_shards`]) and compressed by the CLI as `ckpt.brv/`. Returns the
/// temporary folder, the source folder and the archive folder.
fn compressed_three_shards() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    split_into_shards(&src, 3);
    let archive = tmp.path().join("ckpt.brv");
    let c = brevis([Path::new("compress"), &src, Path::new("-o"), &archive]);
    assert!(c.status.success(), "{}", stderr(&c));
    (tmp, src, archive)
}

#[test]
fn verify_against_compares_every_file_of_a_folder() {
    let (tmp, src, archive) = compressed_three_shards();
    let against = |original: &Path, json: bool| {
        let mut args = vec![
            Path::new("verify"),
            &archive,
            Path::new("--against"),
            original,
        ];
        if json {
            args.push(Path::new("--json"));
        }
        brevis(&args)
    };

    // The original folder: every file identical, exit 0.
    let o = against(&src, false);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("identical to"), "{}", stdout(&o));

    // A copy with one byte of a shard changed, the config missing and an extra file:
    // each is named, exit 3 (data does not verify).
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), other.join(e.file_name())).unwrap();
    }
    let shard = other.join("model-00002-of-00003.safetensors");
    let mut bytes = std::fs::read(&shard).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0x40;
    std::fs::write(&shard, &bytes).unwrap();
    std::fs::remove_file(other.join("config.json")).unwrap();
    std::fs::write(other.join("notes.txt"), b"not in the archive").unwrap();
    let o = against(&other, false);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("model-00002-of-00003.safetensors differs")
            && text.contains(&format!("at byte {at}")),
        "{text}"
    );
    assert!(text.contains("config.json is missing"), "{text}");
    assert!(text.contains("notes.txt is not in the archive"), "{text}");
    assert!(
        !text.contains("model-00001-of-00003.safetensors differs"),
        "{text}"
    );
    // The original's paths are joined, so `other/` names `other/notes.txt` (it printed
    // `other//notes.txt`).
    let slashed = PathBuf::from(format!("{}/", other.display()));
    let text = stdout(&against(&slashed, false));
    let inside = |f: &str| other.join(f).display().to_string();
    assert!(
        text.contains(&format!("{} is not in the archive", inside("notes.txt")))
            && text.contains(&format!(
                "differs from {} at byte {at}",
                inside("model-00002-of-00003.safetensors")
            ))
            && !text.contains("//"),
        "{text}"
    );

    let o = against(&other, true);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["against"]["identical"], false);
    let files = v["against"]["files"].as_array().unwrap();
    let status = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .map(|f| f["status"].as_str().unwrap().to_string())
    };
    assert_eq!(
        status("model-00002-of-00003.safetensors").as_deref(),
        Some("differs")
    );
    assert_eq!(
        status("model-00001-of-00003.safetensors").as_deref(),
        Some("identical")
    );
    assert_eq!(status("config.json").as_deref(), Some("missing"));
    assert_eq!(status("notes.txt").as_deref(), Some("extra"));

    // A folder archive against a file, and an archive against a folder: a clear
    // refusal (exit 1) saying what to pass, never "cannot map".
    let o = against(&src.join("config.json"), false);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a folder"), "{}", stderr(&o));
    let one = archive.join("model-00001-of-00003.brv");
    let o = brevis([Path::new("verify"), &one, Path::new("--against"), &src]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is a single-file archive: --against takes the original"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("cannot map"), "{}", stderr(&o));
}

#[test]
fn verify_against_takes_the_shard_index_as_its_folder() {
    let (tmp, src, archive) = compressed_three_shards();
    let index = src.join("model.safetensors.index.json");
    let o = brevis([
        Path::new("verify"),
        &archive,
        Path::new("--against"),
        &index,
        Path::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["against"]["identical"], true);
    let files = v["against"]["files"].as_array().unwrap();
    assert_eq!(
        files.len(),
        5,
        "3 shards, the index and the config: {files:?}"
    );
    assert!(
        files.iter().all(|f| f["status"] == "identical"),
        "{files:?}"
    );

    // The index of a folder that differs stands for that folder: exit 3, as for it.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), other.join(e.file_name())).unwrap();
    }
    std::fs::write(other.join("config.json"), b"{\"hidden_size\": 385}\n").unwrap();
    let o = brevis([
        Path::new("verify"),
        &archive,
        Path::new("--against"),
        &other.join("model.safetensors.index.json"),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    // The difference is named in the folder, not under the index file's name.
    let line = stdout(&o)
        .lines()
        .find(|l| l.contains("config.json differs"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}", stdout(&o)));
    let mut named = other.display().to_string();
    named.push_str("/config.json at byte ");
    assert!(line.contains(&named), "{line}");
    assert!(!line.contains("index.json/"), "{line}");

    // A path that does not exist is said to be missing.
    let o = brevis([
        Path::new("verify"),
        &archive,
        Path::new("--against"),
        &tmp.path().join("gone/model.safetensors.index.json"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot compare with: No such file or directory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn show_and_ls_work_on_a_folder_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("ckpt");
    std::fs::create_dir(&src).unwrap();
    let shards = split_into_shards(&src, 3);
    let archive = tmp.path().join("ckpt.brv");
    let c = brevis([Path::new("compress"), &src, Path::new("-o"), &archive]);
    assert!(c.status.success(), "{}", stderr(&c));

    let o = brevis([Path::new("ls"), &archive]);
    assert!(o.status.success(), "{}", stderr(&o));
    for names in &shards {
        for n in names {
            assert!(stdout(&o).contains(n.as_str()), "ls misses {n}");
        }
    }

    // `show` finds the shard holding the tensor (given the folder or its manifest).
    let name = &shards[1][0];
    for input in [archive.clone(), archive.join("brevis-folder.json")] {
        let o = brevis([Path::new("show"), &input, Path::new(name.as_str())]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains(&format!("tensor {name}")),
            "{}",
            stdout(&o)
        );
    }
    let o = brevis([
        Path::new("show"),
        &archive,
        Path::new(name.as_str()),
        Path::new("--json"),
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["archive"]
            .as_str()
            .unwrap()
            .ends_with("model-00002-of-00003.brv"),
        "{v}"
    );
    let o = brevis([Path::new("show"), &archive, Path::new("no.such.tensor")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no tensor named") && stderr(&o).contains("brevis ls"),
        "{}",
        stderr(&o)
    );
}

/// Two shard archives swapped inside a compressed folder: each decodes, but restores the
/// other shard. `verify` and `decompress` both call it a checksum mismatch (exit 3),
/// naming the shard archive and the file the manifest expects, and `decompress` writes
/// nothing. Before, `decompress` called it a damaged folder (exit 1).
#[test]
fn swapped_shard_archives_are_a_mismatch_for_verify_and_decompress() {
    let (tmp, _, archive) = compressed_three_shards();
    let a = archive.join("model-00001-of-00003.brv");
    let b = archive.join("model-00002-of-00003.brv");
    let t = archive.join("t");
    for (from, to) in [(&a, &t), (&b, &a), (&t, &b)] {
        std::fs::rename(from, to).unwrap();
    }
    let v = brevis([Path::new("verify"), &archive]);
    assert_eq!(v.status.code(), Some(3), "{}{}", stdout(&v), stderr(&v));
    assert!(
        stdout(&v).contains(
            "model-00001-of-00003.safetensors: restores another file than \
             \"model-00001-of-00003.safetensors\" (1774896 bytes with whole-file checksum "
        ) && stdout(&v).contains("where the manifest says 306712 bytes with "),
        "{}",
        stdout(&v)
    );
    let out = tmp.path().join("out");
    let d = brevis([Path::new("decompress"), &archive, Path::new("-o"), &out]);
    assert_eq!(d.status.code(), Some(3), "{}", stderr(&d));
    let e = stderr(&d);
    assert!(
        e.contains("model-00001-of-00003.brv: restores another file than \"model-00001-of-00003.safetensors\"")
            && e.contains("checksum mismatch"),
        "{e}"
    );
    assert!(!out.exists());
    // `ls` and `show` still list what each archive holds, but warn and exit 3.
    let l = brevis([Path::new("ls"), &archive]);
    assert_eq!(l.status.code(), Some(3), "{}", stderr(&l));
    let warned = format!(
        "warning: {}: restores another file than \"model-00001-of-00003.safetensors\"",
        a.display()
    );
    assert!(stderr(&l).contains(&warned), "{}", stderr(&l));
    assert!(
        stdout(&l).contains("# model-00001-of-00003.safetensors"),
        "{}",
        stdout(&l)
    );
    let name = "embeddings.position_ids";
    let s = brevis([Path::new("show"), &archive, Path::new(name)]);
    assert_eq!(s.status.code(), Some(3), "{}", stderr(&s));
    assert!(
        stderr(&s).contains("restores another file than"),
        "{}",
        stderr(&s)
    );
    assert!(stdout(&s).contains("scan"), "{}", stdout(&s));
    // `ls --json` too: the same warning, exit 3, and which files do not match.
    let j = brevis([Path::new("ls"), &archive, Path::new("--json")]);
    assert_eq!(j.status.code(), Some(3), "{}", stderr(&j));
    assert!(stderr(&j).contains(&warned), "{}", stderr(&j));
    let v: Value = serde_json::from_slice(&j.stdout).unwrap();
    let matches: Vec<(String, bool)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "archive")
        .map(|f| {
            let path = f["path"].as_str().unwrap().to_string();
            (path, f["matches_manifest"].as_bool().unwrap())
        })
        .collect();
    assert_eq!(
        matches,
        [
            ("model-00001-of-00003.safetensors".to_string(), false),
            ("model-00002-of-00003.safetensors".to_string(), false),
            ("model-00003-of-00003.safetensors".to_string(), true),
        ]
    );
    // A tensor no shard holds now: the swap is the likely cause, said as such, exit 3.
    let n = brevis([Path::new("show"), &archive, Path::new("no.such.tensor")]);
    assert_eq!(n.status.code(), Some(3), "{}", stderr(&n));
    assert!(
        stderr(&n).contains("no tensor named \"no.such.tensor\" in its 3 shards, and a shard archive does not restore the file its manifest names"),
        "{}",
        stderr(&n)
    );
    // Put back, both are quiet and succeed.
    for (from, to) in [(&a, &t), (&b, &a), (&t, &b)] {
        std::fs::rename(from, to).unwrap();
    }
    let l = brevis([Path::new("ls"), &archive]);
    assert_eq!(l.status.code(), Some(0), "{}", stderr(&l));
    assert_eq!(stderr(&l), "");
    let j = brevis([Path::new("ls"), &archive, Path::new("--json")]);
    assert_eq!(j.status.code(), Some(0), "{}", stderr(&j));
    // A shard archive gone: an error, with or without --json.
    std::fs::remove_file(&b).unwrap();
    for args in [vec![], vec![Path::new("--json")]] {
        let mut all = vec![Path::new("ls"), archive.as_path()];
        all.extend(args);
        let o = brevis(&all);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("model-00002-of-00003.brv: cannot open"),
            "{}",
            stderr(&o)
        );
    }
}

/// The shared failure case `B28_shards_ok` (two shards, an index) compressed by the CLI
/// as `dir/c.brv`. Returns the archive folder and the CLI's output.
fn compressed_b28(dir: &Path) -> (PathBuf, Output) {
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cases/B28_shards_ok");
    let packed = dir.join("c.brv");
    let c = brevis([Path::new("compress"), &input, Path::new("-o"), &packed]);
    assert!(c.status.success(), "{}", stderr(&c));
    (packed, c)
}

/// Counts of one take the singular: "1 file copied", not "1 files copied".
#[test]
fn folder_compress_counts_agree_with_their_nouns() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, c) = compressed_b28(tmp.path());
    assert!(
        stdout(&c).contains("2 shards, 4 tensors, 1 file copied"),
        "{}",
        stdout(&c)
    );
    let v = brevis([Path::new("verify"), &out]);
    assert!(
        stdout(&v).contains(": ok: 3 files (2 shards) match"),
        "{}",
        stdout(&v)
    );
}

/// A manifest whose length field for a shard is wrong (the shard itself intact) is named
/// as a damaged manifest, not as a checksum mismatch printing two equal checksums; a
/// shard whose header record is damaged makes `decompress` fail naming the shard and the
/// record, with nothing written (both found by a tester).
#[test]
fn folder_decompress_names_a_damaged_manifest_length_and_a_damaged_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let (packed, _) = compressed_b28(tmp.path());

    let manifest = packed.join("brevis-folder.json");
    let original = std::fs::read(&manifest).unwrap();
    let mut m: Value = serde_json::from_slice(&original).unwrap();
    m["files"][0]["bytes"] = json!(99_999_999u64);
    // As a manifest from before `files_xxh3` (which would refuse the change at once).
    m.as_object_mut().unwrap().remove("files_xxh3").unwrap();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let out = tmp.path().join("out");
    let d = brevis([Path::new("decompress"), &packed, Path::new("-o"), &out]);
    assert_eq!(d.status.code(), Some(1), "{}", stderr(&d));
    let first = m["files"][0]["path"].as_str().unwrap();
    assert!(
        stderr(&d).contains(&format!(
            "brevis-folder.json: damaged folder manifest: it says 99999999 bytes for \"{first}\", whose stored file has its checksum but"
        )),
        "{}",
        stderr(&d)
    );
    assert!(!out.exists());
    std::fs::write(&manifest, &original).unwrap();

    let shard = packed.join("model-00002-of-00002.brv");
    damage_header_record(&shard);
    let d = brevis([Path::new("decompress"), &packed, Path::new("-o"), &out]);
    assert_eq!(d.status.code(), Some(3), "{}", stderr(&d));
    assert!(
        stderr(&d).starts_with(&format!(
            "error: {}: damaged archive: record 0 (the header): ",
            shard.display()
        )),
        "{}",
        stderr(&d)
    );
    assert!(!out.exists());
}

/// Flips one bit in the middle of the header record of the archive at `path` (the
/// record that names every tensor, which begins after the 16-byte file header).
fn damage_header_record(path: &Path) {
    let a = brevis::Archive::open(path).unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let first = a.tensors()[0].record.start;
    assert!(
        first > 40,
        "the header record comes before the first tensor's"
    );
    bytes[(16 + first) / 2] ^= 0x01;
    std::fs::write(path, &bytes).unwrap();
}

/// `ls` of a folder whose shard archive has a damaged header record fails, naming the
/// shard and the record, and exits 3, with or without `--json` (whose object says
/// `ok: false` and carries the error), as `ls` of the shard alone does; the sound folder
/// lists with exit 0.
#[test]
fn ls_of_a_folder_with_a_damaged_shard_record_exits_3() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, _) = compressed_b28(tmp.path());
    let o = brevis([Path::new("ls"), &archive, Path::new("--json")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let shards: Vec<&Value> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "archive")
        .collect();
    assert!(shards.iter().all(|f| f["records_match_header"] == true));

    let shard = archive.join("model-00001-of-00002.brv");
    damage_header_record(&shard);
    let error = format!(
        "{}: damaged archive: record 0 (the header): ",
        shard.display()
    );
    let o = brevis([Path::new("ls"), &archive]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).starts_with(&format!("error: {error}")),
        "{}",
        stderr(&o)
    );
    let alone = brevis([Path::new("ls"), &shard]);
    assert_eq!(alone.status.code(), Some(3));
    assert!(stderr(&alone).starts_with(&format!("error: {error}")));
    let o = brevis([Path::new("ls"), &archive, Path::new("--json")]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().starts_with(&error), "{v}");
}

/// A single-file archive checked `--against` a shard index or a checkpoint folder is
/// refused with a message that says what `--against` takes, exit 1 (it compared the
/// index's own bytes, exit 3 "differs at byte 0").
#[test]
fn a_single_file_archive_is_not_checked_against_a_folder_or_index() {
    let (tmp, src, _) = compressed_three_shards();
    let shard = src.join("model-00001-of-00003.safetensors");
    let single = tmp.path().join("one.brv");
    let c = brevis([Path::new("compress"), &shard, Path::new("-o"), &single]);
    assert!(c.status.success(), "{}", stderr(&c));
    let index = src.join("model.safetensors.index.json");
    for original in [&index, &src] {
        let o = brevis([
            Path::new("verify"),
            &single,
            Path::new("--against"),
            original,
        ]);
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        let want = format!(
            "{}: is a checkpoint folder or shard index, and {} is a single-file archive: \
             --against takes the original .safetensors file it was made from",
            original.display(),
            single.display()
        );
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
        assert_eq!(stdout(&o), "");
    }
    // The shard itself still verifies against its archive.
    let o = brevis([Path::new("verify"), &single, Path::new("--against"), &shard]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

/// A manifest entry changed after writing (a renamed path, a wrong length) is refused
/// when the folder is opened, by every command alike (exit 1, naming the manifest's
/// checksum): a tester renamed a shard's path and `verify` passed while `decompress`
/// restored a folder whose index named a missing file. A manifest from before
/// `files_xxh3` is read unchecked, and a wrong length then is named as a damaged
/// manifest by `verify` and `ls` (exit 3; it said "whole-file checksum does not match",
/// and `ls` printed two equal checksums as a mismatch).
#[test]
fn changed_manifest_entries_are_refused_or_named() {
    let (tmp, _, archive) = compressed_three_shards();
    let manifest = archive.join("brevis-folder.json");
    let original: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let first = "model-00001-of-00003.safetensors";
    let at = original["files"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["path"] == first)
        .unwrap();
    let edited = |f: &dyn Fn(&mut Map<String, Value>)| {
        let mut m = original.clone();
        f(m["files"][at].as_object_mut().unwrap());
        m
    };
    let out = tmp.path().join("out");
    let renamed = edited(&|e| {
        e.insert("path".into(), json!("other.safetensors"));
    });
    let longer = edited(&|e| {
        let b = e["bytes"].as_u64().unwrap();
        e.insert("bytes".into(), json!(b + 1));
    });
    for m in [&renamed, &longer] {
        std::fs::write(&manifest, serde_json::to_vec_pretty(m).unwrap()).unwrap();
        for args in [
            vec![Path::new("verify"), &archive],
            vec![Path::new("ls"), &archive],
            vec![Path::new("decompress"), &archive, Path::new("-o"), &out],
        ] {
            let o = brevis(&args);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains(
                    "brevis-folder.json: damaged folder manifest: its entries do not match \
                     their checksum (stored "
                ),
                "{args:?}: {}",
                stderr(&o)
            );
            assert!(!out.exists());
        }
    }

    // Without `files_xxh3` (an earlier version's manifest) a wrong length is named.
    let mut m = longer.clone();
    m.as_object_mut().unwrap().remove("files_xxh3").unwrap();
    std::fs::write(&manifest, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let entry = &original["files"][at];
    let (bytes, sum) = (
        entry["bytes"].as_u64().unwrap(),
        entry["xxh3"].as_str().unwrap(),
    );
    let want = format!(
        "the manifest says {} bytes for \"{first}\", whose archive restores {bytes} bytes \
         with the manifest's checksum {sum}: the manifest's length is damaged",
        bytes + 1
    );
    let v = brevis([Path::new("verify"), &archive]);
    assert_eq!(v.status.code(), Some(3), "{}{}", stdout(&v), stderr(&v));
    assert!(stdout(&v).contains(&want), "{}", stdout(&v));
    assert!(
        !stdout(&v).contains("whole-file checksum does not match"),
        "{}",
        stdout(&v)
    );
    let l = brevis([Path::new("ls"), &archive]);
    assert_eq!(l.status.code(), Some(3), "{}", stderr(&l));
    assert!(stderr(&l).contains(&want), "{}", stderr(&l));

    // A bad archive field is named as such (it was "bad or repeated entry" for the path).
    for (archive_field, says) in [
        (
            json!("../x.brv"),
            "its archive \"../x.brv\" is not a relative path inside the folder",
        ),
        (Value::Null, "it is a shard but names no archive"),
    ] {
        let mut m = edited(&|e| {
            e.insert("archive".into(), archive_field.clone());
        });
        m.as_object_mut().unwrap().remove("files_xxh3").unwrap();
        std::fs::write(&manifest, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
        let o = brevis([Path::new("ls"), &archive]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let want = format!("damaged folder manifest: bad entry for \"{first}\": {says}");
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    }

    // A script reading `--json` is told the archive is damaged.
    std::fs::write(&manifest, serde_json::to_vec_pretty(&renamed).unwrap()).unwrap();
    let o = brevis([Path::new("ls"), Path::new("--json"), &archive]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (&v["kind"], &v["exit_code"]),
        (&json!("damaged_archive"), &json!(1))
    );

    // A manifest that is a folder is a damaged manifest, not a missing one (a tester saw
    // "a folder without brevis-folder.json").
    std::fs::remove_file(&manifest).unwrap();
    std::fs::create_dir(&manifest).unwrap();
    let o = brevis([Path::new("ls"), &archive]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "error: {}: damaged folder manifest: is not a regular file\n",
            manifest.display()
        )
    );
    std::fs::remove_dir(&manifest).unwrap();

    // The manifest as written opens.
    std::fs::write(&manifest, serde_json::to_vec_pretty(&original).unwrap()).unwrap();
    let v = brevis([Path::new("verify"), &archive]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
}

/// A copied file missing from a folder archive is an error for `ls` too (exit 1, naming
/// it), as it is for `verify` and `decompress` and as a missing shard archive is; `ls`
/// listed it as present, exit 0.
#[test]
fn a_missing_copied_file_is_an_error_for_every_command() {
    let (tmp, _, archive) = compressed_three_shards();
    let gone = archive.join("config.json");
    std::fs::remove_file(&gone).unwrap();
    let out = tmp.path().join("out");
    for args in [
        vec![Path::new("ls"), &archive],
        vec![Path::new("ls"), &archive, Path::new("--json")],
        vec![Path::new("verify"), &archive],
        vec![Path::new("decompress"), &archive, Path::new("-o"), &out],
        // `show` reads one shard, but a missing file is an error for it too (exit 0).
        vec![
            Path::new("show"),
            &archive,
            Path::new("embeddings.LayerNorm.bias"),
        ],
    ] {
        let o = brevis(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&gone.display().to_string()),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!out.exists());
}

/// A checkpoint folder holding a stray `brevis-folder.json` (`{}`) was refused as "a
/// Brevis folder archive ... did you mean `brevis decompress`" (found by a tester): it is
/// refused for what it is, a file that would collide with the archive's manifest,
/// naming it (kind `name_collision`), while a real compressed folder is still refused as
/// one.
#[test]
fn a_stray_manifest_name_in_a_checkpoint_is_a_collision_not_an_archive() {
    let (tmp, src, archive) = compressed_three_shards();
    let again = brevis([Path::new("compress"), &archive, Path::new("--json")]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stdout(&again).contains("\"kind\":\"wrong_kind\""),
        "{}",
        stdout(&again)
    );
    std::fs::write(src.join("brevis-folder.json"), b"{}").unwrap();
    let out = tmp.path().join("stray.brv");
    let o = brevis([
        Path::new("compress"),
        &src,
        Path::new("-o"),
        &out,
        Path::new("--json"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("\"kind\":\"name_collision\""), "{text}");
    assert!(text.contains("brevis-folder.json"), "{text}");
    assert!(text.contains("not a Brevis manifest"), "{text}");
    assert!(!out.exists());
}
