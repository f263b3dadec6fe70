//! Writing a re-searched program into a new archive from the Search view (`w`), and
//! stopping a whole-archive verification between tensors. Runs on an archive made here
//! from the built-in demo checkpoint (a real BF16 model's first layer).
#![cfg(feature = "tui")]

use brevis::archive::{
    compress_file, no_progress, verify, verify_against, verify_until, Archive, CompressOptions,
    ProgressEvent,
};
use brevis::tui::action::View;
use brevis::tui::app::{App, PriorMode};
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::event::map_key;
use brevis::tui::ui;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors")
}

/// The demo compressed into `dir` as `demo.brv`.
fn demo_archive(dir: &Path) -> PathBuf {
    let out = dir.join("demo.brv");
    compress_file(&demo(), &out, &CompressOptions::default(), &no_progress).unwrap();
    out
}

fn press(app: &mut App, code: KeyCode) {
    if let Some(a) = map_key(app.key_context(), KeyEvent::new(code, KeyModifiers::NONE)) {
        app.apply(a);
    }
    assert!(app.settle(Duration::from_secs(120)), "jobs did not finish");
}

fn keys(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn screen_text(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 0..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

/// Replaces the text of the write prompt with `path`.
fn type_path(app: &mut App, path: &Path) {
    let n = app.search.prompt.as_ref().unwrap().path.chars().count();
    for _ in 0..n {
        press(app, KeyCode::Backspace);
    }
    keys(app, &path.display().to_string());
}

#[test]
fn w_writes_the_new_program_into_a_new_archive() {
    let dir = tempfile::tempdir().unwrap();
    let brv = demo_archive(dir.path());
    let original = Archive::open(&brv).unwrap();
    let before = std::fs::read(&brv).unwrap();
    let t = original
        .find("embeddings.position_embeddings.weight")
        .unwrap();
    assert_ne!(original.tensors()[t].root_op, "lit");
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));

    // Nothing to write before a search.
    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('w'));
    assert!(a.search.prompt.is_none());
    assert_eq!(a.status, "nothing to write: run a search first (r)");

    // Re-search the tensor with budget 0 and the uniform prior: the literal, a program
    // surely different from the archive's.
    press(&mut a, KeyCode::Char('1'));
    while a.selected_tensor() != Some(t) {
        press(&mut a, KeyCode::Down);
    }
    press(&mut a, KeyCode::Char('r'));
    assert_eq!(a.view, View::Search);
    press(&mut a, KeyCode::Char('b'));
    for _ in 0..3 {
        press(&mut a, KeyCode::Backspace);
    }
    keys(&mut a, "0");
    press(&mut a, KeyCode::Enter);
    a.search.form.prior = PriorMode::Uniform;
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    let new_text = r.new.program.to_string();
    assert!(new_text.starts_with("lit "), "{new_text}");
    let new_program_bytes = r.new.bytes;

    // w proposes a fresh name next to the archive; Enter writes it.
    press(&mut a, KeyCode::Char('w'));
    let default = dir.path().join("demo.researched.brv");
    assert_eq!(
        a.search.prompt.as_ref().unwrap().path,
        default.display().to_string()
    );
    assert!(screen_text(&mut a, 160, 20).contains("write to: "));
    press(&mut a, KeyCode::Enter);
    let w = a.search.written.clone().unwrap().unwrap();
    assert_eq!(w.path, default);
    assert!(!w.in_place);
    assert_eq!(w.old_bytes, before.len() as u64);
    assert_eq!(w.bytes, std::fs::metadata(&default).unwrap().len());
    assert_eq!(
        std::fs::read(&brv).unwrap(),
        before,
        "the open archive is untouched"
    );

    // The new archive opens, verifies bit-exact, restores the original file byte for
    // byte, and holds the new program for that tensor only.
    let new = Archive::open(&default).unwrap();
    assert!(verify(&new, Some(1), &no_progress).unwrap().is_ok());
    assert!(
        verify_against(&new, &demo(), Some(1), &no_progress)
            .unwrap()
            .identical
    );
    assert_eq!(
        new.decode_tensor(t).unwrap(),
        original.decode_tensor(t).unwrap()
    );
    assert_eq!(new.program(t).unwrap().to_string(), new_text);
    assert_eq!(new.tensors()[t].program_bytes(), new_program_bytes);
    assert_eq!(new.tensors()[t].root_op, "lit");
    for i in (0..original.tensors().len()).filter(|&i| i != t) {
        assert_eq!(
            new.program(i).unwrap(),
            original.program(i).unwrap(),
            "tensor {i}"
        );
        assert_eq!(
            new.tensors()[i].archive_bytes(),
            original.tensors()[i].archive_bytes()
        );
    }
    let diff = w.bytes as i64 - w.old_bytes as i64;
    assert_eq!(
        diff,
        new.tensors()[t].archive_bytes() as i64 - original.tensors()[t].archive_bytes() as i64
    );
    let text = screen_text(&mut a, 200, 20);
    assert!(
        text.contains(&format!("✓ wrote {}: ", default.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("(+{} B against", thousands(diff.unsigned_abs()))),
        "{text}"
    );

    // The next default is a fresh name; an existing file needs a yes.
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.search.prompt.as_ref().unwrap().path,
        dir.path()
            .join("demo.researched-1.brv")
            .display()
            .to_string()
    );
    type_path(&mut a, &default);
    press(&mut a, KeyCode::Enter);
    let q = a.search.prompt.as_ref().unwrap().confirm.clone().unwrap();
    assert_eq!(
        q,
        format!("{} exists: replace it? (y/n)", default.display())
    );
    assert!(screen_text(&mut a, 200, 20).contains("exists: replace it? (y/n)"));
    press(&mut a, KeyCode::Char('n'));
    assert!(a.search.prompt.as_ref().unwrap().confirm.is_none());
    assert!(a.search.writing.is_none());
    // The open archive itself: asked too, and "no" leaves it as it was.
    type_path(&mut a, &brv);
    press(&mut a, KeyCode::Enter);
    let q = a.search.prompt.as_ref().unwrap().confirm.clone().unwrap();
    assert!(
        q.contains("is the open archive: replace it in place"),
        "{q}"
    );
    press(&mut a, KeyCode::Esc);
    press(&mut a, KeyCode::Esc);
    assert!(a.search.prompt.is_none());
    assert_eq!(std::fs::read(&brv).unwrap(), before);

    // With a yes, in place: the app reopens the archive and shows the new record.
    press(&mut a, KeyCode::Char('w'));
    type_path(&mut a, &brv);
    press(&mut a, KeyCode::Enter);
    press(&mut a, KeyCode::Char('y'));
    let w = a.search.written.clone().unwrap().unwrap();
    assert!(w.in_place);
    assert_eq!(
        std::fs::read(&brv).unwrap(),
        std::fs::read(&default).unwrap()
    );
    assert_eq!(a.rows()[t].root_op, "lit");
    assert_eq!(a.source.as_ref().unwrap().file_sizes().1, w.bytes);
}

