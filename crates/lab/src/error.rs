//! The lab's error: a message, and the error that caused it (when there is
//! one), so that a caller prints the whole chain (`{:#}` through `anyhow`,
//! or [`std::error::Error::source`] by hand).

use std::error::Error as StdError;
use std::fmt;

type Cause = Box<dyn StdError + Send + Sync + 'static>;

/// What went wrong while setting the lab up, running a case or cleaning up.
#[derive(Debug)]
pub struct Error(Repr);

#[derive(Debug)]
enum Repr {
    /// A message of the lab's own.
    Msg(String),
    /// An error of a call the lab made, as it is.
    Wrapped(Cause),
    /// What the lab was doing when `source` happened.
    Context { msg: String, source: Cause },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn msg(msg: impl fmt::Display) -> Error {
        Error(Repr::Msg(msg.to_string()))
    }

    fn wrap(e: impl StdError + Send + Sync + 'static) -> Error {
        Error(Repr::Wrapped(Box::new(e)))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Msg(m) | Repr::Context { msg: m, .. } => f.write_str(m),
            Repr::Wrapped(e) => e.fmt(f),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.0 {
            Repr::Msg(_) => None,
            Repr::Wrapped(e) => e.source(),
            Repr::Context { source, .. } => Some(source.as_ref()),
        }
    }
}

/// The errors of the calls the lab makes, taken as they are by `?`.
macro_rules! from {
    ($($t:ty),* $(,)?) => {
        $(impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::wrap(e)
            }
        })*
    };
}

from!(
    std::io::Error,
    std::num::ParseIntError,
    std::num::ParseFloatError,
    nix::Error,
    ctrlc::Error,
);

/// `.context(...)` and `.with_context(|| ...)`: says what the lab was doing
/// when a call failed (or when an `Option` was empty).
pub trait Context<T> {
    fn context(self, msg: impl fmt::Display) -> Result<T>;
    fn with_context<M: fmt::Display>(self, msg: impl FnOnce() -> M) -> Result<T>;
}

impl<T, E: StdError + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, msg: impl fmt::Display) -> Result<T> {
        self.map_err(|e| {
            Error(Repr::Context {
                msg: msg.to_string(),
                source: Box::new(e),
            })
        })
    }

    fn with_context<M: fmt::Display>(self, msg: impl FnOnce() -> M) -> Result<T> {
        self.map_err(|e| {
            Error(Repr::Context {
                msg: msg().to_string(),
                source: Box::new(e),
            })
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, msg: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Error::msg(msg))
    }

    fn with_context<M: fmt::Display>(self, msg: impl FnOnce() -> M) -> Result<T> {
        self.ok_or_else(|| Error::msg(msg()))
    }
}

/// Returns early with an [`Error`] made of a `format!` message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::msg(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_reads_outside_in() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e: Result<()> = Err(io).context("reading the case");
        let e = e.context("running nagle").expect_err("an error");
        assert_eq!(e.to_string(), "running nagle");
        let mut chain = vec![e.to_string()];
        let mut cause = e.source();
        while let Some(c) = cause {
            chain.push(c.to_string());
            cause = c.source();
        }
        assert_eq!(chain, ["running nagle", "reading the case", "no such file"]);
    }

    #[test]
    fn a_wrapped_error_reads_as_itself() {
        let e = Error::from(std::io::Error::other("boom"));
        assert_eq!(e.to_string(), "boom");
        assert!(e.source().is_none());
        let none: Option<u8> = None;
        assert_eq!(
            none.context("no port").expect_err("empty").to_string(),
            "no port"
        );
    }
}
