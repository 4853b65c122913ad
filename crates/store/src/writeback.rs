//! Write-behind for bulk files (CDR files, snapshots): their dirty pages
//! are sent to the disk in 1 MiB steps as they are written, so that
//! closing one (an fsync) never has tens of MB left to write, and the
//! journal's small `fdatasync`s do not queue behind them on the disk.
//!
//! Pages already on the disk are then dropped from the page cache
//! ([`release`]): gyro never reads them back on its hot path, and a writer
//! that frees the pages it wrote a moment ago gets the same, still warm,
//! pages for its next writes instead of taking fresh memory for every
//! megabyte (on a virtual machine whose host hands memory back lazily, a
//! fresh page costs several microseconds to touch the first time).

use std::fs::File;
use std::os::fd::AsRawFd;

/// Bytes written before writeback of them starts.
const CHUNK: u64 = 1 << 20;

/// Where the writeback of one file stands.
#[derive(Debug, Default)]
pub(crate) struct WriteBehind {
    /// Writeback started for `[waited, started)`.
    started: u64,
    /// Everything before this was written back.
    waited: u64,
}

impl WriteBehind {
    /// Continues from `len` bytes already in the file.
    pub(crate) fn at(len: u64) -> Self {
        WriteBehind {
            started: len,
            waited: len,
        }
    }

    /// The file now holds `len` bytes: once a chunk is dirty, waits for the
    /// chunk started before and starts writing this one. Best effort: an
    /// error shows at the file's fsync.
    pub(crate) fn advance(&mut self, file: &File, len: u64) {
        if len < self.started {
            *self = WriteBehind::at(len);
            return;
        }
        if len - self.started < CHUNK {
            return;
        }
        if self.started > self.waited {
            // SAFETY: `fd` is an open descriptor borrowed from `file` for
            // the duration of the call; sync_file_range reads no memory of
            // ours.
            let r = unsafe {
                libc::sync_file_range(
                    file.as_raw_fd(),
                    self.waited as libc::off64_t,
                    (self.started - self.waited) as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                )
            };
            if r == 0 {
                let _ = release(file, self.waited, self.started);
            }
        }
        start(file, self.started, len);
        self.waited = self.started;
        self.started = len;
    }
}

/// Drops the pages of `file` that lie wholly inside `[from, to)` from the
/// page cache (best effort). Only clean pages go: call it for a range
/// already written back (after an `fdatasync` or a waited
/// `sync_file_range`). A page that `to` cuts is kept, so an append into it
/// never has to read it back from the disk: `to` is rounded down to a page
/// here, because Linux drops a partial last page when the range ends at
/// the end of the file (the journal's case after every `fdatasync`),
/// which made each append read its first page back synchronously.
/// Returns where the next release may start (`to` rounded down).
pub(crate) fn release(file: &File, from: u64, to: u64) -> u64 {
    let to = to & !(page_size() - 1);
    if to <= from {
        return from;
    }
    // SAFETY: `fd` is an open descriptor borrowed from `file` for the
    // duration of the call; posix_fadvise reads no memory of ours.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            from as libc::off_t,
            (to - from) as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
    to
}

/// Starts writing `[from, to)` of `file` back to the disk without waiting
/// (best effort).
pub(crate) fn start(file: &File, from: u64, to: u64) {
    if to <= from {
        return;
    }
    // SAFETY: `fd` is an open descriptor borrowed from `file` for the
    // duration of the call; sync_file_range reads no memory of ours.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            from as libc::off64_t,
            (to - from) as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// The page size (a power of two), as the kernel reports it.
fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads no memory of ours.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if n > 0 && (n as u64).is_power_of_two() {
            n as u64
        } else {
            4096
        }
    })
}

/// A file written front to back with write-behind.
pub(crate) struct BulkFile {
    pub(crate) file: File,
    len: u64,
    wb: WriteBehind,
}

impl BulkFile {
    pub(crate) fn new(file: File) -> Self {
        BulkFile {
            file,
            len: 0,
            wb: WriteBehind::default(),
        }
    }
}

impl std::io::Write for BulkFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        self.wb.advance(&self.file, self.len);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}
