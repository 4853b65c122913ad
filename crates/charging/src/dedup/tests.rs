use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, VecDeque};

fn req(sid: &str, n: u32, e2e: u32) -> CcRequest {
    CcRequest {
        session_id: sid.into(),
        origin_host: "PGW.example".into(),
        end_to_end: e2e,
        request_number: n,
        ..CcRequest::default()
    }
}

#[test]
fn both_rules_find_the_answer_and_other_sessions_do_not() {
    let mut ix = AnswerIndex::new(300, 100);
    ix.insert(7, &req("a", 1, 10), Timestamp(0));
    assert_eq!(ix.lookup(&req("a", 1, 99)), Some(7));
    let mut same_e2e = req("a", 5, 10);
    same_e2e.origin_host = "pgw.EXAMPLE".into();
    assert_eq!(ix.lookup(&same_e2e), Some(7));
    assert_eq!(ix.lookup(&req("b", 5, 10)), None);
    assert_eq!(ix.lookup(&req("a", 2, 11)), None);
}

#[test]
fn entries_expire_in_order_and_the_capacity_bounds_them() {
    let mut ix = AnswerIndex::new(10, 3000);
    for i in 0..3000u32 {
        ix.insert(u64::from(i), &req("s", i, i), Timestamp(u64::from(i) * 10));
    }
    assert_eq!(ix.len(), 3000);
    ix.expire(Timestamp(10_000 + 1000 * 10));
    assert_eq!(ix.horizon(Timestamp(20_000)), 1001);
    assert_eq!(ix.len(), 1999);
    assert_eq!(ix.lookup(&req("s", 1000, 0)), None);
    assert_eq!(ix.lookup(&req("s", 1001, 0)), Some(1001));
    // Past the capacity the oldest go.
    for i in 3000..5000u32 {
        ix.insert(u64::from(i), &req("s", i, i), Timestamp(30_000));
    }
    assert_eq!(ix.len(), 3000);
    assert_eq!(ix.lookup(&req("s", 1999, 0)), None);
    assert_eq!(ix.lookup(&req("s", 2000, 0)), Some(2000));
    assert_eq!(ix.lookup(&req("s", 4999, 0)), Some(4999));
}

#[test]
fn an_answer_expires_within_a_time_step_after_its_time_to_live() {
    let mut ix = AnswerIndex::new(10, 100);
    ix.insert(0, &req("a", 1, 1), Timestamp(1_001));
    ix.insert(1, &req("a", 2, 2), Timestamp(1_100));
    assert_eq!(ix.ring.marks(), 1, "one step, one mark");
    ix.expire(Timestamp(11_000));
    assert_eq!(ix.lookup(&req("a", 1, 0)), Some(0), "never early");
    ix.expire(Timestamp(1_100 + 10_000));
    assert_eq!(ix.lookup(&req("a", 1, 0)), None);
    assert_eq!(ix.lookup(&req("a", 2, 0)), None);
}

#[test]
fn gaps_in_the_numbering_are_skipped() {
    let mut ix = AnswerIndex::new(300, 10_000);
    ix.insert(5, &req("a", 1, 1), Timestamp(0));
    ix.insert(50, &req("a", 2, 2), Timestamp(0));
    assert_eq!(ix.len(), 2);
    assert_eq!(ix.lookup(&req("a", 2, 9)), Some(50));
    assert_eq!(ix.horizon(Timestamp(0)), 5);
    ix.insert(1_000_000, &req("a", 3, 3), Timestamp(0));
    assert_eq!(ix.len(), 1);
    assert_eq!(ix.lookup(&req("a", 1, 9)), None);
}

