//! The terminal program `brevis-tui` (docs/design.md §9): look inside `.brv` archives.
//!
//! Split as STYLE habit 3 asks: [`app`] holds the state and applies [`action::Action`]s;
//! [`event`] maps keys to actions (pure); [`ui`] draws the state; [`worker`] runs long
//! work (compress, analyse, search, verify) on threads that report over a channel. The
//! data comes from a [`model::Source`]: an opened archive ([`archive_source`]) or, in
//! tests, tensors held in memory ([`model::MemorySource`]).
//!
//! [`main_entry`] is the binary: it parses the arguments, opens or makes the archive,
//! sets up the terminal with a panic hook that restores it, and runs [`run`].

pub mod action;
pub mod app;
pub mod archive_source;
pub mod event;
pub mod highlight;
pub mod inspect;
pub mod learn;
pub mod model;
pub mod playground;
pub mod prior_view;
pub mod searching;
pub mod sweep;
pub mod textfield;
pub mod ui;
pub mod worker;

/// `eprintln!` that ignores a failure to write (std's panics), so that a closed or full
/// stderr cannot turn brevis-tui's exit into a panic.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

use app::App;
use archive_source::ArchiveSource;
use crossterm::event::{DisableMouseCapture, Event};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use model::Source;
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::Terminal;
use std::borrow::Cow;
use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The built-in demo checkpoint: the embeddings, first encoder layer and pooler of
/// all-MiniLM-L6-v2 in BF16 (Apache-2.0), compressed when `brevis-tui` runs without a
/// path.
pub const DEMO: &[u8] = include_bytes!("../assets/demo.safetensors");

/// A name made safe for the terminal: [`crate::archive::escape_name`] (control and
/// bidirectional formatting characters and backslashes escaped). Wide and zero-width
/// characters are kept; the layout measures them by display width.
pub fn escape_name(name: &str) -> Cow<'_, str> {
    crate::archive::escape_name(name)
}

/// Text the user typed (the name filter, a file path) made safe for the terminal: control
/// and bidirectional formatting characters are escaped as in [`escape_name`], but a
/// backslash stays one backslash, so what is shown is what was typed.
pub fn escape_typed(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() || crate::archive::is_bidi(c))
    {
        return Cow::Borrowed(text);
    }
    let mut s = String::with_capacity(text.len() + 8);
    let mut buf = [0u8; 4];
    for c in text.chars() {
        if c.is_control() || crate::archive::is_bidi(c) {
            s.push_str(&escape_name(c.encode_utf8(&mut buf)));
        } else {
            s.push(c);
        }
    }
    Cow::Owned(s)
}

/// Reads one event, waiting at most a timeout; `None` when none came.
pub type EventSource<'a> = dyn FnMut(Duration) -> io::Result<Option<Event>> + 'a;

/// Runs the app until it quits: draw, read one event, apply it, take the workers'
/// messages. Generic over the backend so tests can drive it with `TestBackend`.
///
/// # Errors
/// When drawing or reading events fails.
pub fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    events: &mut EventSource<'_>,
) -> io::Result<()>
where
    B::Error: Into<io::Error>,
{
    let mut dirty = true;
    while !app.quit {
        if dirty || app.busy() {
            terminal.draw(|f| ui::draw(f, app)).map_err(Into::into)?;
            test_panic_hook();
        }
        dirty = false;
        if let Some(ev) = events(Duration::from_millis(100))? {
            dirty = true;
            if let Some(a) = event::map_event(app.key_context(), &ev) {
                app.apply(a);
            }
        }
        dirty |= app.pump();
    }
    Ok(())
}

/// For the end-to-end test of the panic path: `BREVIS_TUI_TEST_PANIC=1` panics after the
/// first frame is drawn.
fn test_panic_hook() {
    thread_local!(static DONE: Cell<bool> = const { Cell::new(false) });
    if std::env::var_os("BREVIS_TUI_TEST_PANIC").is_some() && !DONE.with(|d| d.replace(true)) {
        panic!("test panic requested by BREVIS_TUI_TEST_PANIC");
    }
}

