//! `tcpdoctor diagnose URL`: the troubleshooting workflow in one command.

pub mod route;
