//! The budget sweep: the archive bytes of the selected tensor's record (or of a sample of
//! the archive's records) searched at budgets 1, 2, 4, ... up to a limit, each as
//! `brevis compress --budget N` would search it, on a worker with progress and cancel;
//! and where the curve flattens.

use super::model::Source;
use super::searching::{search_record, PriorRequest};
use super::worker::JobCtx;
use crate::synth::SearchOptions;
use std::sync::{Arc, Mutex};

/// The largest limit the view takes.
pub const MAX_LIMIT: u64 = 1 << 16;

/// The limit a sweep starts with.
pub const DEFAULT_LIMIT: u64 = 64;

/// Records a sample takes at most.
pub const SAMPLE: usize = 4;

/// Longest tensor a sample takes, in words (one region: a sweep of a sample stays
/// quick).
pub const SAMPLE_MAX_WORDS: u64 = 1 << 20;

/// A finished (or cancelled) sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sweep {
    /// What was swept: the tensor's name, or the sample's.
    pub label: String,
    /// The tensors whose records were searched (one per record).
    pub tensors: Vec<usize>,
    /// `(budget, archive bytes of the records)` per budget done, in order.
    pub points: Vec<(u64, u64)>,
    /// The prior used.
    pub prior: String,
    /// The limit asked for.
    pub limit: u64,
    /// Whether `x` stopped it (the points are those done before).
    pub cancelled: bool,
}

/// The sweep view's state.
#[derive(Debug)]
pub struct SweepState {
    /// Sweep a sample of the archive's tensors instead of the selected one.
    pub sample: bool,
    /// The largest budget (a power of two).
    pub limit: u64,
    /// The running sweep.
    pub running: Option<super::worker::JobHandle>,
    /// Points of the running sweep as they come.
    pub live: Arc<Mutex<Vec<(u64, u64)>>>,
    /// The last sweep (or why it failed).
    pub result: Option<Result<Sweep, String>>,
}

impl Default for SweepState {
    fn default() -> Self {
        SweepState {
            sample: false,
            limit: DEFAULT_LIMIT,
            running: None,
            live: Arc::new(Mutex::new(Vec::new())),
            result: None,
        }
    }
}

/// The budgets of a sweep up to `limit`: 1, 2, 4, ... (`limit` itself last when it is
/// not a power of two).
pub fn budgets(limit: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut b = 1u64;
    while b <= limit.max(1) {
        v.push(b);
        match b.checked_mul(2) {
            Some(n) => b = n,
            None => break,
        }
    }
    if v.last() != Some(&limit.max(1)) {
        v.push(limit.max(1));
    }
    v
}

/// Where the curve flattens: the first point from which no later budget saves more than
/// 0.1% of its bytes. `None` when there are fewer than two points, or the last budget
/// still saved more (the limit is too low to tell).
pub fn flattens_at(points: &[(u64, u64)]) -> Option<usize> {
    if points.len() < 2 {
        return None;
    }
    for k in 0..points.len() - 1 {
        let base = points[k].1;
        let tol = base / 1000;
        let best = points[k + 1..].iter().map(|p| p.1).min().unwrap_or(base);
        if best.saturating_add(tol) >= base {
            return Some(k);
        }
    }
    None
}

/// What the view says about the curve.
pub fn verdict(points: &[(u64, u64)]) -> String {
    let thousands = super::inspect::thousands;
    match (points.first(), points.last(), flattens_at(points)) {
        (Some(first), Some(last), Some(k)) => {
            let (b, bytes) = points[k];
            let best = points[k..].iter().map(|p| p.1).min().unwrap_or(bytes);
            format!(
                "the curve flattens at budget {}: larger budgets save {} bytes more at most \
                 (under 0.1%); budget {} to {}: {} → {} bytes",
                thousands(b),
                thousands(bytes - best.min(bytes)),
                thousands(first.0),
                thousands(last.0),
                thousands(first.1),
                thousands(last.1)
            )
        }
        (Some(first), Some(last), None) if points.len() >= 2 => {
            let prev = points[points.len() - 2];
            format!(
                "still falling at budget {}: the last doubling saved {} bytes; a higher \
                 limit may find more ({} → {} bytes from budget {})",
                thousands(last.0),
                thousands(prev.1.saturating_sub(last.1)),
                thousands(first.1),
                thousands(last.1),
                thousands(first.0)
            )
        }
        _ => "one budget: nothing to compare".to_string(),
    }
}