#[test]
fn every_answer_stays_findable_while_the_tables_grow() {
    let mut ix = AnswerIndex::new(300, 1 << 20);
    let mut resizes = 0;
    let mut n = 200_000u32;
    let mut i = 0;
    // Until the last move is over.
    while i < n || ix.resize.is_some() {
        ix.insert(u64::from(i), &req("g", i, i), Timestamp(0));
        if ix.resize.is_some() {
            resizes += 1;
            // Old and new answers alike, mid-move.
            for j in [0, i / 3, i / 2, i] {
                assert_eq!(ix.lookup(&req("g", j, 0)), Some(u64::from(j)));
            }
        }
        i += 1;
        n = n.max(i);
    }
    assert!(resizes > 0);
    // Hashes have 48 bits: of two that collide only the newer stays in
    // that table (about n^2 / 2^49 pairs, 1 in 10,000 here).
    assert!(ix.numbers.count() + 2 >= n as usize);
    assert!(ix.e2es.count() + 2 >= n as usize);
    for i in 0..n {
        assert_eq!(ix.lookup(&req("g", i, i)), Some(u64::from(i)));
    }
}

#[test]
fn requests_that_repeat_nothing_rarely_get_a_candidate_from_a_large_index() {
    // 2^20 answers remembered, 2^20 requests of other sessions looked up:
    // each lookup meets a wrong candidate with probability at most
    // 2 x 2^20 / 2^48 (two tables of 48-bit hashes), 2^-7 expected in
    // all; more than 2 has a chance below 10^-7. With a 32-bit End-to-End
    // hash it would be 2^20 x 2^20 / 2^32 = 256.
    const N: u32 = 1 << 20;
    let mut ix = AnswerIndex::new(300, N as usize);
    let mut r = req("", 0, 0);
    let sid = |r: &mut CcRequest, prefix: &str, i: u32| {
        r.session_id.clear();
        r.session_id.push_str(prefix);
        r.session_id.push_str(&(i / 4).to_string());
        r.request_number = i % 4;
        r.end_to_end = i;
    };
    for i in 0..N {
        sid(&mut r, "pgw;1;", i);
        ix.insert(u64::from(i), &r, Timestamp(0));
    }
    assert_eq!(ix.len(), N as usize);
    let mut candidates = 0;
    for i in 0..N {
        // Another client (same identifiers, other Session-Ids).
        sid(&mut r, "pgw;2;", i);
        candidates += usize::from(ix.lookup(&r).is_some());
    }
    assert!(
        candidates <= 2,
        "{candidates} wrong candidates in {N} lookups"
    );
    // Every remembered answer is still found, by either rule.
    for i in (0..N).step_by(997) {
        sid(&mut r, "pgw;1;", i);
        assert_eq!(ix.lookup(&r), Some(u64::from(i)));
        r.end_to_end ^= 1 << 31;
        assert_eq!(ix.lookup(&r), Some(u64::from(i)));
        r.end_to_end ^= 1 << 31;
        r.request_number += 8;
        assert_eq!(ix.lookup(&r), Some(u64::from(i)));
    }
}

#[test]
fn both_hashes_keep_48_bits() {
    let ix = AnswerIndex::new(300, 100);
    let (mut any, mut all) = (0u64, u64::MAX);
    for i in 0..1000 {
        let Keys { number: n, e2e: e } = ix.keys_of(&format!("s{i}"), i, "pgw", i);
        any |= n | e;
        all &= n & e;
    }
    assert_eq!(any, ring::HASH_MASK, "bits used");
    assert_eq!(all, 0);
}

/// An answer whose number hash a newer answer took in that table is still
/// found by a retransmission, by its End-to-End hash, and vice versa.
#[test]
fn a_candidate_matching_both_hashes_wins() {
    let mut ix = AnswerIndex::new(300, 100);
    // Answer 0 (number 10, e2e 20) loses its number to answer 1 (10, 21);
    // answer 2 (11, 21) then takes answer 1's End-to-End hash.
    ix.insert_hashed(0, 10, 20, Timestamp(0));
    ix.insert_hashed(1, 10, 21, Timestamp(0));
    ix.insert_hashed(2, 11, 21, Timestamp(0));
    let lookup = |number, e2e| ix.lookup_keys(Keys { number, e2e });
    assert_eq!(lookup(10, 20), Some(0));
    assert_eq!(lookup(10, 21), Some(1));
    assert_eq!(lookup(11, 21), Some(2));
    assert_eq!(lookup(10, 99), Some(1));
    assert_eq!(lookup(99, 21), Some(2));
}

