//! What a Diameter runtime asks of the application it serves.
//!
//! The runtime (framing, peers, event loops, routing, group commit) is
//! generic; the application (credit control) is split into shards, each
//! owned by exactly one event loop. For every validated request the
//! runtime asks the application where it belongs ([`Application::route`])
//! and hands it to that shard ([`Shard::handle`]). The runtime never reads
//! application AVPs itself.
//!
//! Sessions: a request may say it opens, continues or ends a session
//! ([`SessionStep`]). The runtime keeps one Session-Id -> shard directory
//! shared by all event loops: a request that opens a session on a shard
//! pins its Session-Id there, a later request of the session that does not
//! name its shard itself ([`Route::shard`] `None`) follows the pin from any
//! connection, and a request that ends it releases the pin once the
//! application no longer remembers the session's answers
//! ([`Application::session_linger_ms`]).

use bytes::BytesMut;

use crate::connection::ShedKind;
use crate::Message;

/// Work that makes a batch durable, run off the event loop (on the
/// worker's sync thread) so the loop keeps handling requests meanwhile.
pub type SyncJob = Box<dyn FnOnce() -> std::io::Result<()> + Send>;

/// What [`Shard::flush`] asks of the runtime before it may release the
/// answers of the batch.
pub enum Flush {
    /// Nothing to wait for: release the answers now.
    Done,
    /// Release the answers once this job (which syncs to stable storage)
    /// has succeeded; on failure answer the batch's requests with
    /// [`Shard::too_busy`] instead. Syncs are costly, so the runtime may
    /// let a small batch wait briefly for more requests to share one.
    Sync(SyncJob),
    /// Like [`Flush::Sync`] for a job that only writes (no sync): the batch
    /// is committed at once.
    Write(SyncJob),
    /// The batch could not be made durable: its answers must not be sent;
    /// the runtime answers those requests with [`Shard::too_busy`].
    Failed,
    /// The batch's answers are not known yet: they depend on what this
    /// job finds out (for a ledger kept by a remote service, what that
    /// service answered). The runtime runs the job like a
    /// [`Flush::Write`] one, calls [`Shard::synced`], and then, when the
    /// job succeeded, passes each of the batch's application answers to
    /// [`Shard::settle`], which writes the answer to send in its place; when
    /// the job failed, to [`Shard::too_busy`].
    ///
    /// The contract for a shard that returns it: [`Shard::handle`] still
    /// appends exactly one answer per request at once (a provisional one,
    /// which should be the "not now" answer, so that an answer the shard
    /// cannot settle says "nothing happened"), and remembers what the
    /// request needs; `flush` hands the batch's remote work to the job;
    /// `synced` collects the job's results; `settle` finds the request a
    /// provisional answer stands for by what the answer itself carries
    /// (its header and application AVPs: the runtime reads none of them)
    /// and writes the final answer. Every answer of the batch was produced
    /// by this shard before this `flush` (one event loop, one shard), but a
    /// shard must pass through unchanged an answer it does not recognise.
    Settle(SyncJob),
}

/// What a request does to its session, for the runtime's directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStep {
    /// The request has no session (or one the runtime need not follow).
    None,
    /// The request opens a session: pin its Session-Id to the shard it is
    /// routed to.
    Open,
    /// The request continues a session.
    Continue,
    /// The request ends its session: release the pin once the session's
    /// answers are forgotten.
    End,
}

/// Where a request goes, as the application says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The shard that owns the request's state, when the request itself
    /// names it (for credit control: the account of its Subscription-Id).
    /// `None`: the shard its Session-Id is pinned to, or the shard of the
    /// connection's own event loop when the session is pinned nowhere.
    pub shard: Option<usize>,
    /// What the request does to its session.
    pub session: SessionStep,
}

/// A 64-bit key for a Session-Id, as the runtime's directory and the
/// application's released-session reports use it.
pub fn session_key(session_id: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(session_id)
}

