//! `brevis`: the command-line shell over the library (parse, call, print).
//!
//! Exit codes: 0 success; 1 error (a file cannot be read or written, is not a valid
//! `.safetensors` file or archive, or holds a program that cannot be decoded); 2 usage
//! error; 3 verification mismatch (decoded bytes differ from the stored checksums or from
//! the original). `verify` exits 3 on any damage it finds in an archive it can open,
//! decodable or not: finding it is its result; an archive too damaged to open (its header,
//! index or a shard of a folder missing or cut short) is an error, exit 1; a run stopped
//! by SIGINT, SIGTERM or SIGHUP exits 128 + the signal. `--help` says the same.

/// `eprintln!` that ignores a failure to write (std's panics): with stderr full or
/// closed, a job still prints its report on stdout and exits with its own code (it
/// panicked, exit 101, and `--json` printed nothing).
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!`, ignoring a failure to write as [`eprintln!`] does.
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

use anyhow::Result;
use brevis::archive::writer::{write_archive, RegionKind};
use brevis::archive::{
    self, escape_name, folder, no_progress, resolve_jobs, safetensors, Archive, CheckStatus,
    CompressOptions, DecompressOptions, ProgressEvent,
};
use brevis::dsl::{size_report, text::node_line, Node};
use brevis::synth::{PriorChoice, SearchOptions};
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

Exit codes: 0 success; 1 error: a file cannot be read or written, is not a valid \
.safetensors file or archive, or holds a program that cannot be decoded (the message \
names the file, the tensor and what is wrong); 2 usage error; 3 verification mismatch: \
decoded bytes differ from the stored checksums (or, with verify --against, from the \
original). verify exits 3 on any damage it finds in an archive it can open, decodable or \
not, and every command exits 3 on a tensor record that cannot be read or does not fit \
(a name that is not UTF-8, an unknown dtype, a shape that does not match its offsets) in \
an archive whose trailer and index are sound; decompress still restores, with a warning \
and exit 0, an archive whose only damage is in readable records when every restored byte \
matches its checksum. An archive too damaged to open (its header or index cut short or \
damaged; a folder's manifest changed, or a shard archive or copied file of it missing) \
is an error, exit 1. ls and show on a folder whose shard archives do not restore \
the files its manifest names warn and exit 3. A run stopped by SIGINT, SIGTERM or SIGHUP \
removes its temporary output and exits 128 + the signal (130, 143, 129); with --json it \
still prints its failure object (kind interrupted).";

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
    /// Restore the original .safetensors file (or checkpoint folder) from an archive
    #[command(
        long_about = "Restore the original .safetensors file from a .brv archive, or the \
        original checkpoint folder (every shard and every other file) from a compressed \
        folder.\n\n\
        Every tensor and the whole file are checked against the checksums stored in the \
        archive; nothing is written unless all match. Exit code 3 if decoded bytes \
        differ from a checksum or a tensor record is damaged, 1 if the archive is not \
        one, is cut short, or a program cannot be decoded."
    )]
    Decompress(DecompressArgs),
    /// Check that an archive decodes to exactly what was compressed
    #[command(
        long_about = "Check that an archive decodes to exactly what was compressed.\n\n\
        Decodes every tensor and compares it with the stored per-tensor and whole-file \
        checksums (xxh3-64); with --against, also compares the decoded file byte for \
        byte with ORIGINAL (for a folder archive, ORIGINAL is the original folder and \
        every file is compared). Exit code 3 if anything differs or cannot be decoded, \
        1 if the archive cannot be opened."
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
        of the original per second) with one worker thread and with all of them. A \
        checkpoint folder (or its model.safetensors.index.json) is measured shard by \
        shard, one row per .safetensors file in it."
    )]
    Bench(BenchArgs),
    /// Learn a production prior from a checkpoint (JSON a person can read and edit)
    #[command(long_about = "Learn a production prior from a checkpoint: search a \
        stratified sample of its tensors (at most 4, 6 expansions each, at most 1,048,576 \
        elements each) with uniform costs and count the productions of the winning \
        programs per context. The result is the same for any thread count.")]
    Calibrate(CalibrateArgs),
}

#[derive(Args, Clone)]
struct SearchArgs {
    /// Search budget: partial programs expanded per tensor (0 stores literals)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().budget)]
    budget: u64,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    prior: PriorArgs,
}

/// The program-shape limits of the search, shared by `compress` and `bench`.
#[derive(Args, Clone)]
struct LimitArgs {
    /// Deepest program the search builds (a single node has depth 1; 1 to 32, the
    /// archive format's limit)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_depth,
          value_parser = clap::value_parser!(u32).range(1..=brevis::dsl::wire::MAX_DEPTH as i64))]
    max_depth: u32,
    /// Most nodes in one program (1 to 65,536, the archive format's limit)
    #[arg(long, value_name = "N", default_value_t = SearchOptions::default().max_nodes,
          value_parser = clap::value_parser!(u32).range(1..=brevis::dsl::wire::MAX_NODES as i64))]
    max_nodes: u32,
}

impl LimitArgs {
    /// Search options with these limits and `budget` expansions.
    fn options(&self, budget: u64) -> SearchOptions {
        SearchOptions {
            budget,
            max_depth: self.max_depth,
            max_nodes: self.max_nodes,
            ..SearchOptions::default()
        }
    }
}

#[derive(Args, Clone)]
struct PriorArgs {
    /// Order the search by this production prior (JSON from `brevis calibrate`)
    /// [default: calibrate on the input when the budget is at least 2; at budget 1 the
    /// search expands only the root, which no prior reorders]
    #[arg(long, value_name = "FILE", conflicts_with = "uniform")]
    prior: Option<PathBuf>,
    /// Order the search with uniform production costs (no calibration)
    #[arg(long)]
    uniform: bool,
}

impl PriorArgs {
    fn choice(&self) -> Result<PriorChoice> {
        if self.uniform {
            return Ok(PriorChoice::Uniform);
        }
        match &self.prior {
            None => Ok(PriorChoice::Auto),
            Some(path) => {
                let prior = brevis::synth::Prior::read_file(path).map_err(|e| match e {
                    brevis::synth::prior::ReadPriorError::Io(e) => anyhow::Error::from(e),
                    e => failure("invalid_prior", format!("{}: {e}", shown(path))),
                })?;
                Ok(PriorChoice::Given(std::sync::Arc::new(prior)))
            }
        }
    }
}

impl SearchArgs {
    fn options(&self) -> SearchOptions {
        self.limits.options(self.budget)
    }
}

#[derive(Args)]
struct CompressArgs {
    /// The .safetensors file to compress, or a checkpoint folder (or its
    /// model.safetensors.index.json): every shard compressed, every other file kept
    input: PathBuf,
    /// The archive to write [default: INPUT with .safetensors replaced by .brv]
    #[arg(short, long, value_name = "OUT", value_parser = output_path)]
    output: Option<PathBuf>,
    #[command(flatten)]
    search: SearchArgs,
    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    jobs: Option<usize>,
    /// Replace the output if it exists: a regular file, or for a folder a previous
    /// archive folder (never a link, a device, the input, a folder holding the input, or
    /// a folder of other files)
    #[arg(short, long)]
    force: bool,
    /// Do not check each program against its tensor before writing it (about 13% faster on
    /// a BF16 checkpoint; the check is exact, and a program that would not restore its
    /// tensor is stored as a literal instead, with a warning)
    #[arg(long)]
    no_verify: bool,
    /// Print a JSON summary on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct DecompressArgs {
    /// The .brv archive to decompress, or a compressed checkpoint folder
    input: PathBuf,
    /// The file (or, for a compressed folder, the folder) to write [default: INPUT with
    /// .brv replaced by .safetensors; for a folder X.brv, X]
    #[arg(short, long, value_name = "OUT", value_parser = output_path)]
    output: Option<PathBuf>,
    /// Replace the output if it exists: a regular file, or for a folder one holding only
    /// files the archive restores (never a link, a device, or a folder holding the input
    /// or other files)
    #[arg(short, long)]
    force: bool,
    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    jobs: Option<usize>,
    /// Print a JSON summary on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct VerifyArgs {
    /// The .brv archive, or compressed checkpoint folder, to check
    input: PathBuf,
    /// Also compare the decoded file byte for byte with this file (for a compressed
    /// folder: every file with the original folder, or its model.safetensors.index.json)
    #[arg(long, value_name = "ORIGINAL")]
    against: Option<PathBuf>,
    /// Worker threads (0 = all cores, at most 256) [default: all cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
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
    /// The .safetensors files to measure; a checkpoint folder (or its
    /// model.safetensors.index.json) stands for every .safetensors file in it
    #[arg(required = true, value_name = "FILE|DIR")]
    files: Vec<PathBuf>,
    /// Worker threads for the parallel runs (0 = all cores, at most 256) [default: all
    /// cores]
    #[arg(short, long, value_name = "N", value_parser = jobs_parser())]
    jobs: Option<usize>,
    /// Search budgets to measure, one run each: repeat the option or separate by commas
    /// (`--budget 0,1,32`)
    #[arg(long, value_name = "N", value_delimiter = ',', default_values_t = [SearchOptions::default().budget])]
    budget: Vec<u64>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    prior: PriorArgs,
    /// With --json (required): add a search report per tensor (program, bytes per node,
    /// expansions, candidates, budget exhausted, literal fallback, time)
    #[arg(long, requires = "json")]
    report: bool,
    /// Print the search ablation table (markdown): budgets 0, 1, 6, 32, 256 with uniform
    /// and calibrated priors, and depth first to the first complete program (sets its
    /// own budgets and priors, so it takes none of --budget, --prior, --uniform, --json)
    #[arg(long, conflicts_with_all = ["budget", "json", "report", "prior", "uniform"])]
    ablation: bool,
    /// Timed runs of each direction (after one untimed warm-up run that also gives the
    /// archive); the median is reported, so one run disturbed by the machine does not move
    /// the figure
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Print JSON on stdout
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CalibrateArgs {
    /// The .safetensors file to calibrate on, or a checkpoint folder (or its
    /// model.safetensors.index.json), calibrated on its first .safetensors file in path
    /// order (the prior file may not be written inside the folder)
    input: PathBuf,
    /// Where to write the prior (JSON)
    #[arg(short, long, value_name = "OUT", value_parser = output_path)]
    output: PathBuf,
    /// Replace the output if it exists
    #[arg(short, long)]
    force: bool,
}

/// Parses `--jobs`: 0 (all cores) to [`archive::MAX_JOBS`]; anything larger is a usage
/// error naming the range rather than a silent clamp.
fn jobs_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(0..=archive::MAX_JOBS as u64)
}

/// An error of the CLI's own (not one of the library's [`brevis::Error`]s), with the
/// `kind` a failing `--json` command prints for it.
#[derive(Debug)]
struct Failure {
    kind: &'static str,
    msg: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Failure {}

/// A [`Failure`] of `kind` saying `msg`.
fn failure(kind: &'static str, msg: String) -> anyhow::Error {
    anyhow::Error::new(Failure { kind, msg })
}

/// How a command ended without an error.
enum Outcome {
    Ok,
    /// Verification found a difference: exit code 3.
    Mismatch,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // A usage error of a command asked for `--json` gets its object on stdout too
            // (exit 2); help and version requests are not errors.
            let json = std::env::args_os().any(|a| a == "--json");
            if json && e.use_stderr() {
                // The message up to clap's blank line, on one line.
                let text = e.to_string();
                let head: Vec<&str> = text
                    .lines()
                    .take_while(|l| !l.trim().is_empty())
                    .map(str::trim)
                    .collect();
                let joined = head.join(" ");
                let msg = joined.strip_prefix("error: ").unwrap_or(&joined);
                let _ = emit(&format!(
                    "{}\n",
                    json!({"ok": false, "error": msg, "kind": "usage", "exit_code": 2})
                ));
            }
            e.exit()
        }
    };
    let json = cli.command.json();
    let writes = cli.command.writes();
    remove_temporary_files_on_signal(json, writes);
    #[cfg(unix)]
    brevis::archive::install_truncation_guard();
    #[cfg(unix)]
    brevis::archive::ignore_file_size_signal();
    match run(cli) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Mismatch) => ExitCode::from(3),
        Err(e) => {
            let mut msg = e.to_string();
            let mut code = 1;
            // `other`: an error neither the library nor this program names a kind for (a
            // formatting error, say; none is expected).
            let mut kind = "other";
            if let Some(f) = e.downcast_ref::<Failure>() {
                kind = f.kind;
            }
            if let Some(be) = e.downcast_ref::<brevis::Error>() {
                kind = be.kind();
                if be.is_mismatch() {
                    code = 3;
                }
                if matches!(be, brevis::Error::OutputExists { .. }) {
                    msg.push_str(" (use --force to replace it)");
                }
            }
            if brevis::archive::truncated_while_read() {
                // What made the job fail: pages past the new end read as zeros.
                msg.push_str(" (a file was truncated by another program while it was being read)");
                kind = "truncated_while_read";
                code = 1;
            }
            eprintln!("error: {msg}");
            if json {
                // A script asked for JSON: it gets an object on stdout for a failure too
                // (it got nothing), the message on stderr as before.
                let _ = emit(&format!(
                    "{}\n",
                    json!({"ok": false, "error": msg, "kind": kind, "exit_code": code})
                ));
            }
            ExitCode::from(code)
        }
    }
}

impl Command {
    /// Whether the command writes an output file (so an interruption says whether one
    /// was written).
    fn writes(&self) -> bool {
        matches!(
            self,
            Command::Compress(_) | Command::Decompress(_) | Command::Calibrate(_)
        )
    }

    /// Whether the command was asked to print JSON on stdout (`--json`).
    fn json(&self) -> bool {
        match self {
            Command::Compress(a) => a.json,
            Command::Decompress(a) => a.json,
            Command::Verify(a) => a.json,
            Command::Ls(a) => a.json,
            Command::Show(a) => a.json,
            Command::Bench(a) => a.json,
            Command::Calibrate(_) => false,
        }
    }
}

/// On SIGINT, SIGTERM or SIGHUP: remove the temporary output file, say so in one line
/// (and, with `--json`, in the failure object on stdout, kind `interrupted`) and exit
/// with 128 + the signal number. (SIGKILL cannot be caught; its leftover is a
/// `.brevis-PID-*.tmp` file, never a partial output under the final name, which the next
/// compress or decompress into that folder names in a warning.)
fn remove_temporary_files_on_signal(json: bool, writes: bool) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let removed = brevis::archive::writer::remove_temporary_files();
            // Shards written inside a folder job's temporary folder are gone with it.
            let mut done = brevis::archive::writer::completed_outputs();
            done.retain(|p| p.exists());
            let written = match done.as_slice() {
                [] => "no output written".to_string(),
                outs => {
                    let names: Vec<String> = outs.iter().map(|p| shown(p)).collect();
                    format!("{} was complete before the signal", names.join(", "))
                }
            };
            let mut msg = match removed.removed {
                0 => format!("interrupted by signal {sig}"),
                1 => format!("interrupted by signal {sig}; 1 temporary file or folder removed"),
                n => format!("interrupted by signal {sig}; {n} temporary files or folders removed"),
            };
            if writes {
                msg.push_str(&format!(", {written}"));
            }
            if !removed.left.is_empty() {
                let names: Vec<String> = removed.left.iter().map(|p| shown(p)).collect();
                msg.push_str(&format!(
                    "; could not remove {} (delete it yourself)",
                    names.join(", ")
                ));
            }
            eprintln!("error: {msg}");
            let code = 128 + sig;
            if json {
                let _ = emit(&format!(
                    "{}\n",
                    json!({"ok": false, "error": msg, "kind": "interrupted", "exit_code": code})
                ));
            }
            std::process::exit(code);
        }
    });
}

/// Removes what runs killed by SIGKILL left beside `output` (temporaries whose name
/// records a process that no longer exists) and names each in a warning on stderr.
/// Warns about the temporaries runs killed by SIGKILL left beside `output` (never
/// `input`): nothing removes them, as a name proves nothing about what a file holds.
/// Returns the warnings, for the JSON report's `warnings`.
fn warn_stale_temporaries(output: &Path, input: &Path) -> Vec<String> {
    let mut said = Vec::new();
    for t in brevis::archive::writer::stale_temporaries(output, input) {
        let kind = if t.folder { "folder" } else { "file" };
        let w = format!(
            "{}: a temporary {kind} left by brevis process {}, which no longer runs; \
             nothing reads it, delete it if you do not need it",
            shown(&t.path),
            t.pid
        );
        eprintln!("warning: {w}");
        said.push(w);
    }
    said
}

fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Compress(a) => compress(a),
        Command::Decompress(a) => decompress(a),
        Command::Verify(a) => verify(a),
        Command::Ls(a) => ls(a),
        Command::Show(a) => show(a),
        Command::Bench(a) => bench(a),
        Command::Calibrate(a) => calibrate(a),
    }
}

/// Writes `s` to stdout; a closed pipe (`brevis ls x.brv | head`) is not an error.
fn emit(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(failure("io", format!("stdout: cannot write: {e}")))
        }
        _ => Ok(()),
    }
}

/// A path as text safe to print on a terminal ([`brevis::archive::shown_path`]).
fn shown(path: &Path) -> String {
    brevis::archive::shown_path(path)
}

/// A path as a JSON string (lossy for paths that are not UTF-8, which JSON cannot hold).
fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `report`, the printing of a job's report, failing with what says that the job's
/// `output` was written all the same (a script that retries must pass `--force`).
fn after_writing(output: &Path, report: Result<()>) -> Result<()> {
    report.map_err(|e| {
        failure(
            "io",
            format!(
                "{} was written, but its report could not be: {e}",
                shown(output)
            ),
        )
    })
}

fn emit_json(v: &Value) -> Result<()> {
    let mut s = c1_escaped(serde_json::to_string_pretty(v)?);
    s.push('\n');
    emit(&s)
}

/// JSON text with the C1 control characters (U+0080 to U+009F) escaped as `\u00XX`:
/// JSON lets them stand raw, but some terminals take U+009B for the start of an escape
/// sequence, and names from a file may hold them. Outside strings JSON has none.
fn c1_escaped(json: String) -> String {
    if !json.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if ('\u{80}'..='\u{9f}').contains(&c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `x.safetensors` -> `x.brv` (anything else: `.brv` appended).
/// Parses an output path: `-` (standard output, which the temporary-file-and-rename
/// writes cannot serve) is a usage error rather than a file named `-`.
fn output_path(s: &str) -> std::result::Result<PathBuf, String> {
    if s == "-" {
        return Err("writing to standard output is not supported; name a file".into());
    }
    if s.is_empty() {
        return Err("the output path is empty; name a file".into());
    }
    Ok(PathBuf::from(s))
}

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

/// Width of a column: its widest cell, at least `min` (the header's width).
fn col_width(cells: impl Iterator<Item = usize>, min: usize) -> usize {
    cells.max().unwrap_or(0).max(min)
}

fn percent_smaller(original: u64, archive: u64) -> Option<f64> {
    (original > 0).then(|| (1.0 - archive as f64 / original as f64) * 100.0)
}

/// "34.1%"; a small growth that one decimal would show as "-0.0%" gets two ("-0.02%").
fn fmt_percent(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.0 && p > -0.05 => format!("{p:.2}%"),
        Some(p) => format!("{p:.1}%"),
        None => "-".to_string(),
    }
}

/// "34.1% smaller", or "30.9% larger" when the archive grew ("-" for an empty input).
fn fmt_change(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.0 => format!("{:.1}% larger", -p),
        Some(p) => format!("{p:.1}% smaller"),
        None => "-".to_string(),
    }
}

fn fmt_shape(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(","))
}

/// The median of `secs` (the mean of the middle two for an even count); 0 when empty.
fn median(mut secs: Vec<f64>) -> f64 {
    secs.sort_by(f64::total_cmp);
    let n = secs.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => secs[n / 2],
        _ => (secs[n / 2 - 1] + secs[n / 2]) / 2.0,
    }
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
        eprintln!("warning: {}: {w}", shown(file));
    }
    if warnings.len() > SHOWN {
        eprintln!(
            "warning: {}: ... and {} more warnings",
            shown(file),
            warnings.len() - SHOWN
        );
    }
}

impl CompressArgs {
    /// The library's options for these arguments (the prior file is read here).
    fn options(&self) -> Result<CompressOptions> {
        Ok(CompressOptions {
            search: self.search.options(),
            jobs: self.jobs,
            force: self.force,
            verify: !self.no_verify,
            prior: self.search.prior.choice()?,
            file_name: None,
        })
    }
}

fn compress(a: CompressArgs) -> Result<Outcome> {
    if let Some(dir) = folder::compressed_folder(&a.input) {
        if !folder::manifest_is_ours(&dir) {
            // A checkpoint folder with a stray file of the manifest's name: compressing
            // it would put two files of that name in the archive folder.
            return Err(brevis::Error::Invalid {
                path: dir.join(folder::MANIFEST_NAME),
                what: "cannot compress the folder",
                detail: "this file is not a Brevis manifest, but the compressed folder's \
                         manifest takes its name; rename or move it first"
                    .to_string(),
                kind: "name_collision",
            }
            .into());
        }
        return Err(brevis::Error::WrongKind {
            path: a.input.clone(),
            found: "a Brevis folder archive".to_string(),
            expected: "a .safetensors file or checkpoint folder",
            command: "brevis decompress",
        }
        .into());
    }
    if let Some(dir) = folder::source_folder(&a.input) {
        return compress_folder(a, &dir);
    }
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_archive_name(&a.input));
    let opts = a.options()?;
    let stale = warn_stale_temporaries(&output, &a.input);
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
        let mut warnings: Vec<String> = s.warnings.iter().map(ToString::to_string).collect();
        warnings.extend(stale);
        after_writing(
            &s.output,
            emit_json(&json!({
                "ok": true,
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
            })),
        )?;
    } else {
        after_writing(
            &s.output,
            emit(&format!(
                "{} -> {}: {} -> {} bytes ({}), {}, {:.2} s ({:.1} MB/s)\n",
                shown(&s.input),
                shown(&s.output),
                s.original_bytes,
                s.archive_bytes,
                fmt_change(reduction),
                plural(s.tensors().count(), "tensor"),
                secs,
                mb_per_s(s.original_bytes, secs),
            )),
        )?;
    }
    Ok(Outcome::Ok)
}

fn decompress(a: DecompressArgs) -> Result<Outcome> {
    if let Some(dir) = folder::compressed_folder(&a.input) {
        return decompress_folder(a, &dir);
    }
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_restored_name(&a.input));
    let archive = open_archive(&a.input)?;
    let mut warnings = warn_stale_temporaries(&output, &a.input);
    let progress = Progress::new("decompress");
    let start = Instant::now();
    let opts = DecompressOptions {
        jobs: a.jobs,
        force: a.force,
    };
    let s = archive.decompress_to(&output, &opts, &|ev| progress.event(ev))?;
    drop(progress);
    let secs = start.elapsed().as_secs_f64();
    // The restored bytes are proved by the per-tensor and whole-file checksums; damage to
    // names or shapes in the records does not change them but is worth saying.
    let records_intact = s.records_intact;
    if !records_intact {
        let w = format!(
            "{}: the archive's records (names, shapes, programs) do not match \
             their stored checksum; the restored file matches its whole-file checksum",
            shown(&a.input)
        );
        eprintln!("warning: {w}");
        warnings.push(w);
    }
    if a.json {
        after_writing(
            &s.output,
            emit_json(&json!({
                "ok": true,
                "input": lossy(&a.input),
                "output": lossy(&s.output),
                "original_bytes": s.original_bytes,
                "archive_bytes": archive.archive_len(),
                "seconds": secs,
                "checksums_ok": true,
                "records_intact": records_intact,
                "warnings": warnings,
            })),
        )?;
    } else {
        after_writing(
            &s.output,
            emit(&format!(
                "{} -> {}: {} bytes, tensor and whole-file checksums match, {:.2} s ({:.1} MB/s)\n",
                shown(&a.input),
                shown(&s.output),
                s.original_bytes,
                secs,
                mb_per_s(s.original_bytes, secs),
            )),
        )?;
    }
    Ok(Outcome::Ok)
}

/// Opens the archive `path` for `decompress`, `verify`, `ls` or `show`; a `.safetensors`
/// file, shard index or plain folder is refused saying what it is and that `compress`
/// takes it (rather than "wrong magic bytes" or "is a directory").
fn open_archive(path: &Path) -> Result<Archive> {
    if let Some(e) = folder::not_an_archive(path) {
        return Err(e.into());
    }
    Ok(Archive::open(path)?)
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
    if let Some(dir) = folder::compressed_folder(&a.input) {
        return verify_folder(a, &dir);
    }
    let archive = open_archive(&a.input)?;
    if let Some(original) = &a.against {
        // A folder or shard index is what a folder archive is compared with; against a
        // single-file archive it compared the index's own bytes (exit 3, "differs at
        // byte 0").
        if folder::source_folder(original).is_some() {
            return Err(failure(
                "wrong_kind",
                format!(
                    "{}: is a checkpoint folder or shard index, and {} is a single-file \
                     archive: --against takes the original .safetensors file it was made \
                     from",
                    shown(original),
                    shown(&a.input)
                ),
            ));
        }
    }
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
    // Which record disagrees with the stored header, when the records are damaged (a
    // changed name, dtype, shape or offsets; a changed program shows as a region).
    let disagreements = if report.records_intact {
        Vec::new()
    } else {
        archive.header_disagreements().unwrap_or_default()
    };
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
            "disagreements": disagreements,
            "failed": report.failures().count(),
            "regions": regions,
            "against": against,
        }))?;
    } else {
        let mut s = String::new();
        let name = shown(&a.input);
        for line in failure_lines(&report) {
            writeln!(s, "{name}: FAILED: {line}")?;
        }
        let data_ok = report.failures().count() == 0 && report.file_checksum_ok;
        for d in &disagreements {
            writeln!(s, "{name}: FAILED: {d}")?;
        }
        if report.is_ok() {
            writeln!(
                s,
                "{name}: ok: {}, {}, header and whole file ({} bytes) match their checksums",
                plural(archive.tensors().len(), "tensor"),
                plural(archive.gaps().len(), "gap"),
                report.original_bytes
            )?;
        } else if data_ok {
            // Only the records are damaged: say that the data itself decodes right
            // (it printed "FAILED: 0 of 10 regions differ").
            writeln!(
                s,
                "{name}: the data decodes right: all {} regions and the whole file ({} bytes) \
                 match their checksums",
                report.regions.len(),
                report.original_bytes
            )?;
        } else if report.file_checksum_ok
            && report
                .failures()
                .all(|f| matches!(f.status, CheckStatus::Mismatch { .. }))
        {
            // Every decoded byte matches the whole-file checksum: the regions' stored
            // checksums are what changed, not the data (it said "1 of 10 regions differ").
            writeln!(
                s,
                "{name}: FAILED: {} of {} regions do not match their stored checksums, but \
                 the whole file ({} bytes) matches its own: the stored checksums are damaged, \
                 not the data",
                report.failures().count(),
                report.regions.len(),
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
                None => writeln!(s, "{name}: identical to {} ({} bytes)", shown(path), c.file_bytes)?,
                Some(at) => writeln!(
                    s,
                    "{name}: FAILED: differs from {} at byte {at} (decoded {} bytes, file {} bytes)",
                    shown(path),
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
    if let Some(dir) = folder::compressed_folder(&a.input) {
        return ls_folder(a, &dir);
    }
    let archive = open_archive(&a.input)?;
    let tensors = archive.tensors();
    let total_original: u64 = archive.original_len();
    let total_archive = archive.archive_len();
    let disagreements = warn_header_disagreements(&archive);
    // A program whose first byte is no operator's tag (listed with root `?`) is damage
    // too, found without decoding (it was listed, exit 0).
    let mut unreadable = 0;
    for t in tensors.iter().filter(|t| t.root_op == "?") {
        eprintln!(
            "warning: {}: tensor {:?}: its program does not start with an operator; the \
             archive is damaged (`brevis verify` checks every record)",
            shown(archive.path()),
            t.name
        );
        unreadable += 1;
    }
    let outcome = if disagreements.is_empty() && unreadable == 0 {
        Outcome::Ok
    } else {
        Outcome::Mismatch
    };
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
            "ok": matches!(outcome, Outcome::Ok),
            "original_bytes": total_original,
            "archive_bytes": total_archive,
            "reduction_percent": percent_smaller(total_original, total_archive),
            "header": {
                "original_bytes": 8 + archive.header_len(),
                "archive_bytes": archive.header_archive_bytes(),
            },
            "tensors": list,
            "gaps": gaps,
            "records_match_header": disagreements.is_empty(),
            "disagreements": disagreements,
        }))?;
        return Ok(outcome);
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
        "{}, {}; {} -> {} bytes ({})",
        plural(tensors.len(), "tensor"),
        plural(archive.gaps().len(), "gap"),
        total_original,
        total_archive,
        fmt_change(percent_smaller(total_original, total_archive))
    )?;
    emit(&s)?;
    Ok(outcome)
}

fn preorder<'n>(node: &'n Node, depth: usize, out: &mut Vec<(usize, &'n Node)>) {
    out.push((depth, node));
    for c in node.children() {
        preorder(c, depth + 1, out);
    }
}

fn show(a: ShowArgs) -> Result<Outcome> {
    let mut outcome = Outcome::Ok;
    let (archive, i) = if let Some(dir) = folder::compressed_folder(&a.input) {
        // A folder: the shard that holds the tensor. A missing stored file is an error
        // here too, as for every command (it exited 0).
        let f = folder::Folder::open(&dir)?;
        f.check_stored()?;
        warn_unlisted(&f, &dir);
        let Some(found) = f.find_tensor(&a.tensor)? else {
            let missing = format!(
                "{}: no tensor named \"{}\" in its {} shards",
                shown(&a.input),
                escape_name(&a.tensor),
                f.shards().count(),
            );
            // A shard archive that restores another file may be why: say so, exit 3.
            let mut swapped = false;
            for x in f.shards() {
                if let Outcome::Mismatch = warn_shard_mismatch(x, &f.open_shard(x)?) {
                    swapped = true;
                }
            }
            if swapped {
                eprintln!(
                    "error: {missing}, and a shard archive does not restore the file its \
                     manifest names (see the warnings above)"
                );
                return Ok(Outcome::Mismatch);
            }
            return Err(failure(
                "no_such_tensor",
                format!("{missing} (list them with `brevis ls {}`)", shown(&a.input)),
            ));
        };
        if let Some(entry) = f.entry_of(&found.0) {
            outcome = warn_shard_mismatch(entry, &found.0);
        }
        found
    } else {
        let archive = open_archive(&a.input)?;
        let Some(i) = archive.find_as_printed(&a.tensor) else {
            let missing = format!(
                "{}: no tensor named \"{}\" ({}; list them with `brevis ls`)",
                shown(&a.input),
                escape_name(&a.tensor),
                plural(archive.tensors().len(), "tensor")
            );
            // A damaged record may be why (its name changed): say so, exit 3, as for a
            // folder whose shard does not restore its file. It said only "no tensor".
            if !warn_header_disagreements(&archive).is_empty() {
                eprintln!(
                    "error: {missing}; the archive's records disagree with the header it \
                     stores (see the warnings above)"
                );
                return Ok(Outcome::Mismatch);
            }
            return Err(failure("no_such_tensor", missing));
        };
        (archive, i)
    };
    // As `ls`: a record that disagrees with the stored header is damage, exit 3.
    if !warn_header_disagreements(&archive).is_empty() {
        outcome = Outcome::Mismatch;
    }
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
            "archive": lossy(archive.path()),
            "ok": matches!(outcome, Outcome::Ok),
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
        return Ok(outcome);
    }
    let mut s = String::new();
    // In a folder, which shard archive holds the tensor.
    let shard = if archive.path() == a.input {
        String::new()
    } else {
        format!(" (in {})", shown(archive.path()))
    };
    writeln!(
        s,
        "tensor {}{shard}  {} {}  {} -> record {} ({})",
        escape_name(&t.name),
        t.dtype,
        fmt_shape(&t.shape),
        plural(t.original_bytes() as usize, "byte"),
        plural(record as usize, "byte"),
        fmt_change(percent_smaller(t.original_bytes(), record)),
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
    let w = col_width(lines.iter().map(|l| l.0.chars().count()), 4);
    let own_w = col_width(lines.iter().map(|l| l.1.to_string().len()), 3);
    let sub_w = col_width(lines.iter().map(|l| l.2.to_string().len()), 7);
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
    Ok(outcome)
}

/// The files `bench` measures: each argument, with a checkpoint folder (or its shard
/// index) replaced by its `.safetensors` files in path order, as `compress` treats it.
fn bench_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in args {
        match folder::source_folder(path) {
            Some(dir) => files.extend(folder::shard_paths(&dir, folder::ShardsFor::Bench)?),
            None => files.push(path.clone()),
        }
    }
    Ok(files)
}

fn bench(a: BenchArgs) -> Result<Outcome> {
    if a.ablation {
        return ablation(&a);
    }
    let all = resolve_jobs(a.jobs);
    let prior = a.prior.choice()?;
    let mut results = Vec::new();
    for path in &bench_files(&a.files)? {
        let bytes = std::fs::read(path).map_err(|e| brevis::Error::io(path, "cannot read", e))?;
        let src = safetensors::parse(&bytes).map_err(|e| brevis::Error::source(path, e))?;
        for &budget in &a.budget {
            let search = a.limits.options(budget);
            let opts = |jobs| CompressOptions {
                search: search.clone(),
                jobs: Some(jobs),
                force: false,
                verify: false,
                prior: prior.clone(),
                file_name: None,
            };
            let runs = a.runs as usize;
            let compress_once = |jobs| -> Result<(Vec<u8>, f64)> {
                let mut out = Vec::with_capacity(bytes.len() / 2);
                let start = Instant::now();
                write_archive(&src, &mut out, &opts(jobs), &no_progress, path)?;
                Ok((out, start.elapsed().as_secs_f64()))
            };
            // One untimed warm-up run (it gives the archive), then `runs` timed ones.
            let timed_compress = |jobs| -> Result<(Vec<u8>, f64)> {
                let (archive, _) = compress_once(jobs)?;
                let mut secs = Vec::with_capacity(runs);
                for _ in 0..runs {
                    secs.push(compress_once(jobs)?.1);
                }
                Ok((archive, median(secs)))
            };
            // With one thread in all, each direction is timed once (both columns, and
            // both JSON keys, hold that figure).
            let (archive_one, c1) = timed_compress(1)?;
            let (archive_all, cn) = if all == 1 {
                (archive_one.clone(), c1)
            } else {
                timed_compress(all)?
            };
            if archive_one != archive_all {
                return Err(failure(
                    "internal",
                    format!(
                        "{}: internal error: the archive differs between 1 and {all} threads",
                        shown(path)
                    ),
                ));
            }
            let archive_len = archive_one.len() as u64;
            let archive = Archive::from_bytes(archive_one, path)?;
            let decompress_once = |jobs| -> Result<f64> {
                let start = Instant::now();
                archive.write_original(&mut std::io::sink(), Some(jobs), &no_progress, path)?;
                Ok(start.elapsed().as_secs_f64())
            };
            let timed_decompress = |jobs| -> Result<f64> {
                decompress_once(jobs)?;
                let mut secs = Vec::with_capacity(runs);
                for _ in 0..runs {
                    secs.push(decompress_once(jobs)?);
                }
                Ok(median(secs))
            };
            let d1 = timed_decompress(1)?;
            let dn = if all == 1 { d1 } else { timed_decompress(all)? };
            let n = bytes.len() as u64;
            let mut r = json!({
                "file": lossy(path),
                "budget": budget,
                "original_bytes": n,
                "archive_bytes": archive_len,
                "reduction_percent": percent_smaller(n, archive_len),
                "threads": all,
                "runs": runs,
                "compress_mb_s_1": mb_per_s(n, c1),
                "compress_mb_s_all": mb_per_s(n, cn),
                "decompress_mb_s_1": mb_per_s(n, d1),
                "decompress_mb_s_all": mb_per_s(n, dn),
            });
            if a.report {
                r["search"] = search_report(&src, &search, &prior, path);
            }
            results.push(r);
        }
    }
    if a.json {
        emit_json(&json!({ "threads": all, "files": results }))?;
        return Ok(Outcome::Ok);
    }
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
    for r in &results {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        let cells = |one: &str, each: &str| {
            let all = if all > 1 {
                format!("{:>11.1}", f(each))
            } else {
                String::new()
            };
            many(format!("{:>9.1}", f(one)), all)
        };
        writeln!(
            s,
            "{:>6}  {:>12}  {:>12}  {:>9}  {}  {}  {}",
            r["budget"].as_u64().unwrap_or(0),
            r["original_bytes"].as_u64().unwrap_or(0),
            r["archive_bytes"].as_u64().unwrap_or(0),
            fmt_percent(r["reduction_percent"].as_f64()),
            cells("compress_mb_s_1", "compress_mb_s_all"),
            cells("decompress_mb_s_1", "decompress_mb_s_all"),
            escape_name(r["file"].as_str().unwrap_or("?")),
        )?;
    }
    emit(&s)?;
    Ok(Outcome::Ok)
}

/// `x.brv/` -> `x/`; anything else: `.restored` appended.
fn default_restored_folder(input: &Path) -> PathBuf {
    let input = &folder::with_name(input);
    if input.extension().is_some_and(|e| e == "brv") {
        input.with_extension("")
    } else {
        let mut s = input.as_os_str().to_owned();
        s.push(".restored");
        PathBuf::from(s)
    }
}

/// A progress callback for folder jobs: each shard's events on one bar.
fn folder_progress(progress: &Progress) -> impl Fn(&str, ProgressEvent<'_>) + '_ {
    move |_shard, ev| progress.event(ev)
}

fn compress_folder(a: CompressArgs, dir: &Path) -> Result<Outcome> {
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| folder::default_folder_archive_name(dir));
    let opts = a.options()?;
    let mut warnings = warn_stale_temporaries(&output, dir);
    let progress = Progress::new("compress");
    let start = Instant::now();
    let s = folder::compress_folder(dir, &output, &opts, &folder_progress(&progress))?;
    drop(progress);
    let secs = start.elapsed().as_secs_f64();
    for shard in &s.shards {
        print_warnings(&shard.input, &shard.warnings);
        let file = shown(&shard.input);
        warnings.extend(shard.warnings.iter().map(|w| format!("{file}: {w}")));
    }
    let empty: Vec<String> = s
        .empty_folders
        .iter()
        .map(|d| {
            format!(
                "{}: empty folder \"{}\" is not kept (an archive folder holds files only)",
                shown(&s.input),
                escape_name(d)
            )
        })
        .collect();
    warnings.extend(empty.iter().cloned());
    // Copied as they are, as every other file of the folder; but one is likely garbage.
    let temporaries: Vec<String> = s
        .copied
        .iter()
        .filter(|p| {
            Path::new(p.as_str())
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(brevis::archive::writer::is_temporary_name)
        })
        .map(|p| {
            format!(
                "{}: copied \"{}\", which is named like a temporary left by a killed brevis \
                 run (delete it from the folder if it is one)",
                shown(&s.input),
                escape_name(p)
            )
        })
        .collect();
    warnings.extend(temporaries.iter().cloned());
    let reduction = percent_smaller(s.original_bytes, s.archive_bytes);
    if a.json {
        let shards: Vec<Value> = s
            .shards
            .iter()
            .map(|c| {
                json!({
                    "input": lossy(&c.input),
                    "output": lossy(&c.output),
                    "original_bytes": c.original_bytes,
                    "archive_bytes": c.archive_bytes,
                    "tensors": c.tensors().count(),
                })
            })
            .collect();
        after_writing(
            &s.output,
            emit_json(&json!({
                "ok": true,
                "input": lossy(&s.input),
                "output": lossy(&s.output),
                "original_bytes": s.original_bytes,
                "archive_bytes": s.archive_bytes,
                "reduction_percent": reduction,
                "seconds": secs,
                "jobs": resolve_jobs(a.jobs),
                "shards": shards,
                "copied": s.copied,
                "empty_folders": s.empty_folders,
                "warnings": warnings,
            })),
        )?;
    } else {
        let tensors: usize = s.shards.iter().map(|c| c.tensors().count()).sum();
        after_writing(
            &s.output,
            emit(&format!(
                "{} -> {}: {} -> {} bytes ({}), {}, {}, {} copied, {:.2} s ({:.1} MB/s)\n",
                shown(&s.input),
                shown(&s.output),
                s.original_bytes,
                s.archive_bytes,
                fmt_change(reduction),
                plural(s.shards.len(), "shard"),
                plural(tensors, "tensor"),
                plural(s.copied.len(), "file"),
                secs,
                mb_per_s(s.original_bytes, secs),
            )),
        )?;
    }
    for w in empty.iter().chain(&temporaries) {
        eprintln!("warning: {w}");
    }
    Ok(Outcome::Ok)
}

fn decompress_folder(a: DecompressArgs, dir: &Path) -> Result<Outcome> {
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| default_restored_folder(dir));
    let f = folder::Folder::open(dir)?;
    let mut warnings = warn_stale_temporaries(&output, dir);
    warn_unlisted(&f, dir);
    let progress = Progress::new("decompress");
    let start = Instant::now();
    let opts = DecompressOptions {
        jobs: a.jobs,
        force: a.force,
    };
    let restored = f.decompress_to(&output, &opts, &folder_progress(&progress))?;
    let bytes = restored.original_bytes;
    drop(progress);
    let secs = start.elapsed().as_secs_f64();
    // As for one archive: damaged records that did not change the restored bytes are
    // worth saying (found by a tester: the folder stayed silent).
    let records_intact = restored.damaged_records.is_empty();
    for (archive, file) in &restored.damaged_records {
        let w = format!(
            "{}: the archive's records (names, shapes, programs) do not match \
             their stored checksum; the restored {file:?} matches its whole-file checksum",
            shown(archive),
        );
        eprintln!("warning: {w}");
        warnings.push(w);
    }
    if a.json {
        after_writing(
            &output,
            emit_json(&json!({
                "ok": true,
                "input": lossy(dir),
                "output": lossy(&output),
                "original_bytes": bytes,
                "files": f.files().len(),
                "seconds": secs,
                "checksums_ok": true,
                "records_intact": records_intact,
                "warnings": warnings,
            })),
        )?;
    } else {
        after_writing(
            &output,
            emit(&format!(
                "{} -> {}: {}, {} bytes, all checksums match, {:.2} s ({:.1} MB/s)\n",
                shown(dir),
                shown(&output),
                plural(f.files().len(), "file"),
                bytes,
                secs,
                mb_per_s(bytes, secs),
            )),
        )?;
    }
    Ok(Outcome::Ok)
}

/// What `verify` found wrong in one archive, one line per damaged region (`REGION: what`),
/// then the records' checksum if it does not match.
fn failure_lines(report: &archive::VerifyReport) -> Vec<String> {
    let mut out: Vec<String> = report
        .failures()
        .filter_map(|f| {
            let what = match &f.status {
                CheckStatus::Mismatch { expected, actual } => {
                    format!("checksum mismatch (stored {expected:016x}, decoded {actual:016x})")
                }
                CheckStatus::Undecodable { what } => format!("cannot decode: {what}"),
                CheckStatus::Ok => return None,
            };
            Some(format!("{}: {what}", f.region))
        })
        .collect();
    if !report.records_intact {
        out.push(
            "the archive's records (names, shapes, programs) do not match their stored checksum"
                .to_string(),
        );
    }
    out
}

/// [`failure_lines`] for one file of a folder archive.
fn folder_failure_lines(check: &folder::FileCheck) -> Vec<String> {
    match check {
        folder::FileCheck::Archive(r, manifest) => {
            let mut lines = failure_lines(r);
            if lines.is_empty() && !r.file_checksum_ok {
                lines.push("whole-file checksum does not match".to_string());
            }
            lines.extend(manifest.clone());
            lines
        }
        folder::FileCheck::Copy { .. } => {
            vec!["copied file's length or checksum differs from the manifest".to_string()]
        }
    }
}

/// Warns about each file inside the compressed folder `dir` that its manifest does not
/// name (nothing restores it), or that the folder could not be listed to look; returns
/// their paths.
fn warn_unlisted(f: &folder::Folder, dir: &Path) -> Vec<String> {
    match f.unlisted() {
        Ok(paths) => {
            for p in &paths {
                eprintln!(
                    "warning: {}: not named by the folder's manifest, so not restored",
                    shown(&f.root().join(p))
                );
            }
            paths
        }
        Err(e) => {
            eprintln!(
                "warning: {}: cannot look for files the manifest does not name: {e}",
                shown(dir)
            );
            Vec::new()
        }
    }
}

fn verify_folder(a: VerifyArgs, dir: &Path) -> Result<Outcome> {
    let f = folder::Folder::open(dir)?;
    let unlisted = warn_unlisted(&f, dir);
    let progress = Progress::new("verify");
    let checks = f.verify(a.jobs, &folder_progress(&progress))?;
    let against = match &a.against {
        Some(original) => Some(f.verify_against(original, a.jobs, &folder_progress(&progress))?),
        None => None,
    };
    drop(progress);
    // Differences are named in the original folder, also when it was given by its shard
    // index.
    let against_dir = a
        .against
        .as_ref()
        .map(|p| folder::source_folder(p).unwrap_or_else(|| p.clone()));
    let checks_ok = checks.iter().all(|(_, c)| c.is_ok());
    let identical = against
        .as_ref()
        .is_none_or(|v| v.iter().all(|(_, c)| c.is_identical()));
    let ok = checks_ok && identical;
    if a.json {
        let files: Vec<Value> = checks
            .iter()
            .map(|(path, c)| {
                let failures = if c.is_ok() {
                    Vec::new()
                } else {
                    folder_failure_lines(c)
                };
                json!({"path": path, "ok": c.is_ok(), "failures": failures})
            })
            .collect();
        let against = against.as_ref().zip(against_dir.as_ref()).map(|(v, path)| {
            let files: Vec<Value> = v
                .iter()
                .map(|(p, c)| match c {
                    folder::FileComparison::Compared(c) => json!({
                        "path": p,
                        "status": if c.identical { "identical" } else { "differs" },
                        "first_difference": c.first_difference,
                        "file_bytes": c.file_bytes,
                        "decoded_bytes": c.decoded_bytes,
                    }),
                    folder::FileComparison::Missing => json!({"path": p, "status": "missing"}),
                    folder::FileComparison::Extra => json!({"path": p, "status": "extra"}),
                })
                .collect();
            json!({"folder": lossy(path), "identical": identical, "files": files})
        });
        emit_json(&json!({
            "folder": lossy(dir),
            "ok": ok,
            "files": files,
            "unlisted": unlisted,
            "against": against,
        }))?;
    } else {
        let mut s = String::new();
        let name = shown(dir);
        for (path, c) in checks.iter().filter(|(_, c)| !c.is_ok()) {
            let path = escape_name(path);
            let lines = folder_failure_lines(c);
            if lines.is_empty() {
                writeln!(s, "{name}: FAILED: {path}")?;
            }
            for line in lines {
                writeln!(s, "{name}: FAILED: {path}: {line}")?;
            }
        }
        if checks_ok {
            writeln!(
                s,
                "{name}: ok: {} ({}) match their checksums ({} bytes)",
                plural(checks.len(), "file"),
                plural(f.shards().count(), "shard"),
                f.original_len()
            )?;
        }
        if let (Some(v), Some(original)) = (&against, &against_dir) {
            let orig = shown(original);
            // `join`, not "{orig}/{path}": an original given as `dir/` printed `dir//file`.
            let inside = |path: &str| shown(&original.join(path));
            for (path, c) in v {
                let path = escape_name(path);
                match c {
                    folder::FileComparison::Compared(c) => {
                        if let Some(at) = c.first_difference {
                            writeln!(
                                s,
                                "{name}: FAILED: {path} differs from {} at byte {at} \
                                 (decoded {} bytes, file {} bytes)",
                                inside(&path),
                                c.decoded_bytes,
                                c.file_bytes
                            )?;
                        }
                    }
                    folder::FileComparison::Missing => {
                        writeln!(s, "{name}: FAILED: {path} is missing from {orig}")?;
                    }
                    folder::FileComparison::Extra => {
                        writeln!(s, "{name}: FAILED: {} is not in the archive", inside(&path))?;
                    }
                }
            }
            if identical {
                writeln!(
                    s,
                    "{name}: identical to {orig} ({}, {} bytes)",
                    plural(v.len(), "file"),
                    f.original_len()
                )?;
            }
        }
        emit(&s)?;
    }
    Ok(if ok { Outcome::Ok } else { Outcome::Mismatch })
}

