//! Files as the operating system gives them, for every command and the library:
//! reading ([`input`]: regular files only, memory-mapped, guarded against truncation) and
//! safe output (temporaries beside the output, synced and renamed into place so an output
//! is never partial; removed by the signal handler of an interrupted run; a killed run's
//! leftovers found by the next one).
//!
//! This module knows files, not archives: it imports nothing from [`crate::archive`],
//! [`crate::dsl`], [`crate::codec`] or [`crate::synth`], only [`crate::error`] and
//! [`crate::shown`].
//!
//! - [`input`]: `regular_file`, `map_file`, the truncation guard, `release_pages`.
//! - [`target`]: where an output goes ([`Target`]) and the checks it passes
//!   ([`check_output`]); [`write_target`], [`write_output_file`].
//! - [`temp`]: temporary files and folders, `persist`, [`remove_temporary_files`].
//! - [`stale`]: the temporaries a killed run left ([`stale_temporaries`]).
//! - `sync_ahead`: a buffered writer that syncs in the background (`SyncAhead`).
//! - `blocks`: the archive's block writer with direct I/O (`OutputFile`).

pub(crate) mod blocks;
pub mod input;
pub mod stale;
pub(crate) mod sync_ahead;
pub mod target;
pub mod temp;

pub(crate) use blocks::{write_all_at, OutputFile};
pub(crate) use input::{map_file, map_file_with, regular_file, release_pages};
pub use stale::{stale_temporaries, StaleTemporary};
pub(crate) use sync_ahead::SyncAhead;
pub use target::{check_output, write_output_file, write_target, Target, STDOUT_LABEL};
pub(crate) use target::{check_output_of, check_replaceable, open_direct, EvictReplaced};
pub use temp::{
    cleanup_started, completed_outputs, is_temporary_name, remove_temporary_files,
    RemovedTemporaries,
};
pub(crate) use temp::{persist, rename_temp_dir, temp_beside, temp_beside_dir};