/// Whether this program switched the terminal to its alternate screen and has not put it
/// back yet.
static IN_ALTERNATE_SCREEN: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Puts the terminal back: cooked mode, main screen, cursor visible, no mouse capture.
/// Safe to call more than once: only the first call after the program took the screen
/// leaves the alternate screen. (Leaving it again restores the cursor saved on entering
/// it, so a second call moved the cursor back above whatever was printed after the
/// first, and the shell's prompt overwrote it.)
pub fn restore_terminal() {
    let _ = disable_raw_mode();
    if IN_ALTERNATE_SCREEN.swap(false, std::sync::atomic::Ordering::SeqCst) {
        let _ = crossterm::execute!(
            io::stdout(),
            DisableMouseCapture,
            LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Folders this run stages archives in that are temporary (the demo's, a compression's
/// staging folder next to its input), removed if a signal ends the run: with everything
/// in it (`None`), or only the files this run staged there (`Some`: the demo's folder,
/// where the user may have written an archive of their own, which stays).
static TEMP_DIRS: std::sync::Mutex<Vec<(PathBuf, Option<Vec<PathBuf>>)>> =
    std::sync::Mutex::new(Vec::new());

/// Removes the files `staged` (what this run put in `dir`) and then `dir` itself if it
/// is empty; returns the files left in it, sorted (the user's own: an archive written
/// there from the Search view), not counting the temporary files of an unfinished write.
pub fn remove_staged(dir: &Path, staged: &[PathBuf]) -> Vec<PathBuf> {
    for f in staged {
        let _ = std::fs::remove_file(f);
    }
    let mut left: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let temporary =
                crate::archive::writer::is_temporary_name(&e.file_name().to_string_lossy());
            if temporary {
                let _ = std::fs::remove_file(e.path());
            }
            !temporary
        })
        .map(|e| e.path())
        .collect();
    left.sort();
    if left.is_empty() {
        let _ = std::fs::remove_dir(dir);
    }
    left
}

/// On SIGTERM, SIGINT or SIGHUP (from outside: in raw mode Ctrl-C is a key): put the
/// terminal back, remove the temporary files and folders of this run, and exit with
/// 128 + the signal number, as `q` would have left things.
fn restore_on_signal() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            restore_terminal();
            crate::archive::writer::remove_temporary_files();
            if let Ok(dirs) = TEMP_DIRS.lock() {
                for (d, staged) in dirs.iter() {
                    match staged {
                        Some(files) => {
                            remove_staged(d, files);
                        }
                        None => {
                            let _ = std::fs::remove_dir_all(d);
                        }
                    }
                }
            }
            std::process::exit(128 + sig);
        }
    });
}

struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let on_job = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with(worker::JOB_THREAD_PREFIX));
        if on_job {
            // Caught by the job and shown in the status line; printing here would
            // scribble over the screen.
            return;
        }
        restore_terminal();
        previous(info);
    }));
}

const ABOUT: &str = "Look inside a Brevis archive: every tensor's program, the bytes each node \
costs, why a tensor compressed as it did, a re-run of the search, and a bit-exact verify.";

const AFTER_HELP: &str = "\
PATH is one of:
  model.brv           an archive: opened through its index (nothing is decoded up front)
  model.safetensors   a checkpoint: compressed first, with progress and a cancel key, into a
                      new .brv next to it (never replacing a file; in a temporary folder if
                      that folder is read-only), then opened
  (none)              the built-in demo: a 4 MB BF16 checkpoint (all-MiniLM-L6-v2, first
                      layer), compressed on start into a temporary folder
A checkpoint folder is compressed with `brevis compress DIR`; open one of its .brv files.

Keys (? inside the program lists them all):
  1-7, Tab            views: tensors, tree, text, why, plots, search, verify
  up/down, Enter      move, open the selected tensor's program tree
  s S, /              sort, reverse, filter by name (Esc clears the filter)
  r                   open the Search view of the selected tensor; there r re-runs the
                      search (e edits a field, x cancels, w writes the new program into a
                      new archive, PgUp/PgDn scroll the two programs)
  v V                 verify the selected tensor / the whole archive
  ?, q                help and lessons, quit

