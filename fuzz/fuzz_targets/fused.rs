#![no_main]

// The decoding path against the reference executor (issue 42): the same bytes or the
// same failure on every program that reads, merges of rans8 and packed fields first.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    brevis_fuzz::entries::fused(data);
});
