//! Sources of reference records (docs/design.md §12): the files a version-3 archive's
//! tensors are coded against.
//!
//! A *source* is an original `.safetensors` file, pinned in the archive's index by its
//! length and xxh3-64 ([`SourceEntry`]): a file of the base checkpoint given with
//! `--base` (a fine-tune coded against its base), or another shard of the same
//! checkpoint folder (a tensor stored once across shards). A reference record names one
//! tensor of one source by its position in data order and that tensor's xxh3-64, and
//! holds a program for the *residual*: the tensor's words combined with the source's
//! words by XOR or by subtraction ([`RefOp`]). An identical tensor is a residual of
//! zeros, `const 0`, a few bytes.
//!
//! [`OpenedSource`] reads a source from its `.safetensors` file (memory-mapped) or from an
//! archive of it (each tensor decoded on demand and checked against that archive's own
//! checksums); [`BaseSet`] opens what `--base` names (a file, a checkpoint folder, an
//! archive or a compressed folder) and finds each tensor's counterpart in it.

use super::format::{RefOp, SourceEntry, SourceRole};
use super::safetensors::{parse, Region};
use crate::codec::{bucket, CodecId};
use crate::dsl::{ExecError, Node, Op, Ty};
use crate::error::{Error, Result};
use crate::hash::xxh3_64;
use crate::tensor::{Dtype, Words};
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One tensor of a source, in its data order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceTensor {
    /// Its name.
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its length in bytes.
    pub bytes: u64,
}

/// A file's bytes, memory-mapped (an empty file held as no bytes), or held in memory.
enum FileBytes {
    Map(memmap2::Mmap),
    Empty,
    Owned(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Map(m) => m,
            FileBytes::Empty => &[],
            FileBytes::Owned(v) => v,
        }
    }
}

/// Largest base file mapped with its pages in advance: 4 GiB.
const POPULATE_BELOW: u64 = 4 << 30;

impl FileBytes {
    fn open(path: &Path) -> Result<FileBytes> {
        crate::files::regular_file(path)?;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "cannot read", e))?
            .len();
        if len == 0 {
            return Ok(FileBytes::Empty);
        }
        // Hashed whole as soon as it is opened: its pages mapped in advance, when it is
        // small enough to stay in memory (a larger one is read as it is hashed).
        crate::files::map_file_with(&file, len <= POPULATE_BELOW)
            .map(FileBytes::Map)
            .map_err(|e| Error::io(path, "cannot map", e))
    }
}

/// What decodes a source's tensors when the source is an archive of it: the reader's
/// `Archive` (in `reader/source.rs`), named here by what it does so that this module,
/// which the reader uses, does not import the reader.
pub(crate) trait DecodeSource: Send + Sync {
    /// The bytes of tensor `t` (data order), decoded and checked.
    ///
    /// # Errors
    /// The archive's decode errors.
    fn decode_source_tensor(&self, t: usize) -> Result<Vec<u8>>;
}

enum Backing {
    /// A `.safetensors` file: its bytes and each tensor's range in them.
    File {
        map: FileBytes,
        ranges: Vec<Range<usize>>,
    },
    /// An archive of the source ([`DecodeSource`], the reader's `Archive`).
    Archive(Box<dyn DecodeSource>),
}

/// A source opened for reading: what it is pinned by, its tensors, and their bytes.
pub struct OpenedSource {
    path: PathBuf,
    /// Its name as an archive records it (set by [`BaseSet::open`]).
    name: String,
    original_len: u64,
    checksum: u64,
    tensors: Vec<SourceTensor>,
    backing: Backing,
}

