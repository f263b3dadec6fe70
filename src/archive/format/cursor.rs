//! Reading. Every function of the format takes exactly the bytes of one structure and
//! fails with a sentence (turned into `ArchiveError::Corrupt` by the reader) instead of
//! panicking; [`Cursor`] is the bounds-checked reader they share.

/// A bounds-checked reader over one structure's bytes.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    /// A cursor over `bytes`; `what` names the structure in error messages.
    pub fn new(bytes: &'a [u8], what: &'static str) -> Cursor<'a> {
        Cursor {
            bytes,
            pos: 0,
            what,
        }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn truncated(&self, needed: u64) -> String {
        format!(
            "{} truncated at byte {}: needed {needed} more bytes, {} left",
            self.what,
            self.pos,
            self.remaining()
        )
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.pos).ok_or_else(|| self.truncated(1))?;
        self.pos += 1;
        Ok(b)
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, String> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// An unsigned LEB128 integer of at most 64 bits.
    pub fn uleb(&mut self) -> Result<u64, String> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!(
            "{}: integer at byte {start} overflows 64 bits",
            self.what
        ))
    }

    /// A LEB128 integer that must fit in `usize`.
    pub fn uleb_usize(&mut self) -> Result<usize, String> {
        let start = self.pos;
        let v = self.uleb()?;
        usize::try_from(v)
            .map_err(|_| format!("{}: value {v} at byte {start} too large", self.what))
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        if n > self.remaining() as u64 {
            return Err(self.truncated(n));
        }
        let s = &self.bytes[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), String> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} has {} unexpected bytes after byte {}",
                self.what,
                self.remaining(),
                self.pos
            ))
        }
    }
}
