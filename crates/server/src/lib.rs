//! gyro's runtime: it wires the sans-IO codec and charging crates to the
//! operating system.
//!
//! * One worker thread per core, each running a current-thread tokio event
//!   loop, optionally pinned to a CPU. No thread per connection, no pipeline.
//! * Every worker listens on every address with `SO_REUSEPORT`, so the
//!   kernel spreads connections over workers.
//! * Each worker owns one shard of the application state ([`Shard`]):
//!   plain data, no locks. A request goes to the shard that owns its state
//!   ([`Application::route`]): handled inline when that is the local shard,
//!   otherwise handed to the owning worker as a refcounted frame, in one
//!   batch per read. One busy connection therefore still uses every core.
//! * Answers are written back in batches, in completion order.
//! * Limits hold under abuse: maximum message size, maximum requests in
//!   flight per connection (then TCP backpressure), a timeout for a message
//!   that never completes, and a bounded read buffer.
//! * Overload control: a request for a shard whose queue is full, or that
//!   waited too long for its shard, is answered DIAMETER_TOO_BUSY at once
//!   (see `overload`); connections are limited in all and per peer.
//! * Diameter over TLS/TCP (RFC 6733 section 13) on listeners of its own
//!   (`[tls]`, see [`tls`]): TLS at connect, the client certificate's
//!   identity bound to the CER's Origin-Host, the certificate reloaded
//!   without a restart ([`ServerHandle::tls`]).
//! * Shutdown ([`ServerHandle::shutdown`]) stops accepting, sends DPR on
//!   every open connection, answers everything in flight, then stops.

mod commit;
pub mod config;
mod config_admin;
mod config_nchf;
mod config_redis;
pub mod config_secs;
mod conn;
mod conn_limit;
pub mod control;
mod directory;
mod error;
mod event_loop;
pub mod fd_limit;
pub mod metrics;
mod nap;
pub mod outbound;
mod overload;
mod peers;
pub mod rate_limit;
mod restarts;
pub mod telemetry;
pub mod tls;
mod warnings;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use gyro_diameter::dict::Dictionary;
use gyro_diameter::peer::PeerConfig;
use gyro_diameter::validate::Options;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

pub use config::Config;
pub use control::Control;
pub use error::Error;
pub use fd_limit::{raise_fd_limit, FdLimit};
pub use gyro_diameter::app::{Application, Flush, Route, SessionStep, Shard, SyncJob};
pub use metrics::{StatsSnapshot, WorkerStats};
pub use outbound::{Outbound, OutboundError, PeerIdentity};
pub use peers::PeerInfo;
pub use telemetry::{HistogramSnapshot, Telemetry};

/// A running server.
pub struct ServerHandle {
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    local_addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
    tls: Option<Arc<tls::TlsContext>>,
    stats: Arc<[WorkerStats]>,
}

impl ServerHandle {
    /// The addresses actually listened on (useful with port 0).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The TLS addresses actually listened on (`tls.listen`).
    pub fn tls_addrs(&self) -> &[SocketAddr] {
        &self.tls_addrs
    }

    /// The TLS settings of the TLS listeners, to reload the certificate
    /// ([`tls::TlsContext::reload`]); `None` without TLS listeners.
    pub fn tls(&self) -> Option<Arc<tls::TlsContext>> {
        self.tls.clone()
    }

    /// Each worker's counters.
    pub fn worker_stats(&self) -> Vec<StatsSnapshot> {
        self.stats.iter().map(WorkerStats::snapshot).collect()
    }

    /// All workers' counters summed.
    pub fn stats(&self) -> StatsSnapshot {
        self.worker_stats()
            .into_iter()
            .fold(StatsSnapshot::default(), |a, b| a + b)
    }

    /// Starts a graceful shutdown: stop accepting, DPR every peer, answer
    /// everything in flight.
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Waits until every worker has stopped, and returns each worker's
    /// final counters (what it answered while draining included).
    pub fn join(self) -> Vec<StatsSnapshot> {
        for t in self.threads {
            let _ = t.join();
        }
        self.stats.iter().map(WorkerStats::snapshot).collect()
    }
}

