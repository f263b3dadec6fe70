//! Production prior (docs/design.md §6; paper Eq. 9-10): the cost `-log2 q` of applying a
//! production in a context, used to order the search. The prior never changes legality,
//! sizes or the final comparison; the archive never stores it.
//!
//! `q(p | c)` is estimated from counts of productions in winning programs (see
//! [`super::calibrate`]) with additive smoothing `(count + alpha) / (total + alpha * K)`
//! over the `K` production kinds. A context seen fewer than [`MIN_SUPPORT`] times backs
//! off to a coarser one: full context, then (width, parent, position, depth), then
//! (width), then no context at all.
//!
//! The file form is JSON ([`Prior::to_json`], [`Prior::from_json`]) with a schema
//! version, context keys a person can read (`w16 d1 p- c0 BF16 s4 z0 u2 r0 e0`) and
//! counts by production name, so a prior can be inspected and edited by hand.

use super::decompose::{ProdKind, ALL_PRODS};
use crate::tensor::{Dtype, Words};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version written to and required from prior files.
pub const SCHEMA: &str = "brevis-prior/1";

/// Contexts seen fewer times than this back off to a coarser level.
pub const MIN_SUPPORT: u64 = 2;

/// Where a production is applied: what the prior conditions on (DESIGN §6). The data
/// features are bucketed coarsely and computed on a sample of the hole's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// Width in bits of the hole.
    pub width: u32,
    /// Depth of the hole (root = 1).
    pub depth: u32,
    /// The parent's production, `None` at the root.
    pub parent: Option<ProdKind>,
    /// Position among the parent's children (0 at the root).
    pub pos: u32,
    /// The tensor's dtype at the root, `None` below it.
    pub dtype: Option<Dtype>,
    /// Features of the hole's words.
    pub feat: Features,
}

/// Coarse features of a word stream, each a small bucket number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Features {
    /// `floor(log2(len)) / 4`: 0 up to 15 words, 1 up to 255, ...
    pub size: u8,
    /// Fraction of zero words: 0 none, 1 under 1/2, 2 at least 1/2.
    pub zero: u8,
    /// Distinct words over words sampled: 0 under 1/64, 1 under 1/4, 2 more.
    pub distinct: u8,
    /// Fraction of words equal to their predecessor: 0 under 1/8, 1 under 1/2, 2 more.
    pub repeat: u8,
    /// Order-0 entropy of adjacent differences, bits per word, in steps of 4 (max 4).
    pub diff_entropy: u8,
}

/// Words of the sample the features are computed on.
const FEATURE_SAMPLE: usize = 4096;

/// The number of distinct words of `sample` (words of `width` bits), and the counts of
/// the distinct differences of adjacent words (mod `2^width`) in ascending order of the
/// difference, by direct tables of `2^width` entries (`width <= 16`).
fn distinct_and_diffs_dense(sample: &[u64], width: u32) -> (usize, Vec<u64>) {
    let size = 1usize << width;
    let mask = crate::tensor::mask(width);
    let mut seen = vec![false; size];
    let mut per = vec![0u32; size];
    for &x in sample {
        seen[(x & mask) as usize] = true;
    }
    for p in sample.windows(2) {
        per[(p[1].wrapping_sub(p[0]) & mask) as usize] += 1;
    }
    let counts = per.iter().filter(|&&c| c > 0).map(|&c| c.into()).collect();
    (seen.iter().filter(|&&b| b).count(), counts)
}

/// [`distinct_and_diffs_dense`] by sorting, for any width.
fn distinct_and_diffs_sorted(sample: &[u64], width: u32) -> (usize, Vec<u64>) {
    let mask = crate::tensor::mask(width);
    let mut sorted = sample.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut diffs: Vec<u64> = sample
        .windows(2)
        .map(|p| p[1].wrapping_sub(p[0]) & mask)
        .collect();
    diffs.sort_unstable();
    let mut counts = Vec::new();
    let mut i = 0;
    while i < diffs.len() {
        let j = i + diffs[i..].iter().take_while(|&&d| d == diffs[i]).count();
        counts.push((j - i) as u64);
        i = j;
    }
    (sorted.len(), counts)
}

