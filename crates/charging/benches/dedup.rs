//! The duplicate index under growth and expiry.
//!
//! `cargo bench -p gyro-charging --bench dedup` first runs the engine's
//! sequence of calls (expire, lookup, insert) for 16M fresh answers
//! (`DEDUP_BENCH_ENTRIES` overrides the count), timing every single call,
//! then looks every answer up again, then lets all of them expire at once
//! and carries on with fresh answers. It prints the mean and the worst
//! single call of each kind, by the wall clock and by the thread's CPU
//! time (which leaves out time the thread was descheduled, so a busy
//! machine does not pass for a pause of the index); a pause of the event
//! loop shows as the worst call. It checks that nothing was lost but asserts no timing. Then
//! criterion measures insert and lookup at a steady size.

use criterion::{criterion_group, Criterion};
use gyro_charging::dedup::AnswerIndex;
use gyro_charging::{CcRequest, Timestamp};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A reusable request whose Session-Id is rewritten for each answer.
struct Requests {
    req: CcRequest,
}

impl Requests {
    fn new() -> Self {
        Requests {
            req: CcRequest {
                origin_host: "pgw-01.epc.mnc001.mcc001.3gppnetwork.org".into(),
                ..CcRequest::default()
            },
        }
    }

    /// The request answered with `seq`: one session per four requests.
    fn get(&mut self, seq: u64) -> &CcRequest {
        let r = &mut self.req;
        r.session_id.clear();
        let _ = write!(
            r.session_id,
            "pgw-01.epc.mnc001.mcc001.3gppnetwork.org;1700000000;{}",
            seq / 4
        );
        r.request_number = (seq % 4) as u32;
        r.end_to_end = seq as u32;
        r
    }
}

/// The calling thread's CPU time (user and system) in nanoseconds: unlike
/// the wall clock it does not count time the thread was not running.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Mean and worst of a series of single calls, by the wall clock and by
/// the thread's CPU time (page faults and other kernel work included,
/// time spent descheduled excluded).
#[derive(Default)]
struct Calls {
    n: u64,
    total: Duration,
    worst: Duration,
    cpu_total: u64,
    cpu_worst: u64,
}

impl Calls {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let cpu = thread_cpu_ns();
        let start = Instant::now();
        let v = f();
        let d = start.elapsed();
        let cpu = thread_cpu_ns() - cpu;
        self.n += 1;
        self.total += d;
        self.worst = self.worst.max(d);
        self.cpu_total += cpu;
        self.cpu_worst = self.cpu_worst.max(cpu);
        v
    }

    fn print(&self, what: &str) {
        let n = self.n.max(1) as f64;
        println!(
            "{what:<26} {:>9} calls  wall: mean {:>6.0} ns worst {:>11.1} us  \
             cpu: mean {:>6.0} ns worst {:>9.1} us",
            self.n,
            self.total.as_nanos() as f64 / n,
            self.worst.as_nanos() as f64 / 1000.0,
            self.cpu_total as f64 / n,
            self.cpu_worst as f64 / 1000.0,
        );
    }
}

/// Answers per millisecond of the simulated clock (40,000/s).
const PER_MS: u64 = 40;

