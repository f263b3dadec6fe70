//! brevis-tui on the real-world cases of `../shared/cases`: damaged archives fail to open
//! with a readable message (no panic), and a checkpoint whose tensor names hold control
//! characters and escape sequences is shown escaped, with the table aligned.
#![cfg(feature = "tui")]

use brevis::archive::{compress_file, no_progress, CompressOptions};
use brevis::tui::app::App;
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::model::Source;
use brevis::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn cases() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/cases")
}

#[test]
fn damaged_archives_fail_to_open_with_a_message() {
    let dir = cases();
    if !dir.exists() {
        eprintln!("SKIPPED: {} not found", dir.display());
        return;
    }
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "archive") {
            continue;
        }
        seen += 1;
        let err = match ArchiveSource::open(&path) {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => e,
        };
        assert!(
            err.contains(&path.display().to_string()),
            "names the file: {err}"
        );
        assert!(
            err.contains("not a brevis archive") || err.contains("damaged archive"),
            "{err}"
        );
        assert!(!err.chars().any(char::is_control), "{err:?}");
    }
    assert!(seen >= 5, "found {seen} archive cases");
}

#[test]
fn control_character_names_from_a_real_file_are_escaped() {
    let input = cases().join("B32_control_chars_in_names.safetensors");
    if !input.exists() {
        eprintln!("SKIPPED: {} not found", input.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b32.brv");
    compress_file(&input, &out, &CompressOptions::default(), &no_progress).unwrap();
    let source = ArchiveSource::open(&out).unwrap();
    assert!(source
        .rows()
        .iter()
        .any(|r| r.name.chars().any(char::is_control)));
    let mut app = App::new(Arc::new(source));
    for (w, h) in [(120, 30), (40, 8), (10, 3), (1, 1)] {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| ui::draw(f, &mut app)).unwrap();
        for cell in t.backend().buffer().content() {
            assert!(
                !cell.symbol().chars().any(char::is_control),
                "raw control character in {:?}",
                cell.symbol()
            );
        }
    }
    // Every tensor's views render and verify bit-exact.
    app.apply(brevis::tui::action::Action::VerifyAll);
    assert!(app.settle(Duration::from_secs(60)));
    let v = app.verify.result.as_ref().unwrap().as_ref().unwrap();
    assert!(v.ok(), "{}", v.verdict());
    assert!(v
        .verdict()
        .ends_with("tensors bit-exact, whole-file checksum matches"));
}
