//! `brevis`: the command-line shell over the library (parse, call, print).
//!
//! Exit codes: 0 success, 1 error, 2 usage error, 3 verification mismatch (decoded bytes
//! differ from the stored checksums or from the original file).

use anyhow::{anyhow, Result};
use brevis::archive::writer::{write_archive, RegionKind};
use brevis::archive::{
    self, escape_name, no_progress, resolve_jobs, safetensors, Archive, CheckStatus,
    CompressOptions, DecompressOptions, ProgressEvent,
};
use brevis::dsl::{size_report, text::node_line, Node};
use brevis::synth::SearchOptions;
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const ABOUT: &str = "Lossless compression of model checkpoints (.safetensors) as program synthesis";

const LONG_ABOUT: &str = "\
Lossless compression of model checkpoints (.safetensors) as program synthesis.

Every tensor becomes a short program in a small language of reversible operators (bit \
fields, deltas, repeats, literals coded by Huffman or rANS); decoding runs the program. \
The archive (.brv) restores the original file byte for byte, header and padding included, \
and stores checksums so a decode can be proved exact without the original.

Exit codes: 0 success, 1 error, 2 usage error, 3 verification mismatch.";

#[derive(Parser)]
#[command(name = "brevis", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compress a .safetensors file into a .brv archive
    #[command(long_about = "Compress a .safetensors file into a .brv archive.\n\n\
        The archive is written to a temporary file beside the output and renamed into \
        place when complete; an existing output is never replaced without --force, and \
        the input is never written. Bytes of the file that no tensor owns (gaps, trailing \
        bytes) are preserved and reported as warnings. The archive's bytes do not depend \
        on --jobs.")]
    Compress(CompressArgs),
    /// Restore the original .safetensors file from a .brv archive
    #[command(
        long_about = "Restore the original .safetensors file from a .brv archive.\n\n\
        Every tensor and the whole file are checked against the checksums stored in the \
        archive; on a mismatch nothing is written and the exit code is 3."
    )]
    Decompress(DecompressArgs),
    /// Check that an archive decodes to exactly what was compressed
    #[command(
        long_about = "Check that an archive decodes to exactly what was compressed.\n\n\
        Decodes every tensor and compares it with the stored per-tensor and whole-file \
        checksums (xxh3-64); with --against, also compares the decoded file byte for \
        byte with ORIGINAL. Exit code 3 if anything differs."
    )]
    Verify(VerifyArgs),
    /// List the tensors of an archive
    #[command(
        long_about = "List the tensors of an archive, one per line: dtype, shape, \
        original bytes, archive bytes, reduction and the program's root operator, then \
        the name (control characters escaped). Nothing is decoded."
    )]
    Ls(LsArgs),
    /// Show the program of one tensor and where its bytes go
    #[command(
        long_about = "Show the program of one tensor in the text form, then one row \
        per node: its line, its own bytes (tag, parameters, literal tables and payload), \
        the bytes of its subtree, and its share of the tensor's record. The rows add up \
        to the record exactly."
    )]
    Show(ShowArgs),
    /// Measure reduction and throughput on files, in memory
    #[command(
        long_about = "Measure reduction and throughput on .safetensors files, in \
        memory (no archive is written to disk): compress and decompress MB/s (10^6 bytes \
        of the original per second) with one worker thread and with all of them."
    )]
    Bench(BenchArgs),
}

#[derive(Args, Clone)]
struct SearchArgs {
    /// Search budget: partial programs expanded per tensor (0 stores literals)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().budget)]
    budget: u64,
    /// Deepest program the search builds (a single node has depth 1)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_depth)]
    max_depth: u32,
    /// Most nodes in one program
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_nodes)]
    max_nodes: u32,
}

impl SearchArgs {
    fn options(&self) -> SearchOptions {
        SearchOptions {
            budget: self.budget,
            max_depth: self.max_depth,
            max_nodes: self.max_nodes,
            ..SearchOptions::default()
        }
    }
}

