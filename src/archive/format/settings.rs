//! The search settings an index records per record (budget, limits, prior, level), read
//! and written by every format from 2 on.

use super::cursor::Cursor;
use crate::dsl::wire::Sink;

/// How the production prior of a search was chosen ([`Settings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PriorKind {
    /// Uniform production costs.
    Uniform = 0,
    /// Calibrated on the source's own tensors (docs/design.md §6).
    Calibrated = 1,
    /// Given by the user (a prior file).
    Given = 2,
}

impl PriorKind {
    /// Lowercase name (`uniform`, `calibrated`, `given`).
    pub fn name(self) -> &'static str {
        match self {
            PriorKind::Uniform => "uniform",
            PriorKind::Calibrated => "calibrated",
            PriorKind::Given => "given",
        }
    }

    fn from_u8(b: u8) -> Option<PriorKind> {
        match b {
            0 => Some(PriorKind::Uniform),
            1 => Some(PriorKind::Calibrated),
            2 => Some(PriorKind::Given),
            _ => None,
        }
    }
}

/// The search settings that built a record (version 2 keeps them in the index): the
/// expansion budget per region, the depth and node limits, and which prior ordered the
/// search, by the xxh3-64 of its JSON without its `source` note
/// ([`crate::synth::Prior::digest`]; 0 for uniform; archives written before 2026-12-03
/// hashed the note too, so theirs named the path the prior was learned from).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Settings {
    /// Expansions per region (`--budget`).
    pub budget: u64,
    /// Deepest program (`--max-depth`).
    pub max_depth: u64,
    /// Most nodes per program (`--max-nodes`).
    pub max_nodes: u64,
    /// How the prior was chosen.
    pub prior: PriorKind,
    /// [`crate::synth::Prior::digest`] of the prior; 0 for a uniform prior.
    pub prior_digest: u64,
    /// The compression level asked for (`--level`); `None` when none was (a search with
    /// limits of its own, as the TUI's) or not recorded (formats 1 to 3).
    pub level: Option<crate::synth::Level>,
}

impl Settings {
    /// The digest as 16 hex digits (what `show` and `ls --json` print).
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.prior_digest)
    }
}

/// The settings entries of a format-`version` index: their count, then each entry
/// ([`read_settings`]); a count the bytes left cannot hold is refused before anything is
/// allocated. Versions 2 to 4 read them alike.
pub(super) fn read_settings_list(
    c: &mut Cursor<'_>,
    version: u16,
) -> Result<Vec<Settings>, String> {
    let s = c.uleb()?;
    if s.saturating_mul(SETTINGS_MIN_BYTES) > c.remaining() as u64 {
        return Err(format!(
            "index claims {s} settings but has {} bytes left",
            c.remaining()
        ));
    }
    let mut settings = Vec::with_capacity(s as usize);
    for _ in 0..s {
        settings.push(read_settings(c, version)?);
    }
    Ok(settings)
}

/// Fewest bytes one settings entry of an index takes (three one-byte integers, the
/// prior kind and its 8-byte digest): bounds a count read from an index before anything
/// is allocated.
pub const SETTINGS_MIN_BYTES: u64 = 12;

/// Appends one settings entry of the index of a format-`version` archive ([`Settings`]):
/// `uleb` budget, `uleb` depth limit, `uleb` node limit, `u8` prior kind, `u64` prior
/// digest; from format 4 on preceded by the `uleb` length in bytes of the fields and
/// followed by a `u8` level ([`crate::synth::Level::number`], 0 for none), so that fields
/// added at their end later leave earlier entries readable. The one function that writes
/// an entry ([`read_settings`] reads it).
pub fn write_settings(out: &mut Vec<u8>, s: &Settings, version: u16) {
    let mut f = Vec::new();
    f.put_uleb(s.budget);
    f.put_uleb(s.max_depth);
    f.put_uleb(s.max_nodes);
    f.push(s.prior as u8);
    f.extend_from_slice(&s.prior_digest.to_le_bytes());
    if version >= 4 {
        f.push(s.level.map_or(0, crate::synth::Level::number));
        out.put_uleb(f.len() as u64);
    }
    out.extend_from_slice(&f);
}

/// Reads one settings entry of the index of a format-`version` archive, as
/// [`write_settings`] writes it. In format 4 the entry's fields are read inside its
/// length; a field added at their end (the level) is read when the entry is long enough
/// to hold it and takes its default (`None`) otherwise, and bytes past the fields this
/// build knows are refused.
///
/// # Errors
/// A sentence if the entry is cut short, names an unknown prior kind or level, or
/// (format 4) has bytes left after its fields.
pub fn read_settings(c: &mut Cursor<'_>, version: u16) -> Result<Settings, String> {
    if version >= 4 {
        let len = c.uleb()?;
        let mut e = Cursor::new(c.take(len)?, "settings entry");
        let mut s = settings_fields(&mut e)?;
        if e.remaining() > 0 {
            let n = e.u8()?;
            s.level = match n {
                0 => None,
                n => Some(
                    crate::synth::Level::ALL
                        .into_iter()
                        .find(|l| l.number() == n)
                        .ok_or_else(|| format!("unknown level {n}"))?,
                ),
            };
        }
        e.finish()?;
        return Ok(s);
    }
    settings_fields(c)
}

pub(super) fn settings_fields(c: &mut Cursor<'_>) -> Result<Settings, String> {
    let budget = c.uleb()?;
    let max_depth = c.uleb()?;
    let max_nodes = c.uleb()?;
    let kind = c.u8()?;
    let prior = PriorKind::from_u8(kind).ok_or_else(|| format!("unknown prior kind {kind}"))?;
    let prior_digest = c.u64()?;
    Ok(Settings {
        budget,
        max_depth,
        max_nodes,
        prior,
        prior_digest,
        level: None,
    })
}
