//! File descriptors: the soft limit raised to the hard one at start, and a
//! spare descriptor per event loop so that, out of descriptors, a waiting
//! connection can still be accepted and closed at once (refused) instead
//! of hanging in the listen backlog.

use std::fs::File;

/// The soft and hard RLIMIT_NOFILE after raising the soft limit to the
/// hard one, and the soft limit before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit before.
    pub before: u64,
    /// The soft limit now.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raises the soft limit on open files to the hard limit.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit we pass, nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = lim.rlim_cur as u64;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the rlimit we pass, nothing else.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok(FdLimit {
        before,
        soft: lim.rlim_cur as u64,
        hard: lim.rlim_max as u64,
    })
}

/// Not available here: reports nothing raised.
#[cfg(not(unix))]
pub fn raise_fd_limit() -> std::io::Result<FdLimit> {
    Err(std::io::Error::other("no RLIMIT_NOFILE on this platform"))
}

/// Whether an accept error means the process or the system is out of file
/// descriptors.
pub(crate) fn out_of_fds(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// One descriptor held in reserve (an open `/dev/null`), given up for a
/// moment to accept a connection that would otherwise wait forever.
#[derive(Debug, Default)]
pub(crate) struct Spare(Option<File>);

impl Spare {
    /// Holds a spare descriptor (best effort).
    pub(crate) fn new() -> Self {
        let mut s = Spare(None);
        s.refill();
        s
    }

    /// Gives the spare descriptor up; true if there was one.
    pub(crate) fn release(&mut self) -> bool {
        self.0.take().is_some()
    }

    /// Takes a spare descriptor again when there is none.
    pub(crate) fn refill(&mut self) {
        if self.0.is_none() {
            self.0 = File::open("/dev/null").ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_one() {
        let l = raise_fd_limit().unwrap();
        assert_eq!(l.soft, l.hard);
        assert!(l.before <= l.soft);
    }

    #[test]
    fn a_spare_descriptor_can_be_released_and_refilled() {
        let mut s = Spare::new();
        assert!(s.release());
        assert!(!s.release());
        s.refill();
        assert!(s.release());
    }

    #[test]
    fn emfile_and_enfile_are_out_of_descriptors() {
        assert!(out_of_fds(&std::io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(out_of_fds(&std::io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!out_of_fds(&std::io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }
}
