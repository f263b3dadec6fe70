//! `bench`: reduction and throughput in memory, and the search ablation.

use super::{lossy, Observer};
use crate::archive::writer::{self, write_archive};
use crate::archive::ProgressEvent;
use crate::archive::{folder, no_progress, resolve_jobs, safetensors, Archive, CompressOptions};
use crate::dsl::size_report;
use crate::error::{Error, Result};
use crate::synth::{self, Prior, PriorChoice, SearchOptions};
use crate::{Dtype, Words};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to bench.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Worker threads of the parallel runs (`None` = all cores).
    pub jobs: Option<usize>,
    /// Search budgets, one run each.
    pub budgets: Vec<u64>,
    /// The search's limits (its budget is replaced by each of `budgets`).
    pub search: SearchOptions,
    /// The prior.
    pub prior: PriorChoice,
    /// Add a search report per tensor.
    pub report: bool,
    /// Timed runs of each direction (after one untimed warm-up); the median counts.
    pub runs: u32,
}

/// The search of one tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorSearch {
    /// The tensor's name.
    pub name: String,
    /// Its dtype's name.
    pub dtype: &'static str,
    /// Its bytes.
    pub original_bytes: usize,
    /// Bytes of the program found.
    pub program_bytes: u64,
    /// The program in the text form.
    pub program: String,
    /// Per node (preorder): depth, own and subtree bytes.
    pub nodes: Vec<NodeBytes>,
    /// Partial programs expanded.
    pub expansions: u64,
    /// Candidates generated.
    pub candidates: u64,
    /// Proposals of the last expansion not sized: their children's order-0 entropy
    /// alone put them above the best found.
    pub pruned: u64,
    /// Whether the budget ran out.
    pub budget_exhausted: bool,
    /// Whether it fell back to a literal.
    pub literal_fallback: bool,
    /// Search time in seconds.
    pub seconds: f64,
}

/// One node's bytes in a [`TensorSearch`].
#[derive(Clone, Debug, Serialize)]
pub struct NodeBytes {
    /// Depth (the root is 0).
    pub depth: usize,
    /// Its own bytes.
    pub own_bytes: u64,
    /// Its subtree's bytes.
    pub subtree_bytes: u64,
}

/// A search report of one file at one budget.
#[derive(Clone, Debug, Serialize)]
pub struct SearchReport {
    /// Where the prior came from.
    pub prior: String,
    /// Calibration time in seconds.
    pub calibrate_seconds: f64,
    /// Every tensor searched.
    pub tensors: Vec<TensorSearch>,
    /// Bytes of every tensor.
    pub total_original_bytes: u64,
    /// Bytes of every program.
    pub total_program_bytes: u64,
    /// Search time of every tensor, in seconds.
    pub total_search_seconds: f64,
}

/// One file at one budget.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    /// The file.
    #[serde(serialize_with = "lossy")]
    pub file: PathBuf,
    /// The compression level's name (`fast`, `default`, `max`).
    pub level: &'static str,
    /// The search budget (0 at the fast level, which does not search).
    pub budget: u64,
    /// Bytes of the file.
    pub original_bytes: u64,
    /// Bytes of its archive: what `compress` writes for the file (its name recorded).
    pub archive_bytes: u64,
    /// [`super::percent_smaller`] of the two.
    pub reduction_percent: Option<f64>,
    /// Threads of the parallel runs.
    pub threads: usize,
    /// Timed runs per direction.
    pub runs: usize,
    /// Compression throughput on one thread, in MB/s (10^6 bytes of the original per
    /// second).
    pub compress_mb_s_1: f64,
    /// The same on `threads` threads.
    pub compress_mb_s_all: f64,
    /// Decompression throughput on one thread, in MB/s.
    pub decompress_mb_s_1: f64,
    /// The same on `threads` threads.
    pub decompress_mb_s_all: f64,
    /// The search report, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchReport>,
}

/// What [`bench()`] measured; serializes as `bench --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Threads of the parallel runs.
    pub threads: usize,
    /// The `rans8` decoding kernel the runs used
    /// ([`crate::codec::rans8::decoding_kernel`]): speeds depend on it.
    pub rans8_kernel: &'static str,
    /// One row per file and budget.
    pub files: Vec<BenchRow>,
}

/// The files `bench` measures: each argument, with a checkpoint folder (or its shard
/// index) replaced by its `.safetensors` files in path order.
fn bench_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in args {
        match folder::source_folder(path) {
            Some(dir) => files.extend(folder::shard_paths(&dir, folder::ShardsFor::Bench)?),
            None => files.push(path.clone()),
        }
    }
    Ok(files)
}

/// The median of `secs` (the mean of the middle two for an even count); 0 when empty.
fn median(mut secs: Vec<f64>) -> f64 {
    secs.sort_by(f64::total_cmp);
    let n = secs.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => secs[n / 2],
        _ => (secs[n / 2 - 1] + secs[n / 2]) / 2.0,
    }
}

