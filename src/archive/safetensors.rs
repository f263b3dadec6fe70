//! The source file model: a strict parser of `.safetensors` files (docs/design.md §7).
//!
//! A `.safetensors` file is an 8-byte little-endian header length `N`, `N` bytes of UTF-8
//! JSON (one object mapping tensor names to `{"dtype", "shape", "data_offsets"}` and an
//! optional `"__metadata__"` map of strings to strings), then the data region.
//! `data_offsets` are `[begin, end)` byte offsets into the data region.
//!
//! [`parse`] works on the whole file as a byte slice (memory-mapped by the caller) and
//! never copies the data region. It refuses, with a [`SourceError`], everything the format
//! forbids: a header length of 0, past the end of the file or over [`MAX_HEADER_LEN`]; a
//! header that is not UTF-8 or not exactly one JSON object (trailing text after it is
//! refused, whitespace is not); duplicate keys anywhere; unknown dtypes; shapes whose size
//! disagrees with the offsets; ranges past the data region; overlapping or aliased
//! non-empty ranges; and a `__metadata__` that is not a map of strings to strings.
//!
//! It allows, and [`SourceFile::warnings`] reports, what the format does not forbid and
//! what real writers produce: whitespace before the JSON object, header lengths that leave
//! the data unaligned, and bytes of the data region that no tensor owns (leading gaps,
//! gaps between tensors, trailing bytes). The archive stores all of them byte for byte;
//! page padding of the header with spaces is ordinary and not reported.
//!
//! Nothing is allocated from a number read from the file: the header is bounded by the
//! file's length and [`MAX_HEADER_LEN`], and sizes are compared with checked arithmetic.
//! Never panics.

use crate::error::{ExpectedBytes, SourceError, Warning};
use crate::tensor::Dtype;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

/// Largest JSON header accepted, in bytes (100 MiB). The `safetensors` crate uses the
/// same order of magnitude; real headers are at most a few MiB.
pub const MAX_HEADER_LEN: u64 = 100 << 20;

/// The reserved key of the header's metadata map.
pub const METADATA_KEY: &str = "__metadata__";

/// One tensor entry of the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (any UTF-8 string, including control characters).
    pub name: String,
    /// Its dtype.
    pub dtype: Dtype,
    /// Its shape; `[]` is a scalar (one element).
    pub shape: Vec<u64>,
    /// Start of its bytes in the data region.
    pub begin: u64,
    /// End (exclusive) of its bytes in the data region.
    pub end: u64,
    /// Position of the entry among the tensor entries of the JSON object (0-based,
    /// `__metadata__` not counted).
    pub header_index: usize,
}

impl TensorInfo {
    /// Length of the tensor's bytes.
    pub fn byte_len(&self) -> u64 {
        self.end - self.begin
    }

    /// Number of elements (product of the shape; 1 for a scalar).
    pub fn elements(&self) -> u64 {
        // Checked at parse time: the product does not overflow.
        self.shape.iter().product()
    }
}

/// A piece of the data region, in offset order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Tensor number `i` of [`SourceFile::tensors`].
    Tensor(usize),
    /// Bytes `[begin, end)` of the data region that no tensor owns (never empty).
    Gap {
        /// Start in the data region.
        begin: u64,
        /// End (exclusive).
        end: u64,
    },
}

/// A parsed `.safetensors` file, borrowing the file's bytes.
#[derive(Clone, Debug)]
pub struct SourceFile<'a> {
    bytes: &'a [u8],
    header_len: u64,
    tensors: Vec<TensorInfo>,
    metadata: Option<Vec<(String, String)>>,
    regions: Vec<Region>,
    warnings: Vec<Warning>,
}

