//! [`extract`]: a `.safetensors` file of some tensors of an archive or compressed folder.

use super::{file_target, lossy, refused, warn_stale_temporaries, Destination, Observer};
use crate::archive::base::BaseSet;
use crate::archive::{self, escape_name, folder, shown_path, writer, Archive, Part};
use crate::error::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What [`extract`] wrote; serializes as `brevis extract --json` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ExtractReport {
    /// Always true (a failure is an error).
    pub ok: bool,
    /// The archive or compressed folder.
    #[serde(serialize_with = "lossy")]
    pub input: PathBuf,
    /// The `.safetensors` file written (`standard output` for standard output).
    #[serde(serialize_with = "lossy")]
    pub output: PathBuf,
    /// The tensors written, in data order.
    pub tensors: Vec<String>,
    /// Bytes of the file written.
    pub bytes: u64,
    /// Whether the original header's `__metadata__` was kept (it had one).
    pub metadata: bool,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Every warning, in the order reported.
    pub warnings: Vec<String>,
}

/// Levenshtein distance between `a` and `b` in characters, or `None` once it is sure to
/// exceed `most`.
fn distance(a: &str, b: &str, most: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > most {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        if row.iter().min().is_some_and(|&m| m > most) {
            return None;
        }
        std::mem::swap(&mut prev, &mut row);
    }
    Some(prev[b.len()]).filter(|&d| d <= most)
}

/// The name among `names` nearest to `wanted` (at most a third of its characters, and
/// at least 3, apart), if one is.
pub fn nearest_name<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let most = (wanted.chars().count() / 3).max(3);
    names
        .filter_map(|n| distance(wanted, n, most).map(|d| (d, n)))
        .min_by_key(|&(d, _)| d)
        .map(|(_, n)| n)
}

/// The refusal naming the tensors of `missing` that `input` does not hold, each with
/// the nearest name it does hold (from `names`) when one is near.
fn no_such_tensors<'a>(
    input: &Path,
    missing: &[&str],
    names: impl Iterator<Item = &'a str> + Clone,
) -> crate::Error {
    let each: Vec<String> = missing
        .iter()
        .map(|m| match nearest_name(m, names.clone()) {
            Some(n) => format!(
                "\"{}\" (did you mean \"{}\"?)",
                escape_name(m),
                escape_name(n)
            ),
            None => format!("\"{}\"", escape_name(m)),
        })
        .collect();
    let noun = if missing.len() == 1 {
        "no tensor named"
    } else {
        "no tensors named"
    };
    refused(
        "no_such_tensor",
        format!(
            "{}: {noun} {}; list them with `brevis ls {}`",
            shown_path(input),
            each.join(", "),
            shown_path(input)
        ),
    )
}

