//! `brevis bench`.

use crate::args::BenchArgs;
use crate::print::{fmt_percent, percent_smaller};
use crate::{emit, emit_report, Outcome};
use anyhow::Result;
use brevis::archive::{escape_name, ProgressEvent};
use brevis::job::{self, BenchOptions, Observer};
use std::fmt::Write as _;

pub fn run(a: BenchArgs) -> Result<Outcome> {
    if a.ablation {
        return ablation(&a);
    }
    if a.level == brevis::synth::Level::Fast && !a.budget.is_empty() {
        return Err(crate::failure(
            "usage",
            "--budget with --level fast: the fast level does not search".to_string(),
        ));
    }
    let budgets = if a.budget.is_empty() {
        vec![a.level.budget()]
    } else {
        a.budget.clone()
    };
    let opts = BenchOptions {
        jobs: a.jobs,
        budgets,
        search: brevis::synth::SearchOptions {
            level: a.level,
            ..a.limits.options(0)
        },
        prior: a.prior.choice()?,
        report: a.report,
        runs: a.runs,
    };
    let r = job::bench(&a.files, &opts)?;
    if a.json {
        emit_report(&r)?;
        return Ok(Outcome::Ok);
    }
    let all = r.threads;
    let mut s = String::new();
    // Columns for all threads only when that is more than one.
    let many = |one: String, all: String| {
        if all.trim().is_empty() {
            one
        } else {
            one + "  " + &all
        }
    };
    let head = |what: &str| {
        let all = if all > 1 {
            format!("{:>11}", format!("{what} MB/s({all})"))
        } else {
            String::new()
        };
        many(format!("{:>9}", format!("{what} MB/s(1)")), all)
    };
    writeln!(
        s,
        "{:>6}  {:>12}  {:>12}  {:>9}  {}  {}  FILE",
        "BUDGET",
        "ORIGINAL",
        "ARCHIVE",
        "REDUCTION",
        head("C"),
        head("D")
    )?;
    for row in &r.files {
        let cells = |one: f64, each: f64| {
            let all = if all > 1 {
                format!("{each:>11.1}")
            } else {
                String::new()
            };
            many(format!("{one:>9.1}"), all)
        };
        writeln!(
            s,
            "{:>6}  {:>12}  {:>12}  {:>9}  {}  {}  {}",
            row.budget,
            row.original_bytes,
            row.archive_bytes,
            fmt_percent(row.reduction_percent),
            cells(row.compress_mb_s_1, row.compress_mb_s_all),
            cells(row.decompress_mb_s_1, row.decompress_mb_s_all),
            escape_name(&row.file.to_string_lossy()),
        )?;
    }
    emit(&s)?;
    Ok(Outcome::Ok)
}

/// A dot on stderr per configuration measured.
struct Dots;

impl Observer for Dots {
    fn progress(&self, _shard: &str, event: ProgressEvent<'_>) {
        if let ProgressEvent::Item { .. } = event {
            eprint!(".");
        }
    }
}

/// The ablation table (docs/ablation.md), markdown.
fn ablation(a: &BenchArgs) -> Result<Outcome> {
    let rows = job::ablation(&a.files, &a.limits.options(0), &Dots)?;
    let mut s = String::new();
    writeln!(s, "| file | search | prior | budget | program bytes | reduction | seconds (calibration incl.) |")?;
    writeln!(s, "| --- | --- | --- | ---: | ---: | ---: | ---: |")?;
    for r in &rows {
        writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.2} |",
            r.file.file_name().map_or_else(
                || r.file.to_string_lossy().into_owned(),
                |f| f.to_string_lossy().into_owned()
            ),
            r.search,
            r.prior,
            r.budget,
            r.program_bytes,
            fmt_percent(percent_smaller(r.original_bytes, r.program_bytes)),
            r.seconds,
        )?;
    }
    eprintln!();
    emit(&s)?;
    Ok(Outcome::Ok)
}
