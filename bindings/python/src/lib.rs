//! `brevis._brevis`: the Python binding of the Brevis library (PyO3, abi3 for CPython
//! 3.11 and later). The Python package `brevis` (in `python/brevis/`) wraps it: this
//! module holds only what must be native. Every long call releases the GIL
//! ([`Python::detach`]); progress callbacks and warnings take it back for the moment
//! they run. No signal handler is installed: the host process keeps its own.

use brevis::archive::{self, CompressOptions, DecompressOptions, ProgressEvent};
use brevis::job::{self, Observer};
use brevis::synth::{PriorChoice, SearchOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The Python exception class for a library error: by [`brevis::Error::kind`], one of
/// the classes of `brevis._errors` (all subclasses of `BrevisError`, which carry
/// `message` and `kind` and pickle).
fn error_class(e: &brevis::Error) -> &'static str {
    if e.is_mismatch() {
        return "ChecksumError";
    }
    match e.kind() {
        "io" => "BrevisIOError",
        "output_exists" | "same_file" => "OutputExistsError",
        "no_such_tensor" => "NoSuchTensorError",
        "invalid_source" | "wrong_kind" => "SourceError",
        "not_archive"
        | "unsupported_version"
        | "damaged_archive"
        | "damaged_record"
        | "undecodable_record"
        | "too_large" => "ArchiveError",
        _ => "BrevisError",
    }
}

/// `e` as the Python exception of its class, with its message and kind; an output that
/// exists says how to replace it, as the CLI says `--force`.
fn to_py(e: brevis::Error) -> PyErr {
    let mut message = e.to_string();
    if matches!(e, brevis::Error::OutputExists { .. }) {
        message.push_str(" (pass force=True to replace it)");
    }
    py_error(error_class(&e), message, e.kind())
}

/// The exception `class` of `brevis._errors` saying `message`, of `kind`.
fn py_error(class: &str, message: String, kind: &str) -> PyErr {
    Python::attach(|py| {
        let made = || -> PyResult<PyErr> {
            let class = py.import("brevis._errors")?.getattr(class)?;
            let value = class.call1((message, kind))?;
            Ok(PyErr::from_value(value))
        };
        made().unwrap_or_else(|err| err)
    })
}

/// Reports a job's progress to a Python callable and its warnings as Python warnings
/// (`brevis.BrevisWarning`), holding the GIL only while each runs. The first exception
/// a callback raises is kept and raised when the job ends; later events are dropped.
struct PyObserver {
    callback: Option<Py<PyAny>>,
    error: Mutex<Option<PyErr>>,
}

impl PyObserver {
    fn new(callback: Option<Py<PyAny>>) -> PyObserver {
        PyObserver {
            callback,
            error: Mutex::new(None),
        }
    }

    fn failed(&self) -> bool {
        self.error.lock().map_or(true, |e| e.is_some())
    }

    fn keep(&self, err: PyErr) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(err);
        }
    }

    /// The job's result, or the first exception a callback raised.
    fn finish<T>(self, result: brevis::Result<T>) -> PyResult<T> {
        let kept = self.error.into_inner().ok().flatten();
        match (result, kept) {
            (_, Some(err)) => Err(err),
            (Err(e), None) => Err(to_py(e)),
            (Ok(v), None) => Ok(v),
        }
    }
}

impl Observer for PyObserver {
    fn progress(&self, shard: &str, event: ProgressEvent<'_>) {
        let Some(cb) = &self.callback else { return };
        if self.failed() {
            return;
        }
        let (kind, label, bytes) = match event {
            ProgressEvent::Begin { bytes, .. } => ("begin", None, bytes),
            ProgressEvent::Item { label, bytes } => ("item", Some(label), bytes),
            ProgressEvent::End => ("end", None, 0),
        };
        Python::attach(|py| {
            if let Err(err) = cb.call1(py, (kind, shard, label, bytes)) {
                self.keep(err);
            }
        });
    }

