//! The why view's account of every byte of a record (issue 27): a scalar, a 384-element
//! bias and a large matrix with records of their own, a copy of the matrix, and two
//! small tensors sharing a group record, compressed here into a real archive. Each is
//! compared with a committed insta snapshot, and the byte lines are checked to add up
//! to the record's size.
#![cfg(feature = "tui")]

use brevis::archive::{compress_file, no_progress, CompressOptions};
use brevis::tui::action::View;
use brevis::tui::app::App;
use brevis::tui::archive_source::ArchiveSource;
use brevis::tui::inspect::record_account;
use brevis::tui::model::{Sharing, Source};
use brevis::tui::ui;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[path = "support/safetensors.rs"]
mod support;
use support::safetensors_bytes;

/// `n` BF16 words of roughly normal values of scale `scale`, from a fixed generator.
fn bf16_normal(n: usize, scale: f64, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u32
    };
    let mut out = Vec::with_capacity(n * 2);
    for _ in 0..n {
        let u = (0..4)
            .map(|_| f64::from(next()) / f64::from(u32::MAX))
            .sum::<f64>()
            - 2.0;
        let bits = ((u * scale) as f32).to_bits();
        out.extend_from_slice(&((bits >> 16) as u16).to_le_bytes());
    }
    out
}

fn archive(dir: &Path) -> PathBuf {
    let matrix = bf16_normal(256 * 384, 0.05, 7);
    let file = safetensors_bytes(&[
        ("a.step", "F32", vec![], 1000.0f32.to_le_bytes().to_vec()),
        ("b.bias", "BF16", vec![384], bf16_normal(384, 0.02, 3)),
        ("c.weight", "BF16", vec![256, 384], matrix.clone()),
        ("d.tied", "BF16", vec![256, 384], matrix),
        ("e.norm", "BF16", vec![16], bf16_normal(16, 1.0, 5)),
        ("f.norm", "BF16", vec![16], bf16_normal(16, 1.0, 6)),
    ]);
    let input = dir.join("small.safetensors");
    std::fs::write(&input, file).unwrap();
    let out = dir.join("small.brv");
    compress_file(&input, &out, &CompressOptions::default(), &no_progress).unwrap();
    out
}

/// The screen without its title line (which names the temporary folder).
fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    let s = t.backend().to_string();
    s.lines().skip(1).collect::<Vec<_>>().join("\n")
}

fn show(app: &mut App, tensor: usize, view: View) {
    app.selected = app.order.iter().position(|&i| i == tensor).unwrap();
    app.apply(brevis::tui::action::Action::Show(view));
    assert!(app.settle(Duration::from_secs(60)));
}

#[test]
fn the_why_view_accounts_for_every_byte_of_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let source = Arc::new(ArchiveSource::open(&archive(dir.path())).unwrap());
    let kinds: Vec<Sharing> = (0..6).map(|i| source.record(i).unwrap().sharing).collect();
    assert_eq!(kinds[0], Sharing::Own, "the scalar");
    assert_eq!(kinds[1], Sharing::Own, "the bias");
    assert_eq!(kinds[2], Sharing::Own, "the matrix");
    assert_eq!(kinds[3], Sharing::Copy { of: 2 });
    assert!(matches!(kinds[4], Sharing::Group { tensors: 2, .. }));
    let mut app = App::new(source.clone());
    for (t, name) in [
        (0, "why_scalar"),
        (1, "why_bias_384"),
        (2, "why_matrix"),
        (3, "why_copy"),
        (4, "why_group"),
    ] {
        show(&mut app, t, View::Why);
        let rec = source.record(t).unwrap();
        let ins = app.current().unwrap().clone().unwrap();
        let lines = record_account(&rec, &ins);
        assert_eq!(lines[0].2, rec.record_bytes, "{name}");
        assert_eq!(
            lines.iter().filter(|l| l.0 == 1).map(|l| l.2).sum::<u64>(),
            rec.record_bytes,
            "{name}: the parts add up to the record"
        );
        if !matches!(rec.sharing, Sharing::Copy { .. }) {
            assert_eq!(
                lines.iter().filter(|l| l.0 == 2).map(|l| l.2).sum::<u64>(),
                rec.program_bytes,
                "{name}: the program's parts add up to it"
            );
        }
        if matches!(rec.sharing, Sharing::Own) {
            assert_eq!(rec.record_bytes, app.rows()[t].archive_bytes, "{name}");
        }
        insta::assert_snapshot!(name, render(&mut app, 120, 40));
    }
}

/// The tree view's header says what the record holds without being cut at 120 columns.
#[test]
fn the_tree_header_is_whole_at_120_columns() {
    let dir = tempfile::tempdir().unwrap();
    let source = Arc::new(ArchiveSource::open(&archive(dir.path())).unwrap());
    let mut app = App::new(source);
    for (t, head) in [
        (
            1,
            "b.bias  program 398 B in 3 nodes · record 410 B (+12 B frame, checksum)",
        ),
        (3, "d.tied  program"),
        (4, "e.norm  program"),
    ] {
        show(&mut app, t, View::Tree);
        let screen = render(&mut app, 120, 20);
        let line = screen.lines().nth(1).unwrap().trim_matches('"').trim_end();
        assert!(!line.contains('…'), "{line}");
        assert!(line.starts_with(head), "{line}");
    }
}
