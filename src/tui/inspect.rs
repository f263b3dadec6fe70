//! Everything the tree, text, "why this size" and plot views show about one tensor,
//! computed once on a worker thread from its program ([`inspect`]).
//!
//! Nothing here is estimated: node sizes are the library's exact
//! [`crate::dsl::size_report`], codec alternatives are the exact body sizes
//! of [`codec::all_sizes`] framed like the wire format frames a `Lit`, and entropies are
//! order-0 empirical entropies of the actual words.
//!
//! Why one file of about 1,000 lines (its tests are in `inspect/tests.rs`): the per-node
//! rows, the codec alternatives of each literal and the entropies are computed in one walk
//! of the program, and the views that draw them read them together.

use super::model::{RecordInfo, Sharing};
use crate::archive::escape_name;
use crate::codec::{self, CodecId, ALL_CODECS, MAX_TABLE_SYMBOLS};
use crate::dsl::exec::split_fields;
use crate::dsl::wire::uleb_len;
use crate::dsl::{program_len, size_report, text, Lit, MergeFn, Node, Op, Ty};
use crate::stats::{entropy_bits, histogram};
use crate::tensor::{Dtype, Words};

/// Most distinct words counted for an entropy before giving up (bounds memory).
pub const MAX_COUNTED: usize = 1 << 20;

/// One node of the program, in pre-order.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    /// Depth (root = 0).
    pub depth: usize,
    /// Operator and parameters (`merge fields[1,8,7]`).
    pub label: String,
    /// The text-form line (label, type, small literal words).
    pub line: String,
    /// The node's type.
    pub ty: Ty,
    /// The node's own bytes (tag, parameters, framing, literal body).
    pub own_bytes: u64,
    /// Bytes of the node and all its descendants.
    pub subtree_bytes: u64,
    /// Number of direct children.
    pub children: usize,
    /// Pre-order index of the parent.
    pub parent: Option<usize>,
    /// What the node's stream is, in words a person uses (`the exponent`, `byte 1`).
    pub role: String,
    /// For a `Lit`: its codec alternatives and entropy.
    pub lit: Option<LitInfo>,
}

/// What a `Lit` costs with each codec, and how much information its words carry.
#[derive(Clone, Debug, PartialEq)]
pub struct LitInfo {
    /// The codec it is stored with.
    pub chosen: CodecId,
    /// Bytes of the whole node (tag, body length, body) with each codec, in
    /// [`ALL_CODECS`] order; `None` where a codec does not apply.
    pub node_bytes: codec::select::Sizes,
    /// Order-0 empirical entropy of its words, in bits per word; `None` when it has more
    /// than [`MAX_COUNTED`] distinct words or could not be decoded.
    pub entropy_bits: Option<f64>,
    /// Number of distinct words (`None`: more than [`MAX_COUNTED`]).
    pub distinct: Option<u64>,
    /// Bytes of the body that are parameters and tables rather than payload
    /// ([`codec::select::table_len`]).
    pub table_bytes: u64,
    /// Bytes of the body (tables and coded words; the node adds its tag and length).
    pub body_bytes: u64,
    /// Why the literal could not be decoded, if it could not.
    pub error: Option<String>,
}

/// Entropy of one float field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldStat {
    /// `sign`, `exponent` or `mantissa`.
    pub name: &'static str,
    /// Width in bits.
    pub width: u32,
    /// Order-0 entropy in bits per word (`None`: too many distinct values to count).
    pub entropy_bits: Option<f64>,
    /// Distinct values of the field (`None`: too many to count).
    pub distinct: Option<u64>,
}

/// The "why this size" analysis.
#[derive(Clone, Debug, PartialEq)]
pub struct Why {
    /// Words in the tensor.
    pub words: u64,
    /// Width of a word in bits.
    pub width: u32,
    /// Bits per word the program achieves (program bytes * 8 / words).
    pub achieved_bits: f64,
    /// Order-0 entropy of whole words in bits per word (`None`: too many distinct).
    pub whole_entropy: Option<f64>,
    /// Distinct whole words (`None`: more than [`MAX_COUNTED`]).
    pub distinct: Option<u64>,
    /// For float dtypes: entropy of sign, exponent and mantissa.
    pub fields: Vec<FieldStat>,
    /// Sign and exponent entropy plus the mantissa stored raw, in bits per word.
    pub field_bound_bits: Option<f64>,
    /// Whether the order-0 entropy of whole words is a reference a code could approach:
    /// not when there are about as many words as distinct values (fewer than two words
    /// per value), where any code must also store the values themselves.
    pub whole_meaningful: bool,
    /// The same for the field bound, judged by the exponent's distinct values.
    pub fields_meaningful: bool,
    /// Pre-order index of the node with the most own bytes.
    pub largest: usize,
    /// Plain sentences on what limits the size.
    pub sentences: Vec<String>,
    /// The reference of the words in bytes, as `brevis why` and the Archive view count
    /// it ([`crate::job::why::Reference`]): the smaller order-0 bound, or the raw words
    /// where neither is a reference.
    pub reference_bytes: u64,
}

