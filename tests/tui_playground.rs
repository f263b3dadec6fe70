//! The playground: a program typed in its text form, checked against its tensor, run,
//! and written into a new archive when it restores the tensor exactly; a lesson's example
//! opened there.
#![cfg(feature = "tui")]

use brevis::archive::{compress_file, no_progress, verify, Archive, CompressOptions};
use brevis::tui::action::{Action, View};
use brevis::tui::app::App;
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::event::map_key;
use brevis::tui::playground::Origin;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn press(app: &mut App, code: KeyCode) {
    if let Some(a) = map_key(app.key_context(), KeyEvent::new(code, KeyModifiers::NONE)) {
        app.apply(a);
    }
    assert!(app.settle(Duration::from_secs(120)), "jobs did not finish");
}

fn ctrl(app: &mut App, c: char) {
    if let Some(a) = map_key(
        app.key_context(),
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL),
    ) {
        app.apply(a);
    }
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        if c == '\n' {
            press(app, KeyCode::Enter);
        } else {
            press(app, KeyCode::Char(c));
        }
    }
}

/// Clears the playground's text (every line, with Ctrl-U and Backspace).
fn clear(app: &mut App) {
    press(app, KeyCode::Char('e'));
    for _ in 0..app.play.lines.len() {
        press(app, KeyCode::Down);
    }
    for _ in 0..app.play.lines.len() + 1 {
        press(app, KeyCode::End);
        ctrl(app, 'u');
        press(app, KeyCode::Backspace);
    }
    assert_eq!(app.play.text(), "\n");
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    t.draw(|f| brevis::tui::ui::draw(f, app)).unwrap();
    t.backend().to_string()
}