impl<'a> SourceFile<'a> {
    /// The whole file.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The value of the 8-byte header length field: the JSON header's length in bytes.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The JSON header exactly as written (including any whitespace and padding).
    pub fn header(&self) -> &'a [u8] {
        &self.bytes[8..self.data_start()]
    }

    /// Offset in the file where the data region starts (`8 + header_len`).
    pub fn data_start(&self) -> usize {
        8 + self.header_len as usize
    }

    /// The data region: every byte after the header.
    pub fn data(&self) -> &'a [u8] {
        &self.bytes[self.data_start()..]
    }

    /// The tensor entries in the order of the JSON object.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The bytes of tensor `i`.
    ///
    /// # Panics
    /// If `i` is out of range.
    pub fn tensor_bytes(&self, i: usize) -> &'a [u8] {
        let t = &self.tensors[i];
        &self.data()[t.begin as usize..t.end as usize]
    }

    /// The `__metadata__` map in file order, if present.
    pub fn metadata(&self) -> Option<&[(String, String)]> {
        self.metadata.as_deref()
    }

    /// The data region cut into tensors and gaps, ordered by offset (ties: empty tensors
    /// first, then header order). Non-empty regions tile the data region exactly; empty
    /// tensors appear at their offset's position among the tensors, so one inside bytes
    /// no tensor owns comes before the gap holding them.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Unusual but allowed things found in the file (all preserved byte for byte).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

/// Whether a file of `file_len` bytes that starts with `prefix` looks like a
/// `.safetensors` file: a header length that fits the file and [`MAX_HEADER_LEN`], then
/// a JSON object (after optional whitespace, within `prefix`). A cheap guess for error
/// messages, from the first bytes only; [`parse`] is the check. Never panics.
pub fn looks_like_safetensors(prefix: &[u8], file_len: u64) -> bool {
    let Some(len_field) = prefix.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) else {
        return false;
    };
    let header_len = u64::from_le_bytes(len_field);
    let fits = header_len > 0
        && header_len <= MAX_HEADER_LEN
        && file_len
            .checked_sub(8)
            .is_some_and(|available| header_len <= available);
    let first = prefix
        .get(8..)
        .and_then(|rest| rest.iter().find(|b| !b.is_ascii_whitespace()));
    fits && first == Some(&b'{')
}

/// What a file whose header length field does not fit looks like, if it starts like a
/// format people mistake for `.safetensors`.
fn other_format(bytes: &[u8]) -> Option<&'static str> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if bytes.starts_with(b"version https://git-lfs") {
        Some("is a Git LFS pointer (fetch the file with `git lfs pull`)")
    } else if bytes.starts_with(b"PK\x03\x04") {
        Some("is a zip archive (a PyTorch .bin/.pt checkpoint?)")
    } else if bytes.first() == Some(&0x80) && bytes.get(1).is_some_and(|p| (2..=5).contains(p)) {
        Some("is a Python pickle (a PyTorch .bin/.pt checkpoint?)")
    } else if matches!(first, Some(b'{' | b'[')) {
        Some("looks like a JSON file")
    } else {
        None
    }
}

/// Parses a whole `.safetensors` file held in `bytes`.
///
/// # Errors
/// A [`SourceError`] naming the first problem found (see the module docs);
/// [`SourceError::BrevisArchive`] if `bytes` start with the archive magic. Never panics
/// and never allocates in proportion to a size declared in the file.
pub fn parse(bytes: &[u8]) -> Result<SourceFile<'_>, SourceError> {
    if bytes.starts_with(&super::format::MAGIC) {
        return Err(SourceError::BrevisArchive);
    }
    let file_len = bytes.len() as u64;
    let len_field: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(SourceError::TooShort { len: file_len })?;
    let header_len = u64::from_le_bytes(len_field);
    if header_len == 0 {
        return Err(SourceError::HeaderLenZero);
    }
    let available = file_len - 8;
    // Text, zip and pickle files start with bytes that read as a huge length.
    if header_len > available.max(MAX_HEADER_LEN) {
        if let Some(what) = other_format(bytes) {
            return Err(SourceError::OtherFormat { what });
        }
    }
    if header_len > available {
        return Err(SourceError::HeaderPastEof {
            declared: header_len,
            available,
        });
    }
    if header_len > MAX_HEADER_LEN {
        return Err(SourceError::HeaderTooLarge {
            declared: header_len,
            limit: MAX_HEADER_LEN,
        });
    }
    // Both bounds checked above: the header lies inside `bytes`.
    let data_start = 8 + header_len as usize;
    let data_len = file_len - 8 - header_len;
    let h = parse_header(&bytes[8..data_start], data_len)?;
    Ok(SourceFile {
        bytes,
        header_len,
        tensors: h.tensors,
        metadata: h.metadata,
        regions: h.regions,
        warnings: h.warnings,
    })
}

