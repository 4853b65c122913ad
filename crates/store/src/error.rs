//! The crate's one error type.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in the store. Every variant names the file
/// or directory involved, so an operator can act on the message alone.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file system operation failed (disk full, permission denied, I/O
    /// error, ...). [`Error::kind`] classifies it.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done ("write", "fsync", "create", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file holds something it cannot hold (not a torn tail: a damaged
    /// record before the end, a bad header, a snapshot that does not
    /// decode). Nothing was changed; the file needs a human.
    #[error("corrupt {} at byte {offset}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A journaled effect does not apply to the state rebuilt so far.
    #[error("replay of {} record {record}: {source}", path.display())]
    Replay {
        /// The journal.
        path: PathBuf,
        /// Index of the effect in the journal (0-based).
        record: u64,
        /// The engine's error.
        #[source]
        source: gyro_charging::Error,
    },
    /// A value could not be encoded.
    #[error("cannot encode {what}: {reason}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
    /// A CDR handed to [`crate::ShardStore::append`] does not carry the
    /// next sequence number of the shard (sequence numbers are gap-free).
    #[error("CDR sequence {found} where {expected} was expected")]
    Sequence {
        /// The sequence number the store expected.
        expected: u64,
        /// The one it got.
        found: u64,
    },
    /// The call is not allowed now (a batch is in flight).
    #[error("{0}")]
    Busy(&'static str),
    /// Another process (another gyro) holds the data directory: two
    /// writers would corrupt each other's journals and CDR sequences.
    #[error("{} is in use by another gyro process{}; stop it first or use another data directory", path.display(), holder.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Locked {
        /// The data directory.
        path: PathBuf,
        /// What the lock file says of its holder (its pid), if anything.
        holder: Option<String>,
    },
    /// An earlier fsync failed, so what the kernel holds for the journal is
    /// unknown: the store refuses further writes. Reopen it (rebuilding the
    /// engine from disk) to continue.
    #[error("the store of {} failed earlier ({reason}); reopen it", path.display())]
    Failed {
        /// The shard's directory.
        path: PathBuf,
        /// The first error.
        reason: String,
    },
    /// Redis could not be reached or did not answer in time (connection
    /// refused or lost, timeout, cluster down, failover in progress). The
    /// step may or may not have run: retry it with the same request key
    /// (the ledger functions remember their answers), or answer
    /// DIAMETER_TOO_BUSY (3004).
    #[error("redis unavailable ({op}): {reason}")]
    Unavailable {
        /// What was being done.
        op: &'static str,
        /// Redis's or the client's message.
        reason: String,
    },
    /// Redis answered with an error that a retry does not cure (a bad
    /// argument, a request key reused for another step, a function missing
    /// after a reload, authentication refused, an unexpected answer).
    #[error("redis {op}: {reason}")]
    Redis {
        /// What was being done.
        op: &'static str,
        /// Redis's or the client's message.
        reason: String,
    },
    /// With `replicas_ack = 1`, a step ran on its master but no replica
    /// confirmed it within the wait timeout. The answer must not be
    /// released as durable; a retry with the same request key returns the
    /// remembered answer (and waits again).
    #[error("redis: no replica acknowledged the writes to {node} within {timeout_ms} ms")]
    NotReplicated {
        /// The master, `host:port`.
        node: String,
        /// The wait timeout.
        timeout_ms: u64,
    },
}

/// A coarse classification of an [`Error`], for deciding what to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No space left on the device (or quota exceeded): free space, then
    /// retry the commit.
    DiskFull,
    /// The directory or file may not be written (permissions, read-only
    /// file system).
    PermissionDenied,
    /// Data on disk is damaged beyond a torn tail.
    Corrupt,
    /// The store must be reopened.
    Failed,
    /// A caller error (sequence gap, encoding).
    Invalid,
    /// Any other I/O error.
    Io,
    /// Another process holds the data directory.
    Locked,
    /// A remote store (Redis) is unreachable or not replicating: answer
    /// DIAMETER_TOO_BUSY (3004) and retry later.
    Unavailable,
    /// A remote store (Redis) refused the call.
    Remote,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } => match source.raw_os_error() {
                Some(28) | Some(122) => ErrorKind::DiskFull, // ENOSPC, EDQUOT
                Some(1) | Some(13) | Some(30) => ErrorKind::PermissionDenied, // EPERM, EACCES, EROFS
                _ => match source.kind() {
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                        ErrorKind::PermissionDenied
                    }
                    io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                        ErrorKind::DiskFull
                    }
                    _ => ErrorKind::Io,
                },
            },
            Error::Corrupt { .. } | Error::Replay { .. } => ErrorKind::Corrupt,
            Error::Failed { .. } => ErrorKind::Failed,
            Error::Encode { .. } | Error::Sequence { .. } | Error::Busy(_) => ErrorKind::Invalid,
            Error::Locked { .. } => ErrorKind::Locked,
            Error::Unavailable { .. } | Error::NotReplicated { .. } => ErrorKind::Unavailable,
            Error::Redis { .. } => ErrorKind::Remote,
        }
    }

    /// The file or directory the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Error::Io { path, .. }
            | Error::Corrupt { path, .. }
            | Error::Replay { path, .. }
            | Error::Failed { path, .. }
            | Error::Locked { path, .. } => Some(path),
            Error::Encode { .. }
            | Error::Sequence { .. }
            | Error::Busy(_)
            | Error::Unavailable { .. }
            | Error::Redis { .. }
            | Error::NotReplicated { .. } => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds an [`Error::Io`] mapper for `op` on `path`.
pub(crate) fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}
