//! Typed errors and warnings of the archive layer (STYLE habit 4).
//!
//! Every error names the file it is about and says what is wrong in a lowercase sentence
//! without a trailing period, carrying the numbers a person needs (offsets, expected and
//! actual sizes). The binaries print them as `error: <file>: <what>`. Tensor names are
//! printed with Rust's debug escaping, so control characters in a name never reach a
//! terminal raw.

use std::io;
use std::path::{Path, PathBuf};

/// Result of the archive layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error of the archive layer: reading a `.safetensors` source, writing or reading a
/// `.brv` archive, or the files around them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system error on a file.
    #[error("{}: {what}: {source}", crate::shown::shown_path(path))]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`cannot open`, `cannot write`, ...).
        what: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The source file is not a valid `.safetensors` file.
    #[error("{}: {source}", crate::shown::shown_path(path))]
    Source {
        /// The source file.
        path: PathBuf,
        /// What is wrong with it (boxed: some variants carry names and shapes).
        #[source]
        source: Box<SourceError>,
    },
    /// The archive is damaged, truncated, or not a `.brv` archive.
    #[error("{}: {source}", crate::shown::shown_path(path))]
    Archive {
        /// The archive file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ArchiveError,
    },
    /// Decoded bytes do not match the checksum stored when the archive was written.
    #[error(
        "{}: {region}: checksum mismatch: stored {expected:016x}, decoded {actual:016x}",
        crate::shown::shown_path(path)
    )]
    Mismatch {
        /// The archive file.
        path: PathBuf,
        /// The region (`tensor "w"`, `header`, `gap at data bytes [8, 10)`, `whole file`).
        region: String,
        /// Checksum (xxh3-64) stored in the archive.
        expected: u64,
        /// Checksum (xxh3-64) of the decoded bytes.
        actual: u64,
    },
    /// The output file exists and replacing it was not allowed.
    #[error("{}: already exists", crate::shown::shown_path(path))]
    OutputExists {
        /// The output file.
        path: PathBuf,
    },
    /// The output would overwrite the input.
    #[error("{}: output is the input file", crate::shown::shown_path(path))]
    SameFile {
        /// The file given as both input and output.
        path: PathBuf,
    },
    /// The input is a file or folder of another kind than the command takes: an archive
    /// given to `compress`, a `.safetensors` file, shard index or plain folder given where
    /// an archive is expected. The message names the file, what it is, and the command
    /// that takes it.
    #[error(
        "{} is {found}, not {expected} (did you mean `{command}`?)",
        crate::shown::shown_path(path)
    )]
    WrongKind {
        /// The input.
        path: PathBuf,
        /// What it is (`a Brevis archive`, `a .safetensors file`, ...).
        found: String,
        /// What the command takes (`a .safetensors file`, `a Brevis archive`).
        expected: &'static str,
        /// The command that takes it (`brevis decompress`).
        command: &'static str,
    },
    /// A file or folder is not what the command needs, for a reason of its own layer (a
    /// damaged folder manifest, a checkpoint whose index names a missing shard, a path
    /// that is neither a folder nor a shard index): worded as [`Error::Io`] is, with a
    /// stable [`Error::kind`] of its own.
    #[error("{}: {what}: {detail}", crate::shown::shown_path(path))]
    Invalid {
        /// The file or folder.
        path: PathBuf,
        /// What could not be done or what is wrong (`damaged folder manifest`, ...).
        what: &'static str,
        /// Why.
        detail: String,
        /// Its [`Error::kind`].
        kind: &'static str,
    },
    /// A job refused its arguments for a reason of its own (an invalid prior file, a
    /// tensor name no archive holds, an original of the wrong kind): the message says
    /// it all, with a stable [`Error::kind`].
    #[error("{message}")]
    Refused {
        /// Its [`Error::kind`] (`invalid_prior`, `no_such_tensor`, `wrong_kind`).
        kind: &'static str,
        /// What is wrong, naming the file.
        message: String,
    },
    /// Something that should never happen: a bug, reported instead of a panic.
    #[error("{}: internal error: {what}", crate::shown::shown_path(path))]
    Internal {
        /// The file being processed.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: &Path, what: &'static str, source: io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    }

    /// An [`Error::Source`] for `path`; [`Error::WrongKind`] if `source` says the file
    /// is a Brevis archive (so that every command reading a source says so the same way).
    pub fn source(path: &Path, source: SourceError) -> Error {
        if source == SourceError::BrevisArchive {
            return Error::WrongKind {
                path: path.to_path_buf(),
                found: "a Brevis archive".to_string(),
                expected: "a .safetensors file",
                command: "brevis decompress",
            };
        }
        Error::Source {
            path: path.to_path_buf(),
            source: Box::new(source),
        }
    }

    /// An [`Error::Archive`] for `path`.
    pub fn archive(path: &Path, source: ArchiveError) -> Error {
        Error::Archive {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The same error naming `to.join(rest)` where it named `from.join(rest)`: a file
    /// in a temporary folder (`from`) named where it will be once the folder is renamed
    /// into place (`to`), so that no message names a temporary path. Errors about other
    /// paths are returned unchanged.
    pub fn relocated(mut self, from: &Path, to: &Path) -> Error {
        let path = match &mut self {
            Error::Io { path, .. }
            | Error::Source { path, .. }
            | Error::Archive { path, .. }
            | Error::Mismatch { path, .. }
            | Error::OutputExists { path }
            | Error::SameFile { path }
            | Error::WrongKind { path, .. }
            | Error::Invalid { path, .. }
            | Error::Internal { path, .. } => path,
            Error::Refused { .. } => return self,
        };
        if let Ok(rest) = path.strip_prefix(from) {
            *path = to.join(rest);
        }
        self
    }

    /// A stable name for what kind of error this is, for scripts (the CLI's `--json`
    /// failures carry it as `kind`): `io`, `invalid_source` (a `.safetensors` file, or a
    /// checkpoint folder or its index, that is not valid), `not_archive`,
    /// `unsupported_version`, `damaged_archive`, `damaged_record`, `undecodable_record`,
    /// `too_large`, `no_such_tensor`, `checksum_mismatch`, `output_exists`, `same_file`,
    /// `wrong_kind` or `internal`. A damaged folder manifest is `damaged_archive`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Source { .. } => "invalid_source",
            Error::Archive { source, .. } => match source {
                ArchiveError::NotArchive { .. } => "not_archive",
                ArchiveError::Version { .. } => "unsupported_version",
                ArchiveError::Corrupt { .. } => "damaged_archive",
                ArchiveError::DamagedRecord { .. } => "damaged_record",
                ArchiveError::Decode { .. } => "undecodable_record",
                ArchiveError::TooLarge { .. } => "too_large",
                ArchiveError::NoSuchTensor { .. } => "no_such_tensor",
            },
            Error::Mismatch { .. } => "checksum_mismatch",
            Error::OutputExists { .. } => "output_exists",
            Error::SameFile { .. } => "same_file",
            Error::WrongKind { .. } => "wrong_kind",
            Error::Invalid { kind, .. } => kind,
            Error::Refused { kind, .. } => kind,
            Error::Internal { .. } => "internal",
        }
    }

    /// Whether this error says that decoded bytes differ from what was stored, or that a
    /// record of an archive that opened is damaged (a failed verification), rather than
    /// that something could not be done.
    pub fn is_mismatch(&self) -> bool {
        matches!(
            self,
            Error::Mismatch { .. }
                | Error::Archive {
                    source: ArchiveError::DamagedRecord { .. },
                    ..
                }
        )
    }
}

