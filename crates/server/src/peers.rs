//! The Diameter connections of each event loop, for an operator
//! interface (`/v1/peers`, peers by state in `/metrics`).
//!
//! Each event loop keeps its own registry, touched only by that loop: a
//! connection tells it, once per turn (its input handled and its output
//! flushed), what its peer state machine says ([`Worker::peer_turn`]).
//! Nothing is done per request. A connection's requests are what its
//! turn added to the loop's request counters: between two turns of any
//! connections of a loop nothing else moves the counters summed by
//! `turn_requests` (the loop's queue of requests from other loops moves
//! only counters that cancel out in that sum), so the difference belongs
//! to the connection whose turn it was. Its answers are its requests less
//! those still in flight (not yet written). A connection that has ended
//! leaves the registry at the loop's next tick or query.
//!
//! [`Telemetry::peers`] asks every event loop for its list, on the loop,
//! so what it reads is consistent and costs the loops nothing until asked.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::Duration;

use gyro_diameter::app::Application;
use gyro_diameter::connection::Connection;
use gyro_diameter::peer::State;
use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, oneshot};

use crate::metrics::WorkerStats;
use crate::telemetry::{Telemetry, WorkerTelemetry, PEER_STATES};
use crate::worker::Worker;

/// One connected Diameter peer, as its event loop last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// The event loop (worker) serving the connection.
    pub worker: usize,
    /// The peer's address.
    pub remote: Option<SocketAddr>,
    /// Its Origin-Host, once the capabilities exchange has told it.
    pub origin_host: Option<String>,
    /// Its Origin-Realm, likewise.
    pub origin_realm: Option<String>,
    /// The connection's state: one of [`PEER_STATES`].
    pub state: &'static str,
    /// When the connection was accepted, Unix time in milliseconds.
    pub connected_since_unix_ms: u64,
    /// Application requests received (including those answered with a
    /// protocol error or DIAMETER_TOO_BUSY).
    pub requests: u64,
    /// Answers to them written to the connection.
    pub answers: u64,
}

/// A request for one event loop's list.
type Query = oneshot::Sender<Vec<PeerInfo>>;

/// The query channels of every event loop.
pub(crate) struct PeerQueries {
    senders: Box<[mpsc::UnboundedSender<Query>]>,
    receivers: Box<[Mutex<Option<mpsc::UnboundedReceiver<Query>>>]>,
}

impl PeerQueries {
    pub(crate) fn new(workers: usize) -> PeerQueries {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..workers)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                (tx, Mutex::new(Some(rx)))
            })
            .unzip();
        PeerQueries {
            senders: senders.into(),
            receivers: receivers.into(),
        }
    }
}

/// How long [`Telemetry::peers`] waits for one event loop.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

impl Telemetry {
    /// Every connected Diameter peer, asked of each event loop (one that
    /// does not answer within two seconds is left out).
    pub async fn peers(&self) -> Vec<PeerInfo> {
        let mut waiting = Vec::new();
        for tx in self.peer_queries.senders.iter() {
            let (reply, answer) = oneshot::channel();
            if tx.send(reply).is_ok() {
                waiting.push(answer);
            }
        }
        let mut all = Vec::new();
        for answer in waiting {
            if let Ok(Ok(list)) = tokio::time::timeout(QUERY_TIMEOUT, answer).await {
                all.extend(list);
            }
        }
        all
    }
}

/// One connection in its event loop's registry.
struct Entry {
    /// The connection's count of answers not yet written; dead once the
    /// connection has ended.
    inflight: Weak<Cell<usize>>,
    remote: Option<SocketAddr>,
    since_unix_ms: u64,
    state: usize,
    origin_host: Option<Box<str>>,
    origin_realm: Option<Box<str>>,
    requests: u64,
}

/// One event loop's connections, keyed by the address of their in-flight
/// counter (kept alive by the registry's weak reference, so not reused
/// while registered).
#[derive(Default)]
pub(crate) struct Registry {
    entries: RefCell<FxHashMap<usize, Entry>>,
    /// [`turn_requests`] after the last turn.
    counted: Cell<u64>,
}