/// The peer-layer configuration derived from the server configuration.
pub fn peer_config(config: &Config, local_ips: &[std::net::IpAddr]) -> PeerConfig {
    let mut p = PeerConfig::new(&config.server.origin_host, &config.server.origin_realm);
    p.host_ip_addresses = local_ips.to_vec();
    p.product_name = "gyro".into();
    p.firmware_revision = firmware_revision();
    p.origin_state_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() as u32);
    p.allowed_peers = config.peers.allowed.clone();
    p.peer_identities = config
        .peers
        .identity
        .iter()
        .map(|i| gyro_diameter::peer::ExpectedIdentity {
            origin_host: i.origin_host.clone(),
            san: i.san.clone(),
            // Checked by Config::check.
            sha256: i.fingerprint().ok().flatten(),
        })
        .collect();
    // At most a day each (Config::check), so the milliseconds fit.
    p.watchdog_ms = config.peers.watchdog_secs.as_millis() as u64;
    p.watchdog_jitter_ms = config.peers.watchdog_jitter_secs.as_millis() as u64;
    p.handshake_timeout_ms = config.peers.handshake_timeout_secs.as_millis() as u64;
    p
}

/// The crate version as a Firmware-Revision number (major*10000 + minor*100
/// + patch).
fn firmware_revision() -> u32 {
    let v: Vec<u32> = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    v.first().unwrap_or(&0) * 10000 + v.get(1).unwrap_or(&0) * 100 + v.get(2).unwrap_or(&0)
}

fn listener(addr: SocketAddr) -> Result<std::net::TcpListener, Error> {
    let err = |source| Error::Listen { addr, source };
    let s =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    s.set_reuse_address(true).map_err(err)?;
    s.set_reuse_port(true).map_err(err)?;
    s.set_nonblocking(true).map_err(err)?;
    s.bind(&addr.into()).map_err(err)?;
    s.listen(1024).map_err(err)?;
    Ok(s.into())
}

/// Starts the server: binds every listen address once per worker and starts
/// the workers. Returns once the sockets are listening.
pub fn start<F: Application>(config: Config, factory: F) -> Result<ServerHandle, Error> {
    start_controlled(config, factory).map(|(handle, _)| handle)
}

