//! SVG charts drawn as text: stacked budget bar, log-scale latency
//! histogram, ladder diagram, time-sequence graph, bytes in flight.
//! Every label passes through [`crate::esc`].

use std::fmt::Write as _;

use tcpdoctor_engine::model::{BudgetParts, Finding, Ladder, LatencyBin};
use tcpdoctor_report::fmt_ms;

use crate::esc;
use crate::trace::{Point, Trace};
use tcpdoctor_units::bytes_f64 as human;

/// A colour per budget part (kept apart from each other).
pub fn color(part: &str) -> &'static str {
    match part {
        "nagle_delayed_ack" => "#d62728",
        "window_wait" => "#ff7f0e",
        "reader_wait" => "#ffbb78",
        "retransmission_wait" => "#9467bd",
        "congestion_wait" => "#8c564b",
        "server" => "#1f77b4",
        "network" => "#17becf",
        "connection_setup" => "#7f7f7f",
        "syn_retry_wait" => "#e377c2",
        "client_idle" => "#bcbd22",
        "transfer" => "#2ca02c",
        "tls_handshake" => "#aec7e8",
        "tls_key_exchange" => "#393b79",
        "queueing" => "#ff9896",
        "bandwidth" => "#98df8a",
        "other_connection" => "#c5b0d5",
        _ => "#aaaaaa",
    }
}

/// The finding kind a budget part is the time of (as found in `findings`).
pub fn cause_of(part: &str, findings: &[Finding]) -> String {
    let has = |k: &str| findings.iter().any(|f| f.kind == k);
    let pick = |ks: &[&'static str], dflt: &str| {
        ks.iter()
            .find(|k| has(k))
            .map_or(dflt.to_string(), |k| k.to_string())
    };
    match part {
        "nagle_delayed_ack" => "nagle_delayed_ack".into(),
        "window_wait" => pick(&["receive_window_limited", "send_buffer_limited"], part),
        "reader_wait" => pick(&["zero_window", "receive_window_limited"], part),
        "retransmission_wait" => pick(
            &[
                "retransmission_timeout",
                "packet_loss",
                "path_mtu_blackhole",
            ],
            part,
        ),
        "congestion_wait" => pick(&["congestion_limited", "slow_start_after_idle"], part),
        "server" => pick(&["server_delay"], part),
        "client_idle" => pick(&["client_delay"], part),
        "network" => pick(&["network_latency"], part),
        "queueing" => pick(&["queueing_delay"], part),
        "tls_handshake" | "tls_key_exchange" => "tls_handshake".into(),
        "syn_retry_wait" => pick(
            &["syn_retransmit", "listen_queue_overflow", "syn_flood"],
            part,
        ),
        _ => part.to_string(),
    }
}

/// A horizontal bar whose parts add up to `total`, with a legend.
pub fn budget_bar(id: &str, parts: &BudgetParts, total: f64, out: &mut String) {
    let (w, h) = (900.0, 34.0);
    let mut parts: Vec<(&str, f64)> = parts.iter().collect();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let sum: f64 = parts
        .iter()
        .map(|p| p.1)
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    let _ = write!(
        out,
        r#"<svg id="{id}" class="chart budget" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>latency budget: {}</title>"#,
        esc(&fmt_ms(total))
    );
    let mut x = 0.0;
    for (name, v) in &parts {
        let pw = v / sum * w;
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="0" width="{pw:.1}" height="{h}" fill="{}"><title>{} {} ({:.1}%)</title></rect>"#,
            color(name),
            esc(name),
            esc(&fmt_ms(*v)),
            v / sum * 100.0
        );
        if pw > 70.0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="22" class="onbar">{}</text>"#,
                x + 6.0,
                esc(&fmt_ms(*v))
            );
        }
        x += pw;
    }
    out.push_str("</svg><ul class=\"legend\">");
    for (name, v) in &parts {
        let _ = write!(
            out,
            r#"<li><span class="sw" style="background:{}"></span>{} <b>{}</b></li>"#,
            color(name),
            esc(name),
            esc(&fmt_ms(*v))
        );
    }
    out.push_str("</ul>");
}

