//! `brevis`: the command-line shell over the library (parse, call, print).
//!
//! Exit codes: 0 success; 1 error (a file cannot be read or written, is not a valid
//! `.safetensors` file or archive, or holds a program that cannot be decoded); 2 usage
//! error; 3 verification mismatch (decoded bytes differ from the stored checksums or from
//! the original). `verify` exits 3 on any damage it finds in an archive it can open,
//! decodable or not: finding it is its result; an archive too damaged to open (its header,
//! index or a shard of a folder missing or cut short) is an error, exit 1; a run stopped
//! by SIGINT, SIGTERM or SIGHUP exits 128 + the signal; `decompress --salvage` exits 3
//! when it wrote the file with damaged tensors zero-filled. `--help` says the same.

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

mod args;
mod commands;
mod print;

use anyhow::Result;
use args::{Cli, Command};
use brevis::archive::{escape_name, ProgressEvent};
use brevis::job::Observer;
use clap::Parser;
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

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
    brevis::keep_freed_memory();
    let cli = match Cli::try_parse().and_then(|c| {
        Ok(Cli {
            command: c.command.check()?,
        })
    }) {
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
        Err(_) if brevis::archive::writer::cleanup_started() => {
            // A signal came and its handler is removing the temporaries: this error may
            // be their removal seen from inside the job (a shard's temporary file whose
            // folder is gone). The handler says what happened and exits with 128 + the
            // signal; wait for it rather than race it with a misleading error and exit 1.
            loop {
                std::thread::park();
            }
        }
        Err(e) => {
            let mut msg = e.to_string();
            let mut code = 1;
            // `other`: an error neither the library nor this program names a kind for (a
            // formatting error, say; none is expected).
            let mut kind = "other";
            if let Some(f) = e.downcast_ref::<Failure>() {
                kind = f.kind;
                if kind == "usage" {
                    // What the command's own checks refuse (a budget with the fast level,
                    // a terminal as standard input) exits as clap's usage errors do.
                    code = 2;
                }
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

fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Compress(a) => commands::compress::run(a),
        Command::Decompress(a) => commands::decompress::run(a),
        Command::Verify(a) => commands::verify::run(a),
        Command::Ls(a) => commands::ls::run(a),
        Command::Show(a) => commands::show::run(a),
        Command::Why(a) => commands::why::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Calibrate(a) => commands::calibrate::run(a),
        Command::Extract(a) => commands::extract::run(a),
        Command::Completions(a) => commands::completions::run(a),
        Command::Man => commands::man::run(),
    }
}

/// `e` with `hint` (when there is one) appended to its message; its kind and exit code
/// stay those of the error inside (anyhow's context keeps it for `downcast_ref`).
fn hinted(e: anyhow::Error, hint: Option<String>) -> anyhow::Error {
    match hint {
        Some(h) => {
            let msg = format!("{e}{h}");
            e.context(msg)
        }
        None => e,
    }
}

/// When `input` is a pipe given by its path (`brevis compress <(cat f)`), what to do
/// instead: give `-` and send the pipe to standard input (a pipe is not read by path,
/// since it cannot be mapped or read twice), or, for a command that reads archives from
/// files only (`show`, `why`, `extract`), save it to a file.
fn pipe_hint(input: &Path, command: &str) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::metadata(input).ok()?;
        if !meta.file_type().is_fifo() {
            return None;
        }
        if matches!(command, "show" | "why" | "extract") {
            return Some(format!(
                "; `brevis {command}` reads an archive from a file only: save the pipe's \
                 bytes to a file and name it (decompress, verify and ls read a pipe as `-`)"
            ));
        }
        let out = if command == "compress" || command == "decompress" {
            " -o OUT"
        } else {
            ""
        };
        Some(format!(
            "; to read from a pipe, give `-` and send it to standard input: \
             `... | brevis {command} -{out}` or `brevis {command} -{out} < FILE`"
        ))
    }
    #[cfg(not(unix))]
    {
        let _ = (input, command);
        None
    }
}

/// Writes `s` to stderr: the report of a command whose output went to stdout.
fn emit_stderr(s: &str) {
    eprint!("{s}");
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

/// Prints `report` (a job's report, serde-serialized) as pretty JSON on stdout.
fn emit_report<T: serde::Serialize>(report: &T) -> Result<()> {
    emit_json(&serde_json::to_value(report)?)
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

/// The CLI's [`Observer`]: progress on a bar on stderr (when it is a terminal), warnings
/// and failures on stderr, each on one line.
struct Console {
    progress: Progress,
}

impl Console {
    fn new(verb: &str) -> Console {
        Console {
            progress: Progress::new(verb),
        }
    }

    /// Prints `line` on stderr, the bar (if any) hidden meanwhile.
    fn say(&self, line: &str) {
        match &self.progress.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}

impl Observer for Console {
    fn progress(&self, _shard: &str, event: ProgressEvent<'_>) {
        self.progress.event(event);
    }

    fn warning(&self, text: &str) {
        self.say(&format!("warning: {text}"));
    }

    /// At most 20, then a count of the rest.
    fn file_warnings(&self, file: &Path, warnings: &[brevis::error::Warning]) {
        const SHOWN: usize = 20;
        for w in warnings.iter().take(SHOWN) {
            self.say(&format!("warning: {}: {w}", shown(file)));
        }
        if warnings.len() > SHOWN {
            self.say(&format!(
                "warning: {}: ... and {} more warnings",
                shown(file),
                warnings.len() - SHOWN
            ));
        }
    }

    fn failure(&self, text: &str) {
        self.say(&format!("error: {text}"));
    }
}
