//! A buffered file writer that has a background thread sync what it holds so far, so
//! the disk's writeback overlaps the work and the final sync waits for the tail only.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Bytes [`SyncAhead`] gathers before a write; a record larger than this is written
/// whole, in one vectored write ([`write_record`]). How a file was written shapes its page
/// cache, and so what a memory-mapped read of it right after (decompress, verify) keeps
/// resident: the same 1 GiB archive copied with `dd` in writes of 0.5 or 1 MiB and then
/// decompressed peaked at 200 and 321 MiB, in writes of 128 KiB or of 2 MiB to 64 MiB
/// at 90 to 103 MiB (Linux 6.18, ext4); writing its 48 MiB records piece by piece
/// through this buffer made `scripts/memory_bench.sh`'s 4 GiB decompress peak at 436 MiB.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Bytes written between two background flushes of [`SyncAhead`].
const SYNC_AHEAD_BYTES: u64 = 8 << 20;

/// Writes to a file through a 1 MiB buffer and, every [`SYNC_AHEAD_BYTES`], has a
/// background thread flush what the file holds so far to the disk (`File::sync_data` on
/// a second handle), so that the disk's writeback overlaps the encoding or decoding and
/// the sync before the rename waits for the tail only. (On minilm-l6-v2-bf16 that final
/// sync alone had taken 22 ms of a 0.15 s decompression.)
pub(crate) struct SyncAhead<'a> {
    out: BufWriter<&'a mut File>,
    written: u64,
    next: u64,
    tx: Option<std::sync::mpsc::Sender<()>>,
    /// Returns the first error of its syncs: reported by [`SyncAhead::finish`], as the
    /// final sync no longer sees it (Linux reports a writeback error once per open file,
    /// and the thread's handle shares this one's).
    thread: Option<std::thread::JoinHandle<Option<io::Error>>>,
}

impl<'a> SyncAhead<'a> {
    /// Wraps `file`; without a second handle or a thread it only buffers. Dropped
    /// without [`SyncAhead::finish`] (an error path), it stops the thread by dropping
    /// the sender, without waiting for a flush.
    pub(crate) fn new(file: &'a mut File) -> SyncAhead<'a> {
        let (tx, thread) = match file.try_clone() {
            Ok(second) => {
                let (tx, rx) = std::sync::mpsc::channel::<()>();
                let spawned = std::thread::Builder::new()
                    .name("brevis-sync".into())
                    .spawn(move || {
                        while rx.recv().is_ok() {
                            // Requests that came in meanwhile are served by this flush.
                            while rx.try_recv().is_ok() {}
                            if let Err(e) = second.sync_data() {
                                return Some(e);
                            }
                        }
                        None
                    });
                match spawned {
                    Ok(t) => (Some(tx), Some(t)),
                    Err(_) => (None, None),
                }
            }
            Err(_) => (None, None),
        };
        SyncAhead {
            out: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            written: 0,
            next: SYNC_AHEAD_BYTES,
            tx,
            thread,
        }
    }

    /// Writes out the buffer, stops the background thread and syncs the whole file
    /// (`File::sync_all`).
    ///
    /// # Errors
    /// A failed write or sync, as [`Error::io`] naming `path` ("cannot write", "cannot
    /// sync").
    pub(crate) fn finish(mut self, path: &Path) -> Result<()> {
        self.out
            .flush()
            .map_err(|e| Error::io(path, "cannot write", e))?;
        self.tx = None;
        if let Some(t) = self.thread.take() {
            if let Ok(Some(e)) = t.join() {
                return Err(Error::io(path, "cannot sync", e));
            }
        }
        self.out
            .get_ref()
            .sync_all()
            .map_err(|e| Error::io(path, "cannot sync", e))
    }
}

impl SyncAhead<'_> {
    /// Counts `n` more bytes written; past the next mark, asks for a background flush.
    fn wrote(&mut self, n: usize) {
        self.written += n as u64;
        if self.written >= self.next {
            self.next = self.written + SYNC_AHEAD_BYTES;
            if let Some(tx) = &self.tx {
                let _ = tx.send(());
            }
        }
    }
}

impl Write for SyncAhead<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.wrote(n);
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let n = self.out.write_vectored(bufs)?;
        self.wrote(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
