//! Long work off the UI thread: each job runs on its own thread and reports progress and
//! its outcome over a channel the app drains between frames, so the UI stays responsive.
//!
//! Cancelling sets the job's flag. Jobs poll the flag and stop soon: a search once per
//! expansion (through [`crate::synth::SearchControl`]), a verification between tensors
//! ([`crate::archive::verify_until`]), an analysis between its steps. The app forgets a
//! cancelled job at once, except a search, whose best program so far it waits for and
//! shows (as `synthesize` returns it when stopped). A job whose last
//! step cannot be undone (moving a finished archive into place) takes it through
//! [`JobCtx::commit`], so that a cancel is either in time to prevent that step or knows
//! it came too late ([`JobHandle::cancel_unless_committed`]).

use super::inspect::Inspection;
use super::model::{Source, VerifyOutcome};
use crate::dsl::Node;
use crate::synth::{SearchOptions, Synthesis};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running job, as the app holds it.
#[derive(Debug)]
pub struct JobHandle {
    /// Job number; messages carry it.
    pub id: u64,
    cancel: Arc<AtomicBool>,
    /// Whether the job took its step that cannot be undone ([`JobCtx::commit`]).
    committed: Arc<Mutex<bool>>,
    /// When it started.
    pub started: Instant,
    /// Latest progress: `(done, total, what)`; `total == 0` means unknown.
    pub progress: (u64, u64, String),
}

impl JobHandle {
    /// Asks the job to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Asks the job to stop unless it already committed its step that cannot be undone
    /// ([`JobCtx::commit`]); returns whether it had (the cancel came too late, and the
    /// job runs on to its outcome). Waits while the job is taking that step.
    pub fn cancel_unless_committed(&self) -> bool {
        let committed = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        if !*committed {
            self.cancel();
        }
        *committed
    }

    /// Seconds since the job started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Fraction done in `0..=1` (0 when the total is unknown).
    pub fn ratio(&self) -> f64 {
        let (d, t, _) = &self.progress;
        if *t == 0 {
            0.0
        } else {
            (*d as f64 / *t as f64).clamp(0.0, 1.0)
        }
    }
}

/// What a job hands to its thread: its id, its cancel flag and the channel.
pub struct JobCtx {
    id: u64,
    cancel: Arc<AtomicBool>,
    committed: Arc<Mutex<bool>>,
    tx: Sender<Msg>,
}

impl JobCtx {
    /// Whether the job was cancelled.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Runs `step`, a step that cannot be undone, unless the job was cancelled; returns
    /// `None` without running it when it was. A cancel either comes before (and `step`
    /// never runs) or waits until `step` is done and learns that it ran
    /// ([`JobHandle::cancel_unless_committed`]).
    pub fn commit<T>(&self, step: impl FnOnce() -> T) -> Option<T> {
        let mut committed = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        if self.cancelled() {
            return None;
        }
        *committed = true;
        Some(step())
    }

    /// The job's cancel flag, to hand to a library call that polls it.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Reports progress (`total == 0`: unknown).
    pub fn progress(&self, done: u64, total: u64, what: impl Into<String>) {
        let _ = self.tx.send(Msg::Progress {
            id: self.id,
            done,
            total,
            what: what.into(),
        });
    }
}

/// The result of a search job.
#[derive(Clone, Debug)]
pub struct SearchResult {
    /// The tensor searched.
    pub tensor: usize,
    /// The limits used.
    pub opts: SearchOptions,
    /// Regions the tensor was searched in, as `compress` cuts it: the budget counts
    /// expansions per region.
    pub regions: u64,
    /// For a tensor in a group record: how many tensors the group holds (the search ran
    /// on all of them, since the record's one program restores them all).
    pub group: Option<usize>,
    /// Searches run, each with the budget: the regions, and for a group each of its
    /// tensors apart too.
    pub searches: u64,
    /// The prior used: `uniform`, `calibrated` or `file PATH`.
    pub prior: String,
    /// The settings that built `new`, which `w` records for the rewritten record (a
    /// search stopped by `x` records the expansions per region it used as its budget).
    pub settings: crate::archive::format::Settings,
    /// The archive's program and its size in bytes.
    pub old: (Node, u64),
    /// What the search found.
    pub new: Synthesis,
    /// How long the search took.
    pub elapsed: Duration,
    /// Whether `x` stopped the search before its budget ran out: `new` is then the best
    /// program found so far (still exact, and writable like any other result).
    pub cancelled: bool,
}

