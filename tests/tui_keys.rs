//! Key sequences drive the app's state: sorting, filtering, the tree, search, verify,
//! lessons, cancel and quit; key releases are ignored; names with escape sequences never
//! reach the screen raw and wide or empty names keep the columns aligned.
#![cfg(feature = "tui")]

mod support;

use brevis::dsl::{execute, program_len, Node};
use brevis::synth::{Prior, SearchControl, SearchOptions};
use brevis::tensor::{Dtype, Words};
use brevis::tui::action::{Action, Field, View};
use brevis::tui::app::{App, Column, PriorMode};
use brevis::tui::event::{hints, map_event, map_key};
use brevis::tui::model::{fixture, MemorySource, MemoryTensor, Source, TensorRow};
use brevis::tui::{escape_name, escape_typed, parse_args, ui};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::tui::{app, keys, press};

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

/// The screen as text, one line per row (wide characters take one cell).
fn screen_text(app: &mut App, w: u16, h: u16) -> String {
    let buf = screen(app, w, h);
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
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
    // b selects the budget and starts editing it.
    press(&mut a, KeyCode::Char('b'));
    assert_eq!(a.search.field, Field::Budget);
    assert!(a.search.editing.is_some());
    for _ in 0..4 {
        press(&mut a, KeyCode::Backspace);
    }
    assert_eq!(a.search.form.opts.budget, 0);
    keys(&mut a, "32");
    assert_eq!(a.search.form.opts.budget, 32);
    press(&mut a, KeyCode::Enter);
    assert!(a.search.editing.is_none(), "Enter leaves the field");
    press(&mut a, KeyCode::Char('d'));
    press(&mut a, KeyCode::Char('-'));
    assert_eq!(a.search.form.opts.max_depth, 2);
    press(&mut a, KeyCode::Char('+'));
    press(&mut a, KeyCode::Enter);
    assert!(a.search.result.is_none(), "Enter does not run");
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.opts.budget, 32);
    assert_eq!(r.opts.max_depth, 4);
    assert_eq!(r.tensor, 0);
    assert_eq!(
        r.prior, "calibrated",
        "the default prior is calibrated, as compress"
    );
    let source = fixture();
    let decoded = source.decode(0).unwrap();
    let mut out = Vec::new();
    execute(&r.new.program, u64::MAX)
        .unwrap()
        .write_le_bytes(&mut out);
    assert_eq!(out, decoded, "the new program reproduces the tensor");
    assert_eq!(r.old.1, a.rows()[0].archive_bytes);
    assert!(r.new.stats.expansions <= 32);
    assert_eq!(
        a.search.expansions.load(Ordering::Relaxed),
        r.new.stats.expansions
    );
}

/// Bug: digits and r were typed into the form instead of switching views and re-running.
#[test]
fn search_view_keeps_global_keys_outside_editing() {
    let mut a = app();
    press(&mut a, KeyCode::Char('6'));
    assert_eq!(a.view, View::Search);
    assert!(a.search.editing.is_none());
    let ctx = a.key_context();
    assert!(hints(ctx).contains(&("r", "run")), "{:?}", hints(ctx));
    assert!(hints(ctx).contains(&("e/Enter", "edit")));
    press(&mut a, KeyCode::Char('1'));
    assert_eq!(a.view, View::Table, "a digit switches views");
    assert_eq!(
        a.search.form.opts.budget, 32,
        "and is not typed into the budget"
    );
    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('r'));
    assert_eq!(a.view, View::Search);
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.opts.budget, 32, "r re-runs with the form's limits");
    press(&mut a, KeyCode::Char('?'));
    assert_eq!(a.view, View::Help);
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.view, View::Search);

    // While editing, keys type into the field: q, ? and digits do not act.
    press(&mut a, KeyCode::Char('e'));
    assert!(a.search.editing.is_some());
    assert!(hints(a.key_context()).contains(&("Esc", "undo")));
    keys(&mut a, "1q?");
    assert!(!a.quit);
    assert_eq!(a.view, View::Search);
    assert_eq!(a.search.form.opts.budget, 321);
    press(&mut a, KeyCode::Esc);
    assert!(a.search.editing.is_none());
    assert_eq!(a.search.form.opts.budget, 32, "Esc undoes the edit");
    press(&mut a, KeyCode::Char('q'));
    assert!(a.quit);
}

/// Bug: node limit 0, depth 0 and depth > 32 were accepted and started a search.
#[test]
fn search_form_refuses_limits_the_library_rejects() {
    let mut a = app();
    press(&mut a, KeyCode::Char('6'));
    for (field, typed, msg) in [
        ('d', "0", "depth 0 is out of range: it must be 1 to 32"),
        ('d', "33", "depth 33 is out of range: it must be 1 to 32"),
        (
            'n',
            "0",
            "node limit 0 is out of range: it must be 1 to 65536",
        ),
        (
            'n',
            "70000",
            "node limit 70000 is out of range: it must be 1 to 65536",
        ),
    ] {
        let saved = a.search.form.clone();
        press(&mut a, KeyCode::Char(field));
        for _ in 0..8 {
            press(&mut a, KeyCode::Backspace);
        }
        keys(&mut a, typed);
        press(&mut a, KeyCode::Enter);
        press(&mut a, KeyCode::Char('r'));
        assert_eq!(a.search.form_error.as_deref(), Some(msg));
        assert!(a.search.running.is_none(), "no search started");
        assert!(a.search.result.is_none(), "no search started");
        let text = screen_text(&mut a, 120, 16);
        assert!(text.contains(&format!("✗ {msg}: not started")), "{text}");
        a.search.form = saved;
    }
    // The library's own check agrees, and budget 0 (the literal) is valid.
    let mut o = SearchOptions {
        budget: 0,
        ..SearchOptions::default()
    };
    assert_eq!(o.validate(), Ok(()));
    o.max_depth = 32;
    o.max_nodes = 65536;
    assert_eq!(o.validate(), Ok(()));
    // Back in range, the search runs and the message is gone.
    press(&mut a, KeyCode::Char('r'));
    assert!(a.search.form_error.is_none());
    assert!(a.search.result.as_ref().unwrap().is_ok());
}

