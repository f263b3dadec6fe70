//! The Archive view ("where the bytes go") on three corpus files of different dtypes,
//! rendered into `TestBackend` and compared with insta snapshots: the bytes by kind add
//! up to the archive's length exactly, as do the bytes by dtype and by role, and
//! `brevis why --json` reports the same numbers.
#![cfg(feature = "tui")]

mod support;

use brevis::archive::{compress_file, no_progress, CompressOptions};
use brevis::tui::action::View;
use brevis::tui::app::App;
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::corpus;

/// The screen without its title line (which holds the temporary folder's path).
fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut s = String::new();
    for y in 1..h {
        for x in 0..w {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

fn thousands(n: u64) -> String {
    brevis::tui::inspect::thousands(n)
}

fn check(file: &str, snapshot: &str) {
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join(file.replace(".safetensors", ".brv"));
    compress_file(
        &corpus(file),
        &brv,
        &CompressOptions::default(),
        &no_progress,
    )
    .unwrap();
    let len = std::fs::metadata(&brv).unwrap().len();
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.apply(brevis::tui::action::Action::Show(View::Archive));
    assert!(
        a.settle(Duration::from_secs(300)),
        "the analysis did not finish"
    );
    let r = a.archive_view.report.clone().unwrap().unwrap();

    // Every byte once: the kinds, the dtypes and the roles each add up to the file.
    assert_eq!(r.archive_bytes, len);
    for (what, parts) in [
        ("kind", &r.bytes_by_kind),
        ("dtype", &r.bytes_by_dtype),
        ("role", &r.bytes_by_role),
    ] {
        assert_eq!(
            parts.iter().map(|(_, b)| b).sum::<u64>(),
            len,
            "{file}: bytes by {what}: {parts:?}"
        );
    }
    // The ranking's bytes above are the kind's, record by record.
    assert_eq!(
        r.tensors_above_reference
            .iter()
            .map(|t| t.bytes_above)
            .sum::<u64>(),
        r.kind("above_reference")
    );
    assert!(r
        .tensors_above_reference
        .windows(2)
        .all(|p| p[0].bytes_above >= p[1].bytes_above));

    let screen = render(&mut a, 100, 60);
    let total = screen
        .lines()
        .find(|l| l.contains("total: the archive's length"))
        .unwrap_or_else(|| panic!("no total line:\n{screen}"));
    assert!(
        total.contains(&format!(" {}  100.0%", thousands(len))),
        "{total}"
    );
    insta::assert_snapshot!(snapshot, screen);

    // The same numbers from the command line.
    let out = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(["why", "--json"])
        .arg(&brv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["archive_bytes"], len);
    let kinds = j["bytes_by_kind"].as_object().unwrap();
    assert_eq!(kinds.len(), r.bytes_by_kind.len());
    let mut sum = 0;
    for (k, b) in &r.bytes_by_kind {
        assert_eq!(kinds[k], *b, "{file}: kind {k}");
        sum += kinds[k].as_u64().unwrap();
    }
    assert_eq!(sum, len, "{file}: bytes_by_kind adds up to archive_bytes");
    let ranked = j["tensors_above_reference"].as_array().unwrap();
    assert_eq!(ranked.len(), r.tensors_above_reference.len());
    for (x, t) in ranked.iter().zip(&r.tensors_above_reference) {
        assert_eq!(x["name"], t.name.as_str());
        assert_eq!(x["bytes_above"], t.bytes_above);
    }
}

#[test]
fn archive_view_of_an_f32_and_i8_file_adds_up() {
    check("fracast0-int8-f32.safetensors", "archive_fracast0_int8_f32");
}

#[test]
fn archive_view_of_a_bf16_file_adds_up() {
    check(
        "minilm-l6-v2-bf16-layer0.safetensors",
        "archive_minilm_bf16_layer0",
    );
}

#[test]
fn archive_view_of_an_fp8_mixed_file_adds_up() {
    check(
        "minilm-l6-v2-fp8-mixed.safetensors",
        "archive_minilm_fp8_mixed",
    );
}

/// Enter on a ranked tensor opens the Why view on it, which shows the same reference
/// and bytes above it; `x` stops an analysis, and `r` runs it again.
#[test]
fn enter_opens_why_on_the_tensor_and_x_cancels() {
    use brevis::tui::action::Action;
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join("demo.brv");
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.safetensors");
    compress_file(&demo, &brv, &CompressOptions::default(), &no_progress).unwrap();
    let mut a = App::new(Arc::new(ArchiveSource::open(&brv).unwrap()));
    a.apply(Action::Show(View::Archive));
    a.apply(Action::Cancel);
    assert!(a.archive_view.running.is_none() && a.archive_view.cancelled);
    assert!(render(&mut a, 80, 24).contains("the analysis was cancelled: r analyses again"));
    a.apply(Action::SearchRun);
    assert!(a.settle(Duration::from_secs(120)));
    let r = a.archive_view.report.clone().unwrap().unwrap();
    a.apply(Action::Down);
    let second = &r.tensors_above_reference[1];
    a.apply(Action::Open);
    assert_eq!(a.view, View::Why);
    assert_eq!(a.selected_tensor(), Some(second.index));
    assert!(a.settle(Duration::from_secs(60)));
    let text = render(&mut a, 160, 40);
    assert!(
        text.contains(&format!(
            "reference {} B: {} B above it",
            thousands(second.reference_bytes),
            thousands(second.bytes_above)
        )),
        "{text}"
    );
}
