//! Response bytes from a server under load, split where the first byte says.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tcpdoctor_load::http::{Fed, Parser};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let mut p = Parser::new(sel & 1 == 1);
    let step = usize::from(sel >> 1).max(1);
    for c in bytes.chunks(step) {
        match p.feed(c) {
            Ok(Fed::Partial) => {}
            Ok(Fed::Done(_)) => p.reset(),
            Err(_) => return,
        }
    }
    let _ = p.finish_at_close();
});
