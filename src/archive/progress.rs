//! Progress of long operations, reported in file order.

/// Progress of a long operation, reported in file order from the calling thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressEvent<'a> {
    /// Work starts: `items` regions holding `bytes` bytes of the original file.
    Begin {
        /// Number of regions (header, tensors, gaps).
        items: usize,
        /// Original bytes in all regions.
        bytes: u64,
    },
    /// One region is done.
    Item {
        /// Its label (a tensor name, `(header)` or `(gap)`); may hold control characters.
        label: &'a str,
        /// Its original bytes.
        bytes: u64,
    },
    /// All regions are done.
    End,
}

/// A progress callback that ignores every event.
pub fn no_progress(_: ProgressEvent<'_>) {}