/// A histogram to plot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// What is counted (`exponent of BF16 words`).
    pub title: String,
    /// `(first value, count)` per bin, in increasing order: every bin between the
    /// smallest and largest present one, or only the present ones when that range is
    /// too wide to plot. Values of signed integer dtypes are signed (sign-extended);
    /// i128 holds both those and every unsigned 64-bit word.
    pub bins: Vec<(i128, u64)>,
    /// Values each bin spans: 1 when a bin counts one value, `w` when bin `v` counts the
    /// values `v..=v + w - 1`.
    pub bin_width: u64,
}

/// Everything shown about one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspection {
    /// The tensor's index in the source.
    pub tensor: usize,
    /// Its program.
    pub program: Node,
    /// The program's text form.
    pub text: String,
    /// The program's serialized length in bytes (the sum of every node's own bytes).
    pub total_bytes: u64,
    /// Nodes in pre-order.
    pub nodes: Vec<NodeInfo>,
    /// The "why this size" analysis.
    pub why: Why,
    /// Histogram of the tensor's values (the exponent for floats).
    pub hist: Histogram,
}

/// Analyses tensor `tensor` of dtype `dtype` whose program is `program`; `context` is
/// the base words a reference record's residual program is coded against
/// ([`crate::dsl::execute_in`]), `None` for any other record. `cancel` is polled
/// between steps; returns `None` when it says stop.
///
/// # Errors
/// When the program fails to run (a damaged record, or a residual coded against a
/// base that is not given).
pub fn inspect(
    tensor: usize,
    dtype: Dtype,
    program: Node,
    context: Option<&Words>,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<Inspection>, String> {
    inspect_record(tensor, dtype, program, context, None, cancel)
}

/// [`inspect`] of a program that restores a group record: `group` names its tensors in
/// order, so that the nodes' roles name the group's words and, for a concat of one
/// program per tensor, each tensor.
///
/// # Errors
/// As [`inspect`].
pub fn inspect_record(
    tensor: usize,
    dtype: Dtype,
    program: Node,
    context: Option<&Words>,
    group: Option<&[String]>,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<Inspection>, String> {
    let report = size_report(&program);
    let total_bytes = program_len(&program);
    let mut nodes = Vec::with_capacity(report.len());
    let root_role = match group {
        Some(g) => format!("the group's words ({} tensors)", g.len()),
        None => "the tensor".to_string(),
    };
    // Each node with the position of its first word in the context, where its words
    // line up with the context's (as execute_in hands it down).
    let mut stack: Vec<(&Node, Option<usize>, String, Option<usize>)> =
        vec![(&program, None, root_role, Some(0))];
    // Pre-order walk matching size_report's order.
    while let Some((node, parent, role, start)) = stack.pop() {
        if cancel() {
            return Ok(None);
        }
        let i = nodes.len();
        let r = &report[i];
        let lit = match node.op() {
            Op::Lit(l) => {
                let ctx = context
                    .zip(start)
                    .map(|(words, start)| codec::bucket::Context { words, start });
                Some(lit_info(l, node.ty(), ctx))
            }
            _ => None,
        };
        let mut roles = child_roles(node, &role, dtype, parent.is_none());
        // A group's program as one program per tensor: each part is a tensor.
        if let (None, Some(g), Op::Concat(kids)) = (parent, group, node.op()) {
            if kids.len() == g.len() {
                roles = g
                    .iter()
                    .map(|n| format!("tensor {}", escape_name(n)))
                    .collect();
            }
        }
        let mut starts = Vec::with_capacity(node.children().len());
        let mut at = start;
        for c in node.children() {
            match node.op() {
                Op::Concat(_) => {
                    starts.push(at);
                    at = at.map(|a| a + c.ty().len as usize);
                }
                Op::Map(..) | Op::Merge(..) => starts.push(start),
                _ => starts.push(None),
            }
        }
        for ((c, role), start) in node.children().iter().zip(roles).zip(starts).rev() {
            stack.push((c, Some(i), role, start));
        }
        nodes.push(NodeInfo {
            depth: r.depth,
            label: text::node_label(node),
            line: text::node_line(node),
            ty: node.ty(),
            own_bytes: r.own_bytes,
            subtree_bytes: r.subtree_bytes,
            children: node.children().len(),
            parent,
            role,
            lit,
        });
    }
    if cancel() {
        return Ok(None);
    }
    let words = crate::dsl::execute_in(&program, u64::MAX, context)
        .map_err(|e| format!("program does not run: {e}"))?;
    if cancel() {
        return Ok(None);
    }
    let why = why(dtype, &program, &words, &nodes, total_bytes, cancel);
    let Some(mut why) = why else { return Ok(None) };
    why.reference_bytes = crate::job::why::Reference::of(&words, Some(dtype)).bytes();
    let hist = value_histogram(dtype, &words);
    Ok(Some(Inspection {
        tensor,
        text: program.to_string(),
        program,
        total_bytes,
        nodes,
        why,
        hist,
    }))
}

/// Bytes of a `Lit` node whose body is `body` bytes long: tag, LEB128 length, body.
pub fn lit_node_bytes(body: u64) -> u64 {
    1 + uleb_len(body) + body
}

fn lit_info(lit: &Lit, ty: Ty, context: Option<codec::bucket::Context<'_>>) -> LitInfo {
    let table_bytes = usize::try_from(ty.len)
        .map(|n| codec::select::table_len(lit.codec, &lit.body, ty.width, n))
        .unwrap_or(lit.body.len() as u64);
    match lit.decode_in(ty, context) {
        Ok(words) => {
            let sizes = codec::all_sizes(&words);
            let node_bytes = sizes.map(|s| s.map(lit_node_bytes));
            let h = histogram(&words, MAX_COUNTED);
            LitInfo {
                chosen: lit.codec,
                node_bytes,
                entropy_bits: h.as_ref().map(|h| entropy_bits(h.iter().map(|&(_, c)| c))),
                distinct: h.map(|h| h.len() as u64),
                table_bytes,
                body_bytes: lit.body.len() as u64,
                error: None,
            }
        }
        Err(e) => LitInfo {
            chosen: lit.codec,
            node_bytes: [None; codec::ALL_CODECS.len()],
            entropy_bits: None,
            distinct: None,
            table_bytes,
            body_bytes: lit.body.len() as u64,
            error: Some(e.to_string()),
        },
    }
}

/// Names of the children's streams, from the parent's operator and role.
fn child_roles(node: &Node, role: &str, dtype: Dtype, is_root: bool) -> Vec<String> {
    let k = node.children().len();
    match node.op() {
        Op::Merge(MergeFn::Fields(w), _) => {
            let layout = dtype.float_layout();
            // The whole tensor, or one region of it (a part of a root `Concat`, as
            // `compress` cuts large tensors): its fields are the float's bits.
            let whole = is_root || role == "the tensor";
            // A region, or one tensor of a group's program (`tensor NAME`): named.
            let region = region_of(role).is_some() || role.starts_with("tensor ");
            match layout {
                Some(l) if (whole || region) && l.iter().sum::<u32>() == node.ty().width => {
                    let mut hi = node.ty().width;
                    w.iter()
                        .map(|&b| {
                            let lo = hi.saturating_sub(b);
                            let r = float_bits_role(l, hi, lo);
                            hi = lo;
                            if region {
                                format!("{r} of {role}")
                            } else {
                                r
                            }
                        })
                        .collect()
                }
                _ => w
                    .iter()
                    .enumerate()
                    .map(|(j, &b)| format!("field {} ({}) of {role}", j + 1, bits(u64::from(b))))
                    .collect(),
            }
        }
        Op::Merge(MergeFn::BytePlanes, _) => (0..k)
            .map(|j| match (j, k) {
                (0, 2) => format!("the high byte of {role}"),
                (1, 2) => format!("the low byte of {role}"),
                _ => format!("byte {} (most significant first) of {role}", j + 1),
            })
            .collect(),
        Op::Merge(MergeFn::BitPlanes, _) => (0..k)
            .map(|j| format!("bit plane {} (most significant first) of {role}", j + 1))
            .collect(),
        Op::Concat(_) => (0..k)
            .map(|j| format!("part {} of {k} of {role}", j + 1))
            .collect(),
        Op::Repeat(..) => vec![format!("the repeated unit of {role}")],
        Op::Map(..) => vec![format!("{role}, mapped")],
        Op::Scan(..) => vec![format!("the differences of {role}")],
        Op::BackRef(c) => {
            let mut v = vec![
                format!("the literal words of {role}"),
                format!("the literal runs of {role}'s tokens"),
                format!("the match lengths of {role}'s tokens"),
                format!("the match distances (minus one) of {role}'s tokens"),
            ];
            if c.len() == 5 {
                v.push(format!(
                    "the copy modes (backward, flipped) of {role}'s tokens"
                ));
            }
            v
        }
        Op::Transpose(..) => vec![format!("{role}, column by column")],
        Op::Dequant(d, _) if d.is_cast() => vec![format!(
            "the {} codes of {role} (its values, cast without scales)",
            d.code.name().to_uppercase()
        )],
        Op::Dequant(d, _) => vec![
            format!("the {} codes of {role}", d.code.name().to_uppercase()),
            format!(
                "the scales of {role}, one per {}x{} block",
                d.block_rows, d.block_cols
            ),
        ],
        Op::Lit(_) | Op::Const(_) => vec![],
    }
}

/// For the role of a region of the tensor (`part 3 of 12 of the tensor`, a child of a
/// root `Concat`), the part's number; `None` for any other role.
fn region_of(role: &str) -> Option<&str> {
    let rest = role.strip_prefix("part ")?.strip_suffix(" of the tensor")?;
    let (j, k) = rest.split_once(" of ")?;
    (j.parse::<u64>().is_ok() && k.parse::<u64>().is_ok()).then_some(j)
}

/// The role a node plays in every region of the tensor: `role` without its trailing
/// ` of part J of K of the tensor`, or `role` itself when it names no region's stream.
fn role_across_regions(role: &str) -> &str {
    role.rfind(" of part ")
        .filter(|&i| region_of(&role[i + 4..]).is_some())
        .map_or(role, |i| &role[..i])
}

/// Names the bits `[lo, hi)` of a float word with layout `[sign, exponent, mantissa]`:
/// `the sign`, `the exponent and the top 3 mantissa bits`, `the low 4 mantissa bits`.
pub fn float_bits_role(layout: [u32; 3], hi: u32, lo: u32) -> String {
    let [s, e, m] = layout;
    let fields = [
        ("sign", m + e, m + e + s),
        ("exponent", m, m + e),
        ("mantissa", 0, m),
    ];
    let mut parts = Vec::new();
    for (name, flo, fhi) in fields {
        let (a, b) = (lo.max(flo), hi.min(fhi));
        if a >= b {
            continue;
        }
        let k = b - a;
        parts.push(if a == flo && b == fhi {
            format!("the {name}")
        } else if b == fhi {
            format!("the top {k} {name} bit{}", if k == 1 { "" } else { "s" })
        } else if a == flo {
            format!("the low {k} {name} bit{}", if k == 1 { "" } else { "s" })
        } else {
            format!("{k} middle {name} bit{}", if k == 1 { "" } else { "s" })
        });
    }
    match parts.len() {
        0 | 1 => parts.concat(),
        k => format!("{} and {}", parts[..k - 1].join(", "), parts[k - 1]),
    }
}

fn count(words: &Words) -> (Option<f64>, Option<u64>) {
    match histogram(words, MAX_COUNTED) {
        Some(h) => (
            Some(entropy_bits(h.iter().map(|&(_, c)| c))),
            Some(h.len() as u64),
        ),
        None => (None, None),
    }
}

fn field_names() -> [&'static str; 3] {
    ["sign", "exponent", "mantissa"]
}

fn why(
    dtype: Dtype,
    program: &Node,
    words: &Words,
    nodes: &[NodeInfo],
    total_bytes: u64,
    cancel: &dyn Fn() -> bool,
) -> Option<Why> {
    let n = words.len() as u64;
    let width = words.width();
    let achieved_bits = if n == 0 {
        0.0
    } else {
        total_bytes as f64 * 8.0 / n as f64
    };
    let (whole_entropy, distinct) = count(words);
    if cancel() {
        return None;
    }
    let mut fields = Vec::new();
    let mut field_bound_bits = None;
    let layout = dtype
        .float_layout()
        .filter(|l| l.iter().sum::<u32>() == width);
    if let Some(layout) = layout {
        let parts = split_fields(words, &layout);
        for ((name, w), part) in field_names().into_iter().zip(layout).zip(&parts) {
            let (entropy_bits, distinct) = count(part);
            fields.push(FieldStat {
                name,
                width: w,
                entropy_bits,
                distinct,
            });
        }
        field_bound_bits = match (fields[0].entropy_bits, fields[1].entropy_bits) {
            (Some(s), Some(e)) => Some(s + e + f64::from(layout[2])),
            _ => None,
        };
    }
    let about_one_per_value = |d: Option<u64>| d.is_some_and(|d| d.saturating_mul(2) > n);
    let whole_meaningful = n > 1 && !about_one_per_value(distinct);
    let fields_meaningful = n > 1 && fields.len() == 3 && !about_one_per_value(fields[1].distinct);
    let largest = nodes
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.own_bytes.cmp(&b.1.own_bytes).then(b.0.cmp(&a.0)))
        .map_or(0, |(i, _)| i);
    let mut sentences = Vec::new();
    if n == 0 {
        sentences.push("the tensor is empty: its program is only the empty literal".into());
    } else {
        let (sentence, at) = largest_sentence(nodes, largest, total_bytes);
        sentences.push(sentence);
        let big = &nodes[at];
        if let Some(lit) = &big.lit {
            sentences.extend(lit_sentences(big, lit));
        }
        if cancel() {
            return None;
        }
        if let (Op::Lit(_), Some(layout)) = (program.op(), layout) {
            if n >= 2 {
                let parts = split_fields(words, &layout);
                let split = Node::merge(
                    MergeFn::Fields(layout.to_vec()),
                    parts.iter().map(Node::lit).collect(),
                );
                if let Ok(split) = split {
                    let bytes = program_len(&split);
                    if bytes < total_bytes {
                        sentences.push(format!(
                            "the search budget ran out before a split was tried: \
                             `merge fields[{}]` with a literal per field would take {} bytes \
                             ({} fewer)",
                            join(&layout),
                            thousands(bytes),
                            thousands(total_bytes - bytes)
                        ));
                    } else {
                        sentences.push(format!(
                            "splitting into sign, exponent and mantissa would not help: \
                             {} bytes against {}",
                            thousands(bytes),
                            thousands(total_bytes)
                        ));
                    }
                }
            }
        }
        match (field_bound_bits, whole_entropy) {
            (Some(bound), _) if fields_meaningful => {
                let gap = achieved_bits - bound;
                sentences.push(if gap <= 0.0 {
                    format!(
                        "at {achieved_bits:.2} bits per word it beats the order-0 field bound \
                         of {bound:.2} (it found structure beyond per-field counts)"
                    )
                } else {
                    format!(
                        "at {achieved_bits:.2} bits per word it is {gap:.2} bits above the \
                         order-0 field bound of {bound:.2}"
                    )
                });
            }
            (_, Some(h)) if whole_meaningful => sentences.push(format!(
                "at {achieved_bits:.2} bits per word against {h:.2} bits of order-0 entropy \
                 of whole words"
            )),
            _ if n > 1 => sentences.push(format!(
                "its {} words hold {} distinct values, about one word per value: order-0 \
                 entropy is no reference here, since any code must also store the values",
                thousands(n),
                distinct.map_or_else(|| "too many".to_string(), thousands)
            )),
            _ => sentences
                .push("one word: order-0 entropy is no reference for a single value".to_string()),
        }
    }
    Some(Why {
        words: n,
        width,
        achieved_bits,
        whole_entropy,
        distinct,
        fields,
        field_bound_bits,
        whole_meaningful,
        fields_meaningful,
        largest,
        sentences,
        reference_bytes: 0,
    })
}

/// Where the bytes are: the node with the most bytes of its own (`largest`), or, for a
/// tensor stored as regions (a root `Concat`), the stream whose parts in every region
/// together hold the most, with the largest of them named. "Most of the bytes" only
/// when that is more than half of `total_bytes`. Returns the sentence and the node it
/// names.
fn largest_sentence(nodes: &[NodeInfo], largest: usize, total_bytes: u64) -> (String, usize) {
    // (role across regions, bytes, leaves, index of its largest leaf)
    let mut groups: Vec<(&str, u64, usize, usize)> = Vec::new();
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.children == 0) {
        let key = role_across_regions(&n.role);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => {
                g.1 += n.own_bytes;
                g.2 += 1;
                if n.own_bytes > nodes[g.3].own_bytes {
                    g.3 = i;
                }
            }
            None => groups.push((key, n.own_bytes, 1, i)),
        }
    }
    let (role, bytes, parts, at) = groups
        .into_iter()
        .filter(|g| g.2 > 1)
        .max_by_key(|g| g.1)
        .filter(|g| g.1 > nodes[largest].own_bytes)
        .unwrap_or((&nodes[largest].role, nodes[largest].own_bytes, 1, largest));
    let lead = if bytes * 2 > total_bytes {
        "most of the bytes are in"
    } else {
        "the largest share of the bytes is in"
    };
    let (b, t, pct) = (
        thousands(bytes),
        thousands(total_bytes),
        share(bytes, total_bytes) * 100.0,
    );
    let node = &nodes[at];
    let sentence = if parts > 1 {
        format!(
            "{lead} {role}, over {parts} regions: {b} of {t} bytes ({pct:.1}%); the largest \
             is node #{at} `{}`, {} bytes",
            node.label,
            thousands(node.own_bytes)
        )
    } else {
        format!(
            "{lead} {role}: {b} of {t} bytes ({pct:.1}%), node #{at} `{}`",
            node.label
        )
    };
    (sentence, at)
}

