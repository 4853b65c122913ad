//! Server configuration: a TOML file where every key has a default, so an
//! empty file (or none) runs gyro on its embedded default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::config_admin::AdminSection;
pub use crate::config_nchf::NchfSection;
pub use crate::config_redis::{RedisClusterSection, StorageBackend};
use crate::config_secs;
use crate::error::Error;

/// The most workers (`server.workers`) gyro runs: each owns a shard
/// directory, a sync thread and an event loop.
pub const MAX_WORKERS: usize = 1024;

/// The whole configuration file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Listening, identity and threads.
    pub server: ServerSection,
    /// Which peers may connect and the peer timers.
    pub peers: PeersSection,
    /// Limits that hold under abuse.
    pub limits: LimitsSection,
    /// How strictly requests are checked against the dictionary.
    pub validation: ValidationSection,
    /// Durability of the ledger and the CDR files.
    pub storage: StorageSection,
    /// The operator API.
    pub admin: AdminSection,
    /// Diameter over TLS (RFC 6733 section 13).
    pub tls: TlsSection,
    /// 5G converged charging (Nchf) over HTTP/2.
    pub nchf: NchfSection,
}

/// `[storage]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// `"sync"` (default): an answer that grants, debits or refunds leaves
    /// only after its effect and its CDR are on disk (group commit, one
    /// fdatasync per batch). `"async"`: answers leave at once and the
    /// journal is synced within `async_interval_ms`; a machine crash loses
    /// up to that interval of charging. `"none"`: nothing is written at all
    /// (balances live in memory only; for measurements, never production).
    pub durability: DurabilityMode,
    /// Longest time a commit stays unsynced with `durability = "async"`.
    pub async_interval_ms: u64,
    /// A CDR file is closed (and may be picked up) once it holds this many
    /// bytes...
    pub cdr_max_bytes: u64,
    /// ...or this many seconds after its first record.
    pub cdr_max_age_secs: u64,
    /// A snapshot of a shard's ledger is taken after this many journaled
    /// records (keeps start-up time bounded).
    pub snapshot_every_records: u64,
    /// What a shard's snapshots are built from: `"memory"` (default: a
    /// thread per shard keeps a second copy of the ledger current from
    /// every committed batch and writes it at each snapshot, no journal
    /// read back, at the memory of that copy) or `"journal"` (each
    /// snapshot replays the closed journals from the disk at idle
    /// priority: no second copy, for ledgers too large to hold twice; a
    /// shard saturated with requests defers its snapshots).
    pub snapshot_source: SnapshotSourceMode,
    /// Group commit delay, microseconds: a batch of fewer than 64 answers
    /// that needs an fdatasync waits up to this long from its first answer
    /// for more to share the sync (at low rates one sync per request costs
    /// more CPU than the request). 0 commits every batch at once. Default
    /// 2000.
    pub commit_delay_us: u64,
    /// How CDR files are written: `"jsonl"` (default, one JSON object per
    /// line) or `"csv"` (the columns of `gyro cdr csv` in its order, every
    /// one on every line, empty where a value is absent; no header line).
    pub cdr_format: CdrFileFormat,
    /// Whether CDR files are compressed: `"none"` (default, plain lines)
    /// or `"zstd"` (`.jsonl.zst`, `.csv.zst`: a zstd stream of the same
    /// lines; `cdr_max_bytes` then counts compressed bytes).
    pub cdr_compression: CdrCompressionMode,
    /// The zstd level with `cdr_compression = "zstd"`, 1 (fastest) to 19.
    /// Default 1.
    pub cdr_zstd_level: i32,
    /// Where the ledger lives: `"embedded"` (default) or `"redis-cluster"`.
    pub backend: StorageBackend,
    /// `[storage.redis]`: the Redis Cluster, with `backend = "redis-cluster"`.
    pub redis: RedisClusterSection,
}

/// `storage.cdr_format`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CdrFileFormat {
    /// JSON Lines (`.jsonl`), the default.
    #[default]
    Jsonl,
    /// CSV (`.csv`).
    Csv,
}

/// `storage.snapshot_source`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotSourceMode {
    /// A copy of the ledger kept in memory, the default.
    #[default]
    Memory,
    /// The closed journals, replayed from the disk.
    Journal,
}