/// `bytes` per `secs` in MB/s (10^6 bytes per second); 0 for no time.
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / secs / 1e6
    } else {
        0.0
    }
}

fn read_source(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, "cannot read", e))
}

/// Measures reduction and throughput of `files` (`.safetensors` files; a checkpoint
/// folder stands for its shards) in memory: no archive is written to disk.
///
/// # Errors
/// [`Error::Io`] if a file cannot be read; [`Error::Source`] if it is not a valid
/// `.safetensors` file; [`Error::Internal`] if the archive differs between thread
/// counts.
pub fn bench(files: &[PathBuf], opts: &BenchOptions) -> Result<BenchReport> {
    let all = resolve_jobs(opts.jobs);
    let mut results = Vec::new();
    for path in &bench_files(files)? {
        let bytes = read_source(path)?;
        let src = safetensors::parse(&bytes).map_err(|e| Error::source(path, e))?;
        for &budget in &opts.budgets {
            let search = SearchOptions {
                budget,
                ..opts.search.clone()
            };
            let copts = |jobs| CompressOptions {
                search: search.clone(),
                jobs: Some(jobs),
                force: false,
                verify: false,
                prior: opts.prior.clone(),
                // The name `compress` records, so that the archive measured is the
                // one `compress` writes, byte for byte.
                file_name: writer::recorded_name(path),
                links: None,
            };
            let runs = opts.runs as usize;
            let compress_once = |jobs| -> Result<(Vec<u8>, f64)> {
                let mut out = Vec::with_capacity(bytes.len() / 2);
                let start = Instant::now();
                write_archive(&src, &mut out, &copts(jobs), &no_progress, path)?;
                Ok((out, start.elapsed().as_secs_f64()))
            };
            // One untimed warm-up run (it gives the archive), then `runs` timed ones.
            let timed_compress = |jobs| -> Result<(Vec<u8>, f64)> {
                let (archive, _) = compress_once(jobs)?;
                let mut secs = Vec::with_capacity(runs);
                for _ in 0..runs {
                    secs.push(compress_once(jobs)?.1);
                }
                Ok((archive, median(secs)))
            };
            // With one thread in all, each direction is timed once.
            let (archive_one, c1) = timed_compress(1)?;
            let (archive_all, cn) = if all == 1 {
                (archive_one.clone(), c1)
            } else {
                timed_compress(all)?
            };
            if archive_one != archive_all {
                return Err(Error::Internal {
                    path: path.clone(),
                    what: format!("the archive differs between 1 and {all} threads"),
                });
            }
            let archive_len = archive_one.len() as u64;
            let archive = Archive::from_bytes(archive_one, path)?;
            let decompress_once = |jobs| -> Result<f64> {
                let start = Instant::now();
                archive.write_original(&mut std::io::sink(), Some(jobs), &no_progress, path)?;
                Ok(start.elapsed().as_secs_f64())
            };
            let timed_decompress = |jobs| -> Result<f64> {
                decompress_once(jobs)?;
                let mut secs = Vec::with_capacity(runs);
                for _ in 0..runs {
                    secs.push(decompress_once(jobs)?);
                }
                Ok(median(secs))
            };
            let d1 = timed_decompress(1)?;
            let dn = if all == 1 { d1 } else { timed_decompress(all)? };
            let n = bytes.len() as u64;
            results.push(BenchRow {
                file: path.clone(),
                level: opts.search.level.name(),
                budget,
                original_bytes: n,
                archive_bytes: archive_len,
                reduction_percent: super::percent_smaller(n, archive_len),
                threads: all,
                runs,
                compress_mb_s_1: mb_per_s(n, c1),
                compress_mb_s_all: mb_per_s(n, cn),
                decompress_mb_s_1: mb_per_s(n, d1),
                decompress_mb_s_all: mb_per_s(n, dn),
                search: opts
                    .report
                    .then(|| search_report(&src, &search, &opts.prior, path)),
            });
        }
    }
    Ok(BenchReport {
        threads: all,
        rans8_kernel: crate::codec::rans8::decoding_kernel(),
        files: results,
    })
}

/// The prior a bench run uses for `src`: calibrated on it for `Auto`.
fn resolve_prior(src: &safetensors::SourceFile<'_>, choice: &PriorChoice, path: &Path) -> Prior {
    match choice {
        PriorChoice::Given(p) => p.as_ref().clone(),
        PriorChoice::Uniform => Prior::uniform(),
        PriorChoice::Auto => writer::calibrate_source(src, path),
    }
}