#[test]
fn a_program_typed_in_the_playground_that_restores_its_tensor_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join("demo.brv");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    compress_file(&demo, &brv, &CompressOptions::default(), &no_progress).unwrap();
    let before = Archive::open(&brv).unwrap();
    let t = before.find("embeddings.position_ids").unwrap();
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.select_tensor(t);
    press(&mut a, KeyCode::Char('0'));
    assert_eq!(a.view, View::Playground);
    assert_eq!(a.play.origin, Some(Origin::Tensor(t)));
    assert_eq!(a.play.text(), before.program(t).unwrap().to_string());

    // The archive's own program checks, restores, and is not written again.
    press(&mut a, KeyCode::Char('r'));
    let r = a.play.result.clone().unwrap().unwrap();
    assert!(r.restores && r.diff.is_empty());
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.status,
        "nothing to write: the program is the archive's own"
    );

    // A typo is refused at its column as it is typed.
    clear(&mut a);
    typed(&mut a, "scan add 0 : u64[512]\n  const 2 u64[511]");
    let e = a.play.error.clone().unwrap();
    assert_eq!((e.line, e.column), (2, 11));
    assert!(e.message.starts_with("expected `:`"), "{e}");
    assert!(screen(&mut a, 100, 24).contains("✗ line 2, column 11: expected `:`"));
    // A program of the wrong words runs but does not restore the tensor: not written.
    press(&mut a, KeyCode::Home);
    for _ in 0..10 {
        press(&mut a, KeyCode::Right);
    }
    press(&mut a, KeyCode::Char(':'));
    press(&mut a, KeyCode::Char(' '));
    assert!(a.play.error.is_none(), "{:?}", a.play.error);
    press(&mut a, KeyCode::Esc);
    press(&mut a, KeyCode::Char('r'));
    let r = a.play.result.clone().unwrap().unwrap();
    assert!(!r.restores);
    assert_eq!(r.first_diff, Some(1));
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.status,
        "nothing written: the program does not restore the tensor"
    );
    assert!(a.pending.is_empty() && a.search.prompt.is_none());

    // `const 1` restores the ramp 0..511 in fewer bytes than the archive's literal of
    // differences; its exact bytes per node are shown, and the difference to the
    // archive's program.
    press(&mut a, KeyCode::Char('e'));
    press(&mut a, KeyCode::End);
    for _ in 0.."2 : u64[511]".len() {
        press(&mut a, KeyCode::Left);
    }
    press(&mut a, KeyCode::Delete);
    press(&mut a, KeyCode::Char('1'));
    assert_eq!(
        a.play.lines,
        ["scan add 0 : u64[512]", "  const 1 : u64[511]"]
    );
    ctrl(&mut a, 'r');
    assert!(a.settle(Duration::from_secs(60)));
    let r = a.play.result.clone().unwrap().unwrap();
    assert!(r.restores);
    assert_eq!((r.bytes, r.reference_bytes), (4, 14));
    assert_eq!(r.nodes.len(), 2);
    assert_eq!(r.nodes.iter().map(|n| n.own_bytes).sum::<u64>(), 4);
    assert_eq!(
        r.diff,
        [
            "-   lit huffman : u64[511]".to_string(),
            "+   const 1 : u64[511]".to_string()
        ]
    );
    press(&mut a, KeyCode::Esc);
    let text = screen(&mut a, 100, 30);
    assert!(text.contains("✓ restores it exactly"), "{text}");
    assert!(
        text.contains("4 B in 2 nodes: 10 B smaller than the archive's 14 B · w writes it"),
        "{text}"
    );

    // `w` keeps it as a pending change and asks where to write; Enter writes.
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(a.pending.len(), 1);
    assert_eq!(a.pending[0].from, "playground");
    let out = dir.path().join("demo.researched.brv");
    assert_eq!(
        a.search.prompt.as_ref().unwrap().path,
        out.display().to_string()
    );
    press(&mut a, KeyCode::Enter);
    let w = a.search.written.clone().unwrap().unwrap();
    assert_eq!(w.path, out);
    assert!(a.pending.is_empty());
    let new = Archive::open(&out).unwrap();
    assert!(verify(&new, Some(1), &no_progress).unwrap().is_ok());
    assert_eq!(
        new.program(t).unwrap().to_string(),
        "scan add 0 : u64[512]\n  const 1 : u64[511]\n"
    );
    assert_eq!(
        new.decode_tensor(t).unwrap(),
        before.decode_tensor(t).unwrap()
    );
    // A hand-written program keeps the record's settings.
    assert_eq!(new.tensors()[t].settings, before.tensors()[t].settings);
}

#[test]
fn a_lesson_ends_by_opening_its_example_in_the_playground() {
    let mut a = App::new(Arc::new(brevis::tui::model::fixture()));
    press(&mut a, KeyCode::Char('?'));
    press(&mut a, KeyCode::Right);
    for _ in 0..5 {
        press(&mut a, KeyCode::Char('n'));
    }
    assert!(screen(&mut a, 100, 30).contains("o opens this example in the playground"));
    press(&mut a, KeyCode::Char('o'));
    assert_eq!(a.view, View::Playground);
    assert_eq!(a.play.origin, Some(Origin::Lesson(0)));
    a.apply(Action::PlayRun);
    assert!(a.settle(Duration::from_secs(60)));
    let r = a.play.result.clone().unwrap().unwrap();
    assert!(r.restores && r.bytes == 14);
    // Change the constant exponent: the words change, and it says so.
    let row = a
        .play
        .lines
        .iter()
        .position(|l| l.contains("const 127"))
        .unwrap();
    a.play.row = row;
    a.play.col = a.play.lines[row].find("127").unwrap() + 3;
    a.play.backspace();
    a.play.insert('6');
    a.apply(Action::PlayRun);
    assert!(a.settle(Duration::from_secs(60)));
    let r = a.play.result.clone().unwrap().unwrap();
    assert!(!r.restores);
    assert_eq!(r.first_diff, Some(0));
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.status,
        "nothing written: the program does not restore the tensor"
    );
}
