//! `decompress`: an archive or compressed folder back into the original file or folder,
//! with `--salvage` for damaged archives, and its report.

use super::*;

/// What [`decompress`] restored beyond the common figures.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum DecompressDetail {
    /// One archive restored one file.
    File {
        /// Bytes of the archive.
        archive_bytes: u64,
    },
    /// A compressed folder restored a folder.
    Folder {
        /// Files restored.
        files: usize,
    },
}

/// What [`decompress`] did; serializes as `brevis decompress --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct DecompressReport {
    /// True unless [`DecompressOptions::salvage`] zero-filled a damaged region or
    /// restored an archive without its index, so that the whole file could not be
    /// checked (any other failure is an error).
    pub ok: bool,
    /// The archive or compressed folder.
    #[serde(serialize_with = "lossy")]
    pub input: PathBuf,
    /// The file or folder written.
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// Bytes restored.
    pub original_bytes: u64,
    /// The archive's size, or the folder's file count.
    #[serde(flatten)]
    pub detail: DecompressDetail,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Whether every restored byte matched its checksum: always true without
    /// [`DecompressOptions::salvage`] (a mismatch is an error), false when salvage
    /// zero-filled a damaged region.
    pub checksums_ok: bool,
    /// Whether the records (names, shapes, programs) hash to their stored checksum.
    pub records_intact: bool,
    /// Whether the restored bytes were checked against the whole-file checksum: false
    /// for an archive [`DecompressOptions::salvage`] restored without its index (cut
    /// off, damaged, or followed by other bytes), whose tensors were each checked
    /// against their own checksums, and for a folder it salvaged with damage (a
    /// zero-filled shard cannot match its file's checksum).
    pub whole_file_checked: bool,
    /// The regions [`DecompressOptions::salvage`] zero-filled (their tensors, offsets
    /// and why), in file order; empty otherwise.
    pub damaged: Vec<archive::DamagedRegion>,
    /// Every warning, in the order reported.
    pub warnings: Vec<String>,
}

/// Restores the original of `input`, a `.brv` archive or compressed folder, into
/// `output` (default: [`default_restored_name`], or [`default_restored_folder`]).
/// Nothing is written unless every checksum matches.
///
/// # Errors
/// As [`open_archive`] and [`Archive::decompress_to`], or [`folder::Folder::open`] and
/// [`folder::Folder::decompress_to`].
pub fn decompress(
    input: &Path,
    output: Option<&Path>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    let dest = output.map_or(Destination::Default, Destination::Path);
    decompress_into(input, dest, opts, obs)
}

/// The file name a restored file gets inside a folder given as the output: the name
/// the archive records (a single plain name only), else [`default_restored_name`]'s.
pub(super) fn restored_file_name(archive: &Archive, input: &Path) -> Result<std::ffi::OsString> {
    let recorded = archive
        .file_name()
        .filter(|n| Path::new(n).file_name() == Some(std::ffi::OsStr::new(n)));
    match recorded {
        Some(n) => Ok(n.into()),
        None => name_part(&default_restored_name(input)),
    }
}

/// `e`, an archive that cannot be opened (or whose header cannot be restored), as the
/// refusal of a salvage: nothing can be, and nothing was written (exit 1, not 3).
pub(super) fn unsalvageable(e: Error) -> Error {
    if matches!(
        e,
        Error::Io { .. }
            | Error::WrongKind { .. }
            | Error::OutputExists { .. }
            | Error::SameFile { .. }
    ) {
        return e;
    }
    refused(
        e.kind(),
        format!(
            "{e}; --salvage cannot help: it restores the tensors around damaged tensor \
             records, and needs the header record (which names every tensor) intact (and \
             for an archive of format 3 or earlier the index and the trailer too); nothing \
             was written"
        ),
    )
}

/// [`decompress`] into any [`Destination`]: for an archive file, an existing folder
/// gets the file under the name the archive records, a character device and standard
/// output are written directly; a compressed folder restores a folder, so only to a
/// path. With [`DecompressOptions::salvage`], damaged regions are zero-filled and listed
/// in the report's `damaged` instead of failing the job: for an archive file, through
/// [`Archive::open_for_salvage`] (a format-4 archive cut short or whose index is damaged
/// is read through its records, and the tensors whose records are missing are named);
/// for a compressed folder, every file, each with the damage in it
/// ([`folder::Folder::decompress_to`]).
///
/// # Errors
/// As [`decompress`]; [`Error::Refused`] of kind `usage` for a compressed folder to
/// standard output; with salvage, an archive that cannot be opened or whose header does
/// not restore is [`Error::Refused`] of that error's kind, saying that nothing can be
/// salvaged.
pub fn decompress_into(
    input: &Path,
    dest: Destination<'_>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    if let Some(dir) = folder::compressed_folder(input) {
        let output = match dest {
            Destination::Default => None,
            Destination::Path(p) => Some(p),
            Destination::Stdout => {
                return Err(refused(
                    "usage",
                    format!(
                        "{}: a compressed folder restores a folder, which cannot be written \
                         to standard output; give -o DIR",
                        shown_path(&dir)
                    ),
                ))
            }
        };
        let output = output.map_or_else(|| default_restored_folder(&dir), Path::to_path_buf);
        let f = open_folder_with(&dir, opts.base.as_ref())?;
        let mut warnings = warn_stale_temporaries(&output, &dir, obs);
        warn_unlisted(&f, &dir, obs);
        let start = Instant::now();
        let restored = f.decompress_to(&output, opts, &|shard, ev| obs.progress(shard, ev))?;
        let seconds = start.elapsed().as_secs_f64();
        // As for one archive: damaged records that did not change the restored bytes
        // are worth saying.
        for (archive, file) in &restored.damaged_records {
            let w = format!(
                "{}: the archive's records (names, shapes, programs) do not match \
                 their stored checksum; the restored {file:?} matches its whole-file checksum",
                shown_path(archive),
            );
            obs.warning(&w);
            warnings.push(w);
        }
        let intact = restored.damaged.is_empty();
        return Ok(DecompressReport {
            ok: intact,
            input: dir,
            output,
            original_bytes: restored.original_bytes,
            detail: DecompressDetail::Folder {
                files: f.files().len(),
            },
            seconds,
            checksums_ok: intact,
            records_intact: restored.damaged_records.is_empty(),
            whole_file_checked: intact,
            damaged: restored.damaged,
            warnings,
        });
    }
    let archive = if opts.salvage {
        // An archive of format 4 whose index is cut off or damaged is read through its
        // records.
        open_archive_for_salvage_from(Input::Path(input)).map_err(unsalvageable)?
    } else {
        open_archive(input)?
    };
    let target = file_target(
        dest,
        || default_restored_name(input),
        |_| restored_file_name(&archive, input),
    )?;
    decompress_archive(&archive, input, &target, opts, obs)
}