/// Bins per decade of the latency histogram.
const PER_DECADE: f64 = 10.0;

/// The latency bins re-binned to [`PER_DECADE`] bins per decade, at least
/// two decades wide: bin `i` starts at `10^((d0 + i) / PER_DECADE)` ms.
struct Decades {
    d0: i64,
    counts: Vec<u64>,
    parts: Vec<Vec<(&'static str, f64)>>,
}

impl Decades {
    fn new(bins: &[LatencyBin]) -> Decades {
        let lo = bins
            .iter()
            .map(|b| b.low_ms.max(0.001))
            .fold(f64::MAX, f64::min);
        let hi = bins.iter().map(|b| b.high_ms).fold(0.0, f64::max);
        let mut d0 = (lo.log10() * PER_DECADE).floor() as i64 - 1;
        let mut d1 = ((hi.log10() * PER_DECADE).ceil() as i64).max(d0 + 1) + 1;
        // At least two decades wide, so one bin is not the whole chart.
        while d1 - d0 < 2 * PER_DECADE as i64 {
            d0 -= 1;
            d1 += 1;
        }
        let n = (d1 - d0) as usize;
        let mut counts = vec![0u64; n];
        let mut parts: Vec<Vec<(&'static str, f64)>> = vec![Vec::new(); n];
        for b in bins {
            let mid = ((b.low_ms.max(0.001)) * b.high_ms.max(0.001)).sqrt();
            let i = (((mid.log10() * PER_DECADE).floor() as i64 - d0).max(0) as usize).min(n - 1);
            counts[i] += b.count;
            for (p, v) in b.parts_ms.iter() {
                match parts[i].iter_mut().find(|(q, _)| *q == p) {
                    Some(e) => e.1 += v,
                    None => parts[i].push((p, v)),
                }
            }
        }
        Decades { d0, counts, parts }
    }

    /// The budget part holding most of bin `i`'s time.
    fn dominant(&self, i: usize) -> &'static str {
        self.parts[i]
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("transfer", |p| p.0)
    }

    /// Modes: local maxima holding at least 5% of the tallest bar, at most
    /// 4, tallest first.
    fn modes(&self, max: f64) -> Vec<usize> {
        let (counts, n) = (&self.counts, self.counts.len());
        let mut modes: Vec<usize> = (0..n)
            .filter(|&i| {
                let c = counts[i];
                c > 0
                    && c as f64 >= 0.05 * max
                    && (i == 0 || counts[i - 1] < c)
                    && (i + 1 == n || counts[i + 1] <= c)
            })
            .collect();
        modes.sort_by(|a, b| counts[*b].cmp(&counts[*a]));
        modes.truncate(4);
        modes
    }
}

/// The histogram's drawing area: bars from `left` over `n` bins, counts up
/// to `max` between `top` and `h - bottom`.
struct Frame {
    w: f64,
    h: f64,
    left: f64,
    bottom: f64,
    top: f64,
    bw: f64,
    max: f64,
}

impl Frame {
    fn x_of(&self, i: usize) -> f64 {
        self.left + i as f64 * self.bw
    }

