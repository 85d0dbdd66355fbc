//! One sentence a user can act on: the symptom measured, the mechanism that
//! cost the time, who is responsible and the fix. Used by `diagnose URL`,
//! which measures the symptom itself and then analyses its own traffic.

use tcpdoctor_diagnose::model::{Analysis, Finding};

use crate::fmt_ms;

/// What was measured from the outside, before any packet was read.
#[derive(Debug, Clone, Default)]
pub struct Symptom {
    /// Round trip to the server (TCP handshake), and how it was measured.
    pub rtt_ms: Option<f64>,
    pub rtt_method: &'static str,
    /// Request latency at p50 (and p99) as the user sees it.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Why no request completed, in words (`connection refused by ADDR`).
    pub failure: Option<String>,
}

/// The verdict: `headline` states the symptom, `cause` the mechanism and
/// culprit (when a finding names one), `fix` what to change.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub headline: String,
    pub cause: Option<String>,
    pub fix: Option<String>,
}

impl Verdict {
    /// The verdict as one paragraph.
    pub fn sentence(&self) -> String {
        let mut s = self.headline.clone();
        if let Some(c) = &self.cause {
            s.push_str("; ");
            s.push_str(c);
        }
        if let Some(f) = &self.fix {
            s.push_str(" — fix: ");
            s.push_str(f);
        }
        s
    }
}

/// Builds the verdict from the measured symptom and, when the traffic was
/// captured, its analysis.
pub fn verdict(s: &Symptom, a: Option<&Analysis>) -> Verdict {
    let mut headline = match (s.p50_ms, &s.failure) {
        (Some(p50), _) => format!("requests take {} at p50", fmt_ms(p50)),
        (None, Some(why)) => format!("no request completed: {why}"),
        (None, None) => "no request completed".to_string(),
    };
    if let Some(p99) = s.p99_ms {
        if s.p50_ms.is_some() {
            headline.push_str(&format!(" ({} at p99)", fmt_ms(p99)));
        }
    }
    if let Some(rtt) = s.rtt_ms {
        headline.push_str(&format!(
            " while the round trip is {} ({})",
            fmt_ms(rtt),
            s.rtt_method
        ));
    }
    let Some(a) = a else {
        return Verdict {
            headline,
            cause: None,
            fix: None,
        };
    };
    match a.findings.first() {
        Some(f) if s.p50_ms.is_none() && tcpdoctor_diagnose::rules::failure_name(f.kind) => {
            // The finding says why no request completed: it leads.
            Verdict {
                headline: cause(f, a),
                cause: Some(match &s.failure {
                    Some(why) => headline.replacen(&format!(": {why}"), "", 1),
                    None => headline,
                }),
                fix: Some(f.fix.clone()),
            }
        }
        Some(f) => Verdict {
            headline,
            cause: Some(cause(f, a)),
            fix: Some(f.fix.clone()),
        },
        None => {
            let budget = a.capture.latency_budget.as_ref().map(|b| {
                let mut parts: Vec<(&str, f64)> = b.median.parts_ms.iter().collect();
                parts.sort_by(|x, y| y.1.total_cmp(&x.1));
                let parts: Vec<String> = parts
                    .iter()
                    .take(3)
                    .filter(|(_, v)| *v > 0.0)
                    .map(|(n, v)| format!("{} {n}", fmt_ms(*v)))
                    .collect();
                format!(
                    "; the median exchange ({}) is {}",
                    fmt_ms(b.median.total_ms),
                    parts.join(" + ")
                )
            });
            Verdict {
                headline,
                cause: Some(format!(
                    "no TCP mechanism costs more than 1% of the time{}",
                    budget.unwrap_or_default()
                )),
                fix: None,
            }
        }
    }
}