/// The form takes a prior file: a missing or invalid one is refused in the form, naming
/// the file; a valid one orders the search; uniform and calibrated can be chosen.
#[test]
fn search_form_takes_a_prior_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = app();
    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('p'));
    press(&mut a, KeyCode::Char(' '));
    assert_eq!(a.search.form.prior, PriorMode::Uniform);
    press(&mut a, KeyCode::Enter);
    press(&mut a, KeyCode::Char('r'));
    assert_eq!(
        a.search.result.as_ref().unwrap().as_ref().unwrap().prior,
        "uniform"
    );

    let missing = dir.path().join("no-such-prior.json");
    press(&mut a, KeyCode::Char('f'));
    keys(&mut a, &missing.display().to_string());
    assert_eq!(
        a.search.form.prior,
        PriorMode::File,
        "typing a path picks the file"
    );
    press(&mut a, KeyCode::Enter);
    press(&mut a, KeyCode::Char('r'));
    let e = a.search.form_error.clone().unwrap();
    assert!(
        e.starts_with(&format!("prior file {}: cannot open", missing.display())),
        "{e}"
    );
    assert!(a.search.running.is_none(), "not started");
    let last = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(last.prior, "uniform", "the last result stays");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"schema":"brevis-prior/9","alpha":1,"counts":{}}"#).unwrap();
    set_prior_path(&mut a, &bad);
    press(&mut a, KeyCode::Char('r'));
    let e = a.search.form_error.clone().unwrap();
    assert_eq!(
        e,
        format!(
            "prior file {}: prior schema is \"brevis-prior/9\", expected \"brevis-prior/1\"",
            bad.display()
        )
    );
    let text = screen_text(&mut a, 160, 16);
    assert!(text.contains("bad.json: prior schema"), "{text}");

    // A real prior: learned from the fixture's tensors.
    let good = dir.path().join("prior.json");
    let mut prior = Prior::uniform();
    prior.source = "test".into();
    std::fs::write(&good, prior.to_json()).unwrap();
    set_prior_path(&mut a, &good);
    press(&mut a, KeyCode::Char('r'));
    assert!(a.search.form_error.is_none());
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(r.prior, format!("file {}", good.display()));
    let text = screen_text(&mut a, 200, 16);
    assert!(
        text.contains(&format!("prior file {}", good.display())),
        "{text}"
    );
}

fn set_prior_path(a: &mut App, path: &std::path::Path) {
    press(a, KeyCode::Char('f'));
    for _ in 0..a.search.form.prior_path.chars().count() {
        press(a, KeyCode::Backspace);
    }
    keys(a, &path.display().to_string());
    press(a, KeyCode::Enter);
}

/// A source of random BF16 words (stored as literals) large enough that a search takes
/// many expansions.
fn big_source(words: usize) -> MemorySource {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..words)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (((state >> 40) as u16) & 0x3fff | 0x3c00).to_le_bytes()
        })
        .collect();
    let w = Words::from_le_bytes(16, &bytes).unwrap();
    let program = Node::lit(&w);
    let row = TensorRow {
        name: "big".into(),
        dtype: Dtype::BF16,
        shape: vec![words as u64],
        original_bytes: bytes.len() as u64,
        archive_bytes: program_len(&program),
        root_op: "lit".into(),
    };
    MemorySource::from_tensors(
        "big.brv",
        vec![MemoryTensor {
            row,
            program,
            bytes,
        }],
    )
}