    fn warning(&self, text: &str) {
        if self.failed() {
            return;
        }
        Python::attach(|py| {
            let warn = || -> PyResult<()> {
                let category = py.import("brevis._errors")?.getattr("BrevisWarning")?;
                let message = std::ffi::CString::new(text.replace('\0', "\\0"))
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                PyErr::warn(py, &category, &message, 2)
            };
            if let Err(err) = warn() {
                self.keep(err);
            }
        });
    }

    fn failure(&self, text: &str) {
        self.warning(text);
    }
}

/// A report (serde) as a Python dict, through `json.loads`.
fn to_dict<'py, T: serde::Serialize>(py: Python<'py>, report: &T) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(report).map_err(|e| PyValueError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// `jobs` checked: 0 (all cores) to [`archive::MAX_JOBS`].
fn check_jobs(jobs: Option<usize>) -> PyResult<Option<usize>> {
    match jobs {
        Some(n) if n > archive::MAX_JOBS => Err(PyValueError::new_err(format!(
            "jobs must be 0 (all cores) to {}, not {n}",
            archive::MAX_JOBS
        ))),
        j => Ok(j),
    }
}

/// The CLI's compress options from their keywords (`None`: the CLI's default), checked
/// as the CLI checks them (a `ValueError` where the CLI gives a usage error).
#[allow(clippy::too_many_arguments)]
fn compress_options(
    level: Option<&str>,
    budget: Option<u64>,
    max_depth: Option<u32>,
    max_nodes: Option<u32>,
    jobs: Option<usize>,
    force: bool,
    verify: bool,
    prior: Option<&Path>,
    uniform: bool,
) -> PyResult<CompressOptions> {
    let defaults = SearchOptions::default();
    let level = match level {
        None => brevis::synth::Level::Default,
        Some(l) => brevis::synth::Level::parse(l).ok_or_else(|| {
            PyValueError::new_err(format!(
                "level must be \"fast\" (1), \"default\" (2) or \"max\" (3), not {l:?}"
            ))
        })?,
    };
    if level == brevis::synth::Level::Fast && budget.is_some() {
        return Err(PyValueError::new_err(
            "budget with level=\"fast\": the fast level does not search",
        ));
    }
    let max_depth = max_depth.unwrap_or(defaults.max_depth);
    let max_nodes = max_nodes.unwrap_or(defaults.max_nodes);
    if !(1..=brevis::dsl::wire::MAX_DEPTH as u32).contains(&max_depth) {
        return Err(PyValueError::new_err(format!(
            "max_depth must be 1 to {}, not {max_depth}",
            brevis::dsl::wire::MAX_DEPTH
        )));
    }
    if !(1..=brevis::dsl::wire::MAX_NODES as u32).contains(&max_nodes) {
        return Err(PyValueError::new_err(format!(
            "max_nodes must be 1 to {}, not {max_nodes}",
            brevis::dsl::wire::MAX_NODES
        )));
    }
    if uniform && prior.is_some() {
        return Err(PyValueError::new_err("give prior or uniform, not both"));
    }
    let prior = match (prior, uniform) {
        (_, true) => PriorChoice::Uniform,
        (None, false) => PriorChoice::Auto,
        (Some(path), false) => job::read_prior(path).map_err(to_py)?,
    };
    Ok(CompressOptions {
        search: SearchOptions {
            budget: budget.unwrap_or(level.budget()),
            max_depth,
            max_nodes,
            level,
            ..defaults
        },
        jobs: check_jobs(jobs)?,
        force,
        verify,
        prior,
        file_name: None,
        links: None,
    })
}

/// Compresses a `.safetensors` file or checkpoint folder `src` into `dst` (default: the
/// CLI's, `x.safetensors` -> `x.brv`, folder `x` -> `x.brv`); the options are the
/// CLI's. Returns the report of `brevis compress --json` as a dict.
#[pyfunction]
#[pyo3(signature = (src, dst=None, *, level=None, budget=None, max_depth=None, max_nodes=None, jobs=None,
                    force=false, verify=true, prior=None, uniform=false, progress=None,
                    base=None))]