impl Features {
    /// Features of `w`, from a deterministic sample of at most 4,096 words spread over
    /// the stream in 16 blocks.
    pub fn of(w: &Words) -> Features {
        let n = w.len();
        if n == 0 {
            return Features::default();
        }
        let sample: Vec<u64> = if n <= FEATURE_SAMPLE {
            w.iter().collect()
        } else {
            let (blocks, len) = (16, FEATURE_SAMPLE / 16);
            let mut v = Vec::with_capacity(FEATURE_SAMPLE);
            for b in 0..blocks {
                let start = (n - len) * b / (blocks - 1);
                v.extend((start..start + len).map(|i| w.get(i)));
            }
            v
        };
        let m = sample.len();
        let zeros = sample.iter().filter(|&&x| x == 0).count();
        let repeats = sample.windows(2).filter(|p| p[0] == p[1]).count();
        let (distinct, counts) = if w.width() <= 16 {
            distinct_and_diffs_dense(&sample, w.width())
        } else {
            distinct_and_diffs_sorted(&sample, w.width())
        };
        let pairs = m.saturating_sub(1);
        let h = if pairs == 0 {
            0.0
        } else {
            crate::stats::entropy_bits(counts.iter().copied()) / pairs as f64
        };
        let bucket3 = |num: usize, lo: usize, hi: usize| -> u8 {
            // 0 when num * lo < m, 1 when num * hi < m, else 2 (thresholds m/lo, m/hi)
            if num * lo < m {
                0
            } else if num * hi < m {
                1
            } else {
                2
            }
        };
        Features {
            size: ((usize::BITS - 1 - n.leading_zeros()) / 4) as u8,
            zero: if zeros == 0 {
                0
            } else if zeros * 2 < m {
                1
            } else {
                2
            },
            distinct: bucket3(distinct, 64, 4),
            repeat: bucket3(repeats, 8, 2),
            diff_entropy: ((h / 4.0) as u8).min(4),
        }
    }
}

impl Context {
    /// The readable keys of this context from the finest level to the coarsest.
    pub fn keys(&self) -> [String; 4] {
        let parent = self.parent.map_or("-", ProdKind::name);
        let dtype = self.dtype.map_or("-", Dtype::name);
        let f = &self.feat;
        let mid = format!("w{} d{} p{} c{}", self.width, self.depth, parent, self.pos);
        [
            format!(
                "{mid} {dtype} s{} z{} u{} r{} e{}",
                f.size, f.zero, f.distinct, f.repeat, f.diff_entropy
            ),
            mid,
            format!("w{}", self.width),
            String::new(),
        ]
    }
}

/// A production prior. [`Prior::uniform`] charges every production the same cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Additive smoothing constant.
    pub alpha: f64,
    /// Counts of productions per context key, for every backoff level (the key of the
    /// coarsest level is the empty string). Empty for the uniform prior.
    pub counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// Where the counts came from (file, tensors, budget), for people.
    #[serde(default)]
    pub source: String,
}

// `alpha` is checked to be finite on load and counts are integers, so equality is total.
impl Eq for Prior {}

impl Default for Prior {
    fn default() -> Self {
        Prior::uniform()
    }
}

/// Largest prior file [`Prior::read_file`] reads, in bytes: a calibrated prior takes a
/// few KiB.
pub const MAX_PRIOR_FILE_BYTES: u64 = 16 << 20;

/// Why [`Prior::read_file`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadPriorError {
    /// The file cannot be opened or read, or is not a regular file.
    #[error(transparent)]
    Io(crate::Error),
    /// The file was read but holds no prior: what is wrong with it.
    #[error("{0}")]
    NotAPrior(String),
}

/// Why a prior file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum PriorError {
    /// Not JSON, or JSON of another shape than a prior (the message says which).
    #[error("{}", json_problem(.0))]
    Json(#[from] serde_json::Error),
    /// Another schema version.
    #[error("prior schema is {actual:?}, expected {expected:?}")]
    Schema {
        expected: &'static str,
        actual: String,
    },
    /// A production name that does not exist.
    #[error("prior names an unknown production {0:?}")]
    Production(String),
    /// Smoothing must be positive so that every production keeps a finite cost.
    #[error("prior alpha must be positive and finite, got {0}")]
    Alpha(f64),
}

