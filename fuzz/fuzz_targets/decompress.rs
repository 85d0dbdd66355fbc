//! Compressed input: bytes through `decompressed` (gzip / zstd / plain by
//! magic) and `CaptureReader`, as `tcpdoctor analyze` reads a file. Whatever
//! the bytes, reading ends with packets, a clean end or an error; never a
//! panic or a hang, and an error in the compressed data says where.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use tcpdoctor_capture::{decompressed, CaptureReader};

fuzz_target!(|data: &[u8]| {
    let total = data.len() as u64;
    let Ok((src, _)) = decompressed(Cursor::new(data.to_vec())) else {
        return;
    };
    let Ok(mut reader) = CaptureReader::new(src) else {
        return;
    };
    // A decompression bomb is bounded by the iteration count here; the
    // binary streams it with bounded memory.
    for _ in 0..100_000 {
        match reader.next_packet() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                let text = e.to_string();
                assert!(!text.is_empty());
                if let Some(at) = text.split("compressed byte").nth(1) {
                    let n: u64 = at
                        .trim_start_matches('s')
                        .trim()
                        .split(|c: char| !c.is_ascii_digit())
                        .next()
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0);
                    assert!(n <= total, "offset {n} beyond the input's {total} bytes");
                }
                break;
            }
        }
    }
});