fn lit_sentences(node: &NodeInfo, lit: &LitInfo) -> Vec<String> {
    let w = node.ty.width;
    let mut out = Vec::new();
    let role = &node.role;
    match (lit.distinct, lit.entropy_bits) {
        (Some(d), _) if d as usize > MAX_TABLE_SYMBOLS => out.push(format!(
            "{role} {} {} distinct words, more than {}, so no Huffman or rANS table was \
             possible",
            verb(role, "has", "have"),
            thousands(d),
            thousands(MAX_TABLE_SYMBOLS as u64)
        )),
        (None, _) if lit.error.is_none() => out.push(format!(
            "{role} {} more than {} distinct words, so no Huffman or rANS table was possible",
            verb(role, "has", "have"),
            thousands(MAX_COUNTED as u64)
        )),
        // One word: entropy says nothing about it.
        (Some(_), _) if node.ty.len <= 1 => {}
        (Some(d), _) if d.saturating_mul(2) > node.ty.len => out.push(format!(
            "{role} {} {} words and {} distinct values, about one word per value: no table \
             can pay for itself, so `{}` stores them",
            verb(role, "has", "have"),
            thousands(node.ty.len),
            thousands(d),
            lit.chosen.name()
        )),
        (Some(_), Some(h)) if h >= 0.9 * f64::from(w) => out.push(format!(
            "{role} {} {h:.1} bits of {w}: nearly random, stored almost raw",
            verb(role, "is", "are")
        )),
        (Some(d), Some(h)) => {
            let spent = if node.ty.len == 0 {
                0.0
            } else {
                node.own_bytes as f64 * 8.0 / node.ty.len as f64
            };
            out.push(format!(
                "{role} {} {h:.2} bits of entropy per {w}-bit word ({} distinct); \
                 `{}` spends {spent:.2} bits per word, of which its table takes {} of {} bytes",
                verb(role, "carries", "carry"),
                thousands(d),
                lit.chosen.name(),
                thousands(lit.table_bytes),
                thousands(node.own_bytes)
            ));
        }
        _ => {}
    }
    if let Some(e) = &lit.error {
        out.push(format!("its literal does not decode: {e}"));
    }
    out
}

