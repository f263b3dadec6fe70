#![no_main]

// rans8's SIMD decoder against its scalar one (issue 42): the same words or the same
// failure on every body.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    brevis_fuzz::entries::rans8_simd(data);
});
