//! Temporary files and folders beside an output, renamed into place only when complete
//! and synced (an output is never partial), and removed by the signal handler of an
//! interrupted run; their names carry the process id so a later run can tell a killed
//! run's leftovers ([`super::stale`]).

use crate::error::{Error, Result};
use crate::shown::shown_path;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// Random letters and digits in a temporary's name (after [`temp_prefix`]).
const TEMP_RANDOM_CHARS: usize = 6;

/// The start of the names of this process's temporary files and folders,
/// `.brevis-PID-`: a run killed by SIGKILL leaves `.brevis-PID-XXXXXX.tmp`, which a
/// later run can tell is stale, its process gone ([`stale_temporaries`]).
fn temp_prefix() -> String {
    format!(".brevis-{}-", std::process::id())
}

/// Whether `name` is named like a temporary file or folder of a `brevis` run
/// (`.brevis-PID-XXXXXX.tmp`), such as one a killed run left.
pub fn is_temporary_name(name: &str) -> bool {
    temp_pid(name).is_some()
}

/// The process id recorded in `name` when it is the name of a temporary file or folder
/// made by [`temp_prefix`]: `.brevis-PID-XXXXXX.tmp` with PID a decimal number without
/// leading zeros and six ASCII letters and digits (tempfile's random part). `None` for
/// any other name, including the unnumbered `.brevis-X.tmp` of older versions and of
/// the folder that holds a replaced output ([`rename_temp_dir`]).
pub(crate) fn temp_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(".brevis-")?.strip_suffix(".tmp")?;
    let (pid, random) = rest.split_once('-')?;
    let digits =
        !pid.is_empty() && !pid.starts_with('0') && pid.bytes().all(|b| b.is_ascii_digit());
    let random_ok =
        random.len() == TEMP_RANDOM_CHARS && random.bytes().all(|b| b.is_ascii_alphanumeric());
    if !(digits && random_ok) {
        return None;
    }
    pid.parse().ok()
}

/// Whether no process `pid` exists: `kill(pid, 0)` fails with `ESRCH`. Any other
/// answer (the process runs, belongs to another user, or the pid does not fit) is
/// `false`; on systems without `kill` it is always `false`.
#[cfg(unix)]
pub(crate) fn process_is_gone(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
}

#[cfg(not(unix))]
pub(crate) fn process_is_gone(_pid: u32) -> bool {
    false
}

/// Whether `meta` is of a file or folder this process's user owns (always true where
/// files have no owner id).
pub(crate) fn owned_by_us(meta: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.uid() == rustix::process::geteuid().as_raw()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// A temporary file in the folder of `output`, removed on drop unless persisted.
pub(crate) fn temp_beside(output: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = temp_prefix();
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_CHARS);
    // Temporary files are private (0600) by default; the finished file should get the
    // usual permissions of a new file, which the umask then narrows.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    // Created while holding the list, so a signal cannot come between the file's
    // creation and its registration.
    let mut live = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = builder
        .tempfile_in(dir)
        .map_err(|e| temp_error(output, "cannot create a temporary file in its folder", e))?;
    live.retain(|p| p.exists());
    live.push(tmp.path().to_path_buf());
    Ok(tmp)
}

/// The error for a temporary file or folder beside `output` that could not be created:
/// it names `output` (the temporary name, random and never seen by the user, is cut
/// from the operating system's message) and says so when `output`'s folder is missing.
/// A folder that exists but takes no new file and answers "not found" (`/proc/self`)
/// gets `what`, not "does not exist".
fn temp_error(output: &Path, what: &'static str, e: io::Error) -> Error {
    let kind = e.kind();
    let text = e.to_string();
    // tempfile appends ` at path "<temporary path>"` to the system's message.
    let text = text
        .split(" at path ")
        .next()
        .unwrap_or_default()
        .to_string();
    let parent = output.parent().filter(|p| !p.as_os_str().is_empty());
    let folder = parent.unwrap_or(Path::new("."));
    let what = if kind == io::ErrorKind::NotFound && !folder.is_dir() {
        "its folder does not exist"
    } else {
        what
    };
    // `afile/x.brv` with `afile` a file: name the part that is not a folder.
    if let Some(p) = parent.filter(|p| p.exists() && !p.is_dir()) {
        return Error::io(
            output,
            what,
            io::Error::new(kind, format!("{} is a file, not a folder", p.display())),
        );
    }
    Error::io(output, what, io::Error::new(kind, text))
}