#[derive(Args)]
struct CompressArgs {
    /// The .safetensors file to compress
    input: PathBuf,
    /// The archive to write [default: INPUT with .safetensors replaced by .brv]
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    #[command(flatten)]
    search: SearchArgs,
    /// Worker threads (0 = all cores) [default: all cores]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Replace the output if it exists
    #[arg(short, long)]
    force: bool,
    /// Do not run each program against its tensor before writing it (faster)
    #[arg(long)]
    no_verify: bool,
    /// Print a JSON summary on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DecompressArgs {
    /// The .brv archive to decompress
    input: PathBuf,
    /// The file to write [default: INPUT with .brv replaced by .safetensors]
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Replace the output if it exists
    #[arg(short, long)]
    force: bool,
    /// Worker threads (0 = all cores) [default: all cores]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Print a JSON summary on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct VerifyArgs {
    /// The .brv archive to check
    input: PathBuf,
    /// Also compare the decoded file byte for byte with this file
    #[arg(long, value_name = "ORIGINAL")]
    against: Option<PathBuf>,
    /// Worker threads (0 = all cores) [default: all cores]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Print a JSON report on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LsArgs {
    /// The .brv archive to list
    input: PathBuf,
    /// Print JSON on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ShowArgs {
    /// The .brv archive
    input: PathBuf,
    /// The tensor's exact name
    tensor: String,
    /// Print JSON on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchArgs {
    /// The .safetensors files to measure
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Worker threads for the parallel runs (0 = all cores) [default: all cores]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    #[command(flatten)]
    search: SearchArgs,
    /// Print JSON on stdout
    #[arg(long)]
    json: bool,
}

/// How a command ended without an error.
enum Outcome {
    Ok,
    /// Verification found a difference: exit code 3.
    Mismatch,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Mismatch) => ExitCode::from(3),
        Err(e) => {
            let mut msg = e.to_string();
            let mut code = 1;
            if let Some(be) = e.downcast_ref::<brevis::Error>() {
                if be.is_mismatch() {
                    code = 3;
                }
                if matches!(be, brevis::Error::OutputExists { .. }) {
                    msg.push_str(" (use --force to replace it)");
                }
            }
            eprintln!("error: {msg}");
            ExitCode::from(code)
        }
    }
}

fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Compress(a) => compress(a),
        Command::Decompress(a) => decompress(a),
        Command::Verify(a) => verify(a),
        Command::Ls(a) => ls(a),
        Command::Show(a) => show(a),
        Command::Bench(a) => bench(a),
    }
}

/// Writes `s` to stdout; a closed pipe (`brevis ls x.brv | head`) is not an error.
fn emit(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow!("stdout: cannot write: {e}"))
        }
        _ => Ok(()),
    }
}

/// A path as a JSON string (lossy for paths that are not UTF-8, which JSON cannot hold).
fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn emit_json(v: &Value) -> Result<()> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    emit(&s)
}

/// `x.safetensors` -> `x.brv` (anything else: `.brv` appended).
fn default_archive_name(input: &Path) -> PathBuf {
    if input.extension().is_some_and(|e| e == "safetensors") {
        input.with_extension("brv")
    } else {
        let mut s = input.as_os_str().to_owned();
        s.push(".brv");
        PathBuf::from(s)
    }
}

/// `x.brv` -> `x.safetensors` (anything else: `.safetensors` appended).
fn default_restored_name(input: &Path) -> PathBuf {
    if input.extension().is_some_and(|e| e == "brv") {
        input.with_extension("safetensors")
    } else {
        let mut s = input.as_os_str().to_owned();
        s.push(".safetensors");
        PathBuf::from(s)
    }
}