Exit status:
  0                   you ended the session: q or Ctrl-C, also after x cancelled a
                      compression (no archive is written then), a search or a verify;
                      a verify's verdict is shown, not returned (scripts: `brevis verify`)
  1                   an error: the file cannot be opened, read or compressed, the archive
                      cannot be written, or the terminal fails
  2                   bad arguments (an unknown option, more than one path)
  3                   the archive opens as damaged (a record's header cannot be read), as
                      `brevis verify` reports it
  101                 a bug: brevis-tui panicked (the terminal is restored; please report it)
  128+N               ended from outside by signal N (SIGHUP, SIGINT, SIGTERM)";

/// Exit status when the user ends the session: `q`, Ctrl-C, or `x` while a
/// `.safetensors` file was being compressed (cancelling is not an error).
pub const EXIT_OK: i32 = 0;
/// Exit status when the file cannot be opened, read or compressed, the archive cannot be
/// written, or the terminal fails.
pub const EXIT_ERROR: i32 = 1;
/// Exit status for bad arguments (an unknown option, more than one path).
pub const EXIT_USAGE: i32 = 2;
/// Exit status when the archive is damaged in a way that keeps it from opening (a
/// record's header cannot be read): the status `brevis` gives the same archive.
pub const EXIT_DAMAGE: i32 = 3;

/// The command line of `brevis-tui`.
#[derive(clap::Parser, Debug)]
#[command(
    name = "brevis-tui",
    version,
    about = ABOUT,
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Args {
    /// A .brv archive, a .safetensors file, or nothing for the built-in demo
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// The base checkpoint the archive was compressed against (`brevis compress
    /// --base`), so its tensors coded against the base can be decoded; with a
    /// .safetensors PATH, the file is compressed against it
    #[arg(long, value_name = "BASE")]
    pub base: Option<PathBuf>,
}

/// The base given with `--base`, set once at start: attached to every archive the
/// session opens, and what a `.safetensors` file is compressed against.
static BASE: std::sync::OnceLock<Arc<crate::archive::base::BaseSet>> = std::sync::OnceLock::new();

/// The session's base ([`BASE`]), if one was given.
pub(crate) fn session_base() -> Option<&'static Arc<crate::archive::base::BaseSet>> {
    BASE.get()
}

/// Parses the arguments (without the program name). `Err` holds the text to print and
/// the exit code: [`EXIT_OK`] for `--help` and `--version` (printed to standard output),
/// [`EXIT_USAGE`] for a usage error such as an unknown option.
pub fn parse_args<I, T>(args: I) -> Result<Args, (String, i32)>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    let all = std::iter::once(std::ffi::OsString::from("brevis-tui"))
        .chain(args.into_iter().map(Into::into));
    Args::try_parse_from(all).map_err(|e| {
        let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        (e.render().to_string(), code)
    })
}

/// What to show, decided from the arguments before the terminal is touched.
enum Plan {
    /// An archive to show, and a note for the status line.
    Open(Arc<dyn Source>, Option<String>),
    Compress {
        input: PathBuf,
        label: String,
        dir: Option<tempfile::TempDir>,
        keep: bool,
    },
}

/// How a session ended: the exit status and a line for standard error (an error when the
/// status is not [`EXIT_OK`], a note otherwise).
struct Ending {
    status: i32,
    message: Option<String>,
}

impl Ending {
    fn error(message: String) -> Ending {
        Ending {
            status: EXIT_ERROR,
            message: Some(message),
        }
    }
}