/// What a `.safetensors` header says about its file ([`parse_header`]).
#[derive(Clone, Debug)]
pub struct ParsedHeader {
    /// The tensor entries in the order of the JSON object.
    pub tensors: Vec<TensorInfo>,
    /// The `__metadata__` map in file order, if present.
    pub metadata: Option<Vec<(String, String)>>,
    /// The data region cut into tensors and gaps ([`SourceFile::regions`]).
    pub regions: Vec<Region>,
    /// What is unusual but allowed ([`SourceFile::warnings`]).
    pub warnings: Vec<Warning>,
}

/// Parses the JSON header `header` (the bytes after the 8-byte length field, exactly
/// as written) of a file whose data region has `data_len` bytes, with every check of
/// [`parse`] but those of the length field. The archive reader uses it on the header
/// it restores, to learn the tensors a version-2 archive's records hold.
///
/// # Errors
/// As [`parse`].
pub fn parse_header(header: &[u8], data_len: u64) -> Result<ParsedHeader, SourceError> {
    let header_len = header.len() as u64;
    let text = std::str::from_utf8(header).map_err(|e| SourceError::NotUtf8 {
        offset: e.valid_up_to() as u64,
    })?;
    let raw = parse_json(text)?;

    let mut warnings = Vec::new();
    let leading_ws = text.len() - text.trim_start().len();
    if leading_ws > 0 {
        warnings.push(Warning::LeadingWhitespace {
            bytes: leading_ws as u64,
        });
    }
    // Alignment only matters for data: a file with no data bytes (`{}`) has none to
    // misalign.
    if !header_len.is_multiple_of(8) && data_len > 0 {
        warnings.push(Warning::Unaligned { header_len });
    }

    let mut tensors = Vec::with_capacity(raw.entries.len());
    let mut metadata = None;
    for (name, value) in raw.entries {
        match value {
            RawValue::Metadata(m) => metadata = Some(m),
            RawValue::Tensor(e) => {
                for field in e.unknown_fields {
                    warnings.push(Warning::UnknownField {
                        tensor: name.clone(),
                        field,
                    });
                }
                let info = check_entry(name, e.dtype, e.shape, e.offsets, tensors.len(), data_len)?;
                tensors.push(info);
            }
        }
    }

    let regions = layout(&tensors, data_len, &mut warnings)?;
    Ok(ParsedHeader {
        tensors,
        metadata,
        regions,
        warnings,
    })
}

/// Checks one entry on its own: dtype, offsets, size, bounds.
fn check_entry(
    name: String,
    dtype: String,
    shape: Vec<u64>,
    (begin, end): (u64, u64),
    header_index: usize,
    data_len: u64,
) -> Result<TensorInfo, SourceError> {
    let Some(dt) = Dtype::from_name(&dtype) else {
        return Err(SourceError::UnknownDtype {
            tensor: name,
            dtype,
        });
    };
    if begin > end {
        return Err(SourceError::ReversedOffsets {
            tensor: name,
            begin,
            end,
        });
    }
    let actual = end - begin;
    let elements = shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    if let Some(bits) = elements.and_then(|n| n.checked_mul(u64::from(dt.element_bits()))) {
        if !bits.is_multiple_of(8) {
            return Err(SourceError::PartialByte {
                tensor: name,
                dtype: dt.name().to_string(),
                elements: elements.unwrap_or(0),
                bits,
            });
        }
    }
    let expected = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .and_then(|n| dt.byte_len(n));
    if expected.is_none() && shape.contains(&0) {
        return Err(SourceError::ShapeOverflow {
            tensor: name,
            shape,
        });
    }
    if expected != Some(actual) {
        return Err(SourceError::SizeMismatch {
            tensor: name,
            dtype: dt.name().to_string(),
            shape,
            expected: expected.map_or(ExpectedBytes::Overflow, ExpectedBytes::Bytes),
            actual,
            begin,
            end,
        });
    }
    if end > data_len {
        return Err(SourceError::PastEnd {
            tensor: name,
            begin,
            end,
            data_len,
        });
    }
    Ok(TensorInfo {
        name,
        dtype: dt,
        shape,
        begin,
        end,
        header_index,
    })
}

