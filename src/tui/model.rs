//! What the TUI shows, independent of where it comes from: one [`TensorRow`] per tensor
//! and a [`Source`] that can load a tensor's program, decode its bytes and check them
//! against stored checksums.
//!
//! The real source is an opened `.brv` archive ([`super::archive_source`]); tests and the
//! operator lessons use [`MemorySource`], which synthesizes programs for tensors held in
//! memory with the library's search.

use crate::dsl::{execute, program_len, Node};
use crate::synth::{synthesize, SearchOptions};
use crate::tensor::{Dtype, Words};

/// One line of the tensor table: what the archive's index says about a tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorRow {
    /// The tensor's name as stored (any UTF-8, possibly with control characters; the UI
    /// escapes it with [`super::escape_name`]).
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape (`[]` for a scalar).
    pub shape: Vec<u64>,
    /// Bytes of the tensor in the original file.
    pub original_bytes: u64,
    /// Bytes of its record in the archive.
    pub archive_bytes: u64,
    /// Name of its program's root operator (`lit`, `merge`, ...).
    pub root_op: String,
}

impl TensorRow {
    /// Number of elements (product of the shape, saturating; 1 for a scalar).
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Reduction `1 - archive/original` as a fraction (0 for an empty tensor; negative
    /// when the record is larger than the tensor).
    pub fn reduction(&self) -> f64 {
        reduction(self.original_bytes, self.archive_bytes)
    }
}

/// `1 - archive/original`, 0 when `original` is 0.
pub fn reduction(original: u64, archive: u64) -> f64 {
    if original == 0 {
        0.0
    } else {
        1.0 - archive as f64 / original as f64
    }
}

/// How a tensor is stored in the archive: what the why view needs to account for every
/// byte of its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo {
    /// Bytes of the whole record: the group's for a tensor in a group, the copy record's
    /// for a copy (0 for an empty tensor, which has none).
    pub record_bytes: u64,
    /// Bytes of program in the record (0 for a copy, whose program is the copied
    /// record's).
    pub program_bytes: u64,
    /// The rest of the record, part by part: `(what, bytes)`; with `program_bytes`
    /// they add up to `record_bytes`.
    pub framing: Vec<(&'static str, u64)>,
    /// Whether the record is the tensor's own, shared, or a copy.
    pub sharing: Sharing,
    /// The search settings that built the record (`None`: the archive does not say,
    /// as version 1 did not).
    pub settings: Option<crate::archive::format::Settings>,
}

impl RecordInfo {
    /// Bytes of framing (everything but the program).
    pub fn framing_bytes(&self) -> u64 {
        self.framing.iter().map(|(_, b)| b).sum()
    }
}

/// How a tensor's record is shared ([`RecordInfo::sharing`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// A record of its own.
    Own,
    /// A group record coding several small tensors of one dtype as one stream.
    Group {
        /// Tensors in the group, this one included.
        tensors: usize,
        /// The group's tensors (indices into the rows), in the order its program
        /// restores them.
        members: Vec<usize>,
        /// Bytes of the record counted for this tensor (in proportion to its original
        /// bytes).
        share: u64,
        /// Original bytes of the whole group.
        group_original: u64,
    },
    /// A copy record: the tensor's bytes are those of an earlier tensor.
    Copy {
        /// The copied tensor (an index into the rows).
        of: usize,
    },
    /// A reference record: the tensor coded against a tensor of another file (a base
    /// checkpoint's, or another shard's); the program restores the residual.
    Reference {
        /// `xor` or `sub`.
        op: &'static str,
        /// `base` or `shard`.
        role: &'static str,
        /// The other file, as the archive records it.
        source: String,
        /// The tensor there: its name when the file is attached, else `#k`.
        tensor: String,
        /// Whether the file is attached (`--base`): the tensor can be decoded.
        attached: bool,
    },
    /// An empty tensor: no record at all.
    Empty,
}

/// Outcome of checking one region against its stored checksum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Decoded bytes match the stored checksum.
    Exact,
    /// Decoded bytes differ from the stored checksum (the message says which).
    Mismatch(String),
    /// The region could not be decoded (damaged record).
    Failed(String),
}