impl std::fmt::Debug for OpenedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedSource")
            .field("path", &self.path)
            .field("original_len", &self.original_len)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl OpenedSource {
    /// A `.safetensors` file held in memory as a source named `name` (`path` labels
    /// errors): what a test or fuzz target codes against without writing a file.
    ///
    /// # Errors
    /// [`Error::Source`] if `bytes` is not a valid `.safetensors` file.
    pub fn from_bytes(bytes: Vec<u8>, name: &str, path: &Path) -> Result<OpenedSource> {
        OpenedSource::of_file(
            path.to_path_buf(),
            name.to_string(),
            FileBytes::Owned(bytes),
        )
    }

    fn of_file(path: PathBuf, name: String, map: FileBytes) -> Result<OpenedSource> {
        let src = parse(&map).map_err(|e| Error::source(&path, e))?;
        let data = src.data_start();
        let mut tensors = Vec::with_capacity(src.tensors().len());
        let mut ranges = Vec::with_capacity(src.tensors().len());
        for r in src.regions() {
            if let Region::Tensor(t) = *r {
                let info = &src.tensors()[t];
                tensors.push(SourceTensor {
                    name: info.name.clone(),
                    dtype: info.dtype,
                    shape: info.shape.clone(),
                    bytes: info.byte_len(),
                });
                ranges.push(data + info.begin as usize..data + info.end as usize);
            }
        }
        let checksum = xxh3_64(&map);
        let original_len = map.len() as u64;
        drop(src);
        Ok(OpenedSource {
            path,
            name,
            original_len,
            checksum,
            tensors,
            backing: Backing::File { map, ranges },
        })
    }

    /// The `.safetensors` file at `path` (memory-mapped) as a source named `name`.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Source`] if it is not valid.
    pub(crate) fn of_path(path: &Path, name: String) -> Result<OpenedSource> {
        OpenedSource::of_file(path.to_path_buf(), name, FileBytes::open(path)?)
    }

    /// A source whose tensors `decoder` decodes (an archive of it, in the reader),
    /// pinned by `original_len` and `checksum`.
    pub(crate) fn decoded(
        path: PathBuf,
        name: String,
        original_len: u64,
        checksum: u64,
        tensors: Vec<SourceTensor>,
        decoder: Box<dyn DecodeSource>,
    ) -> OpenedSource {
        OpenedSource {
            path,
            name,
            original_len,
            checksum,
            tensors,
            backing: Backing::Archive(decoder),
        }
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its name as an archive records it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames it (a shard is named by its path inside its folder).
    pub fn set_name(&mut self, name: String) {
        self.name = name;
    }

    /// Length of its original bytes.
    pub fn original_len(&self) -> u64 {
        self.original_len
    }

    /// xxh3-64 of its original bytes.
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// Its tensors in data order.
    pub fn tensors(&self) -> &[SourceTensor] {
        &self.tensors
    }

    /// The entry an archive coded against it records, in `role`.
    pub fn entry(&self, role: SourceRole) -> SourceEntry {
        SourceEntry {
            role,
            name: self.name.clone(),
            original_len: self.original_len,
            checksum: self.checksum,
        }
    }

    /// Whether it is what `entry` pins (same length and checksum; the name may differ).
    pub fn matches(&self, entry: &SourceEntry) -> bool {
        self.original_len == entry.original_len && self.checksum == entry.checksum
    }

    /// Whether its tensors' bytes are those its [`OpenedSource::checksum`] was computed
    /// over (a `.safetensors` file, hashed whole when opened): once the archive's pin of
    /// it matched, each tensor is what the archive was made against without hashing it
    /// again. An archive of the source decodes and checks each tensor as it goes.
    pub fn hashed_whole(&self) -> bool {
        matches!(self.backing, Backing::File { .. })
    }

    /// The bytes of tensor `t` (data order): borrowed from a `.safetensors` file,
    /// decoded (and checked) from an archive.
    ///
    /// # Errors
    /// [`Error::Refused`] of kind `no_such_tensor` for `t` out of range; an archive's
    /// decode errors.
    pub fn tensor_bytes(&self, t: usize) -> Result<Cow<'_, [u8]>> {
        if t >= self.tensors.len() {
            return Err(Error::Refused {
                kind: "no_such_tensor",
                message: format!(
                    "{}: has {} tensors, no tensor #{t}",
                    crate::shown::shown_path(&self.path),
                    self.tensors.len()
                ),
            });
        }
        match &self.backing {
            Backing::File { map, ranges } => Ok(Cow::Borrowed(&map[ranges[t].clone()])),
            Backing::Archive(a) => a.decode_source_tensor(t).map(Cow::Owned),
        }
    }
}