fn ls_folder(a: LsArgs, dir: &Path) -> Result<Outcome> {
    let f = folder::Folder::open(dir)?;
    // A missing copied file is an error, as a missing shard archive is (it was listed as
    // present, exit 0), before anything is listed.
    f.check_stored()?;
    let unlisted = warn_unlisted(&f, dir);
    let mut outcome = Outcome::Ok;
    let mut rows = Vec::new();
    for x in f.files() {
        match x.kind {
            folder::FileKind::Copy => {
                if a.json {
                    rows.push(json!({
                        "path": x.path,
                        "kind": "copy",
                        "original_bytes": x.bytes,
                    }));
                } else {
                    emit(&format!(
                        "# {} (copied, {} bytes)\n",
                        escape_name(&x.path),
                        x.bytes
                    ))?;
                }
            }
            folder::FileKind::Archive => {
                // Opened (so a missing or damaged shard archive is an error here too)
                // and checked against the manifest, with or without --json.
                let shard = f.open_shard(x)?;
                let matches = match warn_shard_mismatch(x, &shard) {
                    Outcome::Ok => true,
                    Outcome::Mismatch => {
                        outcome = Outcome::Mismatch;
                        false
                    }
                };
                if a.json {
                    let disagreements = warn_header_disagreements(&shard);
                    if !disagreements.is_empty() {
                        outcome = Outcome::Mismatch;
                    }
                    rows.push(json!({
                        "path": x.path,
                        "kind": "archive",
                        "archive": x.archive,
                        "original_bytes": x.bytes,
                        "tensors": shard.tensors().len(),
                        "matches_manifest": matches,
                        "records_match_header": disagreements.is_empty(),
                        "disagreements": disagreements,
                    }));
                } else {
                    emit(&format!("# {} ({} bytes)\n", escape_name(&x.path), x.bytes))?;
                    // The shard's own listing, which also checks its records.
                    if let Outcome::Mismatch = ls(LsArgs {
                        input: f.stored_path(x),
                        json: false,
                    })? {
                        outcome = Outcome::Mismatch;
                    }
                }
            }
        }
    }
    if a.json {
        emit_json(&json!({
            "folder": lossy(dir),
            "ok": matches!(outcome, Outcome::Ok),
            "files": rows,
            "unlisted": unlisted,
        }))?;
    }
    Ok(outcome)
}