/// Cancel stops the search itself (it polls the flag once per expansion), and the view
/// shows expansions done against the budget as a gauge meanwhile.
///
/// Bug: `x` threw the search's work away ("cancelled after N expansions" and nothing
/// else). The search stops as if its budget ran out; its best program so far is the
/// result, marked cancelled, and `w` takes it like any other.
#[test]
fn cancel_stops_a_running_search_and_keeps_its_best_program() {
    let source = big_source(1 << 16);
    let target = execute(&source.program(0).unwrap(), u64::MAX).unwrap();
    let mut a = App::new(Arc::new(source));
    a.search.form.opts.budget = 1 << 40;
    a.search.form.prior = PriorMode::Uniform;
    a.apply(Action::Show(View::Search));
    a.apply(Action::SearchRun);
    assert!(a.search.running.is_some());
    let counter = a.search.expansions.clone();
    let start = std::time::Instant::now();
    while counter.load(Ordering::Relaxed) < 3 {
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        a.pump();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(a.search.running.is_some(), "still running when cancelled");
    let text = screen_text(&mut a, 120, 16);
    assert!(text.contains("searching (x cancels)"), "{text}");
    assert!(text.contains("/ 1,099,511,627,776 expansions"), "{text}");
    press(&mut a, KeyCode::Char('x'));
    assert!(a.search.running.is_none());
    assert!(!a.search.stopping);
    let r = match a.search_result() {
        Some(Ok(r)) => r.clone(),
        other => panic!("no result kept: {other:?}"),
    };
    assert!(r.cancelled);
    assert!(r.new.stats.expansions >= 3, "{:?}", r.new.stats);
    assert!(r.new.bytes <= r.old.1, "never larger than the literal");
    assert_eq!(execute(&r.new.program, u64::MAX).unwrap(), target, "exact");
    let text = screen_text(&mut a, 160, 16);
    let want = format!(
        "big: cancelled after {} expansions: best so far {} B",
        brevis::tui::inspect::thousands(r.new.stats.expansions),
        brevis::tui::inspect::thousands(r.new.bytes)
    );
    assert!(text.contains(&want), "{want} missing from:\n{text}");
    assert!(text.contains("stopped by x"), "{text}");
    assert!(
        text.contains("kept as a change · 1 pending change: w writes them all"),
        "{text}"
    );
    // The search stopped: the counter stays put.
    let after = counter.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(counter.load(Ordering::Relaxed), after, "the search went on");
    // `w` takes the cancelled result (this in-memory source has no file to copy).
    press(&mut a, KeyCode::Char('w'));
    assert_eq!(
        a.status,
        "this archive is not a file; nothing can be written"
    );
}

/// A search cancelled before it began (while calibrating its prior) has nothing to
/// show and says so; `r` then starts a new one.
#[test]
fn a_search_cancelled_before_it_began_says_nothing_was_found() {
    let mut a = App::new(Arc::new(big_source(1 << 16)));
    a.search.form.opts.budget = 1 << 40;
    a.apply(Action::Show(View::Search));
    a.apply(Action::SearchRun);
    // At once: the calibration polls the flag before its first tensor.
    a.apply(Action::Cancel);
    assert!(a.search.stopping);
    a.apply(Action::SearchRun);
    assert_eq!(
        a.status,
        "the search is stopping: its best program so far comes next"
    );
    assert!(a.settle(Duration::from_secs(120)));
    match a.search_result() {
        Some(Err(e)) => assert_eq!(e, "cancelled before the search began: nothing found"),
        Some(Ok(r)) => assert!(r.cancelled, "a result must be marked cancelled"),
        None => panic!("no result"),
    }
}

/// The library side of cancel: a search whose flag is already set expands nothing and
/// still returns an exact program.
#[test]
fn a_cancelled_search_returns_the_literal_at_once() {
    let w = Words::from_u64s(16, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let flag = Arc::new(AtomicBool::new(true));
    let count = Arc::new(AtomicU64::new(0));
    let opts = SearchOptions {
        budget: 1000,
        control: SearchControl {
            cancel: Some(flag),
            expansions: Some(count.clone()),
        },
        ..SearchOptions::default()
    };
    let s = brevis::synth::synthesize(&w, Some(Dtype::BF16), &opts);
    assert_eq!(s.stats.expansions, 0);
    assert_eq!(count.load(Ordering::Relaxed), 0);
    assert_eq!(execute(&s.program, u64::MAX).unwrap(), w);
    // Without the flag the counter follows the expansions.
    let opts = SearchOptions {
        budget: 1000,
        control: SearchControl {
            cancel: None,
            expansions: Some(count.clone()),
        },
        ..SearchOptions::default()
    };
    let s = brevis::synth::synthesize(&w, Some(Dtype::BF16), &opts);
    assert!(s.stats.expansions > 0);
    assert_eq!(count.load(Ordering::Relaxed), s.stats.expansions);
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
    for v in View::TABS.iter().cycle().skip(1).take(View::TABS.len()) {
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

/// `n` small U8 tensors named `t00`, `t01`, ... stored as literals.
fn many_rows(n: usize) -> MemorySource {
    let tensors = (0..n)
        .map(|i| {
            let bytes = vec![i as u8; 4];
            let program = Node::lit(&Words::from_le_bytes(8, &bytes).unwrap());
            MemoryTensor {
                row: TensorRow {
                    name: format!("t{i:02}"),
                    dtype: Dtype::U8,
                    shape: vec![4],
                    original_bytes: 4,
                    archive_bytes: program_len(&program),
                    root_op: "lit".into(),
                },
                program,
                bytes,
            }
        })
        .collect();
    MemorySource::from_tensors("many.brv", tensors)
}

/// Bug: after the terminal grew taller with the cursor on the last row, only the last
/// rows showed until scrolling.
#[test]
fn table_refills_the_window_after_growing_taller() {
    let mut a = App::new(Arc::new(many_rows(30)));
    let mut t = Terminal::new(TestBackend::new(100, 12)).unwrap();
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    press(&mut a, KeyCode::End);
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    // 12 lines: title, tabs, status, keys, and the table's header and footer: 6 rows.
    assert_eq!(a.selected, 29);
    assert_eq!(a.table_offset, 24);
    t.backend_mut().resize(100, 30);
    t.resize(ratatui::layout::Rect::new(0, 0, 100, 30)).unwrap();
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    // 24 rows fit: t06 to t29, none blank.
    assert_eq!(a.table_offset, 6);
    let buf = t.backend().buffer().clone();
    let line = |y: u16| -> String { (0..100).map(|x| buf[(x, y)].symbol().to_string()).collect() };
    assert!(line(3).contains(" t06 "), "{}", line(3));
    assert!(line(26).contains(" t29 "), "{}", line(26));
    assert!(line(26).starts_with("▶"), "{}", line(26));
    assert!(line(27).contains("total of 30 tensors"), "{}", line(27));
    // Growing taller than the list shows every row from the first.
    t.backend_mut().resize(100, 50);
    t.resize(ratatui::layout::Rect::new(0, 0, 100, 50)).unwrap();
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    assert_eq!(a.table_offset, 0);
}

/// Bug: Esc did not clear a kept filter though the screen said so.
#[test]
fn esc_clears_a_kept_filter_as_the_screen_says() {
    let mut a = app();
    press(&mut a, KeyCode::Char('/'));
    keys(&mut a, "norm");
    press(&mut a, KeyCode::Down);
    assert!(!a.filter_editing);
    assert_eq!(names(&a), vec!["norm.bias"]);
    let text = screen_text(&mut a, 110, 14);
    assert!(
        text.contains("1 of 6 tensors (/ edits, Esc clears)"),
        "{text}"
    );
    assert!(hints(a.key_context()).contains(&("Esc", "clear filter")));
    press(&mut a, KeyCode::Esc);
    assert!(a.filter.is_empty());
    assert_eq!(a.order.len(), 6);
    assert!(!screen_text(&mut a, 110, 14).contains("filter:"));
    // Also when the filter matches nothing, as the empty table says.
    press(&mut a, KeyCode::Char('/'));
    keys(&mut a, "zzz");
    press(&mut a, KeyCode::Enter);
    assert!(screen_text(&mut a, 110, 14).contains("(Esc clears it)"));
    press(&mut a, KeyCode::Esc);
    assert!(a.filter.is_empty());
    assert_eq!(a.order.len(), 6);
}

/// Bug: a typed backslash showed as two in the filter (names keep escaping theirs).
#[test]
fn a_typed_backslash_shows_once_in_the_filter() {
    let mut a = app();
    press(&mut a, KeyCode::Char('/'));
    keys(&mut a, "a\\b");
    assert_eq!(a.filter, "a\\b");
    let text = screen_text(&mut a, 110, 14);
    assert!(text.contains("filter: a\\b▏"), "{text}");
    assert!(!text.contains("a\\\\b"), "{text}");
    assert_eq!(
        escape_typed("a\\b\u{1b}[2J\u{202e}"),
        "a\\b\\x1b[2J\\u{202e}"
    );
    assert_eq!(
        escape_name("a\\b"),
        "a\\\\b",
        "names still escape backslashes"
    );
}

/// Bug: the Verify view printed its summary twice (verdict and status line).
#[test]
fn verify_view_prints_its_verdict_once() {
    let mut a = app();
    press(&mut a, KeyCode::Char('V'));
    let text = screen_text(&mut a, 100, 14);
    assert_eq!(text.matches("6/6 tensors bit-exact").count(), 1, "{text}");
    // From another view the verdict goes to the status line, once.
    press(&mut a, KeyCode::Char('1'));
    a.apply(Action::VerifyAll);
    a.apply(Action::Show(View::Table));
    assert!(a.settle(Duration::from_secs(60)));
    let text = screen_text(&mut a, 110, 14);
    assert_eq!(text.matches("6/6 tensors bit-exact").count(), 1, "{text}");
}

/// Bug: numbers wider than their column lost their leading digits.
#[test]
fn wide_numbers_keep_every_digit() {
    let mut src = many_rows(2);
    let mut tensors: Vec<MemoryTensor> = (0..2)
        .map(|i| MemoryTensor {
            row: src.rows()[i].clone(),
            program: src.program(i).unwrap(),
            bytes: src.decode(i).unwrap(),
        })
        .collect();
    tensors[0].row.original_bytes = 123_456_789_012;
    tensors[0].row.archive_bytes = 98_765_432_109;
    tensors[0].row.shape = vec![123_456, 1_000_001];
    src = MemorySource::from_tensors("wide.brv", tensors);
    let mut a = App::new(Arc::new(src));
    let text = screen_text(&mut a, 130, 12);
    for n in [
        "123,456,789,012",
        "98,765,432,109",
        "123,456,789,016",
        "[123456, 1000001]",
    ] {
        assert!(text.contains(n), "{n} cut:\n{text}");
    }
}

/// Bug: `brevis-tui --bogus` was taken as a path.
#[test]
fn unknown_options_are_a_usage_error() {
    let (msg, code) = parse_args(["--bogus"]).unwrap_err();
    assert_eq!(code, 2);
    assert!(msg.contains("--bogus"), "{msg}");
    let (help, code) = parse_args(["--help"]).unwrap_err();
    assert_eq!(code, 0);
    for want in [
        "PATH",
        ".brv",
        ".safetensors",
        "folder",
        "built-in demo",
        "Keys",
        "q ",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
    assert_eq!(
        parse_args(["model.brv"]).unwrap().path.as_deref(),
        Some(std::path::Path::new("model.brv"))
    );
    assert_eq!(parse_args(Vec::<String>::new()).unwrap().path, None);
    assert_eq!(parse_args(["a", "b"]).unwrap_err().1, 2);
    let with_base = parse_args(["ft.brv", "--base", "base.safetensors"]).unwrap();
    assert_eq!(
        with_base.base.as_deref(),
        Some(std::path::Path::new("base.safetensors"))
    );
    // The real binary: exit status 2 and the usage on standard error, no terminal set up.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument '--bogus'"), "{err}");
    assert!(err.contains("Usage: brevis-tui [OPTIONS] [PATH]"), "{err}");
    assert!(out.stdout.is_empty());
}

/// Messages are shown as written: a backslash in an error (the archive magic's `\0`) is
/// not doubled as it is in tensor names, and without a terminal the program says so
/// instead of failing on the device.
#[test]
fn messages_keep_their_backslashes_and_no_terminal_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.brv");
    std::fs::write(&bad, b"XXXXXXXXXXXXXXXX").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(r#"(expected "BREVIS\0\0")"#), "{err}");
    // An archive that opens, but standard input and output are not a terminal.
    let good = dir.path().join("good.brv");
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    brevis::archive::compress_file(
        &demo,
        &good,
        &brevis::archive::CompressOptions::default(),
        &brevis::archive::no_progress,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
        .arg(&good)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("brevis-tui needs a terminal"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "no escape codes on redirected output"
    );
    // A record whose tensor name is no longer UTF-8 keeps the archive from opening:
    // exit 3 (damage), as `brevis ls` and `verify` give it, not 1 (found by a tester).
    // Records of format version 1 repeat their tensor's name (version 2 keeps it in the
    // header record only): the committed version-1 archive of B20_mixed_dtypes.
    let v1 =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1/B20_mixed_dtypes.brv");
    let mut bytes = std::fs::read(&v1).unwrap();
    let first = brevis::Archive::open(&v1).unwrap().tensors()[0]
        .name
        .clone();
    let name = first.as_bytes();
    let at = bytes
        .windows(name.len())
        .rposition(|w| w == name)
        .expect("the name is in a record");
    bytes[at] = 0xff;
    let damaged = dir.path().join("damaged.brv");
    std::fs::write(&damaged, &bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
        .arg(&damaged)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not UTF-8"), "{err}");
    let ls = std::process::Command::new(env!("CARGO_BIN_EXE_brevis"))
        .arg("ls")
        .arg(&damaged)
        .output()
        .unwrap();
    assert_eq!(ls.status.code(), Some(3));
}

/// Bug: after moving to another tensor the Search view still showed the last tensor's
/// result, and `w` would have written it while the form named another tensor. The
/// result is shown (and written) only on the tensor it ran on.
#[test]
fn search_result_stays_with_its_tensor() {
    let mut a = app();
    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('r'));
    let first = a.rows()[0].name.clone();
    assert_eq!(a.search_result().unwrap().as_ref().unwrap().tensor, 0);
    let text = screen_text(&mut a, 160, 16);
    assert!(text.contains(&format!("{first}: archive ")), "{text}");
    assert!(text.contains(" new · "), "{text}");

    press(&mut a, KeyCode::Down);
    let second = escape_name(&a.selected_row().unwrap().name).into_owned();
    assert!(a.search_result().is_none());
    let text = screen_text(&mut a, 160, 16);
    assert!(text.contains(&format!("search {second} ")), "{text}");
    assert!(
        !text.contains(": archive "),
        "old result still shown:\n{text}"
    );
    assert!(
        !text.contains(" new · "),
        "old program still shown:\n{text}"
    );
    assert!(
        text.contains("r runs the search on the selected tensor"),
        "{text}"
    );
    // w does not offer the other tensor's program.
    press(&mut a, KeyCode::Char('w'));
    assert!(a.search.prompt.is_none());
    assert_eq!(
        a.status,
        format!(
            "nothing to write for this tensor: the last search ran on {first} (r searches this one)"
        )
    );

    // Back on the searched tensor, its result is there again.
    press(&mut a, KeyCode::Up);
    assert_eq!(a.search_result().unwrap().as_ref().unwrap().tensor, 0);
    assert!(screen_text(&mut a, 160, 16).contains(&format!("{first}: archive ")));
}

/// Bug: depth 0 (and other out-of-range limits) were refused only on `r`, and a huge
/// budget was clamped without a word. Both are flagged as they are typed, naming the
/// field and the limit.
#[test]
fn search_form_flags_bad_values_as_typed() {
    let mut a = app();
    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('d'));
    press(&mut a, KeyCode::Backspace);
    assert_eq!(a.search.form.opts.max_depth, 0);
    let msg = "depth 0 is out of range: it must be 1 to 32";
    assert_eq!(a.search.form_note.as_deref(), Some(msg));
    assert!(a.search.editing.is_some(), "still editing, nothing run");
    let text = screen_text(&mut a, 120, 16);
    assert!(text.contains(&format!("⚠ {msg}")), "{text}");
    keys(&mut a, "5");
    assert!(a.search.form_note.is_none(), "a valid value clears it");
    keys(&mut a, "0");
    assert_eq!(
        a.search.form_note.as_deref(),
        Some("depth 50 is out of range: it must be 1 to 32")
    );
    press(&mut a, KeyCode::Esc);
    assert!(a.search.form_note.is_none(), "Esc restores a valid form");

    press(&mut a, KeyCode::Char('b'));
    keys(&mut a, "99999999999999");
    assert_eq!(a.search.form.opts.budget, brevis::tui::app::MAX_BUDGET);
    let msg = "budget clamped to 1,099,511,627,776 expansions, the most the form takes";
    assert_eq!(a.search.form_note.as_deref(), Some(msg));
    press(&mut a, KeyCode::Enter);
    let text = screen_text(&mut a, 120, 16);
    assert!(text.contains(&format!("⚠ {msg}")), "{text}");
}

/// Bug: cancelling a verification showed "verify: cancelled" and a second "cancelled"
/// in the status line.
#[test]
fn a_cancelled_verify_says_so_once() {
    let mut a = App::new(Arc::new(big_source(1 << 12)));
    a.apply(Action::VerifyAll);
    assert!(a.verify.running.is_some());
    a.apply(Action::Cancel);
    assert!(a.settle(Duration::from_secs(60)));
    let text = screen_text(&mut a, 100, 12);
    assert_eq!(text.matches("cancelled").count(), 1, "{text}");
    assert!(text.contains("verify: cancelled"), "{text}");
    // From another view the status line is the only place that says it.
    a.apply(Action::VerifyAll);
    a.apply(Action::Show(View::Table));
    a.apply(Action::Cancel);
    assert_eq!(a.status, "verify cancelled");
    assert!(a.settle(Duration::from_secs(60)));
}

fn trimmed_line(text: &str, row: usize) -> String {
    text.lines().nth(row).unwrap().trim_end().to_string()
}

/// Bug: one-line texts too wide for the terminal (the tree's header line, plot titles,
/// a write error) were cut without a mark; they end in `…` now.
#[test]
fn long_lines_are_cut_with_an_ellipsis() {
    assert_eq!(ui::fit_end("program 1,234 B", 20), "program 1,234 B");
    assert_eq!(ui::fit_end("program 1,234 B", 10), "program 1…");
    assert_eq!(ui::fit_end("程序程序", 5), "程序…");
    assert_eq!(ui::fit_end("abc", 0), "");
    let (n, r) = ui::fit_name_and_rest("embed.weight", "  program 1,234 B", 20);
    assert_eq!(format!("{n}{r}"), "embed.weight  progr…");
    let (n, r) = ui::fit_name_and_rest("a.very.long.tensor.name.weight", ": exponent", 12);
    assert_eq!((ui::text_width(&n), r.as_str()), (12, ""));

    let mut a = app();
    press(&mut a, KeyCode::Char('2'));
    // The tree's header is wrapped onto a second line rather than cut (issue 27).
    let head = trimmed_line(&screen_text(&mut a, 50, 16), 2);
    assert_eq!(head, "embed.weight  program 146 B in 3 nodes");
    let text = screen_text(&mut a, 30, 16);
    assert_eq!(
        [trimmed_line(&text, 2), trimmed_line(&text, 3)],
        ["embed.weight  program 146 B in", "3 nodes"]
    );

    press(&mut a, KeyCode::Char('5'));
    let top = trimmed_line(&screen_text(&mut a, 60, 20), 2);
    assert!(top.starts_with("┌ embed.weight: "), "{top}");
    assert!(top.contains("…"), "{top}");

    press(&mut a, KeyCode::Char('6'));
    press(&mut a, KeyCode::Char('r'));
    let long = format!(
        "/{}/model.researched.brv: cannot create: permission denied",
        "deep/".repeat(30)
    );
    a.search.written = Some(Err(long));
    let text = screen_text(&mut a, 80, 16);
    let line = text.lines().find(|l| l.contains("✗ write: ")).unwrap();
    let line = line.trim_end();
    assert!(line.contains('…'), "{line}");
    assert!(line.ends_with("permission denied"), "{line}");
}

/// `brevis-tui DIR`: a folder is not an archive; the message names the folder and the
/// command that compresses it, as `--help` does.
#[test]
fn a_folder_argument_points_to_brevis_compress() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    // brevis-tui on the folder: exit status 1 and an error that contains `want`.
    let refused_with = |want: String| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis-tui"))
            .arg(&ckpt)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&want), "{err}");
    };
    // An empty folder is not a checkpoint either: no command is suggested that would
    // refuse it in turn.
    refused_with(format!(
        "{} is a folder: brevis-tui opens one archive (.brv) or one checkpoint \
         (.safetensors), and this folder holds neither",
        ckpt.display()
    ));
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors"),
        ckpt.join("model.safetensors"),
    )
    .unwrap();
    refused_with(format!(
        "{} is a folder: brevis-tui opens one archive; compress the checkpoint folder first with `brevis compress {}`",
        ckpt.display(),
        ckpt.display()
    ));
    // A `.brv` name on a file that is not an archive (a tester's hard link to a
    // .safetensors file) is not offered.
    std::fs::write(ckpt.join("a.brv"), b"not an archive").unwrap();
    refused_with(format!(
        "{} is a folder: brevis-tui opens one archive; compress the checkpoint folder first",
        ckpt.display()
    ));
    // A folder of archives: one of them is named.
    std::fs::write(ckpt.join("model-00001-of-00002.brv"), b"BREVIS\0\0").unwrap();
    refused_with(format!(
        "e.g. `brevis-tui {}`",
        ckpt.join("model-00001-of-00002.brv").display()
    ));
}

