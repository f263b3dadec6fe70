//! The program of each record: synthesis per region of a large tensor (an explicit
//! `concat`), a group's words as one stream or each tensor's own, and the checks and
//! fallback to a literal every synthesized program passes.

use super::encoded::{Encoded, RegionSum};
use super::fault::{test_fault, Fault};
use super::options::CompressOptions;
use super::plan::{PlannedRecord, RecordKind};
use crate::archive::safetensors::SourceFile;
use crate::dsl::{program_len, Node, Ty};
use crate::error::Warning;
use crate::hash::xxh3_64;
use crate::synth::{synthesize_matrix, PriorChoice, SearchStats};
use crate::tensor::{Dtype, Words};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Encodes record `rec`: its program. A group gets the smaller of one
/// program for all its tensors' words and a `concat` of each tensor's own program.
pub(super) fn encode_item_whole(
    src: &SourceFile<'_>,
    rec: &PlannedRecord,
    opts: &CompressOptions,
    release: &(dyn Fn(&[u8]) + Sync),
) -> Encoded {
    let bytes = rec.source(src);
    let dtype = rec.dtype(src);
    let width = dtype.map_or(8, Dtype::word_bits);
    let describe = || match rec.kind {
        RecordKind::Header => "header".to_string(),
        RecordKind::Tensor(t) => format!("tensor {:?}", src.tensors()[t].name),
        RecordKind::Gap { begin, end } => format!("gap at data bytes [{begin}, {end})"),
        RecordKind::Group => format!(
            "group of {} tensors from {:?}",
            rec.tensors.len(),
            src.tensors()[rec.tensors[0]].name
        ),
    };
    let rows_of = |t: usize| {
        let shape = &src.tensors()[t].shape;
        (shape.len() >= 2).then(|| shape[0])
    };
    let rows = match rec.kind {
        RecordKind::Tensor(t) => rows_of(t),
        _ => None,
    };
    let (mut node, mut search, mut warning, mut regions) = program_in_regions(
        bytes,
        REGION_WORDS,
        EARLY_RELEASE_BYTES,
        (width, dtype, rows),
        opts,
        describe,
        release,
    );
    // A group is also coded tensor by tensor, and kept so when smaller; not at the fast
    // level, where that costs more than the group (each small tensor pays a literal's or
    // a layout's fixed costs: fracast0-f32 5.2 -> 1.3 ms, 3.9x; fracast0-int8-f32 4.4x)
    // for at most 0.015 percentage points of any corpus file (silero-vad-16k-f32; the
    // fracast0 files' archives are unchanged).
    if rec.kind == RecordKind::Group && opts.search.level != crate::synth::Level::Fast {
        let mut kids = Vec::with_capacity(rec.tensors.len());
        let mut each = SearchStats::default();
        let mut each_warning = None;
        // At the default level's budget a tensor of the role (its name with the layer
        // numbers taken out) and length of an earlier tensor of the group that was
        // searched replays that tensor's program when that costs at most REPLAY_SLACK
        // more bytes a word, as the regions of a large tensor do: the same bias or norm
        // of each layer.
        let mut searched: HashMap<(String, usize), (Node, f64)> = HashMap::new();
        let replays = replays(opts);
        for &t in &rec.tensors {
            let words = Arc::new(
                Words::from_le_bytes(width, src.tensor_bytes(t))
                    .expect("the parser checked every byte length against its dtype"),
            );
            let name = &src.tensors()[t].name;
            let role = replays.then(|| (role_of(name), words.len()));
            let replayed = role
                .as_ref()
                .and_then(|r| searched.get(r))
                .and_then(|(p, per_word)| replay_within(p, *per_word, &words, opts));
            let kid = if let Some(node) = replayed {
                node
            } else {
                let (kid, s, w) = program_for(words.clone(), dtype, rows_of(t), opts, || {
                    format!("tensor {name:?}")
                });
                each.absorb(&s);
                each_warning = each_warning.or(w);
                if let Some(role) = role {
                    let per_word = program_len(&kid) as f64 / words.len() as f64;
                    searched.entry(role).or_insert((kid.clone(), per_word));
                }
                kid
            };
            kids.push(kid);
        }
        let apart =
            Node::concat(kids).expect("a group's tensors share the width and are not empty");
        search.absorb(&each);
        if program_len(&apart) < program_len(&node) {
            node = apart;
            warning = each_warning;
            regions = None;
        }
    }
    Encoded {
        program: Some(node),
        reference: None,
        regions,
        search,
        warning,
    }
}

