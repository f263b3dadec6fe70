//! `why`: where an archive's bytes go (docs/design.md §9), the report `brevis why` prints
//! and brevis-tui's Archive view shows, and the Why view of one tensor as text.
//!
//! Every byte of the archive is given one kind, so that the kinds add up to the archive's
//! length exactly:
//!
//! - the coded words of every program's literals, split at the tensor's *reference*:
//!   the bytes an order-0 code of its words needs at least (the smaller of the order-0
//!   entropy of whole words and, for floats, the order-0 entropy of sign and exponent
//!   with the mantissa raw; where neither is a reference, about one word per value, the
//!   raw words). Coded words up to the reference are `noise_below_reference` (no
//!   order-0 coder removes them); the rest are `above_reference`;
//! - `codec_tables`: the literals' codec parameters and tables;
//! - `program_structure`: operator tags, parameters, constants, each literal's tag and
//!   length;
//! - `record_framing`: each record's kind and checksum, and the whole of a copy record;
//! - `source_header`: the record of the source's JSON header;
//! - `gaps`: the records of bytes no tensor owns;
//! - `index_and_trailer`: the file header, the index and the trailer (the archive's
//!   length less all its records);
//! - `not_analysed`: coded words of records that cannot be decoded here (a tensor coded
//!   against a base that is not attached).
//!
//! The reference needs the words, so every record is decoded once (with progress and a
//! way to stop, [`analyse`]); sizes come from the programs, exactly (the wire format's
//! per-node report, the codecs' table lengths).

use super::{lossy, plural, Observer};
use crate::archive::{escape_name, shown_path, Archive};
use crate::codec::select::table_len;
use crate::dsl::exec::split_fields;
use crate::dsl::{execute_in, size_report, text::node_line, Node, Op};
use crate::error::Result;
use crate::stats::{entropy_bits, histogram, nearly_distinct};
use crate::tensor::{Dtype, Words};
use serde::{Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `1234567` as `1,234,567`.
fn thousands(v: u64) -> String {
    let d = v.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The kinds of bytes, in the order they are shown: `(key, what it is)`.
pub const KINDS: [(&str, &str); 9] = [
    ("noise_below_reference", "coded words up to the references"),
    ("above_reference", "coded words above the references"),
    ("codec_tables", "codec tables"),
    ("program_structure", "program structure (tags, parameters)"),
    (
        "record_framing",
        "record framing (kinds, checksums, copies)",
    ),
    ("source_header", "source header (its JSON)"),
    ("gaps", "gaps (bytes no tensor owns)"),
    ("index_and_trailer", "file header, index and trailer"),
    ("not_analysed", "coded words not analysed (no base)"),
];

/// The roles tensors are grouped in by name ([`role_of`]), in the order shown.
pub const ROLES: [&str; 7] = [
    "embeddings",
    "attention",
    "mlp",
    "norms",
    "convolution",
    "other",
    "not a tensor",
];

/// The role of a tensor from its name: `norms` (`norm`, `ln_`), `embeddings` (`embed`,
/// `wte`, `wpe`, `position`, `token_type`), `attention` (`attn`, `attention`,
/// `q_proj` ...), `mlp` (`mlp`, `ffn`, `fc1`, `fc2`, `intermediate`, `output.dense`,
/// `gate_proj` ...), `convolution` (`conv`), else `other`. Case-insensitive; the first
/// that matches in that order, so `attention.output.LayerNorm.weight` is a norm.
pub fn role_of(name: &str) -> &'static str {
    let n = name.to_lowercase();
    let has = |pats: &[&str]| pats.iter().any(|p| n.contains(p));
    if has(&["norm", "ln_", ".ln", "ln."]) {
        "norms"
    } else if has(&["embed", "wte", "wpe", "position", "token_type", "tok_"]) {
        "embeddings"
    } else if has(&[
        "attn",
        "attention",
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "query",
        "key",
        "value",
    ]) {
        "attention"
    } else if has(&[
        "mlp",
        "ffn",
        "fc1",
        "fc2",
        "intermediate",
        "output.dense",
        "gate_proj",
        "up_proj",
        "down_proj",
        "feed_forward",
        "w1",
        "w2",
        "w3",
    ]) {
        "mlp"
    } else if has(&["conv"]) {
        "convolution"
    } else {
        "other"
    }
}

/// The order-0 references of a stream (module doc): what an order-0 code of its words
/// needs at least, in bits per word.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// Words in the stream.
    pub words: u64,
    /// Their width in bits.
    pub width: u32,
    /// Order-0 entropy of whole words in bits per word, when it is a reference (at
    /// least two words per distinct value).
    pub whole_bits: Option<f64>,
    /// Sign and exponent entropy plus the mantissa raw, in bits per word, for a float
    /// stream when it is a reference (at least two words per distinct exponent).
    pub field_bound_bits: Option<f64>,
}