/// [`decompress_into`] of an archive given as `input`: a path, or standard input or
/// bytes read whole into memory first ([`open_archive_from`], at most [`stdin_limit`]
/// bytes from standard input, as `compress -` reads). An archive from standard input or
/// bytes needs a destination: a file, an existing folder (the file inside it under the
/// name the archive records), a device or standard output.
///
/// # Errors
/// As [`decompress_into`] and [`open_archive_from`]; [`Error::Refused`] of kind `usage`
/// for standard input or bytes with [`Destination::Default`], or into a folder when
/// the archive records no file name.
pub fn decompress_from(
    input: Input<'_>,
    dest: Destination<'_>,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    let Input::Path(path) = input else {
        let label = input.label();
        let no_name = |why: String| {
            refused(
                "usage",
                format!(
                    "{} has no file name to name the restored file after: {why} \
                     (-o x.safetensors, or -o - for standard output)",
                    shown_path(&label)
                ),
            )
        };
        if dest == Destination::Default {
            return Err(no_name("give -o with the file's name".to_string()));
        }
        // The base is attached by the restore itself, as for a path.
        let archive = if opts.salvage {
            // As for a path: an archive of format 4 whose index is cut off or damaged is
            // read through its records.
            open_archive_for_salvage_from(input).map_err(unsalvageable)?
        } else {
            open_archive_from(input, None)?
        };
        let target = file_target(dest, PathBuf::new, |dir| {
            archive
                .file_name()
                .filter(|n| Path::new(n).file_name() == Some(std::ffi::OsStr::new(n)))
                .map(std::ffi::OsString::from)
                .ok_or_else(|| {
                    no_name(format!(
                        "the archive records no file name to write in {}",
                        shown_path(dir)
                    ))
                })
        })?;
        return decompress_archive(&archive, &label, &target, opts, obs);
    };
    decompress_into(path, dest, opts, obs)
}

/// Restores the open `archive` (named `input` in reports) into `target`.
pub(super) fn decompress_archive(
    archive: &Archive,
    input: &Path,
    target: &writer::Target,
    opts: &DecompressOptions,
    obs: &dyn Observer,
) -> Result<DecompressReport> {
    let mut warnings = match target {
        writer::Target::File(output) => warn_stale_temporaries(output, input, obs),
        _ => Vec::new(),
    };
    let start = Instant::now();
    let s = archive
        .decompress_into(target, opts, &|ev| obs.progress("", ev))
        .map_err(|e| {
            if opts.salvage && e.is_mismatch() {
                unsalvageable(e)
            } else {
                e
            }
        })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(missing) = archive.missing_index() {
        let w = format!(
            "{}: restored without its index ({missing}); every tensor written was checked \
             against its own checksum, the whole file could not be",
            shown_path(input)
        );
        obs.warning(&w);
        warnings.push(w);
    } else if !s.records_intact && s.damaged.is_empty() {
        // The restored bytes are proved by the per-tensor and whole-file checksums;
        // damage to names or shapes in the records does not change them but is worth
        // saying.
        let w = format!(
            "{}: the archive's records (names, shapes, programs) do not match \
             their stored checksum; the restored file matches its whole-file checksum",
            shown_path(input)
        );
        obs.warning(&w);
        warnings.push(w);
    }
    let intact = s.damaged.is_empty();
    let whole_file_checked = archive.missing_index().is_none();
    Ok(DecompressReport {
        ok: intact && whole_file_checked,
        input: input.to_path_buf(),
        output: s.output,
        original_bytes: s.original_bytes,
        detail: DecompressDetail::File {
            archive_bytes: archive.archive_len(),
        },
        seconds,
        checksums_ok: intact,
        records_intact: s.records_intact,
        whole_file_checked,
        damaged: s.damaged,
        warnings,
    })
}
