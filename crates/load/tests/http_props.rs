//! Properties of the response parser: any bytes are refused or accepted
//! without a panic, and a well-formed response is parsed the same however
//! the network splits it.

use proptest::prelude::*;
use tcpdoctor_load::http::{Fed, Parser};

/// A response with a Content-Length or chunked body, and how it should parse.
fn response() -> impl Strategy<Value = (Vec<u8>, u16, bool)> {
    (
        prop_oneof![Just(200u16), Just(204), Just(404), Just(500), 100u16..599],
        proptest::collection::vec(any::<u8>(), 0..3000),
        any::<bool>(),
        proptest::collection::vec(1usize..700, 1..6),
        any::<bool>(),
    )
        .prop_filter("1xx, 204 and 304 carry no body", |(s, body, ..)| {
            body.is_empty() || !(*s < 200 || *s == 204 || *s == 304)
        })
        .prop_filter("1xx is interim", |(s, ..)| *s >= 200)
        .prop_map(|(status, body, chunked, chunk_sizes, close)| {
            // 204 and 304 have no body at all: not even a chunked one's last chunk.
            let chunked = chunked && status != 204 && status != 304;
            let mut r = format!("HTTP/1.1 {status} X\r\nServer: t\r\n").into_bytes();
            if close {
                r.extend_from_slice(b"Connection: close\r\n");
            }
            if chunked {
                r.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                let mut rest = &body[..];
                let mut sizes = chunk_sizes.iter().cycle();
                while !rest.is_empty() {
                    let n = (*sizes.next().unwrap_or(&1)).min(rest.len());
                    r.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                    r.extend_from_slice(&rest[..n]);
                    r.extend_from_slice(b"\r\n");
                    rest = &rest[n..];
                }
                r.extend_from_slice(b"0\r\n\r\n");
            } else {
                r.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                r.extend_from_slice(&body);
            }
            (r, status, !close)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..300), 0..8), head in any::<bool>()) {
        let mut p = Parser::new(head);
        for c in &chunks {
            match p.feed(c) {
                Ok(Fed::Partial) => {}
                Ok(Fed::Done(_)) => p.reset(),
                Err(_) => break,
            }
        }
        let _ = p.finish_at_close();
    }

    #[test]
    fn a_response_parses_the_same_however_it_is_split(
        (bytes, status, keep_alive) in response(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.push(0);
        at.push(bytes.len());
        at.sort_unstable();
        at.dedup();
        let mut p = Parser::new(false);
        let mut done = None;
        for w in at.windows(2) {
            prop_assert!(done.is_none(), "bytes after the response was complete");
            match p.feed(&bytes[w[0]..w[1]]) {
                Ok(Fed::Partial) => {}
                Ok(Fed::Done(r)) => done = Some(r),
                Err(e) => prop_assert!(false, "refused a valid response: {e}"),
            }
        }
        let r = done.expect("complete response");
        prop_assert_eq!(r.status, status);
        prop_assert_eq!(r.keep_alive, keep_alive);
    }

    #[test]
    fn a_mutated_response_never_panics(
        (mut bytes, _, _) in response(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        for (i, b) in flips {
            let n = bytes.len();
            bytes[i.index(n)] = b;
        }
        let mut p = Parser::new(false);
        for c in bytes.chunks(97) {
            match p.feed(c) {
                Ok(Fed::Partial) => {}
                Ok(Fed::Done(_)) => p.reset(),
                Err(_) => break,
            }
        }
    }
}
