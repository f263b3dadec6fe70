#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    brevis_fuzz::entries::literal(brevis::codec::CodecId::Rans8, data);
});
