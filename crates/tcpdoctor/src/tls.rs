//! `--insecure` and `--cacert`, shared by `load` and `diagnose` for https:// URLs.

use std::path::PathBuf;

use tcpdoctor_load::{Report, TlsOptions};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// https://: accept any server certificate (self-signed test servers). The handshake is
    /// still made and timed; only the certificate check is skipped.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// https://: trust the certificates in this PEM file instead of the system's.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
}

impl TlsArgs {
    pub fn options(&self) -> TlsOptions {
        TlsOptions {
            insecure: self.insecure,
            cacert: self.cacert.clone(),
        }
    }
}

/// The handshake lines of the load's text report.
pub fn text(r: &Report, out: &mut impl std::io::Write) -> std::io::Result<()> {
    if let (Some(h), Some(p50)) = (&r.tls_handshakes, r.tls_handshake_at(0.5)) {
        writeln!(
            out,
            "  TLS handshakes {}: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms (TCP established to TLS \
             established; not in the latencies above)",
            h.len(),
            p50,
            r.tls_handshake_at(0.9).unwrap_or(0.0),
            h.max() as f64 / 1000.0
        )?;
    }
    if let Some(e) = &r.tls_error {
        writeln!(out, "  {e}")?;
    }
    Ok(())
}

/// The `tls` object of the load's JSON (null for http://).
pub fn json(r: &Report) -> serde_json::Value {
    match &r.tls_handshakes {
        None => serde_json::Value::Null,
        Some(h) => serde_json::json!({
            "handshakes": h.len(),
            "handshake_ms": if h.is_empty() { serde_json::Value::Null } else { serde_json::json!({
                "p50": r.tls_handshake_at(0.5), "p90": r.tls_handshake_at(0.9),
                "p99": r.tls_handshake_at(0.99), "max": h.max() as f64 / 1000.0,
            })},
            "error": r.tls_error,
        }),
    }
}
