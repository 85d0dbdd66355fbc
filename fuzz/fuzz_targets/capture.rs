//! Whole pipeline: bytes as a pcap/pcapng file -> CaptureReader -> Engine.
//! Mirrors `analyze` in crates/tcpdoctor/src/main.rs (minus the report).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_capture::CaptureReader;
use tcpdoctor_engine::Engine;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::new(data) else {
        return;
    };
    let _ = reader.format();
    let _ = reader.link_type();
    let mut engine = Engine::new(Default::default());
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => engine.push(p.ts, p.link, p.data, p.orig_len),
            Ok(None) => break,
            Err(e) => {
                // The binary keeps the analysis up to the error and warns.
                engine.warn(format!("{e}"));
                break;
            }
        }
    }
    let _ = engine.finish();
});
