//! `tcpdoctor sockets`: the live TCP sockets of this network namespace, who
//! holds them, their options, flagged (the work is in `tcpdoctor-sockets`).

use std::io::{self, BufWriter, Write};

use tcpdoctor_sockets::text::{self, TextOptions};
use tcpdoctor_sockets::{Query, State};

use crate::{Format, EXIT_FINDING, EXIT_OK};

pub const HELP: &str = "\
Examples:
  sudo tcpdoctor sockets --port 8080          does this nginx set TCP_NODELAY?
  tcpdoctor sockets --state listen            listeners, their accept queues and buffers
  sudo tcpdoctor sockets --pid 4242 --format json | jq '.sockets[] | select(.flags != [])'
  sudo ip netns exec web tcpdoctor sockets    the sockets of another network namespace
  tcpdoctor sockets --fail-on-flag --port 443 || echo 'something costs latency'

Answering the seed question (nginx with `tcp_nodelay off;` under wrk -c 100):
  $ sudo tcpdoctor sockets --port 8080
  101 TCP sockets (100 established, 1 listen) in 1 group; 100 flagged

  nginx pid 17959 (also held by pid 17950) listening on 10.83.5.2:8080: accept queue 0/511,
    rcvbuf 128 KB
    100 sockets: 100 established; rtt 20 ms – 21 ms (median 20 ms) (min_rtt 0.01 ms: the path
      is that fast; the smoothed rtt counts the time the peer's ACKs were delayed); cwnd 138;
      TCP_NODELAY off on 100 of 100
    ! nagle_on on 100 of 100 connections: Nagle on (TCP_NODELAY off) on a request/response
      socket: data both ways (...); right now 618 B written and not sent behind 1
      unacknowledged segment. A message written in two parts (headers, then body) has its
      second part held until the first is ACKed, and the peer delays that ACK (~40 ms ...)
    fix: nginx: `tcp_nodelay on;` (the default; http, server or location block)

What it reads: every TCP socket (IPv4 and IPv6) of the current network namespace from one
netlink sock_diag dump (as `ss -tinm` does), with tcp_info (rtt, rttvar, cwnd, ssthresh,
retransmissions, lost, delivery rate, bytes in flight, not-sent bytes, busy / rwnd_limited /
sndbuf_limited time, our advertised window rcv_wnd and the peer's snd_wnd), the congestion
control and socket memory (receive/send buffer: what SO_RCVBUF/SO_SNDBUF read, twice what was
set); the owning process from /proc/PID/fd (as `ss -p`); and the socket options TCP_NODELAY,
TCP_CORK, TCP_QUICKACK, SO_RCVBUF, SO_SNDBUF, TCP_NOTSENT_LOWAT, TCP_CONGESTION from the live
process, through a duplicate of its descriptor (pidfd_getfd: no strace, no restart).

Text groups sockets: a listener with the sockets it accepted (200 connections = one group with
the range and median of rtt and cwnd, the flags counted, the worst sockets listed); sockets
sharing a local address whose listener is not selected (`--state connected`), by process and
that address; other sockets by process and remote endpoint. Lines are wrapped to $COLUMNS, else
the terminal's width, else 100. An rtt well above the connection's min_rtt is said to be
inflated: the smoothed rtt counts the time the peer held its delayed ACKs.

Flags, each with the mechanism, the numbers and the fix:
  nagle_on           TCP_NODELAY off on a request/response socket. Judged request/response when
                     established with data both ways (bytes received and acknowledged > 0), at
                     least 2 data segments sent, and sent segments below the MSS on average:
                     small messages both ways, the traffic Nagle + delayed ACK stalls (~40 ms)
  rwnd_limited       >= 20% of busy time (and >= 10 ms) waiting for the peer's receive window
  sndbuf_limited     >= 20% of busy time blocked on a full send buffer while the network had room
  small_rcvbuf       receive buffer below net.ipv4.tcp_rmem's default: SO_RCVBUF was set
                     (autotuning off) and pins the window; a sender moves that much per round trip
  retransmissions    >= 1% of bytes retransmitted, or loss / an RTO being recovered now
  accept_queue_full  a listener's accept queue at its backlog: handshakes dropped, clients wait 1 s

Privileges: the dump (tcp_info, buffers, queues) needs none. The owning process needs root for
other users' processes (/proc/PID/fd); the options need root or CAP_SYS_PTRACE (pidfd_getfd).
Without them those columns are null and `could_not_read` says which and why; nagle_on needs
the options, and the text headline says on how many established sockets it could not be
judged. It never fails for lack of privilege.

JSON (--format json), schema 1:
  {\"schema\": 1,
   \"sockets\": [{\"local\": \"IP:PORT\", \"remote\": \"IP:PORT\", \"state\": \"established\",
                \"inode\": N, \"uid\": N, \"recv_q\": N, \"send_q\": N,
                \"process\": {\"pid\": N, \"command\": \"nginx\"} | null,
                \"also_held_by\": [{\"pid\": N, \"command\": \"nginx\"}],
                \"options\": {\"tcp_nodelay\": bool, \"tcp_cork\": bool, \"tcp_quickack\": bool,
                            \"so_rcvbuf\": N, \"so_sndbuf\": N, \"tcp_notsent_lowat\": N,
                            \"congestion\": \"cubic\"} | null,
                \"congestion\": \"bbr\" | null,
                \"memory\": {\"rmem_alloc\", \"rcvbuf\", \"wmem_alloc\", \"sndbuf\", \"fwd_alloc\",
                           \"wmem_queued\", \"optmem\", \"backlog\", \"drops\"} | null,
                \"shutdown\": null | \"rd\" | \"wr\" | \"rdwr\",
                \"tcp_info\": {\"rtt_us\", \"rttvar_us\", \"snd_cwnd\", \"snd_ssthresh\", \"unacked\",
                             \"lost\", \"total_retrans\", \"notsent_bytes\", \"busy_us\",
                             \"rwnd_limited_us\", \"sndbuf_limited_us\", \"snd_wnd\", \"rcv_wnd\",
                             \"delivery_rate_bytes_per_sec\", \"bytes_acked\", ...} | null,
                \"flags\": [{\"kind\": \"nagle_on\", \"message\": \"...\", \"fix\": \"...\"}]}],
   \"could_not_read\": [{\"what\": \"process\" | \"options\" | \"dump\", \"count\": N,
                       \"reason\": \"...\"}]}
  For a listener recv_q is its accept queue and send_q its backlog. options.so_rcvbuf is what
  the kernel applies (twice the value set); tcp_quickack is the kernel's current quick-ACK mode;
  tcp_notsent_lowat 0 means unset; tcp_info.pacing_rate_bytes_per_sec is null when pacing is
  unlimited (the kernel reports ~0) and min_rtt_us null before the first RTT sample. A socket held by several processes (nginx master and worker)
  names the one doing the I/O (the child) in process and the others in also_held_by.

Exit status: 0 listed (whatever could not be read for lack of privilege); 1 --fail-on-flag was
given and a socket is flagged; 2 usage error (e.g. an unknown --state, a --pid no process has)
or netlink unavailable.";

#[derive(clap::Args)]
pub struct SocketsArgs {
    /// Only sockets with this local or remote port.
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,
    /// Only sockets held by this process.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
    /// Only sockets in this state (repeatable): listen, established, syn-sent, syn-recv,
    /// fin-wait-1, fin-wait-2, time-wait, closed, close-wait, last-ack, closing; or
    /// `connected` (all but listen and closed), `all`.
    #[arg(long, value_name = "STATE", value_parser = StateParser)]
    state: Vec<u32>,
    /// Output format: `text` for people, `json` for machines (schema below).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Sockets listed per group in the text view, worst first.
    #[arg(long, default_value_t = 3, value_name = "N")]
    worst: usize,
    /// Exit with status 1 when any socket is flagged (for scripts).
    #[arg(long)]
    fail_on_flag: bool,
}

/// `--state`: [`parse_states`], with the names for shell completion.
#[derive(Clone)]
struct StateParser;

impl clap::builder::TypedValueParser for StateParser {
    type Value = u32;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<u32, clap::Error> {
        let v = value.to_string_lossy();
        parse_states(&v).map_err(|why| {
            let arg = arg
                .map(|a| a.to_string())
                .unwrap_or_else(|| "--state".into());
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{v}' for '{arg}': {why}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            State::ALL
                .iter()
                .map(|s| s.name())
                .chain(["connected", "all"])
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

/// A `--state` value as `idiag_states` bits.
fn parse_states(v: &str) -> Result<u32, String> {
    match v.to_ascii_lowercase().as_str() {
        "all" => return Ok(u32::MAX),
        "connected" => {
            return Ok(State::ALL
                .into_iter()
                .filter(|s| !matches!(s, State::Listen | State::Closed))
                .fold(0, |m, s| m | s.mask()))
        }
        _ => {}
    }
    State::parse(v).map(State::mask).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown TCP state {v:?}: expected one of {}, connected, all",
            names.join(", ")
        )
    })
}

pub fn run(args: &SocketsArgs) -> anyhow::Result<u8> {
    if let Some(pid) = args.pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            anyhow::bail!("--pid {pid}: no such process");
        }
    }
    let query = Query {
        states: if args.state.is_empty() {
            u32::MAX
        } else {
            args.state.iter().fold(0, |m, s| m | s)
        },
        port: args.port,
        pid: args.pid,
        owners_only: false,
    };
    let snap = tcpdoctor_sockets::snapshot(&query)
        .map_err(|e| anyhow::anyhow!("reading sockets over netlink (sock_diag): {e}"))?;
    let mut out = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&snap)?;
            tcpdoctor_report::stamp(
                &mut doc,
                "sockets",
                serde_json::json!({"port": args.port, "pid": args.pid}),
            );
            serde_json::to_writer(&mut out, &doc)?;
            writeln!(out)?;
        }
        Format::Text => {
            use std::io::IsTerminal;
            let width = crate::width(io::stdout().is_terminal()).clamp(40, 400);
            text::render(
                &snap,
                TextOptions {
                    worst: args.worst,
                    width,
                },
                &mut out,
            )?
        }
    }
    out.flush()?;
    let flagged = snap.sockets.iter().any(|s| !s.flags.is_empty());
    Ok(if args.fail_on_flag && flagged {
        EXIT_FINDING
    } else {
        EXIT_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_as_ss_names_them() {
        assert_eq!(parse_states("established"), Ok(1 << 1));
        assert_eq!(parse_states("LISTEN"), Ok(1 << 10));
        assert_eq!(parse_states("listening"), Ok(1 << 10));
        assert_eq!(parse_states("syn-recv"), Ok((1 << 3) | (1 << 12)));
        assert_eq!(parse_states("time-wait"), Ok(1 << 6));
        assert_eq!(parse_states("all"), Ok(u32::MAX));
        let connected = parse_states("connected").expect("a group");
        assert_eq!(connected & (1 << 10), 0);
        assert_ne!(connected & (1 << 1), 0);
        let err = parse_states("bogus").expect_err("refused");
        assert!(
            err.contains("bogus") && err.contains("established"),
            "{err}"
        );
    }
}
