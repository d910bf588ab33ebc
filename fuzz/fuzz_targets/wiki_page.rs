#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::wiki_page(data));