impl Reference {
    /// The references of `words`, read as `dtype`'s words (for the float fields).
    pub fn of(words: &Words, dtype: Option<Dtype>) -> Reference {
        let n = words.len();
        let width = words.width();
        let mut r = Reference {
            words: n as u64,
            width,
            whole_bits: None,
            field_bound_bits: None,
        };
        if n < 2 {
            return r;
        }
        // A reference needs at least two words per value: count at most n / 2.
        let cap = n / 2;
        let entropy =
            |w: &Words| histogram(w, cap).map(|h| entropy_bits(h.iter().map(|&(_, c)| c)));
        if width <= 16 || !nearly_distinct(words) {
            r.whole_bits = entropy(words);
        }
        if let Some(l) = dtype
            .and_then(Dtype::float_layout)
            .filter(|l| l.iter().sum::<u32>() == width)
        {
            let parts = split_fields(words, &l);
            let sign = histogram(&parts[0], 2).map(|h| entropy_bits(h.iter().map(|&(_, c)| c)));
            let exp = entropy(&parts[1]);
            if let (Some(s), Some(e)) = (sign, exp) {
                r.field_bound_bits = Some(s + e + f64::from(l[2]));
            }
        }
        r
    }

    /// Bits per word of the reference: the smaller of the two, or the raw width when
    /// neither is a reference.
    pub fn bits_per_word(&self) -> f64 {
        match (self.whole_bits, self.field_bound_bits) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => f64::from(self.width),
        }
    }

    /// The reference in bytes: `bits_per_word * words / 8`, rounded up.
    pub fn bytes(&self) -> u64 {
        (self.bits_per_word() * self.words as f64 / 8.0).ceil() as u64
    }
}

/// A program's bytes by part: structure, tables, coded words. They add up to its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgramParts {
    /// Operator tags, parameters, constants, each literal's tag and length.
    pub structure: u64,
    /// The literals' codec parameters and tables.
    pub tables: u64,
    /// The literals' coded words.
    pub coded_words: u64,
}

impl ProgramParts {
    /// The parts of `program`.
    pub fn of(program: &Node) -> ProgramParts {
        let total = crate::dsl::program_len(program);
        let (mut tables, mut payload) = (0u64, 0u64);
        let mut stack = vec![program];
        while let Some(n) = stack.pop() {
            if let Op::Lit(l) = n.op() {
                let ty = n.ty();
                let body = l.body.len() as u64;
                let t = usize::try_from(ty.len)
                    .map(|len| table_len(l.codec, &l.body, ty.width, len))
                    .unwrap_or(body)
                    .min(body);
                tables += t;
                payload += body - t;
            }
            stack.extend(n.children());
        }
        ProgramParts {
            structure: total.saturating_sub(tables + payload),
            tables,
            coded_words: payload,
        }
    }
}

/// A record's coded words above its reference, one line of the ranking.
#[derive(Clone, Debug, Serialize)]
pub struct AboveReference {
    /// The tensor's name (the first of a group's).
    pub name: String,
    /// Index of that tensor in the archive.
    pub index: usize,
    /// Tensors the record holds (more than one for a group).
    pub tensors: usize,
    /// The dtype's name.
    pub dtype: &'static str,
    /// Bytes of the record.
    pub record_bytes: u64,
    /// Bytes of its coded words.
    pub coded_words: u64,
    /// The reference of the words it restores, in bytes.
    pub reference_bytes: u64,
    /// Coded words above the reference, in bytes.
    pub bytes_above: u64,
}