/// Where a program's bytes go: operators with their parameters and constants, the
/// literals' codec tables, and the literals' coded words. The three add up to
/// [`Inspection::total_bytes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramParts {
    /// Operator tags, parameters, constants and each literal's tag and length, in bytes.
    pub structure: u64,
    /// Codec parameters and tables of the literals, in bytes.
    pub tables: u64,
    /// The literals' coded words, in bytes.
    pub payload: u64,
}

/// Splits the program's bytes into [`ProgramParts`].
pub fn program_parts(ins: &Inspection) -> ProgramParts {
    let (mut tables, mut payload) = (0u64, 0u64);
    for l in ins.nodes.iter().filter_map(|n| n.lit.as_ref()) {
        let t = l.table_bytes.min(l.body_bytes);
        tables += t;
        payload += l.body_bytes - t;
    }
    ProgramParts {
        structure: ins.total_bytes.saturating_sub(tables + payload),
        tables,
        payload,
    }
}

/// One line of the account of a record: indent level, what, bytes.
pub type AccountLine = (usize, String, u64);

/// The why view's account of tensor's record `rec` whose program (its own, its group's,
/// or the copied tensor's) is analysed in `ins`: the record, then its parts, each
/// line's bytes the sum of the lines indented below it, so that they add up to the
/// record's size. Empty for an empty tensor.
pub fn record_account(rec: &RecordInfo, ins: &Inspection) -> Vec<AccountLine> {
    let mut out = Vec::new();
    let head = match &rec.sharing {
        Sharing::Empty => return out,
        Sharing::Own => "record".to_string(),
        Sharing::Group { tensors, .. } => format!("group record (shared by {tensors} tensors)"),
        Sharing::Copy { .. } => "copy record".to_string(),
        Sharing::Reference { .. } => "reference record".to_string(),
    };
    out.push((0, head, rec.record_bytes));
    for (what, b) in &rec.framing {
        out.push((1, (*what).to_string(), *b));
    }
    if !matches!(rec.sharing, Sharing::Copy { .. }) {
        out.push((1, "program".to_string(), rec.program_bytes));
        if rec.program_bytes == ins.total_bytes {
            let p = program_parts(ins);
            out.push((
                2,
                "node tags, parameters, constants".to_string(),
                p.structure,
            ));
            out.push((2, "codec tables".to_string(), p.tables));
            out.push((2, "coded words".to_string(), p.payload));
        }
    }
    out
}

