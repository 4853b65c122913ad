//! The server crate's error type.

/// What can stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid; the message names the key.
    #[error("configuration: {0}")]
    Config(String),
    /// A listening socket could not be set up.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// Any other IO error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