/// `storage.cdr_compression`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CdrCompressionMode {
    /// Plain lines, the default.
    #[default]
    None,
    /// zstd (`.jsonl.zst`, `.csv.zst`).
    Zstd,
}

impl Default for StorageSection {
    fn default() -> Self {
        StorageSection {
            durability: DurabilityMode::Sync,
            async_interval_ms: 100,
            cdr_max_bytes: 64 << 20,
            cdr_max_age_secs: 300,
            snapshot_every_records: 8_000_000,
            snapshot_source: SnapshotSourceMode::Memory,
            cdr_format: CdrFileFormat::Jsonl,
            cdr_compression: CdrCompressionMode::None,
            cdr_zstd_level: 1,
            commit_delay_us: 2000,
            backend: StorageBackend::Embedded,
            redis: RedisClusterSection::default(),
        }
    }
}

/// `[server]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// Addresses to listen on (plain TCP). Default `["127.0.0.1:3868"]`.
    /// May be empty when `tls.listen` is not.
    pub listen: Vec<SocketAddr>,
    /// Our Origin-Host. Default `ocs.gyro.test`.
    pub origin_host: String,
    /// Our Origin-Realm. Default `gyro.test`.
    pub origin_realm: String,
    /// Worker threads (event loops, one shard each). 0 = one per CPU; at
    /// most [`MAX_WORKERS`].
    pub workers: usize,
    /// Pin worker i to CPU `cpus[i % cpus.len()]` (or to CPU i when `cpus`
    /// is empty). Default false.
    pub pin_workers: bool,
    /// CPUs to pin workers to. Default: all.
    pub cpus: Vec<usize>,
    /// Directory for gyro's data (ledger, CDRs). Default `gyro-data`.
    pub data_dir: PathBuf,
    /// Charging configuration file (tariffs and accounts, see
    /// `config/example-charging.toml`). Default: the embedded demo.
    pub charging: Option<PathBuf>,
}

/// `[peers]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PeersSection {
    /// Origin-Host values allowed past CER (case-insensitive). Empty (the
    /// default) accepts any peer; the default listens on loopback only.
    pub allowed: Vec<String>,
    /// Watchdog interval Tw in seconds (RFC 3539: default 30, at least 6
    /// in a file; at most a day).
    #[serde(
        deserialize_with = "config_secs::watchdog",
        serialize_with = "config_secs::serialize"
    )]
    pub watchdog_secs: Duration,
    /// Watchdog jitter in seconds (+/-), below half of `watchdog_secs`.
    /// Default 2.
    #[serde(
        deserialize_with = "config_secs::watchdog_jitter",
        serialize_with = "config_secs::serialize"
    )]
    pub watchdog_jitter_secs: Duration,
    /// Time allowed for CER after connect (and for the TLS handshake
    /// before it, on a TLS listener), and for DPA after DPR, in seconds
    /// (more than 0, at most a day). Default 10.
    #[serde(
        deserialize_with = "config_secs::handshake_timeout",
        serialize_with = "config_secs::serialize"
    )]
    pub handshake_timeout_secs: Duration,
    /// How long a request the server sends (RAR, ASR) waits for its
    /// answer before it is given up, in seconds (more than 0, at most a
    /// day). Default 5.
    #[serde(
        deserialize_with = "config_secs::answer_timeout",
        serialize_with = "config_secs::serialize"
    )]
    pub answer_timeout_secs: Duration,
    /// Whether a peer that connects again with a higher Origin-State-Id
    /// than before (it restarted and lost its state, RFC 6733 section
    /// 8.16) has the sessions it opened before released at once, instead
    /// of at their supervision timers. Default true.
    pub release_sessions_on_restart: bool,
    /// `[[peers.identity]]`: the TLS client certificate each named peer
    /// must present. Without an entry, a verified client certificate must
    /// carry the CER's Origin-Host among its DNS names.
    pub identity: Vec<PeerIdentity>,
}

/// One `[[peers.identity]]` entry: what certificate the peer whose CER
/// says `origin_host` must present. A peer listed here is admitted only
/// over TLS with a verified client certificate that matches every key
/// given; others get DIAMETER_UNKNOWN_PEER (3010) and are disconnected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeerIdentity {
    /// The peer's Origin-Host (case-insensitive).
    pub origin_host: String,
    /// A DNS name the certificate must carry among its subject alternative
    /// names, instead of the Origin-Host (compared literally, so
    /// `"*.example.net"` names a wildcard certificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub san: Option<String>,
    /// SHA-256 of the DER certificate, 64 hex digits, colons allowed
    /// (`openssl x509 -noout -fingerprint -sha256` prints it so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint_sha256: Option<String>,
}

