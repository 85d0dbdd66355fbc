//! `tcpdoctor lab`: reproduces a cause of TCP latency with real Linux TCP in
//! network namespaces, captures it, diagnoses it, and shows the fix working.
//!
//! A run builds three namespaces (client, router, server: [`topo`]), with a
//! userspace delay line in the router when the case needs a round trip
//! ([`delay`]); starts the built-in server ([`peers`]) or a real one
//! ([`ext`]); captures at the chosen vantage point with `tcpdoctor-live`;
//! runs the workload; feeds the frames to the analysis engine; then, with
//! `--compare`, does it all again with the case's fix applied. Everything runs
//! as threads of this process (each thread enters its namespace with setns);
//! the namespaces are removed at the end, on error, and on Ctrl-C/SIGTERM.
//!
//! The command `tcpdoctor lab list|run|fixtures|clean` is here too, but for
//! its arguments and exit status (the binary's, `crates/tcpdoctor/src/lab.rs`):
//! [`command`] checks a request and runs it, [`report`] writes its text or
//! JSON and decides whether the case reproduced.
//! Errors here are [`Error`]s: a message and its cause, printed whole by the
//! binary. The `clap` feature derives `clap::ValueEnum` for the choices the
//! command line offers (`--peer`, `--vantage`).

pub mod cases;
pub mod command;
pub mod delay;
mod error;
pub mod ext;
pub mod fixtures;
pub mod flood;
pub mod metrics;
pub mod ns;
pub mod peers;
pub mod report;
pub mod run;
mod sys;
pub mod topo;

pub use error::{Context, Error, Result};
