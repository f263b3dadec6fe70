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

/// Types `budget` into the Search form's budget field.
fn set_budget(app: &mut App, budget: &str) {
    press(app, KeyCode::Char('6'));
    press(app, KeyCode::Char('b'));
    for _ in 0..3 {
        press(app, KeyCode::Backspace);
    }
    keys(app, budget);
    press(app, KeyCode::Enter);
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
    set_budget(&mut a, "0");
    a.search.form.prior = PriorMode::Uniform;
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert!(r.new.program.to_string().starts_with("lit "));
    assert!(r.new.bytes > r.old.1);
    // A larger program is not written.
    press(&mut a, KeyCode::Char('w'));
    assert!(a.search.prompt.is_none());
    assert!(
        a.status.starts_with("nothing written: the new program is ")
            && a.status.ends_with(
                "bytes larger than the archive's (only a smaller program becomes a change \
                 to write)"
            ),
        "{}",
        a.status
    );

    // The position ids at budget 32: `scan add 0` over `const 1`, smaller than the
    // archive's budget-1 literal.
    let t = original.find("embeddings.position_ids").unwrap();
    press(&mut a, KeyCode::Char('1'));
    while a.selected_tensor() != Some(t) {
        press(&mut a, KeyCode::Up);
    }
    set_budget(&mut a, "32");
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    let new_text = r.new.program.to_string();
    assert!(new_text.starts_with("scan add 0"), "{new_text}");
    assert!(r.new.bytes < r.old.1);
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
    assert_eq!(new.tensors()[t].root_op, "scan");
    // The record says what built it: the form's search, not the archive's.
    let built = new.tensors()[t].settings.unwrap();
    assert_eq!((built.budget, built.prior_digest), (32, 0));
    assert_eq!(built.prior, brevis::archive::format::PriorKind::Uniform);
    let other = usize::from(t == 0);
    assert_eq!(
        new.tensors()[other].settings,
        original.tensors()[other].settings
    );
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
    // The record's change, plus the index's new settings entry: the uleb length of its
    // fields (format 4), uleb budget 32, depth 4 and nodes 64 (a byte each), the prior's
    // kind byte and its 8-byte digest, the level byte (format 4: none, 0).
    let diff = w.bytes as i64 - w.old_bytes as i64;
    assert_eq!(
        diff,
        new.tensors()[t].archive_bytes() as i64 - original.tensors()[t].archive_bytes() as i64 + 14
    );
    let text = screen_text(&mut a, 200, 20);
    assert!(
        text.contains(&format!("✓ wrote {}: ", default.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "({}{} B against",
            if diff < 0 { "−" } else { "+" },
            thousands(diff.unsigned_abs())
        )),
        "{text}"
    );

    // Written changes are no longer pending: `w` has nothing to write until a search
    // finds the smaller program again.
    assert!(a.pending.is_empty());
    press(&mut a, KeyCode::Char('w'));
    assert!(a.search.prompt.is_none());
    press(&mut a, KeyCode::Char('r'));
    assert_eq!(a.pending.len(), 1);
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
    assert_eq!(a.pending.len(), 1, "a write not made keeps the changes");
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
    assert_eq!(a.rows()[t].root_op, "scan");
    assert_eq!(a.source.as_ref().unwrap().file_sizes().1, w.bytes);
    let text = screen_text(&mut a, 200, 30);
    assert!(
        text.contains("archive: built with budget 32 per region"),
        "{text}"
    );
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

/// Issue 27, work loss: the demo's archive lives in a temporary folder that is removed
/// at exit. There `w` proposes the current folder (never an existing file), and `q` with
/// a smaller program that was not written (a pending change) asks first, saying what
/// writing it does to the file (its settings entry makes the file 4 bytes larger than
/// the program's 10 smaller); once it is written, `q` quits.
#[test]
fn in_a_temporary_folder_w_proposes_the_current_folder_and_q_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let brv = demo_archive(dir.path());
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.temp_dir = Some(dir.path().to_path_buf());
    // Row 0, embeddings.position_ids: budget 32 finds `scan add 0` over `const 1`.
    keys(&mut a, "6r");
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!((r.old.1, r.new.bytes), (14, 4));

    press(&mut a, KeyCode::Char('q'));
    assert!(!a.quit);
    let question = "quit without writing 1 pending change (embeddings.position_ids; the \
                    file +4 B)? (y/n) w writes them (9 lists them)";
    assert_eq!(a.quit_question.as_deref(), Some(question));
    let text = screen_text(&mut a, 200, 20);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[18].trim_end(), format!("⚠ {question}"));
    assert_eq!(
        lines[19].trim_end(),
        " y  quit without writing   n/Esc  stay"
    );
    // Other keys leave the question; n stays.
    press(&mut a, KeyCode::Char('w'));
    assert!(a.quit_question.is_some() && a.search.prompt.is_none());
    press(&mut a, KeyCode::Char('n'));
    assert!(!a.quit && a.quit_question.is_none());
    assert_eq!(
        a.status,
        "not quit: w writes the pending changes (9 lists them)"
    );

    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.search.prompt.as_ref().unwrap().path,
        "./demo.researched.brv"
    );
    // Written elsewhere (not into the test's own folder): then q quits at once.
    let mine = dir.path().join("mine.brv");
    type_path(&mut a, &mine);
    press(&mut a, KeyCode::Enter);
    assert!(a.search.written.clone().unwrap().is_ok());
    assert_eq!(a.written_paths, [mine]);
    press(&mut a, KeyCode::Char('q'));
    assert!(a.quit);
}

