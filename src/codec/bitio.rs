//! Bit-level I/O shared by the codecs: an LSB-first [`BitWriter`] and a checked
//! [`BitReader`], plus the integer codes the tables use (unary, Rice, Exp-Golomb).
//!
//! Bits are packed least significant first: the first bit written is bit 0 of byte 0. A
//! value of `k` bits is written with its least significant bit first. The last byte of a
//! stream is padded with zero bits; decoders reject nonzero padding so every body has one
//! encoding.
//!
//! Reading never panics: past the end of the data the reader sees zero bits, and every
//! checked read returns [`CodecError::Truncated`] instead of going past the end.

use super::CodecError;
use crate::tensor::{bits_needed, mask};

/// Appends bits LSB-first to a byte vector.
#[derive(Debug, Default)]
pub struct BitWriter {
    buf: Vec<u8>,
    /// Pending bits, the oldest in bit 0.
    acc: u64,
    /// Number of pending bits in `acc`, always < 64.
    nacc: u32,
}

impl BitWriter {
    /// An empty writer.
    pub fn new() -> BitWriter {
        BitWriter::default()
    }

    /// A writer that appends to `buf` (whose existing bytes are kept as they are).
    pub fn from_vec(buf: Vec<u8>) -> BitWriter {
        BitWriter {
            buf,
            acc: 0,
            nacc: 0,
        }
    }

    /// Reserves room for about `bytes` more bytes.
    pub fn reserve(&mut self, bytes: usize) {
        self.buf.reserve(bytes);
    }

    /// Writes the low `nbits` bits of `value` (`nbits` in 0..=64; higher bits ignored).
    #[inline]
    pub fn write(&mut self, value: u64, nbits: u32) {
        if nbits == 0 {
            return;
        }
        let value = value & mask(nbits);
        let free = 64 - self.nacc;
        self.acc |= value << self.nacc;
        if nbits < free {
            self.nacc += nbits;
        } else {
            self.buf.extend_from_slice(&self.acc.to_le_bytes());
            // `free` bits of `value` went into the flushed word; keep the rest.
            self.acc = if free == 64 { 0 } else { value >> free };
            self.nacc = nbits - free;
        }
    }

    /// Writes one bit.
    #[inline]
    pub fn write_bit(&mut self, bit: bool) {
        self.write(u64::from(bit), 1);
    }

    /// Writes `q` zero bits then a one bit (`q + 1` bits).
    pub fn write_unary(&mut self, mut q: u64) {
        while q >= 64 {
            self.write(0, 64);
            q -= 64;
        }
        // q < 64: q zeros then a one in q + 1 <= 64 bits.
        self.write(1u64 << q, q as u32 + 1);
    }

    /// Writes `v` as a Rice code with parameter `k` (`k` in 0..=63): `v >> k` in unary,
    /// then the low `k` bits. See [`rice_len`].
    pub fn write_rice(&mut self, v: u64, k: u32) {
        debug_assert!(k < 64);
        self.write_unary(v >> k);
        self.write(v, k);
    }

    /// Writes `v` as an order-`k` Exp-Golomb code (`k` in 0..=63). With `y = (v >> k) + 1`
    /// and `z = bits(y) - 1`: `z` in unary, the low `z` bits of `y`, the low `k` bits of
    /// `v`. See [`eg_len`].
    pub fn write_eg(&mut self, v: u64, k: u32) {
        debug_assert!(k < 64);
        let y = u128::from(v >> k) + 1;
        let z = 127 - y.leading_zeros();
        self.write_unary(u64::from(z));
        self.write(y as u64, z);
        self.write(v, k);
    }

    /// Number of bits written so far.
    pub fn bit_len(&self) -> u64 {
        self.buf.len() as u64 * 8 + u64::from(self.nacc)
    }

    /// Pads the last byte with zero bits and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let nbytes = self.nacc.div_ceil(8) as usize;
        self.buf
            .extend_from_slice(&self.acc.to_le_bytes()[..nbytes]);
        self.buf
    }
}

/// Length in bits of the Rice code of `v` with parameter `k` (saturating).
#[inline]
pub fn rice_len(v: u64, k: u32) -> u64 {
    (v >> k).saturating_add(1 + u64::from(k))
}

/// Length in bits of the order-`k` Exp-Golomb code of `v`.
#[inline]
pub fn eg_len(v: u64, k: u32) -> u64 {
    let y = u128::from(v >> k) + 1;
    let z = u64::from(127 - y.leading_zeros());
    2 * z + 1 + u64::from(k)
}