/// A kind of structure the search found, and what it saved.
#[derive(Clone, Debug, Serialize)]
pub struct Structure {
    /// `copies`, `references`, `back_references` or `dequantization`.
    pub kind: &'static str,
    /// How many: copy or reference records, or `backref` or `dequant` nodes.
    pub count: u64,
    /// Bytes they take in the archive (the records, or the nodes' subtrees).
    pub bytes: u64,
    /// Bytes saved: against the copied record for a copy, against the order-0 reference
    /// of the words produced otherwise; `null` when it cannot be told here (a tensor
    /// coded against a base that is not attached).
    pub saved_bytes: Option<i64>,
}

/// The whole archive's report (`brevis why ARCHIVE --json`).
#[derive(Clone, Debug, Serialize)]
pub struct WhyReport {
    /// The archive.
    #[serde(serialize_with = "lossy")]
    pub archive: PathBuf,
    /// Bytes of the original file.
    pub original_bytes: u64,
    /// Bytes of the archive: each of `bytes_by_kind`, `bytes_by_dtype` and
    /// `bytes_by_role` adds up to it exactly.
    pub archive_bytes: u64,
    /// Bytes of each kind ([`KINDS`]).
    #[serde(serialize_with = "ordered")]
    pub bytes_by_kind: Vec<(String, u64)>,
    /// Bytes of the tensors of each dtype (their records, a group's in shares), and of
    /// what is not a tensor (`"not a tensor"`: header, gaps, index and trailer).
    #[serde(serialize_with = "ordered")]
    pub bytes_by_dtype: Vec<(String, u64)>,
    /// The same by role ([`ROLES`], [`role_of`]).
    #[serde(serialize_with = "ordered")]
    pub bytes_by_role: Vec<(String, u64)>,
    /// Records whose coded words are above their reference, most bytes above first.
    pub tensors_above_reference: Vec<AboveReference>,
    /// The structure found and what it saved.
    pub structure: Vec<Structure>,
    /// Records whose words could not be decoded (named), counted in `not_analysed`.
    pub not_analysed: Vec<String>,
}

impl WhyReport {
    /// The bytes of kind `key` ([`KINDS`]).
    pub fn kind(&self, key: &str) -> u64 {
        self.bytes_by_kind
            .iter()
            .find(|(k, _)| k == key)
            .map_or(0, |(_, b)| *b)
    }
}

fn ordered<S: Serializer>(v: &[(String, u64)], s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for (k, b) in v {
        m.serialize_entry(k, b)?;
    }
    m.end()
}

fn add(v: &mut Vec<(String, u64)>, key: &str, bytes: u64) {
    match v.iter_mut().find(|(k, _)| k == key) {
        Some(e) => e.1 += bytes,
        None => v.push((key.to_string(), bytes)),
    }
}

/// The structure nodes of a program (`backref`, `dequant`): per kind, `(count, bytes of
/// their subtrees, saved against the reference of their output or None)`.
fn structure_nodes(
    program: &Node,
    dtype: Dtype,
    context: Option<&Words>,
) -> [(u64, u64, Option<i64>); 2] {
    let report = size_report(program);
    let mut out = [(0u64, 0u64, Some(0i64)); 2];
    let mut stack = vec![(program, 0usize)];
    let mut next = 0usize;
    // Pre-order, as size_report: index each node as it is visited.
    let mut order = Vec::new();
    while let Some((n, _)) = stack.pop() {
        order.push((n, next));
        next += 1;
        for c in n.children().iter().rev() {
            stack.push((c, 0));
        }
    }
    for (n, i) in order {
        let k = match n.op() {
            Op::BackRef(_) => 0,
            Op::Dequant(..) => 1,
            _ => continue,
        };
        let bytes = report.get(i).map_or(0, |r| r.subtree_bytes);
        let e = &mut out[k];
        e.0 += 1;
        e.1 += bytes;
        // Its output read as the tensor's dtype when the widths agree (a dequant's as its
        // output format's).
        let dt = match n.op() {
            Op::Dequant(d, _) => Some(match d.out {
                crate::dsl::narrow::Out::Bf16 => Dtype::BF16,
                crate::dsl::narrow::Out::F16 => Dtype::F16,
                crate::dsl::narrow::Out::F32 => Dtype::F32,
            }),
            _ => (dtype.word_bits() == n.ty().width).then_some(dtype),
        };
        let ctx = if std::ptr::eq(n, program) {
            context
        } else {
            None
        };
        e.2 = match (e.2, execute_in(n, n.ty().len, ctx)) {
            (Some(s), Ok(w)) => Some(s + Reference::of(&w, dt).bytes() as i64 - bytes as i64),
            _ => None,
        };
    }
    out
}