/// `n` position ids `0..n` of dtype I64 in one tensor, stored as a literal.
fn position_ids(n: u64) -> MemorySource {
    let bytes: Vec<u8> = (0..n).flat_map(|v| v.to_le_bytes()).collect();
    let program = Node::lit(&Words::from_le_bytes(64, &bytes).unwrap());
    MemorySource::from_tensors(
        "positions.brv",
        vec![MemoryTensor {
            row: TensorRow {
                name: "position_ids".into(),
                dtype: Dtype::I64,
                shape: vec![1, n],
                original_bytes: bytes.len() as u64,
                archive_bytes: program_len(&program),
                root_op: "lit".into(),
            },
            program,
            bytes,
        }],
    )
}

/// Bug: the histogram of 512 I64 position ids (64 bins of 8 values) labelled each bar
/// with one value (`0`, `32-`) and its caption said a bar sums 4 "values" (bins).
#[test]
fn histogram_bars_of_several_values_show_their_range() {
    let mut a = App::new(Arc::new(position_ids(512)));
    press(&mut a, KeyCode::Char('5'));
    assert_eq!(a.view, View::Plots);
    let text = screen_text(&mut a, 120, 30);
    assert!(text.contains("signed values of the I64 words"), "{text}");
    assert!(!text.contains("bins of"), "{text}");
    for label in ["0-63", "64-127", "448-511"] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    assert!(text.contains("each bar spans 64 values"), "{text}");
    assert!(!text.contains(" 32- "), "{text}");
}