/// Entry point of the binary; returns the process exit status: [`EXIT_OK`] when the user
/// ends the session (also after cancelling a compression), [`EXIT_ERROR`] when the file
/// cannot be opened or made or the terminal fails, [`EXIT_USAGE`] on bad arguments.
pub fn main_entry() -> i32 {
    let path = match parse_args(std::env::args_os().skip(1)) {
        Ok(a) => {
            if let Some(b) = &a.base {
                match crate::job::open_base(b) {
                    Ok(b) => {
                        let _ = BASE.set(b);
                    }
                    Err(e) => {
                        eprintln!("error: {}", escape_typed(&e.to_string()));
                        return EXIT_ERROR;
                    }
                }
            }
            a.path
        }
        Err((text, code)) => {
            if code == 0 {
                print!("{text}");
            } else {
                eprint!("{text}");
            }
            return code;
        }
    };
    let plan = match plan(path.as_deref()) {
        Ok(p) => p,
        Err((e, code)) => {
            eprintln!("error: {}", escape_typed(&e));
            return code;
        }
    };
    {
        use std::io::IsTerminal;
        if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
            eprintln!(
                "error: brevis-tui needs a terminal (its input or output is redirected); \
                 for scripts use `brevis` (ls, show, verify, bench)"
            );
            return EXIT_ERROR;
        }
    }
    install_panic_hook();
    restore_on_signal();
    #[cfg(unix)]
    crate::archive::install_truncation_guard();
    #[cfg(unix)]
    crate::archive::ignore_file_size_signal();
    let result = run_terminal(plan);
    restore_terminal();
    match result {
        Ok(Ending { status, message }) => {
            match message {
                Some(m) if status == EXIT_OK => eprintln!("{}", escape_typed(&m)),
                Some(m) => eprintln!("error: {}", escape_typed(&m)),
                None => {}
            }
            status
        }
        Err(e) => {
            eprintln!("error: terminal: {e}");
            EXIT_ERROR
        }
    }
}

/// What to show for `path`, or the error and the exit status to end with.
fn plan(path: Option<&Path>) -> Result<Plan, (String, i32)> {
    let error = |e: String| (e, EXIT_ERROR);
    match path {
        None => {
            let dir = tempfile::Builder::new()
                .prefix("brevis-tui-demo-")
                .tempdir()
                .map_err(|e| {
                    error(format!(
                        "cannot create a temporary folder for the demo: {e}"
                    ))
                })?;
            let input = dir.path().join("demo.safetensors");
            std::fs::write(&input, DEMO)
                .map_err(|e| error(format!("{}: cannot write the demo: {e}", input.display())))?;
            Ok(Plan::Compress {
                input,
                label: "the built-in demo (minilm-l6-v2-bf16-layer0)".into(),
                dir: Some(dir),
                keep: false,
            })
        }
        Some(p) if p.extension().is_some_and(|e| e == "safetensors") => {
            if let Some(a) = existing_archive(p, session_base().map(|b| b.as_ref())) {
                let against = if session_base().is_some() {
                    ", coded against this base"
                } else {
                    ""
                };
                let note = format!(
                    "opened {}, the existing archive of this file (same length and \
                     checksum{against}); `brevis compress` makes a new one",
                    a.path().display()
                );
                return Ok(Plan::Open(Arc::new(ArchiveSource::new(a)), Some(note)));
            }
            Ok(Plan::Compress {
                input: p.to_path_buf(),
                label: p.display().to_string(),
                dir: None,
                keep: true,
            })
        }
        Some(p) if p.is_dir() => Err(error(folder_hint(p))),
        Some(p) => match crate::Archive::open(p).and_then(|a| {
            if let Some(b) = session_base() {
                a.attach_base(b)?;
            }
            Ok(a)
        }) {
            Ok(a) => {
                let note = base_note(&a, session_base().is_some());
                Ok(Plan::Open(Arc::new(ArchiveSource::new(a)), note))
            }
            Err(e) => {
                let code = if e.is_mismatch() {
                    EXIT_DAMAGE
                } else {
                    EXIT_ERROR
                };
                Err((e.to_string(), code))
            }
        },
    }
}