/// Loads up to 64 bits starting at bit `pos` of `data`, LSB-first; bits past the end of
/// `data` read as zero. At least 57 of the returned bits are from position `pos` on.
#[inline]
pub fn peek64(data: &[u8], pos: u64) -> u64 {
    let byte = usize::try_from(pos >> 3).unwrap_or(usize::MAX);
    let shift = (pos & 7) as u32;
    let word = match data.get(byte..byte.saturating_add(8)) {
        Some(s) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_le_bytes(a)
        }
        None => {
            let mut a = [0u8; 8];
            if let Some(s) = data.get(byte..) {
                a[..s.len()].copy_from_slice(s);
            }
            u64::from_le_bytes(a)
        }
    };
    word >> shift
}

/// Reads bits LSB-first from a byte slice, checking every read against its end.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: u64,
    codec: &'static str,
}

impl<'a> BitReader<'a> {
    /// A reader at bit 0 of `data`; `codec` names the codec in errors.
    pub fn new(data: &'a [u8], codec: &'static str) -> BitReader<'a> {
        BitReader {
            data,
            pos: 0,
            codec,
        }
    }

    /// The underlying bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Position in bits from the start.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Total bits in the data.
    pub fn total_bits(&self) -> u64 {
        self.data.len() as u64 * 8
    }

    /// Bits not yet read.
    pub fn bits_left(&self) -> u64 {
        self.total_bits().saturating_sub(self.pos)
    }

    /// The error for a read of `nbits` more bits that would run past the end.
    pub fn truncated(&self, nbits: u64) -> CodecError {
        CodecError::Truncated {
            codec: self.codec,
            needed: self.pos.saturating_add(nbits).div_ceil(8),
            available: self.data.len() as u64,
        }
    }

    /// An [`CodecError::Invalid`] naming this reader's codec.
    pub fn invalid(&self, what: String) -> CodecError {
        CodecError::Invalid {
            codec: self.codec,
            what,
        }
    }

    /// Reads `nbits` bits (0..=64).
    #[inline]
    pub fn read(&mut self, nbits: u32) -> Result<u64, CodecError> {
        if u64::from(nbits) > self.bits_left() {
            return Err(self.truncated(u64::from(nbits)));
        }
        if nbits <= 56 {
            let v = peek64(self.data, self.pos) & mask(nbits);
            self.pos += u64::from(nbits);
            Ok(v)
        } else {
            let lo = peek64(self.data, self.pos) & mask(32);
            let hi = peek64(self.data, self.pos + 32) & mask(nbits - 32);
            self.pos += u64::from(nbits);
            Ok(lo | hi << 32)
        }
    }

    /// Reads one bit.
    #[inline]
    pub fn read_bit(&mut self) -> Result<bool, CodecError> {
        Ok(self.read(1)? == 1)
    }

    /// Reads a unary code: counts zero bits up to and including the next one bit.
    pub fn read_unary(&mut self) -> Result<u64, CodecError> {
        let mut count = 0u64;
        loop {
            let left = self.bits_left();
            if left == 0 {
                return Err(self.truncated(1));
            }
            let valid = left.min(56) as u32;
            let w = peek64(self.data, self.pos) & mask(valid);
            if w != 0 {
                let tz = w.trailing_zeros();
                self.pos += u64::from(tz) + 1;
                return Ok(count + u64::from(tz));
            }
            count += u64::from(valid);
            self.pos += u64::from(valid);
        }
    }

    /// Reads a Rice code with parameter `k` (see [`BitWriter::write_rice`]).
    pub fn read_rice(&mut self, k: u32) -> Result<u64, CodecError> {
        check_k(self, k)?;
        let q = self.read_unary()?;
        if k > 0 && q > u64::MAX >> k {
            return Err(self.invalid(format!("rice quotient {q} overflows 64 bits")));
        }
        let low = self.read(k)?;
        Ok(q << k | low)
    }

    /// Reads an order-`k` Exp-Golomb code (see [`BitWriter::write_eg`]).
    ///
    /// A code of at most 55 bits (`k <= 24` and a prefix of at most 15 zeros: every
    /// code of a table's sets and frequencies) is read from one 64-bit load, its prefix
    /// counted by one trailing-zero count; a longer one, or one that may run past the
    /// end, is read field by field ([`BitReader::read_eg_slow`]), with the same result
    /// and the same errors.
    #[inline]
    pub fn read_eg(&mut self, k: u32) -> Result<u64, CodecError> {
        if k <= 24 {
            // Bits past the end read as zero, so a prefix that would run past it shows
            // more than 15 zeros or a length past `bits_left`: the slow path then
            // reports it.
            let w = peek64(self.data, self.pos);
            let z = w.trailing_zeros();
            if z <= 15 {
                let len = 2 * z + 1 + k;
                if u64::from(len) <= self.bits_left() {
                    let q = ((1u64 << z) | ((w >> (z + 1)) & mask(z))) - 1;
                    let low = (w >> (2 * z + 1)) & mask(k);
                    self.pos += u64::from(len);
                    return Ok(q << k | low);
                }
            }
        }
        self.read_eg_slow(k)
    }

    /// [`BitReader::read_eg`] field by field: the unary prefix, its `z` bits, then `k`.
    fn read_eg_slow(&mut self, k: u32) -> Result<u64, CodecError> {
        check_k(self, k)?;
        let z = self.read_unary()?;
        if z > 64 {
            return Err(self.invalid(format!(
                "exp-golomb prefix of {z} bits, expected at most 64"
            )));
        }
        let z = z as u32;
        let y = (1u128 << z) | u128::from(self.read(z)?);
        let q = y - 1;
        if q > u128::from(u64::MAX >> k) {
            return Err(self.invalid("exp-golomb value overflows 64 bits".into()));
        }
        let low = self.read(k)?;
        Ok((q as u64) << k | low)
    }

    /// Skips `nbits` bits.
    pub fn skip(&mut self, nbits: u64) -> Result<(), CodecError> {
        if nbits > self.bits_left() {
            return Err(self.truncated(nbits));
        }
        self.pos += nbits;
        Ok(())
    }

    /// Skips to the next byte boundary; the skipped bits must be zero.
    pub fn align_zero(&mut self) -> Result<(), CodecError> {
        let rem = (8 - (self.pos & 7) as u32) & 7;
        if self.read(rem)? != 0 {
            return Err(self.invalid("nonzero padding bits".into()));
        }
        Ok(())
    }

    /// Checks that the reader ended inside the last byte with only zero padding after it:
    /// any whole unread byte is [`CodecError::TrailingBytes`], any nonzero padding bit
    /// [`CodecError::Invalid`].
    pub fn finish(mut self) -> Result<(), CodecError> {
        let used_bytes = self.pos.div_ceil(8);
        let len = self.data.len() as u64;
        if used_bytes < len {
            return Err(CodecError::TrailingBytes {
                codec: self.codec,
                extra: len - used_bytes,
            });
        }
        self.align_zero()
    }
}