/// What is wrong with a `.safetensors` source file.
///
/// Offsets named `data_offsets` are relative to the start of the data region (the byte
/// after the JSON header), as in the file format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The file starts with the Brevis archive magic: it is an archive, not a source.
    #[error("is a Brevis archive, not a .safetensors file")]
    BrevisArchive,
    /// The header length field does not fit the file, and the file starts like another
    /// known format (JSON, a Git LFS pointer, a zip or pickle PyTorch checkpoint).
    #[error("{what}, not a .safetensors file (its first bytes are not a header length)")]
    OtherFormat {
        /// What the file looks like (`looks like a JSON file`, ...).
        what: &'static str,
    },
    /// The file cannot hold the 8-byte header length field.
    #[error("file is {len} bytes, shorter than the 8-byte header length field")]
    TooShort {
        /// File length in bytes.
        len: u64,
    },
    /// The header length field is 0.
    #[error("header length field is 0: an empty header is not JSON")]
    HeaderLenZero,
    /// The header length field points past the end of the file.
    #[error(
        "header length field says {declared} bytes but only {available} bytes follow it \
         (truncated, or not a safetensors file)"
    )]
    HeaderPastEof {
        /// Declared header length in bytes.
        declared: u64,
        /// Bytes present after the length field.
        available: u64,
    },
    /// The header is larger than the parser accepts.
    #[error("header length {declared} bytes exceeds the limit of {limit} bytes")]
    HeaderTooLarge {
        /// Declared header length in bytes.
        declared: u64,
        /// The limit in bytes ([`crate::archive::safetensors::MAX_HEADER_LEN`]).
        limit: u64,
    },
    /// The header is not UTF-8.
    #[error("header is not UTF-8: invalid byte sequence at header byte {offset}")]
    NotUtf8 {
        /// Offset of the first invalid byte, from the start of the JSON header.
        offset: u64,
    },
    /// The header is not one JSON object of the expected shape.
    #[error("header is not valid safetensors JSON{}: {what}", context_suffix(.context))]
    Json {
        /// The key being read when the error was found, if any.
        context: Option<String>,
        /// The parser's message, with line and column.
        what: String,
    },
    /// A tensor's dtype is not one of the format's dtypes.
    #[error("tensor {tensor:?}: unknown dtype {dtype:?}")]
    UnknownDtype {
        /// The tensor's name.
        tensor: String,
        /// The dtype string as written.
        dtype: String,
    },
    /// A tensor's `data_offsets` are reversed (`begin > end`).
    #[error("tensor {tensor:?}: data_offsets [{begin}, {end}] are reversed")]
    ReversedOffsets {
        /// The tensor's name.
        tensor: String,
        /// First offset.
        begin: u64,
        /// Second offset.
        end: u64,
    },
    /// A tensor's shape and dtype do not match the size of its byte range.
    #[error(
        "tensor {tensor:?}: shape {shape:?} of {dtype} needs {expected} bytes but \
         data_offsets [{begin}, {end}] give {actual} bytes"
    )]
    SizeMismatch {
        /// The tensor's name.
        tensor: String,
        /// The dtype name.
        dtype: String,
        /// The shape as written.
        shape: Vec<u64>,
        /// Bytes the shape and dtype need (`None` when that overflows 64 bits).
        expected: ExpectedBytes,
        /// Bytes the offsets give.
        actual: u64,
        /// First offset.
        begin: u64,
        /// Second offset.
        end: u64,
    },
    /// A tensor of a sub-byte dtype (`F4`, `F6_E2M3`, `F6_E3M2`) whose elements do not
    /// fill a whole number of bytes: the safetensors library refuses such a tensor (its
    /// last byte would be part padding, which the format does not define).
    #[error(
        "tensor {tensor:?}: {elements} elements of {dtype} are {bits} bits, not a whole number \
         of bytes, which the safetensors format does not allow"
    )]
    PartialByte {
        /// The tensor's name.
        tensor: String,
        /// The dtype name.
        dtype: String,
        /// Elements (the product of the shape).
        elements: u64,
        /// Bits they take.
        bits: u64,
    },
    /// A shape with a 0 dimension (no elements) whose dimensions overflow 64 bits when
    /// multiplied in order before the 0 is reached: the safetensors library computes the
    /// element count that way and refuses the file, so it is refused here too.
    #[error(
        "tensor {tensor:?}: shape {shape:?} has no elements (a dimension is 0), but \
         multiplying its dimensions in order overflows 64 bits before the 0, which the \
         safetensors library refuses"
    )]
    ShapeOverflow {
        /// The tensor's name.
        tensor: String,
        /// The shape as written.
        shape: Vec<u64>,
    },
    /// A tensor's byte range ends past the end of the data region.
    #[error(
        "tensor {tensor:?}: data_offsets [{begin}, {end}] end past the data region \
         ({data_len} bytes; file truncated?)"
    )]
    PastEnd {
        /// The tensor's name.
        tensor: String,
        /// First offset.
        begin: u64,
        /// Second offset.
        end: u64,
        /// Length of the data region in bytes.
        data_len: u64,
    },
    /// Two tensors own exactly the same non-empty byte range.
    #[error(
        "tensors {first:?} and {second:?} share the byte range [{begin}, {end}) \
         (aliased tensors are not allowed)"
    )]
    Aliased {
        /// One tensor.
        first: String,
        /// The other.
        second: String,
        /// Start of the shared range.
        begin: u64,
        /// End of the shared range.
        end: u64,
    },
    /// Two tensors' non-empty byte ranges overlap.
    #[error(
        "tensors {first:?} [{first_begin}, {first_end}) and {second:?} \
         [{second_begin}, {second_end}) overlap"
    )]
    Overlap {
        /// The tensor that starts first.
        first: String,
        /// Its start.
        first_begin: u64,
        /// Its end.
        first_end: u64,
        /// The other tensor.
        second: String,
        /// Its start.
        second_begin: u64,
        /// Its end.
        second_end: u64,
    },
    /// `__metadata__` is not a map of strings to strings.
    #[error("__metadata__ must map strings to strings: {what}")]
    BadMetadata {
        /// What it holds instead.
        what: String,
    },
}