/// What to say when the path is a folder: brevis-tui opens one archive, so either open
/// one of the folder's archives (`.brv` files that start with the archive magic), or
/// compress the checkpoint folder first (as `--help` says).
fn folder_hint(dir: &Path) -> String {
    let shown = dir.display().to_string();
    let mut archives: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|e| e == "brv")
                && crate::archive::base::is_archive_file(p)
        })
        .collect();
    archives.sort();
    match archives.first() {
        Some(a) => format!(
            "{shown} is a folder: brevis-tui opens one archive; open one of its .brv files, \
             e.g. `brevis-tui {}`",
            a.display()
        ),
        None if crate::archive::folder::shard_paths(
            dir,
            crate::archive::folder::ShardsFor::Bench,
        )
        .is_ok() =>
        {
            format!(
                "{shown} is a folder: brevis-tui opens one archive; compress the checkpoint \
             folder first with `brevis compress {shown}`, then open one of the .brv files it \
             writes"
            )
        }
        None => format!(
            "{shown} is a folder: brevis-tui opens one archive (.brv) or one checkpoint \
             (.safetensors), and this folder holds neither"
        ),
    }
}

/// What to say at open about the archive's base: that tensors need a base not given
/// (named, with how many), or that a base was given to an archive that uses none.
pub fn base_note(a: &crate::Archive, base_given: bool) -> Option<String> {
    use crate::archive::format::SourceRole;
    let bases: Vec<usize> = (0..a.sources().len())
        .filter(|&i| a.sources()[i].role == SourceRole::Base)
        .collect();
    if bases.is_empty() {
        return base_given
            .then(|| "this archive is not coded against a base: --base is not used".to_string());
    }
    let missing: Vec<usize> = bases
        .into_iter()
        .filter(|&i| a.attached(i).is_none())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let tensors = a
        .tensors()
        .iter()
        .filter(|t| t.reference.is_some_and(|r| missing.contains(&r.source)))
        .count();
    let names: Vec<String> = missing
        .iter()
        .map(|&i| format!("{:?}", a.sources()[i].name))
        .collect();
    Some(format!(
        "{tensors} tensor{} coded against the base {}: without --base they cannot be \
         decoded (verify, why, search); the others can",
        if tensors == 1 { " is" } else { "s are" },
        names.join(", ")
    ))
}

/// An archive next to `input` (`stem.brv`, `stem-1.brv`, ... as [`fresh_output`] names
/// them, up to the first name not taken) that restores exactly `input`: the same
/// original length and whole-file checksum, coded against `base` when one is given
/// (which is then attached) and against no base when none is. `None` when there is
/// none (or `input` cannot be read: compressing it says why).
pub fn existing_archive(
    input: &Path,
    base: Option<&crate::archive::base::BaseSet>,
) -> Option<crate::Archive> {
    let len = std::fs::metadata(input).ok()?.len();
    let dir = match input.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = input.file_stem()?.to_string_lossy().into_owned();
    let mut checksum = None;
    for k in 0..100u32 {
        let p = dir.join(numbered_name(&stem, "", k));
        if std::fs::symlink_metadata(&p).is_err() {
            return None;
        }
        let Ok(a) = crate::Archive::open(&p) else {
            continue;
        };
        if a.original_len() != len {
            continue;
        }
        let sum = match checksum {
            Some(c) => c,
            None => {
                let file = std::fs::File::open(input).ok()?;
                let map = crate::files::map_file(&file).ok()?;
                *checksum.insert(crate::hash::xxh3_64(&map))
            }
        };
        if a.file_checksum() != sum {
            continue;
        }
        match base {
            None if !a.needs_base() => return Some(a),
            Some(b) if a.needs_base() && a.attach_base(b).is_ok() => return Some(a),
            _ => {}
        }
    }
    None
}

/// The `k`-th candidate name of an archive: `STEM{tag}.brv`, then `STEM{tag}-k.brv` for
/// `k >= 1` (the names [`fresh_output`] and the write prompt try in turn).
pub fn numbered_name(stem: &str, tag: &str, k: u32) -> String {
    if k == 0 {
        format!("{stem}{tag}.brv")
    } else {
        format!("{stem}{tag}-{k}.brv")
    }
}

/// A name for the archive of `input` in `dir` that does not exist yet:
/// `stem.brv`, then `stem-1.brv`, `stem-2.brv`, ...
pub fn fresh_output(dir: &Path, input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "archive".into());
    let mut k = 0u32;
    loop {
        let p = dir.join(numbered_name(&stem, "", k));
        if std::fs::symlink_metadata(&p).is_err() {
            return p;
        }
        k += 1;
    }
}

