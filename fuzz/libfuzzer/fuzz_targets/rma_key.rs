#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nemesis_fuzz::rma_key(data));