/// "Not valid JSON" for a syntax error or a cut-off file; for valid JSON of another
/// shape (a config file given by mistake, say), that it is not a prior and how to make
/// one.
fn json_problem(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Data => {
            format!("is JSON but not a Brevis prior ({e}); `brevis calibrate` writes one")
        }
        Category::Io | Category::Syntax | Category::Eof => {
            format!("prior is not valid JSON: {e}")
        }
    }
}

impl Prior {
    /// Every production costs 1 bit.
    pub fn uniform() -> Prior {
        Prior {
            schema: SCHEMA.to_string(),
            alpha: 1.0,
            counts: BTreeMap::new(),
            source: "uniform".to_string(),
        }
    }

    /// Whether this is the uniform prior (no counts).
    pub fn is_uniform(&self) -> bool {
        self.counts.is_empty()
    }

    /// Adds one observation of `prod` in `ctx` at every backoff level.
    pub fn observe(&mut self, ctx: &Context, prod: ProdKind) {
        for key in ctx.keys() {
            *self
                .counts
                .entry(key)
                .or_default()
                .entry(prod.name().to_string())
                .or_default() += 1;
        }
    }

    /// The counts used for `ctx`: the finest level seen at least [`MIN_SUPPORT`] times.
    fn level(&self, ctx: &Context) -> Option<&BTreeMap<String, u64>> {
        let keys = ctx.keys();
        let mut coarsest = None;
        for key in &keys {
            if let Some(c) = self.counts.get(key) {
                if c.values().sum::<u64>() >= MIN_SUPPORT {
                    return Some(c);
                }
                coarsest = Some(c);
            }
        }
        coarsest
    }

    /// Cost in bits (`-log2 q`, Eq. 10) of applying `prod` in `ctx`.
    pub fn cost(&self, ctx: &Context, prod: ProdKind) -> f64 {
        match self.level(ctx) {
            None => 1.0,
            Some(c) => self.cost_in(c, prod),
        }
    }

    fn cost_in(&self, c: &BTreeMap<String, u64>, prod: ProdKind) -> f64 {
        let total: u64 = c.values().sum();
        let k = ALL_PRODS.len() as f64;
        let n = c.get(prod.name()).copied().unwrap_or(0);
        let q = (n as f64 + self.alpha) / (total as f64 + self.alpha * k);
        -q.log2()
    }

    /// A lower bound on the cost of filling one hole of width `width`: the cheapest
    /// production in any context of that width at any level (the admissible heuristic
    /// of a relaxed grammar that keeps only the type width). Never above any
    /// [`Prior::cost`] for a context of that width.
    pub fn min_cost(&self, width: u32) -> f64 {
        if self.is_uniform() {
            return 1.0;
        }
        let w = format!("w{width}");
        let mut best: f64 = 1.0; // the cost of a context with no counts at all
        for (key, c) in &self.counts {
            let first = key.split(' ').next().unwrap_or("");
            if key.is_empty() || first == w {
                for &p in &ALL_PRODS {
                    best = best.min(self.cost_in(c, p));
                }
            }
        }
        best.max(0.0)
    }

