//! Requests the server starts (for credit control: Re-Auth-Request and
//! Abort-Session-Request): "send this request to the peer of this session
//! and give me its answer".
//!
//! * Every open connection registers here with its peer's identity and a
//!   channel its task reads requests from.
//! * Every application request that carries a Session-Id notes the
//!   connection it came on (`Registry::note`): the session's owner is the
//!   connection that last sent a request for it. The pin is dropped when
//!   the session ends. It also notes the request's Origin-Host and
//!   Origin-Realm when they are not the connection's peer's (a relay or
//!   proxy between gyro and the client): a request gyro starts is sent on
//!   the connection but addressed (Destination-Host and -Realm) to the
//!   client that holds the session (RFC 6733 section 6.5, RFC 8506
//!   section 5.5), which the agent forwards it to.
//! * [`Outbound::request`] hands the request to the owning connection's
//!   task, which sends it with a fresh Hop-by-Hop Identifier (the sans-IO
//!   connection matches the answer), and returns the answer.
//! * When that connection is gone, or goes before the answer comes, the
//!   request goes to another open connection of the same peer (same
//!   Origin-Host), with the T flag when it had already been sent (RFC 6733
//!   section 5.5.4). With no connection of the peer left it fails with
//!   [`OutboundError::PeerGone`] and a WARN line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use gyro_diameter::app::session_key;
use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

/// Bits of an owner value that hold the connection id (the peer index is
/// above them).
const CONN_BITS: u32 = 40;

/// The identity of a Diameter peer, from its capabilities exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    /// Its Origin-Host.
    pub host: String,
    /// Its Origin-Realm.
    pub realm: String,
}

/// Why a request the server started got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// No request of the session was seen on any open connection.
    #[error("no connection carries this session")]
    UnknownSession,
    /// The peer holding the session has no open connection left.
    #[error("peer {0} is gone: no open connection to send on")]
    PeerGone(String),
    /// No answer came in time.
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The server is stopping.
    #[error("the server is stopping")]
    Stopped,
}

/// A request on its way to a connection.
pub(crate) struct Job {
    /// The whole request (its Hop-by-Hop Identifier is set per connection).
    pub request: Bytes,
    /// Whether it was sent before (on a connection that went away).
    pub sent: bool,
    /// The connections it was handed to, so failover never picks one twice.
    pub tried: Vec<u64>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<Bytes, OutboundError>>,
    /// Index of the peer it is for.
    pub peer: u32,
}

struct ConnEntry {
    peer: u32,
    tx: mpsc::UnboundedSender<Job>,
}

#[derive(Default)]
struct Peers {
    list: Vec<Arc<PeerIdentity>>,
    index: FxHashMap<String, u32>,
}

/// Clients seen behind agents (Origin-Host and -Realm of requests that
/// are not their connection's peer's): index `i` is `list[i - 1]`, 0
/// means "the connection's peer". At most [`MAX_ORIGINS`] are kept; past
/// them a request's client is taken as its connection's peer.
#[derive(Default)]
struct Origins {
    list: Vec<Arc<PeerIdentity>>,
    index: FxHashMap<(String, String), u32>,
}

/// Clients behind agents remembered at most (a bound on what requests
/// naming ever new hosts can make gyro keep).
const MAX_ORIGINS: usize = 65_536;

/// Who a session's requests came from: the connection and its peer, and
/// the client behind the peer (an [`Origins`] index, 0 for the peer
/// itself).
#[derive(Clone, Copy)]
struct Owner {
    conn_peer: u64,
    origin: u32,
}

/// What all event loops share about connections and session owners.
pub(crate) struct Registry {
    /// Session key -> owning connection and peer, in [`OWNER_SHARDS`]
    /// maps picked by the key's low bits: a request's note is one
    /// uncontended lock and a probe of an open-addressing table, with no
    /// allocation per session (a lock-free map allocated every entry).
    owners: Box<[Mutex<FxHashMap<u64, Owner>>]>,
    conns: Mutex<FxHashMap<u64, ConnEntry>>,
    /// Peers seen, never forgotten (bounded by the peers allowed).
    peers: Mutex<Peers>,
    /// Clients seen behind agents.
    origins: Mutex<Origins>,
    next_conn: AtomicU64,
    /// How long a request waits for its answer, in milliseconds.
    pub timeout_ms: u64,
}

/// An open connection's registration: its id and where its requests come
/// from.
pub(crate) struct Registration {
    pub id: u64,
    pub peer: u32,
    pub rx: mpsc::UnboundedReceiver<Job>,
    /// The peer's Origin-Host, as its capabilities exchange gave it.
    pub host: Arc<str>,
    /// The last client behind this connection's peer requests named, and
    /// its [`Origins`] index (a relay's requests mostly come from a few
    /// clients in turn; a client that names itself is index 0 at once).
    last_origin: Option<LastOrigin>,
}

