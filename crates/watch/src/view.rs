//! The live view: one [`Interval`] as a few lines of text.

use std::fmt::Write;

use tcpdoctor_report::fmt_ms;

use crate::Interval;

/// Findings listed in the live view (the JSON lines have all of them).
const SHOWN_FINDINGS: usize = 8;

/// Renders an interval for people. `source` names what is watched
/// (`eth0, port 8080`).
pub fn render(iv: &Interval, source: &str) -> String {
    let mut s = String::new();
    let drops = if iv.kernel_drops_total == 0 {
        "no kernel drops".to_string()
    } else {
        format!(
            "KERNEL DROPPED {} frames ({} in this interval): findings may miss what fell in the holes",
            iv.kernel_drops_total, iv.kernel_drops
        )
    };
    let _ = writeln!(
        s,
        "tcpdoctor watch on {source}: {:.0} s, {} packets/s, {} open connections, {drops}",
        iv.t_s, iv.packets_per_sec, iv.open_connections
    );
    match &iv.exchange_latency_ms {
        Some(l) => {
            let _ = writeln!(
                s,
                "  exchanges in the last interval: {}   p50 {}   p90 {}   p99 {}   max {}",
                iv.exchanges,
                fmt_ms(l.p50),
                fmt_ms(l.p90),
                fmt_ms(l.p99),
                fmt_ms(l.max)
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  no request/response exchange completed in the last interval"
            );
        }
    }
    if iv.findings.is_empty() {
        let _ = writeln!(s, "  no finding so far");
    } else {
        let _ = writeln!(s, "  findings so far (time lost, largest first):");
        for f in iv.findings.iter().take(SHOWN_FINDINGS) {
            let _ = writeln!(
                s,
                "    {:<24} {:<7} {:<22} {:>6} times in {} connection{}, typically {}, {} lost",
                f.kind,
                f.culprit.role,
                f.culprit.endpoint,
                f.occurrences,
                f.connections,
                if f.connections == 1 { "" } else { "s" },
                fmt_ms(f.typical_delay_ms),
                fmt_ms(f.total_delay_ms)
            );
        }
        if iv.findings.len() > SHOWN_FINDINGS {
            let _ = writeln!(s, "    … and {} more", iv.findings.len() - SHOWN_FINDINGS);
        }
    }
    if !iv.top_servers.is_empty() {
        let _ = writeln!(s, "  busiest servers in the last interval:");
        for t in &iv.top_servers {
            let _ = writeln!(
                s,
                "    {:<40} {:>7} exchanges   mean {}   max {}",
                t.server,
                t.exchanges,
                fmt_ms(t.mean_ms),
                fmt_ms(t.max_ms)
            );
        }
    }
    s
}
