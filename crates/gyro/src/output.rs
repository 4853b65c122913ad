//! What the tools do with their standard output.
//!
//! The Rust runtime ignores SIGPIPE, so a write to a closed pipe (`gyro
//! ledger | head -1`) returns an error, and `println!` panics on it. A
//! tool that prints is a filter: when its reader goes away it should stop
//! quietly, as `cat` does. [`quiet_on_closed_pipe`] restores the default
//! action of SIGPIPE for the tools (not for the server, whose sockets
//! must see EPIPE as an error), so the process ends at the first write
//! after the reader left, with no message (status 141 in a shell).

/// Lets SIGPIPE end the process silently (its default action).
pub fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default, before any
    // other thread is started; no handler runs Rust code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
