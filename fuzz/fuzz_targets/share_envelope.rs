#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::share_envelope(data));