/// A progress bar on stderr when stderr is a terminal; a no-op otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(verb: &str) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = indicatif::ProgressBar::new(0);
        let template = format!(
            "{verb} [{{bar:32}}] {{bytes}}/{{total_bytes}} {{bytes_per_sec}} eta {{eta}} {{wide_msg}}"
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar: Some(bar) }
    }

    fn event(&self, ev: ProgressEvent<'_>) {
        let Some(bar) = &self.bar else { return };
        match ev {
            ProgressEvent::Begin { bytes, .. } => {
                bar.reset();
                bar.set_length(bytes);
            }
            ProgressEvent::Item { label, bytes } => {
                bar.inc(bytes);
                let name: String = escape_name(label).chars().take(60).collect();
                bar.set_message(name);
            }
            ProgressEvent::End => bar.finish_and_clear(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn percent_smaller(original: u64, archive: u64) -> Option<f64> {
    (original > 0).then(|| (1.0 - archive as f64 / original as f64) * 100.0)
}

fn fmt_percent(p: Option<f64>) -> String {
    p.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%"))
}

fn fmt_shape(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / secs / 1e6
    } else {
        0.0
    }
}

/// Prints warnings on stderr, at most 20, then a count of the rest.
fn print_warnings(file: &Path, warnings: &[brevis::error::Warning]) {
    const SHOWN: usize = 20;
    for w in warnings.iter().take(SHOWN) {
        eprintln!("warning: {}: {w}", file.display());
    }
    if warnings.len() > SHOWN {
        eprintln!(
            "warning: {}: ... and {} more warnings",
            file.display(),
            warnings.len() - SHOWN
        );
    }
}

fn compress(a: CompressArgs) -> Result<Outcome> {
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_archive_name(&a.input));
    let opts = CompressOptions {
        search: a.search.options(),
        jobs: a.jobs,
        force: a.force,
        verify: !a.no_verify,
    };
    let progress = Progress::new("compress");
    let start = Instant::now();
    let s = archive::compress_file(&a.input, &output, &opts, &|ev| progress.event(ev))?;
    drop(progress);
    let secs = start.elapsed().as_secs_f64();
    print_warnings(&a.input, &s.warnings);
    let reduction = percent_smaller(s.original_bytes, s.archive_bytes);
    if a.json {
        let region = |r: &archive::RegionStat| {
            json!({
                "original_bytes": r.original_bytes,
                "archive_bytes": r.archive_bytes,
                "program_bytes": r.program_bytes,
                "root_op": r.root_op,
            })
        };
        let tensors: Vec<Value> = s
            .tensors()
            .map(|r| {
                json!({
                    "name": r.label,
                    "dtype": r.dtype.map(|d| d.name()),
                    "shape": r.shape,
                    "original_bytes": r.original_bytes,
                    "archive_bytes": r.archive_bytes,
                    "program_bytes": r.program_bytes,
                    "reduction_percent": percent_smaller(r.original_bytes, r.archive_bytes),
                    "root_op": r.root_op,
                    "expansions": r.search.expansions,
                    "literal_fallback": r.search.literal_fallback,
                })
            })
            .collect();
        let header = s
            .regions
            .iter()
            .find(|r| r.kind == RegionKind::Header)
            .map(region);
        let gaps: Vec<Value> = s
            .regions
            .iter()
            .filter(|r| r.kind == RegionKind::Gap)
            .map(region)
            .collect();
        let warnings: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
        emit_json(&json!({
            "input": lossy(&s.input),
            "output": lossy(&s.output),
            "original_bytes": s.original_bytes,
            "archive_bytes": s.archive_bytes,
            "reduction_percent": reduction,
            "seconds": secs,
            "jobs": resolve_jobs(a.jobs),
            "header": header,
            "tensors": tensors,
            "gaps": gaps,
            "warnings": warnings,
        }))?;
    } else {
        emit(&format!(
            "{} -> {}: {} -> {} bytes ({} smaller), {} tensors, {:.2} s ({:.1} MB/s)\n",
            s.input.display(),
            s.output.display(),
            s.original_bytes,
            s.archive_bytes,
            fmt_percent(reduction),
            s.tensors().count(),
            secs,
            mb_per_s(s.original_bytes, secs),
        ))?;
    }
    Ok(Outcome::Ok)
}

fn decompress(a: DecompressArgs) -> Result<Outcome> {
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_restored_name(&a.input));
    let archive = Archive::open(&a.input)?;
    let progress = Progress::new("decompress");
    let start = Instant::now();
    let opts = DecompressOptions {
        jobs: a.jobs,
        force: a.force,
    };
    let s = archive.decompress_to(&output, &opts, &|ev| progress.event(ev))?;
    drop(progress);
    let secs = start.elapsed().as_secs_f64();
    if a.json {
        emit_json(&json!({
            "input": lossy(&a.input),
            "output": lossy(&s.output),
            "original_bytes": s.original_bytes,
            "archive_bytes": archive.archive_len(),
            "seconds": secs,
            "checksums_ok": true,
        }))?;
    } else {
        emit(&format!(
            "{} -> {}: {} bytes, all checksums match, {:.2} s ({:.1} MB/s)\n",
            a.input.display(),
            s.output.display(),
            s.original_bytes,
            secs,
            mb_per_s(s.original_bytes, secs),
        ))?;
    }
    Ok(Outcome::Ok)
}

fn status_json(status: &CheckStatus) -> Value {
    match status {
        CheckStatus::Ok => json!({"status": "ok"}),
        CheckStatus::Mismatch { expected, actual } => json!({
            "status": "mismatch",
            "expected": format!("{expected:016x}"),
            "actual": format!("{actual:016x}"),
        }),
        CheckStatus::Undecodable { what } => json!({"status": "undecodable", "what": what}),
    }
}

