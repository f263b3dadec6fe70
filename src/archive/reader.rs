//! Reading archives (DESIGN §7): open, list, decode one tensor, restore the original.
//!
//! [`Archive::open`] memory-maps the file and validates its structure — file header,
//! trailer, index and every record's fields — without decoding any program. The archive
//! is treated as hostile: every length, count and offset is checked against the bytes
//! present before it is used, nothing is allocated from an unchecked number, and nothing
//! panics. Programs are read ([`crate::dsl::read_program`]) and run only when a tensor is
//! decoded, against the type its dtype and byte length give, and the result is compared
//! with the stored xxh3-64 checksum.

mod entries;
mod items;
mod restore;
mod source;
pub(crate) mod stream;
mod structure;

pub(crate) use entries::{group_shares, Item, LostEntry};
pub use entries::{
    DamagedRegion, DecompressOptions, DecompressSummary, GapEntry, GroupEntry, Reference,
    RegionSpan, TensorEntry, MAX_REGION_BYTES,
};
use items::{Head, Structure};
use structure::{parse_structure, parse_walk, within_wire};

use super::base::OpenedSource;
use super::format::{self, Settings, SourceEntry};
use crate::dsl::{read_program, read_program_shared, Node, Ty};
use crate::error::{ArchiveError, Error, Result};
use crate::hash::{xxh3_64, Xxh3};
use bytes::Bytes;
use std::collections::HashMap;
use std::fs::File;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

enum Backing {
    /// A mapped file, and the same bytes as [`Bytes`] sharing the mapping (the literal
    /// bodies of programs read for decoding are slices of it, not copies).
    Map(Arc<memmap2::Mmap>, Bytes),
    /// An archive held in memory.
    Owned(Bytes),
    /// A remote archive read by ranges: its image holds what opening read.
    #[cfg(feature = "object-store")]
    Ranged(Box<dyn RangedBytes>),
}

/// The bytes of a remote archive read by ranges (the `remote` module's, over object
/// storage), named here by what the reader asks of them so that the reader does not
/// import the module that opens URLs.
#[cfg(feature = "object-store")]
pub(crate) trait RangedBytes: Send + Sync {
    /// A sparse image of the archive: what opening read, zeros elsewhere.
    fn image(&self) -> &[u8];
    /// The URL, which labels the archive.
    fn url(&self) -> &str;
    /// Bytes fetched so far.
    fn bytes_read(&self) -> u64;
    /// The archive bytes in `range`, fetched unless opening read them.
    ///
    /// # Errors
    /// [`Error::Io`] naming the URL if a read fails.
    fn get(&self, range: &Range<usize>) -> Result<std::borrow::Cow<'_, [u8]>>;
}

impl Backing {
    /// A mapped file as a backing.
    fn map(map: memmap2::Mmap) -> Backing {
        /// The mapping as an owner of [`Bytes`].
        struct Shared(Arc<memmap2::Mmap>);
        impl AsRef<[u8]> for Shared {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
        let map = Arc::new(map);
        let bytes = Bytes::from_owner(Shared(Arc::clone(&map)));
        Backing::Map(map, bytes)
    }

    /// The bytes in `range` as shared [`Bytes`] (no copy); `None` past the end, and
    /// for a remote archive, whose bytes are fetched.
    fn shared(&self, range: &Range<usize>) -> Option<Bytes> {
        let all = match self {
            Backing::Map(_, b) | Backing::Owned(b) => b,
            #[cfg(feature = "object-store")]
            Backing::Ranged(_) => return None,
        };
        (range.start <= range.end && range.end <= all.len()).then(|| all.slice(range.clone()))
    }
}

impl Deref for Backing {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Backing::Map(_, b) | Backing::Owned(b) => b,
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.image(),
        }
    }
}

