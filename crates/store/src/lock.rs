//! One owner per data directory: an advisory lock (`flock`) on
//! `<data_dir>/gyro.lock`, held for as long as the [`DataDirLock`] lives.
//!
//! Two processes writing the same shard directories would interleave their
//! journal frames and hand out the same CDR sequence numbers (the pick-up
//! contract broken, the journal refused at the next start). The lock is
//! taken before anything is opened for writing and released by the kernel
//! when the process ends, however it ends (SIGKILL included): a stale lock
//! file never blocks a restart. The lock file holds the holder's process
//! id (`pid N`).
//!
//! Tools that only read a data directory (`gyro ledger`, `gyro cdr`) do not
//! take the lock (they must work beside a running server and on a disk
//! they cannot write); [`DataDirLock::holder`] tells them whether a server
//! holds the directory, without taking or creating anything.

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

    /// Who holds the data directory `dir` now, if anyone, found without
    /// taking the lock and without writing anything (the lock file is only
    /// opened for reading; none is created). On Linux the kernel's list of
    /// locks (`/proc/locks`) is read; elsewhere the lock is tried shared
    /// and released at once.
    pub fn holder(dir: &Path) -> Result<Option<LockHolder>> {
        let path = dir.join(LOCK_FILE);
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let Some(kernel_pid) = held(&file).map_err(io_err("inspect the lock of", &path))? else {
            return Ok(None);
        };
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        Ok(Some(LockHolder {
            pid: parse_pid(&text).or(kernel_pid),
        }))
    }
}

/// The process holding a data directory, as [`DataDirLock::holder`] finds
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockHolder {
    /// Its process id (from the lock file, or the kernel's lock list), if
    /// known.
    pub pid: Option<u32>,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}"),
            None => f.write_str("a process of unknown pid"),
        }
    }
}

/// The pid a lock file records (`pid N`).
fn parse_pid(text: &str) -> Option<u32> {
    text.trim().strip_prefix("pid ")?.trim().parse().ok()
}

/// Whether another process holds an exclusive lock on `file`: `None` when
/// not, `Some(pid)` (the pid when the kernel says) when it does.
#[cfg(target_os = "linux")]
fn held(file: &File) -> std::io::Result<Option<Option<u32>>> {
    use std::os::unix::fs::MetadataExt;
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return held_by_trying(file);
    };
    let meta = file.metadata()?;
    let dev = meta.dev();
    // The encoding of dev_t glibc and the kernel share.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Ok(find_flock(&locks, major, minor, meta.ino()))
}

#[cfg(not(target_os = "linux"))]
fn held(file: &File) -> std::io::Result<Option<Option<u32>>> {
    held_by_trying(file)
}

/// Finds a granted `FLOCK` on the inode in the text of `/proc/locks`
/// (`1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`; waiters, marked
/// `->`, are skipped). Returns the holder's pid when it parses.
#[cfg(any(target_os = "linux", test))]
fn find_flock(locks: &str, major: u64, minor: u64, ino: u64) -> Option<Option<u32>> {
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] != "FLOCK" {
            return None;
        }
        let mut id = f[5].split(':');
        let (ma, mi, i) = (id.next()?, id.next()?, id.next()?);
        let same = u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && i.parse::<u64>().ok()? == ino;
        same.then(|| f[4].parse().ok())
    })
}

/// Tries a shared lock and releases it at once: it fails only while an
/// exclusive holder has it. (A server starting in that instant would be
/// refused; only used where the kernel's lock list cannot be read.)
fn held_by_trying(file: &File) -> std::io::Result<Option<Option<u32>>> {
    match try_lock_shared(file) {
        Ok(()) => {
            unlock(file);
            Ok(None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(Some(None)),
        Err(e) => Err(e),
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

#[cfg(unix)]
fn try_lock_shared(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this File owns for its lifetime.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(unix)]
fn unlock(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this File owns for its lifetime.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

#[cfg(not(unix))]
fn try_lock_shared(_file: &File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(unix))]
fn unlock(_file: &File) {}

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

    #[test]
    fn the_lock_file_records_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "pid 1\nleft over\n").unwrap();
        let lock = DataDirLock::acquire(dir.path()).unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert_eq!(text, format!("pid {}\n", std::process::id()));
    }

    #[test]
    fn the_holder_is_found_without_taking_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(DataDirLock::holder(dir.path()).unwrap(), None);
        assert!(
            !dir.path().join(LOCK_FILE).exists(),
            "looking created nothing"
        );
        let lock = DataDirLock::acquire(dir.path()).unwrap();
        let holder = DataDirLock::holder(dir.path()).unwrap().expect("held");
        assert_eq!(holder.pid, Some(std::process::id()));
        assert_eq!(holder.to_string(), format!("pid {}", std::process::id()));
        drop(lock);
        assert_eq!(
            DataDirLock::holder(dir.path()).unwrap(),
            None,
            "a stale file"
        );
        DataDirLock::acquire(dir.path()).expect("looking did not keep a lock");
    }

    #[test]
    fn a_flock_line_of_proc_locks_names_its_pid() {
        let locks = "1: POSIX  ADVISORY  WRITE 99 fd:01:42 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 1234 fd:01:42 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 77 fd:01:42 0 EOF\n";
        assert_eq!(find_flock(locks, 0xfd, 1, 42), Some(Some(1234)));
        assert_eq!(find_flock(locks, 0xfd, 1, 43), None);
        assert_eq!(find_flock(locks, 8, 1, 42), None);
    }
}
