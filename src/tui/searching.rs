//! The search of one record as `brevis compress` does it, for the Search and Sweep views:
//! the tensor's words (or its group's) in the regions `compress` cuts, each with the
//! budget; a group's program is the smaller of one program for the group's words and a
//! concat of each tensor's own.

use super::model::{Sharing, Source};
use crate::archive::format::PriorKind;
use crate::dsl::{program_len, Node};
use crate::synth::{synthesize_in_regions, Prior, SearchOptions, Synthesis};
use std::sync::Arc;

/// The prior a search job uses, resolved on the UI thread where it can fail in the form.
#[derive(Clone, Debug)]
pub enum PriorRequest {
    /// Uniform production costs.
    Uniform,
    /// Learned from a few of the archive's tensors on the worker ([`calibrate_on`]).
    Calibrate,
    /// A prior at hand (from a file, or edited in the Prior view), with its name and the
    /// kind the archive records for it.
    Given(Arc<Prior>, String, PriorKind),
}

impl PriorRequest {
    /// The prior, its name for the screen and the kind recorded for it, calibrating on
    /// `source` if asked (which can be cancelled: `Err("cancelled")`).
    ///
    /// # Errors
    /// When calibrating fails to decode a tensor, or is cancelled.
    pub fn resolve(
        self,
        source: &dyn Source,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Arc<Prior>, String, PriorKind), String> {
        Ok(match self {
            PriorRequest::Uniform => (
                Arc::new(Prior::uniform()),
                "uniform".to_string(),
                PriorKind::Uniform,
            ),
            PriorRequest::Given(p, name, kind) => (p, name, kind),
            PriorRequest::Calibrate => (
                Arc::new(calibrate_on(source, cancelled)?),
                "calibrated".to_string(),
                PriorKind::Calibrated,
            ),
        })
    }
}

/// A prior learned from a few of the source's tensors, as `brevis compress` learns one
/// from its input ([`crate::synth::calibrate`] with the paper's defaults): the tensors it
/// picks are decoded from the archive.
///
/// # Errors
/// When a picked tensor cannot be decoded, or `cancelled` says stop (`"cancelled"`).
pub fn calibrate_on(source: &dyn Source, cancelled: &dyn Fn() -> bool) -> Result<Prior, String> {
    use crate::synth::calibrate::{calibrate, pick, CalibrateOptions, Tensor};
    let rows = source.rows();
    let tensors: Vec<Tensor> = rows
        .iter()
        .map(|r| Tensor {
            name: &r.name,
            dtype: r.dtype,
            words: (r.original_bytes * 8 / u64::from(r.dtype.word_bits())) as usize,
        })
        .collect();
    let opts = CalibrateOptions::default();
    // Decode the picked tensors up front (the loader must not fail).
    let mut loaded = std::collections::HashMap::new();
    for i in pick(&tensors, opts.max_tensors) {
        if cancelled() {
            return Err("cancelled".into());
        }
        let bytes = source.decode(i)?;
        let words = super::model::words_of(rows[i].dtype, &bytes)
            .ok_or_else(|| format!("tensor {:?}: bytes are not whole words", rows[i].name))?;
        loaded.insert(i, words);
    }
    let load = |i: usize, n: usize| match loaded.get(&i) {
        Some(w) => w.slice(0, n.min(w.len())),
        None => crate::tensor::Words::empty(rows[i].dtype.word_bits()),
    };
    Ok(calibrate(&tensors, load, &opts, &source.title()))
}

/// What searching one record found.
#[derive(Clone, Debug)]
pub struct RecordSearch {
    /// The program found for the record's words and its size.
    pub found: Synthesis,
    /// Regions the record's tensor was searched in (1 for a group or a small tensor).
    pub regions: u64,
    /// For a group record: its tensors, in order.
    pub members: Option<Vec<usize>>,
    /// Searches run, each with the budget: the regions, plus each tensor of a group
    /// searched apart.
    pub searches: u64,
}

