//! The writer of the archive that `compress` streams: blocks handed to a thread of their
//! own and written with direct I/O where the file system takes it.
//!
//! The calling thread, which also hashes the source and the records in order, only
//! copies the records into block-aligned [`BLOCK_BYTES`] buffers; a background thread
//! writes each full block and hands the buffer back, so the job waits for the disk only
//! at the end. The writes bypass the page cache (`O_DIRECT`) where they can: a buffered
//! `write` copies every byte into the page cache (about 3 GB/s on ext4 here, with pages
//! to allocate, account and later write back on a kernel thread), all of it on the two
//! cores the workers share at `--jobs 2`. `compress --jobs 2` of minilm-l6-v2-bf16 took
//! 84.3 ms with buffered writes from the calling thread and 80.6 ms so (medians of 61
//! alternated runs; the same blocks written buffered from the thread: 86.8 ms). Every
//! archive is synced before it is renamed into place (it is on disk when `brevis` says
//! so), so caching it on the way buys little, and a multi-GiB archive does not push the
//! rest out of the cache.
//!
//! Where `O_DIRECT` cannot be set, or the device refuses a write of this alignment
//! (`EINVAL`), the thread goes on with buffered writes of the same blocks and syncs the
//! file every [`SYNC_AHEAD_BYTES`], so the disk's writeback overlaps the work and the
//! final sync waits for the tail only.
//!
//! A restored checkpoint is written through the page cache instead
//! ([`super::writer::SyncAhead`]): it is usually read again soon (loaded), and direct
//! writes made `decompress --jobs 2` slower (56.8 against 63.9 ms, medians of 31).

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};

/// Alignment in bytes of each block's address, and of every direct write's file offset
/// and length: 4 KiB, the logical block size of ext4, XFS and btrfs on common devices,
/// and a multiple of every smaller one. A device that needs more refuses the write with
/// `EINVAL`, and the writer falls back to buffered writes.
const ALIGN: usize = 4096;

/// Bytes per block: each direct write is one large request, and the blocks in flight
/// ([`BLOCKS`]) stay small beside the tensors a job holds. (Blocks of 256 KiB to 2 MiB
/// gave the same speed; buffered writes of 2 MiB also leave the page cache in a shape
/// that a memory-mapped read right after keeps few pages of, see
/// [`super::writer::SyncAhead`]'s buffer.)
const BLOCK_BYTES: usize = 2 << 20;

/// Blocks in all: one being filled, one being written, one ready.
const BLOCKS: usize = 3;

/// Bytes written between two syncs in buffered mode.
const SYNC_AHEAD_BYTES: u64 = 8 << 20;

/// A block-aligned buffer of [`BLOCK_BYTES`], carved out of a slightly larger vector so
/// that no `unsafe` allocation is needed.
struct Block {
    buf: Vec<u8>,
    start: usize,
}

impl Block {
    fn new() -> Block {
        let buf = vec![0u8; BLOCK_BYTES + ALIGN];
        let start = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Block { buf, start }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + BLOCK_BYTES]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + BLOCK_BYTES]
    }
}

/// A block to write: its first `len` bytes at file offset `offset`.
struct Job {
    block: Block,
    len: usize,
    offset: u64,
}

/// Writes a new file from its start, in order (module doc). The bytes are all on the
/// file only after [`OutputFile::finish`]; dropped without it (an error path), the file
/// holds some of them and is to be discarded.
pub(crate) struct OutputFile<'a> {
    file: &'a File,
    /// The block being filled; `None` only after an error took it.
    block: Option<Block>,
    filled: usize,
    /// File offset of the current block's first byte.
    offset: u64,
    /// Blocks ready to fill.
    free: Vec<Block>,
    /// Blocks not yet made (made on first need, so a small output costs one).
    unmade: usize,
    /// The writer thread, started with the first full block (an archive of less than a
    /// block is written at [`OutputFile::finish`], buffered).
    writer: Option<Writer>,
    /// Whether the writer thread may bypass the page cache.
    try_direct: bool,
    /// No writer thread could be started: blocks are written here, buffered.
    inline: bool,
    /// The first write error (of this thread or the writer's), reported again by every
    /// later write and by `finish`.
    failed: Option<Failed>,
}