/// Bug: PageDown and PageUp moved 10 rows whatever the list's height.
#[test]
fn page_keys_move_by_the_rows_the_list_shows() {
    let mut a = App::new(Arc::new(many_rows(60)));
    let mut t = Terminal::new(TestBackend::new(100, 12)).unwrap();
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    // 12 lines: title, tabs, status, keys, the table's header and footer: 6 rows.
    press(&mut a, KeyCode::PageDown);
    assert_eq!(a.selected, 6);
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    press(&mut a, KeyCode::PageDown);
    assert_eq!(a.selected, 12);
    press(&mut a, KeyCode::PageUp);
    assert_eq!(a.selected, 6);
    // Taller: 24 rows a page.
    t.backend_mut().resize(100, 30);
    t.resize(ratatui::layout::Rect::new(0, 0, 100, 30)).unwrap();
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    press(&mut a, KeyCode::PageDown);
    assert_eq!(a.selected, 30);
    t.draw(|f| ui::draw(f, &mut a)).unwrap();
    press(&mut a, KeyCode::PageDown);
    press(&mut a, KeyCode::PageDown);
    assert_eq!(a.selected, 59, "stops at the last row");
    press(&mut a, KeyCode::PageUp);
    assert_eq!(a.selected, 35);
    press(&mut a, KeyCode::Home);
    assert_eq!(a.selected, 0);
    press(&mut a, KeyCode::End);
    assert_eq!(a.selected, 59);
    // The program text scrolls by its own page.
    let mut b = App::new(Arc::new(fixture()));
    press(&mut b, KeyCode::Char('3'));
    let mut t = Terminal::new(TestBackend::new(100, 14)).unwrap();
    t.draw(|f| ui::draw(f, &mut b)).unwrap();
    assert!(b.pages.text < 10, "{:?}", b.pages);
    press(&mut b, KeyCode::PageDown);
    assert_eq!(b.scroll, b.pages.text);
}

