//! `list` and `show`: what an archive or compressed folder holds, without decoding data.

use super::{lossy, percent_smaller, plural, refused, warn_unlisted, Input, Observer};
use crate::archive::base::BaseSet;
use crate::archive::{escape_name, folder, shown_path, Archive};
use crate::dsl::{size_report, text::node_line, Node};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One tensor of an archive, as `ls --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ListedTensor {
    /// Its name.
    pub name: String,
    /// Its dtype's name.
    pub dtype: &'static str,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its first byte in the data region of the original.
    pub begin: u64,
    /// One past its last byte there.
    pub end: u64,
    /// Bytes of the original.
    pub original_bytes: u64,
    /// Bytes of its record (its share, in a group).
    pub archive_bytes: u64,
    /// Bytes of its program.
    pub program_bytes: u64,
    /// [`percent_smaller`] of the two sizes.
    pub reduction_percent: Option<f64>,
    /// The program's root operator (`?` when its first byte is no operator's tag).
    pub root_op: &'static str,
    /// How its bytes are stored: `record` (its own), `group` (with its neighbours),
    /// `copy` (a reference to an identical tensor's record) or `empty` (no bytes).
    pub stored_as: &'static str,
    /// The group record it shares, when `stored_as` is `group`.
    pub group: Option<ListedGroup>,
    /// The tensor whose record holds its bytes, when `stored_as` is `copy`.
    pub copy_of: Option<String>,
    /// What it is coded against, when `stored_as` is `reference`.
    pub reference: Option<ListedReference>,
    /// The search settings that built its record (`null` in version-1 archives).
    pub settings: Option<ListedSettings>,
}

/// A tensor coded against a tensor of another file (a base checkpoint's, or another
/// shard's): a reference record, whose program restores the residual.
#[derive(Clone, Debug, Serialize)]
pub struct ListedReference {
    /// `base` (a file of the base checkpoint) or `shard` (another shard of the folder).
    pub role: &'static str,
    /// The file's name as the archive records it.
    pub source: String,
    /// The file's length in bytes.
    pub source_bytes: u64,
    /// The file's xxh3-64, 16 hex digits.
    pub source_xxh3: String,
    /// The tensor's position among the file's tensors, in data order.
    pub tensor_index: u64,
    /// The tensor's name, when the file is attached (`--base`, or the folder).
    pub tensor: Option<String>,
    /// `xor` or `sub`: how the residual combines with the tensor's words.
    pub op: &'static str,
}

impl ListedReference {
    fn of(archive: &Archive, i: usize) -> Option<ListedReference> {
        let r = archive.tensors()[i].reference?;
        let e = &archive.sources()[r.source];
        let tensor = archive.attached(r.source).and_then(|s| {
            usize::try_from(r.tensor)
                .ok()
                .and_then(|t| s.tensors().get(t))
                .map(|t| t.name.clone())
        });
        Some(ListedReference {
            role: e.role.name(),
            source: e.name.clone(),
            source_bytes: e.original_len,
            source_xxh3: format!("{:016x}", e.checksum),
            tensor_index: r.tensor,
            tensor,
            op: r.op.name(),
        })
    }

    /// How `ls` shows it in the ROOT column: `xor-base`, `sub-base`, `xor-shard`.
    pub fn short(&self) -> String {
        format!("{}-{}", self.op, self.role)
    }
}

/// A group record: consecutive small tensors of one dtype coded as one stream.
#[derive(Clone, Debug, Serialize)]
pub struct ListedGroup {
    /// Tensors in the group.
    pub tensors: usize,
    /// The first of them.
    pub first: String,
    /// Bytes of the group's record (each tensor is counted its share in
    /// `archive_bytes`, in proportion to its original bytes).
    pub record_bytes: u64,
}

/// The search settings an archive records for a record ([`crate::archive::format::Settings`]).
#[derive(Clone, Debug, Serialize)]
pub struct ListedSettings {
    /// Expansions per region (`--budget`).
    pub budget: u64,
    /// Deepest program (`--max-depth`).
    pub max_depth: u64,
    /// Most nodes per program (`--max-nodes`).
    pub max_nodes: u64,
    /// `uniform`, `calibrated` or `given`.
    pub prior: &'static str,
    /// xxh3-64 of the prior's JSON, 16 hex digits (all zeros for a uniform prior).
    pub prior_digest: String,
    /// `fast`, `default` or `max` (`--level`); `null` when the archive does not record
    /// one (format 3 or earlier, or a program written from the TUI's search form).
    pub level: Option<&'static str>,
}

impl ListedSettings {
    fn of(s: &crate::archive::format::Settings) -> ListedSettings {
        ListedSettings {
            budget: s.budget,
            max_depth: s.max_depth,
            max_nodes: s.max_nodes,
            prior: s.prior.name(),
            prior_digest: s.digest_hex(),
            level: s.level.map(crate::synth::Level::name),
        }
    }
}

/// How tensor `i` of `archive` is stored: (`stored_as`, group, copy_of), as
/// [`ListedTensor`] says it.
fn storage_of(archive: &Archive, i: usize) -> (&'static str, Option<ListedGroup>, Option<String>) {
    let t = &archive.tensors()[i];
    if let Some(j) = t.copy_of {
        return ("copy", None, Some(archive.tensors()[j].name.clone()));
    }
    if let Some(k) = t.group {
        let g = &archive.groups()[k];
        let group = ListedGroup {
            tensors: g.tensors.len(),
            first: archive.tensors()[g.tensors.start].name.clone(),
            record_bytes: g.record.len() as u64,
        };
        return ("group", Some(group), None);
    }
    if t.record.is_empty() {
        return ("empty", None, None);
    }
    if t.reference.is_some() {
        return ("reference", None, None);
    }
    ("record", None, None)
}

/// Bytes of the original no tensor owns, as `ls --json` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct ListedGap {
    /// Its first byte in the data region.
    pub begin: u64,
    /// One past its last byte.
    pub end: u64,
    /// Bytes of the original.
    pub original_bytes: u64,
    /// Bytes of its record.
    pub archive_bytes: u64,
}

/// The header's sizes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ListedHeader {
    /// Bytes of the original's header, with its 8-byte length field.
    pub original_bytes: u64,
    /// Bytes of its record.
    pub archive_bytes: u64,
}

/// What one archive holds; serializes as `ls --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ListFile {
    /// The archive.
    #[serde(serialize_with = "lossy")]
    pub archive: PathBuf,
    /// False when a record is damaged (exit 3).
    pub ok: bool,
    /// The archive's format version.
    pub format_version: u16,
    /// The name of the file it was made from, as the archive records it (`null` in
    /// version-1 archives and when it was made from a stream).
    pub file_name: Option<String>,
    /// Bytes of the original.
    pub original_bytes: u64,
    /// Bytes of the archive.
    pub archive_bytes: u64,
    /// [`percent_smaller`] of the two.
    pub reduction_percent: Option<f64>,
    /// The header's sizes.
    pub header: ListedHeader,
    /// Every tensor, in file order.
    pub tensors: Vec<ListedTensor>,
    /// Every gap.
    pub gaps: Vec<ListedGap>,
    /// Whether every record agrees with the stored header.
    pub records_match_header: bool,
    /// Those that do not, one line each.
    pub disagreements: Vec<String>,
}