fn verify(a: VerifyArgs) -> Result<Outcome> {
    let archive = Archive::open(&a.input)?;
    let progress = Progress::new("verify");
    let report = archive::verify(&archive, a.jobs, &|ev| progress.event(ev))?;
    let against = match &a.against {
        Some(original) => Some(archive::verify_against(
            &archive,
            original,
            a.jobs,
            &|ev| progress.event(ev),
        )?),
        None => None,
    };
    drop(progress);
    let ok = report.is_ok() && against.as_ref().is_none_or(|c| c.identical);
    if a.json {
        let regions: Vec<Value> = report
            .regions
            .iter()
            .map(|r| {
                let mut v = status_json(&r.status);
                v["region"] = json!(r.region);
                v["bytes"] = json!(r.bytes);
                if let Some(i) = r.tensor {
                    v["tensor"] = json!(archive.tensors()[i].name);
                }
                v
            })
            .collect();
        let against = against.as_ref().zip(a.against.as_ref()).map(|(c, path)| {
            json!({
                "file": lossy(path),
                "identical": c.identical,
                "first_difference": c.first_difference,
                "file_bytes": c.file_bytes,
                "decoded_bytes": c.decoded_bytes,
            })
        });
        emit_json(&json!({
            "archive": lossy(&a.input),
            "ok": ok,
            "original_bytes": report.original_bytes,
            "file_checksum_ok": report.file_checksum_ok,
            "records_intact": report.records_intact,
            "failed": report.failures().count(),
            "regions": regions,
            "against": against,
        }))?;
    } else {
        let mut s = String::new();
        let name = a.input.display();
        for f in report.failures() {
            let what = match &f.status {
                CheckStatus::Mismatch { expected, actual } => {
                    format!("checksum mismatch (stored {expected:016x}, decoded {actual:016x})")
                }
                CheckStatus::Undecodable { what } => format!("cannot decode: {what}"),
                CheckStatus::Ok => continue,
            };
            writeln!(s, "{name}: FAILED: {}: {what}", f.region)?;
        }
        if !report.records_intact {
            writeln!(
                s,
                "{name}: FAILED: the archive's records (names, shapes, programs) do not match \
                 their stored checksum"
            )?;
        }
        if report.is_ok() {
            writeln!(
                s,
                "{name}: ok: {} tensors, {} gaps, header and whole file ({} bytes) match their checksums",
                archive.tensors().len(),
                archive.gaps().len(),
                report.original_bytes
            )?;
        } else {
            writeln!(
                s,
                "{name}: FAILED: {} of {} regions differ; whole-file checksum {}",
                report.failures().count(),
                report.regions.len(),
                if report.file_checksum_ok {
                    "matches"
                } else {
                    "does not match"
                }
            )?;
        }
        if let (Some(c), Some(path)) = (&against, &a.against) {
            match c.first_difference {
                None => writeln!(s, "{name}: identical to {} ({} bytes)", path.display(), c.file_bytes)?,
                Some(at) => writeln!(
                    s,
                    "{name}: FAILED: differs from {} at byte {at} (decoded {} bytes, file {} bytes)",
                    path.display(),
                    c.decoded_bytes,
                    c.file_bytes
                )?,
            }
        }
        emit(&s)?;
    }
    Ok(if ok { Outcome::Ok } else { Outcome::Mismatch })
}