/// Orders the tensors by offset, refuses overlaps, and fills the uncovered bytes with
/// gap regions.
fn layout(
    tensors: &[TensorInfo],
    data_len: u64,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Region>, SourceError> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| (tensors[i].begin, tensors[i].end, i));

    // Overlap check over non-empty ranges, in start order.
    let mut prev: Option<&TensorInfo> = None;
    for &i in &order {
        let t = &tensors[i];
        if t.begin == t.end {
            continue;
        }
        if let Some(p) = prev {
            if t.begin < p.end {
                return Err(if (t.begin, t.end) == (p.begin, p.end) {
                    SourceError::Aliased {
                        first: p.name.clone(),
                        second: t.name.clone(),
                        begin: t.begin,
                        end: t.end,
                    }
                } else {
                    SourceError::Overlap {
                        first: p.name.clone(),
                        first_begin: p.begin,
                        first_end: p.end,
                        second: t.name.clone(),
                        second_begin: t.begin,
                        second_end: t.end,
                    }
                });
            }
        }
        prev = Some(t);
    }

    let mut regions = Vec::with_capacity(order.len() + 1);
    let mut cursor = 0u64;
    for &i in &order {
        let t = &tensors[i];
        if t.begin != t.end && t.begin > cursor {
            let kind = if cursor == 0 {
                "leading"
            } else {
                "between tensors"
            };
            warnings.push(Warning::Gap {
                begin: cursor,
                end: t.begin,
                kind,
            });
            regions.push(Region::Gap {
                begin: cursor,
                end: t.begin,
            });
        }
        regions.push(Region::Tensor(i));
        // An empty tensor owns no bytes: one inside unowned bytes leaves them to the gap
        // (moving past them lost them from every record: found by the writer fuzzer).
        if t.begin != t.end {
            cursor = t.end;
        }
    }
    if cursor < data_len {
        let kind = if cursor == 0 {
            "no tensor data"
        } else {
            "trailing"
        };
        warnings.push(Warning::Gap {
            begin: cursor,
            end: data_len,
            kind,
        });
        regions.push(Region::Gap {
            begin: cursor,
            end: data_len,
        });
    }
    Ok(regions)
}

// ---------------------------------------------------------------------------------------
// JSON: an order-keeping, duplicate-refusing reading of the header object.

struct RawHeader {
    entries: Vec<(String, RawValue)>,
}

enum RawValue {
    Tensor(RawEntry),
    Metadata(Vec<(String, String)>),
}

struct RawEntry {
    dtype: String,
    shape: Vec<u64>,
    offsets: (u64, u64),
    unknown_fields: Vec<String>,
}

/// A tensor entry of a header as written: `(name, dtype, shape, data_offsets)`.
pub(crate) type HeaderTensor = (String, String, Vec<u64>, (u64, u64));

/// The tensor entries of the JSON header `text`, in the header's order (metadata
/// skipped), as written: no check of dtypes, sizes or bounds.
///
/// # Errors
/// As [`parse`] for a header that is not the JSON of a `.safetensors` header.
pub(crate) fn header_tensors(text: &str) -> Result<Vec<HeaderTensor>, SourceError> {
    Ok(parse_json(text)?
        .entries
        .into_iter()
        .filter_map(|(name, v)| match v {
            RawValue::Tensor(e) => Some((name, e.dtype, e.shape, e.offsets)),
            RawValue::Metadata(_) => None,
        })
        .collect())
}

