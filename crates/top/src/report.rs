//! The JSON documents: one per interval, and the final report (schema 1,
//! shaped like `analyze`'s: `connections`, `findings` with `kind`,
//! `culprit`, evidence, explanation and fix).

use serde_json::{json, Value};

use crate::tracker::{Conn, Final, Interval, Role, Stats};

fn ms(us: Option<u32>) -> Value {
    us.map_or(Value::Null, |u| json!(f64::from(u) / 1000.0))
}

pub fn anomalies(s: &Stats) -> Value {
    json!({
        "truncated": s.truncated, "unknown_type": s.unknown_type, "throttled": s.throttled,
        "other_family": s.other_family, "bad_records": s.bad_records,
    })
}

/// One interval's document.
pub fn interval(
    iv: &Interval,
    elapsed_s: f64,
    stats: &Stats,
    lost_now: u64,
    names: &dyn Fn(u32) -> Option<String>,
) -> Value {
    let conns: Vec<Value> = iv
        .connections
        .iter()
        .map(|c| {
            json!({
                "id": c.id, "pid": c.pid, "command": c.pid.and_then(names),
                "local": c.local.map(|a| a.to_string()), "remote": c.remote.map(|a| a.to_string()),
                "state": c.state, "closed": c.closed,
                "interval": c.delta, "totals": c.totals,
                "srtt_ms": ms(c.srtt_us), "srtt_min_ms": ms(c.srtt_min_us),
                "cwnd": c.cwnd, "snd_wnd": c.snd_wnd, "rcv_wnd": c.rcv_wnd,
                "rto_episodes": c.loss_episodes, "resets": c.resets,
            })
        })
        .collect();
    json!({
        "type": "interval",
        "elapsed_s": elapsed_s,
        "events": stats.events,
        "lost": lost_now,
        "lost_total": stats.lost,
        "anomalies": anomalies(stats),
        "open_connections": iv.open,
        "processes": iv.processes,
        "connections": conns,
        "findings": iv.findings,
    })
}

fn conn(c: &Conn, f: &Final) -> Value {
    let role = c.role;
    let (client, server) = match (role, c.local, c.remote) {
        (Some(r), Some(l), Some(p)) if r != Role::Listener => {
            if r.is_server() {
                (Some(p), Some(l))
            } else {
                (Some(l), Some(p))
            }
        }
        _ => (None, None),
    };
    let roles_from = match role {
        Some(Role::Client | Role::Server | Role::Listener) => Some("handshake"),
        Some(Role::ClientGuessed | Role::ServerGuessed) => Some("ports"),
        None => None,
    };
    let end = c.closed_ns.unwrap_or(c.last_ns);
    let mean = (c.totals.writes > 0).then(|| c.totals.sent as f64 / c.totals.writes as f64);
    json!({
        "id": c.id,
        "local": c.local.map(|a| a.to_string()),
        "remote": c.remote.map(|a| a.to_string()),
        "client": client.map(|a| a.to_string()),
        "server": server.map(|a| a.to_string()),
        "role": role.map(|r| if r == Role::Listener { "listener" } else { r.name() }),
        "roles_from": roles_from,
        "pid": c.pid,
        "command": c.pid.and_then(|p| f.names.get(&p)).map(|n| n.command.clone()).filter(|n| !n.is_empty()),
        "owner_from": c.owner_source,
        "cookie": c.cookie,
        "state": c.state,
        "closed": c.closed_ns.is_some(),
        "duration_ms": end.saturating_sub(c.first_ns) as f64 / 1e6,
        "bytes": {"sent": c.totals.sent, "received": c.totals.received, "acked": c.totals.acked},
        "writes": {"count": c.totals.writes, "min": c.write_min, "max": (c.totals.writes > 0).then_some(c.write_max), "mean": mean},
        "send_errors": c.send_errors,
        "reads": c.totals.reads,
        "segments_in": c.totals.segments_in,
        "srtt_ms": ms(c.srtt_us), "srtt_min_ms": ms(c.srtt_min_us), "srtt_max_ms": ms(c.srtt_max_us),
        "cwnd": c.cwnd, "ssthresh": c.ssthresh,
        "snd_wnd": c.snd_wnd, "snd_wnd_min": c.snd_wnd_min,
        "rcv_wnd": c.rcv_wnd, "rcv_wnd_min": c.rcv_wnd_min,
        "retransmissions": c.totals.retransmits,
        "rto_retransmissions": c.rto_retransmits,
        "sndbuf_bound_segments": c.sndbuf_bound_segments,
        "syn_retransmissions": c.syn_retransmits,
        "synack_retransmissions": c.synack_retransmits,
        "retransmit_errors": c.retransmit_errors,
        "recovery_episodes": c.recovery_episodes,
        "rto_episodes": c.loss_episodes,
        "cwr_episodes": c.cwr_episodes,
        "state_changes": c.state_changes,
        "resets_sent": c.resets_sent,
        "resets_received": c.resets_received,
        "zero_window_segments": c.zero_window_segments,
        "zero_window_ms": c.zero_window_ns as f64 / 1e6,
        "window_bound_segments": c.window_bound_segments,
        "in_flight_segments": c.in_flight_segments,
    })
}