/// Words per region of a large tensor (DESIGN §8): a tensor of more words is split into
/// regions of this many words (the last one shorter; for a matrix whose row fits, of
/// whole rows, at most this many words: [`crate::synth::regions_of`]), each synthesized
/// on its own (in parallel), and stored as an explicit `Concat` of their programs.
///
/// 1 Mi words bounds the words and search state per worker to one region's (2 MiB of
/// BF16), lets one large tensor use every thread, and lets each region's literal tables
/// follow its own statistics, which more than pays for the extra tables: against 16 Mi
/// words, minilm-l6-v2-bf16 is 49,221 bytes smaller (34.07% -> 34.18%), the FP8 file
/// 49,221 smaller (29.08% -> 29.23%), whisper-tiny-en-f16 4,538 smaller; smaller regions
/// gain a little more bytes but cost search time (whisper at 256 Ki words: +50% time).
pub const REGION_WORDS: usize = 1 << 20;

/// How many more bytes a word a region's replay of the first region's program may cost
/// than that program did on the first region before the region is searched instead
/// ([`crate::synth::replay`]; the default level). Replaying saves the search on every
/// region of a large tensor after its first.
const REPLAY_SLACK: f64 = 0.01;

/// Whether `compress` replays programs (on a large tensor's later regions, and on a
/// group's tensors of a role it has searched): at the default level's budget; a larger
/// budget asked for searches every target.
fn replays(opts: &CompressOptions) -> bool {
    opts.search.level == crate::synth::Level::Default
        && opts.search.budget <= crate::synth::Level::Default.budget()
}

/// `program` replayed on `words` ([`crate::synth::replay`]) when that costs at most
/// [`REPLAY_SLACK`] more bytes a word than `per_word`, at most the raw words' bytes,
/// and (when `opts.verify`) restores `words`; `None` otherwise.
fn replay_within(
    program: &Node,
    per_word: f64,
    words: &Words,
    opts: &CompressOptions,
) -> Option<Node> {
    let node = crate::synth::replay::replay(program, words)?;
    let (len, bytes) = (words.len(), program_len(&node));
    let raw = (len as u64 * u64::from(words.width())).div_ceil(8);
    (bytes as f64 <= per_word * (1.0 + REPLAY_SLACK) * len as f64
        && bytes <= raw
        && (!opts.verify || crate::dsl::matches(&node, words) == Ok(true)))
    .then_some(node)
}

/// A tensor's role: its name with every run of decimal digits written `#`, so that the
/// same parameter of each layer (`layer.3.attention.output.dense.bias`) shares one.
fn role_of(name: &str) -> String {
    let mut role = String::with_capacity(name.len());
    let mut digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !digits {
                role.push('#');
            }
            digits = true;
        } else {
            role.push(c);
            digits = false;
        }
    }
    role
}

/// Tensors of at least this many bytes have their source pages released region by
/// region as the workers read them ([`program_in_regions`]), so that a multi-GiB matrix
/// is never resident at once. A smaller tensor's pages stay mapped until the writer has
/// hashed them for the whole-file checksum, as a single region's do: released early,
/// every page was faulted in again there (minilm's 23 MB embedding: `--jobs 2` about 8%
/// slower). Either way the source bytes in flight are bounded by the pipeline's budget
/// (twice the largest record); what early release saves is at most this much per
/// tensor, inside the 64 MiB of slack of the peak bound (4 x the largest tensor +
/// 64 MiB).
pub const EARLY_RELEASE_BYTES: usize = 64 << 20;