/// One file of a compressed folder, as `ls --json` prints it.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FolderListEntry {
    /// A file copied as it is.
    Copy {
        /// Its path inside the folder.
        path: String,
        /// Its bytes.
        original_bytes: u64,
    },
    /// A shard stored as an archive.
    Archive {
        /// The path of the file it restores.
        path: String,
        /// The archive's path inside the folder.
        archive: Option<String>,
        /// Bytes of the file it restores.
        original_bytes: u64,
        /// Its tensor count.
        tensors: usize,
        /// Whether it restores the file the manifest names.
        matches_manifest: bool,
        /// Whether every record agrees with the stored header.
        records_match_header: bool,
        /// Those that do not.
        disagreements: Vec<String>,
        /// The shard's own listing.
        #[serde(skip)]
        listing: Box<ListFile>,
    },
}

/// What a compressed folder holds; serializes as `ls --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ListFolder {
    /// The compressed folder.
    #[serde(serialize_with = "lossy")]
    pub folder: PathBuf,
    /// False when a shard does not restore its file or a record is damaged (exit 3).
    pub ok: bool,
    /// One entry per file of the manifest.
    pub files: Vec<FolderListEntry>,
    /// Files inside the folder its manifest does not name.
    pub unlisted: Vec<String>,
}

/// What [`list`] found.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ListReport {
    /// One archive.
    File(ListFile),
    /// A compressed folder.
    Folder(ListFolder),
}

impl ListReport {
    /// False when damage was found (exit 3).
    pub fn ok(&self) -> bool {
        match self {
            ListReport::File(l) => l.ok,
            ListReport::Folder(l) => l.ok,
        }
    }
}

