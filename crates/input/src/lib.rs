//! Capture input for every front end: the command line, the Python package.
//!
//! - [`Input`]: one capture (a file, standard input, bytes in memory; plain,
//!   gzip or zstd, told by the content) or several merged by time, fed to an
//!   [`Engine`](tcpdoctor_engine::Engine) from a reading thread;
//! - [`merge`]: directories expanded into their captures ([`merge::expand`]),
//!   several captures merged by time, a connection captured at two places
//!   analysed once ([`merge::open`], [`merge::Report`]);
//! - [`select`]: which packets are analysed (a filter, a time window, one
//!   connection): [`Selection`], [`Selector`], [`parse_time`];
//! - [`listing`]: the captures of many files, directories and globs, each to
//!   be analysed on its own, and the host each belongs to;
//! - [`analyze`]: one read of the input(s) through an engine, as `analyze`
//!   does it, with the report's warnings.
//!
//! Errors are `anyhow` errors whose messages name the file they are about.
#![forbid(unsafe_code)]

pub mod analyze;
mod feed;
pub mod listing;
pub mod merge;
pub mod select;

pub use feed::{Fed, Input};
pub use merge::{Expanded, Merger};
pub use select::{parse_time, OneConnection, Selection, Selector, TimePoint};
