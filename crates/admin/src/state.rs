//! What the handlers share: the running server once it is ready, the
//! token, and the way an operation reaches its shard.

use std::sync::{Arc, OnceLock};

use gyro_ocs::operations::{AccountOp, OpError, Outcome};
use gyro_ocs::{CreditShard, ShardTotals, Subscribers};
use gyro_server::Control;
use tokio::sync::oneshot;

use crate::problem::Problem;

/// The running server, as the admin API reaches it.
#[derive(Clone)]
pub struct Backend {
    /// Hands operations to shards and reads the runtime's counters.
    pub control: Control<CreditShard>,
    /// Routes subscribers to accounts and shards.
    pub subscribers: Arc<Subscribers>,
    /// Each shard's commit and charging counters.
    pub totals: Arc<[ShardTotals]>,
    /// The Diameter over TLS settings, to reload the certificate (`None`
    /// without TLS listeners).
    pub tls: Option<Arc<gyro_server::tls::TlsContext>>,
    /// The Nchf service's counters (`None` without an `[nchf]` listener).
    pub nchf: Option<Arc<gyro_nchf::server::Stats>>,
}

/// Shared by every request.
pub(crate) struct Inner {
    /// Set once every shard has recovered and the Diameter listeners are
    /// open.
    pub backend: OnceLock<Backend>,
    /// With the Redis Cluster ledger: its counters and its accounts (list,
    /// create, show, top-up, change of status and credit limit, delete;
    /// plan changes and the session operations need the embedded store).
    pub redis: OnceLock<Redis>,
    /// The bearer token, when one is asked.
    pub token: Option<String>,
}

/// A node serving on the Redis Cluster ledger, as the admin API reaches
/// it.
pub(crate) struct Redis {
    /// The ledger's counters.
    pub telemetry: Arc<gyro_ocs::RedisTelemetry>,
    /// Answers by Result-Code.
    pub totals: Arc<[ShardTotals]>,
    /// Lists, creates, reads, tops up, changes and deletes accounts.
    pub accounts: Arc<gyro_ocs::RedisAccounts>,
}

/// The handlers' state.
pub(crate) type AppState = Arc<Inner>;

impl Inner {
    /// The backend, 503 while the server starts, or 501 on the Redis
    /// Cluster ledger (whose node has no embedded shards).
    pub fn backend(&self) -> Result<&Backend, Problem> {
        if self.redis.get().is_some() {
            return Err(Problem::not_implemented(
                "not implemented with storage.backend = \"redis-cluster\": on this backend \
                 the operator API lists, creates, shows, tops up, changes (status, credit \
                 limit) and deletes accounts only",
            ));
        }
        self.backend.get().ok_or_else(|| {
            Problem::unavailable("gyro is starting: the shards are still recovering")
        })
    }
}

impl Backend {
    /// Runs `op` on `shard` and waits until what it changed is durable.
    pub async fn call(&self, shard: usize, op: AccountOp) -> Result<Outcome, Problem> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(
                shard,
                Box::new(move |s: &mut CreditShard, _now_ms| {
                    let r = s.apply(op);
                    Box::new(move |durable| {
                        let r = if durable {
                            r
                        } else {
                            Err(OpError::Unavailable(
                                "the change could not be made durable; nothing changed".into(),
                            ))
                        };
                        let _ = tx.send(r);
                    })
                }),
            )
            .map_err(|e| Problem::unavailable(e.to_string()))?;
        rx.await
            .map_err(|_| Problem::unavailable("the server is stopping"))?
            .map_err(Problem::from)
    }

    /// The shard of an account.
    pub fn shard_of(&self, account: gyro_charging::AccountId) -> usize {
        account.shard(self.control.shards())
    }
}