#[allow(clippy::too_many_arguments)]
fn compress_file<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: Option<PathBuf>,
    level: Option<String>,
    budget: Option<u64>,
    max_depth: Option<u32>,
    max_nodes: Option<u32>,
    jobs: Option<usize>,
    force: bool,
    verify: bool,
    prior: Option<PathBuf>,
    uniform: bool,
    progress: Option<Py<PyAny>>,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = compress_options(
        level.as_deref(),
        budget,
        max_depth,
        max_nodes,
        jobs,
        force,
        verify,
        prior.as_deref(),
        uniform,
    )?;
    let obs = PyObserver::new(progress);
    let result = py.detach(|| {
        let links = match &base {
            Some(b) => Some(std::sync::Arc::new(brevis::archive::writer::Links {
                base: Some(job::open_base(b)?),
                ..Default::default()
            })),
            None => None,
        };
        job::compress(
            &src,
            dst.as_deref(),
            &CompressOptions { links, ..opts },
            &obs,
        )
    });
    let report = obs.finish(result)?;
    to_dict(py, &report)
}

/// Compresses `data`, the bytes of a whole `.safetensors` file, as `brevis compress -`
/// does (the same library call, [`job::compress_from`] of bytes): into the archive file
/// `dst` (written to a temporary file beside it and renamed into place; an existing
/// `dst` is replaced only with `force`), returning the report of `brevis compress
/// --json` as a dict; or, with `dst` `None`, into an archive in memory
/// ([`job::compress_to_bytes`]), returned as bytes.
#[pyfunction]
#[pyo3(signature = (data, dst=None, *, level=None, budget=None, max_depth=None, max_nodes=None, jobs=None,
                    force=false, verify=true, prior=None, uniform=false, progress=None,
                    base=None))]
#[allow(clippy::too_many_arguments)]
fn compress_bytes<'py>(
    py: Python<'py>,
    data: &[u8],
    dst: Option<PathBuf>,
    level: Option<String>,
    budget: Option<u64>,
    max_depth: Option<u32>,
    max_nodes: Option<u32>,
    jobs: Option<usize>,
    force: bool,
    verify: bool,
    prior: Option<PathBuf>,
    uniform: bool,
    progress: Option<Py<PyAny>>,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = compress_options(
        level.as_deref(),
        budget,
        max_depth,
        max_nodes,
        jobs,
        force,
        verify,
        prior.as_deref(),
        uniform,
    )?;
    let obs = PyObserver::new(progress);
    let label = Path::new("tensors in memory");
    let result = py.detach(|| {
        let links = match &base {
            Some(b) => Some(std::sync::Arc::new(brevis::archive::writer::Links {
                base: Some(job::open_base(b)?),
                ..Default::default()
            })),
            None => None,
        };
        let opts = CompressOptions { links, ..opts };
        match &dst {
            Some(d) => job::compress_from(
                job::Input::Bytes { bytes: data, label },
                job::Destination::Path(d),
                &opts,
                &obs,
            )
            .map(Ok),
            None => job::compress_to_bytes(data, label, &opts, &obs).map(Err),
        }
    });
    match obs.finish(result)? {
        Ok(report) => to_dict(py, &report),
        Err(bytes) => Ok(PyBytes::new(py, &bytes).into_any()),
    }
}

/// Restores the original of an archive or compressed folder `src` into `dst` (default:
/// the CLI's); nothing is written unless every checksum matches. Returns the report of
/// `brevis decompress --json` as a dict.
#[pyfunction]
#[pyo3(signature = (src, dst=None, *, jobs=None, force=false, progress=None, base=None))]
fn decompress_file<'py>(
    py: Python<'py>,
    src: PathBuf,
    dst: Option<PathBuf>,
    jobs: Option<usize>,
    force: bool,
    progress: Option<Py<PyAny>>,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let jobs = check_jobs(jobs)?;
    let obs = PyObserver::new(progress);
    let result = py.detach(|| {
        let opts = DecompressOptions {
            jobs,
            force,
            base: base.as_deref().map(job::open_base).transpose()?,
            ..DecompressOptions::default()
        };
        job::decompress(&src, dst.as_deref(), &opts, &obs)
    });
    let report = obs.finish(result)?;
    to_dict(py, &report)
}