/// What the TUI needs from an opened archive. Implementations must be cheap to open (the
/// rows come from an index, nothing is decoded up front) and safe to share with worker
/// threads.
pub trait Source: Send + Sync {
    /// What to show in the title bar (usually the file path).
    fn title(&self) -> String;
    /// One row per tensor, in archive order.
    fn rows(&self) -> &[TensorRow];
    /// Size in bytes of the original file and of the archive, for the footer.
    fn file_sizes(&self) -> (u64, u64);
    /// The program of tensor `i`.
    ///
    /// # Errors
    /// When the record is damaged, with a readable message.
    fn program(&self, i: usize) -> Result<Node, String>;
    /// The original bytes of tensor `i`.
    ///
    /// # Errors
    /// When the record is damaged or its program fails to run.
    fn decode(&self, i: usize) -> Result<Vec<u8>, String>;
    /// The original bytes the record of tensor `i` restores, what its program produces:
    /// the tensor's own ([`Source::decode`]), or for a tensor in a group the whole
    /// group's, in order.
    ///
    /// # Errors
    /// As [`Source::decode`].
    fn decode_record(&self, i: usize) -> Result<Vec<u8>, String> {
        self.decode(i)
    }
    /// The base words tensor `i`'s residual program is coded against, for a tensor
    /// coded against its base whose base is at hand (`None` otherwise): what
    /// [`crate::dsl::execute_in`] takes.
    fn context(&self, i: usize) -> Option<crate::tensor::Words> {
        let _ = i;
        None
    }
    /// Decodes tensor `i` and compares it with its stored checksum.
    fn verify_tensor(&self, i: usize) -> Check;
    /// Decodes every region and checks it and the whole file against the stored
    /// checksums, reporting `progress(done, total, what)`; `cancel` is polled where the
    /// implementation can stop.
    fn verify_all(
        &self,
        progress: &dyn Fn(u64, u64, &str),
        cancel: &dyn Fn() -> bool,
    ) -> VerifyOutcome;
    /// The archive's file, if it is one (a new archive is written next to it).
    fn path(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// How tensor `i` is stored, when the source is an archive (`None` otherwise).
    fn record(&self, i: usize) -> Option<RecordInfo> {
        let _ = i;
        None
    }
    /// Writes a copy of the archive to `dst` in which the record of each tensor `i` of
    /// `changes` holds its program, built with its settings (recorded for that record;
    /// `None` keeps the record's), never replacing an existing file unless `overwrite`;
    /// returns the new archive's length in bytes. Every program is checked first: it
    /// must restore its record's stored checksum.
    ///
    /// # Errors
    /// When the source is not a file, a program does not restore its tensor, or the
    /// file cannot be written (the message names the file).
    fn rewrite(
        &self,
        dst: &std::path::Path,
        changes: &[(usize, &Node, Option<crate::archive::format::Settings>)],
        overwrite: bool,
    ) -> Result<u64, String> {
        let _ = (dst, changes, overwrite);
        Err("this archive is not a file; nothing can be written".into())
    }
    /// The length in bytes the archive would have with `changes` written (each
    /// `(tensor, program, settings)`), index entries and all, without writing.
    ///
    /// # Errors
    /// When the source is not a file or its index cannot be read.
    fn rewritten_len(
        &self,
        changes: &[(usize, &Node, Option<crate::archive::format::Settings>)],
    ) -> Result<u64, String> {
        let _ = changes;
        Err("this archive is not a file".into())
    }
    /// Where the archive's bytes go ([`crate::job::why::analyse`]): `Ok(None)` when
    /// `cancel` stopped it.
    ///
    /// # Errors
    /// When the source is not an archive file.
    fn why(
        &self,
        progress: &dyn Fn(u64, u64, &str),
        cancel: &dyn Fn() -> bool,
    ) -> Result<Option<crate::job::why::WhyReport>, String> {
        let _ = (progress, cancel);
        Err("the Archive view reads a .brv archive; this source is held in memory".into())
    }
    /// Opens the archive's file again (after it was replaced in place).
    ///
    /// # Errors
    /// When the source is not a file or the file cannot be opened.
    fn reopen(&self) -> Result<std::sync::Arc<dyn Source>, String> {
        Err("this archive is not a file".into())
    }
}

/// Verification of the whole archive or one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOutcome {
    /// `Some(i)` when one tensor was checked.
    pub tensor: Option<usize>,
    /// Tensors checked.
    pub tensors: usize,
    /// Tensors whose decode matched their checksum.
    pub exact: usize,
    /// Regions that did not match, one readable line each.
    pub failures: Vec<String>,
    /// Whether the whole-file checksum matched (`None`: not checked).
    pub whole_file: Option<bool>,
    /// Seconds taken.
    pub seconds: f64,
}