/// An opened, structurally validated archive.
pub struct Archive {
    path: PathBuf,
    bytes: Backing,
    /// What its file header, trailer, index and header record say ([`Head`]).
    head: Head,
    /// Each source, once attached ([`Archive::attach`]).
    links: Vec<OnceLock<Arc<OpenedSource>>>,
    tensors: Vec<TensorEntry>,
    gaps: Vec<GapEntry>,
    groups: Vec<GroupEntry>,
    items: Vec<Item>,
    /// The regions of each item stored in a regions record (format 4).
    regions: HashMap<Item, Arc<[RegionSpan]>>,
    /// The items of an archive opened without its index whose records were not found.
    lost: Vec<LostEntry>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("path", &self.path)
            .field("archive_len", &self.bytes.len())
            .field("original_len", &self.head.original_len)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl Archive {
    /// Opens and validates the archive at `path` (memory-mapped).
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be read; [`Error::Archive`] if it is not an archive,
    /// has an unsupported version, or its structure is inconsistent.
    pub fn open(path: &Path) -> Result<Archive> {
        Archive::open_as(path, path)
    }

    /// [`Archive::open`] of the file at `path`, named `label` in its messages and by
    /// [`Archive::path`] (a temporary file named as the output it becomes).
    pub(crate) fn open_as(path: &Path, label: &Path) -> Result<Archive> {
        crate::files::regular_file(path)?;
        let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(path, "cannot read", e))?;
        let bytes = if meta.len() == 0 {
            Backing::Owned(Bytes::new())
        } else {
            Backing::map(
                crate::files::map_file(&file).map_err(|e| Error::io(path, "cannot map", e))?,
            )
        };
        Archive::validate(label.to_path_buf(), bytes)
    }

    /// Validates an archive held in memory; `path` only labels errors.
    ///
    /// # Errors
    /// As [`Archive::open`].
    pub fn from_bytes(bytes: Vec<u8>, path: impl Into<PathBuf>) -> Result<Archive> {
        Archive::validate(path.into(), Backing::Owned(bytes.into()))
    }

    /// A remote archive whose structure `ranged` has read ([`Archive::open_url`]).
    #[cfg(feature = "object-store")]
    pub(crate) fn from_ranged(ranged: Box<dyn RangedBytes>) -> Result<Archive> {
        Archive::validate(PathBuf::from(ranged.url()), Backing::Ranged(ranged))
    }

    /// Bytes read from the archive's store so far (an archive opened by
    /// [`Archive::open_url`](crate::archive::Archive::open_url)); its length for one opened otherwise.
    pub fn bytes_read(&self) -> u64 {
        match &self.bytes {
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.bytes_read(),
            _ => self.bytes.len() as u64,
        }
    }