fn cause(f: &Finding, a: &Analysis) -> String {
    let ep = &f.culprit.endpoint;
    let role = f.culprit.role;
    let typ = fmt_ms(f.typical_delay_ms);
    let share = f.share_of_time * 100.0;
    let of_exchanges = if a.capture.exchanges > 0 {
        let pct = (f.occurrences as f64 / a.capture.exchanges as f64 * 100.0).min(100.0);
        format!("{pct:.0}% of exchanges")
    } else {
        format!("{} exchanges", f.occurrences)
    };
    let what = match f.kind {
        "nagle_delayed_ack" => format!(
            "{of_exchanges} wait ~{typ} for a delayed ACK because {ep} ({role}) sends each {} in two \
             segments with Nagle on",
            if role == "server" {
                "response"
            } else {
                "request"
            }
        ),
        "receive_window_limited"
            if f.details.get("cause").and_then(|c| c.as_str()) == Some("slow_reader") =>
        {
            format!(
                "{ep} ({role}) reads slowly: its receive window fills and reopens only every ~{} \
                 (far beyond the round trip), as its application reads",
                fmt_ms(f.details.get("reopen_interval_ms").and_then(|v| v.as_f64()).unwrap_or(0.0))
            )
        }
        "receive_window_limited" => {
            let window = f
                .details
                .get("window_bytes")
                .and_then(|w| w.as_f64())
                .map(|w| format!(" of ~{:.0} KB", w / 1e3))
                .unwrap_or_default();
            format!(
                "{ep} ({role}) advertises a receive window{window}: bytes in flight are pinned at it, \
                 so each round trip moves one window"
            )
        }
        "zero_window" => format!(
            "{ep} ({role}) stops reading: its receive window falls to zero and the sender waits ~{typ} each time"
        ),
        "retransmission_timeout" => format!(
            "packets are lost on the path and recovered only by the retransmission timer (~{typ} each)"
        ),
        "packet_loss" => format!(
            "packets are lost on the path and recovered by fast retransmit (~{typ} each)"
        ),
        "syn_retransmit" => {
            format!("connection setup waits ~{typ} for a SYN or SYN-ACK retry")
        }
        "server_delay" if f.details.get("where").and_then(|w| w.as_str()) == Some("inside_response") => {
            format!(
                "{ep} ({role}) sends the start of each response (the headers) at once and the rest ~{typ} \
                 later, with nothing left to acknowledge (application time inside the response)"
            )
        }
        "server_delay" => format!(
            "{ep} ({role}) takes ~{typ} to start each response after the request has arrived (application time)"
        ),
        "client_delay" => {
            format!("the client {ep} waits ~{typ} before sending what it controls")
        }
        "network_latency" if f.details.get("cause").and_then(|c| c.as_str()) == Some("new_connections") => {
            format!(
                "most requests open a connection of their own and wait for two round trips (the handshake's \
                 and their own), ~{typ} per connection"
            )
        }
        "network_latency" => format!("the round trip itself is ~{typ} of each exchange"),
        "congestion_limited" => {
            format!("transfers wait on the sender's congestion window (~{typ} per exchange)")
        }
        "slow_start_after_idle" => format!(
            "{ep} ({role}) restarts from its initial window after each idle spell \
             (tcp_slow_start_after_idle), so each response after a pause pays extra round trips (~{typ} each)"
        ),
        "listen_queue_overflow" => format!(
            "{ep} ({role}) accepts connections too slowly: its listen backlog overflows, SYNs and \
             handshake ACKs are dropped and connections wait ~{typ} to be taken"
        ),
        "tls_handshake" => match f.details.get("cause").and_then(|c| c.as_str()) {
            Some("key_exchange") => format!(
                "{ep} ({role}) takes ~{typ} per TLS handshake, most of it its own key exchange \
                 (the certificate key's signature)"
            ),
            Some("client") => format!(
                "each TLS handshake takes ~{typ}, most of it the client's own processing between flights"
            ),
            _ => format!("each new connection pays a TLS handshake of ~{typ}, mostly round trips"),
        },
        "syn_flood" => format!(
            "a SYN flood hits {ep}: handshakes that never complete, from forged or scripted sources; \
             legitimate clients whose SYNs were dropped with it wait ~{typ} each"
        ),
        "connection_refused" => {
            let n = f.details.get("requests_lost").and_then(|v| v.as_u64()).unwrap_or(0);
            return format!(
                "connection refused by {ep}: {n} connection attempt(s) answered by an RST — nothing \
                 accepts connections on that port, or a firewall rejects them ({})",
                f.kind
            );
        }
        "connection_reset" => {
            let n = f.details.get("requests_lost").and_then(|v| v.as_u64()).unwrap_or(0);
            let who = if role == "network" {
                format!("by a device on the path in the name of {ep} (its RST's TTL differs from the server's)")
            } else {
                format!("by {ep} ({role})")
            };
            return format!(
                "connections reset {who}: {n} request(s) got no response ({})",
                f.kind
            );
        }
        "path_mtu_blackhole" => format!(
            "full-size packets from {ep} vanish on the path (an MTU black hole: ICMP 'fragmentation \
             needed' filtered) and the data waits ~{typ} for the sender to retry with smaller segments"
        ),
        other => format!("{other} at {ep} ({role}), ~{typ} each"),
    };
    format!("{what}; that is {share:.0}% of the time ({})", f.kind)
}