/// Outputs this process has renamed into place, for the signal handler's message.
static COMPLETED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Records that `output` is complete (called with a temporary-file list held, so a
/// signal handler that has drained the lists sees every output renamed before it).
fn completed(output: &Path) {
    let mut done = COMPLETED.lock().unwrap_or_else(|e| e.into_inner());
    done.push(output.to_path_buf());
}

/// The outputs this process has renamed into place so far: for a signal handler to say
/// that an output written before the signal came is complete, rather than that nothing
/// was written. Call it after [`remove_temporary_files`].
pub fn completed_outputs() -> Vec<PathBuf> {
    COMPLETED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Temporary files this process has created and not yet renamed into place.
static LIVE_TEMPS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Temporary folders (of folder jobs) this process has created and not yet renamed into
/// place.
static LIVE_TEMP_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes every temporary output file and folder (`.brevis-*.tmp`) this process is
/// still writing and returns how many it removed. For a signal handler (SIGINT,
/// SIGTERM) that ends the process: an interrupted run then leaves nothing behind. A run
/// killed with SIGKILL cannot clean up; its temporary file or folder, named with its
/// process id, is reported by the next run's [`stale_temporaries`](crate::files::stale_temporaries).
///
/// Both lists stay locked from then on, so no thread of this process creates another
/// temporary file or folder, or renames one into place, before the caller exits (a
/// signal that came before a job made its temporary folder left one behind when the
/// locks were released here). Call it only on the way out of the process.
pub fn remove_temporary_files() -> RemovedTemporaries {
    CLEANING_UP.store(true, std::sync::atomic::Ordering::SeqCst);
    // A poisoned list is still the list: a panic elsewhere must not keep its files. Both
    // lists stay locked until the end, so no new temporary file is made and no rename
    // starts meanwhile.
    let mut files = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    let mut dirs = LIVE_TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = RemovedTemporaries::default();
    for p in files.drain(..) {
        if fs::remove_file(&p).is_ok() || !p.exists() {
            out.removed += 1;
        } else {
            out.left.push(p);
        }
    }
    // Another thread may still be writing into a folder (a copied file, a subfolder):
    // removing it fails while an entry appears behind the walk, so try again.
    for p in dirs.drain(..) {
        if (0..100).any(|_| fs::remove_dir_all(&p).is_ok() || !p.exists()) {
            out.removed += 1;
        } else {
            out.left.push(p);
        }
    }
    std::mem::forget(files);
    std::mem::forget(dirs);
    out
}

/// Set when [`remove_temporary_files`] starts: from then on a job may fail only because
/// its temporary file or folder was taken from under it.
static CLEANING_UP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`remove_temporary_files`] has started (a signal handler is removing this
/// process's temporaries on its way out). A job that fails after that may have failed
/// because its temporary vanished ("cannot open: No such file or directory"): the caller
/// should not report that error or exit with its code, but leave the exit to the signal
/// handler (128 + the signal). An error seen while this is false happened before the
/// cleanup began, so it is the job's own.
pub fn cleanup_started() -> bool {
    CLEANING_UP.load(std::sync::atomic::Ordering::SeqCst)
}

/// What [`remove_temporary_files`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemovedTemporaries {
    /// Temporary files and folders removed.
    pub removed: usize,
    /// Those that could not be removed (their folder no longer writable, say): left for
    /// the user, who should be told.
    pub left: Vec<PathBuf>,
}

/// A temporary folder beside `output`, removed on drop unless kept, and by
/// [`remove_temporary_files`] until [`rename_temp_dir`] has renamed it into place.
pub(crate) fn temp_beside_dir(output: &Path) -> Result<tempfile::TempDir> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Created while holding the list (see `temp_beside`).
    let mut live = LIVE_TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::Builder::new()
        .prefix(&temp_prefix())
        .suffix(".tmp")
        .rand_bytes(TEMP_RANDOM_CHARS)
        .tempdir_in(dir)
        .map_err(|e| temp_error(output, "cannot create a temporary folder beside it", e))?;
    live.retain(|p| p.exists());
    live.push(tmp.path().to_path_buf());
    Ok(tmp)
}

