//! Roaming zones: which zone a visited network (MCC + MNC) is in.
//!
//! A zone lists networks as their MCC and MNC digits (`"26201"`,
//! `"310410"`) or whole countries as an MCC alone (`"262"`). A network
//! listed by itself is found before its country.

use crate::error::{Error, Result};
use rustc_hash::FxHashMap;

/// Networks and countries, each naming a zone (an index).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneTable {
    /// MCC+MNC packed as a number with the digit count (see [`key`]).
    networks: FxHashMap<u32, u32>,
}

/// A network's or country's digits (3, 5 or 6) as one number: the digits'
/// value times 8 plus their count, so "26201" and "262010" differ.
fn key(digits: &[u8]) -> Option<u32> {
    if !matches!(digits.len(), 3 | 5 | 6) || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
    Some(v * 8 + digits.len() as u32)
}

impl ZoneTable {
    /// A table of `(MCC or MCC+MNC, zone)` pairs; a network in two zones
    /// is an error.
    pub fn new(entries: impl IntoIterator<Item = (String, u32)>) -> Result<Self> {
        let mut networks = FxHashMap::default();
        for (plmn, zone) in entries {
            let k = key(plmn.as_bytes()).ok_or_else(|| {
                Error::Config(format!(
                    "zone network {plmn:?}: expected an MCC (3 digits) or MCC and MNC (5 or 6 digits)"
                ))
            })?;
            if let Some(other) = networks.insert(k, zone) {
                if other != zone {
                    return Err(Error::Config(format!(
                        "zone network {plmn:?} is listed in two zones"
                    )));
                }
            }
        }
        Ok(ZoneTable { networks })
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.networks.is_empty()
    }

    /// The zone of the visited network `plmn` (MCC and MNC digits): the
    /// network's own entry, else its country's.
    pub fn lookup(&self, plmn: &str) -> Option<u32> {
        let d = plmn.as_bytes();
        if d.len() < 5 {
            return None;
        }
        key(d)
            .and_then(|k| self.networks.get(&k))
            .or_else(|| key(&d[..3]).and_then(|k| self.networks.get(&k)))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_is_found_before_its_country() {
        let t = ZoneTable::new([
            ("262".to_string(), 1),
            ("26201".to_string(), 2),
            ("310410".to_string(), 3),
        ])
        .unwrap();
        assert_eq!(t.lookup("26201"), Some(2));
        assert_eq!(t.lookup("26202"), Some(1));
        assert_eq!(t.lookup("310410"), Some(3));
        assert_eq!(t.lookup("31041"), None);
        assert_eq!(t.lookup("24001"), None);
        assert_eq!(t.lookup("262"), None);
        assert!(ZoneTable::new([("2620".to_string(), 1)]).is_err());
        assert!(ZoneTable::new([("262".to_string(), 1), ("262".to_string(), 2)]).is_err());
    }
}