/// Checks an archive or compressed folder against its stored checksums (and, with
/// `against`, the original byte for byte). Damage is the result (`ok` false in the
/// dict `brevis verify --json` prints), not an exception.
#[pyfunction]
#[pyo3(signature = (src, against=None, *, jobs=None, progress=None, base=None))]
fn verify_file<'py>(
    py: Python<'py>,
    src: PathBuf,
    against: Option<PathBuf>,
    jobs: Option<usize>,
    progress: Option<Py<PyAny>>,
    base: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let jobs = check_jobs(jobs)?;
    let obs = PyObserver::new(progress);
    let result = py.detach(|| {
        let base = base.as_deref().map(job::open_base).transpose()?;
        job::verify(&src, against.as_deref(), jobs, base.as_ref(), &obs)
    });
    let report = obs.finish(result)?;
    to_dict(py, &report)
}

/// Lists an archive or compressed folder without decoding it: the dict `brevis ls
/// --json` prints.
#[pyfunction]
fn list_file<'py>(py: Python<'py>, src: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let obs = PyObserver::new(None);
    let result = py.detach(|| job::list(&src, None, &obs));
    let report = obs.finish(result)?;
    to_dict(py, &report)
}

/// An opened `.brv` archive: its index is read when opened, each tensor decoded (and
/// checked against its checksum) only when asked for.
#[pyclass(module = "brevis._brevis", frozen)]
struct Archive {
    inner: brevis::Archive,
    /// Bytes of the original that decoding has produced so far ([`Archive::bytes_decoded`]).
    decoded: AtomicU64,
}

impl Archive {
    fn of(inner: brevis::Archive) -> Archive {
        Archive {
            inner,
            decoded: AtomicU64::new(0),
        }
    }

    /// The index of tensor `name`, or `NoSuchTensorError` (a `KeyError` too) naming it.
    fn index(&self, name: &str) -> PyResult<usize> {
        self.inner.find(name).ok_or_else(|| {
            py_error(
                "NoSuchTensorError",
                format!(
                    "{}: no tensor named {name:?}",
                    brevis::archive::shown_path(self.inner.path())
                ),
                "no_such_tensor",
            )
        })
    }

    fn count(&self, bytes: u64) {
        self.decoded.fetch_add(bytes, Ordering::Relaxed);
    }
}

#[pymethods]
impl Archive {
    /// Opens the archive at `path` (a file; a compressed folder's shards are archives).
    /// An `s3://` URL is read by ranged reads: the index when opened, each tensor's
    /// record when it is decoded ([`Archive::bytes_read`] counts the bytes).
    #[new]
    #[pyo3(signature = (path, base=None))]
    fn new(py: Python<'_>, path: PathBuf, base: Option<PathBuf>) -> PyResult<Archive> {
        let base = py
            .detach(|| base.as_deref().map(job::open_base).transpose())
            .map_err(to_py)?;
        #[cfg(feature = "object-store")]
        if let Some(url) = path.to_str().filter(|s| archive::remote::is_url(s)) {
            let inner = py
                .detach(|| {
                    let a = brevis::Archive::open_url(url)?;
                    if let Some(b) = &base {
                        a.attach_base(b)?;
                    }
                    Ok::<_, brevis::Error>(a)
                })
                .map_err(to_py)?;
            return Ok(Archive::of(inner));
        }
        let inner = py
            .detach(|| job::open_archive_with(&path, base.as_ref()))
            .map_err(to_py)?;
        Ok(Archive::of(inner))
    }

    /// An archive held in memory: `data`, the bytes of a whole `.brv` file (copied).
    #[staticmethod]
    #[pyo3(signature = (data, base=None))]
    fn from_bytes(py: Python<'_>, data: &[u8], base: Option<PathBuf>) -> PyResult<Archive> {
        let inner = py
            .detach(|| {
                let base = base.as_deref().map(job::open_base).transpose()?;
                let label = Path::new("archive in memory");
                job::open_archive_from(job::Input::Bytes { bytes: data, label }, base.as_ref())
            })
            .map_err(to_py)?;
        Ok(Archive::of(inner))
    }

