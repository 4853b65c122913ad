//! One owner per data directory: an advisory lock (`flock`) on
//! `<data_dir>/gyro.lock`, held for as long as the [`DataDirLock`] lives.
//!
//! Two processes writing the same shard directories would interleave their
//! journal frames and hand out the same CDR sequence numbers (the pick-up
//! contract broken, the journal refused at the next start). The lock is
//! taken before anything is opened for writing and released by the kernel
//! when the process ends, however it ends (SIGKILL included): a stale lock
//! file never blocks a restart.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::{io_err, Error, Result};

/// Name of the lock file in a data directory.
pub const LOCK_FILE: &str = "gyro.lock";

/// The exclusive hold of a data directory.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    path: PathBuf,
}

impl DataDirLock {
    /// Takes the data directory `dir` (creating it and the lock file if
    /// needed), or fails at once with [`Error::Locked`] when another
    /// process holds it. The lock file records this process's id.
    pub fn acquire(dir: &Path) -> Result<DataDirLock> {
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if let Err(e) = try_lock(&file) {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    holder: (!holder.is_empty()).then(|| holder.to_string()),
                });
            }
            return Err(io_err("lock", &path)(e));
        }
        let pid = format!("pid {}\n", std::process::id());
        let written = file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(pid.as_bytes()));
        written.map_err(io_err("write", &path))?;
        Ok(DataDirLock { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this File owns for its lifetime.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(unix))]
fn try_lock(_file: &File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Locked);
        let text = err.to_string();
        assert!(text.contains("in use by another gyro process"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        DataDirLock::acquire(dir.path()).expect("free again once released");
    }
}