    /// The file form: pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a prior always serializes")
    }

    /// The xxh3-64 of the prior's JSON ([`Prior::to_json`]) without its `source` note:
    /// what an archive records of the prior that built a record
    /// ([`crate::archive::format::Settings::prior_digest`]). The same counts give the
    /// same digest whatever file or path they were learned from, so compressing one
    /// input twice gives the same bytes.
    pub fn digest(&self) -> u64 {
        let bare = Prior {
            source: String::new(),
            ..self.clone()
        };
        crate::hash::xxh3_64(bare.to_json().as_bytes())
    }

    /// Reads and checks the prior file at `path`: a regular file (a pipe or a device is
    /// refused before it is opened, so nothing blocks or reads forever) of at most
    /// [`MAX_PRIOR_FILE_BYTES`], UTF-8 text, and a prior ([`Prior::from_json`]).
    ///
    /// # Errors
    /// [`ReadPriorError::Io`] if the file cannot be opened or read or is not a regular
    /// file; [`ReadPriorError::NotAPrior`] if it is too large, not text or not a prior.
    pub fn read_file(path: &std::path::Path) -> Result<Prior, ReadPriorError> {
        use std::io::Read as _;
        let meta = crate::files::regular_file(path).map_err(ReadPriorError::Io)?;
        let too_large = || {
            ReadPriorError::NotAPrior(format!(
                "larger than {} MiB: not a prior (a calibrated prior takes a few KiB)",
                MAX_PRIOR_FILE_BYTES >> 20
            ))
        };
        if meta.len() > MAX_PRIOR_FILE_BYTES {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_PRIOR_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| ReadPriorError::Io(crate::Error::io(path, "cannot read", e)))?;
        if bytes.len() as u64 > MAX_PRIOR_FILE_BYTES {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| ReadPriorError::NotAPrior("not text (UTF-8): not a prior".into()))?;
        Prior::from_json(&text).map_err(|e| ReadPriorError::NotAPrior(e.to_string()))
    }

    /// Parses and checks a prior file.
    ///
    /// Fails when the text is not JSON of the prior's shape, the schema version differs
    /// from [`SCHEMA`], a production name is unknown or `alpha` is not positive.
    pub fn from_json(text: &str) -> Result<Prior, PriorError> {
        let p: Prior = serde_json::from_str(text)?;
        if p.schema != SCHEMA {
            return Err(PriorError::Schema {
                expected: SCHEMA,
                actual: p.schema,
            });
        }
        if !(p.alpha > 0.0 && p.alpha.is_finite()) {
            return Err(PriorError::Alpha(p.alpha));
        }
        for c in p.counts.values() {
            if let Some(bad) = c.keys().find(|k| ProdKind::from_name(k).is_none()) {
                return Err(PriorError::Production(bad.clone()));
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct tables for words of up to 16 bits count what sorting counts (the way
    /// every width was counted before), exactly: on a real BF16 tensor's sample, its high
    /// byte, an 11-bit field, bits, and differences that wrap around (0 -> 65535 and
    /// 1 -> 0 share a difference).
    #[test]
    fn dense_features_match_sorted_features() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo.safetensors");
        let bytes = std::fs::read(path).unwrap();
        let src = crate::archive::safetensors::parse(&bytes).unwrap();
        let t = src
            .tensors()
            .iter()
            .position(|t| t.name == "encoder.layer.0.intermediate.dense.weight")
            .unwrap();
        let real = Words::from_le_bytes(16, src.tensor_bytes(t)).unwrap();
        let cases = [
            real.map_to(8, |x| x >> 8),
            real.map_to(11, |x| (x >> 4) & 0x7FF),
            real.map_to(1, |x| x >> 15),
            Words::from_fn(16, 5000, |i| [0, 65535, 1, 0, 7][i % 5]),
            real,
        ];
        for w in &cases {
            let sample: Vec<u64> = w.iter().take(FEATURE_SAMPLE).collect();
            let dense = distinct_and_diffs_dense(&sample, w.width());
            assert_eq!(dense, distinct_and_diffs_sorted(&sample, w.width()));
            assert!(dense.0 >= 2 && dense.1.iter().sum::<u64>() == sample.len() as u64 - 1);
        }
        let cycle: Vec<u64> = [0, 65535, 1, 0, 7].repeat(3).to_vec();
        // 14 differences: 65535, 2, 65535, 7, 65529 twice, then 65535, 2, 65535, 7;
        // ascending: 2 three times, 7 three, 65529 twice, 65535 six.
        assert_eq!(distinct_and_diffs_dense(&cycle, 16), (4, vec![3, 3, 2, 6]));
        assert_eq!(
            Features::of(&cases[3]),
            Features {
                size: 3,
                zero: 1,
                distinct: 0,
                repeat: 0,
                diff_entropy: 0
            }
        );
    }

    /// A cut-off file is "not valid JSON"; valid JSON of another shape says it is not a
    /// prior and how to make one; a calibrated prior's own text loads.
    #[test]
    fn prior_errors_tell_bad_json_from_json_that_is_not_a_prior() {
        let cut = Prior::from_json("{").unwrap_err().to_string();
        assert!(cut.starts_with("prior is not valid JSON: EOF"), "{cut}");
        let config = Prior::from_json(r#"{"hidden_size": 384}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            config,
            "is JSON but not a Brevis prior (missing field `schema` at line 1 column 20); \
             `brevis calibrate` writes one"
        );
        let p = Prior::uniform();
        assert_eq!(Prior::from_json(&p.to_json()).unwrap(), p);
    }
}
