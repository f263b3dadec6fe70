//! Object storage (feature `object-store`; docs/design.md §11): `s3://bucket/key` URLs
//! through the `object_store` crate, and archives read from them by ranged reads.
//!
//! The store is configured from the environment as the AWS tools are: credentials from
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), the region
//! from `AWS_REGION` or `AWS_DEFAULT_REGION`, the endpoint of an S3-compatible server from
//! `AWS_ENDPOINT_URL` (path-style requests), plain HTTP allowed by `AWS_ALLOW_HTTP=true`.
//!
//! [`Archive::open_url`] reads one archive without downloading it: the trailer (the last
//! 32 bytes, which also gives the object's length), the file header and the index, then
//! the header record and the first [`HEAD_BYTES`] bytes of every other record (kind,
//! checksum, the program's root tag; adjacent heads are fetched in one request). A
//! tensor's record is fetched when the tensor is decoded (a copy record's program is the
//! record it names, so that one is fetched), and kept while the archive is open.
//! [`Archive::bytes_read`] counts the bytes fetched.
//!
//! Every call blocks: it runs on a small Tokio runtime of this module's own, so callers
//! need no async runtime (and must not call from inside one).

use super::format;
use super::reader::{Archive, RangedBytes};
use crate::error::{Error, Result};
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as StorePath;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    WriteMultipart,
};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Bytes of each record fetched when a remote archive is opened: the record's kind and
/// fields and the first bytes of its program (all that opening reads of it).
pub const HEAD_BYTES: usize = 64;

/// Heads of records less than this many bytes apart are fetched in one request.
const COALESCE_BYTES: usize = 4096;

/// Objects larger than this are uploaded in parts of this size (bytes).
const PART_BYTES: usize = 16 << 20;

/// Whether `s` names an object-store location (`s3://...`) rather than a local path.
pub fn is_url(s: &str) -> bool {
    s.starts_with("s3://")
}

fn runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("brevis-store")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| io::Error::other(format!("cannot start the I/O runtime: {e}")))
}

/// An object's store and key, from its URL.
#[derive(Clone, Debug)]
pub struct Location {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: StorePath,
}

fn url_error(url: &str, what: &'static str, e: impl std::fmt::Display) -> Error {
    Error::io(Path::new(url), what, io::Error::other(e.to_string()))
}

fn store_error(url: &str, what: &'static str, e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::io(
            Path::new(url),
            what,
            io::Error::new(io::ErrorKind::NotFound, "no such object"),
        ),
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            Error::OutputExists {
                path: PathBuf::from(url),
            }
        }
        e => url_error(url, what, e),
    }
}

/// Refuses an `http://` endpoint unless plain HTTP is allowed, saying which variable
/// allows it: the store itself fails only at the first request, with "HTTP error:
/// builder error", which names neither.
fn refuse_plain_http(url: &str, builder: &AmazonS3Builder) -> Result<()> {
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::ClientConfigKey;
    let Some(endpoint) = builder.get_config_value(&AmazonS3ConfigKey::Endpoint) else {
        return Ok(());
    };
    if !endpoint.to_ascii_lowercase().starts_with("http://") {
        return Ok(());
    }
    let allowed = builder
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes" | "y"
            )
        });
    if allowed {
        return Ok(());
    }
    Err(url_error(
        url,
        "cannot open",
        format!(
            "the endpoint {endpoint} (AWS_ENDPOINT_URL) is plain HTTP, which is refused \
             unless AWS_ALLOW_HTTP=true is set: export AWS_ALLOW_HTTP=true (for a local \
             server such as MinIO or moto), or use an https:// endpoint"
        ),
    ))
}

