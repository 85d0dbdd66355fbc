//! `--insecure` and `--cacert`, shared by `load` and `diagnose` for https:// URLs.

use std::path::PathBuf;

use tcpdoctor_load::TlsOptions;

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