    fn y_of(&self, c: f64) -> f64 {
        self.top + (self.h - self.top - self.bottom) * (1.0 - c / self.max)
    }
}

/// Log-scale histogram of exchange latencies; the modes are labelled with
/// the cause that holds most of their time.
pub fn histogram(bins: &[LatencyBin], findings: &[Finding], out: &mut String) {
    if bins.is_empty() {
        return;
    }
    let d = Decades::new(bins);
    let n = d.counts.len();
    let max = *d.counts.iter().max().unwrap_or(&1) as f64;
    // Room above the tallest bar for two rows of mode labels under the title.
    let (w, h, left, bottom, top) = (900.0, 288.0, 50.0, 40.0, 58.0);
    let f = Frame {
        w,
        h,
        left,
        bottom,
        top,
        bw: (w - left - 10.0) / n as f64,
        max,
    };
    let _ = write!(
        out,
        r#"<svg id="histogram" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>exchange latency distribution (log scale)</title>"#
    );
    for (i, &c) in d.counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let dominant = d.dominant(i);
        let (a, b) = (
            10f64.powf((d.d0 + i as i64) as f64 / PER_DECADE),
            10f64.powf((d.d0 + i as i64 + 1) as f64 / PER_DECADE),
        );
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}–{}: {c} exchanges, mostly {}</title></rect>"#,
            f.x_of(i) + 1.0,
            f.y_of(c as f64),
            (f.bw - 2.0).max(1.0),
            h - bottom - f.y_of(c as f64),
            color(dominant),
            esc(&fmt_ms(a)),
            esc(&fmt_ms(b)),
            esc(&cause_of(dominant, findings))
        );
    }
    let title = format!("exchanges (max {max})");
    let axis_title = "exchange latency (log scale)";
    mode_labels(&d, &f, findings, [&title, axis_title], out);
    // Axis: decades.
    let _ = write!(
        out,
        r#"<line x1="{left}" y1="{0}" x2="{1}" y2="{0}" class="axis"/>"#,
        h - bottom,
        w - 10.0
    );
    for i in 0..=n {
        let k = d.d0 + i as i64;
        if k % PER_DECADE as i64 == 0 {
            let v = 10f64.powf(k as f64 / PER_DECADE);
            tick_label(out, f.x_of(i), h - bottom + 16.0, "middle", &fmt_ms(v));
        }
    }
    let _ = write!(
        out,
        r#"<text x="{left}" y="14" class="tick">{}</text><text x="{:.0}" y="{:.0}" text-anchor="end" class="tick">{axis_title}</text></svg>"#,
        esc(&title),
        w - 10.0,
        h - 4.0
    );
}

/// Each mode's label. Text is placed where it overprints no other: the axis
/// titles (`[title, axis_title]`) first, then each mode's label (tallest
/// first) at its bar or the nearest free row above or below; one with no
/// free row is left out.
fn mode_labels(d: &Decades, f: &Frame, findings: &[Finding], titles: [&str; 2], out: &mut String) {
    let (w, h, left, bottom) = (f.w, f.h, f.left, f.bottom);
    let mut placed = Placed::default();
    placed.add(text_box(left, 14.0, "start", titles[0].chars().count()));
    placed.add(text_box(
        w - 10.0,
        h - 4.0,
        "end",
        titles[1].chars().count(),
    ));
    for i in d.modes(f.max) {
        let dominant = d.dominant(i);
        let mid = 10f64.powf((d.d0 as f64 + i as f64 + 0.5) / PER_DECADE);
        let cx = f.x_of(i) + f.bw / 2.0;
        let anchor = if cx > w - 140.0 {
            "end"
        } else if cx < left + 140.0 {
            "start"
        } else {
            "middle"
        };
        let text = format!("{} · {}", fmt_ms(mid), cause_of(dominant, findings));
        let chars = text.chars().count();
        let y0 = f.y_of(d.counts[i] as f64) - 8.0;
        let up = (0..)
            .map(|k| y0 - 14.0 * k as f64)
            .take_while(|&y| y >= 12.0);
        let down = (1..)
            .map(|k| y0 + 14.0 * k as f64)
            .take_while(|&y| y <= h - bottom - 4.0);
        let Some(y) = up
            .chain(down)
            .find(|&y| !placed.hits(&text_box(cx, y, anchor, chars)))
        else {
            continue;
        };
        placed.add(text_box(cx, y, anchor, chars));
        let _ = write!(
            out,
            r#"<text class="mode" x="{:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            cx,
            y,
            esc(&text)
        );
    }
}

/// Width of a character of the charts' 11 px monospace font, with a margin.
const CHAR_W: f64 = 7.0;