fn growth_and_burst() -> u64 {
    let n: u64 = std::env::var("DEDUP_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16_000_000);
    let ttl_secs = 1_000_000;
    let mut ix = AnswerIndex::new(ttl_secs, 1 << 24);
    let mut reqs = Requests::new();
    let (mut expire, mut miss, mut insert) = (Calls::default(), Calls::default(), Calls::default());
    let wall = Instant::now();
    for seq in 0..n {
        let now = Timestamp(seq / PER_MS);
        let req = reqs.get(seq);
        expire.time(|| ix.expire(now));
        let found = miss.time(|| ix.lookup(req));
        assert_eq!(found, None);
        insert.time(|| ix.insert(seq, req, now));
    }
    println!(
        "growth to {n} answers: {:.2} s, {} MiB ({:.1} bytes per answer)",
        wall.elapsed().as_secs_f64(),
        ix.memory_bytes() >> 20,
        ix.memory_bytes() as f64 / ix.len() as f64
    );
    expire.print("expire");
    miss.print("lookup (miss)");
    insert.print("insert");
    assert_eq!(ix.len() as u64, n, "answers lost");

    let mut hit = Calls::default();
    for seq in 0..n {
        let req = reqs.get(seq);
        let found = hit.time(|| ix.lookup(req));
        assert_eq!(found, Some(seq), "answer {seq} lost");
    }
    hit.print("lookup (hit, all answers)");

    // Every answer expires at once; fresh answers keep coming.
    let later = n / PER_MS + ttl_secs * 1000;
    let (mut expire, mut miss, mut insert) = (Calls::default(), Calls::default(), Calls::default());
    for seq in n..n + 2_000_000 {
        let now = Timestamp(later + (seq - n) / PER_MS);
        let req = reqs.get(seq);
        expire.time(|| ix.expire(now));
        let found = miss.time(|| ix.lookup(req));
        assert_eq!(found, None);
        insert.time(|| ix.insert(seq, req, now));
        if seq == n {
            assert_eq!(ix.len(), 1, "expired answers still counted");
            assert_eq!(ix.lookup(reqs.get(n - 1)), None, "expired answer returned");
        }
    }
    println!("after all {n} expire at once, 2M fresh answers:");
    expire.print("expire");
    miss.print("lookup (miss)");
    insert.print("insert");
    assert_eq!(ix.len(), 2_000_000);
    n
}

/// Mean time per call over the same growth to `n` answers, untimed per
/// call: what an insert and a lookup cost on average, growth included.
fn growth_throughput(n: u64) {
    let mut ix = AnswerIndex::new(1_000_000, 1 << 24);
    let mut reqs = Requests::new();
    let start = Instant::now();
    for seq in 0..n {
        let now = Timestamp(seq / PER_MS);
        ix.expire(now);
        ix.insert(seq, reqs.get(seq), now);
    }
    let insert = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    let mut found = 0;
    for seq in 0..n {
        found += usize::from(ix.lookup(reqs.get(seq)) == Some(seq));
    }
    let lookup = start.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(found as u64, n, "answers lost");
    let start = Instant::now();
    for seq in n..2 * n {
        black_box(ix.lookup(reqs.get(seq)));
    }
    let miss = start.elapsed().as_nanos() as f64 / n as f64;
    println!(
        "growth to {n}, mean per call: expire+insert {insert:.0} ns, \
         lookup hit {lookup:.0} ns, lookup miss {miss:.0} ns"
    );
}

fn steady(c: &mut Criterion) {
    // 1M live answers, a window moving by one per insert.
    const LIVE: u64 = 1 << 20;
    let ttl_secs = 30;
    let per_ms = LIVE / (ttl_secs * 1000);
    let mut ix = AnswerIndex::new(ttl_secs, 1 << 22);
    let mut reqs = Requests::new();
    let mut seq = 0u64;
    let step = |ix: &mut AnswerIndex, reqs: &mut Requests, seq: &mut u64| {
        let now = Timestamp(*seq / per_ms);
        let req = reqs.get(*seq);
        ix.expire(now);
        ix.insert(*seq, req, now);
        *seq += 1;
    };
    for _ in 0..2 * LIVE {
        step(&mut ix, &mut reqs, &mut seq);
    }
    c.bench_function("dedup expire+insert (1M live)", |b| {
        b.iter(|| step(&mut ix, &mut reqs, &mut seq))
    });
    // What the engine does for every new request: expire, look it up (a
    // miss), answer it and index the answer.
    c.bench_function("dedup new request: expire+lookup+insert (1M live)", |b| {
        b.iter(|| {
            let now = Timestamp(seq / per_ms);
            let req = reqs.get(seq);
            let keys = ix.keys(req);
            ix.prefetch(keys);
            ix.expire(now);
            assert!(ix.lookup_keys(keys).is_none());
            ix.insert_keys(seq, keys, now);
            seq += 1;
        })
    });
    let mut probe = 0u64;
    c.bench_function("dedup lookup hit (1M live)", |b| {
        b.iter(|| {
            probe = probe
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = seq - 1 - (probe >> 40) % (LIVE / 2);
            black_box(ix.lookup(reqs.get(s)))
        })
    });
    let mut miss = 0u64;
    c.bench_function("dedup lookup miss (1M live)", |b| {
        b.iter(|| {
            miss += 1;
            black_box(ix.lookup(reqs.get(u64::MAX / 2 + miss)))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = steady
}

fn main() {
    let n = growth_and_burst();
    growth_throughput(n);
    benches();
    Criterion::default().configure_from_args().final_summary();
}