/// A job's outcome.
pub enum Outcome {
    /// Analysis of one tensor (`Ok(None)`: cancelled).
    Inspected(usize, Result<Option<Box<Inspection>>, String>),
    /// A search finished.
    Searched(Result<Box<SearchResult>, String>),
    /// A verification finished.
    Verified(Result<VerifyOutcome, String>),
    /// The archive to show was made and opened.
    Opened(Result<Arc<dyn Source>, String>),
    /// A copy of the archive with a new program was written (and, when it replaced the
    /// open archive, that archive reopened).
    Written(Result<(super::app::WriteOutcome, Option<Arc<dyn Source>>), String>),
    /// The archive's report of where its bytes go (`Ok(None)`: cancelled).
    Analysed(Result<Option<Box<crate::job::why::WhyReport>>, String>),
    /// A budget sweep finished (or was cancelled: its points so far).
    Swept(Result<super::sweep::Sweep, String>),
    /// A prior was calibrated for the Prior view.
    Calibrated(Result<crate::synth::Prior, String>),
    /// The playground's program was checked and run.
    Played(Result<Box<super::playground::PlayResult>, String>),
    /// The job panicked (a bug); the message says where.
    Failed(String),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Inspected(i, r) => write!(f, "Inspected({i}, ok={})", r.is_ok()),
            Outcome::Searched(r) => write!(f, "Searched(ok={})", r.is_ok()),
            Outcome::Verified(r) => write!(f, "Verified({r:?})"),
            Outcome::Opened(r) => write!(f, "Opened(ok={})", r.is_ok()),
            Outcome::Written(r) => write!(f, "Written(ok={})", r.is_ok()),
            Outcome::Analysed(r) => write!(f, "Analysed(ok={})", r.is_ok()),
            Outcome::Swept(r) => write!(f, "Swept(ok={})", r.is_ok()),
            Outcome::Calibrated(r) => write!(f, "Calibrated(ok={})", r.is_ok()),
            Outcome::Played(r) => write!(f, "Played(ok={})", r.is_ok()),
            Outcome::Failed(m) => write!(f, "Failed({m:?})"),
        }
    }
}

/// A message from a job thread.
#[derive(Debug)]
pub enum Msg {
    /// Progress of job `id`.
    Progress {
        /// The job.
        id: u64,
        /// Units done.
        done: u64,
        /// Units in all (0: unknown).
        total: u64,
        /// What is being done.
        what: String,
    },
    /// Job `id` finished.
    Done {
        /// The job.
        id: u64,
        /// Its outcome.
        outcome: Outcome,
    },
}

/// Prefix of the names of job threads; the panic hook of the binary stays quiet on them
/// (their panics become [`Outcome::Failed`] and are shown in the status line).
pub const JOB_THREAD_PREFIX: &str = "brevis-tui-job-";

/// Starts jobs and collects their messages.
pub struct Worker {
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    next: u64,
}

impl Default for Worker {
    fn default() -> Self {
        let (tx, rx) = channel();
        Worker { tx, rx, next: 1 }
    }
}

impl Worker {
    /// Runs `job` on a new thread; its return value becomes a [`Msg::Done`].
    pub fn spawn(&mut self, job: impl FnOnce(&JobCtx) -> Outcome + Send + 'static) -> JobHandle {
        let id = self.next;
        self.next += 1;
        let cancel = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(Mutex::new(false));
        let ctx = JobCtx {
            id,
            cancel: cancel.clone(),
            committed: committed.clone(),
            tx: self.tx.clone(),
        };
        std::thread::Builder::new()
            .name(format!("{JOB_THREAD_PREFIX}{id}"))
            .spawn(move || {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&ctx)))
                    .unwrap_or_else(|payload| {
                        let what = payload
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| payload.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "unknown panic".to_string());
                        Outcome::Failed(format!("internal error in a background job: {what}"))
                    });
                let _ = ctx.tx.send(Msg::Done { id, outcome });
            })
            .expect("the OS can start a thread");
        JobHandle {
            id,
            cancel,
            committed,
            started: Instant::now(),
            progress: (0, 0, String::new()),
        }
    }

    /// The next message if one is waiting.
    pub fn try_recv(&self) -> Option<Msg> {
        self.rx.try_recv().ok()
    }

    /// The next message, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Msg> {
        self.rx.recv_timeout(timeout).ok()
    }
}

/// Verifies the whole source, tensor by tensor with progress, then what is not a tensor.
pub fn verify_all(source: &dyn Source, ctx: &JobCtx) -> Option<VerifyOutcome> {
    let start = Instant::now();
    let out = source.verify_all(
        &|done, total, what| ctx.progress(done, total, what),
        &|| ctx.cancelled(),
    );
    if ctx.cancelled() {
        return None;
    }
    let mut out = out;
    out.seconds = start.elapsed().as_secs_f64();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_job_reports_failed() {
        let mut w = Worker::default();
        let h = w.spawn(|ctx| {
            ctx.progress(1, 2, "half");
            panic!("boom")
        });
        let mut seen = Vec::new();
        while let Some(m) = w.recv_timeout(Duration::from_secs(10)) {
            let done = matches!(m, Msg::Done { .. });
            seen.push(format!("{m:?}"));
            if done {
                break;
            }
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].contains("half"));
        assert!(seen[1].contains(&format!("id: {}", h.id)));
        assert!(
            seen[1].contains("internal error in a background job: boom"),
            "{seen:?}"
        );
    }
}