fn check_k(r: &BitReader<'_>, k: u32) -> Result<(), CodecError> {
    if k > 63 {
        return Err(r.invalid(format!("code parameter {k}, expected at most 63")));
    }
    Ok(())
}

/// Number of bits needed to store any value in `0..count` (0 when `count <= 1`).
#[inline]
pub fn bits_for_count(count: u64) -> u32 {
    bits_needed(count.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_packs_lsb_first() {
        let mut w = BitWriter::new();
        w.write(0b1, 1);
        w.write(0b10, 2);
        w.write(0b11111, 5);
        w.write(0xABC, 12);
        assert_eq!(w.bit_len(), 20);
        assert_eq!(w.finish(), vec![0b1111_1101, 0xBC, 0x0A]);
    }

    #[test]
    fn writer_crosses_words_and_full_width() {
        let mut w = BitWriter::new();
        w.write(0x7, 3);
        w.write(u64::MAX, 64);
        w.write(0, 61);
        w.write(0x1234_5678_9ABC_DEF0, 64);
        let bytes = w.finish();
        assert_eq!(bytes.len(), 24);
        let mut r = BitReader::new(&bytes, "test");
        assert_eq!(r.read(3).unwrap(), 7);
        assert_eq!(r.read(64).unwrap(), u64::MAX);
        assert_eq!(r.read(61).unwrap(), 0);
        assert_eq!(r.read(64).unwrap(), 0x1234_5678_9ABC_DEF0);
        assert_eq!(r.bits_left(), 0);
        assert!(matches!(r.read(1), Err(CodecError::Truncated { .. })));
    }

    #[test]
    fn unary_rice_eg_exact_bits() {
        let mut w = BitWriter::new();
        w.write_unary(3); // 0001
        w.write_rice(5, 1); // q=2: 001, low 1
        w.write_eg(5, 0); // y=6=110b, z=2: 001, low bits 10 -> LSB-first 0,1
        assert_eq!(w.bit_len(), 4 + 4 + 5);
        assert_eq!(rice_len(5, 1), 4);
        assert_eq!(eg_len(5, 0), 5);
        assert_eq!(eg_len(0, 0), 1);
        assert_eq!(eg_len(u64::MAX, 0), 129);
        // bits in order: 0001 001 1 001 0 1 -> byte0 = bits 0..8 = 0,0,0,1,0,0,1,1
        assert_eq!(w.finish(), vec![0b1100_1000, 0b1_0100]);
    }

    #[test]
    fn codes_round_trip_extremes() {
        let vals = [0u64, 1, 2, 3, 255, 1 << 40, u64::MAX - 1, u64::MAX];
        let mut w = BitWriter::new();
        for &v in &vals {
            for k in [0u32, 1, 7, 63] {
                w.write_eg(v, k);
                if rice_len(v, k) < 300 {
                    w.write_rice(v, k);
                }
            }
        }
        w.write_unary(200);
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes, "test");
        for &v in &vals {
            for k in [0u32, 1, 7, 63] {
                assert_eq!(r.read_eg(k).unwrap(), v);
                if rice_len(v, k) < 300 {
                    assert_eq!(r.read_rice(k).unwrap(), v);
                }
            }
        }
        assert_eq!(r.read_unary().unwrap(), 200);
        r.finish().unwrap();
    }

    /// The one-load path of `read_eg` reads what the field-by-field path reads, value
    /// and position, and fails where it fails (codes cut short at every bit).
    #[test]
    fn exp_golomb_fast_path_equals_the_slow_path() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            seed >> 11
        };
        let mut codes = Vec::new();
        for _ in 0..4000 {
            let k = (next() % 30) as u32;
            let bits = next() % 50;
            let v = next() & ((1u64 << bits) - 1);
            codes.push((v, k));
        }
        let mut w = BitWriter::new();
        for &(v, k) in &codes {
            w.write_eg(v, k);
        }
        let bytes = w.finish();
        let (mut fast, mut slow) = (
            BitReader::new(&bytes, "test"),
            BitReader::new(&bytes, "test"),
        );
        for &(v, k) in &codes {
            assert_eq!(fast.read_eg(k).unwrap(), v);
            assert_eq!(slow.read_eg_slow(k).unwrap(), v);
            assert_eq!(fast.pos, slow.pos);
        }
        // Cut short: every prefix of a few codes' bytes gives the same outcome.
        let mut w = BitWriter::new();
        for (v, k) in [(5u64, 0u32), (1000, 3), (77, 24), (1 << 20, 2)] {
            w.write_eg(v, k);
        }
        let bytes = w.finish();
        for cut in 0..=bytes.len() {
            for k in [0u32, 3, 24] {
                let (mut fast, mut slow) = (
                    BitReader::new(&bytes[..cut], "test"),
                    BitReader::new(&bytes[..cut], "test"),
                );
                for _ in 0..4 {
                    let (a, b) = (fast.read_eg(k), slow.read_eg_slow(k));
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "cut {cut} k {k}");
                    assert_eq!(fast.pos, slow.pos);
                    if a.is_err() {
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn reader_rejects_hostile_codes() {
        // 9 zero bytes: a 72-bit zero run is an exp-golomb prefix longer than 64.
        let mut bytes = vec![0u8; 9];
        bytes.push(1);
        let mut r = BitReader::new(&bytes, "test");
        assert!(matches!(r.read_eg(0), Err(CodecError::Invalid { .. })));
        let mut r = BitReader::new(&[0, 0], "test");
        assert!(matches!(r.read_unary(), Err(CodecError::Truncated { .. })));
        // Nonzero padding and trailing bytes.
        let mut r = BitReader::new(&[0b11], "test");
        r.read(1).unwrap();
        assert!(matches!(r.finish(), Err(CodecError::Invalid { .. })));
        let r = BitReader::new(&[0], "test");
        assert!(matches!(
            r.finish(),
            Err(CodecError::TrailingBytes { extra: 1, .. })
        ));
    }
}