/// One shard of the application: owned by exactly one event loop, never
/// shared, never locked.
pub trait Shard {
    /// Handles one validated application request and appends exactly one
    /// answer to `out`. `now_ms` is Unix time in milliseconds.
    fn handle(&mut self, request: &Message<'_>, now_ms: u64, out: &mut BytesMut);

    /// Rewrites `answer`, one of this shard's answers in a batch that could
    /// not be made durable, as the answer that says "not now, nothing
    /// happened" (for credit control DIAMETER_TOO_BUSY) to the same request,
    /// appended to `out`. The runtime also passes a request it refuses
    /// under overload (any shard's, never handled): the same answer, built
    /// from the request's header, Session-Id and identifying AVPs.
    fn too_busy(&mut self, answer: &Message<'_>, out: &mut BytesMut);

    /// `count` requests of `kind` were refused by their connection under
    /// overload (DIAMETER_TOO_BUSY built from the request's header, see
    /// `Connection::shed_until`): they reached no shard; count them where
    /// the shard counts its answers. The default counts nothing.
    fn shed(&mut self, _kind: ShedKind, _count: u64) {}

    /// Called about every [`Application::tick_interval_ms`] with the Unix
    /// time in milliseconds (session supervision and the like). Sessions
    /// the shard closed by itself are reported in `ended` (their
    /// [`session_key`]s) so the runtime can release their pins.
    fn tick(&mut self, _now_ms: u64, _ended: &mut Vec<u64>) {}

    /// The peer `host` restarted and lost its state (RFC 6733 section
    /// 8.16: it opened a connection with a higher Origin-State-Id than
    /// before) at `restarted_ms` (Unix time, ms): the sessions it opened
    /// before then will never be continued. A shard may end them at once
    /// instead of waiting for their supervision timers, reporting them at
    /// its next [`Shard::tick`] like the sessions it closes by itself.
    /// Called on every shard, on its own event loop, with the Unix time
    /// `now_ms`; what it changes joins its next group commit. The default
    /// does nothing.
    fn peer_restarted(&mut self, _host: &str, _restarted_ms: u64, _now_ms: u64) {}

    /// Group commit: called once per event-loop turn in which requests were
    /// handled, before any of their answers leaves. Write what the batch
    /// changed and return how to make it durable. The default keeps nothing.
    fn flush(&mut self) -> Flush {
        Flush::Done
    }

    /// The outcome of the [`Flush::Sync`] or [`Flush::Write`] job returned by the last
    /// [`Shard::flush`], before the answers are released (or failed).
    fn synced(&mut self, _result: &std::io::Result<()>) {}

    /// Writes the answer to send in place of `answer`, one of the
    /// provisional answers of a batch whose [`Flush::Settle`] job
    /// succeeded, appended to `out` (see [`Flush::Settle`]). The default
    /// sends the provisional answer unchanged.
    fn settle(&mut self, answer: &Message<'_>, out: &mut BytesMut) {
        out.extend_from_slice(answer.as_bytes());
    }

    /// The Session-Ids ([`session_key`]s) this shard holds state for, so
    /// the runtime can rebuild its directory at start: `open` sessions, and
    /// `lingering` ones that ended but whose answers the shard still
    /// remembers (their pins are released after
    /// [`Application::session_linger_ms`]).
    fn sessions(&mut self, _open: &mut Vec<u64>, _lingering: &mut Vec<u64>) {}
}

/// Builds the shards and routes requests to them. Shared by all event
/// loops, so it must be cheap to call concurrently (read-only data).
pub trait Application: Send + Sync + 'static {
    /// The shard type.
    type Shard: Shard;

    /// Builds shard `index` of `count`, on the thread that will own it.
    fn shard(&self, index: usize, count: usize) -> Self::Shard;

    /// Where `request` goes among `count` shards.
    fn route(&self, request: &Message<'_>, count: usize) -> Route;

    /// How often shards are ticked, in milliseconds.
    fn tick_interval_ms(&self) -> u64 {
        1000
    }

    /// How long after a session ends its pin is kept (so retransmissions
    /// still reach the shard that remembers the answers), in milliseconds.
    fn session_linger_ms(&self) -> u64 {
        300_000
    }
}