/// Whether the file at `path` starts with the archive magic.
pub(crate) fn is_archive_file(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == super::format::MAGIC)
}

/// The base checkpoint of `--base`: one source per `.safetensors` file (one for a file,
/// one per shard for a folder), and where each tensor's counterpart is found.
#[derive(Debug, Default)]
pub struct BaseSet {
    /// The base's files, in path order.
    pub sources: Vec<Arc<OpenedSource>>,
    path: PathBuf,
}

impl PartialEq for BaseSet {
    fn eq(&self, other: &BaseSet) -> bool {
        self.sources.len() == other.sources.len()
            && self
                .sources
                .iter()
                .zip(&other.sources)
                .all(|(a, b)| a.checksum == b.checksum && a.original_len == b.original_len)
    }
}

impl Eq for BaseSet {}

/// Base tensors not yet matched, (source, tensor) in order.
type Queue = std::collections::VecDeque<(usize, usize)>;

/// Where a tensor's counterpart is: source `source` of a [`BaseSet`] (or of the writer's
/// source list), tensor `tensor` of it in data order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Counterpart {
    /// Index of the source.
    pub source: usize,
    /// Position of the tensor among the source's tensors, in data order.
    pub tensor: usize,
    /// Only an identical tensor may be coded against it (a sibling shard's copy).
    pub exact: bool,
}

impl BaseSet {
    /// A base of the given sources (in memory, say: [`OpenedSource::from_bytes`]);
    /// `path` labels it in messages.
    pub fn from_sources(sources: Vec<OpenedSource>, path: &Path) -> BaseSet {
        BaseSet {
            sources: sources.into_iter().map(Arc::new).collect(),
            path: path.to_path_buf(),
        }
    }

    /// The path `--base` named.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counterpart of each of `tensors` (name, dtype, shape, in the target's data
    /// order): the base tensor of the same name, dtype and byte length; else, for the
    /// tensors left, the `k`-th base tensor of the same dtype and shape not matched by
    /// name for the target's `k`-th such tensor (a renamed checkpoint keeps its order).
    pub fn counterparts(&self, tensors: &[(&str, Dtype, &[u64])]) -> Vec<Option<Counterpart>> {
        let mut by_name: HashMap<&str, (usize, usize)> = HashMap::new();
        for (s, src) in self.sources.iter().enumerate() {
            for (t, info) in src.tensors.iter().enumerate() {
                by_name.entry(info.name.as_str()).or_insert((s, t));
            }
        }
        let mut taken = vec![Vec::new(); self.sources.len()];
        for (s, src) in self.sources.iter().enumerate() {
            taken[s] = vec![false; src.tensors.len()];
        }
        let mut out = vec![None; tensors.len()];
        for (i, &(name, dtype, shape)) in tensors.iter().enumerate() {
            if let Some(&(s, t)) = by_name.get(name) {
                let info = &self.sources[s].tensors[t];
                let bytes = dtype.byte_len(shape.iter().product()).unwrap_or(u64::MAX);
                if info.dtype == dtype && info.bytes == bytes && bytes > 0 {
                    out[i] = Some(Counterpart {
                        source: s,
                        tensor: t,
                        exact: false,
                    });
                    taken[s][t] = true;
                }
            }
        }
        // The rest by (dtype, shape), in order.
        let mut free: HashMap<(Dtype, &[u64]), Queue> = HashMap::new();
        for (s, src) in self.sources.iter().enumerate() {
            for (t, info) in src.tensors.iter().enumerate() {
                if !taken[s][t] && info.bytes > 0 {
                    free.entry((info.dtype, info.shape.as_slice()))
                        .or_default()
                        .push_back((s, t));
                }
            }
        }
        for (i, &(_, dtype, shape)) in tensors.iter().enumerate() {
            if out[i].is_none() {
                if let Some((s, t)) = free.get_mut(&(dtype, shape)).and_then(|q| q.pop_front()) {
                    out[i] = Some(Counterpart {
                        source: s,
                        tensor: t,
                        exact: false,
                    });
                }
            }
        }
        out
    }
}