/// Renames the complete temporary folder `tmp` to `output`, holding the list that
/// [`remove_temporary_files`] (the signal handler) drains: a signal either removes the
/// folder before the rename starts or waits until it is done, so an interrupted run
/// leaves a complete output or none, and no temporary folder. On failure the temporary
/// folder is removed.
///
/// With `replace`, an existing `output` (file or folder) is first moved aside into a
/// temporary folder of its own, under the same lock, and removed only once the new
/// output is in place (or moved back if the rename fails): a signal at any moment leaves
/// the old output or the new one, never neither. (It was removed before the lock was
/// taken, so a signal in between lost both; found by a tester.)
pub(crate) fn rename_temp_dir(
    tmp: tempfile::TempDir,
    output: &Path,
    replace: bool,
) -> io::Result<()> {
    let mut live = LIVE_TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    let path = tmp.keep();
    let aside = if replace && fs::symlink_metadata(output).is_ok() {
        let parent = path.parent().unwrap_or(Path::new("."));
        // Unnumbered, unlike the other temporaries: after a SIGKILL between the two
        // renames it holds the only copy of the old output, which
        // `stale_temporaries` must never report as a stale temporary.
        let moved = tempfile::Builder::new()
            .prefix(".brevis-")
            .suffix(".tmp")
            .tempdir_in(parent)
            .and_then(|old| {
                let old = old.keep();
                match fs::rename(output, old.join("old")) {
                    Ok(()) => Ok(old),
                    Err(e) => {
                        let _ = fs::remove_dir(&old);
                        Err(e)
                    }
                }
            });
        match moved {
            Ok(old) => Some(old),
            Err(e) => {
                live.retain(|p| p != &path);
                let _ = fs::remove_dir_all(&path);
                return Err(e);
            }
        }
    } else {
        None
    };
    let renamed = fs::rename(&path, output);
    live.retain(|p| p != &path);
    if renamed.is_ok() {
        completed(output);
    }
    if let Some(old) = &aside {
        if renamed.is_ok() {
            // Removed below, or by the signal handler if one comes first.
            live.push(old.clone());
        } else {
            let _ = fs::rename(old.join("old"), output);
            let _ = fs::remove_dir(old);
        }
    }
    drop(live);
    let renamed = match renamed {
        Err(e) => {
            let _ = fs::remove_dir_all(&path);
            Err(with_left_behind(e, &path))
        }
        ok => ok,
    };
    if let (Some(old), Ok(())) = (&aside, &renamed) {
        let _ = fs::remove_dir_all(old);
        let mut live = LIVE_TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|p| p != old);
    }
    renamed
}

/// `e`, saying that the temporary `tmp` is still there if it is (its folder no longer
/// lets it be removed, say): nothing else will remove it, and nothing else says so.
fn with_left_behind(e: io::Error, tmp: &Path) -> io::Error {
    if fs::symlink_metadata(tmp).is_err() {
        return e;
    }
    io::Error::new(
        e.kind(),
        format!(
            "{e}; its temporary {} could not be removed (delete it yourself)",
            shown_path(tmp)
        ),
    )
}

/// Renames a complete, synced temporary file to `output` (replacing it only if `force`),
/// then syncs the folder so the rename is durable.
///
/// The rename holds the list that [`remove_temporary_files`] (the signal handler) drains,
/// so a signal either removes the file before the rename or waits until it is done.
pub(crate) fn persist(tmp: tempfile::NamedTempFile, output: &Path, force: bool) -> Result<()> {
    let mut live = LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    let path = tmp.path().to_path_buf();
    let result = if force {
        tmp.persist(output).map(drop)
    } else {
        tmp.persist_noclobber(output).map(drop)
    };
    live.retain(|p| p != &path);
    if result.is_ok() {
        completed(output);
    }
    drop(live);
    if let Err(tempfile::PersistError { error, file }) = result {
        // Removed now, so that a failure to remove it can be said.
        drop(file);
        return Err(
            if error.kind() == io::ErrorKind::AlreadyExists && !path.exists() {
                Error::OutputExists {
                    path: output.to_path_buf(),
                }
            } else {
                Error::io(
                    output,
                    "cannot rename into place",
                    with_left_behind(error, &path),
                )
            },
        );
    }
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Best effort: not every file system lets a folder be synced.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_record_the_process_id() {
        let name = format!("{}AbC123.tmp", temp_prefix());
        assert_eq!(temp_pid(&name), Some(std::process::id()));
        assert_eq!(temp_pid(".brevis-4242-x9Yz01.tmp"), Some(4242));
        for other in [
            ".brevis-4242-x9.tmp",
            ".brevis-4242-x9Yz012.tmp",
            ".brevis-AbC123.tmp",
            ".brevis-042-AbC123.tmp",
            ".brevis--AbC123.tmp",
            ".brevis-42-.tmp",
            ".brevis-42-a-b.tmp",
            ".brevis-42-AbC123.tmpx",
            "x.brevis-42-AbC123.tmp",
            ".brevis-99999999999-AbC123.tmp",
        ] {
            assert_eq!(temp_pid(other), None, "{other}");
        }
        assert!(!process_is_gone(std::process::id()));
    }
}
