//! What the runtime asks of the application it serves (credit control).

use bytes::BytesMut;
use gyro_diameter::Message;

/// Work that makes a batch durable, run off the event loop (on the worker's
/// sync thread) so the loop keeps handling requests meanwhile.
pub type SyncJob = Box<dyn FnOnce() -> std::io::Result<()> + Send>;

/// What [`ShardApp::flush`] asks of the runtime before it may release the
/// answers of the batch.
pub enum Flush {
    /// Nothing to wait for: release the answers now.
    Done,
    /// Release the answers once this job has succeeded.
    Sync(SyncJob),
    /// The batch could not be made durable: its answers must not be sent;
    /// the runtime answers those requests with DIAMETER_TOO_BUSY (3004).
    Failed,
}

/// One shard of the application: owned by exactly one worker thread, never
/// shared, never locked.
pub trait ShardApp {
    /// Handles one validated application request and appends exactly one
    /// answer to `out`. `now_ms` is Unix time in milliseconds.
    fn handle(&mut self, request: &Message<'_>, now_ms: u64, out: &mut BytesMut);

    /// Called about every [`AppFactory::tick_interval_ms`] with the Unix time
    /// in milliseconds (session supervision and the like).
    fn tick(&mut self, _now_ms: u64) {}

    /// Group commit: called once per event-loop turn in which requests were
    /// handled, before any of their answers leaves. Write what the batch
    /// changed and return how to make it durable. The default keeps nothing.
    fn flush(&mut self) -> Flush {
        Flush::Done
    }

    /// The outcome of the [`Flush::Sync`] job returned by the last
    /// [`ShardApp::flush`], before the answers are released (or failed).
    fn synced(&mut self, _result: &std::io::Result<()>) {}
}

/// Builds the shards and routes requests to them. Shared by all workers,
/// so it must be cheap to call concurrently (read-only data).
pub trait AppFactory: Send + Sync + 'static {
    /// The shard type.
    type Shard: ShardApp;

    /// Builds shard `index` of `count`, on the worker thread that will own it.
    fn shard(&self, index: usize, count: usize) -> Self::Shard;

    /// The shard that owns this request's state, if the request itself says
    /// (for credit control: the account of its Subscription-Id). `None`
    /// leaves the choice to the runtime (the shard that saw the session's
    /// first request on this connection, else the connection's own shard).
    fn route(&self, request: &Message<'_>, count: usize) -> Option<usize>;

    /// How often shards are ticked, in milliseconds.
    fn tick_interval_ms(&self) -> u64 {
        1000
    }
}