/// A `.safetensors` file of three F32 tensors, the second of 300 values.
fn three_tensors() -> Vec<u8> {
    let header = r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[300],"data_offsets":[16,1216]},"c":{"dtype":"F32","shape":[2],"data_offsets":[1216,1224]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend((0..306u32).flat_map(|i| (i as f32 * 0.25).to_le_bytes()));
    bytes
}

/// Bug: while compressing, progress counted records (the header too: "4") while the
/// table counts tensors ("3 tensors"). Both count tensors now.
#[test]
fn compress_progress_counts_tensors() {
    let bytes = three_tensors();
    let src = brevis::archive::safetensors::parse(&bytes).unwrap();
    let counter = std::cell::RefCell::new(brevis::tui::TensorProgress::new(&src));
    assert_eq!(counter.borrow().total(), 3);
    let shown = std::cell::RefCell::new(Vec::new());
    brevis::archive::writer::write_archive(
        &src,
        &mut Vec::new(),
        &brevis::archive::CompressOptions::default(),
        &|ev| {
            if let Some((done, total, _)) = counter.borrow_mut().update(ev) {
                shown.borrow_mut().push((done, total));
            }
        },
        std::path::Path::new("three.brv"),
    )
    .unwrap();
    // The header, then the tensors a, b, c.
    assert_eq!(
        shown.into_inner(),
        vec![(0, 3), (0, 3), (1, 3), (2, 3), (3, 3)]
    );

    // The loading screen says "tensors", as the table's total does.
    let mut a = App::empty();
    a.start_loading("three.safetensors".into(), "three.brv".into(), |ctx| {
        ctx.progress(2, 3, "b");
        while !ctx.cancelled() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Err("cancelled".into())
    });
    let start = std::time::Instant::now();
    while a.loading.as_ref().is_some_and(|l| l.job.progress.1 != 3) {
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        a.pump();
        std::thread::sleep(Duration::from_millis(5));
    }
    let text = screen_text(&mut a, 80, 20);
    assert!(text.contains("2/3 tensors · b"), "{text}");
    assert!(!text.contains("region"), "{text}");
    a.apply(Action::Cancel);
}

/// Bug: quitting after `x` cancelled a compression exited with status 1 (as for an
/// error) while `q` exited with 0. Ending the session is not an error; `--help` says
/// what each status means.
#[test]
fn cancelling_a_compression_is_not_an_error() {
    fn waiting(ctx: &brevis::tui::worker::JobCtx) -> Result<Arc<dyn Source>, String> {
        while !ctx.cancelled() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Err("cancelled".into())
    }
    for key in [KeyCode::Char('x'), KeyCode::Esc, KeyCode::Char('q')] {
        let mut a = App::empty();
        a.start_loading("in.safetensors".into(), "in.brv".into(), waiting);
        press(&mut a, key);
        assert!(a.quit, "{key:?}");
        assert_eq!(a.load_error, None, "{key:?}");
        assert_eq!(a.exit_code(), 0, "{key:?}");
        assert_eq!(
            a.exit_note.as_deref(),
            Some("cancelled: no archive was written")
        );
    }
    // A compression that fails is an error.
    let mut a = App::empty();
    a.start_loading("in.safetensors".into(), "in.brv".into(), |_ctx| {
        Err("in.safetensors: not a safetensors file".into())
    });
    assert!(a.settle(Duration::from_secs(60)));
    assert!(a.quit);
    assert_eq!(a.exit_code(), 1);
    // q on an opened archive.
    let mut b = app();
    press(&mut b, KeyCode::Char('q'));
    assert_eq!(b.exit_code(), 0);
    let (help, code) = parse_args(["--help"]).unwrap_err();
    assert_eq!(code, 0);
    for want in [
        "Exit status:",
        "0                   you ended the session",
        "after x cancelled a",
        "1                   an error",
        "2                   bad arguments",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
}

/// A one-tensor source named `t` of dtype `dtype` holding `values` as `width`-bit
/// little-endian words.
fn int_tensor(dtype: Dtype, width: u32, values: &[i64]) -> MemorySource {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|v| v.to_le_bytes()[..(width / 8) as usize].to_vec())
        .collect();
    let program = Node::lit(&Words::from_le_bytes(width, &bytes).unwrap());
    MemorySource::from_tensors(
        "ints.brv",
        vec![MemoryTensor {
            row: TensorRow {
                name: "t".into(),
                dtype,
                shape: vec![values.len() as u64],
                original_bytes: bytes.len() as u64,
                archive_bytes: program_len(&program),
                root_op: "lit".into(),
            },
            program,
            bytes,
        }],
    )
}

/// The Plots view of `src` at 120 x 30.
fn plots_text(src: MemorySource) -> String {
    let mut a = App::new(Arc::new(src));
    press(&mut a, KeyCode::Char('5'));
    assert_eq!(a.view, View::Plots);
    screen_text(&mut a, 120, 30)
}

/// Bug: the bars of an I64 tensor of values 0..=2997 were labelled
/// `0 188 376 564 752 940 112 131`: `1128` and `1316` cut to three characters.
#[test]
fn histogram_labels_are_never_cut_into_other_numbers() {
    let text = plots_text(int_tensor(Dtype::I64, 64, &(0..2998).collect::<Vec<_>>()));
    for cut in [" 112 ", " 131 ", " 150 "] {
        assert!(!text.contains(cut), "{cut} in:\n{text}");
    }
    for label in ["1128", "1504"] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    // Seven-digit values: shortened with a unit, never cut.
    let text = plots_text(int_tensor(
        Dtype::I64,
        64,
        &(0..3000).map(|v| v * 1000).collect::<Vec<_>>(),
    ));
    assert!(text.contains("1.1M"), "{text}");
    assert!(!text.contains(" 112 "), "{text}");
}