/// Where a compress job writes: a private staging folder (removed on cancel, so nothing
/// half-written is left) and the final path next to the input, or a kept temporary
/// folder when the input's folder is read-only.
struct Staging {
    dir: tempfile::TempDir,
    staged: PathBuf,
    target: Option<PathBuf>,
}

fn staging(input: &Path, dir: Option<tempfile::TempDir>) -> Result<Staging, String> {
    if let Some(dir) = dir {
        let staged = dir.path().join("demo.brv");
        return Ok(Staging {
            dir,
            staged,
            target: None,
        });
    }
    let parent = match input.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = input
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| "archive".into());
    match tempfile::Builder::new()
        .prefix(".brevis-tui-")
        .tempdir_in(&parent)
    {
        Ok(dir) => Ok(Staging {
            staged: dir.path().join(&file).with_extension("brv"),
            dir,
            target: Some(fresh_output(&parent, input)),
        }),
        Err(_) => {
            let dir = tempfile::Builder::new()
                .prefix("brevis-tui-")
                .tempdir()
                .map_err(|e| format!("cannot create a temporary folder: {e}"))?;
            Ok(Staging {
                staged: dir.path().join(&file).with_extension("brv"),
                dir,
                target: None,
            })
        }
    }
}

/// Moves the finished archive to a fresh name in the target folder without replacing
/// anything (a hard link fails if the name exists; then the next name is tried).
fn publish(staged: &Path, input: &Path, target: &Path) -> Result<PathBuf, String> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let mut candidate = target.to_path_buf();
    for _ in 0..1000 {
        match std::fs::hard_link(staged, &candidate) {
            Ok(()) => {
                let _ = std::fs::remove_file(staged);
                return Ok(candidate);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                candidate = fresh_output(dir, input);
            }
            Err(_) => {
                // No hard links on this file system: rename after a fresh check.
                candidate = fresh_output(dir, input);
                return std::fs::rename(staged, &candidate)
                    .map(|()| candidate.clone())
                    .map_err(|e| {
                        format!(
                            "{}: cannot move the archive into place: {e}",
                            candidate.display()
                        )
                    });
            }
        }
    }
    Err(format!("{}: no free name for the archive", dir.display()))
}