/// Where the bytes of `archive` go (see the module doc). Decodes every record once,
/// reporting `progress(done, total, what)` per record; `cancel` is polled between
/// records, and a cancelled analysis returns `None`.
pub fn analyse(
    archive: &Archive,
    progress: &dyn Fn(u64, u64, &str),
    cancel: &dyn Fn() -> bool,
) -> Option<WhyReport> {
    let len = archive.archive_len();
    let tensors = archive.tensors();
    let mut kinds: Vec<(String, u64)> = KINDS.iter().map(|(k, _)| (k.to_string(), 0)).collect();
    let mut by_dtype: Vec<(String, u64)> = Vec::new();
    let mut by_role: Vec<(String, u64)> = ROLES.iter().map(|r| (r.to_string(), 0)).collect();
    let mut above = Vec::new();
    let mut not_analysed = Vec::new();
    let mut structure = [
        ("copies", 0u64, 0u64, Some(0i64)),
        ("references", 0, 0, Some(0)),
        ("back_references", 0, 0, Some(0)),
        ("dequantization", 0, 0, Some(0)),
    ];
    let mut records_bytes = 0u64;
    // The header record.
    let header = archive.header_archive_bytes();
    add(&mut kinds, "source_header", header);
    records_bytes += header;
    if let Ok(p) = archive.header_program() {
        let [b, d] = structure_nodes(&p, Dtype::U8, None);
        for (slot, v) in [(2, b), (3, d)] {
            let s = &mut structure[slot];
            s.1 += v.0;
            s.2 += v.1;
            s.3 = s.3.zip(v.2).map(|(a, b)| a + b);
        }
    }
    for g in archive.gaps() {
        let b = g.record.len() as u64;
        add(&mut kinds, "gaps", b);
        records_bytes += b;
    }
    // Tensors by dtype and role: their records' shares.
    for t in tensors {
        add(&mut by_dtype, t.dtype.name(), t.archive_bytes());
        add(&mut by_role, role_of(&t.name), t.archive_bytes());
    }
    let total = tensors.len() as u64;
    let mut done_groups = std::collections::HashSet::new();
    for (i, t) in tensors.iter().enumerate() {
        if cancel() {
            return None;
        }
        progress(i as u64, total, &t.name);
        if t.record.is_empty() {
            continue;
        }
        if let Some(of) = t.copy_of {
            let b = t.record.len() as u64;
            add(&mut kinds, "record_framing", b);
            records_bytes += b;
            let s = &mut structure[0];
            s.1 += 1;
            s.2 += b;
            s.3 =
                s.3.map(|x| x + tensors[of].archive_bytes() as i64 - b as i64);
            continue;
        }
        let (record_bytes, members, dtype) = match t.group {
            Some(g) => {
                if !done_groups.insert(g) {
                    continue;
                }
                let g = &archive.groups()[g];
                (g.record.len() as u64, g.tensors.len(), g.dtype)
            }
            None => (t.record.len() as u64, 1, t.dtype),
        };
        records_bytes += record_bytes;
        let program_bytes = t.program.len() as u64;
        add(
            &mut kinds,
            "record_framing",
            record_bytes.saturating_sub(program_bytes),
        );
        let Ok(program) = archive.program(i) else {
            add(&mut kinds, "not_analysed", program_bytes);
            not_analysed.push(t.name.clone());
            continue;
        };
        let parts = ProgramParts::of(&program);
        add(&mut kinds, "codec_tables", parts.tables);
        add(&mut kinds, "program_structure", parts.structure);
        let context = if t.reference.is_some() {
            archive.base_words(i).ok().flatten()
        } else {
            None
        };
        let words = execute_in(&program, program.ty().len, context.as_ref());
        let Ok(words) = words else {
            add(&mut kinds, "not_analysed", parts.coded_words);
            not_analysed.push(t.name.clone());
            if t.reference.is_some() {
                let s = &mut structure[1];
                s.1 += 1;
                s.2 += record_bytes;
                s.3 = None;
            }
            continue;
        };
        let reference = Reference::of(&words, Some(dtype)).bytes();
        let noise = parts.coded_words.min(reference);
        add(&mut kinds, "noise_below_reference", noise);
        add(&mut kinds, "above_reference", parts.coded_words - noise);
        if parts.coded_words > noise {
            above.push(AboveReference {
                name: t.name.clone(),
                index: i,
                tensors: members,
                dtype: dtype.name(),
                record_bytes,
                coded_words: parts.coded_words,
                reference_bytes: reference,
                bytes_above: parts.coded_words - noise,
            });
        }
        let [b, d] = structure_nodes(&program, dtype, context.as_ref());
        for (slot, v) in [(2, b), (3, d)] {
            let s = &mut structure[slot];
            s.1 += v.0;
            s.2 += v.1;
            s.3 = s.3.zip(v.2).map(|(a, b)| a + b);
        }
        if t.reference.is_some() {
            // Saved against the tensor's own words' reference: what coding it alone
            // would need at least.
            let own = archive
                .decode_tensor(i)
                .ok()
                .and_then(|b| Words::from_le_bytes(t.dtype.word_bits(), &b))
                .map(|w| Reference::of(&w, Some(t.dtype)).bytes());
            let s = &mut structure[1];
            s.1 += 1;
            s.2 += record_bytes;
            s.3 =
                s.3.zip(own)
                    .map(|(a, o)| a + o as i64 - record_bytes as i64);
        }
    }
    progress(total, total, "");
    add(
        &mut kinds,
        "index_and_trailer",
        len.saturating_sub(records_bytes),
    );
    let not_tensor = len.saturating_sub(by_dtype.iter().map(|(_, b)| b).sum::<u64>());
    by_dtype.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    add(&mut by_dtype, "not a tensor", not_tensor);
    add(&mut by_role, "not a tensor", not_tensor);
    above.sort_by(|a, b| {
        b.bytes_above
            .cmp(&a.bytes_above)
            .then(a.index.cmp(&b.index))
    });
    Some(WhyReport {
        archive: archive.path().to_path_buf(),
        original_bytes: archive.original_len(),
        archive_bytes: len,
        bytes_by_kind: kinds,
        bytes_by_dtype: by_dtype,
        bytes_by_role: by_role,
        tensors_above_reference: above,
        structure: structure
            .into_iter()
            .map(|(kind, count, bytes, saved)| Structure {
                kind,
                count,
                bytes,
                saved_bytes: saved,
            })
            .collect(),
        not_analysed,
    })
}