/// How many searches [`search_record`] runs for the record of tensor `t`, each with the
/// budget (`(regions, searches)`), from the row and the record alone.
pub fn searches_of(source: &dyn Source, t: usize) -> (u64, u64) {
    let Some(row) = source.rows().get(t) else {
        return (1, 1);
    };
    let members = match source.record(t).map(|r| r.sharing) {
        Some(Sharing::Group { members, .. }) => Some(members),
        _ => None,
    };
    let words = match &members {
        Some(m) => m
            .iter()
            .filter_map(|&i| source.rows().get(i))
            .map(|r| r.elements())
            .sum::<u64>(),
        None => row.elements(),
    } as usize;
    let rows = (members.is_none() && row.shape.len() >= 2).then(|| row.shape[0]);
    let region = crate::archive::writer::REGION_WORDS;
    let (per, _) = crate::synth::regions_of(words, rows, region);
    let regions = if words <= region {
        1
    } else {
        words.div_ceil(per) as u64
    };
    (regions, regions + members.map_or(0, |m| m.len() as u64))
}

/// Searches the record of tensor `t` of `source` with `opts` and `prior`, as `compress`
/// searched it (module doc). `started(searches)` is called once the words are decoded,
/// with how many searches of the budget follow.
///
/// # Errors
/// When the record cannot be decoded, or `cancelled` says stop before the search began
/// (`"cancelled"`).
pub fn search_record(
    source: &dyn Source,
    t: usize,
    opts: &SearchOptions,
    prior: &Prior,
    cancelled: &dyn Fn() -> bool,
    started: &dyn Fn(u64),
) -> Result<RecordSearch, String> {
    let row = source
        .rows()
        .get(t)
        .ok_or_else(|| format!("no tensor number {t}"))?;
    // The bytes the tensor's record restores: a group's program restores the whole
    // group, so the search works on the group.
    let bytes = source.decode_record(t)?;
    let members = match source.record(t).map(|r| r.sharing) {
        Some(Sharing::Group { members, .. }) => Some(members),
        _ => None,
    };
    let words = super::model::words_of(row.dtype, &bytes)
        .ok_or_else(|| "tensor bytes are not whole words".to_string())?;
    if cancelled() {
        return Err("cancelled".to_string());
    }
    // A whole matrix (not a group's stream) as `compress` searched it.
    let rows = (members.is_none() && row.shape.len() >= 2).then(|| row.shape[0]);
    // In regions, as `compress` cut it: each region gets the budget.
    let region = crate::archive::writer::REGION_WORDS;
    let (per, _) = crate::synth::regions_of(words.len(), rows, region);
    let regions = if words.len() <= region {
        1
    } else {
        words.len().div_ceil(per) as u64
    };
    let searches = regions + members.as_ref().map_or(0, |m| m.len() as u64);
    started(searches);
    let mut new = synthesize_in_regions(&words, Some(row.dtype), rows, opts, prior, region);
    if let Some(members) = &members {
        // As `compress` codes a group: the smaller of one program for the group's words
        // and a concat of each tensor's own program.
        let mut kids = Vec::with_capacity(members.len());
        let mut stats = new.stats.clone();
        let mut at = 0usize;
        for &m in members {
            let r = &source.rows()[m];
            let n = usize::try_from(r.elements()).unwrap_or(usize::MAX);
            let end = at.saturating_add(n).min(words.len());
            let part = words.slice(at, end);
            at = end;
            let rows = (r.shape.len() >= 2).then(|| r.shape[0]);
            let kid = synthesize_in_regions(&part, Some(r.dtype), rows, opts, prior, region);
            stats.absorb(&kid.stats);
            kids.push(kid.program);
        }
        new.stats = stats;
        if at == words.len() {
            if let Ok(apart) = Node::concat(kids) {
                let bytes = program_len(&apart);
                if bytes < new.bytes {
                    new.program = apart;
                    new.bytes = bytes;
                }
            }
        }
    }
    Ok(RecordSearch {
        found: new,
        regions,
        members,
        searches,
    })
}