/// The records of `archive` against the header they restore (cheap: the header only),
/// each disagreement warned about: a listing of a damaged record says so.
fn warn_header_disagreements(archive: &Archive, obs: &dyn Observer) -> Vec<String> {
    let disagreements = match archive.header_disagreements() {
        Ok(d) => d,
        Err(Error::Archive { source, .. }) => {
            vec![format!("the stored header cannot be checked: {source}")]
        }
        // Without the archive's path, which the warning already names.
        Err(Error::Mismatch {
            region,
            expected,
            actual,
            ..
        }) => vec![format!(
            "the stored header cannot be checked: {region}: checksum mismatch: stored \
             {expected:016x}, decoded {actual:016x}"
        )],
        Err(e) => vec![format!("the stored header cannot be checked: {e}")],
    };
    for d in &disagreements {
        obs.warning(&format!(
            "{}: {d}; the archive is damaged (`brevis verify` checks every record)",
            shown_path(archive.path())
        ));
    }
    disagreements
}

/// Warns when shard archive `a` does not restore the file its manifest entry names;
/// returns whether it does.
fn warn_shard_mismatch(entry: &folder::FolderFile, a: &Archive, obs: &dyn Observer) -> bool {
    match folder::shard_mismatch(entry, a) {
        None => true,
        Some(what) => {
            obs.warning(&format!(
                "{}: {what}; `brevis verify` checks the folder",
                shown_path(a.path()),
            ));
            false
        }
    }
}

/// The listing of one opened archive, damage warned about.
fn list_archive(archive: &Archive, obs: &dyn Observer) -> ListFile {
    let disagreements = warn_header_disagreements(archive, obs);
    // A program whose first byte is no operator's tag (listed with root `?`) is damage
    // too, found without decoding.
    let mut unreadable = 0;
    for t in archive.tensors().iter().filter(|t| t.root_op == "?") {
        obs.warning(&format!(
            "{}: tensor {:?}: its program does not start with an operator; the archive is \
             damaged (`brevis verify` checks every record)",
            shown_path(archive.path()),
            t.name
        ));
        unreadable += 1;
    }
    let (original, stored) = (archive.original_len(), archive.archive_len());
    ListFile {
        archive: archive.path().to_path_buf(),
        ok: disagreements.is_empty() && unreadable == 0,
        original_bytes: original,
        archive_bytes: stored,
        reduction_percent: percent_smaller(original, stored),
        header: ListedHeader {
            original_bytes: 8 + archive.header_len(),
            archive_bytes: archive.header_archive_bytes(),
        },
        format_version: archive.version(),
        file_name: archive.file_name().map(str::to_string),
        tensors: archive
            .tensors()
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t, storage_of(archive, i)))
            .map(|(i, t, (stored_as, group, copy_of))| ListedTensor {
                name: t.name.clone(),
                dtype: t.dtype.name(),
                shape: t.shape.clone(),
                begin: t.begin,
                end: t.end,
                original_bytes: t.original_bytes(),
                archive_bytes: t.archive_bytes(),
                program_bytes: t.program_bytes(),
                reduction_percent: percent_smaller(t.original_bytes(), t.archive_bytes()),
                root_op: t.root_op,
                stored_as,
                group,
                copy_of,
                reference: ListedReference::of(archive, i),
                settings: t.settings.as_ref().map(ListedSettings::of),
            })
            .collect(),
        gaps: archive
            .gaps()
            .iter()
            .map(|g| ListedGap {
                begin: g.begin,
                end: g.end,
                original_bytes: g.end - g.begin,
                archive_bytes: g.record.len() as u64,
            })
            .collect(),
        records_match_header: disagreements.is_empty(),
        disagreements,
    }
}

/// Lists the tensors of `input`, an archive or compressed folder, without decoding any;
/// damage found on the way (a record that disagrees with the stored header, a program
/// that does not start with an operator, a shard that does not restore its file) is
/// warned about and makes the report's `ok` false.
///
/// # Errors
/// As [`super::open_archive_with`]; for a folder as [`folder::Folder::open`], and
/// [`folder::Folder::check_stored`] when a stored file is missing.
pub fn list(input: &Path, base: Option<&Arc<BaseSet>>, obs: &dyn Observer) -> Result<ListReport> {
    list_from(Input::Path(input), base, obs)
}

