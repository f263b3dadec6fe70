//! Safe writes (issue 5): outputs go through a temporary file in the target folder; a
//! folder that cannot be written and a full disk give one clear error line naming the
//! file, and leave nothing behind; an existing output is kept without `--force`.
//!
//! We run as root, so permission bits cannot make a folder unwritable: the tests use an
//! output whose parent is a regular file, and a folder under `/proc` (which refuses new
//! files for everyone). A full disk is simulated with a writer that fails with
//! `StorageFull` part-way.

#![cfg(feature = "cli")]

mod support;

use brevis::archive::safetensors::parse;
use brevis::archive::writer::write_archive;
use brevis::archive::{no_progress, CompressOptions};
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Output};
use support::brevis;

const SMALL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/cases/B20_mixed_dtypes.safetensors"
);

fn one_error_line(out: &Output, words: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        words.iter().all(|w| stderr.contains(w)),
        "{stderr} lacks {words:?}"
    );
    stderr
}

#[test]
fn unwritable_folders_give_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    std::fs::copy(SMALL, &input).unwrap();
    let a_file = dir.path().join("file");
    std::fs::write(&a_file, b"x").unwrap();
    // Parent is a regular file.
    let out_path = a_file.join("out.brv");
    let out = brevis([Path::new("compress"), &input, Path::new("-o"), &out_path]);
    one_error_line(&out, &["out.brv", "cannot create a temporary file"]);
    // A folder that refuses new files, with "not found": not called missing (it was
    // told "its folder does not exist").
    let proc_out = Path::new("/proc/self/out.brv");
    let out = brevis([Path::new("compress"), &input, Path::new("-o"), proc_out]);
    let line = one_error_line(
        &out,
        &[
            "/proc/self/out.brv",
            "cannot create a temporary file in its folder",
        ],
    );
    assert!(!line.contains("does not exist"), "{line}");
    // Decompress likewise.
    let brv = dir.path().join("in.brv");
    assert!(
        brevis([Path::new("compress"), &input, Path::new("-o"), &brv])
            .status
            .success()
    );
    let out = brevis([
        Path::new("decompress"),
        &brv,
        Path::new("-o"),
        &a_file.join("o"),
    ]);
    one_error_line(&out, &["cannot create a temporary file"]);
    // Nothing but what we made is in the folder.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["file", "in.brv", "in.safetensors"]);
    // An existing output is not replaced without --force, and is with it.
    std::fs::write(dir.path().join("keep"), b"precious").unwrap();
    let keep = dir.path().join("keep");
    let out = brevis([Path::new("decompress"), &brv, Path::new("-o"), &keep]);
    one_error_line(&out, &["keep", "already exists", "--force"]);
    assert_eq!(std::fs::read(&keep).unwrap(), b"precious");
    let out = brevis([
        Path::new("decompress"),
        &brv,
        Path::new("-o"),
        &keep,
        Path::new("--force"),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(&keep).unwrap(),
        std::fs::read(&input).unwrap()
    );
}

/// A sink that accepts `room` bytes, then fails like a full disk.
struct FullDisk {
    room: usize,
}

impl Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::from(io::ErrorKind::StorageFull));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_is_a_clear_error_in_both_directions() {
    let src = std::fs::read(SMALL).unwrap();
    let parsed = parse(&src).unwrap();
    let opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    let mut brv = Vec::new();
    write_archive(&parsed, &mut brv, &opts, &no_progress, Path::new("m.brv")).unwrap();
    for room in [0, 1, 15, 16, 100, brv.len() - 1] {
        let e = write_archive(
            &parsed,
            &mut FullDisk { room },
            &opts,
            &no_progress,
            Path::new("disk/out.brv"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("disk/out.brv: cannot write"), "{e}");
    }
    let a = brevis::Archive::from_bytes(brv, "m.brv").unwrap();
    for room in [0, 7, 8, 200, src.len() - 1] {
        let e = a
            .write_original(
                &mut FullDisk { room },
                Some(1),
                &no_progress,
                Path::new("disk/out.safetensors"),
            )
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("disk/out.safetensors: cannot write"), "{e}");
    }
}

