//! The budget sweep on a corpus tensor: each point is the bytes of the tensor's record
//! that `brevis compress --budget N` writes, for N = 1, 2, 4, 8.
#![cfg(feature = "tui")]

mod support;

use brevis::tui::action::{Action, View};
use brevis::tui::app::App;
use brevis::tui::archive_source::ArchiveSource;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::corpus;

fn brevis(args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_brevis"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "brevis {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The record bytes `brevis ls --json` gives tensor `name` of `archive`.
fn record_bytes(archive: &Path, name: &str) -> u64 {
    let j: serde_json::Value = serde_json::from_slice(&brevis(&[
        "ls".as_ref(),
        archive.as_os_str(),
        "--json".as_ref(),
    ]))
    .unwrap();
    let t = j["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap();
    assert_eq!(t["stored_as"], "record", "{t}");
    t["archive_bytes"].as_u64().unwrap()
}

#[test]
fn sweep_points_are_what_compress_writes_at_each_budget() {
    let input = corpus("silero-vad-16k-f32.safetensors");
    let name = "conv2.weight";
    let dir = tempfile::tempdir().unwrap();
    let brv = dir.path().join("silero.brv");
    brevis(&[
        "compress".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        brv.as_os_str(),
    ]);
    let source = ArchiveSource::open(&brv).unwrap();
    let t = source.archive().find(name).unwrap();
    let mut a = App::new(Arc::new(source));
    a.select_tensor(t);
    a.apply(Action::Show(View::Sweep));
    // From the default limit 64 down to 8.
    for _ in 0..3 {
        a.apply(Action::SearchLess);
    }
    assert_eq!(a.sweep.limit, 8);
    a.apply(Action::SearchRun);
    assert!(
        a.settle(Duration::from_secs(600)),
        "the sweep did not finish"
    );
    let s = a.sweep.result.clone().unwrap().unwrap();
    assert!(!s.cancelled);
    assert_eq!(s.tensors, [t]);
    let budgets: Vec<u64> = s.points.iter().map(|p| p.0).collect();
    assert_eq!(budgets, [1, 2, 4, 8]);
    for &(b, bytes) in &s.points {
        let out = dir.path().join(format!("b{b}.brv"));
        brevis(&[
            "compress".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--budget".as_ref(),
            b.to_string().as_ref(),
        ]);
        assert_eq!(record_bytes(&out, name), bytes, "budget {b}");
    }
    eprintln!("{name}: {:?}", s.points);
    // The view says where it flattens (or that it still falls), and plots every point.
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 24)).unwrap();
    t.draw(|f| brevis::tui::ui::draw(f, &mut a)).unwrap();
    let text = t.backend().to_string();
    assert!(
        text.contains("the curve flattens at budget") || text.contains("still falling at budget"),
        "{text}"
    );
    for &(_, bytes) in &s.points {
        assert!(
            text.contains(&format!("{} B", brevis::tui::inspect::thousands(bytes))),
            "{text}"
        );
    }
}