/// The bytes of a tensor coded against a source tensor: its reference record's residual
/// program `node` (of type `ty`) run against the source tensor's bytes `source`
/// (little-endian words of `ty`'s width, `ty.len` of them), each residual word combined
/// with the source's word by `op`.
///
/// A literal or a `concat` of literals (what the writer makes) is decoded literal by
/// literal straight into the output: a bucket literal combined with its base words as it
/// is decoded ([`bucket::decode_combined`], the base read in place), any other literal
/// decoded and then combined ([`combine`]). Another program runs through the executor,
/// given the base as words only if a literal is coded against them. Either way the
/// bytes, and for a damaged program the error, are the executor's.
///
/// # Errors
/// As [`crate::dsl::execute_in`].
pub fn restore(
    node: &Node,
    ty: Ty,
    source: &[u8],
    op: RefOp,
) -> std::result::Result<Vec<u8>, ExecError> {
    let word_bytes = crate::tensor::container_bytes(ty.width);
    let literals: Option<Vec<&Node>> = match node.op() {
        Op::Lit(_) => Some(vec![node]),
        Op::Concat(children) if children.iter().all(|c| matches!(c.op(), Op::Lit(_))) => {
            Some(children.iter().collect())
        }
        _ => None,
    };
    let whole = Some(source.len() as u64) == ty.len.checked_mul(word_bytes as u64);
    if let Some(literals) = literals.filter(|_| whole && matches!(ty.width, 8 | 16 | 32 | 64)) {
        let mut out = Vec::new();
        if out.try_reserve_exact(source.len()).is_ok() {
            let how = match op {
                RefOp::Xor => bucket::Combine::Xor,
                RefOp::Sub => bucket::Combine::Add,
            };
            let mut at = 0;
            for part in literals {
                let Op::Lit(lit) = part.op() else {
                    unreachable!("only literals were taken")
                };
                let pty = part.ty();
                let err = |source| ExecError::Lit { ty: pty, source };
                // A concat's children have its width; their lengths add up to its length.
                let n = usize::try_from(pty.len).map_err(|_| err(too_long(lit, pty)))?;
                let base = &source[at..at + n * word_bytes];
                if lit.codec == CodecId::Bucket {
                    bucket::decode_combined(&lit.body, ty.width, n, base, how, &mut out)
                        .map_err(err)?;
                } else {
                    let start = out.len();
                    lit.decode(pty).map_err(err)?.write_le_bytes(&mut out);
                    combine(&mut out[start..], base, op, word_bytes);
                }
                at += n * word_bytes;
            }
            return Ok(out);
        }
    }
    let context = crate::dsl::exec::uses_context(node)
        .then(|| Words::from_le_bytes(ty.width, source))
        .flatten();
    let words = crate::dsl::execute_in(node, ty.len, context.as_ref())?;
    let mut bytes = crate::tensor::words_into_le_bytes(words);
    if bytes.len() == source.len() {
        combine(&mut bytes, source, op, word_bytes);
    }
    Ok(bytes)
}

fn too_long(lit: &crate::dsl::Lit, ty: Ty) -> crate::codec::CodecError {
    crate::codec::CodecError::Invalid {
        codec: lit.codec.name(),
        what: format!("length {} does not fit in memory", ty.len),
    }
}

/// Combines residual words with a source's words in place: `w[i] = op(s[i], r[i])` on
/// little-endian words of `word_bytes` bytes (1, 2, 4 or 8), where `residual` holds the
/// `r` and receives the `w`, and `source` the `s` (same length). Vectorized: 32-byte
/// chunks as arrays of words, which the compiler keeps in vector registers.
///
/// # Panics
/// If the lengths differ or `word_bytes` is not 1, 2, 4 or 8 (callers check both).
pub fn combine(residual: &mut [u8], source: &[u8], op: RefOp, word_bytes: usize) {
    assert_eq!(residual.len(), source.len(), "residual and source lengths");
    match op {
        RefOp::Xor => xor_bytes(residual, source),
        RefOp::Sub => add_words(residual, source, word_bytes, false),
    }
}

