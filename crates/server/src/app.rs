//! What the runtime asks of the application it serves (credit control).

use bytes::BytesMut;
use gyro_diameter::Message;

/// One shard of the application: owned by exactly one worker thread, never
/// shared, never locked.
pub trait ShardApp {
    /// Handles one validated application request and appends exactly one
    /// answer to `out`. `now_ms` is Unix time in milliseconds.
    fn handle(&mut self, request: &Message<'_>, now_ms: u64, out: &mut BytesMut);

    /// Called about every [`AppFactory::tick_interval_ms`] with the Unix time
    /// in milliseconds (session supervision and the like).
    fn tick(&mut self, _now_ms: u64) {}
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
