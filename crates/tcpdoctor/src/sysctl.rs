//! `tcpdoctor sysctl`: the kernel settings that bound TCP latency and windows
//! in this network namespace (the work is in `tcpdoctor-sysctl`).

use std::io::{self, BufWriter, IsTerminal, Write};

use tcpdoctor_sysctl::text::TextOptions;

use crate::{Format, EXIT_OK};

pub const HELP: &str = "\
Examples:
  tcpdoctor sysctl                                    this namespace: what is set, what it costs
  sudo ip netns exec web tcpdoctor sysctl             the namespace `web` (a container's, a lab's)
  sudo nsenter -n -t PID tcpdoctor sysctl             the namespace of process PID
  tcpdoctor sysctl --format json | jq '.settings[] | select(.severity != \"ok\")'
  tcpdoctor sysctl --format json | jq -r '.. | .fix? // empty'        every fix, one per line
  tcpdoctor sysctl --format json | jq '.routes[] | select(.metrics.initcwnd)'

It reads, for the network namespace it runs in (not the host's, unless it runs there):
  sysctls      /proc/sys/net: buffers & windows (tcp_rmem, rmem_max, tcp_adv_win_scale,
               tcp_window_scaling…), loss recovery & timers (tcp_sack, tcp_timestamps, RTO,
               retries), queues & backlog (somaxconn, tcp_max_syn_backlog, syncookies…),
               congestion (tcp_congestion_control, slow start after idle, default qdisc)
  routes       rtnetlink, IPv4 and IPv6, every table but local, with the metrics TCP takes
               from them: initcwnd, initrwnd, quickack, rto_min, mtu, advmss, window, congctl,
               features ecn
  qdiscs       rtnetlink, each interface's queueing discipline: tbf shapes to a rate and its
               queue is delay; a FIFO without AQM lets queues grow

Each value gets what it does, and when it is suspicious a judgement with numbers and the fix:
  net.ipv4.tcp_rmem = 4096 8192 16384         TCP receive buffer per socket: min, start, max…
    WARN  largest receive window ≈ 8 KB (16 KB max buffer × ½ …): 6.55 Mbit/s at 10 ms,
          1.31 Mbit/s at 50 ms, 655 kbit/s at 100 ms. A sender to this host cannot fill a long
          fat path: throughput = window / RTT.
    fix   ip netns exec web sysctl -w net.ipv4.tcp_rmem='4096 131072 16777216'
Window judgements count the share of a buffer that is advertised (tcp_adv_win_scale before
Linux 6.6, measured per connection since). Severity: ok, note (worth knowing: a deliberate
non-default, or a default that costs latency in some uses), WARN (likely costs latency or
throughput). A setting this kernel or namespace does not have is reported absent. Some are
host-wide (net.core.rmem_max, netdev_max_backlog, default_qdisc): one value for every
namespace, set on the host. Fixes last until reboot; /etc/sysctl.d/ keeps sysctls.

--format json: {\"schema\":1,\"namespace\":\"net:[…]\",\"namespace_name\",\"initial_namespace\",
\"kernel\",\"summary\":{\"warn\",\"note\"},\"settings\":[{\"name\",\"value\",\"group\",\"scope\",\"meaning\",
\"severity\",\"judgement\",\"fix\"}],\"routes\":[{\"family\",\"type\",\"dst\",\"dev\",\"gateway\",\"table\",
\"priority\",\"protocol\",\"metrics\":{…},\"locked\",\"findings\":[{\"severity\",\"subject\",\"judgement\",
\"fix\"}]}],\"qdiscs\":[{\"dev\",\"kind\",\"handle\",\"parent\",\"meaning\",\"tbf\",\"stats\",\"findings\"}],
\"errors\":[…]}

Needs no privileges. Exit status: 0 done (also when something could not be read: it is listed
under `errors`); 1 --fail-on-warn was given and a value was judged WARN; 2 usage error.";

#[derive(clap::Args)]
pub struct SysctlArgs {
    /// Output format: `text` for people, `json` for machines.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Text: also the assessment of values that are fine (window sizes, timeouts).
    #[arg(short, long)]
    verbose: bool,
    /// Exit with status 1 when any value is judged WARN (for scripts and CI).
    #[arg(long)]
    fail_on_warn: bool,
}

pub fn run(args: &SysctlArgs) -> anyhow::Result<u8> {
    let report = tcpdoctor_sysctl::read();
    for e in &report.errors {
        eprintln!("tcpdoctor: could not read {e}");
    }
    let stdout = io::stdout();
    let color = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => {
            let mut doc = serde_json::to_value(&report)?;
            tcpdoctor_report::stamp(&mut doc, "sysctl", serde_json::json!({}));
            serde_json::to_writer(&mut out, &doc)?;
            out.write_all(b"\n")?;
        }
        Format::Text => {
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse::<usize>().ok())
                .unwrap_or(100)
                .clamp(60, 200);
            let text = tcpdoctor_sysctl::text::render(
                &report,
                TextOptions {
                    width,
                    color,
                    verbose: args.verbose,
                },
            );
            out.write_all(text.as_bytes())?;
        }
    }
    out.flush()?;
    if args.fail_on_warn && report.summary.warn > 0 {
        return Ok(crate::EXIT_FINDING);
    }
    Ok(EXIT_OK)
}