/// Bytes a shape needs: a number, or more than 64 bits can count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectedBytes {
    /// This many bytes.
    Bytes(u64),
    /// The product of the shape overflows 64 bits.
    Overflow,
}

impl std::fmt::Display for ExpectedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedBytes::Bytes(n) => write!(f, "{n}"),
            ExpectedBytes::Overflow => f.write_str("more than 2^64"),
        }
    }
}

fn context_suffix(context: &Option<String>) -> String {
    match context {
        Some(key) => format!(" (in entry {key:?})"),
        None => String::new(),
    }
}

/// What is wrong with a `.brv` archive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// The file does not start with the archive magic.
    #[error("not a brevis archive: {what}")]
    NotArchive {
        /// What the file looks like instead.
        what: String,
    },
    /// The archive was written by a newer or unknown format version.
    #[error(
        "unsupported {what} version {found} (this build reads versions {first} to {supported})"
    )]
    Version {
        /// Which version (`format` or `program wire`).
        what: &'static str,
        /// The version in the file.
        found: u64,
        /// The oldest version this build reads.
        first: u64,
        /// The newest version this build reads.
        supported: u64,
    },
    /// The archive is truncated or its structure is inconsistent.
    #[error("damaged archive: {what}")]
    Corrupt {
        /// What is inconsistent, with offsets and sizes.
        what: String,
    },
    /// The archive's trailer and index are sound, but a record is unreadable or does
    /// not fit the others (a tensor name that is not UTF-8, an unknown dtype code, a
    /// shape that does not match its offsets): damage found in an archive that opened,
    /// which the CLI reports as a verification failure (exit 3), as it does a record
    /// that disagrees with the stored header.
    #[error("damaged archive: {what}")]
    DamagedRecord {
        /// Which record, at which byte, and what is wrong.
        what: String,
    },
    /// A record's program could not be read or run.
    #[error("damaged archive: {region}: {what}")]
    Decode {
        /// The region (`tensor "w"`, `header`, ...).
        region: String,
        /// Why its program failed.
        what: String,
    },
    /// A region declares more decoded bytes than can be held.
    #[error("{region}: declares {bytes} decoded bytes, {what}")]
    TooLarge {
        /// The region (`tensor "w"`, `header`, ...).
        region: String,
        /// Its decoded size in bytes, from the record's dtype and shape.
        bytes: u64,
        /// Which limit it exceeds.
        what: String,
    },
    /// A tensor index out of range.
    #[error("no tensor number {index} (the archive has {count})")]
    NoSuchTensor {
        /// The index asked for.
        index: usize,
        /// Number of tensors.
        count: usize,
    },
}

