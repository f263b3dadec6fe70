//! The `.brv` archive (DESIGN §7, §8; paper §3.4): restores a `.safetensors` file byte
//! for byte from one program per tensor.
//!
//! - [`safetensors`]: the strict source file model ([`safetensors::parse`]).
//! - [`format`](mod@format): the archive layout, documented in its module doc.
//! - [`writer`]: [`compress_file`] (and [`writer::write_archive`] to any `Write`).
//! - [`reader`]: [`Archive::open`], listing, per-tensor decoding, [`Archive::decompress_to`].
//! - [`extract`](mod@extract): a `.safetensors` file of some tensors, decoded through the index.
//! - [`verify`](mod@verify): [`verify()`] against the stored checksums, [`verify_against`] a file.
//!
//! Files are memory-mapped; tensors are compressed and decoded in parallel on a rayon
//! pool of `jobs` threads, with a bounded window of regions in flight, and written in
//! source order, so the output bytes never depend on the number of threads.
//!
//! ```no_run
//! use brevis::archive::{compress_file, no_progress, verify, Archive, CompressOptions};
//! use std::path::Path;
//!
//! # fn main() -> brevis::Result<()> {
//! let opts = CompressOptions::default();
//! compress_file(Path::new("model.safetensors"), Path::new("model.brv"), &opts, &no_progress)?;
//! let archive = Archive::open(Path::new("model.brv"))?;
//! for t in archive.tensors() {
//!     println!("{} {} -> {} bytes ({})", t.name, t.original_bytes(), t.archive_bytes(), t.root_op);
//! }
//! assert!(verify(&archive, None, &no_progress)?.is_ok());
//! # Ok(())
//! # }
//! ```

pub mod base;
pub mod extract;
pub mod folder;
pub mod format;
mod output;
pub mod reader;
#[cfg(feature = "object-store")]
pub mod remote;
pub mod rewrite;
pub mod safetensors;
pub mod slice;
mod stream;
pub mod verify;
pub mod writer;

pub use extract::{extract, ExtractSummary, Part};
pub use reader::{
    Archive, DamagedRegion, DecompressOptions, DecompressSummary, GapEntry, GroupEntry, RegionSpan,
    TensorEntry,
};
pub use rewrite::{rewrite_with_each, rewrite_with_programs, rewritten_len};
pub use slice::TensorPart;
pub use verify::{
    verify, verify_against, verify_until, CheckStatus, CompareReport, RegionCheck, VerifyReport,
};
pub use writer::{
    compress_file, compress_to, write_target, CompressOptions, CompressSummary, RegionStat, Source,
    Target,
};

use crate::tensor::{WordBuf, Words};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Progress of a long operation, reported in file order from the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressEvent<'a> {
    /// Work starts: `items` regions holding `bytes` bytes of the original file.
    Begin {
        /// Number of regions (header, tensors, gaps).
        items: usize,
        /// Original bytes in all regions.
        bytes: u64,
    },
    /// One region is done.
    Item {
        /// Its label (a tensor name, `(header)` or `(gap)`); may hold control characters.
        label: &'a str,
        /// Its original bytes.
        bytes: u64,
    },
    /// All regions are done.
    End,
}