fn run_terminal(plan: Plan) -> io::Result<Ending> {
    let mut app;
    let mut staging_dir = None;
    // The demo's folder: the files staged in it (what is removed at exit).
    let mut demo_files = None;
    match plan {
        Plan::Open(source, note) => {
            app = App::new(source);
            app.status = note.unwrap_or_default();
        }
        Plan::Compress {
            input,
            label,
            dir,
            keep,
        } => {
            let st = match staging(&input, dir) {
                Ok(s) => s,
                Err(e) => return Ok(Ending::error(e)),
            };
            let shown_output = st
                .target
                .clone()
                .unwrap_or_else(|| st.staged.clone())
                .display()
                .to_string();
            let staged = st.staged.clone();
            let target = st.target.clone();
            let keep_dir = keep && target.is_none();
            app = App::empty();
            if !keep {
                // The demo: its archive lives in a folder removed at exit, so `w` writes
                // beside the user instead, and whatever the user writes there stays.
                app.temp_dir = Some(st.dir.path().to_path_buf());
                demo_files = Some(vec![input.clone(), staged.clone()]);
            }
            app.start_loading(label, shown_output, move |ctx| {
                compress_and_open(&input, &staged, target.as_deref(), ctx)
            });
            if !keep_dir {
                if let Ok(mut dirs) = TEMP_DIRS.lock() {
                    dirs.push((st.dir.path().to_path_buf(), demo_files.clone()));
                }
            }
            staging_dir = Some((st.dir, keep_dir));
        }
    }
    enable_raw_mode()?;
    let _guard = TerminalGuard;
    IN_ALTERNATE_SCREEN.store(true, std::sync::atomic::Ordering::SeqCst);
    crossterm::execute!(io::stdout(), EnterAlternateScreen, crossterm::cursor::Hide)?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    let mut events = |timeout: Duration| -> io::Result<Option<Event>> {
        if crossterm::event::poll(timeout)? {
            crossterm::event::read().map(Some)
        } else {
            Ok(None)
        }
    };
    run(&mut terminal, &mut app, &mut events)?;
    drop(terminal);
    restore_terminal();
    let mut kept = None;
    if let Some((dir, keep)) = staging_dir {
        // The demo's folder and a cancelled job's staging folder go; a read-only
        // input's archive stays in its temporary folder, which the user was shown.
        let finished = app.source.is_some();
        if keep && finished {
            kept = Some(format!(
                "the archive was written to the temporary folder {} (the input's folder is not writable)",
                escape_name(&dir.path().display().to_string())
            ));
            let _ = dir.keep();
        } else if let Some(mut files) = demo_files {
            // The demo's own files go; what the user wrote there stays, and is named.
            // (An archive replaced in place is the user's now.)
            files.retain(|f| !app.written_paths.iter().any(|w| app::same_file(w, f)));
            let path = dir.keep();
            let left = remove_staged(&path, &files);
            if !left.is_empty() {
                let names: Vec<String> = left
                    .iter()
                    .map(|p| escape_name(&p.display().to_string()).into_owned())
                    .collect();
                kept = Some(format!(
                    "kept what you wrote into the demo's temporary folder: {}",
                    names.join(", ")
                ));
            }
        } else {
            drop(dir);
        }
    }
    let status = app.exit_code();
    let message = if status == EXIT_OK {
        // Said once the terminal is back (by the caller), so it stays on screen.
        match (kept, app.exit_note.take()) {
            (Some(k), Some(n)) => Some(format!("{n}; {k}")),
            (k, n) => k.or(n),
        }
    } else {
        app.load_error.take()
    };
    Ok(Ending { status, message })
}

/// A compression's progress counted in tensors, the unit the table and the final status
/// count. [`crate::archive::compress_file`] reports one item per record of the archive,
/// in file order: the source's header, then each tensor and each gap between tensors;
/// only the tensors are counted here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorProgress {
    /// Per record, in file order: whether it holds a tensor.
    is_tensor: Vec<bool>,
    /// Records reported so far.
    records: usize,
    /// Tensors among them.
    done: u64,
}

impl TensorProgress {
    /// Progress of compressing the parsed source `src`.
    pub fn new(src: &crate::archive::safetensors::SourceFile<'_>) -> TensorProgress {
        use crate::archive::safetensors::Region;
        let is_tensor = std::iter::once(false)
            .chain(src.regions().iter().map(|r| matches!(r, Region::Tensor(_))))
            .collect();
        TensorProgress {
            is_tensor,
            records: 0,
            done: 0,
        }
    }

    /// Progress of compressing the `.safetensors` file `input`, or `None` when it cannot
    /// be read or parsed (compressing it fails with the reason then).
    pub fn of_file(input: &Path) -> Option<TensorProgress> {
        let file = std::fs::File::open(input).ok()?;
        if file.metadata().ok()?.len() == 0 {
            return None;
        }
        let map = crate::files::map_file(&file).ok()?;
        let src = crate::archive::safetensors::parse(&map).ok()?;
        Some(TensorProgress::new(&src))
    }

    /// Tensors in all.
    pub fn total(&self) -> u64 {
        self.is_tensor.iter().filter(|&&t| t).count() as u64
    }

    /// Takes one progress event; returns what to show, `(tensors done, tensors in all,
    /// the record just done)`, or `None` when there is nothing new.
    pub fn update(
        &mut self,
        event: crate::archive::ProgressEvent<'_>,
    ) -> Option<(u64, u64, String)> {
        use crate::archive::ProgressEvent;
        match event {
            ProgressEvent::Begin { .. } => Some((0, self.total(), String::new())),
            ProgressEvent::Item { label, .. } => {
                if self.is_tensor.get(self.records).copied().unwrap_or(false) {
                    self.done += 1;
                }
                self.records += 1;
                Some((self.done, self.total(), label.to_string()))
            }
            ProgressEvent::End => None,
        }
    }
}

