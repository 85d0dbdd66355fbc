//! Where the time goes: runs one stage of the pipeline over a capture, single-threaded.
//!
//! `cargo run --release --example stages -- read|decode|track|full FILE`
//! - read:   the capture reader alone
//! - decode: plus `tcpdoctor_wire::decode`
//! - track:  plus connection tracking with an analyzer that does nothing
//! - full:   the whole engine (tracking and diagnosis), no rendering

use tcpdoctor_capture::CaptureReader;
use tcpdoctor_flow::{Analyzer, Connection, Exchange, Segment, Tracker};

struct Null(u64);

impl Analyzer for Null {
    type Conn = ();
    fn segment(&mut self, _: &Connection, _: &mut (), s: &Segment<'_>) {
        self.0 += u64::from(s.len);
    }
    fn exchange(&mut self, _: &Connection, _: &mut (), _: &Exchange) {}
    fn close(&mut self, _: &Connection, _: &mut ()) {
        self.0 += 1;
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(stage), Some(path)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: stages read|decode|track|full FILE");
    };
    let mut r = CaptureReader::new(std::fs::File::open(path)?)?;
    let (mut n, mut x) = (0u64, 0u64);
    let mut engine = tcpdoctor_engine::Engine::new(Default::default());
    let mut tracker = Tracker::new(Null(0), Default::default());
    while let Some(p) = r.next_packet()? {
        n += 1;
        match stage.as_str() {
            "read" => x += p.data.len() as u64,
            "decode" => {
                if let Ok(Ok(s)) = tcpdoctor_wire::decode(p.link, p.data) {
                    x += u64::from(s.seq);
                }
            }
            "track" => {
                if let Ok(Ok(s)) = tcpdoctor_wire::decode(p.link, p.data) {
                    tracker.push(n, p.ts, &s);
                }
            }
            _ => engine.push(p.ts, p.link, p.data, p.orig_len),
        }
    }
    match stage.as_str() {
        "full" => x += engine.finish().capture.packets,
        "track" => x += tracker.finish().0,
        _ => {}
    }
    println!("{n} packets ({x})");
    Ok(())
}