#[test]
fn an_expired_answer_not_yet_removed_is_never_returned() {
    let mut ix = AnswerIndex::new(10, 1 << 20);
    for i in 0..50_000u32 {
        ix.insert(
            u64::from(i),
            &req("x", i, i),
            Timestamp(u64::from(i) / 1000 * TIME_STEP_MS),
        );
    }
    // All but the last second's answers expire at once.
    let now = Timestamp(10_000 + 3_999);
    ix.expire(now);
    assert!(ix.ring.len() > 40_000, "removed in one call");
    assert_eq!(ix.len(), 10_000);
    assert_eq!(ix.horizon(now), 40_000);
    assert_eq!(ix.lookup(&req("x", 0, 0)), None);
    assert_eq!(ix.lookup(&req("x", 39_999, 39_999)), None);
    assert_eq!(ix.lookup(&req("x", 40_000, 0)), Some(40_000));
    // Later calls remove them, a few at a time.
    let mut calls = 0;
    while ix.ring.len() > 10_000 {
        let before = ix.ring.len();
        ix.expire(now);
        assert!(before - ix.ring.len() <= u64::from(EXPIRE_BUDGET / EXPIRE_ENTRY_COST));
        calls += 1;
    }
    assert!(calls > 1000);
    assert_eq!(ix.len(), 10_000);
    assert_eq!(ix.lookup(&req("x", 49_999, 0)), Some(49_999));
}

/// The most and the settled (no table moving) bytes per answer while
/// `n` answers arrive, `per_ms` a millisecond.
fn bytes_per_answer(n: u64, per_ms: u64) -> (f64, f64) {
    let mut ix = AnswerIndex::new(300, 1 << 22);
    let (mut worst, mut settled) = (0f64, 0f64);
    for i in 0..n {
        ix.insert(i, &req("m", i as u32, i as u32), Timestamp(i / per_ms));
        if i >= 1 << 16 && i % 4099 == 0 {
            let per = ix.memory_bytes() as f64 / ix.len() as f64;
            worst = worst.max(per);
            if ix.resize.is_none() && ix.retired.is_empty() {
                settled = settled.max(per);
            }
        }
    }
    (worst, settled)
}

#[test]
fn memory_per_answer_is_12_bytes_of_slot_plus_the_tables() {
    // 12-byte slots and two tables of 4-byte buckets at a load of 3/8 to
    // 3/4 (10.7 to 21.3 bytes); while tables move the old ones count too.
    let (worst, settled) = bytes_per_answer(3 << 19, 20);
    println!("20 a ms: {settled:.1} bytes per answer settled, {worst:.1} at most");
    assert!(settled <= 34.0, "{settled} bytes per answer");
    assert!(worst <= 48.0, "{worst} bytes per answer");
    // At one answer a millisecond too: a time mark takes a step.
    let (worst, settled) = bytes_per_answer(3 << 19, 1);
    println!("1 a ms: {settled:.1} bytes per answer settled, {worst:.1} at most");
    assert!(settled <= 34.5, "{settled} bytes per answer");
    assert!(worst <= 48.0, "{worst} bytes per answer");
}

#[test]
fn a_drained_index_gives_its_memory_back() {
    let mut ix = AnswerIndex::new(1, 1 << 20);
    for i in 0..300_000u32 {
        ix.insert(u64::from(i), &req("d", i, i), Timestamp(0));
    }
    let full = ix.ring.memory_bytes();
    for i in 300_000..400_000u32 {
        ix.expire(Timestamp(5_000));
        ix.insert(u64::from(i), &req("d", i, i), Timestamp(5_000));
    }
    assert_eq!(ix.len(), 100_000);
    assert!(ix.ring.len() == 100_000, "all expired answers removed");
    assert!(ix.ring.memory_bytes() < full / 2);
}