    /// Bytes of the original that decoding has produced so far: a whole tensor's for
    /// each `decode_tensor` (its group's, for a tensor in a group record), the regions'
    /// for each `decode_range` that needed only some of a tensor's regions.
    #[getter]
    fn bytes_decoded(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    /// The tensor `name`'s position in the original file's data region: its
    /// `data_offsets` (begin, end), in bytes.
    fn offsets(&self, name: &str) -> PyResult<(u64, u64)> {
        let t = &self.inner.tensors()[self.index(name)?];
        Ok((t.begin, t.end))
    }

    /// Bytes `begin..end` of tensor `name` (offsets within the tensor), decoding only
    /// the regions of its program they lie in when it is stored as regions (tensors of
    /// more than 1 Mi words); else the whole tensor, checked against its checksum.
    /// Returns the bytes and whether they were checked (a part decoded from some of the
    /// regions is not: the checksum covers the whole tensor).
    fn decode_range<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        begin: u64,
        end: u64,
    ) -> PyResult<(Bound<'py, PyByteArray>, bool)> {
        let i = self.index(name)?;
        let part = py
            .detach(|| self.inner.decode_tensor_range(i, begin..end))
            .map_err(to_py)?;
        self.count(part.decoded_bytes);
        Ok((PyByteArray::new(py, &part.bytes), part.checked))
    }

    /// Bytes read from the archive so far: for an `s3://` archive, the bytes its ranged
    /// reads fetched; else its length.
    #[getter]
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }

    /// The tensor names, in file order.
    fn keys(&self) -> Vec<String> {
        self.inner
            .tensors()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// The tensor `name`'s dtype (safetensors' name: `BF16`, `F32`, ...) and shape.
    fn info(&self, name: &str) -> PyResult<(&'static str, Vec<u64>)> {
        let t = &self.inner.tensors()[self.index(name)?];
        Ok((t.dtype.name(), t.shape.clone()))
    }

    /// The original file's JSON header text (decoded and checked).
    fn header_json(&self, py: Python<'_>) -> PyResult<String> {
        let bytes = py.detach(|| self.inner.header_bytes()).map_err(to_py)?;
        // The record restores the 8-byte length field and the JSON text.
        let text = match bytes.first() {
            Some(b'{') => &bytes[..],
            _ => bytes.get(8..).unwrap_or(&[]),
        };
        Ok(String::from_utf8_lossy(text).trim_end().to_string())
    }

    /// The tensor `name`'s original bytes (little-endian words), decoded with the GIL
    /// released and checked against the stored checksum, as a bytearray (writable, so
    /// `numpy.frombuffer` over it copies nothing).
    fn decode_tensor<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyByteArray>> {
        let i = self.index(name)?;
        let bytes = py.detach(|| self.inner.decode_tensor(i)).map_err(to_py)?;
        let t = &self.inner.tensors()[i];
        self.count(match t.group {
            Some(g) => self.inner.groups()[g].end - self.inner.groups()[g].begin,
            None => t.original_bytes(),
        });
        Ok(PyByteArray::new(py, &bytes))
    }

    /// Bytes of the original file.
    #[getter]
    fn original_bytes(&self) -> u64 {
        self.inner.original_len()
    }

    /// Bytes of the archive.
    #[getter]
    fn archive_bytes(&self) -> u64 {
        self.inner.archive_len()
    }

    /// The archive's format version.
    #[getter]
    fn version(&self) -> u16 {
        self.inner.version()
    }

    /// The archive's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    fn __len__(&self) -> usize {
        self.inner.tensors().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Archive({:?}, {} tensors)",
            self.inner.path().to_string_lossy(),
            self.inner.tensors().len()
        )
    }
}

/// The manifest entry (a dict: `path`, `kind`, `archive`, `bytes`, `xxh3`) of the local
/// file `src`, at path `rel` of its checkpoint folder.
#[pyfunction]
fn folder_entry<'py>(py: Python<'py>, src: PathBuf, rel: &str) -> PyResult<Bound<'py, PyAny>> {
    let entry = py
        .detach(|| archive::folder::file_entry(&src, rel))
        .map_err(to_py)?;
    to_dict(py, &entry)
}

