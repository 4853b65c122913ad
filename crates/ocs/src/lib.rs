//! gyro's credit-control application (Diameter Credit-Control, RFC 8506;
//! 3GPP Gy/Ro): the only place that joins the codec, the charging engine
//! and the store.
//!
//! * [`gy`] maps CCR bytes to the engine's [`gyro_charging::CcRequest`]
//!   (one walk over the AVPs, in place) and its [`gyro_charging::CcAnswer`]
//!   to CCA bytes.
//! * [`CreditControl`] is the [`gyro_diameter::app::Application`] the
//!   runtime serves: it routes a request to the shard of the account its
//!   Subscription-Id names (through the read-only subscriber directory
//!   shared by all workers), and says what the request does to its
//!   session, so that a CCR-Update or -Terminate without Subscription-Id
//!   follows its session from any connection.
//! * [`CreditShard`] is one shard: an engine and its store. Every
//!   request's ledger effects, CDRs and answer record are appended to the
//!   shard's batch; once per event-loop turn the runtime asks for a group
//!   commit ([`gyro_diameter::app::Shard::flush`]): the batch is written and
//!   made durable off the event loop, then the turn's answers leave. With
//!   `durability = "async"` the answers leave at once and the store syncs
//!   within its interval.
//! * When the store cannot make a batch durable (disk full, unwritable
//!   directory, failed fsync), the batch's answers become 3004
//!   DIAMETER_TOO_BUSY ([`gyro_diameter::app::Shard::too_busy`]), the shard
//!   drops its in-memory state (which holds effects that never reached the
//!   disk) and answers 3004 until it has reloaded its state from disk,
//!   retried every few seconds: an answer of 3004 always means "nothing
//!   happened".
//! * Accounts can be created, changed, deleted and topped up while the
//!   server runs ([`operations`]): the operator API sends each operation
//!   to the shard that owns the account ([`Subscribers`] routes it, as it
//!   routes CCRs), where it is journaled in the same group commit as the
//!   CCRs of that turn.
//! * With `[storage] backend = "redis-cluster"` the balances live in a
//!   Redis Cluster shared by several gyro nodes instead:
//!   [`RedisCreditControl`] and [`RedisShard`] ([`redis_shard`]) rate
//!   locally and charge through the cluster's ledger functions, settling
//!   each turn's answers once the cluster has answered.
//! * At start each shard recovers from its data directory (the latest
//!   snapshot plus the journal after it). Accounts and balances from the
//!   charging configuration seed a shard only the first time; afterwards
//!   the data directory is the source of truth.

mod app;
mod clock;
mod error;
pub mod gy;
pub mod operations;
pub mod reauth;
mod recovery;
pub mod redis_shard;
mod shard;
mod storage;
mod subscribers;
pub mod telemetry;

pub use app::CreditControl;
pub use error::{Error, Result};
pub use redis_shard::{
    RedisAccountView, RedisAccounts, RedisAccountsError, RedisCreditControl, RedisServing,
    RedisShard, RedisTelemetry,
};
pub use shard::CreditShard;
pub use storage::{ShardTotals, Storage};
pub use subscribers::Subscribers;

use gyro_charging::ChargingConfig;

/// The charging configuration gyro runs with when none is given: demo
/// tariffs for data (rating groups 10 and 20 under 32251@3gpp.org) and SMS
/// (32274@3gpp.org), and 1,000 accounts for 46700000000..=46700000999.
pub const DEMO_CHARGING: &str = include_str!("../../../config/example-charging.toml");

/// Rebuilds the engine of shard `shard` of `count` from the data directory
/// (the snapshot plus the journal after it, as `gyro serve` does at start),
/// for tools that inspect a server's books. It writes nothing into the
/// directory (a torn last frame is left out in memory, not cut), so it
/// works on a read-only or full disk and beside a running server, whose
/// books it then reads as a snapshot of a moving state. Also returns what
/// was found on disk.
pub fn recover_engine(
    charging: &ChargingConfig,
    data_dir: &std::path::Path,
    shard: usize,
    count: usize,
) -> Result<(gyro_charging::Engine, gyro_store::RecoveryReport)> {
    recovery::read_engine(charging, data_dir, shard, count)
}

/// The demo charging configuration, parsed.
pub fn demo_charging() -> ChargingConfig {
    // The embedded file is tested to parse (see the tests below).
    ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyro_charging::SubscriptionType;

    #[test]
    fn embedded_demo_configuration_parses() {
        let c = ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap();
        let dir = c.directory().unwrap();
        assert!(dir.lookup(SubscriptionType::E164, "46700000000").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700000999").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700001000").is_none());
    }
}
