//! Key sequences drive the app's state: sorting, filtering, the tree, search, verify,
//! lessons, cancel and quit; key releases are ignored; names with escape sequences never
//! reach the screen raw and wide or empty names keep the columns aligned.
#![cfg(feature = "tui")]

use brevis::dsl::execute;
use brevis::tui::action::{Action, View};
use brevis::tui::app::{App, Column};
use brevis::tui::event::{map_event, map_key};
use brevis::tui::model::{fixture, Source};
use brevis::tui::{escape_name, ui};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::Arc;
use std::time::Duration;

fn app() -> App {
    App::new(Arc::new(fixture()))
}

fn press(app: &mut App, code: KeyCode) {
    if let Some(a) = map_key(app.key_context(), KeyEvent::new(code, KeyModifiers::NONE)) {
        app.apply(a);
    }
    assert!(app.settle(Duration::from_secs(60)), "jobs did not finish");
}

fn keys(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn names(app: &App) -> Vec<String> {
    app.order
        .iter()
        .map(|&i| app.rows()[i].name.clone())
        .collect()
}

fn screen(app: &mut App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t.backend().buffer().clone()
}

#[test]
fn s_cycles_sort_columns_and_capital_s_reverses() {
    let mut a = app();
    assert_eq!(a.sort, Column::Index);
    assert_eq!(a.order, vec![0, 1, 2, 3, 4, 5]);
    press(&mut a, KeyCode::Char('s'));
    assert_eq!(a.sort, Column::Name);
    let mut sorted = names(&a);
    sorted.sort();
    assert_eq!(names(&a), sorted);
    assert_eq!(names(&a)[0], "");
    keys(&mut a, "ssss");
    assert_eq!(a.sort, Column::Archive);
    let bytes: Vec<u64> = a.order.iter().map(|&i| a.rows()[i].archive_bytes).collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    press(&mut a, KeyCode::Char('S'));
    assert!(a.reverse);
    let bytes: Vec<u64> = a.order.iter().map(|&i| a.rows()[i].archive_bytes).collect();
    assert!(bytes.windows(2).all(|w| w[0] >= w[1]), "{bytes:?}");
    // The largest record is the BF16 matrix.
    assert_eq!(a.rows()[a.order[0]].name, "embed.weight");
    keys(&mut a, "sss");
    assert_eq!(a.sort, Column::Index, "cycles back to archive order");
}

#[test]
fn slash_filters_by_name_and_esc_clears() {
    let mut a = app();
    press(&mut a, KeyCode::Char('/'));
    assert!(a.filter_editing);
    // While typing, letters go to the filter, not to the key bindings (q does not quit).
    keys(&mut a, "POSq");
    assert!(!a.quit);
    assert_eq!(a.filter, "POSq");
    assert!(a.order.is_empty());
    press(&mut a, KeyCode::Backspace);
    assert_eq!(names(&a), vec!["position_ids"]);
    press(&mut a, KeyCode::Enter);
    assert!(!a.filter_editing);
    assert_eq!(a.selected_row().unwrap().name, "position_ids");
    press(&mut a, KeyCode::Esc);
    assert!(a.filter.is_empty());
    assert_eq!(a.order.len(), 6);
    assert_eq!(
        a.selected_row().unwrap().name,
        "position_ids",
        "selection kept"
    );
}

#[test]
fn tree_expands_and_collapses() {
    let mut a = app();
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.view, View::Tree);
    let ins = a.current().unwrap().as_ref().unwrap().clone();
    // Own bytes of the nodes add up to the program's exact size.
    assert_eq!(
        ins.nodes.iter().map(|n| n.own_bytes).sum::<u64>(),
        ins.total_bytes
    );
    assert_eq!(ins.nodes[0].subtree_bytes, ins.total_bytes);
    assert_eq!(ins.total_bytes, a.rows()[0].archive_bytes);
    let all = a.visible_nodes();
    assert_eq!(all.len(), ins.nodes.len(), "shallow trees start expanded");
    assert!(ins.nodes.len() >= 2);
    press(&mut a, KeyCode::Left);
    assert_eq!(a.visible_nodes(), vec![0]);
    press(&mut a, KeyCode::Right);
    assert_eq!(a.visible_nodes(), all);
    press(&mut a, KeyCode::Down);
    assert_eq!(a.tree.cursor, 1);
    press(&mut a, KeyCode::Left);
    assert_eq!(a.tree.cursor, 0, "left on a leaf goes to its parent");
    press(&mut a, KeyCode::Char('c'));
    assert_eq!(a.visible_nodes(), vec![0]);
    press(&mut a, KeyCode::Char('e'));
    assert_eq!(a.visible_nodes(), all);
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.visible_nodes(), vec![0], "Enter toggles");
    // Every literal knows what each codec would cost, with raw always applicable.
    for n in ins.nodes.iter().filter(|n| n.lit.is_some()) {
        let l = n.lit.as_ref().unwrap();
        assert!(l.node_bytes[0].is_some());
        assert_eq!(l.node_bytes[l.chosen as usize], Some(n.own_bytes));
        assert!(l.entropy_bits.is_some());
    }
}