impl PeerIdentity {
    /// The fingerprint as bytes; the error says what is wrong with it.
    pub fn fingerprint(&self) -> Result<Option<[u8; 32]>, String> {
        let Some(text) = &self.fingerprint_sha256 else {
            return Ok(None);
        };
        let digits: Vec<u8> = text.bytes().filter(|b| !matches!(b, b':' | b' ')).collect();
        if digits.len() != 64 {
            return Err(format!(
                "{text:?} is not a SHA-256 fingerprint (64 hex digits, colons allowed)"
            ));
        }
        let mut out = [0u8; 32];
        for (i, pair) in digits.chunks(2).enumerate() {
            let hex = |b: u8| (b as char).to_digit(16);
            match (hex(pair[0]), hex(pair[1])) {
                (Some(h), Some(l)) => out[i] = (h * 16 + l) as u8,
                _ => return Err(format!("{text:?} has a character that is not a hex digit")),
            }
        }
        Ok(Some(out))
    }
}

/// `[tls]`: Diameter over TLS/TCP (RFC 6733 section 13): TLS starts at
/// connect, before the CER, on listeners of its own (port 5658 by
/// convention), beside the plain ones of `server.listen`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// Addresses of the TLS listeners. Default none (no TLS).
    pub listen: Vec<SocketAddr>,
    /// The server's certificate chain, PEM (end-entity first). Needed with
    /// `listen`.
    pub cert: Option<PathBuf>,
    /// The server's private key, PEM (PKCS#8, PKCS#1 or SEC1). Needed with
    /// `listen`.
    pub key: Option<PathBuf>,
    /// CA certificates (PEM bundle) that client certificates must chain
    /// to. Needed unless `client_auth = "none"`.
    pub client_ca: Option<PathBuf>,
    /// Client certificates: `"required"` (default), `"optional"` (a
    /// client may present none; one it presents must verify) or `"none"`.
    pub client_auth: ClientAuth,
    /// Lowest TLS version accepted: `"1.2"` (default) or `"1.3"`.
    pub min_version: TlsVersion,
}

/// `tls.client_auth`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// Every client presents a certificate that chains to `client_ca`.
    #[default]
    Required,
    /// A client may present none; one it presents must verify.
    Optional,
    /// No client certificates are asked for.
    None,
}

/// `tls.min_version`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3.
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    /// TLS 1.3 only.
    #[serde(rename = "1.3")]
    Tls13,
}

impl Default for TlsSection {
    fn default() -> Self {
        TlsSection {
            listen: Vec::new(),
            cert: None,
            key: None,
            client_ca: None,
            client_auth: ClientAuth::Required,
            min_version: TlsVersion::Tls12,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Largest message accepted, in bytes; a peer that declares a larger one
    /// is disconnected. Default 65536.
    pub max_message_size: usize,
    /// Requests in flight (unanswered) per connection; past it the
    /// connection is no longer read (TCP backpressure), or, while the event
    /// loop is overloaded, its requests past it are answered
    /// DIAMETER_TOO_BUSY at once. Default 1024.
    pub max_inflight_per_connection: usize,
    /// A message that has started but not completed within this many
    /// milliseconds closes the connection. Default 10000.
    pub message_timeout_ms: u64,
    /// Largest read buffer per connection, in bytes. Default 262144.
    pub read_buffer_size: usize,
    /// Connections open at once on the whole server; one more is closed
    /// as soon as it is accepted. Default 4096.
    pub max_connections: usize,
    /// Connections open at once from one Origin-Host; one more is answered
    /// at its CER with DIAMETER_UNABLE_TO_COMPLY (5012) and closed. 0: no
    /// limit. Default 64.
    pub max_connections_per_peer: usize,
    /// Requests waiting for one worker's shard (handed over by other
    /// workers, not yet processed); a request for a shard whose queue is
    /// full is answered DIAMETER_TOO_BUSY (3004) at once. Default 4096.
    pub max_queued_per_worker: usize,
    /// Longest time, in milliseconds, an answered request spends in the
    /// server: a request that waited more than half of it from its
    /// arrival (its bytes first seen, read or waiting in the socket) to
    /// its shard processing it is answered DIAMETER_TOO_BUSY (3004)
    /// instead, cheaply, by its connection; so is every request of an
    /// event loop whose connection's socket has not run dry for a quarter
    /// of it (behind its peer, with requests waiting where they cannot be
    /// dated). Default 500.
    pub max_queue_wait_ms: u64,
    /// Fair shares: once a shard's queue is half full, a connection with
    /// more than its share (the queue divided by the connections open, at
    /// least 8) unanswered gets 3004 first, so one flooding peer cannot
    /// starve the others. Default true.
    pub peer_fair_share: bool,
}

/// `[validation]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationSection {
    /// `"lenient"` (default) or `"strict"`.
    pub mode: ValidationMode,
}

/// `storage.durability`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityMode {
    /// Answers leave after their batch is fsynced (the default).
    #[default]
    Sync,
    /// Answers leave at once; the journal is synced within an interval.
    Async,
    /// Nothing is written (measurements only).
    None,
}

