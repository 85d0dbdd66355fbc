//! `tcpdoctor sockets`.

pub const HELP: &str = "";

#[derive(clap::Args)]
pub struct SocketsArgs {}

pub fn run(_args: &SocketsArgs) -> anyhow::Result<u8> {
    anyhow::bail!("not yet")
}
