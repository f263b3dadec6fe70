//! Driving brevis-tui's app in tests: the fixture app, keys pressed (each action's jobs
//! settled), and durations redacted from rendered screens so snapshots do not depend on
//! the machine's speed.

use brevis::tui::app::App;
use brevis::tui::event::map_key;
use brevis::tui::model::fixture;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::sync::Arc;
use std::time::Duration;

/// The app over the fixture source.
pub fn app() -> App {
    App::new(Arc::new(fixture()))
}

/// Presses `code` and waits (at most a minute) for the jobs it started.
pub fn press(app: &mut App, code: KeyCode) {
    if let Some(a) = map_key(app.key_context(), KeyEvent::new(code, KeyModifiers::NONE)) {
        app.apply(a);
    }
    assert!(app.settle(Duration::from_secs(60)), "jobs did not finish");
}

/// Presses each character of `s` ([`press`]).
pub fn keys(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// Replaces the digits of durations (`0.01 s`) with `#`, keeping widths, so snapshots
/// do not depend on the machine's speed.
pub fn redact_seconds(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_ascii_digit()) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let is_time = chars.get(i) == Some(&' ')
                && chars.get(i + 1) == Some(&'s')
                && !chars.get(i + 2).is_some_and(|c| c.is_alphanumeric());
            if is_time && chars[start..i].contains(&'.') {
                for c in &mut out[start..i] {
                    if c.is_ascii_digit() {
                        *c = '#';
                    }
                }
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}
