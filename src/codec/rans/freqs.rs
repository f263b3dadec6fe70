//! The table of a body as written: the frequencies in their mode, and the table read
//! back and checked against `(width, n)`.

use super::model::FreqMode;
use super::model::{adaptive_k, freq_deltas, unzigzag};
use super::{MAX_SCALE_BITS, NAME};

use crate::codec::bitio::{BitReader, BitWriter};
use crate::codec::table::{check_width, read_count, read_set};
use crate::codec::CodecError;

/// Writes `freqs` (each `f >= 1`) as `mode` says: the 2-bit mode, its parameter, the
/// values (see the module docs, table item 3).
pub(in crate::codec) fn write_freqs(w: &mut BitWriter, freqs: &[u32], mode: FreqMode) {
    match mode {
        FreqMode::Fixed(bits) => {
            w.write(0, 2);
            w.write(u64::from(bits), 5);
            for &f in freqs {
                w.write(u64::from(f - 1), bits);
            }
        }
        FreqMode::ExpGolomb(k) => {
            w.write(1, 2);
            w.write(u64::from(k), 4);
            for &f in freqs {
                w.write_eg(u64::from(f - 1), k);
            }
        }
        FreqMode::Adaptive => {
            w.write(2, 2);
            let mut prev = 0;
            for &f in freqs {
                w.write_eg(u64::from(f - 1), adaptive_k(prev));
                prev = u64::from(f - 1);
            }
        }
        FreqMode::Delta(k) => {
            w.write(3, 2);
            w.write(u64::from(k), 4);
            for z in freq_deltas(freqs) {
                w.write_eg(z, k);
            }
        }
    }
}

/// Reads `m` frequencies written by [`write_freqs`] that must sum to exactly `2^scale`
/// (`scale <= 16`).
///
/// # Errors
/// A truncated table, a frequency width over 16, a value that does not fit, or a sum
/// other than `2^scale`.
pub(in crate::codec) fn read_freqs(
    r: &mut BitReader<'_>,
    m: usize,
    scale: u32,
) -> Result<Vec<u32>, CodecError> {
    let total = 1u64 << scale;
    let mode = r.read(2)?;
    let param = match mode {
        0 => r.read(5)? as u32,
        1 | 3 => r.read(4)? as u32,
        _ => 0,
    };
    if mode == 0 && param > MAX_SCALE_BITS {
        return Err(r.invalid(format!("frequency width {param}, expected at most 16")));
    }
    let mut freqs = Vec::with_capacity(m);
    let mut sum = 0u64;
    let mut prev = 0u64; // previous f - 1
    for _ in 0..m {
        let v = match mode {
            0 => r.read(param)?,
            1 => r.read_eg(param)?,
            2 => r.read_eg(adaptive_k(prev))?,
            _ => {
                let d = unzigzag(r.read_eg(param)?);
                let v = i64::try_from(prev).ok().and_then(|p| p.checked_add(d));
                match v.and_then(|v| u64::try_from(v).ok()) {
                    Some(v) => v,
                    None => return Err(r.invalid("negative frequency".into())),
                }
            }
        };
        if v >= total {
            return Err(r.invalid(format!(
                "frequency {}, expected below {total}",
                u128::from(v) + 1
            )));
        }
        prev = v;
        sum += v + 1;
        if sum > total {
            return Err(r.invalid(format!("frequencies exceed the total {total}")));
        }
        freqs.push(v as u32 + 1);
    }
    if sum != total {
        return Err(r.invalid(format!("frequencies sum to {sum}, expected {total}")));
    }
    Ok(freqs)
}

/// The parsed table of a body.
pub(super) struct Table {
    pub(super) syms: Vec<u64>,
    pub(super) freqs: Vec<u32>,
    pub(super) scale: u32,
    /// Bytes of the table, padding included.
    pub(super) bytes: usize,
}

pub(super) fn read_table(
    body: &[u8],
    width: u32,
    n: usize,
    name: &'static str,
) -> Result<Table, CodecError> {
    let mut r = BitReader::new(body, name);
    let m = read_count(&mut r, width, n)?;
    let syms = read_set(&mut r, m, width)?;
    if m <= 1 {
        r.finish()?;
        return Ok(Table {
            syms,
            freqs: Vec::new(),
            scale: 0,
            bytes: body.len(),
        });
    }
    let scale = r.read(4)? as u32 + 1;
    if (1u64 << scale) < m as u64 {
        return Err(r.invalid(format!(
            "{m} symbols cannot share a total frequency of {}",
            1u64 << scale
        )));
    }
    let freqs = read_freqs(&mut r, m, scale)?;
    r.align_zero()?;
    Ok(Table {
        syms,
        freqs,
        scale,
        bytes: (r.position() / 8) as usize,
    })
}

/// Bytes of the table (count, symbol set, precision, frequencies, padding) at the start
/// of `body`.
///
/// # Errors
/// When the table itself is invalid or truncated.
pub fn table_bytes(body: &[u8], width: u32, n: usize) -> Result<u64, CodecError> {
    check_width(width, NAME)?;
    Ok(read_table(body, width, n, NAME)?.bytes as u64)
}