/// Plain sentences on what the record costs beyond the program: a tensor too small for
/// any code to pay, a share of a group record, a copy. `original` is the tensor's
/// original bytes; `copied` the name of the tensor a copy copies.
pub fn record_sentences(rec: &RecordInfo, original: u64, copied: Option<&str>) -> Vec<String> {
    let framing = rec.framing_bytes();
    let (f, o) = (thousands(framing), thousands(original));
    match &rec.sharing {
        Sharing::Empty => vec!["the tensor is empty: it has no record".into()],
        Sharing::Copy { of } => vec![format!(
            "it is a copy of tensor #{of} {} (the same bytes): it costs only the reference, \
             {} bytes; the program below is that tensor's, counted there",
            copied.unwrap_or("?"),
            thousands(rec.record_bytes)
        )],
        Sharing::Group {
            tensors,
            share,
            group_original,
            ..
        } => {
            let mut v = vec![format!(
                "it shares a group record with {} other tensor{} of its dtype, coded as one \
                 stream by one program (below), so the {f} bytes of framing are paid once; \
                 its share is {} of the record's {} bytes, as its {o} of the group's {} \
                 original bytes",
                tensors - 1,
                if *tensors == 2 { "" } else { "s" },
                thousands(*share),
                thousands(rec.record_bytes),
                thousands(*group_original)
            )];
            if *share > original {
                v.push(format!(
                    "even shared, the record costs more than the tensor's {o} bytes: too \
                     small for any code to pay"
                ));
            }
            v
        }
        Sharing::Own if framing >= original => vec![format!(
            "too small for any code to pay: its {o} bytes cost {f} bytes of framing ({}) \
             before any program, so its record is larger than the tensor whatever the code",
            framing_words(rec)
        )],
        Sharing::Own if rec.record_bytes > original => vec![format!(
            "its record is larger than the tensor: the program saves {} of its {o} bytes, \
             less than the {f} bytes of framing ({})",
            thousands(original.saturating_sub(rec.program_bytes)),
            framing_words(rec)
        )],
        Sharing::Reference {
            op,
            role,
            source,
            tensor,
            attached,
        } => {
            let whose = match *role {
                "shard" => "another shard of this folder",
                _ => "the base checkpoint",
            };
            let how = match *op {
                "xor" => "XOR",
                _ => "the difference of the words as integers",
            };
            let mut v = vec![format!(
                "coded against tensor {} of {whose}, {}: the program below restores the \
                 residual ({how}), and decoding combines it with that tensor's words; the \
                 record costs {} bytes against {o} original",
                escape_name(tensor),
                escape_name(source),
                thousands(rec.record_bytes)
            )];
            if !attached {
                v.push(format!(
                    "{} is not attached, so this tensor cannot be decoded here: open the \
                     archive with --base (or the folder, for a shard)",
                    escape_name(source)
                ));
            }
            v
        }
        Sharing::Own => Vec::new(),
    }
}

