//! One sentence a user can act on: the symptom measured, the mechanism that
//! cost the time, who is responsible and the fix. Used by `diagnose URL`,
//! which measures the symptom itself and then analyses its own traffic.

use tcpdoctor_engine::model::{Analysis, Finding};

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
        Some(f) if s.p50_ms.is_none() && tcpdoctor_engine::rules::failure_name(f.kind) => {
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

/// The finding's sentence, said by its rule (`crates/engine/src/rules`).
fn cause(f: &Finding, a: &Analysis) -> String {
    tcpdoctor_engine::rules::cause(f, a.capture.exchanges)
}