/// [`start`], also returning the [`Control`] that hands operations to the
/// shards (for an operator interface).
pub fn start_controlled<F: Application>(
    config: Config,
    factory: F,
) -> Result<(ServerHandle, Control<F::Shard>), Error> {
    config.check()?;
    let workers = config.worker_count();
    let cpus_available = std::thread::available_parallelism().map_or(1, |n| n.get());
    if workers > cpus_available {
        tracing::warn!(
            workers,
            cpus = cpus_available,
            "more workers than CPUs: event loops will share CPUs"
        );
    }
    // The TLS files are read before any socket is bound: a bad path is an
    // error naming its key.
    let tls = if config.tls.listen.is_empty() {
        None
    } else {
        Some(Arc::new(tls::TlsContext::load(&config.tls)?))
    };
    // Bind the first worker's sockets, then the others on the ports actually
    // chosen (port 0 picks one for all).
    let mut local_addrs = Vec::new();
    let mut tls_addrs = Vec::new();
    let mut per_worker: Vec<Vec<(std::net::TcpListener, Option<Arc<tls::TlsContext>>)>> =
        (0..workers).map(|_| Vec::new()).collect();
    let plain = config.server.listen.iter().map(|a| (*a, None));
    let secure = config.tls.listen.iter().map(|a| (*a, tls.clone()));
    for (addr, tls) in plain.chain(secure) {
        // SO_REUSEPORT would let a second gyro share a port another one
        // already serves; a plain bind first makes that an error, and picks
        // the port when 0 is asked for.
        let actual = std::net::TcpListener::bind(addr)
            .and_then(|probe| probe.local_addr())
            .map_err(|source| Error::Listen { addr, source })?;
        if tls.is_some() {
            tls_addrs.push(actual);
        } else {
            local_addrs.push(actual);
        }
        for w in per_worker.iter_mut() {
            w.push((listener(actual)?, tls.clone()));
        }
    }
    let mut ips: Vec<std::net::IpAddr> = Vec::new();
    for a in local_addrs.iter().chain(&tls_addrs) {
        if !ips.contains(&a.ip()) {
            ips.push(a.ip());
        }
    }
    if ips.iter().any(|ip| ip.is_unspecified()) {
        ips = vec![std::net::IpAddr::from([127, 0, 0, 1])];
    }
    let peer = peer_config(&config, &ips);
    let validation = if config.validation.mode == config::ValidationMode::Strict {
        Options::strict()
    } else {
        Options::lenient()
    };
    let stats: Arc<[WorkerStats]> = (0..workers).map(|_| WorkerStats::default()).collect();
    let mut inboxes = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..workers {
        let (tx, rx) = mpsc::unbounded_channel();
        inboxes.push(tx);
        receivers.push(rx);
    }
    let cpus: Vec<usize> = if config.server.cpus.is_empty() {
        core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect()
    } else {
        config.server.cpus.clone()
    };
    let pin = config.server.pin_workers;
    let clock = Instant::now();
    let queues: Arc<[overload::QueueDepth]> = (0..workers).map(|_| Default::default()).collect();
    let telemetry = Arc::new(telemetry::Telemetry::new(clock, queues.clone()));
    let outbound = Arc::new(outbound::Registry::new(
        config.peers.answer_timeout_secs.as_millis() as u64,
    ));
    let (control, control_inboxes) = control::channels(
        workers,
        stats.clone(),
        telemetry.clone(),
        outbound::Outbound::new(outbound.clone()),
    );
    let admission = overload::Admission {
        max_queued: config.limits.max_queued_per_worker,
        max_wait_ms: config.limits.max_queue_wait_ms,
        fair_share: config.limits.peer_fair_share,
    };
    let limits = conn_limit::ConnectionLimits::new(
        config.limits.max_connections,
        config.limits.max_connections_per_peer,
    );
    let shared = Arc::new(worker::Shared {
        factory,
        connection: Arc::new(gyro_diameter::connection::Config {
            peer,
            dictionary: Dictionary::builtin(),
            validation,
            max_message_size: config.limits.max_message_size,
            message_timeout_ms: config.limits.message_timeout_ms,
        }),
        config,
        stats: stats.clone(),
        inboxes,
        directory: directory::Directory::new(),
        clock,
        control: control_inboxes,
        operations: control.clone(),
        peer_states: restarts::PeerStates::default(),
        admission,
        queues,
        limits,
        warnings: warnings::Warnings::new(),
        telemetry,
        outbound,
        naps: (0..workers).map(|_| nap::Nap::default()).collect(),
    });
    let ready = Arc::new(std::sync::Barrier::new(workers));
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut threads = Vec::new();
    for (index, (listeners, inbox)) in per_worker.into_iter().zip(receivers).enumerate() {
        let shared = shared.clone();
        let sd = shutdown_rx.clone();
        let ready = ready.clone();
        let cpu = (pin && !cpus.is_empty()).then(|| cpus[index % cpus.len()]);
        let t = std::thread::Builder::new()
            .name(format!("gyro-worker-{index}"))
            .spawn(move || {
                if let Some(id) = cpu {
                    if core_affinity::set_for_current(core_affinity::CoreId { id }) {
                        tracing::info!(worker = index, cpu = id, "worker pinned");
                    } else {
                        tracing::warn!(
                            worker = index,
                            cpu = id,
                            "cannot pin the worker to this CPU (server.cpus: not one this process may run on); it runs unpinned"
                        );
                    }
                }
                event_loop::run(index, shared, listeners, inbox, sd, ready)
            })?;
        threads.push(t);
    }
    let handle = ServerHandle {
        shutdown,
        threads,
        local_addrs,
        tls_addrs,
        tls,
        stats,
    };
    Ok((handle, control))
}
