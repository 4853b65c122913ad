//! Snapshots and CDR rotations never stall the event loop: a real server
//! with a ledger of a few hundred thousand accounts (so that building and
//! writing a snapshot takes far longer than a round trip), thresholds low
//! enough that snapshots and CDR file rotations keep coming, and one
//! client sending SMS events one at a time. While a snapshot thread
//! (`gyro-snapshot-<shard>`) is alive, requests keep being answered, each
//! within a small bound.
//!
//! The data directory is on a memory file system where there is one
//! (`/dev/shm`): the test is about the event loop, not the disk. On a disk
//! shared with other busy processes an `fsync` can take a second, and an
//! answer waits for the commit job of its batch (which makes the batch
//! durable, and closes a journal or a CDR file when one is due).
//!
//! Both ways of building snapshots are run: from the compactor's copy of
//! the ledger (the default) and by replaying the closed journals
//! (`SnapshotSource::Journal`).

#[path = "../../server/tests/common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{parse, result_code, test_config, Client};
use gyro_charging::{
    CcRequest, ChargingConfig, RequestType, RequestedAction, ServiceUnits, SubscriptionId,
};
use gyro_ocs::gy::encode_ccr;
use gyro_ocs::{CreditControl, Storage, DEMO_CHARGING};
use gyro_store::{SnapshotSource, StoreOptions};

/// Accounts on the one shard, besides the demo's.
const ACCOUNTS: u64 = 150_000;
/// The longest round trip allowed while a snapshot is being built:
/// generous for a loaded machine (a few milliseconds is usual), far below
/// what building the snapshot takes.
const BOUND: Duration = Duration::from_millis(250);
/// A snapshot must last at least this long for the test to prove
/// anything (a snapshot written on the event loop would hold an answer at
/// least this long, twice the bound). Writing the compactor's copy of a
/// ledger this large takes about 0.7 s in a debug build.
const MIN_SNAPSHOT: Duration = Duration::from_millis(500);
/// Give up after this long without a whole snapshot observed.
const GIVE_UP: Duration = Duration::from_secs(120);

/// The demo tariffs and accounts plus `ACCOUNTS` more.
fn charging() -> ChargingConfig {
    let extra = format!(
        "\n[[account_range]]\nfirst_id = 10000000\ncount = {ACCOUNTS}\n\
         e164_first = \"46800000000\"\nbalance = 100000000\ncredit_limit = 0\n"
    );
    ChargingConfig::from_toml_str(&format!("{DEMO_CHARGING}{extra}")).expect("charging")
}

/// An SMS event (a direct debit: one ledger effect and one CDR).
fn event(n: u32) -> CcRequest {
    CcRequest {
        session_id: format!("smsc.test;1700000000;{n}"),
        origin_host: "client.test".into(),
        end_to_end: n,
        request_type: RequestType::Event,
        request_number: 0,
        service_context: "32274@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(format!(
            "468{:08}",
            u64::from(n) % ACCOUNTS
        ))],
        requested_action: Some(RequestedAction::DirectDebiting),
        requested: Some(ServiceUnits {
            service_specific: Some(1),
            ..ServiceUnits::default()
        }),
        ..CcRequest::default()
    }
}

/// The tests here watch this process's threads by name: one runs at a
/// time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether a thread of this process whose name starts with `prefix` is
/// alive.
fn thread_alive(prefix: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix))
    })
}

/// Whether a snapshot thread of this process is alive.
fn snapshot_thread_alive() -> bool {
    thread_alive("gyro-snapshot")
}

