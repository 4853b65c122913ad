//! Destinations by longest-prefix match of the called number.
//!
//! Prefixes and numbers are strings of decimal digits, packed four bits a
//! digit (digit + 1, so that a prefix sorts right before the numbers that
//! extend it) into a `u64`, most significant first: at most
//! [`MAX_DIGITS`] digits are looked at, which covers E.164 (15 digits).
//! The table is one sorted array of packed prefixes; each entry knows its
//! longest proper prefix in the table (its parent). A lookup is one
//! binary search for the last prefix at or before the number and, when
//! that one is not a prefix of the number, a short walk up its parents:
//! any prefix of the number sorts before it, and the longest one is an
//! ancestor of the entry found. 100,000 prefixes take 1.6 MB.

use crate::error::{Error, Result};

/// Most digits of a number or prefix that are compared.
pub const MAX_DIGITS: usize = 16;

const NONE: u32 = u32::MAX;

/// A table of digit prefixes, each naming a destination (an index).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixTable {
    /// Packed prefixes, sorted.
    keys: Vec<u64>,
    /// For each: digit count (low byte) and destination (high bits).
    meta: Vec<u32>,
    /// For each: index of its longest proper prefix in the table, or NONE.
    parent: Vec<u32>,
}

/// The packed form of the first [`MAX_DIGITS`] digits of `digits` and how
/// many there were.
fn pack(digits: &[u8]) -> (u64, u8) {
    let mut key = 0u64;
    let n = digits.len().min(MAX_DIGITS);
    for (i, d) in digits[..n].iter().enumerate() {
        key |= u64::from(d - b'0' + 1) << (60 - 4 * i);
    }
    (key, n as u8)
}

/// The mask of the first `len` digits.
fn mask(len: u8) -> u64 {
    if len == 0 {
        0
    } else {
        !0u64 << (64 - 4 * u32::from(len))
    }
}