/// The program of a region's `bytes` read as words of `width` bits: one synthesized
/// program (of a matrix of `rows` rows, when given), or for more than `region_words`
/// ([`REGION_WORDS`]) words a `Concat` of one per region (each worker holds one
/// region's words at a time), with each region's words and the xxh3-64 of its bytes
/// (what a regions record stores, format 4). Warnings of the regions
/// are joined. The regions of at least `early_release` ([`EARLY_RELEASE_BYTES`]) bytes
/// are passed to `release` as they are read.
#[allow(clippy::too_many_arguments)]
pub(super) fn program_in_regions(
    bytes: &[u8],
    region_words: usize,
    early_release: usize,
    (width, dtype, rows): (u32, Option<Dtype>, Option<u64>),
    opts: &CompressOptions,
    region: impl Fn() -> String + Sync,
    release: &(dyn Fn(&[u8]) + Sync),
) -> (Node, SearchStats, Option<Warning>, Option<Vec<RegionSum>>) {
    let word_bytes = width.div_ceil(8) as usize;
    let words_of = |b: &[u8]| {
        Words::from_le_bytes(width, b)
            .expect("the parser checked every byte length against its dtype")
    };
    let n = bytes.len() / word_bytes.max(1);
    if n <= region_words {
        let (node, stats, warning) =
            program_for(Arc::new(words_of(bytes)), dtype, rows, opts, region);
        return (node, stats, warning, None);
    }
    let (region_words, cols) = crate::synth::regions_of(n, rows, region_words);
    // Regions are synthesized in parallel (on the caller's pool); each holds only its
    // own words. A large tensor's source pages are released region by region as they are
    // read; a smaller one's stay for the writer, which hashes and then releases them
    // (released here, they were faulted in again there: see `EARLY_RELEASE_BYTES`).
    let early = bytes.len() >= early_release;
    let chunk_bytes = region_words * word_bytes;
    // Region `k`'s program: searched, or (given `first`, the first region's program)
    // `first` replayed on its words when that costs at most REPLAY_SLACK more bytes a
    // word than `first` did on its own region.
    let region_program = |k: usize, chunk: &[u8], first: Option<(&Node, f64)>| {
        let checksum = xxh3_64(chunk);
        let words = Arc::new(words_of(chunk));
        if early {
            release(chunk);
        }
        let (at, len) = (k * region_words, words.len());
        let rows = cols.map(|c| (len / c) as u64);
        // Ordinary weights are not replayed: the search takes the fast layout for them
        // at once, one pass and one plan a field, where a replay re-plans each literal
        // with every codec and precision (the replays were a third of the FP8 file's
        // default compression, on its 23 MB embedding).
        let ordinary = first.is_some() && crate::synth::fast::ordinary_weights(&words, dtype, rows);
        let replayed = first
            .filter(|_| !ordinary)
            .and_then(|(p, per_word)| replay_within(p, per_word, &words, opts));
        let (node, stats, warning) = match replayed {
            Some(node) => (node, SearchStats::default(), None),
            None => program_by(
                words,
                dtype,
                rows,
                opts,
                || format!("{}, words [{at}, {})", region(), at + len),
                ordinary,
            ),
        };
        let r = RegionSum {
            words: len as u64,
            checksum,
        };
        (node, stats, warning, r)
    };
    let replays = replays(opts);
    let mut parts: Vec<(Node, SearchStats, Option<Warning>, RegionSum)> = Vec::new();
    let rest = if replays {
        let head = &bytes[..chunk_bytes.min(bytes.len())];
        parts.push(region_program(0, head, None));
        &bytes[head.len()..]
    } else {
        bytes
    };
    let first = replays.then(|| {
        let (p, _, _, r) = &parts[0];
        (p, crate::dsl::program_len(p) as f64 / r.words.max(1) as f64)
    });
    let skip = parts.len();
    let more: Vec<_> = rest
        .par_chunks(chunk_bytes)
        .enumerate()
        .map(|(k, chunk)| region_program(skip + k, chunk, first))
        .collect();
    parts.extend(more);
    let mut children = Vec::with_capacity(parts.len());
    let mut regions = Vec::with_capacity(parts.len());
    let mut stats = SearchStats::default();
    let mut warning: Option<Warning> = None;
    for (node, s, w, r) in parts {
        stats.absorb(&s);
        if warning.is_none() {
            warning = w;
        }
        children.push(node);
        regions.push(r);
    }
    let node = Node::concat(children).expect("regions share the width and are not empty");
    (node, stats, warning, Some(regions))
}