impl VerifyOutcome {
    /// The plain verdict line, e.g. `104/104 tensors bit-exact, whole-file checksum matches`.
    pub fn verdict(&self) -> String {
        let mut s = if self.tensors == 1 && self.tensor.is_some() {
            if self.exact == 1 {
                "1/1 tensor bit-exact".to_string()
            } else {
                "0/1 tensors bit-exact: the tensor does NOT match its checksum".to_string()
            }
        } else {
            format!("{}/{} tensors bit-exact", self.exact, self.tensors)
        };
        match self.whole_file {
            Some(true) => s.push_str(", whole-file checksum matches"),
            Some(false) => s.push_str(", whole-file checksum does NOT match"),
            None => {}
        }
        if !self.failures.is_empty() && self.exact == self.tensors {
            s.push_str(&format!("; {} other region(s) failed", self.failures.len()));
        }
        s
    }

    /// Whether everything checked matched.
    pub fn ok(&self) -> bool {
        self.failures.is_empty() && self.exact == self.tensors && self.whole_file != Some(false)
    }
}

/// Reads a tensor's bytes as its word stream (docs/design.md §2): little-endian words of
/// `dtype.word_bits()` bits. `None` if the length is not a whole number of words.
pub fn words_of(dtype: Dtype, bytes: &[u8]) -> Option<Words> {
    Words::from_le_bytes(dtype.word_bits(), bytes)
}

/// One tensor held in memory with its synthesized program.
#[derive(Clone, Debug)]
pub struct MemoryTensor {
    /// Row for the table.
    pub row: TensorRow,
    /// Its program.
    pub program: Node,
    /// Its original bytes.
    pub bytes: Vec<u8>,
}

/// A [`Source`] of tensors held in memory (fixtures, tests, demos). Programs come from
/// the library's search; archive bytes are the programs' exact serialized lengths.
#[derive(Clone, Debug)]
pub struct MemorySource {
    title: String,
    tensors: Vec<MemoryTensor>,
    rows: Vec<TensorRow>,
}

impl MemorySource {
    /// Builds a source from `(name, dtype, shape, bytes)` tensors, synthesizing each
    /// program with `opts`.
    ///
    /// # Panics
    /// If a tensor's bytes are not a whole number of words of its dtype (a fixture bug).
    pub fn synthesize(
        title: &str,
        tensors: Vec<(String, Dtype, Vec<u64>, Vec<u8>)>,
        opts: &SearchOptions,
    ) -> MemorySource {
        let tensors = tensors
            .into_iter()
            .map(|(name, dtype, shape, bytes)| {
                let words = words_of(dtype, &bytes).expect("whole words");
                let program = synthesize(&words, Some(dtype), opts).program;
                MemoryTensor {
                    row: TensorRow {
                        name,
                        dtype,
                        shape,
                        original_bytes: bytes.len() as u64,
                        archive_bytes: program_len(&program),
                        root_op: program.op_name().to_string(),
                    },
                    program,
                    bytes,
                }
            })
            .collect();
        MemorySource::from_tensors(title, tensors)
    }

    /// Builds a source from tensors whose programs are already known.
    pub fn from_tensors(title: &str, tensors: Vec<MemoryTensor>) -> MemorySource {
        let rows = tensors.iter().map(|t| t.row.clone()).collect();
        MemorySource {
            title: title.to_string(),
            tensors,
            rows,
        }
    }