/// The default name of a re-searched archive never names an existing file.
#[test]
fn the_proposed_name_is_never_an_existing_file() {
    use brevis::tui::app::researched_path;
    let dir = tempfile::tempdir().unwrap();
    let brv = Path::new("/elsewhere/demo.brv");
    assert_eq!(
        researched_path(dir.path(), brv),
        dir.path().join("demo.researched.brv")
    );
    std::fs::write(dir.path().join("demo.researched.brv"), b"mine").unwrap();
    std::fs::write(dir.path().join("demo.researched-1.brv"), b"mine").unwrap();
    assert_eq!(
        researched_path(dir.path(), brv),
        dir.path().join("demo.researched-2.brv")
    );
    assert_eq!(
        researched_path(Path::new("."), brv),
        Path::new("./demo.researched.brv")
    );
}

/// At exit the demo's own files go and the user's stay (named for the exit message).
#[test]
fn leaving_the_demo_removes_only_its_own_files() {
    let kept = tempfile::tempdir().unwrap().keep();
    let staged_files = [kept.join("demo.safetensors"), kept.join("demo.brv")];
    for f in &staged_files {
        std::fs::write(f, b"x").unwrap();
    }
    assert!(brevis::tui::remove_staged(&kept, &staged_files).is_empty());
    assert!(!kept.exists(), "an empty folder goes");

    let dir = tempfile::tempdir().unwrap();
    for f in ["demo.safetensors", "demo.brv", "mine.brv"] {
        std::fs::write(dir.path().join(f), b"x").unwrap();
    }
    let files = [
        dir.path().join("demo.safetensors"),
        dir.path().join("demo.brv"),
    ];
    assert_eq!(
        brevis::tui::remove_staged(dir.path(), &files),
        [dir.path().join("mine.brv")]
    );
}

/// A group's search is the compressor's: at the archive's own settings it finds the
/// archive's program size again (it searched only the group's joined words, and came
/// out 116 bytes larger), and reports the searches it ran: the group's words and each
/// tensor apart. A smaller result is kept as a pending change, so a second `r` searches
/// at once (nothing to lose) and the change stays one per record.
#[test]
fn a_group_search_refinds_its_program_and_results_are_kept_as_changes() {
    let dir = tempfile::tempdir().unwrap();
    let brv = demo_archive(dir.path());
    let original = Archive::open(&brv).unwrap();
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.search.form.prior = PriorMode::Uniform;
    let select = |a: &mut App, name: &str| {
        let t = original.find(name).unwrap();
        press(a, KeyCode::Char('1'));
        press(a, KeyCode::Home);
        while a.selected_tensor() != Some(t) {
            press(a, KeyCode::Down);
        }
        t
    };

    let g = select(&mut a, "embeddings.LayerNorm.bias");
    assert!(original.tensors()[g].group.is_some());
    set_budget(&mut a, "1");
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.group, Some(2));
    assert_eq!(r.searches, 3);
    assert_eq!(r.new.bytes, r.old.1, "{} vs {}", r.new.program, r.old.0);
    let text = screen_text(&mut a, 200, 20);
    assert!(
        text.contains(
            "budget 1 per search × 3 searches (the group's words, and each of its 2 tensors \
             apart) = 3 expansions at most"
        ),
        "{text}"
    );
    assert!(
        a.pending.is_empty(),
        "a program of the same size is not kept"
    );

    // A smaller result is kept; searching again keeps one change for the record.
    select(&mut a, "embeddings.position_ids");
    set_budget(&mut a, "32");
    press(&mut a, KeyCode::Char('r'));
    let gain = {
        let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
        r.old.1 - r.new.bytes
    };
    assert!(gain > 0);
    assert_eq!(a.pending.len(), 1);
    press(&mut a, KeyCode::Char('r'));
    assert!(a.quit_question.is_none());
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.old.1 - r.new.bytes, gain);
    assert_eq!(a.pending.len(), 1);
    assert_eq!(a.pending[0].new_bytes, r.new.bytes);
    // Quitting asks.
    press(&mut a, KeyCode::Char('q'));
    assert!(a.quit_question.is_some() && !a.quit);
}

/// `q` while a search runs asks first: quitting would lose what it found.
#[test]
fn quitting_during_a_search_asks_first() {
    let dir = tempfile::tempdir().unwrap();
    let brv = demo_archive(dir.path());
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.search.form.prior = PriorMode::Uniform;
    set_budget(&mut a, "99999999");
    let apply = |a: &mut App, c: char| {
        let k = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        if let Some(act) = map_key(a.key_context(), k) {
            a.apply(act);
        }
    };
    apply(&mut a, 'r');
    assert!(a.search.running.is_some());
    apply(&mut a, 'q');
    assert!(!a.quit);
    assert!(
        a.quit_question
            .as_deref()
            .is_some_and(|q| q.starts_with("a search is running: quit and lose what it found?")),
        "{:?}",
        a.quit_question
    );
    apply(&mut a, 'n');
    assert!(!a.quit && a.quit_question.is_none());
    apply(&mut a, 'x');
    assert!(a.settle(Duration::from_secs(120)));
    assert!(a.search.running.is_none() && !a.quit);
}