/// A client behind a connection's peer, as its requests name it, and its
/// [`Origins`] index.
struct LastOrigin {
    host: Box<[u8]>,
    realm: Box<[u8]>,
    index: u32,
}

impl Registration {
    /// The [`Origins`] index of a request with this Origin-Host and
    /// Origin-Realm on this connection: 0 when the host is the peer's.
    pub(crate) fn origin(&mut self, registry: &Registry, host: &[u8], realm: &[u8]) -> u32 {
        if host.eq_ignore_ascii_case(self.host.as_bytes()) {
            return 0;
        }
        if let Some(o) = &self.last_origin {
            if *o.host == *host && *o.realm == *realm {
                return o.index;
            }
        }
        let index = registry.origin(host, realm);
        self.last_origin = Some(LastOrigin {
            host: host.into(),
            realm: realm.into(),
            index,
        });
        index
    }
}

/// Maps the session owners are spread over (a power of two).
const OWNER_SHARDS: usize = 64;

impl Registry {
    /// The owner map holding `key`, locked.
    fn owners_of(&self, key: u64) -> std::sync::MutexGuard<'_, FxHashMap<u64, Owner>> {
        self.owners[(key >> 7) as usize & (OWNER_SHARDS - 1)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn new(timeout_ms: u64) -> Registry {
        Registry {
            owners: (0..OWNER_SHARDS)
                .map(|_| Mutex::new(FxHashMap::default()))
                .collect(),
            conns: Mutex::new(FxHashMap::default()),
            peers: Mutex::new(Peers::default()),
            origins: Mutex::new(Origins::default()),
            next_conn: AtomicU64::new(1),
            timeout_ms,
        }
    }

    /// A connection opened with the peer `host`/`realm`.
    pub(crate) fn open(&self, host: &str, realm: &str) -> Registration {
        let peer = {
            let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
            let key = host.to_ascii_lowercase();
            match peers.index.get(&key) {
                Some(&i) => {
                    if peers.list[i as usize].realm != realm {
                        peers.list[i as usize] = Arc::new(PeerIdentity {
                            host: host.into(),
                            realm: realm.into(),
                        });
                    }
                    i
                }
                None => {
                    let i = peers.list.len() as u32;
                    peers.list.push(Arc::new(PeerIdentity {
                        host: host.into(),
                        realm: realm.into(),
                    }));
                    peers.index.insert(key, i);
                    i
                }
            }
        };
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed) & ((1 << CONN_BITS) - 1);
        let (tx, rx) = mpsc::unbounded_channel();
        self.conns_mut().insert(id, ConnEntry { peer, tx });
        Registration {
            id,
            peer,
            rx,
            host: host.into(),
            last_origin: None,
        }
    }

    /// The [`Origins`] index of the client `host`/`realm` (not valid
    /// UTF-8, or past [`MAX_ORIGINS`]: 0, the connection's peer).
    fn origin(&self, host: &[u8], realm: &[u8]) -> u32 {
        let (Ok(host), Ok(realm)) = (std::str::from_utf8(host), std::str::from_utf8(realm)) else {
            return 0;
        };
        let mut origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        let key = (host.to_ascii_lowercase(), realm.to_ascii_lowercase());
        if let Some(&i) = origins.index.get(&key) {
            return i;
        }
        if origins.list.len() >= MAX_ORIGINS {
            return 0;
        }
        origins.list.push(Arc::new(PeerIdentity {
            host: host.into(),
            realm: realm.into(),
        }));
        let i = origins.list.len() as u32;
        origins.index.insert(key, i);
        i
    }

    /// The connection `id` closed: nothing more is sent on it.
    pub(crate) fn close(&self, id: u64) {
        self.conns_mut().remove(&id);
    }