    /// The archive bytes in `range`: for a remote archive, fetched.
    fn fetch(&self, range: &Range<usize>) -> Result<std::borrow::Cow<'_, [u8]>> {
        match &self.bytes {
            #[cfg(feature = "object-store")]
            Backing::Ranged(r) => r.get(range),
            b => b
                .get(range.clone())
                .map(std::borrow::Cow::Borrowed)
                .ok_or_else(|| {
                    Error::archive(
                        &self.path,
                        ArchiveError::DamagedRecord {
                            what: format!(
                                "bytes [{}, {}) are past the end of the archive, cut at byte {}",
                                range.start,
                                range.end,
                                b.len()
                            ),
                        },
                    )
                }),
        }
    }

    /// Opens the archive at `path` for `decompress --salvage`: as [`Archive::open`], or,
    /// for a format-4 archive whose trailer or index cannot be read (the file cut short,
    /// say by an interrupted download, or the index damaged), by walking its records
    /// from byte 16 (each record's frame gives its kind and length): every record that
    /// is whole and reads is used, and the tensors and gaps after the last one are
    /// restored by none ([`Archive::missing_index`] says so; salvage zero-fills and names
    /// them). The header record must be whole and restore the source's header, which
    /// names every tensor.
    ///
    /// # Errors
    /// As [`Archive::open`] when the archive is not of format 4 or its damage is not in
    /// its trailer or index; [`Error::Archive`] saying that nothing can be salvaged when
    /// the header record is cut or damaged too.
    pub fn open_for_salvage(path: &Path) -> Result<Archive> {
        let e = match Archive::open(path) {
            Ok(a) => return Ok(a),
            Err(e) => e,
        };
        let Error::Archive {
            source: ArchiveError::Corrupt { what },
            ..
        } = &e
        else {
            return Err(e);
        };
        let file = File::open(path).map_err(|e| Error::io(path, "cannot open", e))?;
        let bytes = Backing::map(
            crate::files::map_file(&file).map_err(|e| Error::io(path, "cannot map", e))?,
        );
        Archive::walk(path.to_path_buf(), bytes, what).unwrap_or(Err(e))
    }

    /// [`Archive::open_for_salvage`] of an archive held in memory; `path` only labels
    /// errors.
    ///
    /// # Errors
    /// As [`Archive::open_for_salvage`].
    pub fn from_bytes_for_salvage(bytes: Vec<u8>, path: impl Into<PathBuf>) -> Result<Archive> {
        let path = path.into();
        let e = match parse_structure(&bytes) {
            Ok(s) => {
                return Ok(Archive::from_structure(
                    path,
                    Backing::Owned(bytes.into()),
                    s,
                ))
            }
            Err(e) => e,
        };
        let ArchiveError::Corrupt { what } = &e else {
            return Err(Error::archive(&path, e));
        };
        let what = what.clone();
        Archive::walk(path.clone(), Backing::Owned(bytes.into()), &what)
            .unwrap_or_else(|| Err(Error::archive(&path, e)))
    }

    /// The archive in `bytes` opened by walking its records ([`parse_walk`]), its index
    /// being unreadable for `why`; `None` when it is not a format-4 archive.
    fn walk(path: PathBuf, bytes: Backing, why: &str) -> Option<Result<Archive>> {
        if bytes.get(..8) != Some(&format::MAGIC[..])
            || bytes.get(8..10) != Some(&4u16.to_le_bytes()[..])
        {
            return None;
        }
        Some(match parse_walk(&bytes, why) {
            Ok(s) => Ok(Archive::from_structure(path, bytes, s)),
            Err(e) => Err(Error::archive(&path, e)),
        })
    }

    fn validate(path: PathBuf, bytes: Backing) -> Result<Archive> {
        match parse_structure(&bytes) {
            Ok(s) => Ok(Archive::from_structure(path, bytes, s)),
            Err(e) => Err(Error::archive(&path, e)),
        }
    }

    fn from_structure(path: PathBuf, bytes: Backing, s: Structure) -> Archive {
        Archive {
            path,
            bytes,
            links: s.head.sources.iter().map(|_| OnceLock::new()).collect(),
            head: s.head,
            tensors: s.tensors,
            gaps: s.gaps,
            groups: s.groups,
            items: s.items,
            regions: s.regions,
            lost: s.lost,
        }
    }

    /// The archive's path (or the label given to [`Archive::from_bytes`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Length of the archive in bytes.
    pub fn archive_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Length of the original file in bytes.
    pub fn original_len(&self) -> u64 {
        self.head.original_len
    }

    /// xxh3-64 of the whole original file.
    pub fn file_checksum(&self) -> u64 {
        self.head.file_checksum
    }

    /// Whether the archive's record bytes (names, shapes, programs: everything but the
    /// index) still hash to the checksum stored when it was written. Reads every record.
    pub fn records_intact(&self) -> bool {
        self.records_intact_unless(&AtomicBool::new(false))
            .unwrap_or(false)
    }

    /// [`Archive::records_intact`], given up (`None`) once `stop` is set: checked
    /// between chunks, so that a failed decompression does not wait for the hash of a
    /// large archive.
    fn records_intact_unless(&self, stop: &AtomicBool) -> Option<bool> {
        // In chunks whose mapped pages are released once hashed: memory does not grow
        // with the archive.
        const CHUNK: usize = 8 << 20;
        let mut hasher = Xxh3::new();
        let mut at = format::FILE_HEADER_LEN;
        while at < self.head.records_end {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let end = self.head.records_end.min(at + CHUNK);
            hasher.update(&self.fetch(&(at..end)).ok()?);
            self.release(&(at..end));
            at = end;
        }
        Some(hasher.digest() == self.head.records_checksum)
    }

    /// Length of the source's JSON header in bytes (its 8-byte length field's value).
    pub fn header_len(&self) -> u64 {
        self.head.header_len
    }

    /// Bytes of the header record in the archive.
    pub fn header_archive_bytes(&self) -> u64 {
        self.head.header_record.len() as u64
    }

    /// The tensors, in record (data-offset) order.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// The gaps (bytes no tensor owns), in offset order.
    pub fn gaps(&self) -> &[GapEntry] {
        &self.gaps
    }

    /// The group records (version 2): runs of small tensors stored together.
    pub fn groups(&self) -> &[GroupEntry] {
        &self.groups
    }

    /// The archive's format version (1 to 4).
    pub fn version(&self) -> u16 {
        self.head.version
    }

    /// The source's file name as the archive stores it (version 2; `None` when it was
    /// not known, e.g. for an archive made in memory, and for version 1).
    pub fn file_name(&self) -> Option<&str> {
        self.head.file_name.as_deref()
    }

    /// The distinct search settings that built the archive's records (empty for
    /// version 1, which does not record them).
    pub fn settings(&self) -> &[Settings] {
        &self.head.settings
    }

    /// The sources its reference records take tensors from (version 3; empty before):
    /// each pinned by its length and xxh3-64.
    pub fn sources(&self) -> &[SourceEntry] {
        &self.head.sources
    }

    /// Runs `node` (the program of `item`, `ty.len` words) and returns the item's bytes:
    /// for a reference record, the residual combined with its source tensor's.
    pub(crate) fn run_item(&self, item: Item, node: &Node, ty: Ty) -> Result<Vec<u8>> {
        let reference = match item {
            Item::Tensor(i) => self.tensors[i].reference,
            _ => None,
        };
        let Some(r) = reference else {
            let len = ty
                .len
                .saturating_mul(crate::tensor::container_bytes(ty.width) as u64);
            let len = usize::try_from(len).map_err(|_| {
                self.decode_err(
                    item,
                    crate::dsl::ExecError::TooLarge {
                        len: ty.len,
                        limit: ty.len,
                    },
                )
            })?;
            let mut bytes = vec![0u8; len];
            crate::dsl::fused::execute_into(node, &mut bytes)
                .map_err(|e| self.decode_err(item, e))?;
            return Ok(bytes);
        };
        let wb = crate::tensor::container_bytes(ty.width);
        let len = ty.len.saturating_mul(wb as u64);
        let source = self.source_bytes(item, &r, len)?;
        super::base::restore(node, ty, &source, r.op).map_err(|e| self.decode_err(item, e))
    }

    /// Whether `item` is a tensor coded against a source.
    pub(crate) fn is_reference(&self, item: Item) -> bool {
        matches!(item, Item::Tensor(i) if self.tensors[i].reference.is_some())
    }

    /// Index in [`Archive::tensors`] of the first tensor named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// [`Archive::find`], also taking a name as `ls` prints it: a name with control
    /// characters or backslashes is printed escaped ([`crate::shown::escape_name`]), so
    /// a person copies the escaped form. The exact name wins; an escaped form matches
    /// only the one tensor it escapes.
    pub fn find_as_printed(&self, name: &str) -> Option<usize> {
        self.find(name).or_else(|| {
            let mut hits = (0..self.tensors.len())
                .filter(|&i| crate::shown::escape_name(&self.tensors[i].name) == name);
            match (hits.next(), hits.next()) {
                (Some(i), None) => Some(i),
                _ => None,
            }
        })
    }

    fn tensor(&self, i: usize) -> Result<&TensorEntry> {
        self.tensors.get(i).ok_or_else(|| {
            Error::archive(
                &self.path,
                ArchiveError::NoSuchTensor {
                    index: i,
                    count: self.tensors.len(),
                },
            )
        })
    }

    /// Reads (without running) the program that restores tensor `i`: its record's, or
    /// for a tensor in a group the group's (of the group's type, [`GroupEntry::ty`]);
    /// an empty tensor of a version-2 archive, which has no record, gets `Lit` of no
    /// words.
    ///
    /// # Errors
    /// [`ArchiveError::NoSuchTensor`] for a bad index; [`ArchiveError::Decode`] if the
    /// program bytes are malformed or do not have the tensor's type.
    pub fn program(&self, i: usize) -> Result<Node> {
        let t = self.tensor(i)?;
        match t.group {
            Some(g) => self.read_at(Item::Group(g), &t.program, self.groups[g].ty()),
            None if t.record.is_empty() && t.original_bytes() == 0 => {
                Ok(Node::lit(&crate::tensor::Words::empty(t.dtype.word_bits())))
            }
            None => self.read_at(Item::Tensor(i), &t.program, t.ty()),
        }
    }

    /// The program of the source header (type `u8[header_len]`).
    ///
    /// # Errors
    /// [`ArchiveError::Decode`] if it is malformed.
    pub fn header_program(&self) -> Result<Node> {
        self.read_at(Item::Header, &self.head.header_program, self.header_ty())
    }

    /// Decodes tensor `i` into its original bytes and checks them against the stored
    /// checksum (a tensor in a group: the whole group is decoded and checked, then its
    /// part returned).
    ///
    /// # Errors
    /// As [`Archive::program`], plus [`ArchiveError::Decode`] if the program does not run
    /// and [`Error::Mismatch`] if the bytes differ from the stored checksum.
    pub fn decode_tensor(&self, i: usize) -> Result<Vec<u8>> {
        let t = self.tensor(i)?;
        match t.group {
            Some(g) => {
                let group = &self.groups[g];
                let all = self.decode_checked(Item::Group(g))?;
                let at = (t.begin - group.begin) as usize;
                Ok(all[at..at + t.original_bytes() as usize].to_vec())
            }
            None if t.record.is_empty() && t.original_bytes() == 0 => Ok(Vec::new()),
            None => self.decode_checked(Item::Tensor(i)),
        }
    }

    /// The words of the base tensor that tensor `i`'s reference record is coded against
    /// (of the tensor's word width and length), which its residual program's bucket
    /// literals may take as their context ([`crate::dsl::execute_in`]); `None` for a
    /// tensor that is not a reference.
    ///
    /// # Errors
    /// [`ArchiveError::NoSuchTensor`] for a bad index; a missing or mismatched source, as
    /// [`Archive::decode_tensor`].
    pub fn base_words(&self, i: usize) -> Result<Option<crate::tensor::Words>> {
        let t = self.tensor(i)?;
        let Some(r) = t.reference else {
            return Ok(None);
        };
        let width = t.dtype.word_bits();
        let source = self.source_bytes(Item::Tensor(i), &r, t.original_bytes())?;
        Ok(crate::tensor::Words::from_le_bytes(width, &source))
    }

    /// Decodes the source's JSON header and checks it against the stored checksum.
    ///
    /// # Errors
    /// As [`Archive::decode_tensor`].
    pub fn header_bytes(&self) -> Result<Vec<u8>> {
        self.decode_checked(Item::Header)
    }

    /// Where the tensor records disagree with the source header the archive restores:
    /// each record's name, dtype, shape and data offsets against the header's entry at
    /// its index, one message per record that differs (empty when all agree). Decodes
    /// only the header (small), so listing can tell a damaged record (a name changed
    /// after writing) from a sound one without hashing the archive.
    ///
    /// # Errors
    /// As [`Archive::header_bytes`] (a damaged header record is a checksum mismatch);
    /// [`Error::Archive`] if the restored header is not a `.safetensors` header.
    pub fn header_disagreements(&self) -> Result<Vec<String>> {
        if self.head.version >= 2 {
            // Version-2 records hold no name, dtype, shape or offsets: the header is the
            // only place that says them, checked against its checksum when opened.
            return Ok(Vec::new());
        }
        let header = self.header_bytes()?;
        let entries = std::str::from_utf8(&header)
            .ok()
            .and_then(|text| super::safetensors::header_tensors(text).ok())
            .ok_or_else(|| {
                Error::archive(
                    &self.path,
                    ArchiveError::Decode {
                        region: "header".to_string(),
                        what: "the restored header is not a .safetensors header".to_string(),
                    },
                )
            })?;
        let mut out = Vec::new();
        for t in &self.tensors {
            let i = t.header_index;
            let Some((name, dtype, shape, offsets)) =
                usize::try_from(i).ok().and_then(|i| entries.get(i))
            else {
                out.push(format!(
                    "record of tensor {:?}: the header has no entry #{i}",
                    t.name
                ));
                continue;
            };
            let mut what = Vec::new();
            if *name != t.name {
                what.push(format!("the header names it {name:?}"));
            }
            if dtype != t.dtype.name() {
                what.push(format!("dtype {}, the header says {dtype}", t.dtype.name()));
            }
            if *shape != t.shape {
                what.push(format!("shape {:?}, the header says {shape:?}", t.shape));
            }
            if *offsets != (t.begin, t.end) {
                what.push(format!(
                    "offsets [{}, {}], the header says [{}, {}]",
                    t.begin, t.end, offsets.0, offsets.1
                ));
            }
            if !what.is_empty() {
                out.push(format!(
                    "record of tensor {:?}: {}",
                    t.name,
                    what.join(", ")
                ));
            }
        }
        Ok(out)
    }

    fn header_ty(&self) -> Ty {
        Ty::new(8, self.head.header_len)
    }

    pub(crate) fn items(&self) -> &[Item] {
        &self.items
    }

    /// Description of an item for messages: `header`, `tensor "w"`, `gap at ...`.
    pub(crate) fn item_region(&self, item: Item) -> String {
        match item {
            Item::Header => "header".to_string(),
            Item::Tensor(i) => format!("tensor {:?}", self.tensors[i].name),
            Item::Gap(g) => {
                let g = &self.gaps[g];
                format!("gap at data bytes [{}, {})", g.begin, g.end)
            }
            Item::Group(k) => {
                let g = &self.groups[k];
                format!(
                    "group of {} tensors {:?} to {:?}",
                    g.tensors.len(),
                    self.tensors[g.tensors.start].name,
                    self.tensors[g.tensors.end - 1].name
                )
            }
            Item::Lost(k) => {
                let l = &self.lost[k];
                match l.tensor {
                    Some(t) => format!("tensor {:?}", self.tensors[t].name),
                    None => format!("gap at data bytes [{}, {})", l.begin, l.end),
                }
            }
        }
    }

    /// Label of an item for progress: the tensor name (a group's first), `(header)` or
    /// `(gap)`.
    pub(crate) fn item_label(&self, item: Item) -> &str {
        match item {
            Item::Header => "(header)",
            Item::Tensor(i) => &self.tensors[i].name,
            Item::Gap(_) => "(gap)",
            Item::Group(k) => &self.tensors[self.groups[k].tensors.start].name,
            Item::Lost(k) => match self.lost[k].tensor {
                Some(t) => &self.tensors[t].name,
                None => "(gap)",
            },
        }
    }

    /// Original bytes an item restores (the header's include the 8-byte length field).
    pub(crate) fn item_original_bytes(&self, item: Item) -> u64 {
        match item {
            Item::Header => 8 + self.head.header_len,
            Item::Tensor(i) => self.tensors[i].original_bytes(),
            Item::Gap(g) => self.gaps[g].end - self.gaps[g].begin,
            Item::Group(k) => self.groups[k].end - self.groups[k].begin,
            Item::Lost(k) => self.lost[k].end - self.lost[k].begin,
        }
    }

    pub(crate) fn item_checksum(&self, item: Item) -> u64 {
        match item {
            Item::Header => self.head.header_checksum,
            Item::Tensor(i) => self.tensors[i].checksum,
            Item::Gap(g) => self.gaps[g].checksum,
            Item::Group(k) => self.groups[k].checksum,
            // Never decoded: nothing is compared with it.
            Item::Lost(_) => 0,
        }
    }

    /// Why a lost item's record was not found (`None` for any other item).
    pub(crate) fn lost_reason(&self, item: Item) -> Option<&str> {
        match item {
            Item::Lost(k) => Some(&self.lost[k].why),
            _ => None,
        }
    }

    /// The regions of `item` with checksums of their own (a regions record, format 4;
    /// `None` for any other item).
    pub(crate) fn item_regions(&self, item: Item) -> Option<&Arc<[RegionSpan]>> {
        self.regions.get(&item)
    }

    /// Bytes of the frame (marker and kind, length, item count) that starts tensor `i`'s
    /// record in a format-4 archive; 0 in earlier formats, for an empty tensor, or when
    /// the record's first bytes cannot be read.
    pub fn record_frame_bytes(&self, i: usize) -> u64 {
        let Some(t) = self.tensors.get(i) else {
            return 0;
        };
        if self.head.version < 4 || t.record.is_empty() {
            return 0;
        }
        // A byte of marker and kind, then two LEB128 numbers of at most 10 bytes each.
        let first = t.record.start..t.record.end.min(t.record.start.saturating_add(21));
        let Ok(bytes) = self.fetch(&first) else {
            return 0;
        };
        let mut c = format::Cursor::new(&bytes, "record frame");
        let frame = |c: &mut format::Cursor<'_>| -> Result<u64, String> {
            c.u8()?;
            c.uleb()?;
            c.uleb()?;
            Ok(c.pos() as u64)
        };
        frame(&mut c).unwrap_or(0)
    }

    /// The regions of tensor `i` stored with a checksum each (a tensor of more than
    /// [`super::writer::REGION_WORDS`] words in a format-4 archive), in order; empty for
    /// any other tensor.
    pub fn tensor_regions(&self, i: usize) -> &[RegionSpan] {
        self.regions
            .get(&Item::Tensor(i))
            .map_or(&[], |r| r.as_ref())
    }

    /// For an archive opened without its index ([`Archive::open_for_salvage`]): what is
    /// wrong with it and where the records found end; `None` for an archive opened
    /// through its index.
    pub fn missing_index(&self) -> Option<&str> {
        self.head.indexless.as_deref()
    }

    /// Reads the program (or part of a program) of `item` held in `range` of the archive
    /// as type `ty`; errors say where `range` starts.
    pub(crate) fn read_at(&self, item: Item, range: &Range<usize>, ty: Ty) -> Result<Node> {
        // Literal bodies share the archive's bytes where it has them (a mapped file or a
        // buffer): no copy of the payloads. The caller releases the range's mapped pages
        // only after running the program.
        let node = match self.bytes.shared(range) {
            Some(b) => read_program_shared(&b, ty),
            None => read_program(&self.fetch(range)?, ty),
        }
        .map_err(|e| self.decode_err_at(item, range.start, e))?;
        within_wire(node, self.head.wire).map_err(|e| self.decode_err_at(item, range.start, e))
    }

    /// The archive bytes in `range` (a range this archive's index produced). For a
    /// remote archive whose record cannot be fetched: empty ([`Archive::read_at`] then
    /// says why).
    pub(crate) fn program_slice(&self, range: &Range<usize>) -> &[u8] {
        match self.fetch(range) {
            Ok(std::borrow::Cow::Borrowed(b)) => b,
            Ok(std::borrow::Cow::Owned(_)) | Err(_) => &[],
        }
    }

    /// The byte range of an item's program in the archive and the type it restores.
    pub(crate) fn item_program(&self, item: Item) -> (Range<usize>, Ty) {
        match item {
            Item::Header => (self.head.header_program.clone(), self.header_ty()),
            Item::Tensor(i) => (self.tensors[i].program.clone(), self.tensors[i].ty()),
            Item::Gap(g) => {
                let g = &self.gaps[g];
                (g.program.clone(), Ty::new(8, g.end - g.begin))
            }
            Item::Group(k) => (self.groups[k].program.clone(), self.groups[k].ty()),
            Item::Lost(k) => {
                let l = &self.lost[k];
                let width = l.tensor.map_or(8, |t| self.tensors[t].dtype.word_bits());
                (
                    0..0,
                    Ty::new(width, (l.end - l.begin) * 8 / u64::from(width)),
                )
            }
        }
    }

    /// Drops the archive's pages holding `range` from the resident set (they are read
    /// again from the file if needed), so that decoding a whole archive does not keep it
    /// in memory. Nothing for an archive held in memory.
    pub(crate) fn release(&self, range: &Range<usize>) {
        if let Backing::Map(m, _) = &self.bytes {
            if let Some(part) = m.get(range.clone()) {
                crate::files::release_pages(m, part);
            }
        }
    }

    /// A decode error for `item`, saying where its program starts in the archive (the
    /// wire reader's offsets count from there).
    pub(crate) fn decode_err(&self, item: Item, e: impl std::fmt::Display) -> Error {
        let start = self.item_program(item).0.start;
        self.decode_err_at(item, start, e)
    }

    /// A decode error for `item` in program bytes starting at archive byte `start`.
    pub(crate) fn decode_err_at(
        &self,
        item: Item,
        start: usize,
        e: impl std::fmt::Display,
    ) -> Error {
        Error::archive(
            &self.path,
            ArchiveError::Decode {
                region: self.item_region(item),
                what: format!("program at archive byte {start}: {e}"),
            },
        )
    }

    /// Decodes an item's bytes (the JSON header without its length field) without
    /// checking the checksum. Returns the bytes and their xxh3-64.
    pub(crate) fn decode_item(&self, item: Item) -> Result<(Vec<u8>, u64)> {
        let (program, ty) = self.item_program(item);
        let node = self.read_at(item, &program, ty)?;
        self.check_decoded_size(item, self.item_original_bytes(item))?;
        let bytes = self.run_item(item, &node, ty)?;
        let sum = xxh3_64(&bytes);
        Ok((bytes, sum))
    }

    /// Refuses to decode `bytes` of an item (all of it, or the part of a split region;
    /// see [`super::stream`]) larger than [`MAX_REGION_BYTES`] or than the memory the
    /// process can get: a program as small as one `Const` node may declare a huge
    /// output, so the output size (already tied to the record's dtype and shape, and the
    /// index's original length) is checked, and an allocation of that size is tried
    /// fallibly, before anything runs. Allocation failure then is an error, not an abort.
    pub(crate) fn check_decoded_size(&self, item: Item, bytes: u64) -> Result<()> {
        let too_large = |what: String| {
            Error::archive(
                &self.path,
                ArchiveError::TooLarge {
                    region: self.item_region(item),
                    bytes,
                    what,
                },
            )
        };
        if bytes > MAX_REGION_BYTES {
            return Err(too_large(format!(
                "over the limit of {MAX_REGION_BYTES} bytes per region"
            )));
        }
        let mut probe: Vec<u8> = Vec::new();
        probe
            .try_reserve_exact(bytes as usize)
            .map_err(|_| too_large("more memory than is available".to_string()))?;
        Ok(())
    }

    fn decode_checked(&self, item: Item) -> Result<Vec<u8>> {
        let (bytes, actual) = self.decode_item(item)?;
        let expected = self.item_checksum(item);
        if actual != expected {
            return Err(Error::Mismatch {
                path: self.path.clone(),
                region: self.item_region(item),
                expected,
                actual,
            });
        }
        Ok(bytes)
    }

    /// The names of the tensors an item holds, in data order.
    pub(crate) fn item_tensors(&self, item: Item) -> Vec<String> {
        match item {
            Item::Header | Item::Gap(_) => Vec::new(),
            Item::Tensor(i) => vec![self.tensors[i].name.clone()],
            Item::Lost(k) => self.lost[k]
                .tensor
                .map(|t| self.tensors[t].name.clone())
                .into_iter()
                .collect(),
            Item::Group(k) => self.tensors[self.groups[k].tensors.clone()]
                .iter()
                .map(|t| t.name.clone())
                .collect(),
        }
    }

    /// Decodes group `k`'s bytes (all of its tensors) and checks them against its
    /// checksum.
    ///
    /// # Errors
    /// As [`Archive::decode_tensor`].
    pub(crate) fn decode_group(&self, k: usize) -> Result<Vec<u8>> {
        self.decode_checked(Item::Group(k))
    }
}

#[cfg(test)]
mod tests;
