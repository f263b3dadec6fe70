//! Linking: each tensor's counterpart (the same bytes in an earlier shard, or a base
//! tensor), and a tensor coded as the smallest of its own program and the programs of its
//! residual against the counterpart.

use super::encoded::{Chosen, Encoded};
use super::options::{CompressOptions, Links};
use super::plan::{PlannedRecord, RecordKind};
use super::programs::{encode_item_whole, EARLY_RELEASE_BYTES, REGION_WORDS};
use crate::archive::base::{Counterpart, OpenedSource};
use crate::archive::format::{RefOp, SourceEntry, SourceRole};
use crate::archive::safetensors::SourceFile;
use crate::codec::CodecId;
use crate::dsl::{program_len, Lit, Node, Ty};
use crate::hash::xxh3_64;
use crate::synth::SearchStats;
use crate::tensor::{Dtype, Words};
use rayon::prelude::*;
use std::sync::Arc;

/// The sources a file is coded against and each tensor's counterpart in them.
pub(super) struct Linked {
    /// The sources the archive lists: base files first (in the base's order), then
    /// shards, each only if some tensor has a counterpart in it.
    pub(super) sources: Vec<(SourceEntry, Arc<OpenedSource>)>,
    /// For each tensor of the source file ([`SourceFile::tensors`]): its counterpart,
    /// `source` an index into `sources`.
    pub(super) of: Vec<Option<Counterpart>>,
}

/// Finds each tensor's counterpart: the same bytes in an earlier shard (by checksum,
/// length and dtype; confirmed byte for byte when encoding), else a base tensor
/// ([`BaseSet::counterparts`]).
pub(super) fn link_tensors(src: &SourceFile<'_>, links: Option<&Links>) -> Linked {
    let n = src.tensors().len();
    let mut of: Vec<Option<(SourceRole, Counterpart)>> = vec![None; n];
    let Some(links) = links else {
        return Linked {
            sources: Vec::new(),
            of: vec![None; n],
        };
    };
    // An identical tensor: tensor `k` of source `s` in `role`.
    let exact = |role, (s, k)| {
        (
            role,
            Counterpart {
                source: s,
                tensor: k,
                exact: true,
            },
        )
    };
    if !links.shard_tensors.is_empty() {
        let found: Vec<Option<(usize, usize)>> = (0..n)
            .into_par_iter()
            .map(|t| {
                let info = &src.tensors()[t];
                let bytes = src.tensor_bytes(t);
                if bytes.is_empty() {
                    return None;
                }
                let key = (xxh3_64(bytes), bytes.len() as u64, info.dtype);
                links.shard_tensors.get(&key).copied()
            })
            .collect();
        for (t, f) in found.into_iter().enumerate() {
            of[t] = f.map(|at| exact(SourceRole::Shard, at));
        }
    }
    if let Some(base) = &links.base {
        let list: Vec<(&str, Dtype, &[u64])> = src
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), t.dtype, t.shape.as_slice()))
            .collect();
        for (t, c) in base.counterparts(&list).into_iter().enumerate() {
            if of[t].is_none() && src.tensors()[t].byte_len() > 0 {
                of[t] = c.map(|c| (SourceRole::Base, c));
            }
        }
        // A tensor with no counterpart may still be a base tensor under another name (a
        // tied copy): the first base tensor of its dtype and length with its bytes.
        let left: Vec<usize> = (0..n)
            .filter(|&t| of[t].is_none() && src.tensors()[t].byte_len() > 0)
            .collect();
        let found: Vec<Option<(usize, usize)>> = left
            .par_iter()
            .map(|&t| {
                let info = &src.tensors()[t];
                let bytes = src.tensor_bytes(t);
                base.sources.iter().enumerate().find_map(|(s, source)| {
                    source.tensors().iter().enumerate().find_map(|(k, b)| {
                        let same = b.dtype == info.dtype
                            && b.bytes == info.byte_len()
                            && source.tensor_bytes(k).is_ok_and(|x| *x == *bytes);
                        same.then_some((s, k))
                    })
                })
            })
            .collect();
        for (&t, f) in left.iter().zip(found) {
            of[t] = f.map(|at| exact(SourceRole::Base, at));
        }
    }
    // Number the sources in use: base files first, then shards.
    let mut used: Vec<(SourceRole, usize)> =
        of.iter().flatten().map(|(r, c)| (*r, c.source)).collect();
    used.sort_unstable();
    used.dedup();
    let sources = used
        .iter()
        .map(|&(role, s)| {
            let source = match role {
                SourceRole::Base => links.base.as_ref().expect("base in use").sources[s].clone(),
                SourceRole::Shard => links.shards[s].clone(),
            };
            (source.entry(role), source)
        })
        .collect();
    let of = of
        .into_iter()
        .map(|c| {
            c.map(|(role, c)| Counterpart {
                source: used
                    .binary_search(&(role, c.source))
                    .expect("numbered above"),
                ..c
            })
        })
        .collect();
    Linked { sources, of }
}

