//! Reads the input as a pcap and as a pcapng capture (`gyro decode`'s
//! capture reader: link layers, IP, TCP reassembly into Diameter
//! messages) and renders every message and flow error found. Nothing may
//! panic.
#![no_main]

#[path = "gyro_decode.rs"]
mod decode;

use decode::capture::{self, Format};
use decode::tcp::Event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = capture::detect(data);
    for format in [Format::Pcap, Format::PcapNg] {
        let report = capture::read(data, format);
        for e in report.events {
            match e {
                Event::Message { seen, bytes, .. } => decode::show(&bytes, Some(seen)),
                Event::Error { seen, message } => {
                    let mut text = String::new();
                    decode::render::flow_error(&mut text, &seen, &message);
                    let _ = decode::json::flow_error(&seen, &message);
                }
                Event::Note { .. } => {}
            }
        }
    }
});
