//! Every view of brevis-tui at narrow sizes (40x10, 60x15, 80x24), with content in
//! each (a search result kept as a change, the archive's analysis, a sweep, a
//! calibrated prior, a checked playground program, a finished lesson), compared with
//! insta snapshots (which show every line that does not fit ending in `…`), and checked
//! that no number is cut at the right edge.
#![cfg(feature = "tui")]

mod support;

use brevis::archive::{compress_file, no_progress, CompressOptions};
use brevis::tui::action::{Action, View};
use brevis::tui::app::{App, PriorMode};
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::tui::redact_seconds;

/// The sizes the issue names.
const SIZES: [(u16, u16); 3] = [(40, 10), (60, 15), (80, 24)];

/// Whether a row cuts a number at its right edge: its trailing digits, commas and points
/// are not a whole number as the app writes them (`2,79` of `2,792,568`, `12,` of
/// `12,345`, `34.` of `34.26%`).
fn cuts_a_number(row: &str) -> bool {
    let tail: String = row
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit() || *c == ',' || *c == '.')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if !tail.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    if tail.ends_with(',') || tail.ends_with('.') {
        return true;
    }
    let int = tail.split('.').next().unwrap_or("");
    let groups: Vec<&str> = int.split(',').collect();
    groups.len() > 1
        && (groups[0].is_empty() || groups[0].len() > 3 || groups[1..].iter().any(|g| g.len() != 3))
}

/// The demo archive in a folder of a fixed relative path (the title shows it), with
/// something to show in every view.
fn prepared() -> App {
    let dir = Path::new("target/tui-narrow");
    std::fs::create_dir_all(dir).unwrap();
    let brv = dir.join("demo.brv");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    let _ = std::fs::remove_file(&brv);
    compress_file(&demo, &brv, &CompressOptions::default(), &no_progress).unwrap();
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    let settle = |a: &mut App| assert!(a.settle(Duration::from_secs(300)));
    // A search kept as a change (position_ids, budget 32, uniform prior).
    a.search.form.prior = PriorMode::Uniform;
    a.apply(Action::Show(View::Search));
    a.apply(Action::SearchRun);
    settle(&mut a);
    assert_eq!(a.pending.len(), 1);
    a.apply(Action::Show(View::Archive));
    settle(&mut a);
    a.apply(Action::Show(View::Sweep));
    a.sweep.limit = 4;
    a.apply(Action::SearchRun);
    settle(&mut a);
    a.apply(Action::Show(View::Prior));
    a.apply(Action::PriorCalibrate);
    settle(&mut a);
    a.apply(Action::Show(View::Playground));
    a.apply(Action::PlayRun);
    settle(&mut a);
    a.apply(Action::Show(View::Table));
    settle(&mut a);
    a
}

fn render(a: &mut App, w: u16, h: u16) -> (String, Vec<String>) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, a)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut text = String::new();
    let mut cut = Vec::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        if cuts_a_number(&line) {
            cut.push(format!("row {y}: {line:?}"));
        }
        text.push_str(&line);
        text.push('\n');
    }
    (redact_seconds(&text), cut)
}

#[test]
fn every_view_fits_narrow_terminals_without_cutting_a_line_or_a_number() {
    let mut a = prepared();
    let mut problems = Vec::new();
    for v in View::TABS {
        for (w, h) in SIZES {
            a.apply(Action::Show(v));
            if v == View::Help {
                // The last lesson page fully stepped: the longest lines.
                a.page = 1;
                a.step = 5;
            }
            assert!(a.settle(Duration::from_secs(120)));
            let (text, cut) = render(&mut a, w, h);
            if !cut.is_empty() {
                problems.push(format!("{v:?} at {w}x{h}:\n{}\n{text}", cut.join("\n")));
            }
            insta::assert_snapshot!(format!("{}_{w}x{h}", v.title().to_lowercase()), text);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_cut_number_is_found() {
    assert!(cuts_a_number("archive 2,79"));
    assert!(cuts_a_number("x 12,"));
    assert!(cuts_a_number("34."));
    assert!(!cuts_a_number("  2,792,568"));
    assert!(!cuts_a_number("  99.44"));
    assert!(!cuts_a_number("budget 32"));
    assert!(!cuts_a_number("change it, check it,"));
}