/// One node of a tensor's program in [`TensorWhy`].
#[derive(Clone, Debug, Serialize)]
pub struct WhyNode {
    /// Depth (root 0).
    pub depth: usize,
    /// Its text-form line.
    pub line: String,
    /// Its own bytes.
    pub own_bytes: u64,
    /// Bytes of its subtree.
    pub subtree_bytes: u64,
}

/// The Why view of one tensor (`brevis why ARCHIVE TENSOR`): its record's bytes by part,
/// bits per word against the references, and where the bytes are.
#[derive(Clone, Debug, Serialize)]
pub struct TensorWhy {
    /// The tensor's name.
    pub name: String,
    /// Its dtype's name.
    pub dtype: &'static str,
    /// Its shape.
    pub shape: Vec<u64>,
    /// How it is stored: `record`, `group`, `copy`, `reference` or `empty`.
    pub stored_as: &'static str,
    /// Tensors in its record (more than one for a group, whose program restores them
    /// all: the figures below are the record's).
    pub record_tensors: usize,
    /// Bytes of the tensor in the original.
    pub original_bytes: u64,
    /// Bytes of its record (a copy's: the copy record).
    pub record_bytes: u64,
    /// Bytes of the record that are not program.
    pub framing_bytes: u64,
    /// Bytes of the program (the copied record's, for a copy).
    pub program_bytes: u64,
    /// The program's parts.
    pub parts: ProgramParts,
    /// Words the program restores and their width in bits.
    pub words: u64,
    /// Width in bits.
    pub width: u32,
    /// Program bytes × 8 / words.
    pub achieved_bits: f64,
    /// The references of the words, bits per word.
    pub whole_entropy_bits: Option<f64>,
    /// Sign and exponent entropy plus the mantissa raw, bits per word.
    pub field_bound_bits: Option<f64>,
    /// The reference in bytes (the smaller one, or the raw words).
    pub reference_bytes: u64,
    /// Coded words above the reference, in bytes.
    pub bytes_above: u64,
    /// The program's nodes, pre-order.
    pub nodes: Vec<WhyNode>,
    /// Index of the node with the most bytes of its own.
    pub largest: usize,
    /// Plain sentences.
    pub sentences: Vec<String>,
}

