//! Where an output goes (a file, a device, standard output) and the checks every
//! command's output passes before anything is written: never the input, never a link,
//! device or folder, an existing file only with `--force`.

use super::sync_ahead::SyncAhead;
use super::temp::{persist, temp_beside};
use crate::error::{Error, Result};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// How [`Target::Stdout`] is named in messages and reports.
pub const STDOUT_LABEL: &str = "standard output";

/// Where an output goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A regular file (new, or replaced with `force`): written to a temporary file
    /// beside it, synced and renamed into place, so it is never seen partial.
    File(PathBuf),
    /// An existing character device (`/dev/null`), opened and written in order: there
    /// is nothing to rename, and a failed job leaves what it wrote.
    Device(PathBuf),
    /// Standard output, written in order; a failed job leaves what it wrote.
    Stdout,
}

impl Target {
    /// The target for the path `output`: [`Target::Device`] if it is a character device
    /// (symbolic links followed), else [`Target::File`], whose checks
    /// ([`check_output`]) come when it is written.
    pub fn of_path(output: &Path) -> Target {
        if is_char_device(output) {
            Target::Device(output.to_path_buf())
        } else {
            Target::File(output.to_path_buf())
        }
    }

    /// The path it writes, or [`STDOUT_LABEL`].
    pub fn path(&self) -> &Path {
        match self {
            Target::File(p) | Target::Device(p) => p,
            Target::Stdout => Path::new(STDOUT_LABEL),
        }
    }

    /// Whether it is written through a temporary file and a rename ([`Target::File`]).
    pub fn is_file(&self) -> bool {
        matches!(self, Target::File(_))
    }
}

/// Whether `path` (symbolic links followed) is a character device.
fn is_char_device(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Bytes buffered before a write to a device or standard output.
const DIRECT_BUFFER_BYTES: usize = 1 << 20;

/// A buffered writer of a [`Target::Device`] (opened for writing, not truncated or
/// created) or [`Target::Stdout`]. Flush it at the end: its errors are the output's.
///
/// # Errors
/// [`Error::Io`] if the device cannot be opened; [`Error::Internal`] for a
/// [`Target::File`], which is written through [`temp_beside`].
pub(crate) fn open_direct(target: &Target) -> Result<Box<dyn Write>> {
    match target {
        Target::Device(path) => {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, "cannot open", e))?;
            Ok(Box::new(BufWriter::with_capacity(DIRECT_BUFFER_BYTES, f)))
        }
        Target::Stdout => Ok(Box::new(BufWriter::with_capacity(
            DIRECT_BUFFER_BYTES,
            io::stdout().lock(),
        ))),
        Target::File(path) => Err(Error::Internal {
            path: path.clone(),
            what: "a file output written directly".to_string(),
        }),
    }
}

/// Writes the output `fill` makes (given a writer and the path to name in errors) to
/// `target` under the rules of every command's output: a [`Target::File`] is checked
/// ([`check_output`], `input` being the file it is made from, if any), written to a
/// temporary file beside it, synced and renamed into place only if `fill` succeeds; a
/// device or standard output is written in order and flushed.
///
/// # Errors
/// `fill`'s error (the temporary removed), or as [`check_output`], [`open_direct`] and
/// the writes.
pub fn write_target<T>(
    input: Option<&Path>,
    target: &Target,
    force: bool,
    fill: impl FnOnce(&mut dyn Write, &Path) -> Result<T>,
) -> Result<T> {
    match target {
        Target::File(output) => {
            check_output_of(input, output, force)?;
            let mut tmp = temp_beside(output)?;
            let r = {
                let mut w = SyncAhead::new(tmp.as_file_mut());
                let r = fill(&mut w, output)?;
                w.finish(output)?;
                r
            };
            persist(tmp, output, force)?;
            Ok(r)
        }
        _ => {
            let path = target.path();
            let mut w = open_direct(target)?;
            let r = fill(&mut w, path)?;
            w.flush().map_err(|e| Error::io(path, "cannot write", e))?;
            Ok(r)
        }
    }
}

fn is_a_directory() -> io::Error {
    io::Error::other("is a directory")
}

/// Refuses an output that is the input, is a folder, or exists without `force`; and,
/// even with `force`, one that is not a regular file: a symbolic link (the finished file
/// would replace the link, not its target) or a device, FIFO or socket (it would be
/// replaced by a regular file; `/dev/null` among them).
///
/// # Errors
/// [`Error::SameFile`], [`Error::OutputExists`] or [`Error::Io`] naming `output`.
pub fn check_output(input: &Path, output: &Path, force: bool) -> Result<()> {
    check_output_of(Some(input), output, force)
}

