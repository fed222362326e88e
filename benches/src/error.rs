//! The one error type of `nemesis-bench`: what went wrong, in words a user can act on.

use std::path::Path;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line asks for something that cannot be done (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// A file, pipe or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The system's answer.
        #[source]
        source: std::io::Error,
    },
    /// A measured program failed, printed nothing usable, or ran out of time.
    #[error("{0}")]
    Run(String),
    /// The transport itself failed (in a rank).
    #[error("nemesis: {0}")]
    Nemesis(#[from] nemesis::Error),
}

/// Results of `nemesis-bench`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// An I/O error on `path`.
    pub fn file(what: &str, path: &Path, source: std::io::Error) -> Error {
        Error::io(format!("{what} {}", path.display()), source)
    }

    /// The process exit code for this error: 2 for a bad command line, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}
