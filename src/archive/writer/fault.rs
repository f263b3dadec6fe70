//! Faults the writer injects for tests of the check `compress` runs on what it wrote.

/// A fault the writer injects for tests of the check `compress` runs on what it wrote
/// (issue 38), named by the environment variable `BREVIS_TEST_FAULT`: `copy-any-width`
/// writes copy records between tensors of different word widths (which the reader
/// refuses), `flip-record=N` flips bits of the last byte of record `N`, `bad-program`
/// makes every synthesized program restore other words (`map xor 1` over it). Unset (the
/// only case outside those tests), the writer behaves as documented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fault {
    CopyAnyWidth,
    FlipRecord(usize),
    BadProgram,
}

pub(super) fn test_fault() -> Option<Fault> {
    static FAULT: std::sync::OnceLock<Option<Fault>> = std::sync::OnceLock::new();
    *FAULT.get_or_init(|| {
        let v = std::env::var("BREVIS_TEST_FAULT").ok()?;
        match v.split_once('=') {
            None if v == "copy-any-width" => Some(Fault::CopyAnyWidth),
            None if v == "bad-program" => Some(Fault::BadProgram),
            Some(("flip-record", n)) => n.parse().ok().map(Fault::FlipRecord),
            _ => None,
        }
    })
}