/// The loop's requests that only its connections' turns count.
fn turn_requests(s: &WorkerStats, t: &WorkerTelemetry) -> u64 {
    let local = s
        .requests
        .load(Relaxed)
        .wrapping_sub(s.from_other_workers.load(Relaxed));
    let waited = s
        .too_busy_waited
        .load(Relaxed)
        .wrapping_sub(t.inbox_waited.load(Relaxed));
    local
        .wrapping_add(s.forwarded.load(Relaxed))
        .wrapping_add(s.rejected.load(Relaxed))
        .wrapping_add(s.too_busy_queue_full.load(Relaxed))
        .wrapping_add(s.too_busy_peer_share.load(Relaxed))
        .wrapping_add(waited)
}

fn state_index(s: State) -> usize {
    match s {
        State::Handshake => 0,
        State::Open => 1,
        State::Closing => 2,
        State::Closed => 3,
    }
}

impl<F: Application> Worker<F> {
    fn telemetry(&self) -> &WorkerTelemetry {
        &self.shared.telemetry.workers[self.index]
    }

    /// Hook for a connection, after each of its turns: records its peer's
    /// state and identity and the requests the turn read. `inflight` is
    /// the connection's count of answers not yet written (it identifies
    /// the connection); `remote` its peer's address.
    pub(crate) fn peer_turn(
        &self,
        conn: &Connection,
        inflight: &Rc<Cell<usize>>,
        remote: Option<SocketAddr>,
    ) {
        let t = self.telemetry();
        let now = turn_requests(self.stats(), t);
        let read = now.wrapping_sub(self.peers.counted.replace(now));
        let state = state_index(conn.state());
        let mut entries = self.peers.entries.borrow_mut();
        let e = entries
            .entry(Rc::as_ptr(inflight) as usize)
            .or_insert_with(|| {
                t.peers[0].fetch_add(1, Relaxed);
                Entry {
                    inflight: Rc::downgrade(inflight),
                    remote,
                    since_unix_ms: self.shared.unix_ms(),
                    state: 0,
                    origin_host: None,
                    origin_realm: None,
                    requests: 0,
                }
            });
        e.requests += read;
        if e.state != state {
            t.peers[e.state].fetch_sub(1, Relaxed);
            t.peers[state].fetch_add(1, Relaxed);
            e.state = state;
        }
        if e.origin_host.is_none() {
            let peer = conn.peer();
            e.origin_host = peer.remote_host().map(Into::into);
            e.origin_realm = peer.remote_realm().map(Into::into);
        }
    }

    /// Forgets the connections that have ended.
    pub(crate) fn prune_peers(&self) {
        let t = self.telemetry();
        self.peers.entries.borrow_mut().retain(|_, e| {
            let alive = e.inflight.strong_count() > 0;
            if !alive {
                t.peers[e.state].fetch_sub(1, Relaxed);
            }
            alive
        });
    }

    /// This loop's connections now.
    fn peer_list(&self) -> Vec<PeerInfo> {
        self.prune_peers();
        self.peers
            .entries
            .borrow()
            .values()
            .map(|e| {
                let unanswered = e.inflight.upgrade().map_or(0, |c| c.get() as u64);
                PeerInfo {
                    worker: self.index,
                    remote: e.remote,
                    origin_host: e.origin_host.as_deref().map(Into::into),
                    origin_realm: e.origin_realm.as_deref().map(Into::into),
                    state: PEER_STATES[e.state],
                    connected_since_unix_ms: e.since_unix_ms,
                    requests: e.requests,
                    answers: e.requests.saturating_sub(unanswered),
                }
            })
            .collect()
    }
}

/// Answers the peer queries sent to this event loop.
pub(crate) async fn serve<F: Application>(worker: Rc<Worker<F>>) {
    let rx = worker
        .shared
        .telemetry
        .peer_queries
        .receivers
        .get(worker.index)
        .and_then(|m| m.lock().ok()?.take());
    let Some(mut rx) = rx else { return };
    while let Some(reply) = rx.recv().await {
        let _ = reply.send(worker.peer_list());
    }
}