/// The framing's parts in words: `record kind and checksum of the bytes it restores`.
fn framing_words(rec: &RecordInfo) -> String {
    let parts: Vec<&str> = rec.framing.iter().map(|(w, _)| *w).collect();
    match parts.len() {
        0 | 1 => parts.concat(),
        k => format!("{} and {}", parts[..k - 1].join(", "), parts[k - 1]),
    }
}

/// Whether `dtype` holds two's-complement signed integers.
fn signed_int(dtype: Dtype) -> bool {
    matches!(dtype, Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64)
}

/// The value of a `width`-bit word: sign-extended when `signed`.
fn word_value(w: u64, width: u32, signed: bool) -> i128 {
    if signed && (1..64).contains(&width) {
        let shift = 64 - width;
        i128::from(((w << shift) as i64) >> shift)
    } else if signed && width == 64 {
        i128::from(w as i64)
    } else {
        i128::from(w)
    }
}

fn value_histogram(dtype: Dtype, words: &Words) -> Histogram {
    let width = words.width();
    if let Some(l) = dtype
        .float_layout()
        .filter(|l| l.iter().sum::<u32>() == width)
    {
        let exp = split_fields(words, &l).swap_remove(1);
        let counts = histogram(&exp, 1 << 16).unwrap_or_default();
        return Histogram {
            title: format!("exponent field ({} bits) of the {dtype} words", l[1]),
            bins: dense_bins(
                counts
                    .into_iter()
                    .map(|(v, c)| (i128::from(v), c))
                    .collect(),
            ),
            bin_width: 1,
        };
    }
    let signed = signed_int(dtype);
    let what = if signed {
        format!("signed values of the {dtype} words")
    } else {
        format!("values of the {width}-bit words")
    };
    if let Some(h) = histogram(words, 256) {
        let mut counts: Vec<(i128, u64)> = h
            .into_iter()
            .map(|(v, c)| (word_value(v, width, signed), c))
            .collect();
        counts.sort_unstable();
        return Histogram {
            title: what,
            bins: dense_bins(counts),
            bin_width: 1,
        };
    }
    // Many distinct values: 64 equal buckets between the smallest and the largest value.
    let values = || words.iter().map(|w| word_value(w, width, signed));
    let (lo, hi) = (values().min().unwrap_or(0), values().max().unwrap_or(0));
    let step = ((hi - lo) / 64 + 1) as u64;
    let mut bins: Vec<(i128, u64)> = (0..64i128)
        .map(|k| (lo + k * i128::from(step), 0))
        .take_while(|&(v, _)| v <= hi)
        .collect();
    for v in values() {
        let k = ((v - lo) / i128::from(step)) as usize;
        if let Some(b) = bins.get_mut(k) {
            b.1 += 1;
        }
    }
    Histogram {
        title: what,
        bins,
        bin_width: step,
    }
}