fn thousands(n: u64) -> String {
    brevis::tui::inspect::thousands(n)
}

/// A whole-archive verification stops between tensors when asked; the TUI's cancel uses
/// this.
#[test]
fn verify_stops_between_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let brv = demo_archive(dir.path());
    let archive = Archive::open(&brv).unwrap();
    let items = Cell::new(0usize);
    let progress = |ev: ProgressEvent<'_>| {
        if let ProgressEvent::Item { .. } = ev {
            items.set(items.get() + 1);
        }
    };
    let r = verify_until(&archive, Some(2), &progress, &|| items.get() >= 3).unwrap();
    assert!(r.is_none());
    assert_eq!(items.get(), 3, "no region checked after the stop");
    items.set(0);
    let r = verify_until(&archive, Some(2), &progress, &|| false)
        .unwrap()
        .unwrap();
    assert!(r.is_ok());
    assert_eq!(items.get(), r.regions.len());

    // In the app: cancel while verifying gives "cancelled", and a later V works.
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.apply(brevis::tui::action::Action::VerifyAll);
    a.apply(brevis::tui::action::Action::Cancel);
    assert_eq!(a.verify.result.clone().unwrap().unwrap_err(), "cancelled");
    press(&mut a, KeyCode::Char('V'));
    let v = a.verify.result.clone().unwrap().unwrap();
    assert!(v.ok(), "{}", v.verdict());
    assert_eq!(
        v.verdict(),
        "23/23 tensors bit-exact, whole-file checksum matches"
    );
}