/// The Why view of tensor `i` of `archive`.
///
/// # Errors
/// When its program cannot be read or run (a damaged record, or a tensor coded against
/// a base that is not attached).
pub fn tensor_why(archive: &Archive, i: usize) -> Result<TensorWhy> {
    let t = &archive.tensors()[i];
    let (stored_as, record_tensors, dtype) = if t.record.is_empty() {
        ("empty", 0, t.dtype)
    } else if t.copy_of.is_some() {
        ("copy", 1, t.dtype)
    } else if let Some(g) = t.group.map(|g| &archive.groups()[g]) {
        ("group", g.tensors.len(), g.dtype)
    } else if t.reference.is_some() {
        ("reference", 1, t.dtype)
    } else {
        ("record", 1, t.dtype)
    };
    let record_bytes = t.record.len() as u64;
    let program = archive.program(i)?;
    let context = if t.reference.is_some() {
        archive.base_words(i)?
    } else {
        None
    };
    let words = execute_in(&program, program.ty().len, context.as_ref()).map_err(|e| {
        crate::Error::Internal {
            path: archive.path().to_path_buf(),
            what: format!("tensor {:?}: program does not run: {e}", t.name),
        }
    })?;
    let program_bytes = crate::dsl::program_len(&program);
    let parts = ProgramParts::of(&program);
    let r = Reference::of(&words, Some(dtype));
    let reference = r.bytes();
    let n = words.len() as u64;
    let report = size_report(&program);
    let mut nodes = Vec::with_capacity(report.len());
    let mut stack = vec![&program];
    while let Some(node) = stack.pop() {
        let k = nodes.len();
        nodes.push(WhyNode {
            depth: report[k].depth,
            line: node_line(node),
            own_bytes: report[k].own_bytes,
            subtree_bytes: report[k].subtree_bytes,
        });
        stack.extend(node.children().iter().rev());
    }
    let largest = nodes
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.own_bytes.cmp(&b.1.own_bytes).then(b.0.cmp(&a.0)))
        .map_or(0, |(k, _)| k);
    let framing_bytes = if stored_as == "copy" {
        record_bytes
    } else {
        record_bytes.saturating_sub(t.program.len() as u64)
    };
    let achieved_bits = if n == 0 {
        0.0
    } else {
        program_bytes as f64 * 8.0 / n as f64
    };
    let bytes_above = parts.coded_words.saturating_sub(reference);
    let mut sentences = Vec::new();
    match stored_as {
        "copy" => sentences.push(format!(
            "a copy of {}: its record is {} bytes naming that record; the program below is the copied one",
            escape_name(&archive.tensors()[t.copy_of.unwrap_or(0)].name),
            thousands(record_bytes)
        )),
        "group" => sentences.push(format!(
            "stored with {} other small tensors of its dtype in one group record: the \
             program and the figures below are the group's",
            record_tensors - 1
        )),
        "reference" => sentences.push(
            "coded against its base's tensor: the program restores the residual, and the \
             figures below are the residual's"
                .to_string(),
        ),
        _ => {}
    }
    if let Some(l) = nodes.get(largest) {
        sentences.push(format!(
            "the largest node is #{largest} `{}`: {} of the program's {} bytes",
            l.line,
            thousands(l.own_bytes),
            thousands(program_bytes)
        ));
    }
    let bound = r.bits_per_word();
    let which = match (r.whole_bits, r.field_bound_bits) {
        (Some(a), Some(b)) if b <= a => "the order-0 field bound",
        (_, Some(_)) if r.whole_bits.is_none() => "the order-0 field bound",
        (Some(_), _) => "the order-0 entropy of whole words",
        _ => "the raw words (no order-0 reference here: about one word per value)",
    };
    sentences.push(if bytes_above > 0 {
        format!(
            "its coded words take {} bytes, {} above {which}, {bound:.2} bits per word or {} \
             bytes",
            thousands(parts.coded_words),
            thousands(bytes_above),
            thousands(reference)
        )
    } else {
        format!(
            "its coded words take {} bytes, within {which}, {bound:.2} bits per word or {} \
             bytes; the rest is tables ({}), structure ({}) and framing ({})",
            thousands(parts.coded_words),
            thousands(reference),
            thousands(parts.tables),
            thousands(parts.structure),
            thousands(framing_bytes)
        )
    });
    Ok(TensorWhy {
        name: t.name.clone(),
        dtype: t.dtype.name(),
        shape: t.shape.clone(),
        stored_as,
        record_tensors,
        original_bytes: t.original_bytes(),
        record_bytes,
        framing_bytes,
        program_bytes,
        parts,
        words: n,
        width: words.width(),
        achieved_bits,
        whole_entropy_bits: r.whole_bits,
        field_bound_bits: r.field_bound_bits,
        reference_bytes: reference,
        bytes_above,
        nodes,
        largest,
        sentences,
    })
}