/// The box a line of `chars` characters takes at (`x`, baseline `y`):
/// `[x0, y0, x1, y1]`.
pub(crate) fn text_box(x: f64, y: f64, anchor: &str, chars: usize) -> [f64; 4] {
    let width = chars as f64 * CHAR_W;
    let x0 = match anchor {
        "start" => x,
        "end" => x - width,
        _ => x - width / 2.0,
    };
    [x0, y - 11.0, x0 + width, y + 3.0]
}

/// Text boxes drawn so far.
#[derive(Default)]
pub(crate) struct Placed(Vec<[f64; 4]>);

impl Placed {
    pub(crate) fn add(&mut self, b: [f64; 4]) {
        self.0.push(b);
    }

    pub(crate) fn hits(&self, b: &[f64; 4]) -> bool {
        self.0
            .iter()
            .any(|a| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3])
    }
}

/// A ladder (flow graph) of one exchange: client and server columns, one
/// arrow per packet; packets the finding names are highlighted; hovering an
/// arrow shows its frame.
pub fn ladder(l: &Ladder, kind: &str, out: &mut String) {
    let row = 34.0;
    let (w, top) = (900.0, 40.0);
    let (xc, xs) = (180.0, 520.0);
    let h = top + row * l.rows.len() as f64 + 20.0;
    let _ = write!(
        out,
        r#"<svg class="chart ladder" data-kind="{}" viewBox="0 0 {w} {h}" width="{w}" height="{h:.0}" role="img"><title>ladder of one exchange, connection {}</title>"#,
        esc(kind),
        l.connection
    );
    let _ = write!(
        out,
        r#"<text x="{xc}" y="16" text-anchor="middle" class="col">client {1}</text><text x="{xs}" y="16" text-anchor="middle" class="col">server {2}</text><line x1="{xc}" y1="24" x2="{xc}" y2="{0:.0}" class="life"/><line x1="{xs}" y1="24" x2="{xs}" y2="{0:.0}" class="life"/><text x="4" y="34" class="tick">t (ms)  frame</text>"#,
        h - 8.0,
        esc(&l.client),
        esc(&l.server)
    );
    let mut prev_t = 0.0;
    for (i, r) in l.rows.iter().enumerate() {
        let y = top + row * i as f64 + 14.0;
        let c2s = r.dir == "c>s";
        let (x1, x2) = if c2s { (xc, xs) } else { (xs, xc) };
        let hot = r.note.is_some();
        let gap = r.t_ms - prev_t;
        prev_t = r.t_ms;
        let class = if hot { "arrow hot" } else { "arrow" };
        let label = if r.len > 0 {
            format!("{} len={}", r.flags, r.len)
        } else {
            r.flags.clone()
        };
        let _ = write!(
            out,
            r#"<g class="{class}" data-frame="{}"><title>frame {} · t={:.3} ms (+{:.3} ms) · {} · seq={} ack={} win={} len={}{}</title>"#,
            r.frame,
            r.frame,
            r.t_ms,
            gap,
            esc(&r.flags),
            r.seq,
            r.ack,
            r.window,
            r.len,
            r.note
                .as_deref()
                .map(|n| format!(" · {}", esc(n)))
                .unwrap_or_default()
        );
        let _ = write!(
            out,
            r#"<text x="4" y="{:.1}" class="tick">{:>9.3}  {}</text><line x1="{x1}" y1="{:.1}" x2="{x2}" y2="{:.1}" marker-end="url(#{})"/><text x="{:.1}" y="{:.1}" text-anchor="middle" class="lbl">{}</text>"#,
            y + 14.0,
            r.t_ms,
            r.frame,
            y + 4.0,
            y + 18.0,
            if hot { "ah-hot" } else { "ah" },
            (xc + xs) / 2.0,
            y + 8.0,
            esc(&label)
        );
        if let Some(n) = &r.note {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" class="note">{}</text>"#,
                xs + 14.0,
                y + 15.0,
                esc(n)
            );
        }
        if gap >= 5.0 && i > 0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" class="gap" text-anchor="end">+{}</text>"#,
                xc - 8.0,
                y + 15.0,
                esc(&fmt_ms(gap))
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
}

