//! Helpers shared by the integration tests: running the built `gyro`
//! binary, Wireshark's command-line tools and scratch files; a running
//! `gyro serve` and its admin API (`server`), a gateway speaking Gy to it
//! (`gateway`), its Prometheus text (`prometheus`) and the raw Diameter
//! client of the runtime's tests (`common`).
//!
//! Every test binary declares `mod support;` and uses only part of it.

#![allow(dead_code)]

#[path = "../../../server/tests/common.rs"]
pub mod common;
pub mod gateway;
pub mod prometheus;
pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `gyro` binary; returns (exit code, stdout, stderr).
pub fn gyro(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(args)
        .output()
        .expect("run gyro");
    text(out)
}

fn text(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Fails the test, loudly, when a Wireshark tool is not installed.
pub fn require(tool: &str) {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{tool}` is required by this test and was not found: install the tshark and \
         wireshark-common packages (scripts/test.sh does)"
    );
}

/// Runs a tool; panics with its stderr when it fails.
pub fn run(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    let (code, stdout, stderr) = text(out);
    assert_eq!(code, 0, "{tool} {args:?} failed: {stderr}");
    stdout
}

/// The seed of a randomized crash test: `GYRO_CRASH_SEED` when set (to
/// replay a failure), else one from the clock; printed so that a failing
/// run can be replayed.
pub fn crash_seed() -> u64 {
    let seed = std::env::var("GYRO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("GYRO_CRASH_SEED={seed}");
    seed
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gyro-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The repository's testdata folder.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Reads a one-line hex file from testdata.
pub fn testdata_hex(name: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(testdata().join(name)).expect("read testdata");
    hex::decode(text.trim()).expect("testdata hex")
}

/// An `od -Ax -tx1`-style dump, the input format of `text2pcap`.
pub fn od_dump(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        s.push_str(&format!("{:06x}", i * 16));
        for b in chunk {
            s.push_str(&format!(" {b:02x}"));
        }
        s.push('\n');
    }
    s.push_str(&format!("{:06x}\n", bytes.len()));
    s
}

/// Writes each of `packets` as one TCP packet to port 3868 with
/// Wireshark's `text2pcap` (pcapng when `pcapng` is set) and returns the
/// capture path.
pub fn text2pcap(dir: &Path, name: &str, packets: &[Vec<u8>], pcapng: bool) -> PathBuf {
    let dump = dir.join(format!("{name}.txt"));
    let text: String = packets.iter().map(|p| od_dump(p)).collect();
    std::fs::write(&dump, text).expect("write dump");
    let cap = dir.join(format!("{name}.{}", if pcapng { "pcapng" } else { "pcap" }));
    let mut args = vec!["-q", "-T", "40000,3868"];
    if pcapng {
        args.push("-n");
    }
    let (d, c) = (dump.to_string_lossy(), cap.to_string_lossy());
    args.push(&d);
    args.push(&c);
    run("text2pcap", &args);
    cap
}

/// One TCP connection as a pcap capture: each of `segments` (true: from
/// the client 10.0.0.1:40000 to the server 10.0.0.2:3868; false: back) in
/// one packet, 10 ms apart, with consistent sequence numbers.
pub fn tcp_pcap(segments: &[(bool, Vec<u8>)]) -> Vec<u8> {
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let (client, server) = (([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 3868));
    let (mut cseq, mut sseq) = (1_000u32, 500_000u32);
    for (n, (to_server, data)) in segments.iter().enumerate() {
        let (src, dst, seq, ack) = if *to_server {
            (client, server, cseq, sseq)
        } else {
            (server, client, sseq, cseq)
        };
        let builder = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(src.0, dst.0, 64)
            .tcp(src.1, dst.1, seq, 65535)
            .ack(ack)
            .psh();
        let mut pkt = Vec::with_capacity(builder.size(data.len()));
        builder.write(&mut pkt, data).unwrap();
        let ts = std::time::Duration::from_millis(1_700_000_000_000 + n as u64 * 10);
        w.write_packet(&PcapPacket::new(ts, pkt.len() as u32, &pkt))
            .unwrap();
        if *to_server {
            cseq = cseq.wrapping_add(data.len() as u32);
        } else {
            sseq = sseq.wrapping_add(data.len() as u32);
        }
    }
    w.into_writer()
}

/// Parses `gyro decode --json` output.
pub fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {stdout}"))
}

/// Finds the first AVP named `name` in a JSON AVP list, depth first.
pub fn find<'a>(avps: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    for a in avps.as_array()? {
        if a["name"] == name {
            return Some(a);
        }
        if let Some(found) = find(&a["avps"], name) {
            return Some(found);
        }
    }
    None
}

/// Every AVP named `name`, depth first.
pub fn find_all<'a>(avps: &'a serde_json::Value, name: &str, out: &mut Vec<&'a serde_json::Value>) {
    if let Some(list) = avps.as_array() {
        for a in list {
            if a["name"] == name {
                out.push(a);
            }
            find_all(&a["avps"], name, out);
        }
    }
}

/// Ports [`free_port`] hands out: below Linux's ephemeral range
/// (32768-60999), which the kernel draws from for every `bind` to port 0
/// and every outgoing connection. A port taken from that range and
/// released could be given to another test's client connection (or
/// another binary's port-0 bind) before the server meant for it binds it.
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// Ports of [`TEST_PORTS`] each test binary starts its search in: binaries
/// run at once (by hand or by a parallel runner) begin at different
/// places, chosen by their process id.
const PORT_SLICE: u16 = 100;

/// A TCP port on loopback that nothing listens on, for a server a test
/// starts. Taken from [`TEST_PORTS`], never twice in one test binary, and
/// checked free by binding it (then released for the server).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = u32::from(TEST_PORTS.end - TEST_PORTS.start);
    let slices = span / u32::from(PORT_SLICE);
    let start = (std::process::id() % slices) * u32::from(PORT_SLICE);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no free test port left in {TEST_PORTS:?}");
        let port = TEST_PORTS.start + ((start + n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Starts `gyro serve` with two workers on `addr` and `data_dir` (plus
/// `extra` arguments) and waits until it accepts connections.
pub fn serve(addr: std::net::SocketAddr, data_dir: &Path, extra: &[&str]) -> std::process::Child {
    try_serve(addr, data_dir, extra).unwrap_or_else(|e| panic!("gyro serve did not start: {e}"))
}

/// [`serve`], or why it did not start: it exited first (its message is on
/// the test's standard error), or it did not accept connections within
/// 30 s (then it is killed).
pub fn try_serve(
    addr: std::net::SocketAddr,
    data_dir: &Path,
    extra: &[&str],
) -> Result<std::process::Child, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["serve", "--workers", "2", "--listen"])
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .env("GYRO_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start gyro serve");
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it exited ({status})"));
        }
        if t.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("no connection accepted in 30 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(child)
}

/// A data CCR on rating group 10 for `msisdn`, sent by `origin_host`
/// with End-to-End `e2e_base | number`: reporting `used` octets (not on
/// an Initial) and asking for more (not on a Terminate).
pub fn data_ccr(
    origin_host: &str,
    e2e_base: u32,
    session: &str,
    msisdn: &str,
    kind: gyro_charging::RequestType,
    number: u32,
    used: u64,
) -> gyro_charging::CcRequest {
    use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits, SubscriptionId};
    CcRequest {
        session_id: session.into(),
        origin_host: origin_host.into(),
        end_to_end: e2e_base | number,
        request_type: kind,
        request_number: number,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        multiple_services: Some(true),
        mscc: vec![Mscc {
            rating_group: Some(10),
            requested: (kind != RequestType::Termination).then(ServiceUnits::default),
            used: (kind != RequestType::Initial).then(|| ServiceUnits {
                total_octets: Some(used),
                ..ServiceUnits::default()
            }),
            ..Mscc::default()
        }],
        ..CcRequest::default()
    }
}

/// What `read` returns once it has stopped changing: the same value three
/// times in a row, 100 ms apart (at most 10 s). For what a running server
/// writes a little after its answers, such as the CDR lines of committed
/// charges: the CDR writer takes its queue every 20 ms while commits keep
/// coming, so a count taken right after an answer may not include it yet.
pub fn settled<T: PartialEq>(mut read: impl FnMut() -> T) -> T {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut last = read();
    let mut same = 1;
    while same < 3 && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = read();
        same = if now == last { same + 1 } else { 1 };
        last = now;
    }
    last
}