/// The bytes of the manifest `brevis-folder.json` of a compressed folder whose entries
/// are `entries` (JSON text of a list of [`folder_entry`] dicts, in path order), exactly
/// as `brevis compress DIR` writes it.
#[pyfunction]
fn folder_manifest(entries: &str) -> PyResult<Vec<u8>> {
    let mut files: Vec<archive::folder::FolderFile> =
        serde_json::from_str(entries).map_err(|e| PyValueError::new_err(e.to_string()))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    archive::folder::manifest_bytes(files, std::path::Path::new(archive::folder::MANIFEST_NAME))
        .map_err(to_py)
}

#[cfg(feature = "object-store")]
mod store {
    //! Object storage (`s3://` URLs) for the Python package: whole-object transfers,
    //! listing and the create-only commit. The store is configured from the
    //! environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...).
    use super::to_py;
    use brevis::archive::remote::Location;
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;
    use std::path::PathBuf;

    fn at(url: &str) -> PyResult<Location> {
        Location::parse(url).map_err(to_py)
    }

    /// Downloads the object at `url` into the file `dst`; returns its bytes.
    #[pyfunction]
    pub fn store_download(py: Python<'_>, url: &str, dst: PathBuf) -> PyResult<u64> {
        let loc = at(url)?;
        py.detach(|| loc.download(&dst)).map_err(to_py)
    }

    /// Uploads the file `src` as the object at `url` (replacing it); returns its bytes.
    #[pyfunction]
    pub fn store_upload(py: Python<'_>, src: PathBuf, url: &str) -> PyResult<u64> {
        let loc = at(url)?;
        py.detach(|| loc.upload(&src)).map_err(to_py)
    }

    /// The object at `url`, whole.
    #[pyfunction]
    pub fn store_read<'py>(py: Python<'py>, url: &str) -> PyResult<Bound<'py, PyBytes>> {
        let loc = at(url)?;
        let bytes = py.detach(|| loc.read()).map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Writes `data` as the object at `url`; with `create`, only if there is none
    /// (`OutputExistsError` otherwise): the commit of a job.
    #[pyfunction]
    #[pyo3(signature = (url, data, *, create=false))]
    pub fn store_write(py: Python<'_>, url: &str, data: Vec<u8>, create: bool) -> PyResult<()> {
        let loc = at(url)?;
        py.detach(|| {
            if create {
                loc.create(data)
            } else {
                loc.write(data)
            }
        })
        .map_err(to_py)
    }

    /// The length in bytes of the object at `url`, or `None` if there is none.
    #[pyfunction]
    pub fn store_size(py: Python<'_>, url: &str) -> PyResult<Option<u64>> {
        let loc = at(url)?;
        py.detach(|| loc.size()).map_err(to_py)
    }

    /// The objects below the prefix `url`: (relative path, bytes), in path order.
    #[pyfunction]
    pub fn store_list(py: Python<'_>, url: &str) -> PyResult<Vec<(String, u64)>> {
        let loc = at(url)?;
        py.detach(|| loc.list()).map_err(to_py)
    }

    /// Deletes the object at `url` (nothing if there is none).
    #[pyfunction]
    pub fn store_delete(py: Python<'_>, url: &str) -> PyResult<()> {
        let loc = at(url)?;
        py.detach(|| loc.delete()).map_err(to_py)
    }
}

/// The extension module.
#[pymodule]
fn _brevis(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Archive>()?;
    m.add_function(wrap_pyfunction!(compress_file, m)?)?;
    m.add_function(wrap_pyfunction!(compress_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(decompress_file, m)?)?;
    m.add_function(wrap_pyfunction!(verify_file, m)?)?;
    m.add_function(wrap_pyfunction!(list_file, m)?)?;
    m.add_function(wrap_pyfunction!(folder_entry, m)?)?;
    m.add_function(wrap_pyfunction!(folder_manifest, m)?)?;
    #[cfg(feature = "object-store")]
    for f in [
        wrap_pyfunction!(store::store_download, m)?,
        wrap_pyfunction!(store::store_upload, m)?,
        wrap_pyfunction!(store::store_read, m)?,
        wrap_pyfunction!(store::store_write, m)?,
        wrap_pyfunction!(store::store_size, m)?,
        wrap_pyfunction!(store::store_list, m)?,
        wrap_pyfunction!(store::store_delete, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