/// A write error kept to be reported again: its OS error code where it has one (so the
/// message stays "No space left on device (os error 28)"), else its kind.
#[derive(Clone, Copy, Debug)]
struct Failed(io::ErrorKind, Option<i32>);

impl Failed {
    fn of(e: &io::Error) -> Failed {
        Failed(e.kind(), e.raw_os_error())
    }

    fn again(self) -> io::Error {
        match self.1 {
            Some(code) => io::Error::from_raw_os_error(code),
            None => self.0.into(),
        }
    }
}

/// The background writer thread and its two channels.
struct Writer {
    jobs: Sender<Job>,
    done: Receiver<io::Result<Block>>,
    thread: std::thread::JoinHandle<bool>,
}

impl<'a> OutputFile<'a> {
    /// Starts writing `file` (an empty file opened for writing) at offset 0.
    pub(crate) fn new(file: &'a mut File) -> OutputFile<'a> {
        OutputFile::with_direct(file, true)
    }

    /// [`OutputFile::new`], with direct I/O tried only if `try_direct`.
    fn with_direct(file: &'a mut File, try_direct: bool) -> OutputFile<'a> {
        let file: &'a File = file;
        OutputFile {
            file,
            block: Some(Block::new()),
            filled: 0,
            offset: 0,
            free: Vec::new(),
            unmade: BLOCKS - 1,
            writer: None,
            try_direct,
            inline: false,
            failed: None,
        }
    }

    /// Hands the full current block on and takes an empty one.
    fn send_block(&mut self) -> io::Result<()> {
        let Some(block) = self.block.take() else {
            return Err(io::ErrorKind::Other.into());
        };
        let job = Job {
            block,
            len: self.filled,
            offset: self.offset,
        };
        self.offset += self.filled as u64;
        self.filled = 0;
        if self.writer.is_none() && !self.inline {
            self.writer = Writer::start(self.file, self.try_direct);
            self.inline = self.writer.is_none();
        }
        let next = match &self.writer {
            Some(w) => {
                if let Err(e) = w.jobs.send(job) {
                    // The thread is gone: its error is in `done`, or it panicked.
                    self.block = Some(e.0.block);
                    return Err(self.writer_error());
                }
                if let Some(b) = self.free.pop() {
                    b
                } else if self.unmade > 0 {
                    self.unmade -= 1;
                    Block::new()
                } else {
                    match w.done.recv() {
                        Ok(r) => r?,
                        Err(_) => return Err(self.writer_error()),
                    }
                }
            }
            None => {
                // No thread could be started: written here, buffered.
                write_all_at(self.file, &job.block.bytes()[..job.len], job.offset)?;
                job.block
            }
        };
        self.block = Some(next);
        Ok(())
    }

    /// The error of a writer thread that stopped: the one it reported, or a panic.
    fn writer_error(&mut self) -> io::Error {
        let Some(w) = self.writer.take() else {
            return io::ErrorKind::Other.into();
        };
        drop(w.jobs);
        let reported = w.done.iter().find_map(|r| r.err());
        let _ = w.thread.join();
        reported.unwrap_or_else(|| io::Error::other("the output writer thread failed"))
    }

    /// Copies `bytes` into the blocks, handing on each block that fills.
    fn push(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if let Some(f) = self.failed {
            return Err(f.again());
        }
        while !bytes.is_empty() {
            let Some(block) = self.block.as_mut() else {
                return Err(io::ErrorKind::Other.into());
            };
            let n = (BLOCK_BYTES - self.filled).min(bytes.len());
            block.bytes_mut()[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == BLOCK_BYTES {
                if let Err(e) = self.send_block() {
                    self.failed = Some(Failed::of(&e));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes what is left (the last partial block through the page cache, as a direct
    /// write must be whole blocks), waits for the writer thread and syncs the whole file
    /// (`File::sync_all`).
    ///
    /// # Errors
    /// A failed write or sync, as [`Error::io`] naming `path` ("cannot write", "cannot
    /// sync").
    pub(crate) fn finish(self, path: &Path) -> Result<()> {
        self.finish_direct(path).map(drop)
    }

    /// [`OutputFile::finish`], saying whether the blocks bypassed the page cache.
    fn finish_direct(mut self, path: &Path) -> Result<bool> {
        let write_err = |e| Error::io(path, "cannot write", e);
        if let Some(f) = self.failed {
            return Err(write_err(f.again()));
        }
        let direct = match self.writer.take() {
            Some(w) => {
                drop(w.jobs);
                let reported = w.done.iter().find_map(|r| r.err());
                let joined = w.thread.join();
                if let Some(e) = reported {
                    return Err(write_err(e));
                }
                joined.map_err(|_| write_err(io::Error::other("the writer thread panicked")))?
            }
            None => false,
        };
        if let Some(block) = &self.block {
            let tail = &block.bytes()[..self.filled];
            let whole = if direct {
                tail.len() / ALIGN * ALIGN
            } else {
                0
            };
            if whole > 0 {
                let mut r = write_all_at(self.file, &tail[..whole], self.offset);
                if matches!(&r, Err(e) if e.raw_os_error() == Some(EINVAL)) {
                    set_direct(self.file, false);
                    r = write_all_at(self.file, &tail[..whole], self.offset);
                }
                r.map_err(write_err)?;
            }
            if whole < tail.len() {
                set_direct(self.file, false);
                write_all_at(self.file, &tail[whole..], self.offset + whole as u64)
                    .map_err(write_err)?;
            }
        }
        self.file
            .sync_all()
            .map_err(|e| Error::io(path, "cannot sync", e))?;
        Ok(direct)
    }
}

impl Writer {
    /// Starts the thread on a second handle of `file` (with direct I/O if `try_direct`
    /// and the file takes it); `None` if either cannot be had.
    fn start(file: &File, try_direct: bool) -> Option<Writer> {
        let second = file.try_clone().ok()?;
        let (jobs, rx) = channel::<Job>();
        let (tx, done) = channel::<io::Result<Block>>();
        let thread = std::thread::Builder::new()
            .name("brevis-write".into())
            .spawn(move || write_blocks(&second, try_direct, &rx, &tx))
            .ok()?;
        Some(Writer { jobs, done, thread })
    }
}

/// The writer thread: writes each block it is sent and sends it back (or the error, and
/// stops). Returns whether the writes bypassed the page cache to the end.
fn write_blocks(
    file: &File,
    try_direct: bool,
    jobs: &Receiver<Job>,
    done: &Sender<io::Result<Block>>,
) -> bool {
    let mut direct = try_direct && set_direct(file, true);
    let mut synced_to = 0u64;
    for job in jobs.iter() {
        let bytes = &job.block.bytes()[..job.len];
        let mut r = write_all_at(file, bytes, job.offset);
        if direct && matches!(&r, Err(e) if e.raw_os_error() == Some(EINVAL)) {
            // The device wants another alignment: buffered from here on.
            direct = false;
            set_direct(file, false);
            synced_to = job.offset;
            r = write_all_at(file, bytes, job.offset);
        }
        let end = job.offset + job.len as u64;
        if r.is_ok() && !direct && end >= synced_to + SYNC_AHEAD_BYTES {
            synced_to = end;
            // Reported now: the final sync would not see it again (Linux reports a
            // writeback error once per open file, and this handle shares the caller's).
            r = file.sync_data();
        }
        let failed = r.is_err();
        if done.send(r.map(|()| job.block)).is_err() || failed {
            break;
        }
    }
    direct
}

const EINVAL: i32 = 22;

/// Sets or clears `O_DIRECT` on `file` (and every handle sharing its open file); whether
/// it is now set. False where there is no such flag.
fn set_direct(file: &File, on: bool) -> bool {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
        let Ok(flags) = fcntl_getfl(file) else {
            return false;
        };
        let want = if on {
            flags | OFlags::DIRECT
        } else {
            flags - OFlags::DIRECT
        };
        fcntl_setfl(file, want).is_ok() && on
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, on);
        false
    }
}

/// Writes all of `bytes` at `offset` of `file`, leaving its cursor where it was (Unix;
/// elsewhere a seek and a write).
pub(crate) fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(bytes)
    }
}

impl Write for OutputFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf)?;
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut n = 0;
        for b in bufs {
            self.push(b)?;
            n += b.len();
        }
        Ok(n)
    }

    /// Does nothing: bytes reach the file a block at a time, and the rest at
    /// [`OutputFile::finish`] (a direct write must be of whole blocks).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes that differ from block to block and from their neighbours.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 4099) as u8).collect()
    }