/// The records of `archive` against the header they restore (cheap: the header only),
/// each disagreement warned about on standard error: a listing of a damaged record says
/// so (and `ls` exits 3, as `verify` would).
fn warn_header_disagreements(archive: &Archive) -> Vec<String> {
    let disagreements = match archive.header_disagreements() {
        Ok(d) => d,
        Err(brevis::Error::Archive { source, .. }) => {
            vec![format!("the stored header cannot be checked: {source}")]
        }
        // Without the archive's path, which the warning already names (it was said twice).
        Err(brevis::Error::Mismatch {
            region,
            expected,
            actual,
            ..
        }) => vec![format!(
            "the stored header cannot be checked: {region}: checksum mismatch: stored \
             {expected:016x}, decoded {actual:016x}"
        )],
        Err(e) => vec![format!("the stored header cannot be checked: {e}")],
    };
    for d in &disagreements {
        eprintln!(
            "warning: {}: {d}; the archive is damaged (`brevis verify` checks every record)",
            shown(archive.path())
        );
    }
    disagreements
}

/// Warns on standard error when shard archive `a` does not restore the file its manifest
/// entry names (swapped or replaced shards; `verify` and `decompress` refuse such a
/// folder): [`Outcome::Mismatch`] then, so that `ls` and `show` exit 3 as `verify` would.
fn warn_shard_mismatch(entry: &folder::FolderFile, a: &Archive) -> Outcome {
    match folder::shard_mismatch(entry, a) {
        None => Outcome::Ok,
        Some(what) => {
            eprintln!(
                "warning: {}: {what}; `brevis verify` checks the folder",
                shown(a.path()),
            );
            Outcome::Mismatch
        }
    }
}