fn parse_json(text: &str) -> Result<RawHeader, SourceError> {
    let context = RefCell::new(None::<String>);
    let mut de = serde_json::Deserializer::from_str(text);
    let result = de::Deserializer::deserialize_map(&mut de, HeaderVisitor { context: &context })
        .and_then(|h| de.end().map(|()| h));
    result.map_err(|e| {
        let context = context.into_inner();
        if let Some(special) = metadata_error(&e) {
            return special;
        }
        SourceError::Json {
            context,
            what: e.to_string(),
        }
    })
}

/// Custom errors raised for `__metadata__` carry a marker so they surface as
/// [`SourceError::BadMetadata`] rather than a generic JSON error.
const METADATA_MARKER: &str = "\u{1}metadata:";

fn metadata_error(e: &serde_json::Error) -> Option<SourceError> {
    let s = e.to_string();
    let rest = s.strip_prefix(METADATA_MARKER)?;
    // serde_json appends " at line L column C"; keep it, it helps.
    Some(SourceError::BadMetadata {
        what: rest.to_string(),
    })
}

struct HeaderVisitor<'c> {
    context: &'c RefCell<Option<String>>,
}

impl<'de> Visitor<'de> for HeaderVisitor<'_> {
    type Value = RawHeader;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object mapping tensor names to entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeader, A::Error> {
        let mut seen = HashSet::new();
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?} in the header object"
                )));
            }
            *self.context.borrow_mut() = Some(key.clone());
            let value = if key == METADATA_KEY {
                RawValue::Metadata(map.next_value_seed(MetadataSeed)?)
            } else {
                RawValue::Tensor(map.next_value_seed(EntrySeed)?)
            };
            *self.context.borrow_mut() = None;
            entries.push((key, value));
        }
        Ok(RawHeader { entries })
    }
}

struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = RawEntry;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<RawEntry, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = RawEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tensor entry {\"dtype\", \"shape\", \"data_offsets\"}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        let mut unknown_fields: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let dup = match key.as_str() {
                "dtype" => dtype.replace(map.next_value::<String>()?).is_some(),
                "shape" => shape.replace(map.next_value::<Vec<u64>>()?).is_some(),
                "data_offsets" => offsets.replace(map.next_value::<(u64, u64)>()?).is_some(),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    if unknown_fields.contains(&key) {
                        true
                    } else {
                        unknown_fields.push(key.clone());
                        false
                    }
                }
            };
            if dup {
                return Err(de::Error::custom(format_args!("duplicate field {key:?}")));
            }
        }
        Ok(RawEntry {
            dtype: dtype.ok_or_else(|| de::Error::missing_field("dtype"))?,
            shape: shape.ok_or_else(|| de::Error::missing_field("shape"))?,
            offsets: offsets.ok_or_else(|| de::Error::missing_field("data_offsets"))?,
            unknown_fields,
        })
    }
}

struct MetadataSeed;

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = Vec<(String, String)>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

fn metadata_custom<E: de::Error>(what: fmt::Arguments<'_>) -> E {
    E::custom(format_args!("{METADATA_MARKER}{what}"))
}

impl<'de> Visitor<'de> for MetadataSeed {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings to strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(metadata_custom(format_args!("duplicate key {key:?}")));
            }
            let value: serde_json::Value = map.next_value()?;
            match value {
                serde_json::Value::String(s) => out.push((key, s)),
                other => {
                    let kind = match other {
                        serde_json::Value::Null => "null",
                        serde_json::Value::Bool(_) => "a boolean",
                        serde_json::Value::Number(_) => "a number",
                        serde_json::Value::Array(_) => "an array",
                        _ => "an object",
                    };
                    if matches!(key.as_str(), "dtype" | "shape" | "data_offsets") {
                        return Err(metadata_custom(format_args!(
                            "it holds a tensor entry (key {key:?} is {kind})"
                        )));
                    }
                    return Err(metadata_custom(format_args!(
                        "key {key:?} holds {kind}, not a string"
                    )));
                }
            }
        }
        Ok(out)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(metadata_custom(format_args!("it is an array")))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is a string")))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is a number")))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is a number")))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is a number")))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is a boolean")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(metadata_custom(format_args!("it is null")))
    }
}

#[cfg(test)]
mod tests;