    /// Replaces the stored bytes of tensor `i` (to simulate a damaged archive in tests).
    pub fn corrupt(&mut self, i: usize, bytes: Vec<u8>) {
        if let Some(t) = self.tensors.get_mut(i) {
            t.bytes = bytes;
        }
    }
}

impl Source for MemorySource {
    fn title(&self) -> String {
        self.title.clone()
    }

    fn rows(&self) -> &[TensorRow] {
        &self.rows
    }

    fn file_sizes(&self) -> (u64, u64) {
        let o = self.rows.iter().map(|r| r.original_bytes).sum();
        let a = self.rows.iter().map(|r| r.archive_bytes).sum();
        (o, a)
    }

    fn program(&self, i: usize) -> Result<Node, String> {
        self.tensors
            .get(i)
            .map(|t| t.program.clone())
            .ok_or_else(|| format!("no tensor number {i}"))
    }

    fn decode(&self, i: usize) -> Result<Vec<u8>, String> {
        let p = self.program(i)?;
        let words = execute(&p, u64::MAX).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        words.write_le_bytes(&mut out);
        Ok(out)
    }

    fn verify_tensor(&self, i: usize) -> Check {
        match self.decode(i) {
            Err(e) => Check::Failed(e),
            Ok(b) if Some(&b) == self.tensors.get(i).map(|t| &t.bytes) => Check::Exact,
            Ok(_) => Check::Mismatch(format!(
                "tensor {:?}: decoded bytes differ from the stored checksum",
                self.rows[i].name
            )),
        }
    }

    fn verify_all(
        &self,
        progress: &dyn Fn(u64, u64, &str),
        cancel: &dyn Fn() -> bool,
    ) -> VerifyOutcome {
        let total = self.rows.len();
        let mut out = VerifyOutcome {
            tensor: None,
            tensors: total,
            exact: 0,
            failures: Vec::new(),
            whole_file: None,
            seconds: 0.0,
        };
        for (i, row) in self.rows.iter().enumerate() {
            if cancel() {
                break;
            }
            progress(i as u64, total as u64, &row.name);
            match self.verify_tensor(i) {
                Check::Exact => out.exact += 1,
                Check::Mismatch(m) | Check::Failed(m) => out.failures.push(m),
            }
        }
        progress(total as u64, total as u64, "");
        out
    }
}

/// A small deterministic source for tests and examples: six tensors covering a float
/// matrix, a constant, a ramp, the paper's ±1.0 F32 words under a wide (CJK, emoji)
/// name, a name with terminal escape sequences, and an empty name.
pub fn fixture() -> MemorySource {
    // A fixed linear congruential generator: the same bytes on every machine.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u32
    };
    let mut weights = Vec::new();
    for _ in 0..128 {
        // Roughly normal values with small magnitudes, as BF16 (top half of an F32).
        let u = (0..4)
            .map(|_| f64::from(next()) / f64::from(u32::MAX))
            .sum::<f64>()
            - 2.0;
        let bits = ((u * 0.05) as f32).to_bits();
        weights.extend_from_slice(&((bits >> 16) as u16).to_le_bytes());
    }
    let positions: Vec<u8> = (0u64..12).flat_map(|v| v.to_le_bytes()).collect();
    let signs: Vec<u8> = [1.0f32, -1.0, 1.0, -1.0, 1.0, -1.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let tensors = vec![
        (
            "embed.weight".to_string(),
            Dtype::BF16,
            vec![8, 16],
            weights,
        ),
        (
            "norm.bias".to_string(),
            Dtype::BF16,
            vec![16],
            vec![0u8; 32],
        ),
        (
            "position_ids".to_string(),
            Dtype::I64,
            vec![1, 12],
            positions,
        ),
        ("名前.重み🙂".to_string(), Dtype::F32, vec![6], signs),
        (
            "evil\u{1b}[31mred\u{7}\u{9b}2J".to_string(),
            Dtype::U8,
            vec![6],
            vec![7, 7, 7, 9, 9, 9],
        ),
        (String::new(), Dtype::U8, vec![3], vec![1, 2, 3]),
    ];
    let opts = SearchOptions {
        budget: 64,
        ..SearchOptions::default()
    };
    MemorySource::synthesize("fixture.brv", tensors, &opts)
}
