#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nemesis_fuzz::ft_frame(data));