/// Calibrates a prior on the tensors of `src` with the paper's defaults
/// ([`crate::synth::calibrate`]); the same for any thread count.
pub fn calibrate_source(src: &SourceFile<'_>, name: &Path) -> crate::synth::Prior {
    use crate::synth::calibrate::{calibrate, CalibrateOptions, Tensor};
    let infos = src.tensors();
    let tensors: Vec<Tensor> = infos
        .iter()
        .enumerate()
        .map(|(i, t)| Tensor {
            name: &t.name,
            dtype: t.dtype,
            words: src.tensor_bytes(i).len() * 8 / t.dtype.word_bits() as usize,
        })
        .collect();
    let load = |i: usize, n: usize| {
        let dtype = infos[i].dtype;
        let bytes = src.tensor_bytes(i);
        let take = (n * dtype.word_bits() as usize)
            .div_ceil(8)
            .min(bytes.len());
        Words::from_le_bytes(dtype.word_bits(), &bytes[..take]).unwrap_or_else(|| Words::empty(8))
    };
    let source = name.display().to_string();
    calibrate(&tensors, load, &CalibrateOptions::default(), &source)
}

/// Synthesizes a program for `words`; checks its type (always) and its output (when
/// `opts.verify`), falling back to a literal with a warning if either is wrong.
pub(super) fn program_for(
    shared: Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &CompressOptions,
    region: impl Fn() -> String,
) -> (Node, SearchStats, Option<Warning>) {
    program_by(shared, dtype, rows, opts, region, false)
}