/// For tests only: `BREVIS_TUI_TEST_HOLD_MS=N` holds every record of a compression for
/// N milliseconds (at most 10 s), so that end-to-end tests of cancelling and of signals
/// act while a compression is surely still running, however fast the machine.
fn test_hold() -> Option<std::time::Duration> {
    let ms: u64 = std::env::var("BREVIS_TUI_TEST_HOLD_MS")
        .ok()?
        .parse()
        .ok()?;
    Some(std::time::Duration::from_millis(ms.min(10_000)))
}

/// The message of `e`, an error of compressing into the staging file `staged`: when the
/// archive is to be published as `target`, an error about `staged` names `target`, the
/// file the user asked for, not the staging folder, which is gone by the time the
/// message is read (a full disk was reported as `.brevis-tui-XXXX/x.brv: cannot write`;
/// found by a tester). Every archive error's message begins with the path it is about.
fn staged_error(e: &crate::Error, staged: &Path, target: Option<&Path>) -> String {
    let text = e.to_string();
    match (target, text.strip_prefix(&staged.display().to_string())) {
        (Some(t), Some(rest)) => format!("{}{rest}", t.display()),
        _ => text,
    }
}

fn compress_and_open(
    input: &Path,
    staged: &Path,
    target: Option<&Path>,
    ctx: &worker::JobCtx,
) -> Result<Arc<dyn Source>, String> {
    // Unknown (no tensors) when the file does not parse; compressing says why then.
    let counter = std::cell::RefCell::new(TensorProgress::of_file(input));
    let opts = crate::archive::CompressOptions {
        links: session_base().map(|b| {
            Arc::new(crate::archive::writer::Links {
                base: Some(b.clone()),
                ..Default::default()
            })
        }),
        ..Default::default()
    };
    let hold = test_hold();
    crate::archive::compress_file(input, staged, &opts, &|ev| {
        if let Some((done, total, what)) = counter.borrow_mut().as_mut().and_then(|c| c.update(ev))
        {
            ctx.progress(done, total, what);
            if let Some(d) = hold {
                std::thread::sleep(d);
            }
        }
    })
    .map_err(|e| staged_error(&e, staged, target))?;
    // Moving the archive into place cannot be undone: a cancel either comes before it
    // (nothing is published, the staging folder goes) or learns it came too late and
    // waits for the archive to open (`JobHandle::cancel_unless_committed`).
    let path = ctx
        .commit(|| match target {
            Some(t) => {
                let p = publish(staged, input, t)?;
                // The staging folder is empty now; remove it at once rather than at exit.
                if let Some(dir) = staged.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
                Ok::<_, String>(p)
            }
            None => Ok(staged.to_path_buf()),
        })
        .ok_or_else(|| "cancelled".to_string())??;
    Ok(Arc::new(ArchiveSource::open(&path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_write_error_names_the_archive_to_publish() {
        let staged = Path::new("/d/.brevis-tui-AbCdEf/demo.brv");
        let full = io::Error::from_raw_os_error(28);
        let e = crate::Error::io(staged, "cannot write", full);
        assert_eq!(
            staged_error(&e, staged, Some(Path::new("./demo.brv"))),
            "./demo.brv: cannot write: No space left on device (os error 28)"
        );
        // With no target (the demo, a read-only folder) the staged file is the archive.
        assert_eq!(
            staged_error(&e, staged, None),
            "/d/.brevis-tui-AbCdEf/demo.brv: cannot write: No space left on device (os error 28)"
        );
        // An error about another file (the input) is left as it is.
        let input = Path::new("/d/demo.safetensors");
        let e = crate::Error::io(input, "cannot open", io::Error::from_raw_os_error(13));
        assert_eq!(
            staged_error(&e, staged, Some(Path::new("./demo.brv"))),
            "/d/demo.safetensors: cannot open: Permission denied (os error 13)"
        );
    }
}
