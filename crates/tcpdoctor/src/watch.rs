//! `tcpdoctor watch`.

pub const HELP: &str = "";

#[derive(clap::Args)]
pub struct WatchArgs {}

pub fn run(_args: &WatchArgs) -> anyhow::Result<u8> {
    anyhow::bail!("not yet")
}