#[test]
fn key_release_and_repeat_events_are_ignored() {
    let mut a = app();
    let ctx = a.key_context();
    let mut release = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
    release.kind = KeyEventKind::Release;
    assert_eq!(map_key(ctx, release), None);
    assert_eq!(map_event(ctx, &Event::Key(release)), None);
    let mut repeat = release;
    repeat.kind = KeyEventKind::Repeat;
    assert_eq!(map_key(ctx, repeat), None);
    let q_release = KeyEvent {
        code: KeyCode::Char('q'),
        modifiers: KeyModifiers::NONE,
        kind: KeyEventKind::Release,
        state: KeyEventState::NONE,
    };
    assert_eq!(map_key(ctx, q_release), None);
    // A press followed by its release moves once.
    let press = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
    for ev in [press, release] {
        if let Some(act) = map_key(a.key_context(), ev) {
            a.apply(act);
        }
    }
    assert_eq!(a.selected, 1);
    assert_eq!(map_event(ctx, &Event::Resize(10, 3)), None);
    assert_eq!(map_event(ctx, &Event::FocusLost), None);
}

#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let mut a = app();
    let buf = screen(&mut a, 110, 14);
    let mut text = String::new();
    for cell in buf.content() {
        for c in cell.symbol().chars() {
            assert!(!c.is_control(), "raw control character {c:?} in the buffer");
        }
        text.push_str(cell.symbol());
    }
    assert!(text.contains(r"evil\x1b[31mred\x07\u{9b}2J"), "{text}");
    assert_eq!(escape_name("a\u{202e}b"), r"a\u{202e}b");
    assert_eq!(escape_name("名前.重み🙂"), "名前.重み🙂");
    // The status line escapes too (a verify verdict may quote names).
    a.status = "x\u{1b}[2Jy".into();
    let buf = screen(&mut a, 110, 14);
    assert!(buf
        .content()
        .iter()
        .all(|c| !c.symbol().chars().any(char::is_control)));
}

#[test]
fn wide_and_empty_names_keep_columns_aligned() {
    let mut a = app();
    let buf = screen(&mut a, 110, 14);
    let width = buf.area.width as usize;
    // Column (in terminal cells) where each row's dtype starts.
    let mut starts = Vec::new();
    for y in 0..buf.area.height as usize {
        let row: Vec<&str> = (0..width)
            .map(|x| buf.content()[y * width + x].symbol())
            .collect();
        for dtype in ["BF16", "I64", "F32", "U8"] {
            let d: Vec<String> = dtype.chars().map(String::from).collect();
            if let Some(x) = (0..width.saturating_sub(d.len())).find(|&x| {
                (0..d.len()).all(|k| row[x + k] == d[k])
                    && row[x - 1] == " "
                    && row[x + d.len()] == " "
            }) {
                starts.push((y, x));
                break;
            }
        }
    }
    assert_eq!(starts.len(), 6, "one dtype per tensor row: {starts:?}");
    assert!(starts.iter().all(|&(_, x)| x == starts[0].1), "{starts:?}");
}