    /// The first `n` bytes of `r` (all if fewer), which it then no longer holds.
    fn take<'a>(r: &mut &'a [u8], n: usize) -> &'a [u8] {
        let (a, b) = r.split_at(n.min(r.len()));
        *r = b;
        a
    }

    /// `data` written through an [`OutputFile`] into a new file, in vectored writes of
    /// three pieces of varying lengths, and read back; and whether it went direct.
    fn round_trip(data: &[u8], try_direct: bool) -> (Vec<u8>, bool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.brv");
        let mut file = File::create_new(&path).unwrap();
        let mut w = OutputFile::with_direct(&mut file, try_direct);
        let mut rest = data;
        let mut k = 1usize;
        while !rest.is_empty() {
            let a = take(&mut rest, k % 5000);
            let b = take(&mut rest, k * 977 % (3 << 20));
            let c = take(&mut rest, 1);
            let n = w
                .write_vectored(&[
                    io::IoSlice::new(a),
                    io::IoSlice::new(b),
                    io::IoSlice::new(c),
                ])
                .unwrap();
            assert_eq!(n, a.len() + b.len() + c.len());
            k += 1;
        }
        let direct = w.finish_direct(&path).unwrap();
        drop(file);
        (std::fs::read(&path).unwrap(), direct)
    }

    #[test]
    fn writes_exactly_the_bytes_given_with_and_without_direct_io() {
        for len in [
            0,
            1,
            ALIGN - 1,
            ALIGN,
            ALIGN + 1,
            BLOCK_BYTES - 1,
            BLOCK_BYTES,
            BLOCK_BYTES + 1,
            3 * BLOCK_BYTES + 12_345,
            5 * BLOCK_BYTES + ALIGN,
        ] {
            let data = pattern(len);
            for try_direct in [true, false] {
                let (back, direct) = round_trip(&data, try_direct);
                assert_eq!(back.len(), len, "{len} bytes, direct tried: {try_direct}");
                assert!(back == data, "{len} bytes, direct tried: {try_direct}");
                // Less than a block never starts the writer thread: buffered.
                assert!(!direct || (try_direct && len >= BLOCK_BYTES));
            }
        }
    }

    #[test]
    fn a_failed_write_is_reported_with_its_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.brv");
        File::create_new(&path).unwrap();
        // A handle that cannot write: every write fails with EBADF.
        let mut file = File::open(&path).unwrap();
        let mut w = OutputFile::new(&mut file);
        let data = pattern(4 * BLOCK_BYTES);
        // The writer thread reports the first block's error when a later block needs
        // its buffer back, or at the end.
        let early = w.write_all(&data).err();
        let e = match w.finish(&path) {
            Err(Error::Io {
                path: p,
                what,
                source,
            }) => {
                assert_eq!(p, path);
                assert_eq!(what, "cannot write");
                source
            }
            other => panic!("expected a write error, got {other:?}"),
        };
        assert_eq!(e.raw_os_error(), Some(9), "EBADF: {e}");
        if let Some(early) = early {
            assert_eq!(early.raw_os_error(), Some(9), "EBADF: {early}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
}