fn ls(a: LsArgs) -> Result<Outcome> {
    let archive = Archive::open(&a.input)?;
    let tensors = archive.tensors();
    let total_original: u64 = archive.original_len();
    let total_archive = archive.archive_len();
    if a.json {
        let list: Vec<Value> = tensors
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "dtype": t.dtype.name(),
                    "shape": t.shape,
                    "begin": t.begin,
                    "end": t.end,
                    "original_bytes": t.original_bytes(),
                    "archive_bytes": t.archive_bytes(),
                    "program_bytes": t.program_bytes(),
                    "reduction_percent": percent_smaller(t.original_bytes(), t.archive_bytes()),
                    "root_op": t.root_op,
                })
            })
            .collect();
        let gaps: Vec<Value> = archive
            .gaps()
            .iter()
            .map(|g| {
                json!({
                    "begin": g.begin,
                    "end": g.end,
                    "original_bytes": g.end - g.begin,
                    "archive_bytes": g.record.len(),
                })
            })
            .collect();
        emit_json(&json!({
            "archive": lossy(&a.input),
            "original_bytes": total_original,
            "archive_bytes": total_archive,
            "reduction_percent": percent_smaller(total_original, total_archive),
            "header": {
                "original_bytes": 8 + archive.header_len(),
                "archive_bytes": archive.header_archive_bytes(),
            },
            "tensors": list,
            "gaps": gaps,
        }))?;
        return Ok(Outcome::Ok);
    }
    let headings = ["DTYPE", "SHAPE", "ORIGINAL", "ARCHIVE", "REDUCTION", "ROOT"];
    let rows: Vec<[String; 6]> = tensors
        .iter()
        .map(|t| {
            [
                t.dtype.name().to_string(),
                fmt_shape(&t.shape),
                t.original_bytes().to_string(),
                t.archive_bytes().to_string(),
                fmt_percent(percent_smaller(t.original_bytes(), t.archive_bytes())),
                t.root_op.to_string(),
            ]
        })
        .collect();
    let mut widths = headings.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    // Numbers right-aligned, text left-aligned; the name comes last so that wide or
    // escaped names never shift the columns.
    let right = [false, false, true, true, true, false];
    let mut s = String::new();
    let line = |s: &mut String, cells: &[&str], name: &str| {
        for ((c, w), r) in cells.iter().zip(widths).zip(right) {
            if r {
                let _ = write!(s, "{c:>w$}  ");
            } else {
                let _ = write!(s, "{c:<w$}  ");
            }
        }
        s.push_str(name);
        s.push('\n');
    };
    line(&mut s, &headings, "NAME");
    for (t, r) in tensors.iter().zip(&rows) {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        line(&mut s, &cells, &escape_name(&t.name));
    }
    writeln!(
        s,
        "{} tensors, {} gaps; {} -> {} bytes ({} smaller)",
        tensors.len(),
        archive.gaps().len(),
        total_original,
        total_archive,
        fmt_percent(percent_smaller(total_original, total_archive))
    )?;
    emit(&s)?;
    Ok(Outcome::Ok)
}

fn preorder<'n>(node: &'n Node, depth: usize, out: &mut Vec<(usize, &'n Node)>) {
    out.push((depth, node));
    for c in node.children() {
        preorder(c, depth + 1, out);
    }
}