impl Location {
    /// Parses `url` (`s3://bucket/key`); the store is configured from the environment
    /// (see the module doc).
    ///
    /// # Errors
    /// [`Error::Io`] naming the URL if it is not an `s3://` URL with a bucket, the
    /// store cannot be configured, or its endpoint is `http://` without
    /// `AWS_ALLOW_HTTP=true`.
    pub fn parse(url: &str) -> Result<Location> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| url_error(url, "cannot open", "not an s3:// URL"))?;
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(url_error(url, "cannot open", "the URL names no bucket"));
        }
        let builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        refuse_plain_http(url, &builder)?;
        let store = builder
            .build()
            .map_err(|e| url_error(url, "cannot open", e))?;
        let key = StorePath::parse(key.trim_end_matches('/'))
            .map_err(|e| url_error(url, "cannot open", e))?;
        Ok(Location {
            url: url.to_string(),
            store: Arc::new(store),
            key,
        })
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The location `rel` (a `/`-separated relative path) below this one.
    pub fn join(&self, rel: &str) -> Result<Location> {
        let url = format!("{}/{rel}", self.url.trim_end_matches('/'));
        let key = StorePath::parse(format!("{}/{rel}", self.key.as_ref()).trim_start_matches('/'))
            .map_err(|e| url_error(&url, "cannot open", e))?;
        Ok(Location {
            url,
            store: self.store.clone(),
            key,
        })
    }

    fn block<T>(
        &self,
        what: &'static str,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T> {
        let rt = runtime().map_err(|e| Error::io(Path::new(&self.url), what, e))?;
        rt.block_on(f).map_err(|e| store_error(&self.url, what, e))
    }

    /// The object's length in bytes, or `None` if there is none.
    ///
    /// # Errors
    /// [`Error::Io`] if the store cannot be asked.
    pub fn size(&self) -> Result<Option<u64>> {
        match self.block("cannot read", self.store.head(&self.key)) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The whole object.
    ///
    /// # Errors
    /// [`Error::Io`] if it does not exist or cannot be read.
    pub fn read(&self) -> Result<Vec<u8>> {
        let bytes = self.block("cannot read", async {
            self.store.get(&self.key).await?.bytes().await
        })?;
        Ok(bytes.to_vec())
    }

    /// The bytes in `range` of the object.
    ///
    /// # Errors
    /// [`Error::Io`] if they cannot be read.
    pub fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        Ok(self
            .block("cannot read", self.store.get_range(&self.key, range))?
            .to_vec())
    }

    /// The last `n` bytes of the object, and its length.
    fn read_suffix(&self, n: u64) -> Result<(Vec<u8>, u64)> {
        let opts = GetOptions {
            range: Some(GetRange::Suffix(n)),
            ..GetOptions::default()
        };
        let (bytes, size) = self.block("cannot read", async {
            let got = self.store.get_opts(&self.key, opts).await?;
            let size = got.meta.size;
            Ok((got.bytes().await?, size))
        })?;
        Ok((bytes.to_vec(), size))
    }

    /// Writes `bytes` as the object, replacing it if it exists.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be written.
    pub fn write(&self, bytes: Vec<u8>) -> Result<()> {
        self.block(
            "cannot write",
            self.store.put(&self.key, PutPayload::from(bytes)),
        )?;
        Ok(())
    }

    /// Writes `bytes` as the object only if there is none: the commit of a job.
    ///
    /// # Errors
    /// [`Error::OutputExists`] naming the URL if the object exists; [`Error::Io`] if it
    /// cannot be written.
    pub fn create(&self, bytes: Vec<u8>) -> Result<()> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        self.block(
            "cannot create",
            self.store
                .put_opts(&self.key, PutPayload::from(bytes), opts),
        )?;
        Ok(())
    }

    /// Uploads the local file `src` as the object (in parts when large). Returns its
    /// length in bytes.
    ///
    /// # Errors
    /// [`Error::Io`] naming `src` if it cannot be read, or the URL if it cannot be written.
    pub fn upload(&self, src: &Path) -> Result<u64> {
        use std::io::Read;
        let len = std::fs::metadata(src)
            .map_err(|e| Error::io(src, "cannot read", e))?
            .len();
        if len <= PART_BYTES as u64 {
            let bytes = std::fs::read(src).map_err(|e| Error::io(src, "cannot read", e))?;
            self.write(bytes)?;
            return Ok(len);
        }
        let mut file = std::fs::File::open(src).map_err(|e| Error::io(src, "cannot open", e))?;
        let url = self.url.clone();
        let rt = runtime().map_err(|e| Error::io(Path::new(&url), "cannot write", e))?;
        // Inside the runtime: the parts are uploaded by tasks it runs, at most a few in
        // flight (`wait_for_capacity`), so memory stays a few parts.
        rt.block_on(async {
            let upload = self
                .store
                .put_multipart(&self.key)
                .await
                .map_err(|e| store_error(&url, "cannot write", e))?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            let mut buf = vec![0u8; PART_BYTES];
            loop {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| Error::io(src, "cannot read", e))?;
                if n == 0 {
                    break;
                }
                writer
                    .wait_for_capacity(4)
                    .await
                    .map_err(|e| store_error(&url, "cannot write", e))?;
                writer.write(&buf[..n]);
            }
            writer
                .finish()
                .await
                .map_err(|e| store_error(&url, "cannot write", e))?;
            Ok::<(), Error>(())
        })?;
        Ok(len)
    }

    /// Downloads the object into the local file `dst` (replacing it). Returns its
    /// length in bytes.
    ///
    /// # Errors
    /// [`Error::Io`] naming the URL if it cannot be read, or `dst` if it cannot be written.
    pub fn download(&self, dst: &Path) -> Result<u64> {
        use std::io::Write;
        let mut file =
            std::fs::File::create(dst).map_err(|e| Error::io(dst, "cannot create", e))?;
        let url = self.url.clone();
        let rt = runtime().map_err(|e| Error::io(Path::new(&url), "cannot read", e))?;
        let mut len = 0u64;
        rt.block_on(async {
            let got = self
                .store
                .get(&self.key)
                .await
                .map_err(|e| store_error(&url, "cannot read", e))?;
            let mut stream = got.into_stream();
            while let Some(chunk) = stream
                .try_next()
                .await
                .map_err(|e| store_error(&url, "cannot read", e))?
            {
                file.write_all(&chunk)
                    .map_err(|e| Error::io(dst, "cannot write", e))?;
                len += chunk.len() as u64;
            }
            Ok::<(), Error>(())
        })?;
        file.sync_all()
            .map_err(|e| Error::io(dst, "cannot write", e))?;
        Ok(len)
    }

    /// The objects below this location (as a folder): each one's path relative to it
    /// (`/`-separated) and length in bytes, in path order.
    ///
    /// # Errors
    /// [`Error::Io`] if the store cannot be listed.
    pub fn list(&self) -> Result<Vec<(String, u64)>> {
        let prefix = (!self.key.as_ref().is_empty()).then_some(&self.key);
        let metas: Vec<object_store::ObjectMeta> = self.block(
            "cannot list",
            self.store.list(prefix).try_collect::<Vec<_>>(),
        )?;
        let base = self.key.as_ref();
        let mut out: Vec<(String, u64)> = metas
            .into_iter()
            .filter_map(|m| {
                let k = m.location.as_ref();
                let rel = if base.is_empty() {
                    Some(k)
                } else {
                    k.strip_prefix(base).and_then(|r| r.strip_prefix('/'))
                };
                rel.map(|r| (r.to_string(), m.size))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Deletes the object (nothing if there is none).
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be deleted.
    pub fn delete(&self) -> Result<()> {
        match self.block("cannot delete", self.store.delete(&self.key)) {
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}

/// The bytes of a remote archive ([`Archive::open_url`]): a sparse image of the object
/// (an anonymous mapping of its length, zero wherever nothing was fetched) holding what
/// opening read, and each record's bytes once fetched.
pub(crate) struct Ranged {
    location: Location,
    image: memmap2::MmapMut,
    records: Vec<Range<usize>>,
    fetched: Vec<OnceLock<Vec<u8>>>,
    bytes_read: AtomicU64,
}

impl Ranged {
    /// Reads the structure of the archive at `location`: trailer, file header, index,
    /// header record and every record's head. Returns it and the object's length.
    pub(crate) fn open(location: Location) -> Result<Opened> {
        let url = location.url.clone();
        let damaged = |what: String| {
            Error::archive(
                Path::new(&url),
                crate::error::ArchiveError::Corrupt { what },
            )
        };
        let min = (format::FILE_HEADER_LEN + format::TRAILER_LEN) as u64;
        let (trailer, len) = location.read_suffix(format::TRAILER_LEN as u64)?;
        let mut read = trailer.len() as u64;
        if len < min || trailer.len() != format::TRAILER_LEN {
            // Too short for an archive: read it all, and let the parser say what it is.
            return Ok(Opened::Whole(location.read()?));
        }
        let size = usize::try_from(len).map_err(|_| damaged(format!("{len} bytes")))?;
        let mut image = memmap2::MmapMut::map_anon(size)
            .map_err(|e| Error::io(Path::new(&url), "cannot map", e))?;
        image[size - format::TRAILER_LEN..].copy_from_slice(&trailer);
        let word = |k: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&trailer[8 * k..8 * k + 8]);
            u64::from_le_bytes(b)
        };
        let (index_offset, index_len) = (word(0), word(1));
        let index_end = len - format::TRAILER_LEN as u64;
        let sound = index_offset >= format::FILE_HEADER_LEN as u64
            && index_offset.checked_add(index_len) == Some(index_end);
        let mut records = Vec::new();
        if sound {
            let got = location
                .block(
                    "cannot read",
                    location.store.get_ranges(
                        &location.key,
                        &[0..format::FILE_HEADER_LEN as u64, index_offset..index_end],
                    ),
                )?
                .into_iter()
                .map(|b| b.to_vec())
                .collect::<Vec<_>>();
            let (head, index) = (&got[0], &got[1]);
            read += (head.len() + index.len()) as u64;
            image[..head.len()].copy_from_slice(head);
            let at = index_offset as usize;
            image[at..at + index.len()].copy_from_slice(index);
            let version = u16::from_le_bytes([head[8], head[9]]);
            // Version 2 and later: the record lengths from the index; record heads and
            // the whole header record. Anything else (version 1, a damaged index) is
            // read whole, and the parser says what is wrong.
            let lens = match version {
                4.. => format::read_index_v4(index).ok().map(|i| i.record_lens),
                2 | 3 => format::read_index_v2(index, version)
                    .ok()
                    .map(|i| i.record_lens),
                _ => None,
            };
            let mut wanted: Vec<Range<u64>> = Vec::new();
            match lens {
                Some(lens) => {
                    let mut start = format::FILE_HEADER_LEN as u64;
                    for (i, l) in lens.iter().enumerate() {
                        let end = start.saturating_add(*l).min(index_offset);
                        records.push(start as usize..end as usize);
                        let head = if i == 0 {
                            end
                        } else {
                            end.min(start + HEAD_BYTES as u64)
                        };
                        if head > start {
                            wanted.push(start..head);
                        }
                        start = end;
                    }
                }
                None => wanted.push(format::FILE_HEADER_LEN as u64..index_offset),
            }
            let wanted = coalesce(wanted);
            let parts = location.block(
                "cannot read",
                location.store.get_ranges(&location.key, &wanted),
            )?;
            for (r, b) in wanted.iter().zip(parts) {
                let at = r.start as usize;
                image[at..at + b.len()].copy_from_slice(&b);
                read += b.len() as u64;
            }
            // A regions record's table of regions (format 4) may run past its first
            // bytes: the rest of it too.
            let more: Vec<Range<u64>> = records
                .iter()
                .skip(1)
                .filter_map(|r| {
                    let have = r.end.min(r.start + HEAD_BYTES);
                    let bound = format::head_bound_v4(&image[r.start..have])?;
                    let need = (r.start as u64 + bound).min(r.end as u64);
                    (need > have as u64).then_some(have as u64..need)
                })
                .collect();
            if !more.is_empty() {
                let more = coalesce(more);
                let parts = location.block(
                    "cannot read",
                    location.store.get_ranges(&location.key, &more),
                )?;
                for (r, b) in more.iter().zip(parts) {
                    let at = r.start as usize;
                    image[at..at + b.len()].copy_from_slice(&b);
                    read += b.len() as u64;
                }
            }
        }
        let fetched = records.iter().map(|_| OnceLock::new()).collect();
        Ok(Opened::Ranged(Ranged {
            location,
            image,
            records,
            fetched,
            bytes_read: AtomicU64::new(read),
        }))
    }

    /// The sparse image (what opening read; zeros elsewhere).
    pub(crate) fn image(&self) -> &[u8] {
        &self.image
    }

    /// The URL.
    pub(crate) fn url(&self) -> &str {
        &self.location.url
    }

    /// Bytes fetched from the store so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    /// The archive bytes in `range`: inside one record, that record's bytes (fetched
    /// once and kept); elsewhere, fetched now.
    pub(crate) fn get(&self, range: &Range<usize>) -> Result<std::borrow::Cow<'_, [u8]>> {
        use std::borrow::Cow;
        if range.is_empty() {
            return Ok(Cow::Borrowed(&[]));
        }
        let i = self.records.partition_point(|r| r.end <= range.start);
        if let Some(rec) = self
            .records
            .get(i)
            .filter(|r| r.start <= range.start && range.end <= r.end)
        {
            let cell = &self.fetched[i];
            if cell.get().is_none() {
                let bytes = self.location.read_range(rec.start as u64..rec.end as u64)?;
                self.bytes_read
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                let _ = cell.set(bytes);
            }
            let at = range.start - rec.start..range.end - rec.start;
            return match cell.get().and_then(|b| b.get(at)) {
                Some(b) => Ok(Cow::Borrowed(b)),
                None => Err(url_error(
                    self.url(),
                    "cannot read",
                    format!("record at byte {} came back short", rec.start),
                )),
            };
        }
        let bytes = self
            .location
            .read_range(range.start as u64..range.end as u64)?;
        self.bytes_read
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(Cow::Owned(bytes))
    }
}

/// What [`Ranged::open`] read: an archive's structure, or a whole object too short to
/// be an archive.
pub(crate) enum Opened {
    Ranged(Ranged),
    Whole(Vec<u8>),
}

/// `ranges` (in order) with those less than [`COALESCE_BYTES`] apart merged.
fn coalesce(ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end + COALESCE_BYTES as u64 => {
                last.end = last.end.max(r.end)
            }
            _ => out.push(r),
        }
    }
    out
}