/// Bytes a reference record's head costs over a data record's: source, tensor (LEB128,
/// usually one or two bytes each), the source tensor's checksum and the op.
pub(super) const REFERENCE_HEAD_EXTRA: u64 = 12;

/// Tensors of at most this many bytes with a counterpart are also searched alone, always:
/// the search costs little there, and an estimate of so few words says little.
pub(super) const SMALL_TENSOR_BYTES: usize = 64 << 10;

/// A larger tensor is searched alone only if its residual is estimated to cost more than
/// this share of its own words' estimate ([`Estimates::own`]). The estimate is an order-0
/// entropy, which a program of real weights rarely beats by more than a few percent (the
/// README's "order-0 field bound": 33.67% against Brevis's 34.2% on minilm); a residual
/// estimated under 80% of it is smaller than the program the search would find.
pub(super) const SEARCH_OWN_ABOVE: f64 = 0.8;

/// Both ops are coded exactly when the other op's estimate is within this factor of the
/// better one's; otherwise only the better one.
pub(super) const BOTH_OPS_WITHIN: f64 = 1.03;

/// Encodes record `rec`: as [`encode_item_whole`], or for a tensor with a counterpart
/// ([`Linked::of`]) the smallest of its own program and the programs of its residual
/// against the counterpart by XOR and by subtraction (an identical tensor: `const 0`
/// against it; a shard's counterpart is used only when identical).
///
/// Which of those are worth making is estimated first, on a sample of the words
/// ([`Estimates`]): only the op the estimate picks is coded (both when their estimates
/// are within [`BOTH_OPS_WITHIN`]), and the tensor is searched alone only when it is
/// small or its residual is not clearly smaller ([`SEARCH_OWN_ABOVE`]). A residual is
/// coded region by region as the smallest of a literal of its words and its bucket
/// literals, plain or offset by the base word's exponent, and only the codings whose
/// lower bounds ([`crate::codec::bucket::Counts::bound_len`], the order-0 entropy) do
/// not rule them out are encoded ([`residual_program`]).
pub(super) fn encode_linked(
    src: &SourceFile<'_>,
    rec: &PlannedRecord,
    opts: &CompressOptions,
    release: &(dyn Fn(&[u8]) + Sync),
    linked: &Linked,
) -> Encoded {
    let RecordKind::Tensor(t) = rec.kind else {
        return encode_item_whole(src, rec, opts, release);
    };
    let Some(c) = linked.of[t] else {
        return encode_item_whole(src, rec, opts, release);
    };
    let bytes = rec.source(src);
    let source = &linked.sources[c.source].1;
    let info = &src.tensors()[t];
    let Ok(base) = source.tensor_bytes(c.tensor) else {
        return encode_item_whole(src, rec, opts, release);
    };
    if base.len() != bytes.len() {
        return encode_item_whole(src, rec, opts, release);
    }
    let source_checksum = xxh3_64(&base);
    let chosen = |op| Chosen {
        source: c.source,
        tensor: c.tensor,
        source_checksum,
        op,
    };
    let width = info.dtype.word_bits();
    if *base == *bytes {
        let ty = Ty::new(width, bytes.len() as u64 / u64::from(width / 8));
        return Encoded {
            program: Some(Node::constant(ty, 0).expect("a tensor's type is valid")),
            reference: Some(chosen(RefOp::Xor)),
            regions: None,
            search: SearchStats::default(),
            warning: None,
        };
    }
    if c.exact || !matches!(width, 8 | 16 | 32 | 64) {
        return encode_item_whole(src, rec, opts, release);
    }
    let field = info
        .dtype
        .float_layout()
        .map(|[_, e, m]| crate::codec::bucket::Field { shift: m, width: e });
    let est = Estimates::of(bytes, &base, width, field);
    let ops = est.ops();
    let search_own =
        bytes.len() <= SMALL_TENSOR_BYTES || est.residual(ops[0]) > SEARCH_OWN_ABOVE * est.own;
    let mut best = Encoded {
        program: None,
        reference: None,
        regions: None,
        search: SearchStats::default(),
        warning: None,
    };
    let mut best_len = u64::MAX;
    if search_own {
        best = encode_item_whole(src, rec, opts, release);
        best_len = best.program.as_ref().map_or(u64::MAX, program_len);
    }
    for op in ops {
        let cap = best_len.saturating_sub(REFERENCE_HEAD_EXTRA);
        let residual = residual_program(bytes, &base, op, width, field, cap, opts.verify);
        if let Some(node) = residual {
            let len = program_len(&node) + REFERENCE_HEAD_EXTRA;
            if len < best_len {
                best_len = len;
                best.program = Some(node);
                best.reference = Some(chosen(op));
                // A reference record has no regions of its own.
                best.regions = None;
                best.warning = None;
            }
        }
    }
    if !search_own && bytes.len() >= EARLY_RELEASE_BYTES {
        release(bytes);
    }
    debug_assert!(
        best.program.is_some(),
        "a residual is coded when nothing else is"
    );
    best
}