    fn conns_mut(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, ConnEntry>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of session `key` came on connection `conn` of peer
    /// `peer`; `ends`: it ends the session. `origin` gives the client
    /// behind the peer ([`Registration::origin`]); it is asked only when
    /// the session is new here or comes from another peer than before (a
    /// session's client does not change while one peer carries it).
    pub(crate) fn note(
        &self,
        key: u64,
        conn: u64,
        peer: u32,
        ends: bool,
        origin: impl FnOnce() -> u32,
    ) {
        let conn_peer = (u64::from(peer) << CONN_BITS) | conn;
        let mut owners = self.owners_of(key);
        if ends {
            owners.remove(&key);
            return;
        }
        match owners.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let o = e.get_mut();
                if o.conn_peer >> CONN_BITS != u64::from(peer) {
                    o.origin = origin();
                }
                o.conn_peer = conn_peer;
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Owner {
                    conn_peer,
                    origin: origin(),
                });
            }
        }
    }

    /// The session `key` ended without a request saying so.
    pub(crate) fn forget(&self, key: u64) {
        self.owners_of(key).remove(&key);
    }

    fn owner(&self, key: u64) -> Option<(u64, u32, u32)> {
        let o = *self.owners_of(key).get(&key)?;
        let v = o.conn_peer;
        Some((
            v & ((1 << CONN_BITS) - 1),
            (v >> CONN_BITS) as u32,
            o.origin,
        ))
    }

    /// The client `origin` names ([`Origins`]; `None` for 0).
    fn origin_identity(&self, origin: u32) -> Option<Arc<PeerIdentity>> {
        let i = (origin as usize).checked_sub(1)?;
        let origins = self.origins.lock().unwrap_or_else(|e| e.into_inner());
        origins.list.get(i).cloned()
    }

    fn peer(&self, index: u32) -> Option<Arc<PeerIdentity>> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.list.get(index as usize).cloned()
    }

    /// Hands `job` to connection `preferred` when it is open and not tried
    /// yet, else to another open connection of its peer; fails it when the
    /// peer has none left.
    pub(crate) fn dispatch(&self, mut job: Job, preferred: Option<u64>) {
        let mut preferred = preferred;
        loop {
            let conns = self.conns_mut();
            let pick = preferred
                .take()
                .filter(|id| !job.tried.contains(id) && conns.contains_key(id))
                .or_else(|| {
                    conns
                        .iter()
                        .filter(|(id, c)| c.peer == job.peer && !job.tried.contains(id))
                        .map(|(id, _)| *id)
                        .min()
                });
            let Some(id) = pick else { break };
            job.tried.push(id);
            match conns[&id].tx.send(job) {
                Ok(()) => return,
                // Its task just ended: the next one.
                Err(e) => job = e.0,
            }
        }
        let host = self
            .peer(job.peer)
            .map_or_else(|| "?".to_string(), |p| p.host.clone());
        warn!(
            peer = host,
            "peer gone: no open connection of the peer that holds the session; request not sent"
        );
        let _ = job.reply.send(Err(OutboundError::PeerGone(host)));
    }

    /// A connection that had `job` closed before its answer came: send it
    /// again on another connection of the peer.
    pub(crate) fn failover(&self, job: Job) {
        if let Some(p) = self.peer(job.peer) {
            info!(
                peer = p.host,
                retransmission = job.sent,
                "connection closed with a request of ours outstanding: failing over to another connection of the peer"
            );
        }
        self.dispatch(job, None);
    }
}

/// Sends requests the server starts to the peer of a session; cheap to
/// clone, usable from any thread (see the module documentation).
#[derive(Clone)]
pub struct Outbound {
    registry: Arc<Registry>,
}

impl Outbound {
    pub(crate) fn new(registry: Arc<Registry>) -> Outbound {
        Outbound { registry }
    }

    /// The peer that holds the session `session_id`: the one whose
    /// connection last sent a request for it.
    pub fn peer(&self, session_id: &[u8]) -> Option<PeerIdentity> {
        let (_, peer, _) = self.registry.owner(session_key(session_id))?;
        self.registry.peer(peer).map(|p| (*p).clone())
    }

    /// The client that holds the session `session_id`, for the
    /// Destination-Host and Destination-Realm of a request gyro starts:
    /// the Origin-Host and Origin-Realm of its last request when they are
    /// not its connection's peer's (a client behind a relay or proxy, which
    /// forwards the request to it), else that peer.
    pub fn client(&self, session_id: &[u8]) -> Option<PeerIdentity> {
        let (_, peer, origin) = self.registry.owner(session_key(session_id))?;
        let identity = match self.registry.origin_identity(origin) {
            Some(client) => client,
            None => self.registry.peer(peer)?,
        };
        Some((*identity).clone())
    }

    /// How long a request waits for its answer.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.registry.timeout_ms)
    }

    /// Sends `request` (a whole encoded request; its Hop-by-Hop Identifier
    /// is replaced) on the connection that owns `session_id`, failing over
    /// to another connection of the same peer, and returns the answer.
    pub async fn request(&self, session_id: &[u8], request: Bytes) -> Result<Bytes, OutboundError> {
        let (conn, peer, _) = self
            .registry
            .owner(session_key(session_id))
            .ok_or(OutboundError::UnknownSession)?;
        let (reply, answer) = oneshot::channel();
        let job = Job {
            request,
            sent: false,
            tried: Vec::new(),
            reply,
            peer,
        };
        self.registry.dispatch(job, Some(conn));
        // Each connection times its own wait; this bounds a failover chain.
        let bound = self.timeout() * 3 + Duration::from_secs(1);
        match tokio::time::timeout(bound, answer).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(OutboundError::Stopped),
            Err(_) => Err(OutboundError::Timeout(bound.as_millis() as u64)),
        }
    }
}