/// The tensors a sample sweeps: at most [`SAMPLE`], one per record, stratified by dtype
/// and size as calibration picks them, among tensors of at most [`SAMPLE_MAX_WORDS`]
/// words that have records a search can replace (not copies, references or empty).
pub fn sample_of(source: &dyn Source) -> Vec<usize> {
    use super::model::Sharing;
    use crate::synth::calibrate::{pick, Tensor};
    let rows = source.rows();
    let ok: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].elements() <= SAMPLE_MAX_WORDS && rows[i].elements() >= 2)
        .filter(|&i| {
            !matches!(
                source.record(i).map(|r| r.sharing),
                Some(Sharing::Copy { .. } | Sharing::Reference { .. } | Sharing::Empty)
            )
        })
        .collect();
    let tensors: Vec<Tensor> = ok
        .iter()
        .map(|&i| Tensor {
            name: &rows[i].name,
            dtype: rows[i].dtype,
            words: rows[i].elements() as usize,
        })
        .collect();
    let mut out: Vec<usize> = Vec::new();
    let mut records = std::collections::HashSet::new();
    for k in pick(&tensors, SAMPLE * 2) {
        let i = ok[k];
        let key = record_key(source, i);
        if records.insert(key) {
            out.push(i);
        }
        if out.len() == SAMPLE {
            break;
        }
    }
    out.sort_unstable();
    out
}

/// The record tensor `i` is stored in, as the first tensor it restores: the group's
/// first tensor for a tensor in a group, else `i`.
pub fn record_key(source: &dyn Source, i: usize) -> usize {
    match source.record(i).map(|r| r.sharing) {
        Some(super::model::Sharing::Group { members, .. }) => members.first().copied().unwrap_or(i),
        _ => i,
    }
}

/// Bytes of the record of tensor `t` that are not program (its kind and checksum).
fn framing(source: &dyn Source, t: usize) -> u64 {
    source
        .record(t)
        .map_or(0, |r| r.record_bytes.saturating_sub(r.program_bytes))
}

/// What a sweep searches: its records (one tensor per record), what to call them, the
/// largest budget, and the form's other limits and prior.
pub struct SweepRequest {
    pub tensors: Vec<usize>,
    pub label: String,
    pub limit: u64,
    pub opts: SearchOptions,
    pub prior: PriorRequest,
}

/// Runs the sweep of the request's records at the budgets up to its limit; each
/// finished budget's point is pushed to `live` and reported as progress.
///
/// # Errors
/// When a record cannot be decoded, or the prior cannot be calibrated.
pub fn run(
    source: &dyn Source,
    request: SweepRequest,
    ctx: &JobCtx,
    live: &Mutex<Vec<(u64, u64)>>,
) -> Result<Sweep, String> {
    let SweepRequest {
        tensors,
        label,
        limit,
        opts,
        prior,
    } = request;
    let budgets = budgets(limit);
    ctx.progress(0, budgets.len() as u64, "calibrating the prior");
    let (prior, prior_name, _) = match prior.resolve(source, &|| ctx.cancelled()) {
        Ok(p) => p,
        Err(e) if e == "cancelled" => {
            return Ok(Sweep {
                label,
                tensors,
                points: Vec::new(),
                prior: String::new(),
                limit,
                cancelled: true,
            })
        }
        Err(e) => return Err(e),
    };
    let mut points = Vec::new();
    let mut cancelled = false;
    'budgets: for (k, &b) in budgets.iter().enumerate() {
        ctx.progress(
            k as u64,
            budgets.len() as u64,
            format!("searching at budget {b}"),
        );
        let mut total = 0u64;
        for &t in &tensors {
            let o = SearchOptions {
                budget: b,
                control: crate::synth::SearchControl {
                    cancel: Some(ctx.cancel_flag()),
                    expansions: None,
                },
                ..opts.clone()
            };
            let r = search_record(source, t, &o, &prior, &|| ctx.cancelled(), &|_| {});
            if ctx.cancelled() {
                cancelled = true;
                break 'budgets;
            }
            total += framing(source, t) + r?.found.bytes;
        }
        points.push((b, total));
        if let Ok(mut l) = live.lock() {
            l.push((b, total));
        }
    }
    ctx.progress(budgets.len() as u64, budgets.len() as u64, "done");
    Ok(Sweep {
        label,
        tensors,
        points,
        prior: prior_name,
        limit,
        cancelled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_double_up_to_the_limit() {
        assert_eq!(budgets(1), [1]);
        assert_eq!(budgets(8), [1, 2, 4, 8]);
        assert_eq!(budgets(10), [1, 2, 4, 8, 10]);
        assert_eq!(budgets(0), [1]);
    }

    #[test]
    fn the_curve_flattens_where_later_budgets_save_under_a_thousandth() {
        let p = [(1, 10_000), (2, 9_000), (4, 8_995), (8, 8_994)];
        assert_eq!(flattens_at(&p), Some(1));
        assert!(
            verdict(&p).starts_with("the curve flattens at budget 2: larger budgets save 6 bytes")
        );
        let falling = [(1, 10_000), (2, 9_000), (4, 8_000)];
        assert_eq!(flattens_at(&falling), None);
        assert!(verdict(&falling)
            .starts_with("still falling at budget 4: the last doubling saved 1,000 bytes"));
        assert_eq!(flattens_at(&[(1, 5)]), None);
        assert_eq!(flattens_at(&[(1, 5), (2, 5)]), Some(0));
        // A later dip counts: not flat before it.
        let dip = [(1, 10_000), (2, 10_000), (4, 9_000)];
        assert_eq!(flattens_at(&dip), None);
    }
}