/// Estimates in bytes per word, from a sample of a tensor's words ([`SAMPLE_RUNS`] runs
/// of [`SAMPLE_RUN_WORDS`] words spread over it), of what [`encode_linked`] chooses
/// between: its residual by each op (the least of [`residual_program`]'s lower bounds)
/// and its own words (their order-0 entropy; of the top 16 bits plus the rest raw for
/// wider words).
#[derive(Clone, Copy, Debug)]
pub(super) struct Estimates {
    pub(super) xor: f64,
    pub(super) sub: f64,
    pub(super) own: f64,
}

/// Runs of words an estimate samples.
pub(super) const SAMPLE_RUNS: usize = 16;
/// Words in a sampled run (a tensor of at most `SAMPLE_RUNS * SAMPLE_RUN_WORDS` words is
/// read whole).
pub(super) const SAMPLE_RUN_WORDS: usize = 4096;

impl Estimates {
    fn of(
        target: &[u8],
        base: &[u8],
        width: u32,
        field: Option<crate::codec::bucket::Field>,
    ) -> Estimates {
        let wb = crate::tensor::container_bytes(width);
        let n = target.len() / wb;
        let (runs, run) = if n <= SAMPLE_RUNS * SAMPLE_RUN_WORDS {
            (1, n)
        } else {
            (SAMPLE_RUNS, SAMPLE_RUN_WORDS)
        };
        let mut t = Vec::with_capacity(runs * run * wb);
        let mut b = Vec::with_capacity(runs * run * wb);
        for r in 0..runs {
            // Run r starts at its share of the words, so the runs spread over the tensor.
            let at = if runs == 1 {
                0
            } else {
                (n - run) * r / (runs - 1)
            };
            t.extend_from_slice(&target[at * wb..(at + run) * wb]);
            b.extend_from_slice(&base[at * wb..(at + run) * wb]);
        }
        let words = |x: &[u8]| Words::from_le_bytes(width, x).expect("a byte width");
        let (tw, bw) = (words(&t), words(&b));
        let m = tw.len().max(1) as f64;
        let per_op = |op: RefOp| {
            let r = words(&crate::archive::base::residual(&t, &b, op, wb));
            Bounds::of(&r, &bw, op, field).least() as f64 / m
        };
        let own = if width <= 16 {
            crate::stats::stream_entropy_bits(&tw, crate::codec::MAX_TABLE_SYMBOLS)
                .unwrap_or(f64::from(width))
                / 8.0
        } else {
            let top = crate::tensor::extract(tw.buf(), width - 16, 16);
            crate::stats::stream_entropy_bits(&top, crate::codec::MAX_TABLE_SYMBOLS).unwrap_or(16.0)
                / 8.0
                + f64::from(width - 16) / 8.0
        };
        Estimates {
            xor: per_op(RefOp::Xor),
            sub: per_op(RefOp::Sub),
            own,
        }
    }