impl RangedBytes for Ranged {
    fn image(&self) -> &[u8] {
        Ranged::image(self)
    }
    fn url(&self) -> &str {
        Ranged::url(self)
    }
    fn bytes_read(&self) -> u64 {
        Ranged::bytes_read(self)
    }
    fn get(&self, range: &Range<usize>) -> Result<std::borrow::Cow<'_, [u8]>> {
        Ranged::get(self, range)
    }
}

impl Archive {
    /// Opens the archive at `url` (`s3://bucket/key`) by ranged reads, without
    /// downloading it (see the module doc); tensors are fetched as they are decoded.
    ///
    /// # Errors
    /// [`Error::Io`] naming the URL if it cannot be read; [`Error::Archive`] as
    /// [`Archive::open`].
    pub fn open_url(url: &str) -> Result<Archive> {
        match Ranged::open(Location::parse(url)?)? {
            Opened::Ranged(r) => Archive::from_ranged(Box::new(r)),
            Opened::Whole(bytes) => Archive::from_bytes(bytes, url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_close_together_are_fetched_together() {
        assert_eq!(
            coalesce(vec![0..10, 100..164, 10_000..10_064, 10_100..10_200]),
            vec![0..164, 10_000..10_200]
        );
        assert!(coalesce(Vec::new()).is_empty());
    }

    #[test]
    fn urls_are_checked() {
        assert!(is_url("s3://b/k"));
        assert!(!is_url("/tmp/x.brv"));
        let e = Location::parse("s3:///key").unwrap_err().to_string();
        assert!(e.contains("s3:///key") && e.contains("no bucket"), "{e}");
        assert!(Location::parse("gs://b/k").is_err());
    }
}