/// Bug: the title said "in bins of 47" while the caption said "each bar spans 188
/// values"; big spans had no thousands separators.
#[test]
fn histogram_title_and_caption_agree_on_the_bar_span() {
    let text = plots_text(int_tensor(Dtype::I64, 64, &(0..2998).collect::<Vec<_>>()));
    assert!(!text.contains("bins of"), "{text}");
    assert!(text.contains("each bar spans 188 values"), "{text}");
    let text = plots_text(int_tensor(
        Dtype::I64,
        64,
        &(0..3000).map(|v| v * 1000).collect::<Vec<_>>(),
    ));
    assert!(!text.contains("bins of"), "{text}");
    assert!(text.contains("each bar spans 187,440 values"), "{text}");
}

/// Bug: signed tensors were plotted as unsigned words: I8 labelled 0..255 and
/// i64::MIN shown as 9223372036854775808.
#[test]
fn histogram_of_signed_tensors_uses_signed_values() {
    let text = plots_text(int_tensor(Dtype::I8, 8, &(-128..128).collect::<Vec<_>>()));
    assert!(text.contains("signed values of the I8 words"), "{text}");
    assert!(text.contains("-128"), "{text}");
    assert!(!text.contains("255"), "{text}");
    let text = plots_text(int_tensor(
        Dtype::I64,
        64,
        &(0..1000)
            .map(|v| i64::MIN + v)
            .chain(0..1000)
            .collect::<Vec<_>>(),
    ));
    assert!(!text.contains("9223372036854775808"), "{text}");
    assert!(text.contains("-9.2E"), "{text}");
}

/// Bug: `x` at the very end of a compression said "cancelled: no archive was written"
/// while the finished archive had just been moved into place. Moving it is the job's
/// commit: a cancel after it waits for the archive and opens it, saying so; a cancel
/// before it quits at once and the job never moves anything.
#[test]
fn a_cancel_after_the_archive_is_in_place_opens_it() {
    use std::sync::mpsc::channel;
    let (placed_tx, placed) = channel();
    let (go, go_rx) = channel::<()>();
    let mut a = App::empty();
    a.start_loading("in.safetensors".into(), "in.brv".into(), move |ctx| {
        let moved = ctx.commit(|| "moved into place");
        placed_tx.send(moved.is_some()).unwrap();
        go_rx.recv().unwrap();
        Ok(Arc::new(fixture()) as Arc<dyn Source>)
    });
    assert!(placed.recv().unwrap(), "not cancelled yet: the job commits");
    let x = map_key(
        a.key_context(),
        KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE),
    );
    a.apply(x.unwrap());
    assert!(!a.quit);
    let text = screen_text(&mut a, 80, 20);
    assert!(
        text.contains("too late to cancel: the archive is written; opening it"),
        "{text}"
    );
    go.send(()).unwrap();
    assert!(a.settle(Duration::from_secs(60)));
    assert!(!a.quit, "the archive is there: it is opened");
    assert_eq!(a.exit_note, None);
    assert_eq!(a.rows().len(), 6);
    assert_eq!(
        a.status,
        "too late to cancel: the archive was already written to in.brv"
    );
    let text = screen_text(&mut a, 100, 12);
    assert!(text.contains("too late to cancel"), "{text}");

    // Cancelled before the commit: the job does not move the archive.
    for key in [KeyCode::Char('x'), KeyCode::Char('q')] {
        let (placed_tx, placed) = channel();
        let (go, go_rx) = channel::<()>();
        let mut a = App::empty();
        a.start_loading("in.safetensors".into(), "in.brv".into(), move |ctx| {
            go_rx.recv().unwrap();
            let moved = ctx.commit(|| "moved into place");
            placed_tx.send(moved.is_some()).unwrap();
            Err("cancelled".into())
        });
        let k = map_key(a.key_context(), KeyEvent::new(key, KeyModifiers::NONE));
        a.apply(k.unwrap());
        assert!(a.quit, "{key:?}");
        assert_eq!(
            a.exit_note.as_deref(),
            Some("cancelled: no archive was written")
        );
        go.send(()).unwrap();
        assert!(!placed.recv().unwrap(), "{key:?}: moved after the cancel");
    }
}

/// A source whose rows claim the sizes of a real checkpoint's tensors (the table only
/// shows rows).
fn wide_numbers() -> MemorySource {
    let t = |name: &str, shape: Vec<u64>, original: u64, archive: u64, root: &str| {
        let program = Node::lit(&Words::from_u64s(16, &[1, 2, 3]));
        MemoryTensor {
            row: TensorRow {
                name: name.into(),
                dtype: Dtype::BF16,
                shape,
                original_bytes: original,
                archive_bytes: archive,
                root_op: root.into(),
            },
            program,
            bytes: vec![1, 0, 2, 0, 3, 0],
        }
    };
    MemorySource::from_tensors(
        "wide.brv",
        vec![
            t(
                "embeddings.word_embeddings.weight",
                vec![30522, 384],
                23_440_896,
                15_296_101,
                "merge",
            ),
            t("pooler.dense.bias", vec![384], 768, 43, "const"),
        ],
    )
}

/// Bug: at 40 columns the table cut numbers from the left (`23,440,896` showed as
/// `40,896`) and the name column vanished. Columns go, least useful first, before a
/// number is cut; the name keeps some characters, losing its middle.
#[test]
fn a_narrow_table_drops_columns_and_never_cuts_numbers() {
    for width in [30u16, 40, 50, 60, 80, 100, 140] {
        let mut a = App::new(Arc::new(wide_numbers()));
        let text = screen_text(&mut a, width, 12);
        let lines: Vec<&str> = text.lines().collect();
        let header = lines[2];
        let row = lines[3];
        let footer = lines
            .iter()
            .find(|l| l.contains("total"))
            .unwrap_or_else(|| panic!("{width}: no footer in\n{text}"));
        // Every number shown is whole: the digits groups of a value appear whole or
        // not at all.
        for (cell, whole) in [
            (row, "23,440,896"),
            (row, "15,296,101"),
            (footer, "23,441,664"),
            (footer, "15,296,144"),
        ] {
            for part in ["440,896", "296,101", "441,664", "296,144"] {
                if cell.contains(part) && whole.ends_with(part) {
                    assert!(
                        cell.contains(whole) || !whole.contains(part),
                        "{width}: {part} without {whole}:\n{text}"
                    );
                }
            }
        }
        for n in ["23,440,896", "15,296,101"] {
            let cut = &n[n.len() - 6..];
            assert!(
                !row.contains(cut) || row.contains(n),
                "{width}: {n} cut:\n{text}"
            );
        }
        assert!(header.contains("name"), "{width}: no name column:\n{text}");
        assert!(row.contains("emb"), "{width}: no name:\n{text}");
        assert!(
            row.contains("weight") || width < 40,
            "{width}: the name's end goes last:\n{text}"
        );
        if width >= 40 {
            // The archive bytes and the reduction stay longest.
            assert!(row.contains("15,296,101"), "{width}:\n{text}");
        }
        if width >= 140 {
            for title in ["dtype", "shape", "original", "root"] {
                assert!(header.contains(title), "{width}: {title}:\n{text}");
            }
            assert!(row.contains("[30522, 384]"), "{width}:\n{text}");
        }
    }
    // At 40 columns: `#`, the name, the archive bytes and the reduction.
    let mut a = App::new(Arc::new(wide_numbers()));
    let text = screen_text(&mut a, 40, 8);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["#", "▲", "name", "archive", "reduction"],
        "{text}"
    );
    let row: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(row.len(), 5, "{text}");
    assert_eq!(row[..2], ["▶", "0"], "{text}");
    assert!(row[2].starts_with("emb") && row[2].contains('…'), "{text}");
    assert!(row[2].ends_with("weight"), "{text}");
    assert_eq!(row[3..], ["15,296,101", "34.75%"], "{text}");
}