/// The prior a bench run uses for `src`: calibrated on it for `Auto` (when the budget
/// makes the prior matter, see `SearchOptions::prior_matters`).
fn resolve_prior(
    src: &safetensors::SourceFile<'_>,
    choice: &PriorChoice,
    path: &Path,
) -> brevis::synth::Prior {
    match choice {
        PriorChoice::Given(p) => p.as_ref().clone(),
        PriorChoice::Uniform => brevis::synth::Prior::uniform(),
        PriorChoice::Auto => brevis::archive::writer::calibrate_source(src, path),
    }
}

/// Per-tensor search report: program, bytes per node, search statistics and time.
fn search_report(
    src: &safetensors::SourceFile<'_>,
    search: &SearchOptions,
    choice: &PriorChoice,
    path: &Path,
) -> Value {
    let start = Instant::now();
    let prior = if !search.prior_matters() {
        brevis::synth::Prior::uniform()
    } else {
        resolve_prior(src, choice, path)
    };
    let calibrate_s = start.elapsed().as_secs_f64();
    let mut tensors = Vec::new();
    let (mut total_in, mut total_out, mut total_s) = (0u64, 0u64, 0f64);
    for (i, t) in src.tensors().iter().enumerate() {
        let bytes = src.tensor_bytes(i);
        let Some(words) = brevis::Words::from_le_bytes(t.dtype.word_bits(), bytes) else {
            continue;
        };
        let start = Instant::now();
        let syn = brevis::synth::synthesize_with_prior(&words, Some(t.dtype), search, &prior);
        let secs = start.elapsed().as_secs_f64();
        let nodes: Vec<Value> = size_report(&syn.program)
            .iter()
            .map(|ns| json!({"depth": ns.depth, "own_bytes": ns.own_bytes, "subtree_bytes": ns.subtree_bytes}))
            .collect();
        total_in += bytes.len() as u64;
        total_out += syn.bytes;
        total_s += secs;
        tensors.push(json!({
            "name": t.name,
            "dtype": t.dtype.name(),
            "original_bytes": bytes.len(),
            "program_bytes": syn.bytes,
            "program": syn.program.to_string(),
            "nodes": nodes,
            "expansions": syn.stats.expansions,
            "candidates": syn.stats.candidates,
            "budget_exhausted": syn.stats.budget_exhausted,
            "literal_fallback": syn.stats.literal_fallback,
            "seconds": secs,
        }));
    }
    json!({
        "prior": prior.source,
        "calibrate_seconds": calibrate_s,
        "tensors": tensors,
        "total_original_bytes": total_in,
        "total_program_bytes": total_out,
        "total_search_seconds": total_s,
    })
}

