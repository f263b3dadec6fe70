//! Temporaries that runs killed by SIGKILL left behind, found (never removed) for the
//! caller to report.

use super::temp::{owned_by_us, process_is_gone, temp_pid};
use std::fs;
use std::path::{Path, PathBuf};

/// A temporary file or folder of a killed run, found by [`stale_temporaries`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleTemporary {
    /// Its path.
    pub path: PathBuf,
    /// The process id its name records, of a process that no longer exists.
    pub pid: u32,
    /// Whether it is a folder (of a folder job) rather than a file.
    pub folder: bool,
}

/// The temporary files and folders that runs killed by SIGKILL (which cannot be caught)
/// left in the folder of `output`, for the caller to report; nothing is removed (a name
/// is no proof of what a file holds, and a folder shared with another machine can hold a
/// live run's temporary under a process id unused here). Only entries named exactly
/// `.brevis-PID-XXXXXX.tmp` (PID without leading zeros, six ASCII letters or digits:
/// the names this crate gives its temporaries) that are a file or a folder (never a
/// link), owned by this process's user, whose process no longer exists; never `input`
/// or a folder holding it. Best effort: a folder that cannot be listed gives nothing.
pub fn stale_temporaries(output: &Path, input: &Path) -> Vec<StaleTemporary> {
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let input = fs::canonicalize(input).ok();
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_pid) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let folder = meta.is_dir();
        if !(meta.is_file() || folder) || !owned_by_us(&meta) || !process_is_gone(pid) {
            continue;
        }
        let holds_input = match (&input, fs::canonicalize(&path)) {
            (Some(i), Ok(p)) => i.starts_with(p),
            _ => false,
        };
        if !holds_input {
            found.push(StaleTemporary { path, pid, folder });
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}