/// [`check_output`] for an output whose input may be no file (`None`: standard input,
/// bytes in memory), which it then cannot be.
pub(crate) fn check_output_of(input: Option<&Path>, output: &Path, force: bool) -> Result<()> {
    // `out/` names a folder even when none exists: say so before the work, rather than
    // fail to rename the finished file into place after it.
    if output
        .as_os_str()
        .as_encoded_bytes()
        .last()
        .is_some_and(|&b| std::path::is_separator(char::from(b)))
    {
        return Err(Error::io(
            output,
            "cannot write",
            io::Error::other("names a folder (it ends with a slash): give the file's name too"),
        ));
    }
    let Ok(link_meta) = fs::symlink_metadata(output) else {
        return Ok(());
    };
    if input.is_some_and(|input| same_file(input, output)) {
        return Err(Error::SameFile {
            path: output.to_path_buf(),
        });
    }
    check_replaceable(output, &link_meta, false)?;
    if !force {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuses to replace `path` (whose own metadata, links not followed, is `meta`) unless
/// it is a regular file, or a folder when `folder_ok`.
pub(crate) fn check_replaceable(path: &Path, meta: &fs::Metadata, folder_ok: bool) -> Result<()> {
    let kind = meta.file_type();
    let why = if kind.is_symlink() {
        "is a symbolic link; brevis writes a new file in its place, so name the file it \
         points to or remove the link"
    } else if kind.is_dir() {
        if folder_ok {
            return Ok(());
        }
        return Err(Error::io(path, "cannot write", is_a_directory()));
    } else if !kind.is_file() {
        "is not a regular file (a FIFO, socket or device); brevis will not replace it \
         (only a character device such as /dev/null is written into directly)"
    } else {
        return Ok(());
    };
    Err(Error::io(path, "cannot write", io::Error::other(why)))
}

/// Whether two existing paths name the same file (following symlinks and hard links).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
        false
    }
    #[cfg(not(unix))]
    {
        match (fs::canonicalize(a), fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// Writes `bytes` to `output` under the rules every command's output follows: never the
/// file `input` (even through another name), never a symbolic link (dangling or not), a
/// device or a folder; an existing file only with `force`; written to a temporary file
/// beside `output`, synced and renamed into place, so `output` is never partial.
///
/// # Errors
/// [`Error::SameFile`], [`Error::OutputExists`] or [`Error::Io`] naming `output`.
pub fn write_output_file(input: &Path, output: &Path, force: bool, bytes: &[u8]) -> Result<()> {
    check_output(input, output, force)?;
    let mut tmp = temp_beside(output)?;
    // Through the file itself: the temporary file's own `Write` names its path in errors.
    tmp.as_file_mut()
        .write_all(bytes)
        .map_err(|e| Error::io(output, "cannot write", e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| Error::io(output, "cannot sync", e))?;
    persist(tmp, output, force)
}

/// Drops, on a thread of its own, the cached pages of the file `output` that a finished
/// job will replace (`force`, and `output` an existing regular file), and waits for
/// that when dropped. Replacing a file frees its cached pages inside the rename, on
/// the job's critical path (7 ms of a 125 ms compression of minilm over its previous
/// archive); dropped beforehand, they are freed while the job works, and the rename
/// only unlinks. The file itself is untouched: if the job fails it stays as it was,
/// only no longer cached.
pub(crate) struct EvictReplaced(Option<std::thread::JoinHandle<()>>);

impl EvictReplaced {
    /// Starts dropping `output`'s cached pages if the job may replace it.
    pub(crate) fn start(output: &std::path::Path, force: bool) -> EvictReplaced {
        let replaced =
            force && std::fs::symlink_metadata(output).is_ok_and(|m| m.is_file() && m.len() > 0);
        if !replaced {
            return EvictReplaced(None);
        }
        let path = output.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("brevis-evict".into())
            .spawn(move || {
                #[cfg(unix)]
                if let Ok(f) = std::fs::File::open(&path) {
                    // Best effort: advice that is refused changes nothing.
                    let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
                }
                #[cfg(not(unix))]
                let _ = path;
            });
        EvictReplaced(spawned.ok())
    }
}

impl Drop for EvictReplaced {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}