#[test]
fn search_with_budget_32_runs_in_the_background() {
    let mut a = app();
    press(&mut a, KeyCode::Char('r'));
    assert_eq!(a.view, View::Search);
    press(&mut a, KeyCode::Char('b'));
    for _ in 0..4 {
        press(&mut a, KeyCode::Backspace);
    }
    assert_eq!(a.search.opts.budget, 0);
    keys(&mut a, "32");
    assert_eq!(a.search.opts.budget, 32);
    press(&mut a, KeyCode::Char('d'));
    press(&mut a, KeyCode::Char('-'));
    assert_eq!(a.search.opts.max_depth, 2);
    press(&mut a, KeyCode::Char('+'));
    press(&mut a, KeyCode::Enter);
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.opts.budget, 32);
    assert_eq!(r.opts.max_depth, 4);
    assert_eq!(r.tensor, 0);
    let source = fixture();
    let decoded = source.decode(0).unwrap();
    let mut out = Vec::new();
    execute(&r.new.program, u64::MAX)
        .unwrap()
        .write_le_bytes(&mut out);
    assert_eq!(out, decoded, "the new program reproduces the tensor");
    assert_eq!(r.old.1, a.rows()[0].archive_bytes);
    assert!(r.new.stats.expansions <= 32);
}

#[test]
fn cancel_drops_a_running_search() {
    let mut a = app();
    a.search.opts.budget = 1 << 20;
    a.apply(Action::Show(View::Search));
    a.apply(Action::SearchRun);
    assert!(a.search.running.is_some());
    a.apply(Action::Cancel);
    assert!(a.search.running.is_none());
    assert_eq!(
        a.search.result.as_ref().unwrap().as_ref().unwrap_err(),
        "cancelled"
    );
    assert!(a.settle(Duration::from_secs(60)));
    assert_eq!(
        a.search.result.as_ref().unwrap().as_ref().unwrap_err(),
        "cancelled",
        "late result ignored"
    );
}

#[test]
fn verify_whole_archive_and_one_tensor() {
    let mut a = app();
    press(&mut a, KeyCode::Char('V'));
    let v = a.verify.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!((v.tensors, v.exact), (6, 6));
    assert_eq!(v.verdict(), "6/6 tensors bit-exact");
    assert!(v.ok());
    keys(&mut a, "jv");
    let v = a.verify.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(v.tensor, Some(1));
    assert_eq!(v.verdict(), "1/1 tensor bit-exact");

    let mut damaged = fixture();
    damaged.corrupt(2, vec![0; 96]);
    let mut a = App::new(Arc::new(damaged));
    press(&mut a, KeyCode::Char('V'));
    let v = a.verify.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(v.verdict(), "5/6 tensors bit-exact");
    assert!(!v.ok());
    assert_eq!(v.failures.len(), 1);
    assert!(v.failures[0].contains("position_ids"), "{:?}", v.failures);
}

#[test]
fn lessons_step_through_the_paper_example() {
    let mut a = app();
    press(&mut a, KeyCode::Char('?'));
    assert_eq!(a.view, View::Help);
    assert_eq!(a.page, 0);
    press(&mut a, KeyCode::Char('n'));
    assert_eq!((a.page, a.step), (1, 0));
    for k in 1..=7 {
        press(&mut a, KeyCode::Char(' '));
        assert_eq!(a.step, k.min(5));
    }
    press(&mut a, KeyCode::Char('p'));
    assert_eq!(a.step, 4);
    press(&mut a, KeyCode::Right);
    assert_eq!((a.page, a.step), (2, 0));
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.view, View::Table);
}

#[test]
fn tabs_cycle_and_q_quits() {
    let mut a = app();
    for v in View::TABS.iter().cycle().skip(1).take(8) {
        press(&mut a, KeyCode::Tab);
        assert_eq!(a.view, *v);
    }
    press(&mut a, KeyCode::BackTab);
    assert_eq!(a.view, View::Help);
    assert!(!a.quit);
    press(&mut a, KeyCode::Char('q'));
    assert!(a.quit);
    let mut b = app();
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    b.apply(map_key(b.key_context(), ctrl_c).unwrap());
    assert!(b.quit);
}
