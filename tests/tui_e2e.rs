//! End to end: the real `brevis-tui` binary in a tmux pane. Opens an archive made here
//! from a real checkpoint, moves to a tensor, expands its tree, re-runs the search with
//! budget 32, verifies the whole archive, reads the verdict from the screen, quits, and
//! checks the terminal was restored (main screen, cursor visible, cooked mode). Also the
//! panic path and an archive that fails to open. Skipped, with a message, without tmux.
#![cfg(feature = "tui")]

mod support;

use brevis::archive::{compress_file, no_progress, CompressOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::corpus;

const BIN: &str = env!("CARGO_BIN_EXE_brevis-tui");

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

struct Pane {
    session: String,
}

impl Pane {
    fn new(name: &str, dir: &Path) -> Pane {
        let session = format!("brevis-e2e-{name}-{}", std::process::id());
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "132",
                "-y",
                "40",
                "-c",
            ])
            .arg(dir)
            .args([
                "env",
                "PS1=READY$ ",
                "TERM=xterm-256color",
                "bash",
                "--norc",
                "--noprofile",
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        let p = Pane { session };
        p.wait_for("READY$", Duration::from_secs(10));
        p
    }

    fn send(&self, keys: &[&str]) {
        for k in keys {
            let ok = Command::new("tmux")
                .args(["send-keys", "-t", &self.session, k])
                .status()
                .unwrap()
                .success();
            assert!(ok);
            std::thread::sleep(Duration::from_millis(120));
        }
    }

    fn line(&self, text: &str) {
        let ok = Command::new("tmux")
            .args(["send-keys", "-t", &self.session, "-l", text])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        self.send(&["Enter"]);
    }

    fn capture(&self) -> String {
        let o = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn display(&self, format: &str) -> String {
        let o = Command::new("tmux")
            .args(["display-message", "-p", "-t", &self.session, format])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn wait_for(&self, text: &str, timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let s = self.capture();
            if s.contains(text) {
                return s;
            }
            if start.elapsed() > timeout {
                panic!("timed out waiting for {text:?}; screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// After the program ended: main screen, cursor shown, terminal in cooked mode.
    fn assert_restored(&self) {
        assert_eq!(
            self.display("#{alternate_on}"),
            "0",
            "alternate screen left"
        );
        assert_eq!(self.display("#{cursor_flag}"), "1", "cursor visible");
        self.line("stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo -e -icanon -e -echo | tr '\\n' ' '; echo STTY-$((1+1))");
        let s = self.wait_for("STTY-2", Duration::from_secs(10));
        let line = s
            .lines()
            .rev()
            .find(|l| l.contains("STTY-2"))
            .unwrap_or_default()
            .to_string();
        assert!(
            line.contains("icanon") && !line.contains("-icanon"),
            "cooked mode: {line:?}"
        );
        assert!(
            line.contains("echo") && !line.contains("-echo"),
            "echo on: {line:?}"
        );
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

/// The archive to open: the real MiniLM checkpoint when the corpus is there, else the
/// demo checkpoint shipped in assets/.
fn make_archive(dir: &Path) -> PathBuf {
    let minilm = corpus("minilm-l6-v2-bf16.safetensors");
    let input = if minilm.exists() {
        minilm
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors")
    };
    let out = dir.join("model.brv");
    let start = Instant::now();
    compress_file(&input, &out, &CompressOptions::default(), &no_progress).unwrap();
    eprintln!(
        "compressed {} in {:.1} s",
        input.display(),
        start.elapsed().as_secs_f64()
    );
    out
}

#[test]
fn drive_the_real_binary_in_tmux() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = make_archive(dir.path());
    let p = Pane::new("main", dir.path());
    let opened = Instant::now();
    p.line(&format!("{BIN} {}; echo EXIT=$?", archive.display()));
    let main = p.wait_for("total of", Duration::from_secs(30));
    eprintln!(
        "open to first frame: {:.2} s",
        opened.elapsed().as_secs_f64()
    );
    eprintln!("--- main screen ---\n{main}");
    assert!(main.contains("1 Tensors"));
    assert!(main.contains("reduction"));

    // Move to a tensor and open its program tree, fully expanded.
    p.send(&["j", "j", "j", "Enter"]);
    p.wait_for("own B", Duration::from_secs(60));
    p.send(&["e"]);
    let tree = p.wait_for("subtree", Duration::from_secs(10));
    eprintln!("--- tree ---\n{tree}");
    assert!(tree.contains("lit "), "a literal leaf is shown:\n{tree}");
    assert!(
        tree.contains("100.0%"),
        "the root holds the whole record:\n{tree}"
    );

    // Re-run the search with budget 32.
    p.send(&[
        "r", "b", "BSpace", "BSpace", "BSpace", "BSpace", "3", "2", "Enter", "r",
    ]);
    let search = p.wait_for("B → new", Duration::from_secs(120));
    eprintln!("--- search ---\n{search}");
    assert!(search.contains("budget 32"), "{search}");

    // Verify the whole archive and read the verdict.
    p.send(&["V"]);
    let verify = p.wait_for("whole-file checksum", Duration::from_secs(120));
    eprintln!("--- verify ---\n{verify}");
    let verdict = verify
        .lines()
        .find(|l| l.contains("tensors bit-exact"))
        .unwrap()
        .trim()
        .to_string();
    let (n, rest) = verdict.split_once('/').unwrap();
    assert!(
        rest.starts_with(&format!(
            "{n} tensors bit-exact, whole-file checksum matches"
        )),
        "{verdict}"
    );

    p.send(&["q"]);
    // A smaller program that was not written: q asks first (issue 27), and y quits.
    if search.contains("bytes smaller") {
        p.wait_for("quit without writing", Duration::from_secs(10));
        p.send(&["y"]);
    }
    p.wait_for("EXIT=0", Duration::from_secs(10));
    p.assert_restored();
}

#[test]
fn terminal_restored_after_panic_and_open_failure() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("random.brv");
    std::fs::write(
        &bad,
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let good = dir.path().join("demo.brv");
    compress_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors"),
        &good,
        &CompressOptions::default(),
        &no_progress,
    )
    .unwrap();

    let p = Pane::new("fail", dir.path());
    p.line(&format!("{BIN} {}; echo EXIT=$?", bad.display()));
    let s = p.wait_for("EXIT=1", Duration::from_secs(10));
    assert!(
        s.contains("error:") && s.contains("not a brevis archive"),
        "{s}"
    );
    p.assert_restored();

    p.line("clear");
    p.line(&format!(
        "{BIN} {}/missing.brv; echo EXIT=$?",
        dir.path().display()
    ));
    let s = p.wait_for("EXIT=1", Duration::from_secs(10));
    assert!(s.contains("cannot open"), "{s}");

    p.line("clear");
    p.line(&format!(
        "BREVIS_TUI_TEST_PANIC=1 {BIN} {} 2>panic.txt; echo EXIT=$?; head -3 panic.txt",
        good.display()
    ));
    // The exit line can be on screen before `head` prints: wait for the message, then
    // check the code.
    let s = p.wait_for("test panic requested", Duration::from_secs(20));
    assert!(s.contains("EXIT=101"), "{s}");
    p.assert_restored();
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn safetensors_is_compressed_next_to_it_never_clobbering_and_cancel_leaves_nothing() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    std::fs::copy(&demo, dir.path().join("demo.safetensors")).unwrap();
    let p = Pane::new("st", dir.path());
    p.line("clear");
    p.line(&format!("{BIN} demo.safetensors; echo EXIT=$?"));
    let s = p.wait_for("total of 23 tensors", Duration::from_secs(120));
    assert!(
        s.contains("into ./demo.brv"),
        "the first run writes demo.brv:\n{s}"
    );
    p.send(&["q"]);
    p.wait_for("EXIT=0", Duration::from_secs(10));
    // Run again on the same input: the archive there restores it exactly (same length
    // and whole-file checksum), so it is opened instead of writing demo-1.brv.
    p.line("clear");
    p.line(&format!("{BIN} demo.safetensors; echo EXIT=$?"));
    let s = p.wait_for("total of 23 tensors", Duration::from_secs(120));
    assert!(
        s.contains(
            "opened ./demo.brv, the existing archive of this file (same length and \
             checksum); `brevis compress` makes a new one"
        ),
        "{s}"
    );
    p.send(&["q"]);
    p.wait_for("EXIT=0", Duration::from_secs(10));
    assert_eq!(files_in(dir.path()), ["demo.brv", "demo.safetensors"]);
    // Another file of the same name is not taken for its archive: then a new one.
    std::fs::rename(dir.path().join("demo.brv"), dir.path().join("keep.brv")).unwrap();
    std::fs::write(dir.path().join("demo.brv"), b"not an archive").unwrap();
    p.line("clear");
    p.line(&format!("{BIN} demo.safetensors; echo EXIT=$?"));
    let s = p.wait_for("total of 23 tensors", Duration::from_secs(120));
    assert!(s.contains("into ./demo-1.brv"), "{s}");
    p.send(&["q"]);
    p.wait_for("EXIT=0", Duration::from_secs(10));
    assert_eq!(
        files_in(dir.path()),
        ["demo-1.brv", "demo.brv", "demo.safetensors", "keep.brv"]
    );
    assert_eq!(
        std::fs::read(dir.path().join("keep.brv")).unwrap(),
        std::fs::read(dir.path().join("demo-1.brv")).unwrap(),
        "same input, same archive"
    );

    // Cancel while compressing a larger file: nothing is left behind.
    let minilm = corpus("minilm-l6-v2-bf16.safetensors");
    let big = if minilm.exists() { minilm } else { demo };
    let cdir = tempfile::tempdir().unwrap();
    std::fs::copy(&big, cdir.path().join("big.safetensors")).unwrap();
    let p = Pane::new("cancel", cdir.path());
    // Each record held 50 ms (a test hook): the compression is surely running below.
    p.line(&format!(
        "BREVIS_TUI_TEST_HOLD_MS=50 {BIN} big.safetensors; echo EXIT=$?"
    ));
    p.wait_for("compressing", Duration::from_secs(10));
    p.send(&["x"]);
    // Cancelling ends the session as asked: status 0, not an error.
    let s = p.wait_for("EXIT=0", Duration::from_secs(20));
    assert!(s.contains("cancelled: no archive was written"), "{s}");
    assert!(!s.contains("error:"), "{s}");
    p.assert_restored();
    assert_eq!(files_in(cdir.path()), ["big.safetensors"]);
}

/// A write error while compressing (here a file-size limit, as a full disk would): the
/// message names the archive the user gets, `./demo.brv`, not the staging folder
/// `.brevis-tui-XXXX/` it was being written in, and nothing is left behind.
#[test]
fn a_write_error_names_the_archive_not_the_staging_folder() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    std::fs::copy(&demo, dir.path().join("demo.safetensors")).unwrap();
    let p = Pane::new("efbig", dir.path());
    // SIGXFSZ ignored, so a write past the 1 MiB limit fails with EFBIG (an ignored
    // signal stays ignored across exec).
    p.line(&format!(
        "trap '' XFSZ; (ulimit -f 1024; exec {BIN} demo.safetensors); echo EXIT=$?"
    ));
    // Not "EXIT=" alone: the command line on the screen holds that.
    let s = p.wait_for("EXIT=1", Duration::from_secs(60));
    let line = s.lines().find(|l| l.starts_with("error:")).unwrap_or("");
    assert_eq!(
        line.trim_end(),
        "error: ./demo.brv: cannot write: File too large (os error 27)",
        "{s}"
    );
    p.assert_restored();
    assert_eq!(files_in(dir.path()), ["demo.safetensors"]);
}

/// SIGTERM from outside (a shell's `kill`, a closed session manager) while compressing:
/// the terminal is put back as after `q`, the staging folder and its temporary file are
/// removed, and the exit code is 128 + 15.
#[test]
fn sigterm_restores_the_terminal_and_leaves_nothing() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let minilm = corpus("minilm-l6-v2-bf16.safetensors");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    let big = if minilm.exists() { minilm } else { demo };
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&big, dir.path().join("big.safetensors")).unwrap();
    let p = Pane::new("sigterm", dir.path());
    let pid_file = std::env::temp_dir().join(format!("brevis-tui-sigterm-{}", std::process::id()));
    p.line(&format!(
        "sh -c 'echo $$ > {}; BREVIS_TUI_TEST_HOLD_MS=50 exec {BIN} big.safetensors'; echo EXIT=$?",
        pid_file.display()
    ));
    p.wait_for("compressing", Duration::from_secs(10));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::fs::remove_file(&pid_file);
    let ok = Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    p.wait_for("EXIT=143", Duration::from_secs(20));
    p.assert_restored();
    assert_eq!(files_in(dir.path()), ["big.safetensors"]);
}

/// Whether commands can be run as user `nobody` here (`setpriv` present, and this test
/// run by root).
fn can_run_as_nobody() -> bool {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

/// A checkpoint in a folder its user cannot write: the archive stays in a temporary
/// folder, and the line that says where is still on the screen once the shell is back
/// (a second restore of the terminal used to move the cursor above it, and the prompt
/// overwrote it).
#[test]
fn a_read_only_folder_keeps_the_archive_and_the_note_stays_on_screen() {
    if !have_tmux() || !can_run_as_nobody() {
        eprintln!("SKIPPED: needs tmux, and root to run brevis-tui as nobody");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    std::fs::copy(&demo, ro.join("demo.safetensors")).unwrap();
    for (p, mode) in [(dir.path(), 0o755), (ro.as_path(), 0o555)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let p = Pane::new("ro", dir.path());
    p.line(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups {BIN} ro/demo.safetensors; echo EXIT=$?"
    ));
    p.wait_for("total of 23 tensors", Duration::from_secs(120));
    p.send(&["q"]);
    let s = p.wait_for("EXIT=0", Duration::from_secs(10));
    let note = s
        .lines()
        .find(|l| l.contains("written to the temporary folder"))
        .unwrap_or_else(|| panic!("the note is on the screen:\n{s}"));
    assert!(
        note.starts_with("the archive was written to the temporary folder /"),
        "the whole note, from its start: {note:?}\n{s}"
    );
    p.assert_restored();
    assert_eq!(files_in(&ro), ["demo.safetensors"]);
    // The kept folder is this test's to remove: named in the note, before " (the".
    let kept = note
        .trim_start_matches("the archive was written to the temporary folder ")
        .split(" (the")
        .next()
        .unwrap()
        .to_string();
    assert!(Path::new(&kept).join("demo.brv").is_file(), "{kept}");
    std::fs::remove_dir_all(&kept).unwrap();
}

/// Issue 27, work loss: the demo (no argument) stages its archive in a temporary folder
/// that goes at exit. Search, `w`, Enter, `q`: the new archive is written in the current
/// folder, as the screen said, and is there afterwards; `q` before writing asks first.
/// Written into the temporary folder instead, the file is kept and the exit says where.
#[test]
fn the_demo_keeps_what_the_user_writes() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Pane::new("demo", dir.path());
    p.line(&format!("{BIN}; echo EXIT=$?"));
    p.wait_for("total of 23 tensors", Duration::from_secs(120));
    p.send(&["6", "r"]);
    let s = p.wait_for("B → new", Duration::from_secs(120));
    assert!(
        s.contains("embeddings.position_ids: archive 14 B → new 4 B: 10 bytes smaller"),
        "{s}"
    );
    p.send(&["q"]);
    p.wait_for(
        "quit without writing 1 pending change (embeddings.position_ids; the file +4 B)? (y/n)",
        Duration::from_secs(10),
    );
    p.send(&["n", "w"]);
    p.wait_for("write to: ./demo.researched.brv", Duration::from_secs(10));
    p.send(&["Enter"]);
    p.wait_for("✓ wrote ./demo.researched.brv", Duration::from_secs(60));
    p.send(&["q"]);
    p.wait_for("EXIT=0", Duration::from_secs(10));
    p.assert_restored();
    assert_eq!(files_in(dir.path()), ["demo.researched.brv"]);
    let written = brevis::archive::Archive::open(&dir.path().join("demo.researched.brv")).unwrap();
    assert!(brevis::archive::verify(&written, Some(1), &no_progress)
        .unwrap()
        .is_ok());

    // Into the demo's temporary folder (named in the title line): kept, and said.
    p.line("clear");
    p.line(&format!("{BIN}; echo EXIT=$?"));
    let s = p.wait_for("total of 23 tensors", Duration::from_secs(120));
    let staged = s
        .split_whitespace()
        .find(|w| w.contains("brevis-tui-demo-") && w.ends_with("/demo.brv"))
        .unwrap_or_else(|| panic!("the title names the demo's archive:\n{s}"))
        .to_string();
    let temp = Path::new(&staged).parent().unwrap().to_path_buf();
    p.send(&["6", "r"]);
    p.wait_for("B → new", Duration::from_secs(120));
    p.send(&["w"]);
    p.wait_for("write to: ./demo.researched-1.brv", Duration::from_secs(10));
    p.send(&["BSpace"; 24]);
    let mine = temp.join("mine.brv");
    p.line(&mine.display().to_string());
    p.wait_for("✓ wrote", Duration::from_secs(60));
    p.send(&["q"]);
    let s = p.wait_for("EXIT=0", Duration::from_secs(10));
    let note = format!(
        "kept what you wrote into the demo's temporary folder: {}",
        mine.display()
    );
    assert!(s.contains(&note), "{note}\n{s}");
    p.assert_restored();
    assert_eq!(
        files_in(&temp),
        ["mine.brv"],
        "the demo's own files are gone"
    );
    std::fs::remove_dir_all(&temp).unwrap();
    assert_eq!(files_in(dir.path()), ["demo.researched.brv"]);
}

/// Issue 39: search two tensors, keep both results as pending changes, ask before
/// quitting with them unwritten, write both with one `w`; the written archive verifies
/// and holds both new programs.
#[test]
fn two_searched_tensors_are_written_with_one_w() {
    if !have_tmux() {
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    use brevis::archive::{verify, Archive};
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join("demo.brv");
    compress_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors"),
        &brv,
        &CompressOptions::default(),
        &no_progress,
    )
    .unwrap();
    let before = Archive::open(&brv).unwrap();
    let ids = before.find("embeddings.position_ids").unwrap();
    let norm = before
        .find("encoder.layer.0.attention.output.LayerNorm.bias")
        .unwrap();
    assert_eq!((ids, norm), (0, 5), "the table's order");
    let p = Pane::new("pending", dir.path());
    p.line(&format!("{BIN} demo.brv; echo EXIT=$?"));
    p.wait_for("total of 23 tensors", Duration::from_secs(30));

    // The first tensor at budget 32.
    p.send(&[
        "6", "b", "BSpace", "BSpace", "BSpace", "BSpace", "3", "2", "Enter", "r",
    ]);
    let s = p.wait_for("1 pending change", Duration::from_secs(120));
    assert!(s.contains("kept as a change"), "{s}");
    // The second: five rows down (its group of two small tensors is searched).
    p.send(&["j", "j", "j", "j", "j", "r"]);
    let s = p.wait_for("2 pending changes", Duration::from_secs(120));
    eprintln!("--- second search ---\n{s}");

    // Quitting asks first; n stays.
    p.send(&["q"]);
    let s = p.wait_for(
        "quit without writing 2 pending changes",
        Duration::from_secs(10),
    );
    assert!(s.contains("embeddings.position_ids"), "{s}");
    p.send(&["n"]);
    p.wait_for(
        "not quit: w writes the pending changes",
        Duration::from_secs(10),
    );

    // Both listed, written by one w.
    p.send(&["9"]);
    let s = p.wait_for(
        "2 pending changes (w writes them all)",
        Duration::from_secs(10),
    );
    eprintln!("--- changes ---\n{s}");
    assert!(
        s.contains("encoder.layer.0.attention.output.LayerNorm.bias"),
        "{s}"
    );
    p.send(&["w"]);
    p.wait_for("write to: ", Duration::from_secs(10));
    p.send(&["Enter"]);
    let s = p.wait_for("✓ wrote", Duration::from_secs(60));
    eprintln!("--- written ---\n{s}");
    assert!(s.contains("2 changes"), "{s}");
    p.send(&["q"]);
    p.wait_for("EXIT=0", Duration::from_secs(10));
    p.assert_restored();

    let out = dir.path().join("demo.researched.brv");
    let new = Archive::open(&out).unwrap();
    assert!(verify(&new, Some(1), &no_progress).unwrap().is_ok());
    assert_eq!(
        new.program(ids).unwrap().to_string(),
        "scan add 0 : u64[512]\n  const 1 : u64[511]\n"
    );
    let (old_g, new_g) = (before.program(norm).unwrap(), new.program(norm).unwrap());
    assert_ne!(old_g, new_g, "the group holds its new program");
    assert!(
        brevis::dsl::program_len(&new_g) < brevis::dsl::program_len(&old_g),
        "{new_g}"
    );
    for (i, t) in before.tensors().iter().enumerate() {
        assert_eq!(
            new.decode_tensor(i).unwrap(),
            before.decode_tensor(i).unwrap(),
            "{}",
            t.name
        );
        if i != ids && new.tensors()[i].group != before.tensors()[norm].group {
            assert_eq!(
                new.program(i).unwrap(),
                before.program(i).unwrap(),
                "{}",
                t.name
            );
        }
    }
}