fn show(a: ShowArgs) -> Result<Outcome> {
    let archive = Archive::open(&a.input)?;
    let i = archive.find(&a.tensor).ok_or_else(|| {
        anyhow!(
            "{}: no tensor named {:?} ({} tensors; list them with `brevis ls`)",
            a.input.display(),
            a.tensor,
            archive.tensors().len()
        )
    })?;
    let t = &archive.tensors()[i];
    let program = archive.program(i)?;
    let record = t.archive_bytes();
    let framing = record - t.program_bytes();
    let mut nodes = Vec::new();
    preorder(&program, 0, &mut nodes);
    let sizes = size_report(&program);
    let share = |b: u64| {
        if record > 0 {
            b as f64 / record as f64 * 100.0
        } else {
            0.0
        }
    };
    if a.json {
        let rows: Vec<Value> = nodes
            .iter()
            .zip(&sizes)
            .map(|((depth, n), sz)| {
                json!({
                    "index": sz.index,
                    "depth": depth,
                    "op": n.op_name(),
                    "line": node_line(n),
                    "type": n.ty().to_string(),
                    "own_bytes": sz.own_bytes,
                    "subtree_bytes": sz.subtree_bytes,
                    "share_percent": share(sz.subtree_bytes),
                })
            })
            .collect();
        emit_json(&json!({
            "archive": lossy(&a.input),
            "name": t.name,
            "dtype": t.dtype.name(),
            "shape": t.shape,
            "original_bytes": t.original_bytes(),
            "archive_bytes": record,
            "program_bytes": t.program_bytes(),
            "framing_bytes": framing,
            "program": program.to_string(),
            "nodes": rows,
        }))?;
        return Ok(Outcome::Ok);
    }
    let mut s = String::new();
    writeln!(
        s,
        "tensor {}  {} {}  {} bytes -> record {} bytes ({} smaller)",
        escape_name(&t.name),
        t.dtype,
        fmt_shape(&t.shape),
        t.original_bytes(),
        record,
        fmt_percent(percent_smaller(t.original_bytes(), record)),
    )?;
    writeln!(s)?;
    s.push_str(&program.to_string());
    writeln!(s)?;
    let framing_label = "(record fields: name, dtype, shape, offsets, checksum)".to_string();
    let mut lines: Vec<(String, u64, u64)> = vec![(framing_label, framing, framing)];
    for ((depth, n), sz) in nodes.iter().zip(&sizes) {
        let text = format!("{:indent$}{}", "", node_line(n), indent = depth * 2);
        lines.push((text, sz.own_bytes, sz.subtree_bytes));
    }
    let w = lines
        .iter()
        .map(|l| l.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let own_w = lines
        .iter()
        .map(|l| l.1.to_string().len())
        .max()
        .unwrap_or(0)
        .max(3);
    let sub_w = lines
        .iter()
        .map(|l| l.2.to_string().len())
        .max()
        .unwrap_or(0)
        .max(7);
    writeln!(
        s,
        "{:<w$}  {:>own_w$}  {:>sub_w$}  {:>6}",
        "NODE", "OWN", "SUBTREE", "SHARE"
    )?;
    for (text, own, sub) in &lines {
        let pad = w - text.chars().count();
        writeln!(
            s,
            "{text}{:pad$}  {own:>own_w$}  {sub:>sub_w$}  {:>5.1}%",
            "",
            share(*sub)
        )?;
    }
    emit(&s)?;
    Ok(Outcome::Ok)
}

fn bench(a: BenchArgs) -> Result<Outcome> {
    let all = resolve_jobs(a.jobs);
    let mut results = Vec::new();
    for path in &a.files {
        let bytes = std::fs::read(path).map_err(|e| brevis::Error::io(path, "cannot read", e))?;
        let src = safetensors::parse(&bytes).map_err(|e| brevis::Error::source(path, e))?;
        let opts = |jobs| CompressOptions {
            search: a.search.options(),
            jobs: Some(jobs),
            force: false,
            verify: false,
        };
        let timed_compress = |jobs| -> Result<(Vec<u8>, f64)> {
            let mut out = Vec::with_capacity(bytes.len() / 2);
            let start = Instant::now();
            write_archive(&src, &mut out, &opts(jobs), &no_progress, path)?;
            Ok((out, start.elapsed().as_secs_f64()))
        };
        let (archive_one, c1) = timed_compress(1)?;
        let (archive_all, cn) = timed_compress(all)?;
        if archive_one != archive_all {
            return Err(anyhow!(
                "{}: internal error: the archive differs between 1 and {all} threads",
                path.display()
            ));
        }
        let archive_len = archive_one.len() as u64;
        let archive = Archive::from_bytes(archive_one, path)?;
        let timed_decompress = |jobs| -> Result<f64> {
            let start = Instant::now();
            archive.write_original(&mut std::io::sink(), Some(jobs), &no_progress, path)?;
            Ok(start.elapsed().as_secs_f64())
        };
        let d1 = timed_decompress(1)?;
        let dn = timed_decompress(all)?;
        let n = bytes.len() as u64;
        results.push(json!({
            "file": lossy(path),
            "original_bytes": n,
            "archive_bytes": archive_len,
            "reduction_percent": percent_smaller(n, archive_len),
            "threads": all,
            "compress_mb_s_1": mb_per_s(n, c1),
            "compress_mb_s_all": mb_per_s(n, cn),
            "decompress_mb_s_1": mb_per_s(n, d1),
            "decompress_mb_s_all": mb_per_s(n, dn),
        }));
    }
    if a.json {
        emit_json(&json!({ "threads": all, "files": results }))?;
        return Ok(Outcome::Ok);
    }
    let mut s = String::new();
    let c_all = format!("C MB/s({all})");
    let d_all = format!("D MB/s({all})");
    writeln!(
        s,
        "{:>12}  {:>12}  {:>9}  {:>9}  {:>11}  {:>9}  {:>11}  FILE",
        "ORIGINAL", "ARCHIVE", "REDUCTION", "C MB/s(1)", c_all, "D MB/s(1)", d_all
    )?;
    for r in &results {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        writeln!(
            s,
            "{:>12}  {:>12}  {:>9}  {:>9.1}  {:>11.1}  {:>9.1}  {:>11.1}  {}",
            r["original_bytes"].as_u64().unwrap_or(0),
            r["archive_bytes"].as_u64().unwrap_or(0),
            fmt_percent(r["reduction_percent"].as_f64()),
            f("compress_mb_s_1"),
            f("compress_mb_s_all"),
            f("decompress_mb_s_1"),
            f("decompress_mb_s_all"),
            r["file"].as_str().unwrap_or("?"),
        )?;
    }
    emit(&s)?;
    Ok(Outcome::Ok)
}