/// Something unusual but allowed in a source file, or a recoverable event while
/// compressing. Everything a warning describes is preserved byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    /// Bytes of the data region that no tensor owns.
    #[error(
        "{} at data offsets [{begin}, {end}) {} to no tensor ({kind}); preserved",
        if end - begin == 1 { "1 byte".to_string() } else { format!("{} bytes", end - begin) },
        if end - begin == 1 { "belongs" } else { "belong" }
    )]
    Gap {
        /// Start of the gap in the data region.
        begin: u64,
        /// End of the gap.
        end: u64,
        /// `leading`, `between tensors` or `trailing`.
        kind: &'static str,
    },
    /// Whitespace before the opening `{` of the header.
    #[error("header starts with {bytes} bytes of whitespace; preserved")]
    LeadingWhitespace {
        /// Number of whitespace bytes.
        bytes: u64,
    },
    /// The data region does not start at a multiple of 8 bytes.
    #[error(
        "header length {header_len} is not a multiple of 8, so tensor data is unaligned; preserved"
    )]
    Unaligned {
        /// Length of the JSON header in bytes.
        header_len: u64,
    },
    /// A tensor entry has a field the format does not define.
    #[error("tensor {tensor:?}: unknown field {field:?} in its header entry; preserved")]
    UnknownField {
        /// The tensor's name.
        tensor: String,
        /// The field's name.
        field: String,
    },
    /// The synthesized program did not reproduce its target, so the target was stored
    /// as a literal instead (a synthesizer bug; the archive is still exact).
    #[error(
        "{region}: synthesized program did not reproduce the data ({what}); stored as a literal"
    )]
    Fallback {
        /// The region.
        region: String,
        /// What went wrong.
        what: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path inside the temporary folder is named under the output; others are not.
    #[test]
    fn relocated_renames_only_paths_under_the_temporary_folder() {
        let inside = Error::io(
            Path::new("/d/.brevis-ab12.tmp/sub/s.brv"),
            "cannot write",
            io::Error::from(io::ErrorKind::StorageFull),
        );
        let moved = inside.relocated(Path::new("/d/.brevis-ab12.tmp"), Path::new("/d/out"));
        assert!(moved
            .to_string()
            .starts_with("/d/out/sub/s.brv: cannot write: "));
        let outside = Error::OutputExists {
            path: PathBuf::from("/d/other"),
        };
        let same = outside.relocated(Path::new("/d/.brevis-ab12.tmp"), Path::new("/d/out"));
        assert_eq!(same.to_string(), "/d/other: already exists");
    }
}