/// Low: the header said "-24.87% smaller" for an archive that grew and "20000 tensors"
/// without a separator; the CLI says "24.9% larger".
#[test]
fn the_header_says_larger_and_separates_thousands() {
    let grown = |n: usize, original: u64, archive: u64| {
        let tensors = (0..n)
            .map(|i| MemoryTensor {
                row: TensorRow {
                    name: format!("t{i}"),
                    dtype: Dtype::BF16,
                    shape: vec![3],
                    original_bytes: original,
                    archive_bytes: archive,
                    root_op: "lit".into(),
                },
                program: Node::lit(&Words::from_u64s(16, &[1, 2, 3])),
                bytes: vec![1, 0, 2, 0, 3, 0],
            })
            .collect();
        MemorySource::from_tensors("g.brv", tensors)
    };
    let mut a = App::new(Arc::new(grown(20_000, 4, 5)));
    let text = screen_text(&mut a, 160, 6);
    assert!(
        text.contains("20,000 tensors · 80,000 → 100,000 bytes · file 25.00% larger"),
        "{text}"
    );
    let mut a = App::new(Arc::new(grown(1, 6, 3)));
    let text = screen_text(&mut a, 160, 6);
    assert!(
        text.contains("1 tensor · 6 → 3 bytes · file 50.00% smaller"),
        "{text}"
    );
}

/// `w` in the Search view refuses a path that is a symbolic link, as the CLI refuses to
/// write through links: a link to the open archive was offered "replace it in place",
/// then replaced by a file while the archive stayed unchanged (found by a tester).
#[cfg(unix)]
#[test]
fn writing_a_searched_program_refuses_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join("f.brv");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(["compress", src, "-o"])
        .arg(&brv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let link = dir.path().join("f.researched.brv");
    std::os::unix::fs::symlink(&brv, &link).unwrap();
    let before = std::fs::read(&brv).unwrap();
    let source = brevis::tui::archive_source::ArchiveSource::open(&brv).unwrap();
    let mut a = App::new(Arc::new(source));
    press(&mut a, KeyCode::Char('6'));
    // Row 0 of the demo, embeddings.position_ids: budget 32 finds a program other than
    // the archive's (`w` writes nothing when the search finds the archive's own).
    press(&mut a, KeyCode::Char('r'));
    let r = a.search.result.as_ref().unwrap().as_ref().unwrap();
    assert_ne!(r.new.program, r.old.0);
    press(&mut a, KeyCode::Char('w'));
    let p = a.search.prompt.as_mut().expect("the write prompt is open");
    p.path = link.display().to_string();
    press(&mut a, KeyCode::Enter);
    let p = a.search.prompt.as_ref().expect("the prompt stays open");
    assert_eq!(p.confirm, None);
    assert_eq!(
        p.error.as_deref(),
        Some(
            format!(
                "{} is a symbolic link: type the path of a file (or remove the link)",
                link.display()
            )
            .as_str()
        )
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&brv).unwrap(), before);
}

/// A status line answers the last key and goes with the next one (a tester saw "nothing
/// to cancel" stay on screen after later actions).
#[test]
fn the_status_line_goes_with_the_next_key() {
    let mut a = app();
    a.apply(Action::Cancel);
    assert_eq!(a.status, "nothing to cancel");
    assert!(screen_text(&mut a, 100, 20).contains("nothing to cancel"));
    press(&mut a, KeyCode::Down);
    assert_eq!(a.status, "");
    assert!(!screen_text(&mut a, 100, 20).contains("nothing to cancel"));
}

/// The search view's program panes scroll with PageUp / PageDown (the arrows pick the
/// tensor there): a `concat` of 40 regions does not fit them (a tester could see only
/// its first lines).
#[test]
fn the_search_view_scrolls_a_long_program() {
    let bytes: Vec<u8> = (0..40u8).flat_map(|r| [r, r ^ 0x5a, 7, r]).collect();
    let parts = bytes
        .chunks(4)
        .map(|c| Node::lit(&Words::from_le_bytes(8, c).unwrap()))
        .collect();
    let program = Node::concat(parts).unwrap();
    let src = MemorySource::from_tensors(
        "regions.brv",
        vec![MemoryTensor {
            row: TensorRow {
                name: "regions".into(),
                dtype: Dtype::U8,
                shape: vec![160],
                original_bytes: 160,
                archive_bytes: program_len(&program),
                root_op: "concat".into(),
            },
            program,
            bytes,
        }],
    );
    let mut a = App::new(Arc::new(src));
    press(&mut a, KeyCode::Char('6'));
    assert_eq!(a.view, View::Search);
    let text = screen_text(&mut a, 120, 30);
    assert!(text.contains("lines 1-"), "{text}");
    assert!(text.contains(" of 41 (PgUp/PgDn)"), "{text}");
    let page = a.pages.search;
    assert!(page > 1 && page < 41, "{page}");
    press(&mut a, KeyCode::PageDown);
    assert_eq!(a.search_scroll, page);
    let text = screen_text(&mut a, 120, 30);
    assert!(
        text.contains(&format!("lines {}-{} of 41", page + 1, 2 * page)),
        "{text}"
    );
    assert!(
        !text.contains("concat :"),
        "the root line scrolled away:\n{text}"
    );
    // As far as the last line, no further.
    for _ in 0..10 {
        press(&mut a, KeyCode::PageDown);
    }
    screen_text(&mut a, 120, 30);
    assert_eq!(a.search_scroll, 41 - page);
    press(&mut a, KeyCode::PageUp);
    screen_text(&mut a, 120, 30);
    assert_eq!(a.search_scroll, 41 - 2 * page);
    // Another tensor (here: the same, picked again) starts at the top.
    press(&mut a, KeyCode::Down);
    assert_eq!(a.search_scroll, 0);
}
