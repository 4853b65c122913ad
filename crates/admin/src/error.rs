//! The crate's error type.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the admin API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A non-loopback address without a token would let anyone on the
    /// network move money.
    #[error(
        "admin.listen = {0} is not a loopback address: set admin.token_file \
         (a bearer token) or listen on 127.0.0.1"
    )]
    NoToken(SocketAddr),
    /// The token file cannot be read or is empty.
    #[error("admin.token_file {path}: {reason}")]
    Token {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The address cannot be listened on.
    #[error("admin API: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server thread or its runtime could not start.
    #[error("admin API: {0}")]
    Start(std::io::Error),
}