/// The residual of `target` against `source`: `r[i] = target[i] ^ source[i]`, or
/// `target[i] - source[i] mod 2^b` for [`RefOp::Sub`] (see [`combine`]).
///
/// # Panics
/// As [`combine`].
pub fn residual(target: &[u8], source: &[u8], op: RefOp, word_bytes: usize) -> Vec<u8> {
    assert_eq!(target.len(), source.len(), "target and source lengths");
    let mut out = target.to_vec();
    match op {
        RefOp::Xor => xor_bytes(&mut out, source),
        RefOp::Sub => add_words(&mut out, source, word_bytes, true),
    }
    out
}

/// Bytes a chunk of [`combine`]'s loops holds: one AVX2 register.
const CHUNK: usize = 32;

fn xor_bytes(acc: &mut [u8], src: &[u8]) {
    let mut a = acc.chunks_exact_mut(CHUNK);
    let mut s = src.chunks_exact(CHUNK);
    for (a, s) in (&mut a).zip(&mut s) {
        for (x, y) in a.iter_mut().zip(s) {
            *x ^= *y;
        }
    }
    for (x, y) in a.into_remainder().iter_mut().zip(s.remainder()) {
        *x ^= *y;
    }
}

/// `acc[i] = acc[i] + s[i]` (or `- s[i]` with `subtract`) on little-endian words.
fn add_words(acc: &mut [u8], src: &[u8], word_bytes: usize, subtract: bool) {
    macro_rules! go {
        ($t:ty, $n:expr) => {{
            let op = |x: $t, y: $t| {
                if subtract {
                    x.wrapping_sub(y)
                } else {
                    x.wrapping_add(y)
                }
            };
            let word = |b: &[u8]| <$t>::from_le_bytes(b.try_into().expect("a word's bytes"));
            let mut a = acc.chunks_exact_mut(CHUNK);
            let mut s = src.chunks_exact(CHUNK);
            for (a, s) in (&mut a).zip(&mut s) {
                // A chunk's words read into an array, combined, written back: each step
                // a vector operation.
                let mut w = [0 as $t; CHUNK / $n];
                for ((w, a), s) in w.iter_mut().zip(a.chunks_exact($n)).zip(s.chunks_exact($n)) {
                    *w = op(word(a), word(s));
                }
                for (a, w) in a.chunks_exact_mut($n).zip(w) {
                    a.copy_from_slice(&w.to_le_bytes());
                }
            }
            let a = a.into_remainder();
            for (a, s) in a.chunks_exact_mut($n).zip(s.remainder().chunks_exact($n)) {
                let w = op(word(a), word(s));
                a.copy_from_slice(&w.to_le_bytes());
            }
        }};
    }
    match word_bytes {
        1 => go!(u8, 1),
        2 => go!(u16, 2),
        4 => go!(u32, 4),
        8 => go!(u64, 8),
        w => panic!("word of {w} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residuals_combine_back_for_every_width() {
        let target: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        let source: Vec<u8> = (0..64u32).map(|i| (i * 101 + 3) as u8).collect();
        for w in [1, 2, 4, 8] {
            for op in [RefOp::Xor, RefOp::Sub] {
                let mut r = residual(&target, &source, op, w);
                combine(&mut r, &source, op, w);
                assert_eq!(r, target, "{op:?} of {w}-byte words");
            }
        }
        // A worked value: 0x0100 - 0x00ff = 0x0001 as 16-bit words, not bytewise.
        let r = residual(&[0x00, 0x01], &[0xff, 0x00], RefOp::Sub, 2);
        assert_eq!(r, vec![0x01, 0x00]);
        assert_eq!(residual(&[0x0f], &[0xff], RefOp::Xor, 1), vec![0xf0]);
    }
}