/// Watches for snapshot threads every millisecond or so until `stop`, and
/// records in `spans` when one was seen alive (first and last sighting).
fn watch(stop: Arc<AtomicBool>, spans: Arc<Mutex<Vec<(Instant, Instant)>>>) {
    let mut open: Option<(Instant, Instant)> = None;
    while !stop.load(Ordering::Relaxed) {
        let alive = snapshot_thread_alive();
        let now = Instant::now();
        match (&mut open, alive) {
            (Some(span), true) => span.1 = now,
            (None, true) => open = Some((now, now)),
            (Some(_), false) => spans.lock().unwrap().extend(open.take()),
            (None, false) => {}
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    spans.lock().unwrap().extend(open);
}

/// A memory file system for scratch data, else the temporary directory.
fn memory_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A scratch directory, removed when dropped (a failed test leaves no
/// memory behind).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// CDR files in the data directory, open or closed.
fn cdr_files(dir: &Path) -> usize {
    fn count(p: &Path) -> usize {
        std::fs::read_dir(p).map_or(0, |d| {
            d.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => count(&e.path()),
                    _ => 1,
                })
                .sum()
        })
    }
    count(&dir.join("cdr"))
}

#[test]
fn requests_are_answered_promptly_while_a_large_snapshot_is_written_from_memory() {
    answered_promptly_while_snapshots_are_built(SnapshotSource::Memory);
}

#[test]
fn requests_are_answered_promptly_while_a_large_snapshot_is_replayed_from_the_journal() {
    answered_promptly_while_snapshots_are_built(SnapshotSource::Journal);
}

fn answered_promptly_while_snapshots_are_built(source: SnapshotSource) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let scratch =
        Scratch(memory_dir().join(format!("gyro-no-stall-{}-{source:?}", std::process::id())));
    let dir = scratch.0.clone();
    let _ = std::fs::remove_dir_all(&dir);
    let options = StoreOptions {
        // An event journals an effect and a CDR: a snapshot is due after
        // a few hundred events (it begins at a tick, the next one as soon
        // as it is done), a new CDR file every few commits.
        snapshot_every_records: 500,
        cdr_max_bytes: 16 << 10,
        snapshot_source: source,
        ..StoreOptions::default()
    };
    let t = Instant::now();
    let app = CreditControl::new(
        charging(),
        "ocs.test",
        "test",
        Storage::on_disk(&dir, options),
        1,
    )
    .expect("application");
    let server = gyro_server::start(test_config(1), app).expect("server");
    println!("started in {:?} (first snapshot included)", t.elapsed());
    // The compactor keeps its copy of the ledger only when snapshots are
    // built from memory.
    assert_eq!(
        thread_alive("gyro-compact"),
        source == SnapshotSource::Memory,
        "compactor thread with snapshots from {source:?}"
    );
    let mut client = Client::open(server.local_addrs()[0]);
    let cdr_files_before = cdr_files(&dir);

    let stop = Arc::new(AtomicBool::new(false));
    let spans = Arc::new(Mutex::new(Vec::new()));
    let watcher = {
        let (stop, spans) = (stop.clone(), spans.clone());
        std::thread::spawn(move || watch(stop, spans))
    };
    // (sent, answered) of every request.
    let mut trips: Vec<(Instant, Instant)> = Vec::new();
    let mut buf = BytesMut::new();
    let start = Instant::now();
    let mut n = 0u32;
    loop {
        n += 1;
        buf.clear();
        encode_ccr(&mut buf, &event(n), n, "test", "gyro.test").expect("encode");
        let sent = Instant::now();
        client.send(&buf);
        let answer = loop {
            let m = client.recv().expect("an answer");
            if !parse(&m).is_request() {
                break m;
            }
            // A watchdog request from the server (the link was silent).
            client.answer_ok(&parse(&m));
        };
        let answered = Instant::now();
        assert_eq!(parse(&answer).header().hop_by_hop, n);
        assert_eq!(result_code(&answer), Some(2001), "event {n}");
        trips.push((sent, answered));
        // Done once a whole snapshot was seen and a little after it.
        let whole = spans
            .lock()
            .unwrap()
            .iter()
            .any(|&(_, end)| answered.duration_since(end) > BOUND * 2);
        if whole {
            break;
        }
        assert!(
            start.elapsed() < GIVE_UP,
            "no snapshot thread seen in {GIVE_UP:?} ({n} events)"
        );
    }
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let spans = spans.lock().unwrap().clone();
    let rotations = cdr_files(&dir) - cdr_files_before;
    let elapsed = start.elapsed();
    // (Waits for a snapshot in progress.)
    server.shutdown();
    server.join();
    drop(scratch);

    // Round trips that overlap a snapshot span (widened by the watcher's
    // polling), the slowest of them, and the answers that arrived while a
    // snapshot thread was seen alive.
    let slack = Duration::from_millis(5);
    let overlaps = |&(sent, answered): &(Instant, Instant)| {
        spans
            .iter()
            .any(|&(a, b)| sent <= b + slack && answered + slack >= a)
    };
    let during: Vec<Duration> = trips
        .iter()
        .filter(|t| overlaps(t))
        .map(|&(s, a)| a - s)
        .collect();
    let worst = during.iter().max().copied().unwrap_or_default();
    let answered_inside = trips
        .iter()
        .filter(|&&(_, answered)| spans.iter().any(|&(a, b)| a <= answered && answered <= b))
        .count();
    let longest = spans.iter().map(|&(a, b)| b - a).max().unwrap_or_default();
    println!(
        "{source:?}: {} requests in {:?}; {} snapshot(s), the longest seen for {longest:?}; \
         {} round trips overlapped one (slowest {worst:?}), {answered_inside} answered \
         while one was alive; {rotations} CDR files more",
        trips.len(),
        elapsed,
        spans.len(),
        during.len()
    );
    assert!(
        longest >= MIN_SNAPSHOT,
        "the snapshot took only {longest:?}: too quick to show anything; raise ACCOUNTS"
    );
    assert!(rotations > 0, "no CDR file was rotated");
    assert!(
        worst < BOUND,
        "a round trip took {worst:?} while a snapshot was built (bound {BOUND:?})"
    );
    assert!(
        answered_inside > 0,
        "no request was answered while the snapshot was built"
    );
}