/// What the trace was made from (tracepoints, filters, what is missing).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Setup {
    pub tracepoints: Vec<String>,
    /// Tracepoints this kernel does not have (their counts stay 0).
    pub unavailable: Vec<String>,
    /// `tracepoint: field, field` this kernel's formats lack.
    pub missing_fields: Vec<String>,
    /// Filters the kernel runs, per tracepoint.
    pub kernel_filters: Vec<String>,
    pub cpus: u32,
    pub ring_bytes_per_cpu: usize,
    /// `tcp:tcp_probe` taken on one received segment in this many (window
    /// open) when sampled, every segment at a zero window; and
    /// `sock:sock_recv_length` on one read in this many.
    pub probe_every: u32,
    /// Sampled only while segments come fast (`--probe-every auto`).
    pub probe_auto: bool,
    /// Tracepoints read through `top`'s tracefs instance (ftrace's ring),
    /// the rest through perf; the instance's directory.
    pub ftrace: Vec<String>,
    pub ftrace_instance: Option<String>,
    /// Why there is no instance (every tracepoint then read through perf).
    pub ftrace_note: Option<String>,
}

impl Setup {
    /// The lines on standard error as the trace starts: the tracepoints and
    /// CPUs, the port, where the metrics are served, for how long; then each
    /// field and tracepoint this kernel lacks.
    pub fn notes(
        &self,
        port: Option<u16>,
        served: Option<std::net::SocketAddr>,
        duration: Option<std::time::Duration>,
    ) -> Vec<String> {
        let mut note = format!(
            "tcpdoctor: tracing TCP from {} tracepoints on {} CPUs",
            self.tracepoints.len(),
            self.cpus
        );
        if let Some(p) = port {
            note.push_str(&format!(", port {p}"));
        }
        if let Some(addr) = served {
            note.push_str(&format!("; metrics at http://{addr}/metrics"));
        }
        match duration {
            Some(d) => note.push_str(&format!(" for {:.0} s", d.as_secs_f64())),
            None => note.push_str("; Ctrl-C for the report"),
        }
        let mut notes = vec![note];
        if let Some(n) = &self.ftrace_note {
            notes.push(format!("tcpdoctor: {n}"));
        }
        for m in &self.missing_fields {
            notes.push(format!(
                "tcpdoctor: this kernel's tracepoint lacks fields (left out): {m}"
            ));
        }
        for u in &self.unavailable {
            notes.push(format!(
                "tcpdoctor: tracepoint {u} does not exist on this kernel (its counts stay 0)"
            ));
        }
        notes
    }
}

/// The final document.
pub fn final_doc(f: &Final, setup: &Setup, cpu_ms: f64, elapsed_ms: f64) -> Value {
    let conns: Vec<Value> = f.connections.iter().map(|c| conn(c, f)).collect();
    let s = &f.stats;
    json!({
        "schema": 1,
        "trace": {
            "events": s.events,
            "lost": s.lost,
            "duration_ms": elapsed_ms,
            "events_span_ms": f.duration_ns as f64 / 1e6,
            "connections": s.connections_seen,
            "connections_unlisted": s.connections_unlisted,
            "processes": f.processes.len(),
            "anomalies": anomalies(s),
            "unmatched_sockets": s.unmatched,
            "tracepoints": setup.tracepoints,
            "unavailable": setup.unavailable,
            "missing_fields": setup.missing_fields,
            "kernel_filters": setup.kernel_filters,
            "ftrace": setup.ftrace,
            "ftrace_instance": setup.ftrace_instance,
            "cpus": setup.cpus,
            "ring_bytes_per_cpu": setup.ring_bytes_per_cpu,
            "probe_every": setup.probe_every,
            "probe_auto": setup.probe_auto,
            "probe_sampled_intervals": s.probe_sampled_intervals,
            "cpu_time_ms": cpu_ms,
            "notes": s.notes(),
        },
        "system": {
            "rcvqueue_full": s.rcvqueue_full,
            "exceed_buf_limit_send": s.exceed_buf_limit_send,
            "exceed_buf_limit_receive": s.exceed_buf_limit_receive,
            "resets_without_socket": s.resets_without_socket,
        },
        "processes": f.processes,
        "connections": conns,
        "findings": f.findings,
    })
}