/// Writes a `.safetensors` file holding just the tensors `names` of `input`, a `.brv`
/// archive or compressed folder, to `dest` ([`archive::extract`]: each tensor decoded
/// through the index and checked against its checksum, the original header's
/// `__metadata__` kept, offsets rewritten, tensors in their original order). A name
/// may be given as `ls` prints it (escaped); a tensor named twice is written once. For a
/// folder, tensors come from the shards that hold them, shard by shard in path order,
/// and the first such shard's metadata is kept (a warning says if another's differs).
/// A file output goes through a temporary file and a rename, so a failure leaves none.
///
/// # Errors
/// [`crate::Error::Refused`] of kind `no_such_tensor` naming the archive and every
/// name it does not hold (with the nearest name it does), of kind `usage` for no
/// names or [`Destination::Default`]; as [`open_archive`](crate::job::open_archive), [`folder::Folder::open`],
/// [`archive::extract`] and [`writer::write_target`] (an existing output without
/// `force`, a damaged tensor).
pub fn extract(
    input: &Path,
    names: &[String],
    dest: Destination<'_>,
    force: bool,
    base: Option<&Arc<BaseSet>>,
    obs: &dyn Observer,
) -> Result<ExtractReport> {
    if names.is_empty() {
        return Err(refused(
            "usage",
            format!("{}: name at least one tensor to extract", shown_path(input)),
        ));
    }
    if dest == Destination::Default {
        return Err(refused(
            "usage",
            format!(
                "{}: extract needs an output (-o OUT.safetensors, or -o - for standard output)",
                shown_path(input)
            ),
        ));
    }
    // The archives and the tensors each gives.
    let mut archives: Vec<(Archive, Vec<usize>)> = Vec::new();
    let mut missing: Vec<&str> = Vec::new();
    let mut all_names: Vec<String> = Vec::new();
    let root;
    if let Some(dir) = folder::compressed_folder(input) {
        let f = super::open_folder_with(&dir, base)?;
        f.check_stored()?;
        let mut found = vec![false; names.len()];
        for shard in f.shards() {
            let a = f.open_shard(shard)?;
            let mut mine = Vec::new();
            for (k, n) in names.iter().enumerate() {
                if found[k] {
                    continue;
                }
                if let Some(i) = a.find_as_printed(n) {
                    found[k] = true;
                    mine.push(i);
                }
            }
            all_names.extend(a.tensors().iter().map(|t| t.name.clone()));
            if !mine.is_empty() {
                archives.push((a, mine));
            }
        }
        missing.extend(
            names
                .iter()
                .zip(&found)
                .filter(|(_, &f)| !f)
                .map(|(n, _)| n.as_str()),
        );
        root = dir;
    } else {
        let a = super::open_archive_with(input, base)?;
        let mut mine = Vec::new();
        for n in names {
            match a.find_as_printed(n) {
                Some(i) => mine.push(i),
                None => missing.push(n),
            }
        }
        all_names.extend(a.tensors().iter().map(|t| t.name.clone()));
        archives.push((a, mine));
        root = input.to_path_buf();
    }
    // A tensor coded against a base needs it, before anything is written.
    for (a, ts) in &archives {
        if ts.iter().any(|&i| a.tensors()[i].reference.is_some()) {
            a.require_sources()?;
        }
    }
    if !missing.is_empty() {
        return Err(no_such_tensors(
            &root,
            &missing,
            all_names.iter().map(String::as_str),
        ));
    }
    let target = file_target(dest, PathBuf::new, |dir| {
        Err(refused(
            "usage",
            format!(
                "{}: is a folder; give the extracted file's name (-o {}/NAME.safetensors)",
                shown_path(dir),
                shown_path(dir)
            ),
        ))
    })?;
    let mut warnings = match &target {
        writer::Target::File(output) => {
            if folder::compressed_folder(&root).is_some() {
                folder::check_output_outside(&root, output)?;
            }
            warn_stale_temporaries(output, &root, obs)
        }
        _ => Vec::new(),
    };
    let parts: Vec<Part<'_>> = archives
        .iter()
        .map(|(a, ts)| Part {
            archive: a,
            tensors: ts.clone(),
        })
        .collect();
    let start = Instant::now();
    // The input is never the output (a folder's shards were checked above).
    let same = archives.first().map(|(a, _)| a.path().to_path_buf());
    let s = writer::write_target(same.as_deref(), &target, force, |w, name| {
        archive::extract(&parts, w, name)
    })?;
    let seconds = start.elapsed().as_secs_f64();
    for p in &s.metadata_differs {
        let w = format!(
            "{}: its __metadata__ differs from {}'s, which is the one kept",
            shown_path(p),
            shown_path(parts[0].archive.path())
        );
        obs.warning(&w);
        warnings.push(w);
    }
    Ok(ExtractReport {
        ok: true,
        input: root,
        output: target.path().to_path_buf(),
        tensors: s.tensors,
        bytes: s.bytes,
        metadata: s.metadata,
        seconds,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_name_is_suggested_only_when_near() {
        let names = ["pooler.dense.weight", "pooler.dense.bias", "embeddings.x"];
        let near = |w: &str| nearest_name(w, names.iter().copied());
        assert_eq!(near("pooler.dense.weigth"), Some("pooler.dense.weight"));
        assert_eq!(near("pooler.dense.bias"), Some("pooler.dense.bias"));
        assert_eq!(near("pooler.dens.bias"), Some("pooler.dense.bias"));
        assert_eq!(near("zzz"), None);
        assert_eq!(near("encoder.layer.0.attention"), None);
    }
}