/// Fills the gaps between the smallest and largest value with empty bins, when the
/// range is small enough to plot.
fn dense_bins(counts: Vec<(i128, u64)>) -> Vec<(i128, u64)> {
    match (counts.first(), counts.last()) {
        (Some(&(lo, _)), Some(&(hi, _))) if hi - lo < 4096 => {
            let mut bins: Vec<(i128, u64)> = (lo..=hi).map(|v| (v, 0)).collect();
            for (v, c) in counts {
                bins[(v - lo) as usize].1 = c;
            }
            bins
        }
        _ => counts,
    }
}

/// Share `part / whole` (0 when `whole` is 0).
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// `-1234567` as `-1,234,567`.
pub fn thousands_signed(v: i128) -> String {
    let digits = thousands_digits(&v.unsigned_abs().to_string());
    if v < 0 {
        format!("-{digits}")
    } else {
        digits
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(v: u64) -> String {
    thousands_digits(&v.to_string())
}

/// A width in bits as a phrase: `1 bit`, `16 bits`.
pub fn bits(n: u64) -> String {
    format!("{n} bit{}", if n == 1 { "" } else { "s" })
}

fn thousands_digits(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `singular` or `plural` to agree with a role such as `the mantissa` or
/// `the low 4 mantissa bits`.
fn verb<'a>(role: &str, singular: &'a str, plural: &'a str) -> &'a str {
    if role.ends_with(" bits") || role.contains(" and ") || role.starts_with("the differences") {
        plural
    } else {
        singular
    }
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// The codec names with the node bytes each would cost, chosen first
/// (`rans 1,234 B (chosen) · huffman 1,300 B · bitpack 1,400 B · raw 1,536 B`).
pub fn codec_summary(lit: &LitInfo) -> String {
    let mut parts = Vec::new();
    for (c, b) in ALL_CODECS.iter().zip(lit.node_bytes) {
        let s = match b {
            Some(b) => format!("{} {} B", c.name(), thousands(b)),
            // The rANS layout that is not written at this length.
            None if c.rans_layout().is_some() && *c != lit.chosen => continue,
            None => format!("{} n/a", c.name()),
        };
        if *c == lit.chosen {
            parts.insert(0, format!("{s} (chosen)"));
        } else {
            parts.push(s);
        }
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests;