/// [`list`] of an archive given as `input`: a path, standard input or bytes, read whole
/// into memory ([`super::open_archive_from`]) unless it is a path. A compressed folder is
/// a path only.
///
/// # Errors
/// As [`list`] and [`super::open_archive_from`].
pub fn list_from(
    input: Input<'_>,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<ListReport> {
    let input = match input {
        Input::Path(p) => p,
        _ => {
            let archive = super::open_archive_from(input, base)?;
            return Ok(ListReport::File(list_archive(&archive, obs)));
        }
    };
    let Some(dir) = folder::compressed_folder(input) else {
        return Ok(ListReport::File(list_archive(
            &super::open_archive_with(input, base)?,
            obs,
        )));
    };
    let f = super::open_folder_with(&dir, base)?;
    // A missing copied file is an error, as a missing shard archive is, before anything
    // is listed.
    f.check_stored()?;
    let unlisted = warn_unlisted(&f, &dir, obs);
    let mut ok = true;
    let mut files = Vec::new();
    for x in f.files() {
        match x.kind {
            folder::FileKind::Copy => files.push(FolderListEntry::Copy {
                path: x.path.clone(),
                original_bytes: x.bytes,
            }),
            folder::FileKind::Archive => {
                // Opened (so a missing or damaged shard archive is an error here too)
                // and checked against the manifest.
                let shard = f.open_shard(x)?;
                let matches = warn_shard_mismatch(x, &shard, obs);
                let listing = list_archive(&shard, obs);
                ok &= matches && listing.ok;
                files.push(FolderListEntry::Archive {
                    path: x.path.clone(),
                    archive: x.archive.clone(),
                    original_bytes: x.bytes,
                    tensors: shard.tensors().len(),
                    matches_manifest: matches,
                    records_match_header: listing.records_match_header,
                    disagreements: listing.disagreements.clone(),
                    listing: Box::new(listing),
                });
            }
        }
    }
    Ok(ListReport::Folder(ListFolder {
        folder: dir,
        ok,
        files,
        unlisted,
    }))
}

/// One node of a program, in preorder, as `show --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    /// Its preorder index.
    pub index: usize,
    /// Its depth (the root is 0).
    pub depth: usize,
    /// Its operator's name.
    pub op: &'static str,
    /// Its line of the text form.
    pub line: String,
    /// Its type (`u16[6]`).
    #[serde(rename = "type")]
    pub ty: String,
    /// Bytes of its own (tag, parameters, literal tables and payload).
    pub own_bytes: u64,
    /// Bytes of its subtree.
    pub subtree_bytes: u64,
    /// Its subtree's share of the tensor's record, in percent.
    pub share_percent: f64,
}

/// One tensor's program and where its bytes go; serializes as `show --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ShowReport {
    /// The archive holding it (a shard's, in a folder).
    #[serde(serialize_with = "lossy")]
    pub archive: PathBuf,
    /// False when a record is damaged or a shard does not restore its file (exit 3).
    pub ok: bool,
    /// The tensor's name.
    pub name: String,
    /// Its dtype's name.
    pub dtype: &'static str,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Bytes of the original.
    pub original_bytes: u64,
    /// Bytes of its record.
    pub archive_bytes: u64,
    /// Bytes of its program.
    pub program_bytes: u64,
    /// Bytes of the record that are not the program: its kind (format 4: its frame) and
    /// checksum (version 1: also name, dtype, shape and offsets; a regions record: also
    /// the table of its regions).
    pub framing_bytes: u64,
    /// The archive's format version.
    pub format_version: u16,
    /// Regions of its record checked each against a checksum of its own (a regions
    /// record, format 4); 0 for any other record.
    pub regions: usize,
    /// As [`ListedTensor::stored_as`]; for `group`, the program shown is the group's.
    pub stored_as: &'static str,
    /// As [`ListedTensor::group`].
    pub group: Option<ListedGroup>,
    /// As [`ListedTensor::copy_of`].
    pub copy_of: Option<String>,
    /// As [`ListedTensor::reference`]; the program shown restores the residual.
    pub reference: Option<ListedReference>,
    /// As [`ListedTensor::settings`].
    pub settings: Option<ListedSettings>,
    /// The program in the text form.
    pub program: String,
    /// Every node, in preorder.
    pub nodes: Vec<NodeRow>,
}

fn preorder<'n>(node: &'n Node, depth: usize, out: &mut Vec<(usize, &'n Node)>) {
    out.push((depth, node));
    for c in node.children() {
        preorder(c, depth + 1, out);
    }
}