/// `validation.mode`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ValidationMode {
    /// Accept what real clients send: an M bit missing on a known AVP,
    /// Session-Id out of place (the default).
    #[default]
    Lenient,
    /// Reject every deviation from the dictionary.
    Strict,
}

impl std::fmt::Display for DurabilityMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DurabilityMode::Sync => "sync",
            DurabilityMode::Async => "async",
            DurabilityMode::None => "none",
        })
    }
}

impl std::fmt::Display for ValidationMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ValidationMode::Lenient => "lenient",
            ValidationMode::Strict => "strict",
        })
    }
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 3868))],
            origin_host: "ocs.gyro.test".into(),
            origin_realm: "gyro.test".into(),
            workers: 0,
            pin_workers: false,
            cpus: Vec::new(),
            data_dir: PathBuf::from("gyro-data"),
            charging: None,
        }
    }
}

impl Default for PeersSection {
    fn default() -> Self {
        PeersSection {
            allowed: Vec::new(),
            watchdog_secs: Duration::from_secs(30),
            watchdog_jitter_secs: Duration::from_secs(2),
            handshake_timeout_secs: Duration::from_secs(10),
            answer_timeout_secs: Duration::from_secs(5),
            release_sessions_on_restart: true,
            identity: Vec::new(),
        }
    }
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_message_size: 65536,
            max_inflight_per_connection: 1024,
            message_timeout_ms: 10_000,
            read_buffer_size: 256 * 1024,
            max_connections: 4096,
            max_connections_per_peer: 64,
            max_queued_per_worker: 4096,
            max_queue_wait_ms: 500,
            peer_fair_share: true,
        }
    }
}

impl Default for ValidationSection {
    fn default() -> Self {
        ValidationSection {
            mode: ValidationMode::Lenient,
        }
    }
}

#[allow(clippy::derivable_impls)]
impl Default for Config {
    fn default() -> Self {
        Config {
            server: ServerSection::default(),
            peers: PeersSection::default(),
            limits: LimitsSection::default(),
            validation: ValidationSection::default(),
            storage: StorageSection::default(),
            admin: AdminSection::default(),
            nchf: NchfSection::default(),
            tls: TlsSection::default(),
        }
    }
}

impl Config {
    /// Parses a configuration file's text; missing keys take their defaults.
    pub fn from_toml_str(s: &str) -> Result<Config, Error> {
        let c: Config = toml::from_str(s).map_err(|e| Error::Config(e.to_string()))?;
        c.check()?;
        if c.peers.watchdog_secs < Duration::from_secs(6) {
            return Err(Error::Config(
                "peers.watchdog_secs: RFC 3539 requires at least 6 seconds".into(),
            ));
        }
        Ok(c)
    }