/// The ablation table (docs/ablation.md): per file, bytes and time of every search
/// configuration, from the sum of the tensors' program sizes.
fn ablation(a: &BenchArgs) -> Result<Outcome> {
    use rayon::prelude::*;
    let mut s = String::new();
    writeln!(s, "| file | search | prior | budget | program bytes | reduction | seconds (calibration incl.) |")?;
    writeln!(s, "| --- | --- | --- | ---: | ---: | ---: | ---: |")?;
    for path in &bench_files(&a.files)? {
        let bytes = std::fs::read(path).map_err(|e| brevis::Error::io(path, "cannot read", e))?;
        let src = safetensors::parse(&bytes).map_err(|e| brevis::Error::source(path, e))?;
        // Searched as `compress` searches them: a tensor of more than REGION_WORDS words
        // in regions of that many, each its own search, joined by one `concat`.
        let region = brevis::archive::writer::REGION_WORDS;
        let words: Vec<(brevis::Dtype, brevis::Words)> = src
            .tensors()
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                brevis::Words::from_le_bytes(t.dtype.word_bits(), src.tensor_bytes(i))
                    .map(|w| (t.dtype, w))
            })
            .collect();
        let original: u64 = (0..src.tensors().len())
            .map(|i| src.tensor_bytes(i).len() as u64)
            .sum();
        let mut configs: Vec<(&str, &str, u64)> = Vec::new();
        for b in [0, 1, 6, 32, 256] {
            configs.push(("A*", "uniform", b));
            if b > 0 {
                configs.push(("A*", "learned", b));
            }
        }
        configs.push(("first complete", "uniform", 6));
        configs.push(("first complete", "uniform", 32));
        for (mode, pname, budget) in configs {
            let start = Instant::now();
            let prior = if pname == "learned" {
                brevis::archive::writer::calibrate_source(&src, path)
            } else {
                brevis::synth::Prior::uniform()
            };
            let opts = SearchOptions {
                first_complete: mode != "A*",
                ..a.limits.options(budget)
            };
            let out: u64 = words
                .par_iter()
                .map(|(d, w)| {
                    brevis::synth::synthesize_in_regions(w, Some(*d), &opts, &prior, region).bytes
                })
                .sum();
            let secs = start.elapsed().as_secs_f64();
            writeln!(
                s,
                "| {} | {mode} | {pname} | {budget} | {out} | {} | {secs:.2} |",
                path.file_name()
                    .map_or_else(|| lossy(path), |f| f.to_string_lossy().into_owned()),
                fmt_percent(percent_smaller(original, out)),
            )?;
            eprint!(".");
        }
    }
    eprintln!();
    emit(&s)?;
    Ok(Outcome::Ok)
}

