//! Peer restarts seen in capabilities exchanges (RFC 6733 section 8.16):
//! a peer that connects again with a higher Origin-State-Id than before
//! restarted and lost its state, so the sessions it opened before will
//! never be continued.
//!
//! The last Origin-State-Id of every peer (by Origin-Host, without regard
//! to case) is kept while the server runs; one CER per connection, so a
//! lock is no cost. The first value seen from a peer says nothing (the
//! server may have restarted meanwhile), nor does a lower or equal one (a
//! second link of the same instance, or a clock gone back).

use std::collections::HashMap;
use std::sync::Mutex;

/// Peers remembered at most: past it a peer not seen yet is not
/// remembered (no inference is drawn about it), so peers announcing ever
/// new Origin-Hosts cannot grow the table without end.
const MAX_PEERS: usize = 65_536;

/// The last Origin-State-Id of each peer.
#[derive(Debug, Default)]
pub(crate) struct PeerStates {
    last: Mutex<HashMap<String, u32>>,
}

impl PeerStates {
    /// The peer `host` opened a connection announcing Origin-State-Id
    /// `state` (non-zero): whether that says it restarted since its last
    /// capabilities exchange with this server.
    pub(crate) fn restarted(&self, host: &str, state: u32) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.get_mut(host.to_ascii_lowercase().as_str()) {
            Some(seen) if state > *seen => {
                *seen = state;
                true
            }
            Some(_) => false,
            None => {
                if last.len() < MAX_PEERS {
                    last.insert(host.to_ascii_lowercase(), state);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_higher_state_than_the_last_one_seen_is_a_restart() {
        let p = PeerStates::default();
        // First sight: nothing to compare with.
        assert!(!p.restarted("pgw1.example.net", 100));
        // Another link of the same instance.
        assert!(!p.restarted("PGW1.example.net", 100));
        // A lower value (a clock gone back) is no restart.
        assert!(!p.restarted("pgw1.example.net", 99));
        assert!(p.restarted("pgw1.example.net", 101));
        // Seen once: its other links carry the same value.
        assert!(!p.restarted("pgw1.example.net", 101));
        // Peers are apart.
        assert!(!p.restarted("pgw2.example.net", 500));
        assert!(p.restarted("Pgw1.Example.Net", 102));
    }

    #[test]
    fn the_table_is_bounded_and_keeps_the_peers_it_has() {
        let p = PeerStates::default();
        for i in 0..MAX_PEERS {
            p.restarted(&format!("pgw{i}.example.net"), 1);
        }
        // A new peer past the bound is not remembered...
        p.restarted("late.example.net", 1);
        assert!(!p.restarted("late.example.net", 2));
        // ...and those remembered still are.
        assert!(p.restarted("pgw7.example.net", 2));
        assert_eq!(p.last.lock().unwrap().len(), MAX_PEERS);
    }
}