    /// Checks values that parse but make no sense. (Files are also held to
    /// RFC 3539's 6-second minimum watchdog; programs, such as tests, may
    /// use shorter timers.)
    pub fn check(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::Config(m.to_string()));
        if self.server.listen.is_empty() && self.tls.listen.is_empty() {
            return bad("server.listen: at least one address is needed (here or in tls.listen)");
        }
        self.check_tls()?;
        self.nchf.check()?;
        if self.server.origin_host.is_empty() || self.server.origin_realm.is_empty() {
            return bad("server.origin_host and server.origin_realm must not be empty");
        }
        let p = &self.peers;
        for (key, d) in [
            ("peers.watchdog_secs", p.watchdog_secs),
            ("peers.watchdog_jitter_secs", p.watchdog_jitter_secs),
            ("peers.handshake_timeout_secs", p.handshake_timeout_secs),
            ("peers.answer_timeout_secs", p.answer_timeout_secs),
        ] {
            if d > config_secs::MAX {
                return Err(Error::Config(format!(
                    "{key}: at most {} seconds (one day)",
                    config_secs::MAX_SECS
                )));
            }
            if d.is_zero() && key != "peers.watchdog_jitter_secs" {
                return Err(Error::Config(format!("{key} must be positive")));
            }
        }
        if p.watchdog_jitter_secs * 2 >= p.watchdog_secs {
            return bad("peers.watchdog_jitter_secs must be below half of peers.watchdog_secs");
        }
        if self.limits.max_message_size < 20 || self.limits.max_message_size > 0x00FF_FFFF {
            return bad("limits.max_message_size must be between 20 and 16777215");
        }
        if self.limits.max_inflight_per_connection == 0 {
            return bad("limits.max_inflight_per_connection must be at least 1");
        }
        if self.limits.read_buffer_size < self.limits.max_message_size {
            return bad("limits.read_buffer_size must be at least limits.max_message_size");
        }
        if self.server.workers > MAX_WORKERS {
            return Err(Error::Config(format!(
                "server.workers = {}: at most {MAX_WORKERS} workers (0 = one per CPU)",
                self.server.workers
            )));
        }
        if self.limits.max_connections == 0 {
            return bad("limits.max_connections must be at least 1");
        }
        if self.limits.max_queued_per_worker == 0 || self.limits.max_queue_wait_ms == 0 {
            return bad(
                "limits.max_queued_per_worker and limits.max_queue_wait_ms must be at least 1",
            );
        }
        if self.storage.async_interval_ms == 0 || self.storage.cdr_max_age_secs == 0 {
            return bad("storage.async_interval_ms and storage.cdr_max_age_secs must be positive");
        }
        if !(1..=19).contains(&self.storage.cdr_zstd_level) {
            return bad("storage.cdr_zstd_level must be 1 to 19");
        }
        self.storage.check_backend()?;
        Ok(())
    }

    /// `[tls]` and `[[peers.identity]]`: the keys that must go together.
    /// (The files themselves are read when the server starts, see
    /// [`crate::tls::TlsContext::load`].)
    fn check_tls(&self) -> Result<(), Error> {
        let t = &self.tls;
        let err = |m: String| Err(Error::Config(m));
        if let Some(a) = t.listen.iter().find(|a| self.server.listen.contains(a)) {
            return err(format!(
                "tls.listen: {a} is also in server.listen (a port is either plain or TLS)"
            ));
        }
        if !t.listen.is_empty() {
            if t.cert.is_none() {
                return err(
                    "tls.cert: the server certificate (PEM) is needed with tls.listen".into(),
                );
            }
            if t.key.is_none() {
                return err(
                    "tls.key: the server's private key (PEM) is needed with tls.listen".into(),
                );
            }
            match (t.client_auth, &t.client_ca) {
                (ClientAuth::None, Some(_)) => {
                    return err(
                        "tls.client_ca is set but tls.client_auth = \"none\" asks for no \
                                client certificate"
                            .into(),
                    )
                }
                (ClientAuth::Required | ClientAuth::Optional, None) => {
                    return err(format!(
                        "tls.client_ca: the CA bundle (PEM) that verifies client certificates \
                         is needed with tls.client_auth = \"{}\" (or set it to \"none\")",
                        if t.client_auth == ClientAuth::Required {
                            "required"
                        } else {
                            "optional"
                        }
                    ))
                }
                _ => {}
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (i, p) in self.peers.identity.iter().enumerate() {
            let key = format!("peers.identity[{i}]");
            if p.origin_host.is_empty() {
                return err(format!("{key}.origin_host must not be empty"));
            }
            if p.san.is_none() && p.fingerprint_sha256.is_none() {
                return err(format!(
                    "{key} ({}): give san or fingerprint_sha256 (or both)",
                    p.origin_host
                ));
            }
            if p.san.as_deref() == Some("") {
                return err(format!("{key}.san must not be empty"));
            }
            if let Err(e) = p.fingerprint() {
                return err(format!("{key}.fingerprint_sha256: {e}"));
            }
            if seen.iter().any(|h| h.eq_ignore_ascii_case(&p.origin_host)) {
                return err(format!(
                    "{key}: a second entry for origin_host {}",
                    p.origin_host
                ));
            }
            seen.push(&p.origin_host);
        }
        if !self.peers.identity.is_empty()
            && (t.listen.is_empty() || t.client_auth == ClientAuth::None)
        {
            return err(
                "peers.identity: peers named there must present a client certificate, \
                        which needs tls.listen with tls.client_auth = \"required\" or \
                        \"optional\""
                    .into(),
            );
        }
        Ok(())
    }

    /// The number of workers to run: `server.workers`, or one per CPU.
    pub fn worker_count(&self) -> usize {
        if self.server.workers > 0 {
            self.server.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = Config::from_toml_str("[server]\nlisten_on = []\n").unwrap_err();
        assert!(e.to_string().contains("listen_on"), "{e}");
        let e = Config::from_toml_str("[peers]\nwatchdog_secs = 2\n").unwrap_err();
        assert!(e.to_string().contains("watchdog_secs"), "{e}");
        let e = Config::from_toml_str("[validation]\nmode = \"loose\"\n").unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("mode = \"loose\"") && e.contains("`lenient` or `strict`"),
            "{e}"
        );
        let e = Config::from_toml_str("[storage]\ndurability = \"maybe\"\n").unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("durability") && e.contains("`sync`, `async`, `none`"),
            "{e}"
        );
    }

    #[test]
    fn float_seconds_that_are_not_finite_or_out_of_range_are_refused_naming_the_key() {
        for key in [
            "watchdog_secs",
            "watchdog_jitter_secs",
            "handshake_timeout_secs",
            "answer_timeout_secs",
        ] {
            for value in [
                "nan", "+nan", "-nan", "inf", "-inf", "1e300", "-5", "-0.5", "86401",
            ] {
                let text = format!("[peers]\n{key} = {value}\n");
                let e = Config::from_toml_str(&text).unwrap_err().to_string();
                assert!(
                    e.contains(&format!("peers.{key}")) && e.contains("line 2"),
                    "{key} = {value}: {e}"
                );
            }
        }
    }

    #[test]
    fn float_seconds_are_durations_from_the_file_on() {
        let c = Config::from_toml_str(
            "[peers]\nwatchdog_secs = 6.5\nwatchdog_jitter_secs = 0\n\
             handshake_timeout_secs = 0.25\nanswer_timeout_secs = 86400\n",
        )
        .unwrap();
        assert_eq!(c.peers.watchdog_secs, Duration::from_millis(6500));
        assert_eq!(c.peers.watchdog_jitter_secs, Duration::ZERO);
        assert_eq!(c.peers.handshake_timeout_secs, Duration::from_millis(250));
        assert_eq!(c.peers.answer_timeout_secs, Duration::from_secs(86_400));
        // Zero where a positive time is needed, a jitter of half the
        // interval, and (from a program) more than a day.
        for (text, key) in [
            ("handshake_timeout_secs = 0", "peers.handshake_timeout_secs"),
            ("answer_timeout_secs = 0.0", "peers.answer_timeout_secs"),
            ("watchdog_jitter_secs = 15", "peers.watchdog_jitter_secs"),
        ] {
            let e = Config::from_toml_str(&format!("[peers]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
        let mut c = Config::default();
        c.peers.handshake_timeout_secs = Duration::MAX;
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("peers.handshake_timeout_secs"), "{e}");
    }

    #[test]
    fn too_many_workers_is_a_configuration_error_naming_the_bound() {
        let e = Config::from_toml_str("[server]\nworkers = 70000\n").unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("server.workers = 70000") && e.contains("1024"),
            "{e}"
        );
        assert!(Config::from_toml_str("[server]\nworkers = 1024\n").is_ok());
    }

    #[test]
    fn zero_overload_limits_are_refused() {
        for key in [
            "max_connections",
            "max_queued_per_worker",
            "max_queue_wait_ms",
        ] {
            let e = Config::from_toml_str(&format!("[limits]\n{key} = 0\n")).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    const TLS: &str = "[tls]\nlisten = [\"127.0.0.1:5658\"]\ncert = \"s.pem\"\nkey = \"s.key\"\n";

    #[test]
    fn tls_keys_parse() {
        let c = Config::from_toml_str(&format!(
            "{TLS}client_ca = \"ca.pem\"\nclient_auth = \"optional\"\nmin_version = \"1.3\"\n\
             [[peers.identity]]\norigin_host = \"pgw1.example\"\n\
             fingerprint_sha256 = \"{}\"\n\
             [[peers.identity]]\norigin_host = \"pgw2.example\"\nsan = \"*.example\"\n",
            ["AB"; 32].join(":")
        ))
        .unwrap();
        assert_eq!(c.tls.client_auth, ClientAuth::Optional);
        assert_eq!(c.tls.min_version, TlsVersion::Tls13);
        assert_eq!(c.tls.listen, vec!["127.0.0.1:5658".parse().unwrap()]);
        assert_eq!(c.peers.identity[0].fingerprint().unwrap(), Some([0xAB; 32]));
        assert_eq!(c.peers.identity[1].san.as_deref(), Some("*.example"));
        // Plain and TLS listeners at once; or TLS alone.
        let both =
            format!("[server]\nlisten = [\"127.0.0.1:3868\"]\n{TLS}client_auth = \"none\"\n");
        assert!(Config::from_toml_str(&both).is_ok());
        let alone = format!("[server]\nlisten = []\n{TLS}client_auth = \"none\"\n");
        assert!(Config::from_toml_str(&alone).is_ok());
    }

    #[test]
    fn tls_keys_that_go_together_are_named() {
        let e = |text: &str| Config::from_toml_str(text).unwrap_err().to_string();
        let cases = [
            ("[tls]\nlisten = [\"127.0.0.1:5658\"]\n", "tls.cert"),
            (
                "[tls]\nlisten = [\"127.0.0.1:5658\"]\ncert = \"s.pem\"\n",
                "tls.key",
            ),
            (TLS, "tls.client_ca"),
            (
                &format!("{TLS}client_auth = \"none\"\nclient_ca = \"ca.pem\"\n"),
                "tls.client_ca",
            ),
            (
                &format!("{TLS}client_auth = \"sometimes\"\n"),
                "client_auth",
            ),
            (&format!("{TLS}min_version = \"1.1\"\n"), "min_version"),
            (
                &format!("[server]\nlisten = [\"127.0.0.1:5658\"]\n{TLS}client_auth = \"none\"\n"),
                "tls.listen",
            ),
            ("[server]\nlisten = []\n", "server.listen"),
        ];
        for (text, key) in cases {
            let msg = e(text);
            assert!(msg.contains(key), "{key}: {msg}");
        }
    }

    #[test]
    fn peer_identities_are_checked() {
        let with_tls = |entry: &str| {
            Config::from_toml_str(&format!(
                "{TLS}client_ca = \"ca.pem\"\n[[peers.identity]]\n{entry}"
            ))
        };
        let e = with_tls("origin_host = \"pgw1\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("peers.identity[0]") && e.contains("san or fingerprint_sha256"),
            "{e}"
        );
        let e = with_tls("origin_host = \"pgw1\"\nfingerprint_sha256 = \"AB:CD\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("peers.identity[0].fingerprint_sha256"), "{e}");
        let bad_digit = "zz".repeat(32);
        let e = with_tls(&format!(
            "origin_host = \"pgw1\"\nfingerprint_sha256 = \"{bad_digit}\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("hex digit"), "{e}");
        let e = with_tls("origin_host = \"pgw1\"\nsan = \"a\"\n[[peers.identity]]\norigin_host = \"PGW1\"\nsan = \"b\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("peers.identity[1]") && e.contains("second entry"),
            "{e}"
        );
        let e = with_tls("origin_host = \"pgw1\"\nsan = \"a\"\nsubject = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("subject"), "{e}");
        // Without a TLS listener asking for client certificates no peer
        // could ever prove an identity.
        let e = Config::from_toml_str("[[peers.identity]]\norigin_host = \"pgw1\"\nsan = \"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("peers.identity") && e.contains("tls.listen"),
            "{e}"
        );
    }

    #[test]
    fn documented_example_parses() {
        let c = Config::from_toml_str(include_str!("../../../config/gyro.toml")).unwrap();
        assert_eq!(c, Config::default());
    }
}