fn calibrate(a: CalibrateArgs) -> Result<Outcome> {
    // Refused before the work, and checked again when writing.
    brevis::archive::writer::check_output(&a.input, &a.output, a.force)?;
    // A checkpoint folder (or its shard index) is calibrated on its first shard: a few
    // tensors are all calibration reads, and the prior then serves every shard.
    let input = match folder::source_folder(&a.input) {
        Some(dir) => {
            folder::check_output_outside(&dir, &a.output)?;
            folder::shard_paths(&dir, folder::ShardsFor::Calibrate)?
                .into_iter()
                .next()
                .expect("shard_paths refuses a folder without shards")
        }
        None => a.input.clone(),
    };
    let map = brevis::archive::writer::map_input(&input)?;
    let src = safetensors::parse(map.as_deref().unwrap_or(&[]))
        .map_err(|e| brevis::Error::source(&input, e))?;
    let start = Instant::now();
    let prior = brevis::archive::writer::calibrate_source(&src, &input);
    let secs = start.elapsed().as_secs_f64();
    let json = prior.to_json() + "\n";
    brevis::archive::writer::write_output_file(&a.input, &a.output, a.force, json.as_bytes())?;
    eprintln!(
        "{}: {} contexts in {secs:.2}s ({})",
        shown(&a.output),
        prior.counts.len(),
        escape_name(&prior.source)
    );
    Ok(Outcome::Ok)
}

/// `n` and `noun`, plural unless `n` is 1: `1 shard`, `3 shards`, `0 gaps`.
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}
