//! `tcpdoctor sysctl`.

pub const HELP: &str = "";

#[derive(clap::Args)]
pub struct SysctlArgs {}

pub fn run(_args: &SysctlArgs) -> anyhow::Result<u8> {
    anyhow::bail!("not yet")
}