/// [`program_for`]; with `layout`, the fast layout ([`crate::synth::fast::program`])
/// without asking the search (for words the caller found to be ordinary weights, which
/// the search would code so: its gates are not run twice).
fn program_by(
    shared: Arc<Words>,
    dtype: Option<Dtype>,
    rows: Option<u64>,
    opts: &CompressOptions,
    region: impl Fn() -> String,
    layout: bool,
) -> (Node, SearchStats, Option<Warning>) {
    let words: &Words = &shared;
    let literal = |stats: SearchStats| {
        let stats = SearchStats {
            literal_fallback: true,
            ..stats
        };
        (Node::lit(words), stats)
    };
    if words.is_empty() {
        let (node, stats) = literal(SearchStats::default());
        return (node, stats, None);
    }
    let uniform = crate::synth::Prior::uniform();
    let prior = match &opts.prior {
        PriorChoice::Given(p) => p.as_ref(),
        _ => &uniform,
    };
    let mut syn = if layout {
        let (program, bytes) = crate::synth::fast::program(words, dtype);
        crate::synth::Synthesis {
            program,
            bytes,
            stats: SearchStats::default(),
        }
    } else {
        synthesize_matrix(&shared, dtype, rows, &opts.search, prior)
    };
    if test_fault() == Some(Fault::BadProgram) {
        if let Ok(wrong) = Node::map(crate::dsl::MapFn::Xor(1), syn.program.clone()) {
            syn.program = wrong;
        }
    }
    let want = Ty::new(words.width(), words.len() as u64);
    let problem = if syn.program.ty() != want {
        Some(format!(
            "program type {} instead of {want}",
            syn.program.ty()
        ))
    } else if opts.verify {
        match crate::dsl::matches(&syn.program, words) {
            Ok(true) => None,
            Ok(false) => Some("its output differs".to_string()),
            Err(e) => Some(e.to_string()),
        }
    } else {
        None
    };
    match problem {
        None => (syn.program, syn.stats, None),
        Some(what) => {
            let (node, mut stats) = literal(syn.stats);
            stats.unrestored = true;
            let warning = Warning::Fallback {
                region: region(),
                what,
            };
            (node, stats, Some(warning))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::{execute, Op};
    use crate::tensor::{Dtype, Words};
    use crate::test_util::lcg;

    #[test]
    fn large_regions_become_an_explicit_concat_that_round_trips() {
        let words = Words::from_fn(16, 1000, |i| (i as u64 * 7919) % 300);
        let mut bytes = Vec::new();
        words.write_le_bytes(&mut bytes);
        let opts = CompressOptions::default();
        // Each region's bytes are released once read: record them as offsets.
        let released = std::sync::Mutex::new(Vec::new());
        let regions_releasing = |region_words: usize, early_release: usize| {
            let release = |part: &[u8]| {
                let at = part.as_ptr() as usize - bytes.as_ptr() as usize;
                released.lock().unwrap().push((at, part.len()));
            };
            let opts = &opts;
            program_in_regions(
                &bytes,
                region_words,
                early_release,
                (16, Some(Dtype::BF16), None),
                opts,
                String::new,
                &release,
            )
        };
        let regions = |region_words: usize| regions_releasing(region_words, 0);
        let (node, _, warning, sums) = regions(300);
        assert!(warning.is_none());
        // Each region's words and the checksum of its bytes, for its record's table.
        let sums = sums.expect("four regions");
        let lens: Vec<u64> = sums.iter().map(|r| r.words).collect();
        assert_eq!(lens, [300, 300, 300, 100]);
        assert_eq!(sums[1].checksum, xxh3_64(&bytes[600..1200]));
        assert_eq!(sums[3].checksum, xxh3_64(&bytes[1800..]));
        match node.op() {
            Op::Concat(children) => assert_eq!(children.len(), 4),
            op => panic!("expected concat, got {op:?}"),
        }
        assert_eq!(execute(&node, 1000).unwrap(), words);
        let mut parts = std::mem::take(&mut *released.lock().unwrap());
        parts.sort_unstable();
        assert_eq!(parts, vec![(0, 600), (600, 600), (1200, 600), (1800, 200)]);
        let (single, _, _, none) = regions(1000);
        assert_eq!(none, None);
        // A single region is released by the caller, not here.
        assert!(released.lock().unwrap().is_empty());
        assert!(!matches!(single.op(), Op::Concat(_)));
        // Nor are the regions of a tensor smaller than the early-release size: the same
        // program, its pages left to the caller.
        let (kept, _, _, _) = regions_releasing(300, bytes.len() + 1);
        assert!(released.lock().unwrap().is_empty());
        assert_eq!(kept, node);
    }

    /// A tensor's role: its name with each run of digits written `#`.
    #[test]
    fn roles_take_the_layer_numbers_out() {
        assert_eq!(
            role_of("encoder.layer.11.attention.self.query.bias"),
            "encoder.layer.#.attention.self.query.bias"
        );
        assert_eq!(role_of("h.0.mlp.c_fc.b2"), "h.#.mlp.c_fc.b#");
        assert_eq!(role_of("norm"), "norm");
    }

    /// At the default level a group's tensor of a role an earlier tensor of the group
    /// was searched for (the same bias of the next layer) replays that program when it
    /// costs no more a word, and is searched otherwise (noise); the group restores.
    #[test]
    fn a_groups_tensors_of_one_role_replay_the_first_ones_program() {
        // BF16-like weights; later layers hold the first one's words in another order
        // (the same histogram of every field, so the replay costs the same).
        let mut next = lcg(9);
        let n = 2048;
        let first: Vec<u64> = (0..n)
            .map(|_| {
                let exp = 120 - (next() % 256).trailing_zeros() as u64;
                ((next() & 1) << 15) | (exp << 7) | (next() & 0x7f)
            })
            .collect();
        let mut noise = 5u64;
        let tensors: Vec<(String, Vec<u64>)> = (0..3)
            .map(|layer| {
                let words = match layer {
                    2 => (0..n)
                        .map(|_| {
                            noise = noise.wrapping_mul(6364136223846793005).wrapping_add(1);
                            noise >> 48
                        })
                        .collect(),
                    _ => (0..n).map(|i| first[(i * (2 * layer + 1)) % n]).collect(),
                };
                (format!("layer.{layer}.bias"), words)
            })
            .collect();
        let mut header = String::from("{");
        let mut data = Vec::new();
        for (k, (name, words)) in tensors.iter().enumerate() {
            let at = data.len();
            Words::from_u64s(16, words).write_le_bytes(&mut data);
            header.push_str(&format!(
                "{}\"{name}\":{{\"dtype\":\"BF16\",\"shape\":[{n}],\"data_offsets\":[{at},{}]}}",
                if k == 0 { "" } else { "," },
                data.len()
            ));
        }
        header.push('}');
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&data);
        let src = crate::archive::safetensors::parse(&file).unwrap();
        let plan = super::super::plan::plan_records(&src, &[None, None, None]);
        let group = plan
            .iter()
            .find(|r| r.kind == RecordKind::Group)
            .expect("three small BF16 tensors make a group");
        assert_eq!(group.tensors, [0, 1, 2]);
        let opts = CompressOptions::default();
        let enc = encode_item_whole(&src, group, &opts, &|_: &[u8]| {});
        let all: Vec<u64> = tensors.iter().flat_map(|(_, w)| w.clone()).collect();
        let program = enc.program.expect("a group has a program");
        assert_eq!(
            execute(&program, 1 << 20).unwrap(),
            Words::from_u64s(16, &all)
        );
        // Searched: the group whole, layer 0 and the noise of layer 2; layer 1 replays.
        let searched = |words: &[u64]| {
            program_for(
                Arc::new(Words::from_u64s(16, words)),
                Some(Dtype::BF16),
                None,
                &opts,
                String::new,
            )
        };
        let whole = searched(&all).1.expansions;
        let (zero, two) = (searched(&tensors[0].1), searched(&tensors[2].1));
        assert!(zero.1.expansions > 0 && two.1.expansions > 0);
        assert_eq!(
            enc.search.expansions,
            whole + zero.1.expansions + two.1.expansions
        );
        let again = crate::synth::replay::replay(&zero.0, &Words::from_u64s(16, &tensors[1].1))
            .expect("the first layer's program replays");
        assert_eq!(program_len(&again), program_len(&zero.0));
        if let Op::Concat(kids) = program.op() {
            assert_eq!(kids[1], again, "layer 1 replays layer 0's program");
        }
    }

    /// At the default level the regions of a large tensor of ordinary weights are each
    /// coded in the fast layout (what the search takes for them), not by a replay of
    /// the first region's program, and the tensor restores.
    #[test]
    fn regions_of_ordinary_weights_take_the_layout() {
        let mut next = lcg(9);
        let n = 3 * 20_000;
        let words = Words::from_fn(16, n, |_| {
            let exp = 127 - (next() % 4096).trailing_zeros() as u64;
            ((next() & 1) << 15) | (exp << 7) | (next() & 0x7f)
        });
        let mut bytes = Vec::new();
        words.write_le_bytes(&mut bytes);
        let opts = CompressOptions::default();
        assert_eq!(opts.search.level, crate::synth::Level::Default);
        let (node, _, warning, sums) = program_in_regions(
            &bytes,
            20_000,
            usize::MAX,
            (16, Some(Dtype::BF16), None),
            &opts,
            String::new,
            &|_: &[u8]| {},
        );
        assert!(warning.is_none());
        assert_eq!(sums.map(|s| s.len()), Some(3));
        let Op::Concat(children) = node.op() else {
            panic!("expected concat, got {:?}", node.op());
        };
        for (k, child) in children.iter().enumerate() {
            let region = Words::from_fn(16, 20_000, |i| words.get(k * 20_000 + i));
            assert!(crate::synth::fast::ordinary_weights(
                &region,
                Some(Dtype::BF16),
                None
            ));
            let (layout, _) = crate::synth::fast::program(&region, Some(Dtype::BF16));
            assert!(*child == layout, "region {k} is not the fast layout");
        }
        assert_eq!(execute(&node, n as u64).unwrap(), words);
    }

    /// At the default level a large tensor's regions after the first replay the first
    /// region's program (nothing expanded for them) where it costs at most
    /// [`REPLAY_SLACK`] more a word, and restore their words; a larger budget searches
    /// every region, and a region whose words differ (noise where the first holds
    /// weights) is searched.
    #[test]
    fn later_regions_replay_the_first_regions_program() {
        // BF16-like weights: sign, an exponent of five values, a noisy mantissa.
        let weight = |i: u64| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (h & 0x8000) | (0x3C00 + (h % 5) * 0x80) | (h >> 7 & 0x7F)
        };
        let words = Words::from_fn(16, 4096, |i| weight(i as u64));
        let mut bytes = Vec::new();
        words.write_le_bytes(&mut bytes);
        let run = |opts: &CompressOptions, bytes: &[u8]| {
            program_in_regions(
                bytes,
                1024,
                usize::MAX,
                (16, Some(Dtype::BF16), None),
                opts,
                String::new,
                &|_: &[u8]| {},
            )
        };
        let opts = CompressOptions::default();
        let (node, stats, warning, _) = run(&opts, &bytes);
        assert!(warning.is_none());
        assert_eq!(execute(&node, 1 << 20).unwrap(), words);
        let first = program_for(
            Arc::new(words.slice(0, 1024)),
            Some(Dtype::BF16),
            None,
            &opts,
            String::new,
        );
        assert!(first.1.expansions > 0);
        assert_eq!(
            stats.expansions, first.1.expansions,
            "only the first is searched"
        );
        assert_eq!(node.children()[0], first.0);
        for c in &node.children()[1..] {
            assert_eq!(
                crate::synth::decompose::ProdKind::of(c),
                crate::synth::decompose::ProdKind::of(&first.0)
            );
        }
        // A larger budget: every region searched.
        let mut wider = CompressOptions::default();
        wider.search.budget = 2;
        let (node2, stats2, _, _) = run(&wider, &bytes);
        assert_eq!(execute(&node2, 1 << 20).unwrap(), words);
        assert!(stats2.expansions > first.1.expansions * 3);
        // The last region noise: the first region's program replayed there costs more a
        // word than it did on the first, so the region is searched.
        let mut mixed = bytes.clone();
        for (i, b) in mixed[3 * 2048..].iter_mut().enumerate() {
            *b = ((i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8;
        }
        let (node3, _, _, _) = run(&opts, &mixed);
        let want = Words::from_le_bytes(16, &mixed).unwrap();
        assert_eq!(execute(&node3, 1 << 20).unwrap(), want);
        let searched = program_for(
            Arc::new(want.slice(3072, 4096)),
            Some(Dtype::BF16),
            None,
            &opts,
            String::new,
        );
        assert_eq!(node3.children()[3], searched.0);
    }
}