    fn residual(&self, op: RefOp) -> f64 {
        match op {
            RefOp::Xor => self.xor,
            RefOp::Sub => self.sub,
        }
    }

    /// The ops worth coding, the better first.
    fn ops(&self) -> Vec<RefOp> {
        let (better, worse) = if self.sub < self.xor {
            (RefOp::Sub, RefOp::Xor)
        } else {
            (RefOp::Xor, RefOp::Sub)
        };
        if self.residual(worse) <= self.residual(better) * BOTH_OPS_WITHIN {
            vec![better, worse]
        } else {
            vec![better]
        }
    }
}

/// One way [`residual_program`] may code a region of a residual.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Coding {
    /// A literal of the words ([`crate::codec::encode_best`]).
    Words,
    /// Bucket literal, plain.
    Buckets,
    /// Bucket literal, offset by the base words' exponent.
    Offset,
}

/// What [`residual_program`] knows of a region of a residual before encoding it: lower
/// bounds in bytes of its [`Coding`]s, ascending (its bucket literals'
/// [`crate::codec::bucket::Counts::bound_len`] and, for words of at most 16 bits, a
/// literal of its words': their order-0 entropy less 16 bytes), and the counts they come
/// from, which the encoders take.
pub(super) struct Bounds {
    pub(super) bounds: Vec<(u64, Coding)>,
    pub(super) counts: crate::codec::bucket::Counts,
    pub(super) histogram: Option<Vec<(u64, u64)>>,
}

impl Bounds {
    fn of(
        r: &Words,
        base: &Words,
        op: RefOp,
        field: Option<crate::codec::bucket::Field>,
    ) -> Bounds {
        use crate::codec::bucket::{self, Context};
        let ctx = field.map(|f| {
            (
                Context {
                    words: base,
                    start: 0,
                },
                f,
            )
        });
        let counts = bucket::count(r, op == RefOp::Sub, ctx);
        let mut bounds = vec![(counts.bound_len(false).expect("plain"), Coding::Buckets)];
        if let Some(b) = counts.bound_len(true) {
            bounds.push((b, Coding::Offset));
        }
        let histogram = (r.width() <= 16)
            .then(|| crate::stats::histogram(r, crate::codec::MAX_TABLE_SYMBOLS))
            .flatten();
        if let Some(h) = &histogram {
            let bits = crate::stats::entropy_bits(h.iter().map(|&(_, c)| c)) * r.len() as f64;
            bounds.push((((bits / 8.0) as u64).saturating_sub(16), Coding::Words));
        }
        bounds.sort_by_key(|&(b, c)| (b, c as u8));
        Bounds {
            bounds,
            counts,
            histogram,
        }
    }

