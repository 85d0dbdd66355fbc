//! Filter text through the parser; what parses is printed, parsed again
//! (the canonical text must give the same filter), compiled for every link
//! type, and run on the rest of the input as a frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_filter::{Filter, LinkType};

const LINKS: [u32; 8] = [0, 1, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    // The text ends at the first NUL; what follows is a frame.
    let (text, frame) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(filter) = Filter::parse(text) else {
        return;
    };
    let again = Filter::parse(&filter.to_string()).expect("canonical text parses");
    assert_eq!(again, filter);
    for raw in LINKS {
        let link = LinkType::from_raw(raw);
        let _ = filter.compile(link);
        let _ = filter.matches(link, frame);
    }
});
