//! One frame: first byte picks the link type, the rest is the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_wire::{decode, decode_frame, LinkType};

const LINKS: [u32; 8] = [0, 1, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    // Byte values 0..8 map straight onto LINKS (so seed prefix 1 = Ethernet);
    // anything larger wraps around.
    let link = LinkType::from_raw(LINKS[usize::from(sel) % LINKS.len()]);
    let _ = decode(link, frame);
    // Held to a wire length below, at and above the captured one.
    for wire in [frame.len() / 2, frame.len(), frame.len() + usize::from(sel)] {
        if let Ok(Ok(seg)) = decode_frame(link, frame, wire as u32) {
            assert!(seg.payload.len() <= seg.payload_len as usize);
        }
    }
});
