//! Every view of brevis-tui rendered into ratatui's `TestBackend` from the fixture source
//! and compared with committed insta snapshots; every view drawn at tiny sizes and
//! resized back and forth while scrolling without a panic.
#![cfg(feature = "tui")]

mod support;

use brevis::tui::action::View;
use brevis::tui::app::App;
use brevis::tui::event::map_key;
use brevis::tui::ui;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::Duration;
use support::tui::{app, keys, press, redact_seconds};

fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    redact_seconds(&t.backend().to_string())
}

#[test]
fn table_view_snapshot() {
    let mut a = app();
    insta::assert_snapshot!("table", render(&mut a, 110, 14));
}

#[test]
fn table_sorted_and_filtered_snapshot() {
    let mut a = app();
    // Sort by archive bytes (5 presses from the index column), descending.
    keys(&mut a, "sssssS");
    insta::assert_snapshot!("table_sorted_archive_desc", render(&mut a, 110, 14));
    press(&mut a, KeyCode::Char('/'));
    keys(&mut a, "e");
    insta::assert_snapshot!("table_filter_e", render(&mut a, 110, 14));
}

#[test]
fn tree_view_snapshot() {
    let mut a = app();
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.view, View::Tree);
    insta::assert_snapshot!("tree_embed", render(&mut a, 120, 16));
    // The literal under the cursor shows its codec alternatives and entropy.
    press(&mut a, KeyCode::Down);
    insta::assert_snapshot!("tree_embed_lit", render(&mut a, 120, 16));
}

#[test]
fn text_view_snapshot() {
    let mut a = app();
    keys(&mut a, "jjj3");
    assert_eq!(a.view, View::Text);
    insta::assert_snapshot!("text_paper_words", render(&mut a, 80, 12));
}

#[test]
fn why_view_snapshot() {
    let mut a = app();
    press(&mut a, KeyCode::Char('4'));
    insta::assert_snapshot!("why_embed", render(&mut a, 120, 20));
}

#[test]
fn plots_view_snapshot() {
    let mut a = app();
    press(&mut a, KeyCode::Char('5'));
    insta::assert_snapshot!("plots_embed", render(&mut a, 120, 20));
}

#[test]
fn search_view_snapshot() {
    let mut a = app();
    keys(&mut a, "jjjr");
    assert_eq!(a.view, View::Search);
    // Uniform prior, depth 2: edit the prior (p, Space) and the depth (Tab, Tab... d).
    keys(&mut a, "p ");
    press(&mut a, KeyCode::Enter);
    keys(&mut a, "d");
    press(&mut a, KeyCode::Backspace);
    keys(&mut a, "2");
    insta::assert_snapshot!("search_editing_depth", render(&mut a, 120, 16));
    press(&mut a, KeyCode::Enter);
    keys(&mut a, "r");
    insta::assert_snapshot!("search_paper_words", render(&mut a, 120, 16));
    // An out-of-range limit is refused in the form.
    keys(&mut a, "n");
    press(&mut a, KeyCode::Backspace);
    press(&mut a, KeyCode::Backspace);
    press(&mut a, KeyCode::Enter);
    keys(&mut a, "r");
    insta::assert_snapshot!("search_refused", render(&mut a, 120, 16));
}

#[test]
fn verify_view_snapshot() {
    let mut a = app();
    press(&mut a, KeyCode::Char('V'));
    assert_eq!(a.view, View::Verify);
    insta::assert_snapshot!("verify_all", render(&mut a, 100, 12));
}

#[test]
fn help_and_lesson_snapshots() {
    let mut a = app();
    press(&mut a, KeyCode::Char('?'));
    insta::assert_snapshot!("help_keys", render(&mut a, 100, 24));
    press(&mut a, KeyCode::Right);
    for _ in 0..5 {
        press(&mut a, KeyCode::Char('n'));
    }
    insta::assert_snapshot!("lesson_paper_example_done", render(&mut a, 100, 24));
}

#[test]
fn every_view_survives_tiny_sizes_and_resizing() {
    let sizes = [
        (1, 1),
        (2, 2),
        (10, 3),
        (3, 10),
        (20, 5),
        (0, 0),
        (200, 60),
        (1, 40),
        (80, 2),
    ];
    for v in View::TABS {
        let mut a = app();
        press(&mut a, KeyCode::Char('?'));
        press(&mut a, KeyCode::Esc);
        a.view = v;
        a.ensure_inspection();
        assert!(a.settle(Duration::from_secs(60)));
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        for (i, &(w, h)) in sizes.iter().chain(sizes.iter().rev()).enumerate() {
            t.backend_mut().resize(w, h);
            t.resize(ratatui::layout::Rect::new(0, 0, w, h)).unwrap();
            t.draw(|f| ui::draw(f, &mut a)).unwrap();
            // Scroll while small.
            let k = if i % 2 == 0 {
                KeyCode::Down
            } else {
                KeyCode::PageDown
            };
            if let Some(act) = map_key(a.key_context(), KeyEvent::new(k, KeyModifiers::NONE)) {
                a.apply(act);
            }
            assert!(a.settle(Duration::from_secs(60)));
        }
    }
}

#[test]
fn loading_screen_survives_tiny_sizes() {
    let mut a = App::empty();
    a.start_loading("in.safetensors".into(), "in.brv".into(), |_ctx| {
        std::thread::sleep(Duration::from_millis(200));
        Err("stopped".into())
    });
    for (w, h) in [(1, 1), (2, 2), (10, 3), (60, 12)] {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| ui::draw(f, &mut a)).unwrap();
    }
    assert!(a.settle(Duration::from_secs(10)));
    assert!(a.quit);
    assert_eq!(a.load_error.as_deref(), Some("stopped"));
}
