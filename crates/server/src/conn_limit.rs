//! Connection limits: at most `limits.max_connections` connections open on
//! the whole server (checked at accept: one beyond is closed at once) and
//! at most `limits.max_connections_per_peer` from one Origin-Host (checked
//! at the capabilities exchange: one beyond gets a CEA with
//! DIAMETER_UNABLE_TO_COMPLY and is closed). A slot is held by a guard and
//! given back when the guard is dropped, whatever way the connection ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The counts behind the limits, shared by all event loops. The per-peer
/// map is locked only at a capabilities exchange and at a close.
#[derive(Debug)]
pub(crate) struct ConnectionLimits {
    max_total: usize,
    max_per_peer: usize,
    open: AtomicUsize,
    per_peer: Mutex<HashMap<String, usize>>,
}

/// A slot among the server's connections, given back on drop.
#[derive(Debug)]
pub(crate) struct Accepted(Arc<ConnectionLimits>);

/// A slot among one peer's connections, given back on drop.
#[derive(Debug)]
pub(crate) struct PeerSlot(Arc<ConnectionLimits>, String);

impl ConnectionLimits {
    /// Limits of `max_total` connections, `max_per_peer` per Origin-Host
    /// (0: no per-peer limit).
    pub(crate) fn new(max_total: usize, max_per_peer: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max_total,
            max_per_peer,
            open: AtomicUsize::new(0),
            per_peer: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection just accepted, or `None` when
    /// `max_total` are open.
    pub(crate) fn accept(self: &Arc<Self>) -> Option<Accepted> {
        self.open
            .fetch_update(Relaxed, Relaxed, |n| (n < self.max_total).then_some(n + 1))
            .ok()
            .map(|_| Accepted(self.clone()))
    }

    /// A slot for a connection from `origin_host` (compared
    /// case-insensitively), or, when it already has `max_per_peer`, that
    /// limit.
    pub(crate) fn open_peer(self: &Arc<Self>, origin_host: &str) -> Result<PeerSlot, usize> {
        let key = origin_host.to_ascii_lowercase();
        if self.max_per_peer == 0 {
            return Ok(PeerSlot(self.clone(), String::new()));
        }
        let mut map = self.per_peer.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(key.clone()).or_insert(0);
        if *n >= self.max_per_peer {
            return Err(self.max_per_peer);
        }
        *n += 1;
        Ok(PeerSlot(self.clone(), key))
    }

    /// Connections open now (holding an [`Accepted`] slot).
    pub(crate) fn open(&self) -> usize {
        self.open.load(Relaxed)
    }
}

impl Drop for Accepted {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        if self.0.max_per_peer == 0 {
            return;
        }
        let mut map = self.0.per_peer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_up_to_the_limit_and_again_once_a_slot_is_given_back() {
        let l = ConnectionLimits::new(2, 0);
        let a = l.accept().unwrap();
        let _b = l.accept().unwrap();
        assert!(l.accept().is_none());
        assert_eq!(l.open(), 2);
        drop(a);
        assert_eq!(l.open(), 1);
        assert!(l.accept().is_some());
    }

    #[test]
    fn each_peer_has_its_own_limit_regardless_of_case() {
        let l = ConnectionLimits::new(100, 2);
        let a1 = l.open_peer("pgw-a.example.net").unwrap();
        let _a2 = l.open_peer("PGW-A.example.net").unwrap();
        assert_eq!(l.open_peer("pgw-a.EXAMPLE.net").unwrap_err(), 2);
        let _b = l.open_peer("pgw-b.example.net").unwrap();
        drop(a1);
        assert!(l.open_peer("pgw-a.example.net").is_ok());
        assert_eq!(l.per_peer.lock().unwrap().len(), 2);
    }

    #[test]
    fn no_per_peer_limit_keeps_no_map() {
        let l = ConnectionLimits::new(100, 0);
        let slots: Vec<_> = (0..50).map(|_| l.open_peer("one").unwrap()).collect();
        assert!(l.per_peer.lock().unwrap().is_empty());
        drop(slots);
    }
}