/// The program of the tensor named `tensor` (as stored, or as `ls` prints it) in
/// `input`, an archive or compressed folder, with the bytes of each node. `Ok(None)`
/// when the tensor is not found because the archive is damaged (a record disagrees with
/// the header, a shard does not restore its file): said to the observer as a failure.
///
/// # Errors
/// [`Error::Refused`] of kind `no_such_tensor` if no tensor has that name; as [`list`]
/// if the archive cannot be opened; [`Error::Archive`] if the program cannot be read.
pub fn show(
    input: &Path,
    tensor: &str,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<Option<ShowReport>> {
    let mut ok = true;
    let (archive, i) = if let Some(dir) = folder::compressed_folder(input) {
        // A folder: the shard that holds the tensor. A missing stored file is an error
        // here too, as for every command.
        let f = super::open_folder_with(&dir, base)?;
        f.check_stored()?;
        warn_unlisted(&f, &dir, obs);
        let Some(found) = f.find_tensor(tensor)? else {
            let missing = format!(
                "{}: no tensor named \"{}\" in its {} shards",
                shown_path(input),
                escape_name(tensor),
                f.shards().count(),
            );
            // A shard archive that restores another file may be why: say so.
            let mut swapped = false;
            for x in f.shards() {
                if !warn_shard_mismatch(x, &f.open_shard(x)?, obs) {
                    swapped = true;
                }
            }
            if swapped {
                obs.failure(&format!(
                    "{missing}, and a shard archive does not restore the file its manifest \
                     names (see the warnings above)"
                ));
                return Ok(None);
            }
            return Err(refused(
                "no_such_tensor",
                format!(
                    "{missing} (list them with `brevis ls {}`)",
                    shown_path(input)
                ),
            ));
        };
        if let Some(entry) = f.entry_of(&found.0) {
            ok = warn_shard_mismatch(entry, &found.0, obs);
        }
        found
    } else {
        let archive = super::open_archive_with(input, base)?;
        let Some(i) = archive.find_as_printed(tensor) else {
            let missing = format!(
                "{}: no tensor named \"{}\" ({}; list them with `brevis ls`)",
                shown_path(input),
                escape_name(tensor),
                plural(archive.tensors().len(), "tensor")
            );
            // A damaged record may be why (its name changed): say so.
            if !warn_header_disagreements(&archive, obs).is_empty() {
                obs.failure(&format!(
                    "{missing}; the archive's records disagree with the header it stores \
                     (see the warnings above)"
                ));
                return Ok(None);
            }
            return Err(refused("no_such_tensor", missing));
        };
        (archive, i)
    };
    // As `ls`: a record that disagrees with the stored header is damage.
    if !warn_header_disagreements(&archive, obs).is_empty() {
        ok = false;
    }
    let t = &archive.tensors()[i];
    let (stored_as, group, copy_of) = storage_of(&archive, i);
    let program = archive.program(i)?;
    // Node shares are of the record that holds the program: a group's whole record.
    let record = group.as_ref().map_or(t.archive_bytes(), |g| g.record_bytes);
    let mut nodes = Vec::new();
    preorder(&program, 0, &mut nodes);
    let share = |b: u64| {
        if record > 0 {
            b as f64 / record as f64 * 100.0
        } else {
            0.0
        }
    };
    let rows = nodes
        .iter()
        .zip(size_report(&program))
        .map(|((depth, n), sz)| NodeRow {
            index: sz.index,
            depth: *depth,
            op: n.op_name(),
            line: node_line(n),
            ty: n.ty().to_string(),
            own_bytes: sz.own_bytes,
            subtree_bytes: sz.subtree_bytes,
            share_percent: share(sz.subtree_bytes),
        })
        .collect();
    Ok(Some(ShowReport {
        archive: archive.path().to_path_buf(),
        ok,
        name: t.name.clone(),
        dtype: t.dtype.name(),
        shape: t.shape.clone(),
        original_bytes: t.original_bytes(),
        archive_bytes: t.archive_bytes(),
        program_bytes: t.program_bytes(),
        framing_bytes: t.archive_bytes() - t.program_bytes(),
        format_version: archive.version(),
        regions: archive.tensor_regions(i).len(),
        stored_as,
        group,
        copy_of,
        reference: ListedReference::of(&archive, i),
        settings: t.settings.as_ref().map(ListedSettings::of),
        program: program.to_string(),
        nodes: rows,
    }))
}