/// The digits a called-party address dials: the user part of a `tel:`,
/// `sip:` or `sips:` URI or a plain number, without a leading `+`, up to
/// the first character that is not a digit (visual separators `-`, `.`,
/// `(`, `)` and spaces are skipped). Empty when it dials no digits.
pub fn dialled_digits(address: &str, out: &mut [u8; MAX_DIGITS]) -> usize {
    let mut s = address.trim();
    // A URI scheme only when it does not start with a digit or '+'.
    if !s.starts_with(|c: char| c.is_ascii_digit() || c == '+') {
        for scheme in ["tel:", "sip:", "sips:"] {
            if s.len() >= scheme.len() && s[..scheme.len()].eq_ignore_ascii_case(scheme) {
                s = &s[scheme.len()..];
                break;
            }
        }
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut n = 0;
    for b in s.bytes() {
        match b {
            b'0'..=b'9' => {
                if n == MAX_DIGITS {
                    break;
                }
                out[n] = b;
                n += 1;
            }
            b'-' | b'.' | b'(' | b')' | b' ' => {}
            _ => break,
        }
    }
    n
}

impl PrefixTable {
    /// A table of `(prefix, destination)` pairs. Prefixes are digit
    /// strings (a leading `+` is ignored) of 1 to [`MAX_DIGITS`] digits;
    /// the same prefix may not name two destinations.
    pub fn new(entries: impl IntoIterator<Item = (String, u32)>) -> Result<Self> {
        let mut all: Vec<(u64, u8, u32)> = Vec::new();
        for (p, dest) in entries {
            let digits = p.strip_prefix('+').unwrap_or(&p).as_bytes();
            if digits.is_empty()
                || digits.len() > MAX_DIGITS
                || !digits.iter().all(u8::is_ascii_digit)
            {
                return Err(Error::Config(format!(
                    "destination prefix {p:?}: expected 1 to {MAX_DIGITS} digits"
                )));
            }
            if dest >= 1 << 24 {
                return Err(Error::Config("too many destinations".into()));
            }
            let (key, len) = pack(digits);
            all.push((key, len, dest));
        }
        all.sort_unstable_by_key(|&(k, _, _)| k);
        for w in all.windows(2) {
            if w[0].0 == w[1].0 && w[0].2 != w[1].2 {
                return Err(Error::Config(format!(
                    "destination prefix {} is listed for two destinations",
                    unpack(w[0].0, w[0].1)
                )));
            }
        }
        all.dedup_by_key(|e| e.0);
        let mut t = PrefixTable {
            keys: all.iter().map(|e| e.0).collect(),
            meta: all.iter().map(|e| u32::from(e.1) | (e.2 << 8)).collect(),
            parent: vec![NONE; all.len()],
        };
        // Parents with a stack of the open ancestors (sorted order is a
        // depth-first walk of the prefix tree).
        let mut stack: Vec<u32> = Vec::new();
        for i in 0..t.keys.len() {
            let (k, len) = (t.keys[i], t.len(i));
            while let Some(&top) = stack.last() {
                let tl = t.len(top as usize);
                if tl < len && k & mask(tl) == t.keys[top as usize] {
                    break;
                }
                stack.pop();
            }
            t.parent[i] = stack.last().copied().unwrap_or(NONE);
            stack.push(i as u32);
        }
        Ok(t)
    }

    fn len(&self, i: usize) -> u8 {
        (self.meta[i] & 0xff) as u8
    }

    /// Number of prefixes.
    pub fn len_prefixes(&self) -> usize {
        self.keys.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The destination of the longest prefix of the dialled digits
    /// `digits` (ASCII), if any.
    pub fn lookup_digits(&self, digits: &[u8]) -> Option<u32> {
        if digits.is_empty() || self.keys.is_empty() {
            return None;
        }
        self.find(pack(digits).0)
    }

    /// The destination of the longest prefix of the packed number `n`.
    fn find(&self, n: u64) -> Option<u32> {
        let mut i = self.keys.partition_point(|&k| k <= n);
        if i == 0 {
            return None;
        }
        i -= 1;
        loop {
            let len = self.len(i);
            if n & mask(len) == self.keys[i] {
                return Some(self.meta[i] >> 8);
            }
            let p = self.parent[i];
            if p == NONE {
                return None;
            }
            i = p as usize;
        }
    }

    /// The destination of the longest prefix of the number `address`
    /// dials ([`dialled_digits`], read and packed in one pass).
    pub fn lookup(&self, address: &str) -> Option<u32> {
        if self.keys.is_empty() {
            return None;
        }
        let s = address.trim_start();
        let mut b = s.as_bytes();
        if !b.first().is_some_and(|c| c.is_ascii_digit() || *c == b'+') {
            for scheme in [&b"tel:"[..], b"sip:", b"sips:"] {
                if b.len() >= scheme.len() && b[..scheme.len()].eq_ignore_ascii_case(scheme) {
                    b = &b[scheme.len()..];
                    break;
                }
            }
        }
        if let [b'+', rest @ ..] = b {
            b = rest;
        }
        let (mut key, mut n) = (0u64, 0u32);
        for &c in b {
            match c {
                b'0'..=b'9' => {
                    if n as usize == MAX_DIGITS {
                        break;
                    }
                    key |= u64::from(c - b'0' + 1) << (60 - 4 * n);
                    n += 1;
                }
                b'-' | b'.' | b'(' | b')' | b' ' => {}
                _ => break,
            }
        }
        if n == 0 {
            return None;
        }
        self.find(key)
    }
}

fn unpack(key: u64, len: u8) -> String {
    (0..len)
        .map(|i| char::from(b'0' + ((key >> (60 - 4 * u32::from(i))) & 0xf) as u8 - 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(entries: &[(&str, u32)]) -> PrefixTable {
        PrefixTable::new(entries.iter().map(|(p, d)| (p.to_string(), *d))).unwrap()
    }

    #[test]
    fn the_longest_prefix_wins() {
        let t = table(&[("46", 1), ("4670", 2), ("46700", 3), ("4690", 4), ("1", 5)]);
        assert_eq!(t.lookup("46701234567"), Some(2));
        assert_eq!(t.lookup("46700123456"), Some(3));
        assert_eq!(t.lookup("+46812345"), Some(1));
        assert_eq!(t.lookup("tel:+4690123"), Some(4));
        assert_eq!(t.lookup("sip:4690555@ims.example"), Some(4));
        assert_eq!(t.lookup("1555"), Some(5));
        assert_eq!(t.lookup("2"), None);
        assert_eq!(t.lookup("4"), None);
        assert_eq!(t.lookup(""), None);
        assert_eq!(t.lookup("sip:alice@example"), None);
        // A sibling between the number and its prefix does not hide it.
        assert_eq!(t.lookup("4671"), Some(1));
        assert_eq!(unpack(pack(b"4690").0, 4), "4690");
    }

    #[test]
    fn bad_prefixes_are_refused() {
        assert!(PrefixTable::new([("4a".to_string(), 0)]).is_err());
        assert!(PrefixTable::new([(String::new(), 0)]).is_err());
        assert!(PrefixTable::new([("1".repeat(17), 0)]).is_err());
        let e = PrefixTable::new([("46".to_string(), 0), ("46".to_string(), 1)]).unwrap_err();
        assert!(e.to_string().contains("46"), "{e}");
        // The same prefix twice for one destination is fine.
        assert!(PrefixTable::new([("46".to_string(), 0), ("+46".to_string(), 0)]).is_ok());
    }

    proptest! {
        #[test]
        fn lookup_is_the_longest_matching_prefix(
            prefixes in proptest::collection::btree_map("[0-9]{1,6}", 0u32..50, 1..200),
            numbers in proptest::collection::vec("[0-9]{0,12}", 1..50),
        ) {
            let t = PrefixTable::new(prefixes.iter().map(|(p, d)| (p.clone(), *d))).unwrap();
            for n in &numbers {
                let want = prefixes
                    .iter()
                    .filter(|(p, _)| n.starts_with(p.as_str()))
                    .max_by_key(|(p, _)| p.len())
                    .map(|(_, d)| *d);
                prop_assert_eq!(t.lookup(n), want, "{}", n);
                let mut buf = [0u8; MAX_DIGITS];
                let tel = format!("tel:+{n}");
                let k = dialled_digits(&tel, &mut buf);
                prop_assert_eq!(t.lookup_digits(&buf[..k]), want);
                prop_assert_eq!(t.lookup(&tel), want);
            }
        }
    }
}