/// Per-tensor search report: program, bytes per node, search statistics and time.
fn search_report(
    src: &safetensors::SourceFile<'_>,
    search: &SearchOptions,
    choice: &PriorChoice,
    path: &Path,
) -> SearchReport {
    let start = Instant::now();
    let prior = if !search.prior_matters() {
        Prior::uniform()
    } else {
        resolve_prior(src, choice, path)
    };
    let calibrate_seconds = start.elapsed().as_secs_f64();
    let mut tensors = Vec::new();
    let (mut total_in, mut total_out, mut total_s) = (0u64, 0u64, 0f64);
    for (i, t) in src.tensors().iter().enumerate() {
        let bytes = src.tensor_bytes(i);
        let Some(words) = Words::from_le_bytes(t.dtype.word_bits(), bytes) else {
            continue;
        };
        let start = Instant::now();
        let syn = synth::synthesize_with_prior(&words, Some(t.dtype), search, &prior);
        let secs = start.elapsed().as_secs_f64();
        let nodes = size_report(&syn.program)
            .iter()
            .map(|ns| NodeBytes {
                depth: ns.depth,
                own_bytes: ns.own_bytes,
                subtree_bytes: ns.subtree_bytes,
            })
            .collect();
        total_in += bytes.len() as u64;
        total_out += syn.bytes;
        total_s += secs;
        tensors.push(TensorSearch {
            name: t.name.clone(),
            dtype: t.dtype.name(),
            original_bytes: bytes.len(),
            program_bytes: syn.bytes,
            program: syn.program.to_string(),
            nodes,
            expansions: syn.stats.expansions,
            candidates: syn.stats.candidates,
            pruned: syn.stats.pruned,
            budget_exhausted: syn.stats.budget_exhausted,
            literal_fallback: syn.stats.literal_fallback,
            seconds: secs,
        });
    }
    SearchReport {
        prior: prior.source,
        calibrate_seconds,
        tensors,
        total_original_bytes: total_in,
        total_program_bytes: total_out,
        total_search_seconds: total_s,
    }
}

/// One row of the search ablation table.
#[derive(Clone, Debug, Serialize)]
pub struct AblationRow {
    /// The file.
    #[serde(serialize_with = "lossy")]
    pub file: PathBuf,
    /// `A*` or `first complete`.
    pub search: &'static str,
    /// `uniform` or `learned`.
    pub prior: &'static str,
    /// The search budget.
    pub budget: u64,
    /// Bytes of the file's tensors.
    pub original_bytes: u64,
    /// Bytes of their programs.
    pub program_bytes: u64,
    /// Time in seconds, calibration included.
    pub seconds: f64,
}

/// The search ablation (docs/ablation.md): per file, program bytes and time of budgets
/// 0, 1, 6, 32, 256 with uniform and calibrated priors, and depth first to the first
/// complete program; `limits` gives the program-shape limits. Each row done is one
/// [`ProgressEvent::Item`] to `obs`.
///
/// # Errors
/// [`Error::Io`] if a file cannot be read; [`Error::Source`] if it is not a valid
/// `.safetensors` file.
pub fn ablation(
    files: &[PathBuf],
    limits: &SearchOptions,
    obs: &dyn Observer,
) -> Result<Vec<AblationRow>> {
    use rayon::prelude::*;
    let mut rows = Vec::new();
    for path in &bench_files(files)? {
        let bytes = read_source(path)?;
        let src = safetensors::parse(&bytes).map_err(|e| Error::source(path, e))?;
        // Searched as `compress` searches them: a tensor of more than REGION_WORDS
        // words in regions of that many, each its own search, joined by one `concat`.
        let region = writer::REGION_WORDS;
        let words: Vec<(Dtype, Words)> = src
            .tensors()
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                Words::from_le_bytes(t.dtype.word_bits(), src.tensor_bytes(i)).map(|w| (t.dtype, w))
            })
            .collect();
        let original: u64 = (0..src.tensors().len())
            .map(|i| src.tensor_bytes(i).len() as u64)
            .sum();
        let mut configs: Vec<(&'static str, &'static str, u64)> = Vec::new();
        for b in [0, 1, 6, 32, 256] {
            configs.push(("A*", "uniform", b));
            if b > 0 {
                configs.push(("A*", "learned", b));
            }
        }
        configs.push(("first complete", "uniform", 6));
        configs.push(("first complete", "uniform", 32));
        for (mode, pname, budget) in configs {
            let start = Instant::now();
            let prior = if pname == "learned" {
                writer::calibrate_source(&src, path)
            } else {
                Prior::uniform()
            };
            let opts = SearchOptions {
                first_complete: mode != "A*",
                budget,
                ..limits.clone()
            };
            let out: u64 = words
                .par_iter()
                .map(|(d, w)| {
                    synth::synthesize_in_regions(w, Some(*d), None, &opts, &prior, region).bytes
                })
                .sum();
            let seconds = start.elapsed().as_secs_f64();
            obs.progress(
                "",
                ProgressEvent::Item {
                    label: mode,
                    bytes: original,
                },
            );
            rows.push(AblationRow {
                file: path.clone(),
                search: mode,
                prior: pname,
                budget,
                original_bytes: original,
                program_bytes: out,
                seconds,
            });
        }
    }
    Ok(rows)
}
