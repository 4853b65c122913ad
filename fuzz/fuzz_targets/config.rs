//! Parses the input as gyro's server configuration file (TOML:
//! `Config::from_toml_str`, which also validates it) and, when it is
//! taken, asks what the server asks of it. Nothing may panic: a bad file
//! is an error naming the problem.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = gyro_server::Config::from_toml_str(text) {
        config.check().expect("a configuration taken is valid");
        let _ = config.worker_count();
    }
});