    fn least(&self) -> u64 {
        self.bounds.first().map_or(0, |&(b, _)| b)
    }
}

/// The residual of a tensor's bytes against its base's by `op` (little-endian
/// `width`-bit words), as one literal per region of [`REGION_WORDS`] words under a
/// `concat`: each the smallest of the region's [`Coding`]s, only those its lower bound
/// does not rule out encoded ([`Bounds`]). `None` when the residual cannot come under
/// `cap` bytes (the sum of the regions' least bounds is not below it). With `verify`, a
/// bucket literal is decoded and one that does not give its words back (a defect)
/// replaced by a plain literal. A region's residual is made twice (for its bounds, then
/// to encode it), so no more than the regions in work are held at once.
pub(super) fn residual_program(
    target: &[u8],
    base: &[u8],
    op: RefOp,
    width: u32,
    field: Option<crate::codec::bucket::Field>,
    cap: u64,
    verify: bool,
) -> Option<Node> {
    use crate::codec::bucket::{self, Context, Params};
    let wb = crate::tensor::container_bytes(width);
    let words_of = |b: &[u8]| Words::from_le_bytes(width, b).expect("a byte width");
    let region = |(t, b): (&[u8], &[u8])| {
        (
            words_of(&crate::archive::base::residual(t, b, op, wb)),
            words_of(b),
        )
    };
    let region_bytes = REGION_WORDS * wb;
    let bounds: Vec<Bounds> = target
        .par_chunks(region_bytes)
        .zip(base.par_chunks(region_bytes))
        .map(|tb| {
            let (r, b) = region(tb);
            Bounds::of(&r, &b, op, field)
        })
        .collect();
    if bounds.iter().map(Bounds::least).sum::<u64>() >= cap {
        return None;
    }
    let zigzag = op == RefOp::Sub;
    let lits: Vec<Node> = target
        .par_chunks(region_bytes)
        .zip(base.par_chunks(region_bytes))
        .zip(bounds)
        .map(|(tb, bounds)| {
            let (r, b) = region(tb);
            let ty = Ty::new(width, r.len() as u64);
            let ctx = Context {
                words: &b,
                start: 0,
            };
            let mut best: Option<Lit> = None;
            let Bounds {
                bounds,
                counts,
                mut histogram,
            } = bounds;
            for (bound, coding) in bounds {
                if best.as_ref().is_some_and(|l| l.body.len() as u64 <= bound) {
                    break;
                }
                let lit = match coding {
                    Coding::Words => {
                        let hist = histogram.take().expect("bounded from its histogram");
                        crate::codec::encode_best_with_histogram(&r, hist).into()
                    }
                    Coding::Buckets | Coding::Offset => {
                        let context = (coding == Coding::Offset)
                            .then(|| (ctx, field.expect("offset needs a field")));
                        Lit {
                            codec: CodecId::Bucket,
                            body: bucket::encode_counted(&r, Params { zigzag, context }, &counts)
                                .into(),
                        }
                    }
                };
                let smaller = best
                    .as_ref()
                    .is_none_or(|b| (lit.body.len(), lit.codec) < (b.body.len(), b.codec));
                if smaller {
                    best = Some(lit);
                }
            }
            let lit = best.expect("every region has a coding");
            if verify && lit.codec == CodecId::Bucket {
                let back = bucket::decode(&lit.body, width, r.len(), Some(ctx));
                if back.as_ref().ok() != Some(&r) {
                    debug_assert!(false, "a bucket literal did not give its words back");
                    return Node::lit(&r);
                }
            }
            Node::lit_encoded(ty, lit).expect("a literal has its type")
        })
        .collect();
    Some(if lits.len() == 1 {
        lits.into_iter().next().expect("one region")
    } else {
        Node::concat(lits).expect("regions are non-empty")
    })
}
