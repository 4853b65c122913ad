//! `[storage] backend` and `[storage.redis]`: where the ledger lives.
//!
//! ```toml
//! [storage]
//! backend = "redis-cluster"          # default "embedded"
//!
//! [storage.redis]
//! nodes = ["10.0.0.1:6379", "rediss://10.0.0.2:6379"]
//! username = "gyro"
//! password_file = "/etc/gyro/redis.password"
//! tls = true
//! tls_ca = "/etc/gyro/redis-ca.pem"
//! replicas_ack = 1
//! ```
//!
//! The Redis keys sit in a table of their own, so that an embedded
//! deployment cannot carry half a Redis configuration by mistake (any
//! `[storage.redis]` key with `backend = "embedded"` is an error) and a
//! misspelt key is named as unknown.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::StorageSection;
use crate::error::Error;

/// `storage.backend`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum StorageBackend {
    /// Journal, snapshots and CDR files in `server.data_dir` (the default,
    /// and the fast path for one machine).
    #[default]
    Embedded,
    /// Balances, reservations and remembered answers in a Redis Cluster
    /// shared by several gyro nodes (`[storage.redis]`).
    RedisCluster,
}

/// `[storage.redis]`: the Redis Cluster ledger.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RedisClusterSection {
    /// Seed nodes: `host:port`, `redis://host:port` or `rediss://host:port`
    /// (TLS). Any node of the cluster will do; the rest is discovered.
    pub nodes: Vec<String>,
    /// ACL user name. Default none (the `default` user).
    pub username: Option<String>,
    /// Password. Prefer `password_file`, which keeps it out of the
    /// configuration.
    pub password: Option<String>,
    /// File holding the password (trailing newline ignored).
    pub password_file: Option<PathBuf>,
    /// Connect with TLS (also implied by `rediss://` seeds). Default false.
    pub tls: bool,
    /// PEM bundle of the CAs that sign the nodes' certificates. Default:
    /// the system's roots.
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate, for nodes that ask for one (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// 0 (default): an answer leaves once the master has applied the step;
    /// a master failover can lose the steps its replica had not received
    /// yet (acknowledged debits with their CDRs). 1: an answer leaves only
    /// once a replica has the step too (`WAIT 1`); a failover then loses
    /// nothing acknowledged, at the cost of a replication round trip per
    /// batch.
    pub replicas_ack: u8,
    /// How long to wait for a replica with `replicas_ack = 1` before
    /// answering 3004. Default 1000.
    pub wait_timeout_ms: u64,
    /// Prefix of every key, so that deployments can share a cluster.
    /// Default `gyro`; no `{` or `}`.
    pub namespace: String,
    /// This node's name among the nodes sharing the namespace: the owner
    /// recorded with its reservations and the `node` of its CDRs. Must
    /// differ between nodes, and stay the same when a node restarts.
    /// Default: `server.origin_host`.
    pub node_id: Option<String>,
    /// How often `gyro serve` releases the reservations of sessions past
    /// their Tcc deadline (a dead node's, or any silent session's), with
    /// their session-end CDRs, milliseconds. Each round reads every slot's
    /// expiry index (one pipeline per master). Default 5000; 0 never
    /// (some node must).
    pub expire_interval_ms: u64,
    /// How often `gyro serve` exports the CDR streams it holds the lease
    /// of into `<data_dir>/cdr/`, milliseconds. Each round reads the length
    /// of every slot's stream (one pipeline per master). Default 1000; 0
    /// never (some node must, or the streams grow).
    pub export_interval_ms: u64,
    /// Most records in one exported CDR file. Default 10000.
    pub export_max_records: usize,
    /// How long a node holds a slot stream's export lease (renewed at each
    /// export; another node takes over a stream whose lease lapsed),
    /// milliseconds. Default 10000.
    pub export_lease_ms: u64,
    /// Time allowed for the cluster's answer to a batch, milliseconds;
    /// past it the batch's requests are answered 3004. Default 2000.
    pub response_timeout_ms: u64,
}

impl Default for RedisClusterSection {
    fn default() -> Self {
        RedisClusterSection {
            nodes: Vec::new(),
            username: None,
            password: None,
            password_file: None,
            tls: false,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            replicas_ack: 0,
            wait_timeout_ms: 1000,
            namespace: "gyro".into(),
            node_id: None,
            expire_interval_ms: 5000,
            export_interval_ms: 1000,
            export_max_records: 10_000,
            export_lease_ms: 10_000,
            response_timeout_ms: 2000,
        }
    }
}

/// Whether `node` reads as `host:port` or `redis[s]://host:port[/]`.
fn valid_node(node: &str) -> bool {
    let rest = node
        .strip_prefix("redis://")
        .or_else(|| node.strip_prefix("rediss://"))
        .unwrap_or(node);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = rest.rsplit_once(':') else {
        return false;
    };
    !host.is_empty() && !host.contains(['/', ' ']) && port.parse::<u16>().is_ok_and(|p| p > 0)
}