/// The reference: full expiry, newest answer per hash, FIFO and capacity.
struct Model {
    ttl: u64,
    capacity: usize,
    entries: VecDeque<(u64, u64, u64, u64)>,
    numbers: HashMap<u64, u64>,
    e2es: HashMap<u64, u64>,
    head: u64,
    clock: u64,
}

impl Model {
    fn pop(&mut self) {
        let (seq, n, e, _) = self.entries.pop_front().unwrap();
        if self.numbers.get(&n) == Some(&seq) {
            self.numbers.remove(&n);
        }
        if self.e2es.get(&e) == Some(&seq) {
            self.e2es.remove(&e);
        }
    }

    fn insert(&mut self, seq: u64, n: u64, e: u64, at: u64) {
        while self.entries.len() >= self.capacity {
            self.pop();
        }
        self.entries.push_back((seq, n, e, at));
        self.numbers.insert(n, seq);
        self.e2es.insert(e, seq);
        self.head = seq + 1;
    }

    fn expire(&mut self, now: u64) {
        self.clock = self.clock.max(now);
        while self
            .entries
            .front()
            .is_some_and(|&(.., at)| at + self.ttl <= self.clock)
        {
            self.pop();
        }
    }

    fn lookup(&self, n: u64, e: u64) -> Option<u64> {
        self.numbers.get(&n).or_else(|| self.e2es.get(&e)).copied()
    }

    fn horizon(&self) -> u64 {
        self.entries.front().map_or(self.head, |&(seq, ..)| seq)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert { n: u64, e: u64, dt: u64 },
    Lookup { n: u64, e: u64 },
    Expire { dt: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1..3000u64, 0..3000u64, 0..3u64).prop_map(|(n, e, dt)| Op::Insert { n, e, dt }),
        4 => (1..3000u64, 0..3000u64).prop_map(|(n, e)| Op::Lookup { n, e }),
        3 => (0..4u64).prop_map(|dt| Op::Expire { dt }),
        1 => (0..3000u64).prop_map(|dt| Op::Expire { dt }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Equal hashes (many, from a small key space), growth, incremental
    /// moves and expiry in any order give the reference's answers.
    #[test]
    fn the_index_answers_like_full_expiry_with_newest_per_hash(
        capacity in 1usize..5000,
        ops in prop::collection::vec(op(), 1..12_000),
    ) {
        let ttl_secs = 2;
        let mut ix = AnswerIndex::new(ttl_secs, capacity);
        let mut model = Model {
            ttl: ttl_secs * 1000,
            capacity,
            entries: VecDeque::new(),
            numbers: HashMap::new(),
            e2es: HashMap::new(),
            head: 0,
            clock: 0,
        };
        let (mut now, mut seq) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Insert { n, e, dt } => {
                    now += dt;
                    ix.expire(Timestamp(now));
                    model.expire(now);
                    ix.insert_hashed(seq, n, e, Timestamp(now));
                    model.insert(seq, n, e, now.div_ceil(TIME_STEP_MS) * TIME_STEP_MS);
                    seq += 1;
                }
                Op::Lookup { n, e } => {
                    prop_assert_eq!(ix.find(Rule::Number, n).or_else(|| ix.find(Rule::EndToEnd, e)), model.lookup(n, e));
                }
                Op::Expire { dt } => {
                    now += dt;
                    ix.expire(Timestamp(now));
                    model.expire(now);
                    prop_assert_eq!(ix.len(), model.entries.len());
                    prop_assert_eq!(ix.horizon(Timestamp(now)), model.horizon());
                }
            }
        }
        prop_assert_eq!(ix.len(), model.entries.len());
    }
}