fn ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 {
        return vec![0.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(mag * 10.0);
    (0..=((max / step).floor() as usize))
        .map(|i| i as f64 * step)
        .collect()
}

/// An axis's value label at (`x`, `y`), anchored `middle` or `end`.
fn tick_label(out: &mut String, x: f64, y: f64, anchor: &str, text: &str) {
    let _ = write!(
        out,
        r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" class="tick">{}</text>"#,
        esc(text)
    );
}

fn axes(out: &mut String, w: f64, h: f64, m: [f64; 4], tmax: f64, ymax: f64, ylabel: &str) {
    let [l, r, t, b] = m;
    let _ = write!(
        out,
        r#"<line x1="{l}" y1="{0}" x2="{1}" y2="{0}" class="axis"/><line x1="{l}" y1="{t}" x2="{l}" y2="{0}" class="axis"/>"#,
        h - b,
        w - r
    );
    for v in ticks(tmax) {
        let x = l + v / tmax.max(1e-9) * (w - l - r);
        tick_label(out, x, h - b + 14.0, "middle", &fmt_ms(v));
    }
    for v in ticks(ymax) {
        let y = h - b - v / ymax.max(1e-9) * (h - t - b);
        tick_label(out, l - 4.0, y + 4.0, "end", &human(v));
    }
    let _ = write!(
        out,
        r#"<text x="{l}" y="12" class="tick">{}</text>"#,
        esc(ylabel)
    );
}

/// The baseline of a chart's key: in the top margin, under the axis title.
const KEY_Y: f64 = 30.0;

/// The time-sequence graph (sequence against time: data segments as
/// vertical bars, retransmissions in red, the ACK line, the advertised
/// window's right edge) and bytes in flight against the window.
pub fn time_sequence(tr: &Trace, out: &mut String) {
    // The key sits in the top margin, above the plot: inside it, it hid the
    // data that reaches the top (the window's edge, the last segments).
    let (w, h) = (900.0, 344.0);
    let m = [70.0, 10.0, 44.0, 30.0];
    let tmax = tr
        .points
        .iter()
        .map(|p| match p {
            Point::Data { t_ms, .. } | Point::Ack { t_ms, .. } => *t_ms,
        })
        .fold(0.0, f64::max)
        .max(0.001);
    let smax = tr
        .points
        .iter()
        .map(|p| match p {
            Point::Data { seq, len, .. } => seq + u64::from(*len),
            Point::Ack { ack, window, .. } => ack + window,
        })
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let px = |t: f64| m[0] + t / tmax * (w - m[0] - m[1]);
    let py = |s: f64, top: f64| h - m[3] - s / top * (h - m[2] - m[3]);
    let _ = write!(
        out,
        r#"<svg class="chart tseq" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>time-sequence graph, connection {} ({} {} to {})</title>"#,
        tr.connection,
        tr.sender_role,
        esc(&tr.sender),
        esc(&tr.receiver)
    );
    axes(out, w, h, m, tmax, smax, "sequence (bytes, relative)");
    let paths = trace_paths(tr, &px, &py, smax);
    let _ = write!(
        out,
        r#"<path class="win" d="{}"/><path class="ackl" d="{}"/><path class="data" d="{}"/><path class="retx" d="{}"/>"#,
        paths.win, paths.ack, paths.data, paths.retx
    );
    let _ = write!(
        out,
        r#"<g class="key"><text x="{0}" y="{1}" class="k-data">█ data</text><text x="{2}" y="{1}" class="k-retx">█ retransmission</text><text x="{3}" y="{1}" class="k-ack">— ACK</text><text x="{4}" y="{1}" class="k-win">— window edge</text></g></svg>"#,
        w - 420.0,
        KEY_Y,
        w - 340.0,
        w - 200.0,
        w - 130.0
    );
    // Bytes in flight against the advertised window.
    let _ = write!(
        out,
        r#"<svg class="chart inflight" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>bytes in flight against the advertised window, connection {}</title>"#,
        tr.connection
    );
    let top = paths.max_flight as f64 * 1.05;
    axes(
        out,
        w,
        h,
        m,
        tmax,
        top,
        "bytes in flight / advertised window",
    );
    let (mut f, mut wline) = (String::new(), String::new());
    for (i, (t, fl, wn)) in paths.in_flight.iter().enumerate() {
        let c = if i == 0 { 'M' } else { 'L' };
        let _ = write!(f, "{c}{:.1} {:.1}", px(*t), py(*fl as f64, top));
        let _ = write!(wline, "{c}{:.1} {:.1}", px(*t), py(*wn as f64, top));
    }
    let _ = write!(
        out,
        r#"<path class="flight" d="{f}"/><path class="win top" d="{wline}"/><g class="key"><text x="{0}" y="{KEY_Y}" class="k-flight">— in flight</text><text x="{1}" y="{KEY_Y}" class="k-win">— advertised window</text></g></svg>"#,
        w - 300.0,
        w - 190.0
    );
    if !tr.scale_known {
        out.push_str("<p class=\"small\">The handshake was not captured: window scale unknown, windows shown unscaled.</p>");
    }
    if tr.truncated {
        let _ = write!(
            out,
            "<p class=\"small\">Only the first {} packets of this connection are drawn.</p>",
            tr.points.len()
        );
    }
}

/// The time-sequence graph's paths (data, retransmissions, ACKs, the
/// window's edge) and the bytes in flight against the window after each
/// point.
struct TracePaths {
    data: String,
    retx: String,
    ack: String,
    win: String,
    /// (time, bytes in flight, advertised window) after each point.
    in_flight: Vec<(f64, u64, u64)>,
    max_flight: u64,
}

fn trace_paths(
    tr: &Trace,
    px: &impl Fn(f64) -> f64,
    py: &impl Fn(f64, f64) -> f64,
    smax: f64,
) -> TracePaths {
    let (mut data, mut retx, mut ack, mut win) =
        (String::new(), String::new(), String::new(), String::new());
    let mut in_flight = Vec::new();
    let (mut high, mut acked, mut window) = (0u64, 0u64, 0u64);
    let mut max_flight = 1u64;
    for p in &tr.points {
        match *p {
            Point::Data {
                t_ms,
                seq,
                len,
                retransmission,
                ..
            } => {
                let d = format!(
                    "M{:.1} {:.1}V{:.1}",
                    px(t_ms),
                    py(seq as f64, smax),
                    py((seq + u64::from(len)) as f64, smax)
                );
                if retransmission {
                    retx.push_str(&d);
                } else {
                    data.push_str(&d);
                }
                high = high.max(seq + u64::from(len));
                let f = high.saturating_sub(acked);
                max_flight = max_flight.max(f).max(window);
                in_flight.push((t_ms, f, window));
            }
            Point::Ack {
                t_ms,
                ack: a,
                window: wnd,
                ..
            } => {
                let cmd = if ack.is_empty() { 'M' } else { 'L' };
                let _ = write!(
                    ack,
                    "{cmd}{:.1} {:.1}",
                    px(t_ms),
                    py(a.max(acked) as f64, smax)
                );
                let cmd = if win.is_empty() { 'M' } else { 'L' };
                let _ = write!(
                    win,
                    "{cmd}{:.1} {:.1}",
                    px(t_ms),
                    py((a + wnd) as f64, smax)
                );
                acked = acked.max(a);
                window = wnd;
                let f = high.saturating_sub(acked);
                max_flight = max_flight.max(f).max(window);
                in_flight.push((t_ms, f, window));
            }
        }
    }
    TracePaths {
        data,
        retx,
        ack,
        win,
        in_flight,
        max_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `attr="value"` of a tag, as a number.
    fn attr(tag: &str, name: &str) -> f64 {
        let key = format!(" {name}=\"");
        let i = tag
            .find(&key)
            .unwrap_or_else(|| panic!("no {name} in {tag}"))
            + key.len();
        tag[i..i + tag[i..].find('"').unwrap()].parse().unwrap()
    }

    /// The `<text …>body</text>` elements with a class in `classes`: (tag, body).
    fn texts<'a>(svg: &'a str, classes: &[&str]) -> Vec<(&'a str, &'a str)> {
        svg.match_indices("<text ")
            .filter_map(|(i, _)| {
                let end = i + svg[i..].find('>')?;
                let tag = &svg[i..=end];
                let body = &svg[end + 1..end + 1 + svg[end + 1..].find("</text>")?];
                classes
                    .iter()
                    .any(|c| tag.contains(&format!("class=\"{c}\"")))
                    .then_some((tag, body))
            })
            .collect()
    }

    #[test]
    fn the_time_sequence_key_is_above_the_plot() {
        let mut points = Vec::new();
        for i in 0..50u64 {
            let t_ms = i as f64;
            points.push(Point::Data {
                t_ms,
                frame: 2 * i,
                seq: i * 1448,
                len: 1448,
                retransmission: false,
            });
            points.push(Point::Ack {
                t_ms: t_ms + 0.5,
                frame: 2 * i + 1,
                ack: (i + 1) * 1448,
                window: 65_535,
            });
        }
        let tr = Trace {
            connection: 1,
            sender: "10.0.0.1:40000".into(),
            receiver: "10.0.0.2:80".into(),
            sender_role: "client",
            points,
            truncated: false,
            scale_known: true,
        };
        let mut out = String::new();
        time_sequence(&tr, &mut out);
        for svg in out.split("</svg>").filter(|s| s.contains("<svg")) {
            // The y axis: the vertical axis line, from the plot's top.
            let axis = svg
                .match_indices("<line ")
                .map(|(i, _)| &svg[i..i + svg[i..].find("/>").unwrap()])
                .find(|l| l.contains("class=\"axis\"") && attr(l, "x1") == attr(l, "x2"))
                .expect("y axis");
            let top = attr(axis, "y1");
            let keys = texts(svg, &["k-data", "k-retx", "k-ack", "k-win", "k-flight"]);
            assert!(!keys.is_empty());
            for (tag, body) in keys {
                // The baseline plus the descenders stay above the plot.
                assert!(
                    attr(tag, "y") + 3.0 <= top,
                    "key {body:?} at {tag} inside the plot (top {top})"
                );
            }
        }
    }

    #[test]
    fn histogram_labels_do_not_overprint() {
        // Four modes two bins apart (10 bins a decade), labels long and at
        // the same height: drawn at their bars they overlapped each other.
        let mut bins = Vec::new();
        for k in 0..8 {
            let low = 10f64.powf(k as f64 / 10.0);
            let high = 10f64.powf((k + 1) as f64 / 10.0);
            let count = if k % 2 == 0 { 100 } else { 10 };
            bins.push(LatencyBin {
                low_ms: low,
                high_ms: high,
                count,
                parts_ms: BudgetParts(vec![("nagle_delayed_ack", count as f64 * low)]),
            });
        }
        let mut out = String::new();
        histogram(&bins, &[], &mut out);
        let all = texts(&out, &["mode", "tick"]);
        let modes = all
            .iter()
            .filter(|(t, _)| t.contains("class=\"mode\""))
            .count();
        assert!(modes >= 3, "{modes} mode labels in {out}");
        let boxes: Vec<([f64; 4], &str)> = all
            .iter()
            .map(|(tag, body)| {
                let anchor = if tag.contains("\"end\"") {
                    "end"
                } else if tag.contains("\"middle\"") {
                    "middle"
                } else {
                    "start"
                };
                let chars = body.replace("&amp;", "&").chars().count();
                (
                    text_box(attr(tag, "x"), attr(tag, "y"), anchor, chars),
                    *body,
                )
            })
            .collect();
        for (i, (a, ta)) in boxes.iter().enumerate() {
            for (b, tb) in &boxes[i + 1..] {
                let overlap = a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
                assert!(!overlap, "{ta:?} overprints {tb:?}");
            }
        }
    }
}