impl StorageSection {
    /// `backend` and `[storage.redis]`: the keys that must go together.
    pub(crate) fn check_backend(&self) -> Result<(), Error> {
        let r = &self.redis;
        let err = |m: String| Err(Error::Config(m));
        if self.backend == StorageBackend::Embedded {
            if *r != RedisClusterSection::default() {
                return err(
                    "storage.redis is set but storage.backend = \"embedded\" does not use it \
                     (set backend = \"redis-cluster\" or remove [storage.redis])"
                        .into(),
                );
            }
            return Ok(());
        }
        if r.nodes.is_empty() {
            return err(
                "storage.redis.nodes: at least one seed node is needed with \
                 backend = \"redis-cluster\""
                    .into(),
            );
        }
        if let Some(n) = r.nodes.iter().find(|n| !valid_node(n)) {
            return err(format!(
                "storage.redis.nodes: {n:?} is not host:port, redis://host:port or \
                 rediss://host:port"
            ));
        }
        if r.replicas_ack > 1 {
            return err(format!(
                "storage.redis.replicas_ack = {}: must be 0 or 1",
                r.replicas_ack
            ));
        }
        if r.replicas_ack == 1 && r.wait_timeout_ms == 0 {
            return err("storage.redis.wait_timeout_ms must be positive".into());
        }
        if r.password.is_some() && r.password_file.is_some() {
            return err("storage.redis: password and password_file exclude each other".into());
        }
        if r.username.is_some() && r.password.is_none() && r.password_file.is_none() {
            return err("storage.redis.username needs a password or password_file".into());
        }
        if r.tls_cert.is_some() != r.tls_key.is_some() {
            return err("storage.redis: tls_cert and tls_key go together".into());
        }
        let tls_files = r.tls_ca.is_some() || r.tls_cert.is_some();
        let tls = r.tls || r.nodes.iter().any(|n| n.starts_with("rediss://"));
        if tls_files && !tls {
            return err(
                "storage.redis: tls_ca, tls_cert and tls_key need tls = true (or rediss:// nodes)"
                    .into(),
            );
        }
        if r.node_id
            .as_ref()
            .is_some_and(|n| n.is_empty() || n.contains(' '))
        {
            return err("storage.redis.node_id: must be non-empty and without spaces".into());
        }
        if r.export_max_records == 0 {
            return err("storage.redis.export_max_records must be positive".into());
        }
        if r.export_lease_ms == 0 || r.response_timeout_ms == 0 {
            return err(
                "storage.redis.export_lease_ms and response_timeout_ms must be positive".into(),
            );
        }
        if r.namespace.is_empty() || r.namespace.contains(['{', '}']) {
            return err(format!(
                "storage.redis.namespace {:?}: must be non-empty and without braces",
                r.namespace
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn bad(toml: &str, says: &str) {
        let e = Config::from_toml_str(toml).unwrap_err().to_string();
        assert!(e.contains(says), "{toml}: {e}");
    }

    #[test]
    fn a_redis_cluster_backend_parses_with_its_section() {
        let c = Config::from_toml_str(
            "[storage]\nbackend = \"redis-cluster\"\n\
             [storage.redis]\nnodes = [\"127.0.0.1:7000\", \"rediss://redis.example:6380\"]\n\
             username = \"gyro\"\npassword_file = \"/etc/gyro/redis.pw\"\n\
             tls_ca = \"/etc/gyro/ca.pem\"\nreplicas_ack = 1\nnamespace = \"site-a\"\n",
        )
        .unwrap();
        assert_eq!(c.storage.backend, super::StorageBackend::RedisCluster);
        assert_eq!(c.storage.redis.nodes.len(), 2);
        assert_eq!(c.storage.redis.replicas_ack, 1);
        assert_eq!(c.storage.redis.wait_timeout_ms, 1000);
        let c = Config::from_toml_str("").unwrap();
        assert_eq!(c.storage.backend, super::StorageBackend::Embedded);
    }

    #[test]
    fn a_redis_configuration_that_cannot_work_is_named() {
        let rc = "[storage]\nbackend = \"redis-cluster\"\n";
        bad(rc, "storage.redis.nodes");
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"localhost\"]\n"),
            "not host:port",
        );
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"h:1\"]\nreplicas_ack = 2\n"),
            "0 or 1",
        );
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"h:1\"]\nusername = \"u\"\n"),
            "needs a password",
        );
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"h:1\"]\ntls_cert = \"c.pem\"\ntls = true\n"),
            "go together",
        );
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"h:1\"]\ntls_ca = \"ca.pem\"\n"),
            "need tls = true",
        );
        bad(
            &format!("{rc}[storage.redis]\nnodes = [\"h:1\"]\nnamespace = \"a{{b}}\"\n"),
            "namespace",
        );
        bad(
            &format!("{rc}[storage.redis]\nseeds = [\"h:1\"]\n"),
            "seeds",
        );
        bad("[storage]\nbackend = \"redis\"\n", "backend");
        bad(
            "[storage.redis]\nnodes = [\"h:1\"]\n",
            "backend = \"embedded\"",
        );
    }
}