/// A progress callback that ignores every event.
pub fn no_progress(_: ProgressEvent<'_>) {}

/// The metadata of `path` (symbolic links followed) when it is a regular file, checked
/// before the file is opened: opening a FIFO for reading blocks until a writer comes,
/// and a device reads as an endless or empty file.
///
/// # Errors
/// [`crate::Error::Io`] naming `path`: it cannot be read, is a folder, or is not a
/// regular file (a pipe, socket or device).
pub(crate) fn regular_file(path: &std::path::Path) -> crate::Result<std::fs::Metadata> {
    let meta = std::fs::metadata(path).map_err(|e| crate::Error::io(path, "cannot open", e))?;
    if meta.is_dir() {
        return Err(crate::Error::io(
            path,
            "cannot read",
            std::io::Error::other("is a directory"),
        ));
    }
    if !meta.is_file() {
        return Err(crate::Error::io(
            path,
            "cannot read",
            std::io::Error::other("is not a regular file (a pipe, socket or device)"),
        ));
    }
    Ok(meta)
}

/// Memory-maps a whole file for reading. The file must not be empty.
///
/// # Errors
/// The operating system's error if the mapping fails.
pub(crate) fn map_file(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only and private to this process. Memory-mapped reads
    // are only sound while no other process truncates or rewrites the file; we cannot
    // prevent that, as every mmap-based tool cannot. A concurrent change can at worst
    // make us read changed bytes (caught by the stored checksums and the input's
    // modification time) or fault on truncation (see [`truncation`]); the output is
    // written to a separate temporary file either way.
    let map = unsafe { memmap2::Mmap::map(file) }?;
    #[cfg(unix)]
    truncation::register(map.as_ptr() as usize, map.len());
    Ok(map)
}

/// Reading a mapped file that another process truncates raises SIGBUS at the first page
/// past its new end, which would kill the process with no message and leave its
/// temporary output behind. With [`install_truncation_guard`], such a page is replaced
/// by a page of zeros and the read goes on; the job then fails through its ordinary
/// checks (a compressed input's length no longer matches, a truncated archive's records
/// no longer decode or match their checksums), its temporary output is removed, and
/// [`truncated_while_read`] says why.
#[cfg(unix)]
pub mod truncation {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Mapped ranges remembered (the most recent ones; a job maps a few files).
    const SLOTS: usize = 64;
    static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
    static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    static FAULTED: AtomicBool = AtomicBool::new(false);

    /// Remembers that bytes `start .. start + len` map a file.
    pub(crate) fn register(start: usize, len: usize) {
        if PAGE.load(Ordering::Relaxed) == 0 {
            PAGE.store(rustix::param::page_size(), Ordering::Relaxed);
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
        LENS[i].store(0, Ordering::Release);
        STARTS[i].store(start, Ordering::Release);
        LENS[i].store(len, Ordering::Release);
    }

    /// For a SIGBUS handler: if `addr` lies in a mapped file, maps a page of zeros over
    /// its page and returns true (returning from the handler then repeats the read,
    /// which succeeds); false for any other address. Async-signal-safe: atomics and
    /// one `mmap` system call.
    pub fn patch(addr: usize) -> bool {
        let page = PAGE.load(Ordering::Relaxed);
        let ours = (0..SLOTS).any(|i| {
            let (s, l) = (
                STARTS[i].load(Ordering::Acquire),
                LENS[i].load(Ordering::Acquire),
            );
            l > 0 && s <= addr && addr - s < l
        });
        if !ours || page == 0 {
            return false;
        }
        let at = (addr & !(page - 1)) as *mut std::ffi::c_void;
        // SAFETY: the page lies inside a read-only private mapping of a file that this
        // process only reads; replacing it with zeros changes what is read there (which
        // the job's checks then refuse), never memory that Rust owns.
        let mapped = unsafe {
            rustix::mm::mmap_anonymous(
                at,
                page,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED,
            )
        };
        if mapped.is_ok() {
            FAULTED.store(true, Ordering::Relaxed);
        }
        mapped.is_ok()
    }

    /// Whether a mapped file was found truncated while it was read ([`patch`]).
    pub fn faulted() -> bool {
        FAULTED.load(Ordering::Relaxed)
    }
}

/// Installs the SIGBUS handler of [`truncation`] (Unix, for the command-line programs):
/// a read past the end of a mapped file that shrank reads zeros instead of killing the
/// process. Any other SIGBUS keeps its default action.
///
/// The handler replaces std's (which reports stack overflows, and on Linux those raise
/// SIGSEGV) rather than chaining to it: std's resets SIGBUS to its default action for
/// any fault that is not a stack overflow, so the next truncated page would kill.
#[cfg(all(unix, any(feature = "cli", feature = "tui")))]
pub fn install_truncation_guard() {
    extern "C" fn on_sigbus(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _context: *mut std::ffi::c_void,
    ) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let addr = unsafe { (*info).si_addr() } as usize;
        if !truncation::patch(addr) {
            // Not a mapped file: back to the default action, which the repeated fault
            // then takes (terminate with a core dump).
            // SAFETY: `signal` is async-signal-safe.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    }
    // SAFETY: a zeroed sigaction is a valid value to fill in; the handler is
    // async-signal-safe (atomics and system calls only).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// Makes a write past the file-size limit (`ulimit -f`) fail with `EFBIG` ("File too
/// large") instead of killing the process with SIGXFSZ: the job then fails as on a full
/// disk, with a message naming the file, its temporary removed and the terminal put back
/// (killed, `brevis` exited 153 without a word, `--json` printed nothing, and both
/// binaries left their temporaries behind). Call once at start-up.
#[cfg(all(unix, any(feature = "cli", feature = "tui")))]
pub fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN runs no code of ours in a handler.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
}

/// Whether a file this process mapped was truncated while it was read (see
/// [`truncation`]): an error then says so, since the zeros read in its place are what
/// made the job fail.
pub fn truncated_while_read() -> bool {
    #[cfg(unix)]
    return truncation::faulted();
    #[cfg(not(unix))]
    false
}

/// Drops the pages of `part`, a slice of `map`, from this process's resident set once
/// they are no longer needed, so that memory does not grow with the file's size. The
/// bytes stay readable (a later read faults them in again from the file).
pub(crate) fn release_pages(map: &memmap2::Mmap, part: &[u8]) {
    let base = map.as_ptr() as usize;
    let start = part.as_ptr() as usize;
    if part.is_empty() || start < base || start - base + part.len() > map.len() {
        return;
    }
    #[cfg(unix)]
    {
        // SAFETY: `map` is a read-only, private mapping of a file that this process never
        // writes through, so MADV_DONTNEED discards no data: the pages are simply
        // unmapped from the resident set and reloaded from the file if read again. The
        // range lies inside the mapping (checked above).
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start - base, part.len())
        };
    }
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

/// Most worker threads any job starts, whatever `--jobs` asks for: more only adds
/// memory in flight and scheduling cost.
pub const MAX_JOBS: usize = 256;

/// Number of worker threads for `jobs` (`None` or `Some(0)` = all cores), at most
/// [`MAX_JOBS`].
pub fn resolve_jobs(jobs: Option<usize>) -> usize {
    match jobs {
        Some(n) if n > 0 => n.min(MAX_JOBS),
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The worker threads a job runs on: a pool of its own, or the rayon pool the calling
/// thread already works in when that pool has exactly the threads asked for (a job run
/// from inside a pool, such as the fuzz targets' single-threaded one, starts no thread).
pub(crate) enum Pool {
    /// A pool made for the job, whose threads end with it.
    Own(rayon::ThreadPool),
    /// The pool the calling thread is a worker of.
    Current,
}

impl Pool {
    /// Runs `op` on the pool.
    pub(crate) fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        match self {
            Pool::Own(p) => p.install(op),
            Pool::Current => op(),
        }
    }

    /// A scope of the pool whose owner is the calling thread ([`rayon::in_place_scope`]).
    pub(crate) fn in_place_scope<'scope, R>(
        &self,
        op: impl FnOnce(&rayon::Scope<'scope>) -> R,
    ) -> R {
        match self {
            Pool::Own(p) => p.in_place_scope(op),
            Pool::Current => rayon::in_place_scope(op),
        }
    }

    /// Receives the next message of `rx`, sent by jobs spawned on the pool. A thread
    /// outside the pool just waits; on [`Pool::Current`] the calling thread, a worker of
    /// the pool, runs the pool's pending jobs meanwhile, as the jobs it waits for may be
    /// queued behind it (on a pool of one thread, only it can run them).
    pub(crate) fn recv<T>(
        &self,
        rx: &std::sync::mpsc::Receiver<T>,
    ) -> Result<T, std::sync::mpsc::RecvError> {
        use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
        if let Pool::Own(_) = self {
            return rx.recv();
        }
        loop {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            if rayon::yield_now() != Some(rayon::Yield::Executed) {
                // Nothing queued here: the jobs run on other threads of the pool.
                match rx.recv_timeout(std::time::Duration::from_micros(200)) {
                    Ok(v) => return Ok(v),
                    Err(RecvTimeoutError::Disconnected) => return Err(RecvError),
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        }
    }

    /// Its number of threads.
    pub(crate) fn current_num_threads(&self) -> usize {
        match self {
            Pool::Own(p) => p.current_num_threads(),
            Pool::Current => rayon::current_num_threads(),
        }
    }
}

/// The pool of `jobs` threads for a job: the calling thread's own rayon pool when it
/// works in one of exactly `jobs` threads ([`Pool::Current`]), else a new one.
///
/// # Errors
/// A sentence if the threads cannot be started.
pub(crate) fn build_pool(jobs: usize) -> Result<Pool, String> {
    if rayon::current_thread_index().is_some() && rayon::current_num_threads() == jobs {
        return Ok(Pool::Current);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .thread_name(|i| format!("brevis-{i}"))
        .build()
        .map(Pool::Own)
        .map_err(|e| format!("cannot start {jobs} worker threads: {e}"))
}

/// Items in flight per worker thread. Memory is bounded by the byte budget of
/// [`ordered_pipeline_bounded`]; this only caps the count of small items. It is large
/// because the items are handed on in order by the calling thread: while it writes a
/// large record (a 23 MB embedding matrix takes tens of milliseconds), the workers go
/// on with every later item the budget admits. With 3 per thread they ran out of work
/// there (`compress --jobs 2` of minilm: 285 -> 256 ms, median of 30).
const WINDOW_PER_THREAD: usize = 256;

/// Runs `work(i)` for `i` in `0..count` on `pool`, at most a window of items in flight,
/// and hands each result to `sink` in index order on the calling thread. Stops at the
/// first error (of `work` or `sink`); a panic in `work` becomes `panicked(i)`.
#[cfg(test)]
pub(crate) fn ordered_pipeline<T: Send, E: Send>(
    pool: &Pool,
    count: usize,
    work: impl Fn(usize) -> Result<T, E> + Sync,
    sink: impl FnMut(usize, T) -> Result<(), E>,
    panicked: impl Fn(usize) -> E,
) -> Result<(), E> {
    ordered_pipeline_bounded(pool, count, |_| 0, 0, work, sink, panicked)
}

/// [`ordered_pipeline`] that also bounds the bytes in flight: item `i` weighs `cost(i)`
/// bytes (e.g. the source bytes it encodes), and an item is started only while the items
/// started and not yet handed to `sink` weigh at most `budget` bytes with it (an item
/// heavier than that starts alone).
pub(crate) fn ordered_pipeline_bounded<T: Send, E: Send>(
    pool: &Pool,
    count: usize,
    cost: impl Fn(usize) -> u64,
    budget: u64,
    work: impl Fn(usize) -> Result<T, E> + Sync,
    mut sink: impl FnMut(usize, T) -> Result<(), E>,
    panicked: impl Fn(usize) -> E,
) -> Result<(), E> {
    let window = pool.current_num_threads().max(1) * WINDOW_PER_THREAD;
    let mut in_flight = 0u64;
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<Result<T, E>>)>();
    let work = &work;
    let stop_ref = &stop;
    pool.in_place_scope(|scope| {
        let mut next_submit = 0usize;
        let mut next_sink = 0usize;
        // Results wait here until every earlier one has been handed on, so the first
        // error reported is the first in index order, whatever the thread count.
        let mut ready: BTreeMap<usize, Option<Result<T, E>>> = BTreeMap::new();
        let result = (|| {
            while next_sink < count {
                while next_submit < count && next_submit - next_sink < window {
                    let weight = cost(next_submit);
                    if next_submit > next_sink && in_flight.saturating_add(weight) > budget {
                        break;
                    }
                    in_flight = in_flight.saturating_add(weight);
                    let tx = tx.clone();
                    let i = next_submit;
                    scope.spawn(move |_| {
                        if stop_ref.load(Ordering::Relaxed) {
                            let _ = tx.send((i, None));
                            return;
                        }
                        let r = catch_unwind(AssertUnwindSafe(|| work(i))).ok();
                        let _ = tx.send((i, r));
                    });
                    next_submit += 1;
                }
                // A sender lives in this frame, so `recv` only returns a message; every
                // spawned task sends exactly one.
                let Ok((i, r)) = pool.recv(&rx) else {
                    return Err(panicked(next_sink));
                };
                ready.insert(i, r);
                while let Some(r) = ready.remove(&next_sink) {
                    match r {
                        Some(Ok(v)) => {
                            sink(next_sink, v)?;
                            in_flight = in_flight.saturating_sub(cost(next_sink));
                        }
                        Some(Err(e)) => return Err(e),
                        None => return Err(panicked(next_sink)),
                    }
                    next_sink += 1;
                }
            }
            Ok(())
        })();
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        result
    })
}

/// The words as little-endian bytes of their container (8, 16, 32 or 64 bits), reusing
/// the buffer for bytes.
pub(crate) fn words_into_le_bytes(words: Words) -> Vec<u8> {
    fn go<const N: usize, T: Copy>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * N];
        for (c, &x) in out.chunks_exact_mut(N).zip(v) {
            c.copy_from_slice(&f(x));
        }
        out
    }
    match words.into_buf() {
        WordBuf::U8(v) => v,
        WordBuf::U16(v) => go(&v, u16::to_le_bytes),
        WordBuf::U32(v) => go(&v, u32::to_le_bytes),
        WordBuf::U64(v) => go(&v, u64::to_le_bytes),
    }
}

/// A tensor name made safe to print on a terminal: control characters (C0, DEL, C1) and
/// backslashes are escaped (`\n`, `\x1b`, `\u{9b}`, `\\`), and so are the bidirectional
/// formatting characters that reorder the text after them (`\u{202e}`, ...); everything
/// else is kept.
pub fn escape_name(name: &str) -> Cow<'_, str> {
    if !name
        .chars()
        .any(|c| c.is_control() || c == '\\' || is_bidi(c))
    {
        return Cow::Borrowed(name);
    }
    let mut s = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '\0' => s.push_str("\\0"),
            c if (c as u32) < 0x80 && c.is_control() => {
                s.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || is_bidi(c) => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => s.push(c),
        }
    }
    Cow::Owned(s)
}

/// A path made safe to print on a terminal, as [`escape_name`] makes a tensor name (its
/// text lossy where it is not UTF-8): a file name holding an escape sequence, a bell or
/// a line break cannot recolour the terminal or fake a line of output.
pub fn shown_path(path: &std::path::Path) -> String {
    escape_name(&path.to_string_lossy()).into_owned()
}

/// Bidirectional formatting characters (marks, embeddings, overrides, isolates).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_name_neutralises_terminal_controls() {
        assert_eq!(escape_name("a.weight"), "a.weight");
        assert_eq!(
            escape_name("x\u{1b}]0;t\u{7}\u{9b}2J\0\\"),
            "x\\x1b]0;t\\x07\\u{9b}2J\\0\\\\"
        );
        assert_eq!(escape_name("a\u{202e}b\u{2066}"), "a\\u{202e}b\\u{2066}");
    }

    #[test]
    fn pipeline_keeps_order_for_any_thread_count() {
        for threads in [1, 2, 3] {
            let pool = build_pool(threads).unwrap();
            let mut seen = Vec::new();
            ordered_pipeline(
                &pool,
                50,
                |i| Ok::<_, String>(i * 2),
                |i, v| {
                    assert_eq!(v, i * 2);
                    seen.push(i);
                    Ok(())
                },
                |i| format!("panic {i}"),
            )
            .unwrap();
            assert_eq!(seen, (0..50).collect::<Vec<_>>());
        }
        let pool = build_pool(2).unwrap();
        let r = ordered_pipeline(
            &pool,
            20,
            |i| {
                if i == 7 {
                    Err(format!("bad {i}"))
                } else {
                    Ok(i)
                }
            },
            |_, _| Ok(()),
            |i| format!("panic {i}"),
        );
        assert_eq!(r, Err("bad 7".to_string()));
    }

    #[test]
    fn words_to_bytes_is_little_endian() {
        let w = Words::from_u64s(16, &[0x0102, 0xa0b0]);
        assert_eq!(words_into_le_bytes(w), vec![2, 1, 0xb0, 0xa0]);
    }
}
