//! Files read: regular files only (never a FIFO or device), memory-mapped, with a guard
//! against a mapped file truncated by another process while it is read, and pages
//! released once read.

use std::fs::File;

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
    map_file_with(file, false)
}

/// [`map_file`], its pages mapped in advance when `populate` (`MAP_POPULATE`: one
/// system call instead of a page fault every 4 KiB, for a file read whole at once).
pub(crate) fn map_file_with(file: &File, populate: bool) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only and private to this process. Memory-mapped reads
    // are only sound while no other process truncates or rewrites the file; we cannot
    // prevent that, as every mmap-based tool cannot. A concurrent change can at worst
    // make us read changed bytes (caught by the stored checksums and the input's
    // modification time) or fault on truncation (see [`truncation`]); the output is
    // written to a separate temporary file either way.
    let mut options = memmap2::MmapOptions::new();
    if populate {
        options.populate();
    }
    let map = unsafe { options.map(file) }?;
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