/// What `brevis why` reports: the whole archive, or one tensor.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum WhyOutput {
    /// `brevis why ARCHIVE`.
    Archive(Box<WhyReport>),
    /// `brevis why ARCHIVE TENSOR`.
    Tensor(Box<TensorWhy>),
}

/// `brevis why ARCHIVE [TENSOR]`: where the archive's bytes go ([`analyse`]), or the Why
/// view of one tensor ([`tensor_why`]), named as `brevis ls` prints it. Progress goes to
/// `obs` (one item per record).
///
/// # Errors
/// When the archive cannot be opened, `input` is a compressed folder (name one of its
/// shard archives), the tensor is not in it, or its program cannot be run.
pub fn why(
    input: &Path,
    tensor: Option<&str>,
    base: Option<&Arc<crate::archive::base::BaseSet>>,
    obs: &dyn Observer,
) -> Result<WhyOutput> {
    if crate::archive::folder::compressed_folder(input).is_some() {
        return Err(super::refused(
            "folder",
            format!(
                "{} is a compressed folder: `brevis why` reads one archive; name one of its \
                 shard archives (`brevis ls {}` lists them)",
                shown_path(input),
                shown_path(input)
            ),
        ));
    }
    let archive = super::open_archive_with(input, base)?;
    if let Some(name) = tensor {
        let Some(i) = archive.find_as_printed(name) else {
            return Err(super::refused(
                "no_such_tensor",
                format!(
                    "{}: no tensor named \"{}\" ({}; list them with `brevis ls`)",
                    shown_path(input),
                    escape_name(name),
                    plural(archive.tensors().len(), "tensor")
                ),
            ));
        };
        return Ok(WhyOutput::Tensor(Box::new(tensor_why(&archive, i)?)));
    }
    use crate::archive::ProgressEvent;
    let total = archive.tensors().len();
    obs.progress(
        "",
        ProgressEvent::Begin {
            items: total,
            bytes: archive.original_len(),
        },
    );
    let tensors = archive.tensors();
    let report = analyse(
        &archive,
        &|done, _, what| {
            if done > 0 {
                let bytes = tensors
                    .get(done as usize - 1)
                    .map_or(0, |t| t.original_bytes());
                obs.progress("", ProgressEvent::Item { label: what, bytes });
            }
        },
        &|| false,
    )
    .expect("not cancelled");
    obs.progress("", ProgressEvent::End);
    Ok(WhyOutput::Archive(Box::new(report)))
}