/// The folder of a small sharded checkpoint from the failure cases.
const SHARDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/cases/B28_shards_ok");

/// A copy of [`SHARDS`] at `dir/name` (writable, unlike the shared original).
fn shards_copy(dir: &Path, name: &str) -> std::path::PathBuf {
    let to = dir.join(name);
    std::fs::create_dir(&to).unwrap();
    for e in std::fs::read_dir(SHARDS).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

/// Every file below `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.strip_prefix(dir).unwrap().display().to_string();
        if p.is_dir() {
            out.extend(tree(&p).into_iter().map(|s| format!("{name}/{s}")));
        } else {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// `--force` on a folder job never deletes what the job did not write: an output folder
/// that holds the input (`-o .`, `-o` the archive's own folder), is the input or lies
/// inside it is refused, and so is an existing folder that is not a previous archive
/// folder (compress) or holds a file the archive does not restore (decompress). Found by
/// a tester: `decompress models/ckpt.brv -o models --force` deleted the archive and every
/// other file in `models`, and `compress ckpt -o . --force` deleted the checkpoint.
#[test]
fn force_on_folders_never_deletes_the_input_or_foreign_files() {
    if !Path::new(SHARDS).is_dir() {
        eprintln!("skipped: {SHARDS} is missing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let ckpt = shards_copy(root, "ckpt");
    std::fs::write(root.join("notes.txt"), b"keep me\n").unwrap();
    let models = root.join("models");
    std::fs::create_dir(&models).unwrap();
    let archive = models.join("ckpt.brv");
    let ok = brevis([Path::new("compress"), &ckpt, Path::new("-o"), &archive]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::write(models.join("other-model.txt"), b"keep me too\n").unwrap();
    let mixed = root.join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    std::fs::write(mixed.join("foreign.txt"), b"not from the archive\n").unwrap();
    let before = tree(root);
    let force = Path::new("--force");
    let inside = ckpt.join("x.brv");
    let refused = [
        (
            vec![
                Path::new("decompress"),
                &archive,
                Path::new("-o"),
                &models,
                force,
            ],
            vec!["models", "holds the input"],
        ),
        (
            vec![Path::new("compress"), &ckpt, Path::new("-o"), root, force],
            vec!["holds the input"],
        ),
        (
            vec![Path::new("compress"), &ckpt, Path::new("-o"), &ckpt, force],
            vec!["is the input folder"],
        ),
        (
            vec![Path::new("compress"), &ckpt, Path::new("-o"), &inside],
            vec!["inside the input folder"],
        ),
        (
            vec![
                Path::new("compress"),
                &ckpt,
                Path::new("-o"),
                &models,
                force,
            ],
            vec!["not a brevis folder archive"],
        ),
        (
            vec![
                Path::new("decompress"),
                &archive,
                Path::new("-o"),
                &mixed,
                force,
            ],
            vec!["which this archive does not restore"],
        ),
    ];
    for (args, words) in refused {
        let out = brevis(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        one_error_line(&out, &words);
        assert_eq!(tree(root), before, "{args:?} changed the files");
    }
    // A previous archive folder and a previous restore are replaced.
    let again = brevis([
        Path::new("compress"),
        &ckpt,
        Path::new("-o"),
        &archive,
        force,
    ]);
    assert!(again.status.success());
    let restored = root.join("restored");
    for _ in 0..2 {
        let out = brevis([
            Path::new("decompress"),
            &archive,
            Path::new("-o"),
            &restored,
            force,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(tree(&restored), tree(&ckpt));
}

/// `compress .` inside a checkpoint folder names the archive after the folder, beside
/// it (`../ckpt.brv`), not `./..brv` inside the input.
#[test]
fn compressing_dot_writes_the_archive_beside_the_folder() {
    if !Path::new(SHARDS).is_dir() {
        eprintln!("skipped: {SHARDS} is missing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = shards_copy(tmp.path(), "ckpt");
    let out = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(["compress", "."])
        .current_dir(&ckpt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp
        .path()
        .join("ckpt.brv")
        .join("brevis-folder.json")
        .is_file());
    assert!(
        !tree(&ckpt).iter().any(|f| f.contains(".brv")),
        "{:?}",
        tree(&ckpt)
    );
}

/// Even with `--force`, an output that is not a regular file is refused and left as it
/// was: a FIFO (a device such as `/dev/null` is refused the same way: a tester's
/// `compress ... -o /dev/null --force` replaced `/dev/null` with a regular file) and a
/// symbolic link (the new file would replace the link, not write through it).
#[test]
fn force_never_replaces_special_files_or_links() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(tmp.path().join("elsewhere.brv"), &link).unwrap();
    let archive = tmp.path().join("small.brv");
    let ok = brevis([
        Path::new("compress"),
        Path::new(SMALL),
        Path::new("-o"),
        &archive,
    ]);
    assert!(ok.status.success());
    let mut outputs = vec![(link.clone(), "symbolic link")];
    if made.is_ok_and(|s| s.success()) {
        outputs.push((fifo.clone(), "not a regular file"));
    }
    for (out, why) in outputs {
        for (cmd, input) in [("compress", Path::new(SMALL)), ("decompress", &archive)] {
            let args = [
                Path::new(cmd),
                input,
                Path::new("-o"),
                &out,
                Path::new("--force"),
            ];
            one_error_line(&brevis(args), &[why]);
            let kind = std::fs::symlink_metadata(&out).unwrap().file_type();
            assert!(
                !kind.is_file(),
                "{cmd} -o {} made it a regular file",
                out.display()
            );
        }
    }
}

/// A symbolic link to a file inside a checkpoint folder is kept as the file it points to
/// (a Hugging Face cache snapshot is made of them); a link to a folder (which could loop:
/// a tester's `up -> ..` recursed 40 levels) and a broken link are refused, named.
#[test]
fn folder_links_to_files_are_followed_and_links_to_folders_refused() {
    if !Path::new(SHARDS).is_dir() {
        eprintln!("skipped: {SHARDS} is missing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let real = shards_copy(root, "blobs");
    let snap = root.join("snapshot");
    std::fs::create_dir(&snap).unwrap();
    for f in tree(&real) {
        std::os::unix::fs::symlink(real.join(&f), snap.join(&f)).unwrap();
    }
    let archive = root.join("snap.brv");
    let restored = root.join("restored");
    let c = brevis([Path::new("compress"), &snap, Path::new("-o"), &archive]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let d = brevis([
        Path::new("decompress"),
        &archive,
        Path::new("-o"),
        &restored,
    ]);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    for f in tree(&real) {
        let back = restored.join(&f);
        assert!(std::fs::symlink_metadata(&back).unwrap().is_file(), "{f}");
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(real.join(&f)).unwrap()
        );
    }
    std::os::unix::fs::symlink("..", snap.join("up")).unwrap();
    let out = root.join("loop.brv");
    one_error_line(
        &brevis([Path::new("compress"), &snap, Path::new("-o"), &out]),
        &["up", "symbolic link to a folder"],
    );
    std::fs::remove_file(snap.join("up")).unwrap();
    std::os::unix::fs::symlink(root.join("missing"), snap.join("gone")).unwrap();
    one_error_line(
        &brevis([Path::new("compress"), &snap, Path::new("-o"), &out]),
        &["gone", "broken symbolic link"],
    );
    assert!(!out.exists());
}

/// `decompress --force` into a previous restore holding a link to a folder refused it
/// with "cannot archive": the refusal uses decompress's verb and leaves the folder as is.
#[test]
fn decompress_force_refuses_a_link_to_a_folder_as_cannot_replace() {
    if !Path::new(SHARDS).is_dir() {
        eprintln!("skipped: {SHARDS} is missing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let ckpt = shards_copy(root, "ckpt");
    let archive = root.join("ckpt.brv");
    let restored = root.join("restored");
    let c = brevis([Path::new("compress"), &ckpt, Path::new("-o"), &archive]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let args = [
        Path::new("decompress"),
        &archive,
        Path::new("-o"),
        &restored,
        Path::new("--force"),
    ];
    let d = brevis(args);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    // `tree` follows links: list the folder before the link loops back above it.
    let before = tree(&restored);
    std::os::unix::fs::symlink("..", restored.join("up")).unwrap();
    let err = one_error_line(
        &brevis(args),
        &[
            "up: cannot replace: is a symbolic link to a folder; --force replaces only a \
             folder of the archive's own files",
        ],
    );
    assert!(!err.contains("cannot archive"), "{err}");
    let link = restored.join("up");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    std::fs::remove_file(&link).unwrap();
    assert_eq!(tree(&restored), before);
}

/// `compress DIR -o X --force` replaces `X` only when it is a previous archive folder
/// holding nothing but what its manifest lists: found by a tester, any folder holding a
/// file named `brevis-folder.json` (valid or not) was deleted with everything in it, and a
/// real archive folder lost a file the user had added to it.
#[test]
fn compress_force_keeps_folders_with_foreign_files_even_beside_a_manifest() {
    if !Path::new(SHARDS).is_dir() {
        eprintln!("skipped: {SHARDS} is missing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let ckpt = shards_copy(root, "ckpt");
    let force = Path::new("--force");
    // A folder with a fake manifest and user files.
    let victim = root.join("victim");
    std::fs::create_dir_all(victim.join("deep")).unwrap();
    std::fs::write(victim.join("brevis-folder.json"), b"{}").unwrap();
    std::fs::write(victim.join("important.txt"), b"important\n").unwrap();
    std::fs::write(victim.join("deep/data.bin"), b"keep\n").unwrap();
    // A real archive folder with one file the user added.
    let archive = root.join("ckpt.brv");
    let ok = brevis([Path::new("compress"), &ckpt, Path::new("-o"), &archive]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::write(archive.join("added-later.safetensors"), b"user data\n").unwrap();
    let before = tree(root);
    for (out_dir, words) in [
        (&victim, vec!["victim", "not a valid manifest"]),
        (
            &archive,
            vec!["ckpt.brv", "added-later.safetensors", "not part of"],
        ),
    ] {
        let out = brevis([
            Path::new("compress"),
            &ckpt,
            Path::new("-o"),
            out_dir,
            force,
        ]);
        one_error_line(&out, &words);
        assert_eq!(
            tree(root),
            before,
            "{} changed the files",
            out_dir.display()
        );
    }
    // Without the added file, the archive folder is replaced.
    std::fs::remove_file(archive.join("added-later.safetensors")).unwrap();
    let again = brevis([
        Path::new("compress"),
        &ckpt,
        Path::new("-o"),
        &archive,
        force,
    ]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// `calibrate` writes its prior as every other output is written (found by a tester: it
/// used a plain write): never over its input, never through a link (dangling or not),
/// and through a temporary file.
#[test]
fn calibrate_never_writes_over_its_input_or_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.safetensors");
    std::fs::copy(SMALL, &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    let force = Path::new("--force");
    let cal = Path::new("calibrate");
    let o = Path::new("-o");
    let out = brevis([cal, &input, o, &input, force]);
    one_error_line(&out, &["in.safetensors"]);
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let out = brevis([cal, &input, o, &link, force]);
    one_error_line(&out, &["link.json", "is the input"]);
    let other = dir.path().join("other.txt");
    std::fs::write(&other, b"keep\n").unwrap();
    let link2 = dir.path().join("link2.json");
    std::os::unix::fs::symlink(&other, &link2).unwrap();
    let out = brevis([cal, &input, o, &link2, force]);
    one_error_line(&out, &["link2.json", "symbolic link"]);
    assert_eq!(std::fs::read(&other).unwrap(), b"keep\n");
    let dangling = dir.path().join("dangling.json");
    let target = dir.path().join("created-through-link.json");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    let out = brevis([cal, &input, o, &dangling]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!target.exists(), "wrote through a dangling link");
    assert_eq!(
        std::fs::read(&input).unwrap(),
        original,
        "the input changed"
    );
    // A plain new file is written, and replaced only with --force.
    let prior = dir.path().join("prior.json");
    assert!(brevis([cal, &input, o, &prior]).status.success());
    assert!(std::fs::read_to_string(&prior)
        .unwrap()
        .contains("\"schema\""));
    one_error_line(&brevis([cal, &input, o, &prior]), &["prior.json", "exists"]);
    assert!(brevis([cal, &input, o, &prior, force]).status.success());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 6, "temporary files left: {names:?}");
}

/// An output whose folder does not exist gets one error line that names the output and
/// says its folder is missing, for every command that writes a file or a folder; no
/// message names the temporary path (`.brevis-XXXX.tmp`) the user never asked for.
#[test]
fn a_missing_output_folder_is_named_and_no_temporary_path_is() {
    let dir = tempfile::tempdir().unwrap();
    let folder = shards_copy(dir.path(), "ckpt");
    let input = dir.path().join("in.safetensors");
    std::fs::copy(SMALL, &input).unwrap();
    let brv = dir.path().join("in.brv");
    let packed = dir.path().join("ckpt.brv");
    for (cmd, from, to) in [("compress", &input, &brv), ("compress", &folder, &packed)] {
        let out = brevis([Path::new(cmd), from, Path::new("-o"), to]);
        assert!(out.status.success(), "{out:?}");
    }
    let missing = dir.path().join("missing");
    let cases: [(&str, &Path, &str); 5] = [
        ("compress", &input, "x.brv"),
        ("compress", &folder, "x"),
        ("decompress", &brv, "x.safetensors"),
        ("decompress", &packed, "x"),
        ("calibrate", &input, "p.json"),
    ];
    for (cmd, from, name) in cases {
        let to = missing.join(name);
        let out = brevis([Path::new(cmd), from, Path::new("-o"), &to]);
        let line = one_error_line(
            &out,
            &[&to.display().to_string(), "its folder does not exist"],
        );
        assert!(!line.contains(".brevis-"), "{cmd}: {line}");
    }
    assert!(!missing.exists());
}

/// An input written to while it was being compressed gave exit 0 and an archive that
/// failed its own `verify` and could not be decompressed (found by a tester: `dd` into
/// the file 0.15 s into a compression): the change is noticed at the end, the job fails
/// with kind `input_changed` naming the file, and no output (nor temporary) is left.
#[test]
fn an_input_changed_while_compressing_fails_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors"),
        &input,
    )
    .unwrap();
    let output = dir.path().join("m.brv");
    let opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    // The first record written: overwrite the input's last bytes in place (a new
    // modification time, as any write gives).
    let wrote = std::sync::atomic::AtomicBool::new(false);
    let progress = |ev: brevis::archive::ProgressEvent<'_>| {
        if matches!(ev, brevis::archive::ProgressEvent::Item { .. })
            && !wrote.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&input)
                .unwrap();
            let len = f.metadata().unwrap().len();
            io::Seek::seek(&mut f, io::SeekFrom::Start(len - 4)).unwrap();
            f.write_all(&[1, 2, 3, 4]).unwrap();
        }
    };
    let err = brevis::compress_file(&input, &output, &opts, &progress).unwrap_err();
    assert_eq!(err.kind(), "input_changed", "{err}");
    let text = err.to_string();
    assert!(text.contains("m.safetensors"), "{text}");
    assert!(
        text.contains("changed while it was being compressed"),
        "{text}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["m.safetensors".to_string()]);
    // Unchanged, the same input compresses.
    brevis::compress_file(&input, &output, &opts, &|_| {}).unwrap();
    assert!(output.exists());
}

/// An input truncated by another program while it was being compressed killed the
/// process with SIGBUS (exit 135, no message, a temporary file left: found by a tester).
/// With the truncation guard the pages past the new end read as zeros, the job fails as
/// an input that changed, says the file was truncated, and leaves nothing behind.
#[cfg(unix)]
#[test]
fn an_input_truncated_while_compressing_is_an_error_not_a_crash() {
    brevis::archive::install_truncation_guard();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors"),
        &input,
    )
    .unwrap();
    let output = dir.path().join("m.brv");
    let opts = CompressOptions {
        jobs: Some(1),
        ..CompressOptions::default()
    };
    // When the header's record is written, cut the file to its first 64 KiB: the
    // tensors not read yet are gone from under the mapping.
    let cut = std::sync::atomic::AtomicBool::new(false);
    let progress = |ev: brevis::archive::ProgressEvent<'_>| {
        if matches!(ev, brevis::archive::ProgressEvent::Item { .. })
            && !cut.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&input)
                .unwrap();
            f.set_len(64 << 10).unwrap();
        }
    };
    let err = brevis::compress_file(&input, &output, &opts, &progress).unwrap_err();
    assert_eq!(err.kind(), "input_changed", "{err}");
    assert!(brevis::archive::truncated_while_read());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["m.safetensors".to_string()]);
}

/// Unmounts and detaches what [`writeback_error_fails_the_job`] set up, in reverse.
struct Mounts(Vec<Vec<String>>);

impl Drop for Mounts {
    fn drop(&mut self) {
        for cmd in self.0.iter().rev() {
            let _ = Command::new(&cmd[0]).args(&cmd[1..]).output();
        }
    }
}

fn run_ok(cmd: &[&str]) -> Option<String> {
    let o = Command::new(cmd[0]).args(&cmd[1..]).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Bytes used on the file system holding `path`, in KiB.
fn used_kib(path: &Path) -> u64 {
    run_ok(&["df", "--output=used", path.to_str().unwrap()])
        .and_then(|s| s.lines().last()?.trim().parse().ok())
        .unwrap_or(0)
}

/// A writeback error that the background sync sees is the job's error: exit 1, nothing
/// left. (A tester's run: an ext2 image on a loop device whose backing tmpfs filled up
/// while `decompress` wrote to it and then grew again. The sync thread's `fdatasync`
/// failed with ENOSPC and was ignored, "as the final sync reports it", but Linux reports
/// a writeback error once per open file: the final `fsync` returned 0, and `decompress`
/// exited 0 with `"ok": true` and a file that differed on the disk.) Needs root, tmpfs,
/// a loop device and `mkfs.ext2`; skipped otherwise.
#[test]
fn writeback_error_fails_the_job() {
    if run_ok(&["id", "-u"]).as_deref() != Some("0")
        || run_ok(&["which", "losetup", "mkfs.ext2"]).is_none()
    {
        eprintln!("SKIPPED: needs root, losetup and mkfs.ext2");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 160 MiB of pseudo-random BF16 words: stored nearly raw, restored in about a second.
    let words = 80 << 20;
    let header = format!(
        "{{\"t\":{{\"dtype\":\"BF16\",\"shape\":[{words}],\"data_offsets\":[0,{}]}}}}",
        2 * words
    );
    let mut src = Vec::with_capacity(8 + header.len() + 2 * words);
    src.extend_from_slice(&(header.len() as u64).to_le_bytes());
    src.extend_from_slice(header.as_bytes());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while src.len() < 8 + header.len() + 2 * words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        src.extend_from_slice(&x.to_le_bytes());
    }
    src.truncate(8 + header.len() + 2 * words);
    let input = d.join("big.safetensors");
    std::fs::write(&input, &src).unwrap();
    let archive = d.join("big.brv");
    let o = brevis([Path::new("compress"), &input, Path::new("-o"), &archive]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir(&back).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let (back_s, mnt_s) = (back.to_str().unwrap(), mnt.to_str().unwrap());
    let mut undo = Mounts(Vec::new());
    if run_ok(&["mount", "-t", "tmpfs", "-o", "size=60m", "tmpfs", back_s]).is_none() {
        eprintln!("SKIPPED: cannot mount a tmpfs");
        return;
    }
    undo.0.push(vec!["umount".into(), back_s.into()]);
    let img = back.join("img");
    let img_s = img.to_str().unwrap();
    let Some(dev) = run_ok(&["truncate", "-s", "400M", img_s])
        .and_then(|_| run_ok(&["mkfs.ext2", "-q", "-F", img_s]))
        .and_then(|_| run_ok(&["losetup", "-f", "--show", img_s]))
    else {
        eprintln!("SKIPPED: cannot make a loop device");
        return;
    };
    undo.0
        .push(vec!["losetup".into(), "-d".into(), dev.clone()]);
    if run_ok(&["mount", &dev, mnt_s]).is_none() {
        eprintln!("SKIPPED: cannot mount the loop device");
        return;
    }
    undo.0.push(vec!["umount".into(), mnt_s.into()]);

    let out = mnt.join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args([Path::new("decompress"), &archive, Path::new("-o"), &out])
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the backing store to fill (the image's writeback then fails), then give
    // it room again, so that only the syncs made meanwhile saw the error.
    let mut filled = false;
    while child.try_wait().unwrap().is_none() {
        if used_kib(&back) >= 59_000 {
            filled = true;
            std::thread::sleep(std::time::Duration::from_millis(300));
            run_ok(&["mount", "-o", "remount,size=600m", back_s]);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    if !filled {
        eprintln!("SKIPPED: the job ended before the backing store filled");
        return;
    }
    let _ = run_ok(&["sync"]);
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    let stdout = String::from_utf8_lossy(&o.stdout);
    if o.status.success() {
        // Never "ok" with other bytes on the disk.
        assert!(
            std::fs::read(&out).unwrap() == src,
            "exit 0 ({stdout}) but the restored file differs on the disk"
        );
    } else {
        assert_eq!(o.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains("\"kind\":\"io\""), "{stdout}");
        assert!(!out.exists(), "no output under the final name");
    }
}

/// Past the file-size limit (`ulimit -f`) a job fails as on a full disk, saying so, and
/// leaves nothing (SIGXFSZ killed it: exit 153, no message, its temporary left).
#[test]
fn a_file_size_limit_is_an_error_not_a_kill() {
    let big = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/whisper-tiny-en-f16.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.brv");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -f 2048; exec {} compress {} -o {} --json",
            env!("CARGO_BIN_EXE_brevis"),
            big.display(),
            out.display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("w.brv: cannot write: File too large"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "io");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left"
    );
}

/// A temporary that cannot be removed is named in the error, as nothing else removes it
/// (a folder made read-only while `compress` ran: the rename failed, and so did the
/// removal of the complete 64 MB temporary, which the message did not mention). Needs
/// root, to run `brevis` as nobody and take the folder away from it; skipped otherwise.
#[test]
fn a_temporary_left_behind_is_named() {
    let as_nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    let can = Command::new("setpriv")
        .args(as_nobody)
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !can {
        eprintln!("SKIPPED: needs root and setpriv");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let whisper = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus/whisper-tiny-en-f16.safetensors");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let chown = Command::new("chown")
        .arg("65534:65534")
        .arg(&ro)
        .status()
        .unwrap();
    assert!(chown.success());
    let out = ro.join("w.brv");
    // A search budget that keeps it busy for seconds.
    let child = Command::new("setpriv")
        .args(as_nobody)
        .arg(env!("CARGO_BIN_EXE_brevis"))
        .args([Path::new("compress"), &whisper, Path::new("-o"), &out])
        .args(["--budget", "50", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once its temporary exists, the folder is taken away.
    let start = std::time::Instant::now();
    while std::fs::read_dir(&ro).unwrap().count() == 0 {
        assert!(start.elapsed().as_secs() < 30, "no temporary appeared");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let o = child.wait_with_output().unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    let left: Vec<String> = std::fs::read_dir(&ro)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(".brevis-") && left[0].ends_with(".tmp"),
        "{left:?}"
    );
    assert!(
        stderr.contains("cannot rename into place: Permission denied")
            && stderr.contains(&format!(
                "its temporary {} could not be removed (delete it yourself)",
                ro.join(&left[0]).display()
            )),
        "{stderr}"
    );
    assert!(!out.exists());
}
