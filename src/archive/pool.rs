//! The worker threads of a job and the ordered pipeline that runs items on them: items
//! run in parallel, their results are handed on in index order on the calling thread, so
//! what a job writes never depends on the number of threads.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Most worker threads any job starts, whatever `--jobs` asks for: more only adds
/// memory in flight and scheduling cost.
pub const MAX_JOBS: usize = 256;

/// Number of worker threads for `jobs` (`None` or `Some(0)` = all cores), at most
/// [`MAX_JOBS`].
pub fn resolve_jobs(jobs: Option<usize>) -> usize {
    match jobs {
        Some(n) if n > 0 => n.min(MAX_JOBS),
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// The worker threads a job runs on: a pool of its own, or the rayon pool the calling
/// thread already works in when that pool has exactly the threads asked for (a job run
/// from inside a pool, such as the fuzz targets' single-threaded one, starts no thread).
pub(crate) enum Pool {
    /// A pool of the job's own: made for it, or an idle one a job before left.
    Own(Idle),
    /// The pool the calling thread is a worker of.
    Current,
}

/// A pool taken for one job at a time, left for the next job of the same size when
/// this one ends (at most [`IDLE_POOLS`] are kept, their threads asleep): starting and
/// ending a thread cost more than a small file's whole compression in a process that
/// runs many jobs (`brevis bench`, the Python package, the TUI's searches).
///
/// Fork-safe: a pool is taken again only by the process that made it (a child forked
/// from it, as Python's `multiprocessing` and data loaders do, has none of its threads
/// and makes its own), and the list of idle pools is only ever `try_lock`ed (a child
/// forked while another thread held it finds it locked forever, and makes its own).
pub(crate) struct Idle(Option<rayon::ThreadPool>);

/// Pools kept for later jobs.
const IDLE_POOLS: usize = 4;

/// The pools no job holds, with the id of the process that made each.
static IDLE: std::sync::Mutex<Vec<(u32, rayon::ThreadPool)>> = std::sync::Mutex::new(Vec::new());

impl Idle {
    fn pool(&self) -> &rayon::ThreadPool {
        self.0.as_ref().expect("held until dropped")
    }

    /// An idle pool of `jobs` threads this process made, if there is one. Pools a
    /// parent process made (this is a forked child) are forgotten: their threads are
    /// not here, and dropping them would wait on nothing.
    fn take(jobs: usize) -> Option<rayon::ThreadPool> {
        let mut idle = IDLE.try_lock().ok()?;
        let me = std::process::id();
        for (_, p) in idle.extract_if(.., |(pid, _)| *pid != me) {
            std::mem::forget(p);
        }
        let at = idle
            .iter()
            .position(|(_, p)| p.current_num_threads() == jobs)?;
        Some(idle.swap_remove(at).1)
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        if let (Some(p), Ok(mut idle)) = (self.0.take(), IDLE.try_lock()) {
            if idle.len() < IDLE_POOLS {
                idle.push((std::process::id(), p));
            }
        }
    }
}

impl Pool {
    /// Runs `op` on the pool.
    pub(crate) fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        match self {
            Pool::Own(p) => p.pool().install(op),
            Pool::Current => op(),
        }
    }

    /// A scope of the pool whose owner is the calling thread ([`rayon::in_place_scope`]).
    pub(crate) fn in_place_scope<'scope, R>(
        &self,
        op: impl FnOnce(&rayon::Scope<'scope>) -> R,
    ) -> R {
        match self {
            Pool::Own(p) => p.pool().in_place_scope(op),
            Pool::Current => rayon::in_place_scope(op),
        }
    }

    /// Receives the next message of `rx`, sent by jobs spawned on the pool. A thread
    /// outside the pool just waits; on [`Pool::Current`] the calling thread, a worker of
    /// the pool, runs the pool's pending jobs meanwhile, as the jobs it waits for may be
    /// queued behind it (on a pool of one thread, only it can run them).
    pub(crate) fn recv<T>(
        &self,
        rx: &std::sync::mpsc::Receiver<T>,
    ) -> Result<T, std::sync::mpsc::RecvError> {
        use std::sync::mpsc::{RecvError, RecvTimeoutError, TryRecvError};
        if let Pool::Own(p) = self {
            // With a core to spare, polled for a while before parking: a worker that
            // finds the receiver parked wakes it through the kernel, and on files of
            // many small records the wake-ups (the sender's futex call, the receiver's
            // switch back in) were a fifth of a decompression's time (silero-vad at one
            // worker). Without one, polling would take a core from the workers.
            if p.pool().current_num_threads() < cores() {
                let start = std::time::Instant::now();
                loop {
                    match rx.try_recv() {
                        Ok(v) => return Ok(v),
                        Err(TryRecvError::Disconnected) => return Err(RecvError),
                        Err(TryRecvError::Empty) => {}
                    }
                    if start.elapsed() >= POLL {
                        break;
                    }
                    for _ in 0..32 {
                        std::hint::spin_loop();
                    }
                }
            }
            return rx.recv();
        }
        loop {
            match rx.try_recv() {
                Ok(v) => return Ok(v),
                Err(TryRecvError::Disconnected) => return Err(RecvError),
                Err(TryRecvError::Empty) => {}
            }
            if rayon::yield_now() != Some(rayon::Yield::Executed) {
                // Nothing queued here: the jobs run on other threads of the pool.
                match rx.recv_timeout(std::time::Duration::from_micros(200)) {
                    Ok(v) => return Ok(v),
                    Err(RecvTimeoutError::Disconnected) => return Err(RecvError),
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        }
    }

    /// Its number of threads.
    pub(crate) fn current_num_threads(&self) -> usize {
        match self {
            Pool::Own(p) => p.pool().current_num_threads(),
            Pool::Current => rayon::current_num_threads(),
        }
    }
}

/// How long [`Pool::recv`] polls before it parks: records that take less are handed
/// over without a wake-up; longer ones pay one, which is then under a few percent of
/// their time.
const POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// The cores this process may run on (1 when unknown), read once.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The pool of `jobs` threads for a job: the calling thread's own rayon pool when it
/// works in one of exactly `jobs` threads ([`Pool::Current`]), else an idle one of that
/// size ([`Idle`]) or a new one.
///
/// # Errors
/// A sentence if the threads cannot be started.
pub(crate) fn build_pool(jobs: usize) -> Result<Pool, String> {
    if rayon::current_thread_index().is_some() && rayon::current_num_threads() == jobs {
        return Ok(Pool::Current);
    }
    if let Some(p) = Idle::take(jobs) {
        return Ok(Pool::Own(Idle(Some(p))));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .thread_name(|i| format!("brevis-{i}"))
        .build()
        .map(|p| Pool::Own(Idle(Some(p))))
        .map_err(|e| format!("cannot start {jobs} worker threads: {e}"))
}

/// Items in flight per worker thread. Memory is bounded by the byte budget of
/// [`ordered_pipeline_bounded`]; this only caps the count of small items. It is large
/// because the items are handed on in order by the calling thread: while it writes a
/// large record (a 23 MB embedding matrix takes tens of milliseconds), the workers go
/// on with every later item the budget admits. With 3 per thread they ran out of work
/// there (`compress --jobs 2` of minilm: 285 -> 256 ms, median of 30).
const WINDOW_PER_THREAD: usize = 256;

/// Runs `work(i)` for `i` in `0..count` on `pool`, at most a window of items in flight,
/// and hands each result to `sink` in index order on the calling thread. Stops at the
/// first error (of `work` or `sink`); a panic in `work` becomes `panicked(i)`.
#[cfg(test)]
pub(crate) fn ordered_pipeline<T: Send, E: Send>(
    pool: &Pool,
    count: usize,
    work: impl Fn(usize) -> Result<T, E> + Sync,
    sink: impl FnMut(usize, T) -> Result<(), E>,
    panicked: impl Fn(usize) -> E,
) -> Result<(), E> {
    ordered_pipeline_bounded(pool, count, |_| 0, 0, work, sink, panicked)
}

/// [`ordered_pipeline`] that also bounds the bytes in flight: item `i` weighs `cost(i)`
/// bytes (e.g. the source bytes it encodes), and an item is started only while the items
/// started and not yet handed to `sink` weigh at most `budget` bytes with it (an item
/// heavier than that starts alone).
pub(crate) fn ordered_pipeline_bounded<T: Send, E: Send>(
    pool: &Pool,
    count: usize,
    cost: impl Fn(usize) -> u64,
    budget: u64,
    work: impl Fn(usize) -> Result<T, E> + Sync,
    mut sink: impl FnMut(usize, T) -> Result<(), E>,
    panicked: impl Fn(usize) -> E,
) -> Result<(), E> {
    let window = pool.current_num_threads().max(1) * WINDOW_PER_THREAD;
    let mut in_flight = 0u64;
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<Result<T, E>>)>();
    let work = &work;
    let stop_ref = &stop;
    pool.in_place_scope(|scope| {
        let mut next_submit = 0usize;
        let mut next_sink = 0usize;
        // Results wait here until every earlier one has been handed on, so the first
        // error reported is the first in index order, whatever the thread count.
        let mut ready: BTreeMap<usize, Option<Result<T, E>>> = BTreeMap::new();
        let result = (|| {
            while next_sink < count {
                while next_submit < count && next_submit - next_sink < window {
                    let weight = cost(next_submit);
                    if next_submit > next_sink && in_flight.saturating_add(weight) > budget {
                        break;
                    }
                    in_flight = in_flight.saturating_add(weight);
                    let tx = tx.clone();
                    let i = next_submit;
                    scope.spawn(move |_| {
                        if stop_ref.load(Ordering::Relaxed) {
                            let _ = tx.send((i, None));
                            return;
                        }
                        let r = catch_unwind(AssertUnwindSafe(|| work(i))).ok();
                        let _ = tx.send((i, r));
                    });
                    next_submit += 1;
                }
                // A sender lives in this frame, so `recv` only returns a message; every
                // spawned task sends exactly one.
                let Ok((i, r)) = pool.recv(&rx) else {
                    return Err(panicked(next_sink));
                };
                ready.insert(i, r);
                while let Some(r) = ready.remove(&next_sink) {
                    match r {
                        Some(Ok(v)) => {
                            sink(next_sink, v)?;
                            in_flight = in_flight.saturating_sub(cost(next_sink));
                        }
                        Some(Err(e)) => return Err(e),
                        None => return Err(panicked(next_sink)),
                    }
                    next_sink += 1;
                }
            }
            Ok(())
        })();
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `recv` on a pool of its own hands over a message sent at once (while it polls),
    /// one sent after its polling ended (parked, then woken), and reports a channel
    /// whose senders are gone.
    #[test]
    fn recv_takes_early_and_late_messages() {
        let pool = build_pool(1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        pool.in_place_scope(|scope| {
            let early = tx.clone();
            scope.spawn(move |_| early.send(1).unwrap());
            assert_eq!(pool.recv(&rx), Ok(1));
            let late = tx.clone();
            scope.spawn(move |_| {
                std::thread::sleep(POLL * 5);
                late.send(2).unwrap();
            });
            assert_eq!(pool.recv(&rx), Ok(2));
        });
        drop(tx);
        assert!(pool.recv(&rx).is_err());
    }

    #[test]
    fn pipeline_keeps_order_for_any_thread_count() {
        for threads in [1, 2, 3] {
            let pool = build_pool(threads).unwrap();
            let mut seen = Vec::new();
            ordered_pipeline(
                &pool,
                50,
                |i| Ok::<_, String>(i * 2),
                |i, v| {
                    assert_eq!(v, i * 2);
                    seen.push(i);
                    Ok(())
                },
                |i| format!("panic {i}"),
            )
            .unwrap();
            assert_eq!(seen, (0..50).collect::<Vec<_>>());
        }
        let pool = build_pool(2).unwrap();
        let r = ordered_pipeline(
            &pool,
            20,
            |i| {
                if i == 7 {
                    Err(format!("bad {i}"))
                } else {
                    Ok(i)
                }
            },
            |_, _| Ok(()),
            |i| format!("panic {i}"),
        );
        assert_eq!(r, Err("bad 7".to_string()));
    }
}
