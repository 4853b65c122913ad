//! Interop with freeDiameter, a Diameter implementation in C that gyro did
//! not write (its own codec, peer state machine and routing; GnuTLS for
//! TLS), used as a relay between gyro's load generator and a real
//! `gyro serve`:
//!
//!     gyro load --TCP--> freeDiameterd (relay) --TCP or TLS--> gyro serve
//!
//! freeDiameterd decodes every request and answer and encodes them again
//! (adding a Route-Record to each request), so gyro reads Gy requests
//! written by freeDiameter's encoder and gyro load reads answers written
//! by it. The configuration comes from interop/freediameter/. Each test
//! skips, saying so, when freeDiameterd or its extensions are not
//! installed (Debian: freediameterd and freediameter-extensions; the
//! test script installs them).

mod support;

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{free_port, gyro, scratch};

/// The relay's Diameter identity (and its client certificate's DNS name).
const RELAY: &str = "relay.gyro.test";
/// Requests `gyro load` sends through the relay.
const REQUESTS: u64 = 2000;
/// The extensions the relay configuration loads.
const EXTENSIONS: [&str; 6] = [
    "dict_nasreq.fdx",
    "dict_dcca.fdx",
    "dict_dcca_3gpp.fdx",
    "rt_default.fdx",
    "acl_wl.fdx",
    "dbg_msg_dumps.fdx",
];

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interop/freediameter")
}

/// The directory of freeDiameter's extensions when freeDiameterd and the
/// extensions this test needs are installed (`FREEDIAMETER_EXTENSIONS`
/// names it when it is not one of the usual places); otherwise says why
/// the test is skipped and returns None.
fn freediameter(test: &str) -> Option<PathBuf> {
    let installed = Command::new("freeDiameterd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let dirs = std::env::var_os("FREEDIAMETER_EXTENSIONS")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            [
                "/usr/lib/freeDiameter",
                "/usr/lib/x86_64-linux-gnu/freeDiameter",
                "/usr/lib64/freeDiameter",
                "/usr/local/lib/freeDiameter",
            ]
            .map(PathBuf::from),
        );
    let found = dirs
        .into_iter()
        .find(|d| EXTENSIONS.iter().all(|e| d.join(e).is_file()));
    match (installed, found) {
        (true, Some(dir)) => Some(dir),
        (installed, _) => {
            eprintln!(
                "{test}: SKIPPED: {} (Debian: apt-get install freediameterd \
                 freediameter-extensions; scripts/test.sh installs them)",
                if installed {
                    "the freeDiameter extensions (dict_dcca_3gpp.fdx, rt_default.fdx, \
                     acl_wl.fdx, ...) were not found"
                } else {
                    "freeDiameterd is not installed"
                }
            );
            None
        }
    }
}

/// The last `n` lines of a log file, for failure messages.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Polls `ready` every 100 ms for up to `limit`; panics with `what` and
/// `context()` when it never holds.
fn wait_for(
    what: &str,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let t = Instant::now();
    while !ready() {
        assert!(
            t.elapsed() < limit,
            "{what}: not within {limit:?}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A stdout+stderr pair writing to one new file.
fn log_file(path: &Path) -> (Stdio, Stdio) {
    let f = File::create(path).expect("create log file");
    let g = f.try_clone().expect("clone log file");
    (Stdio::from(f), Stdio::from(g))
}

/// A running `gyro serve` with its admin API, logging at info level to a
/// file; killed when dropped.
struct Gyro {
    child: Option<Child>,
    plain_port: u16,
    tls_port: u16,
    admin: String,
    data: PathBuf,
    log: PathBuf,
}

impl Drop for Gyro {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Gyro {
    /// Starts `gyro serve` in `dir` (data directory `dir/data`, default
    /// durability: every answer's charging is on disk before it leaves)
    /// with `extra` configuration, after a `[peers]` section that sets
    /// the watchdog interval `watchdog_secs`. `tls_port` is free for a
    /// `[tls]` listener in `extra`.
    fn start(dir: &Path, watchdog_secs: f64, extra: impl Fn(u16) -> String) -> Gyro {
        let (plain_port, tls_port, admin_port) = (free_port(), free_port(), free_port());
        let config = format!(
            "[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n\
             [peers]\nwatchdog_secs = {watchdog_secs:.1}\nwatchdog_jitter_secs = 0.5\n{}",
            extra(tls_port)
        );
        let config_path = dir.join("gyro.toml");
        std::fs::write(&config_path, config).unwrap();
        let log = dir.join("gyro.log");
        let (out, err) = log_file(&log);
        let child = Command::new(env!("CARGO_BIN_EXE_gyro"))
            .args(["serve", "--workers", "2", "--listen"])
            .arg(format!("127.0.0.1:{plain_port}"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("-c")
            .arg(&config_path)
            .env("GYRO_LOG", "info")
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start gyro serve");
        let mut gyro = Gyro {
            child: Some(child),
            plain_port,
            tls_port,
            admin: format!("http://127.0.0.1:{admin_port}"),
            data: dir.join("data"),
            log,
        };
        let log = gyro.log.clone();
        wait_for(
            "gyro serve ready",
            Duration::from_secs(60),
            || {
                let exited = gyro.child.as_mut().unwrap().try_wait().unwrap();
                assert!(exited.is_none(), "gyro serve exited: {}", tail(&log, 30));
                gyro.get("/readyz").0 == 200
            },
            || tail(&log, 30),
        );
        gyro
    }

    /// GET on the admin API: (status, JSON body); (0, null) when it does
    /// not answer.
    fn get(&self, path: &str) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        match agent.get(&format!("{}{path}", self.admin)).call() {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_json().unwrap_or(Value::Null),
            ),
            Err(_) => (0, Value::Null),
        }
    }

    /// Every connected peer (`/v1/peers`).
    fn peers(&self) -> Vec<Value> {
        let (status, body) = self.get("/v1/peers");
        assert_eq!(status, 200, "/v1/peers: {body}");
        body["peers"].as_array().cloned().unwrap_or_default()
    }

    /// The open peer whose Origin-Host is `host`, if any.
    fn open_peer(&self, host: &str) -> Option<Value> {
        self.peers()
            .into_iter()
            .find(|p| p["origin_host"] == host && p["state"] == "open")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM (gyro sends DPR to its peers and drains) and a clean exit.
    fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: signals a child process this test started and still owns.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("gyro serve ignored SIGTERM:\n{}", tail(&self.log, 30));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "gyro serve exited with {status}:\n{}",
            tail(&self.log, 30)
        );
    }
}

/// How the relay reaches gyro.
enum Link<'a> {
    /// Plain TCP to gyro's listener.
    Tcp,
    /// TLS at connect to gyro's `[tls]` listener, with the certificate
    /// `<certs>/<file>.pem` (and `.key`) and the CA `<certs>/ca.pem`;
    /// `prio`: GnuTLS priorities (default "NORMAL").
    Tls {
        certs: &'a Path,
        file: &'a str,
        prio: Option<&'a str>,
    },
}

/// TLS with the relay's certificate from [`relay_certs`].
fn link_tls(certs: &Path) -> Link<'_> {
    Link::Tls {
        certs,
        file: "relay",
        prio: None,
    }
}

/// A running freeDiameterd, its stdout and stderr in a file; killed when
/// dropped.
struct Relay {
    child: RefCell<Option<Child>>,
    port: u16,
    log: PathBuf,
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.get_mut().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Relay {
    /// Writes `dir/<name>.conf` from interop/freediameter/relay.conf.in
    /// and starts freeDiameterd on it, as `identity`, with the watchdog
    /// interval `tw`, connecting to gyro's `gyro_port` over `link`.
    fn start(
        dir: &Path,
        name: &str,
        ext: &Path,
        identity: &str,
        tw: u32,
        gyro_port: u16,
        link: Link,
    ) -> Relay {
        let template = std::fs::read_to_string(interop_dir().join("relay.conf.in"))
            .expect("read interop/freediameter/relay.conf.in");
        let port = free_port();
        let (tls, peer_tls) = match link {
            Link::Tcp => (String::new(), "No_TLS;"),
            Link::Tls { certs, file, prio } => {
                let mut lines = format!(
                    "TLS_Cred = \"{c}/{file}.pem\", \"{c}/{file}.key\";\nTLS_CA = \"{c}/ca.pem\";",
                    c = certs.display()
                );
                if let Some(prio) = prio {
                    lines.push_str(&format!("\nTLS_Prio = \"{prio}\";"));
                }
                (lines, "")
            }
        };
        let conf_dir = interop_dir().canonicalize().unwrap();
        let conf = template
            .replace("@IDENTITY@", identity)
            .replace("@PORT@", &port.to_string())
            .replace("@TW@", &tw.to_string())
            .replace("@TLS@", &tls)
            .replace("@EXT@", &ext.display().to_string())
            .replace("@CONF@", &conf_dir.display().to_string())
            .replace("@GYRO_PORT@", &gyro_port.to_string())
            .replace("@PEER_TLS@", peer_tls);
        assert!(
            !conf.contains('@'),
            "a placeholder left in relay.conf.in: {conf}"
        );
        let conf_path = dir.join(format!("{name}.conf"));
        std::fs::write(&conf_path, conf).unwrap();
        let log = dir.join(format!("{name}.log"));
        let (out, err) = log_file(&log);
        let child = Command::new("freeDiameterd")
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start freeDiameterd");
        Relay {
            child: RefCell::new(Some(child)),
            port,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Lines of the log holding every one of `parts`.
    fn count(&self, parts: &[&str]) -> usize {
        self.log()
            .lines()
            .filter(|l| parts.iter().all(|p| l.contains(p)))
            .count()
    }

    /// Its exit status, once it has exited.
    fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.child.borrow_mut();
        child.as_mut().and_then(|c| c.try_wait().unwrap())
    }
}

/// Both logs' last lines.
fn context(gyro: &Gyro, relay: &Relay) -> String {
    format!(
        "--- freeDiameterd ({}):\n{}\n--- gyro serve:\n{}",
        relay.log.display(),
        tail(&relay.log, 40),
        tail(&gyro.log, 20)
    )
}

/// Waits until freeDiameterd has its link to gyro open (its CEA
/// accepted) and gyro lists the relay as an open peer; returns gyro's
/// view of it.
fn wait_open(gyro: &Gyro, relay: &Relay) -> Value {
    wait_for(
        "the relay's link to gyro open",
        Duration::from_secs(60),
        || {
            if let Some(status) = relay.exited() {
                panic!("freeDiameterd exited ({status}):\n{}", tail(&relay.log, 40));
            }
            relay.count(&["'STATE_OPEN'", "'ocs.gyro.test'"]) >= 1
                && gyro.open_peer(RELAY).is_some()
        },
        || context(gyro, relay),
    );
    gyro.open_peer(RELAY).unwrap()
}

/// Runs `gyro load` for `count` requests of data sessions against the
/// relay, on two connections; returns its JSON report.
fn load_through(relay: &Relay, count: u64) -> Value {
    let target = format!("127.0.0.1:{}", relay.port);
    let n = count.to_string();
    let (_code, out, err) = gyro(&[
        "load",
        "--target",
        &target,
        "--threads",
        "1",
        "-c",
        "2",
        "-w",
        "32",
        "-n",
        &n,
        "--timeout",
        "30s",
        "--quiet",
        "--json",
    ]);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("gyro load printed no report ({e}): {out}\n{err}"))
}

/// Every request answered with DIAMETER_SUCCESS, nothing lost.
fn assert_all_answered(report: &Value) {
    let r = report;
    assert_eq!(r["sent"], REQUESTS, "{r:#}");
    assert_eq!(r["answered"], REQUESTS, "{r:#}");
    for zero in [
        "timeouts",
        "lost",
        "abandoned",
        "protocol_errors",
        "unmatched_answers",
        "connection_errors",
        "server_requests",
        "errors",
    ] {
        assert_eq!(r[zero], 0, "{zero} in {r:#}");
    }
    assert_eq!(r["connections_opened"], 2, "{r:#}");
    assert_eq!(r["result_codes"], json!({"2001": REQUESTS}), "{r:#}");
    let mscc = r["mscc_result_codes"].as_object().unwrap();
    assert!(
        mscc.len() == 1 && mscc.contains_key("2001"),
        "every MSCC granted: {r:#}"
    );
    let sessions = &r["sessions"];
    assert_eq!(sessions["started"], sessions["completed"], "{r:#}");
    assert_eq!(sessions["failed"], 0, "{r:#}");
}

/// The relay's own count of what it relayed: every request sent on to
/// gyro and every answer back, and no parsing, routing or delivery error.
fn assert_relayed(relay: &Relay, requests: u64) {
    let n = usize::try_from(requests).unwrap();
    let counts = [
        (
            "requests from gyro load",
            relay.count(&["RCV from 'load-", "4/272 f:R"]),
        ),
        (
            "requests to gyro",
            relay.count(&["SND to 'ocs.gyro.test'", "4/272 f:R"]),
        ),
        (
            "answers from gyro",
            relay.count(&["RCV from 'ocs.gyro.test'", "4/272 f:-"]),
        ),
        (
            "answers to gyro load",
            relay.count(&["SND to 'load-", "4/272 f:-"]),
        ),
    ];
    for (what, count) in counts {
        assert_eq!(
            count,
            n,
            "freeDiameterd's log: {what}\n{}",
            tail(&relay.log, 40)
        );
    }
    for error in ["PARSING ERROR", "ROUTING ERROR", "DROPPED", "FAILOVER"] {
        assert_eq!(
            relay.count(&[error]),
            0,
            "freeDiameterd logged {error}:\n{}",
            relay.log()
        );
    }
}

/// Sums of the CDRs gyro wrote: (usage records, session-end records, sum
/// of the usage amounts).
fn cdrs(data: &Path) -> (u64, u64, i64) {
    let (mut usage, mut ends, mut amount) = (0, 0, 0);
    for shard in std::fs::read_dir(data.join("cdr")).expect("CDR directory") {
        for file in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            for line in text.lines() {
                let cdr: Value = serde_json::from_str(line).unwrap();
                assert!(
                    cdr["session_id"]
                        .as_str()
                        .is_some_and(|s| s.starts_with("load.gyro.test;")),
                    "{cdr}"
                );
                match cdr["record_type"].as_str() {
                    Some("usage") => {
                        usage += 1;
                        amount += cdr["amount"].as_i64().unwrap();
                    }
                    Some("session-end") => ends += 1,
                    _ => {}
                }
            }
        }
    }
    (usage, ends, amount)
}

/// `gyro ledger --json` on the stopped server's data directory.
fn ledger(data: &Path) -> Value {
    let d = data.to_string_lossy();
    let (code, out, err) = gyro(&["ledger", "--json", "--data-dir", &d]);
    assert_eq!(code, 0, "gyro ledger: {err}");
    serde_json::from_str(&out).unwrap()
}

/// gyro's books after the run: one usage CDR per rating group of every
/// CCR-U and CCR-T, one session-end CDR per CCR-T, the amounts debited
/// equal to the CDRs' and nothing left reserved or open.
fn assert_books(data: &Path, report: &Value) {
    let answered = |name: &str| -> u64 {
        report["per_type"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map_or(0, |t| t["answered"].as_u64().unwrap())
    };
    let (updates, terminates) = (answered("CCR-U"), answered("CCR-T"));
    let (usage, ends, amount) = cdrs(data);
    // gyro load's default data sessions report on rating groups 10 and 20.
    assert_eq!(usage, 2 * (updates + terminates), "usage CDRs");
    assert_eq!(ends, terminates, "session-end CDRs");
    let books = ledger(data);
    assert_eq!(books["violations"], 0, "{books}");
    assert_eq!(books["open_sessions"], 0, "{books}");
    assert_eq!(books["reserved"], 0, "{books}");
    assert_eq!(books["debited"], amount, "debited = the CDRs' amounts");
    assert!(amount > 0, "something was charged");
}

/// gyro after SIGTERM: it sent DPR to the relay, which answered.
fn stop_and_check_dpr(gyro: &mut Gyro, relay: &Relay) {
    gyro.stop();
    wait_for(
        "freeDiameterd received gyro's DPR",
        Duration::from_secs(10),
        || relay.count(&["'ocs.gyro.test' sent a DPR"]) >= 1,
        || tail(&relay.log, 20),
    );
}

/// `gyro certs DIR/certs` with a client certificate for the relay;
/// returns the certificate directory.
fn relay_certs(dir: &Path) -> PathBuf {
    let certs = dir.join("certs");
    let c = certs.to_string_lossy();
    let (code, out, err) = gyro(&["certs", &c, "--client", RELAY, "--client-file", "relay"]);
    assert_eq!(code, 0, "gyro certs: {out}{err}");
    certs
}

/// gyro's `[tls]` listener on `port` with the certificates in `certs`,
/// client certificates required, TLS `min_version` or later.
fn tls_section(certs: &Path, port: u16, min_version: &str) -> String {
    format!(
        "[tls]\nlisten = [\"127.0.0.1:{port}\"]\ncert = \"{c}/server.pem\"\n\
         key = \"{c}/server.key\"\nclient_ca = \"{c}/ca.pem\"\nclient_auth = \"required\"\n\
         min_version = \"{min_version}\"\n",
        c = certs.display()
    )
}

/// The link from the relay to gyro in [`through_a_relay`].
#[derive(Clone, Copy, PartialEq)]
enum Case {
    /// Plain TCP. gyro's watchdog is slow (30 s), freeDiameterd's fast
    /// (Tw 6 s, +/- 2 s of jitter): on the idle link the DWRs come from
    /// freeDiameterd and gyro answers them.
    Tcp,
    /// TLS 1.3 (gyro accepts nothing older; GnuTLS's default priorities).
    /// Here gyro's watchdog is the fast one (6 s) and freeDiameterd's
    /// slow (12 s, +/- 2 s): gyro sends the DWRs, freeDiameterd answers.
    Tls13,
    /// TLS 1.2 (freeDiameterd's GnuTLS offers nothing else); no watchdog
    /// wait.
    Tls12,
}

/// gyro load -> freeDiameterd -> gyro serve over `case`, `REQUESTS`
/// requests: every one answered 2001, counted alike by gyro load, the
/// relay and gyro; the watchdog (per `case`); DPR when gyro stops; the
/// CDRs and the ledger.
fn through_a_relay(test: &str, case: Case) {
    let Some(ext) = freediameter(test) else {
        return;
    };
    let dir = scratch(test);
    let certs = (case != Case::Tcp).then(|| relay_certs(&dir));
    let (gyro_watchdog, relay_tw) = match case {
        Case::Tcp => (30.0, 6),
        Case::Tls13 => (6.0, 12),
        Case::Tls12 => (30.0, 30),
    };
    let mut gyro = Gyro::start(&dir, gyro_watchdog, |port| match (&certs, case) {
        (Some(c), Case::Tls13) => tls_section(c, port, "1.3"),
        (Some(c), _) => tls_section(c, port, "1.2"),
        (None, _) => String::new(),
    });
    let (gyro_port, link) = match &certs {
        None => (gyro.plain_port, Link::Tcp),
        Some(c) => (
            gyro.tls_port,
            Link::Tls {
                certs: c,
                file: "relay",
                prio: (case == Case::Tls12).then_some("NORMAL:-VERS-ALL:+VERS-TLS1.2"),
            },
        ),
    };
    let relay = Relay::start(&dir, "relay", &ext, RELAY, relay_tw, gyro_port, link);
    let peer = wait_open(&gyro, &relay);
    assert_eq!(peer["origin_realm"], "gyro.test");
    // Over TLS, the handshake came first (GnuTLS verified gyro's
    // certificate for ocs.gyro.test; gyro required the relay's client
    // certificate and found relay.gyro.test in it), then the CER.
    let transport = if case == Case::Tcp {
        "TCP,soc"
    } else {
        "TCP,TLS,soc"
    };
    assert_eq!(
        relay.count(&[&format!("Connected to 'ocs.gyro.test' ({transport}")]),
        1,
        "{transport} to gyro: {}",
        tail(&relay.log, 20)
    );

    let report = load_through(&relay, REQUESTS);
    assert_all_answered(&report);
    assert_relayed(&relay, REQUESTS);
    // gyro saw one peer, the relay, carry every request: gyro load's
    // own identities never reached it.
    let peers = gyro.peers();
    assert_eq!(peers.len(), 1, "{peers:?}");
    assert_eq!(peers[0]["origin_host"], RELAY);
    assert_eq!(peers[0]["requests"], REQUESTS, "{peers:?}");
    assert_eq!(peers[0]["answers"], REQUESTS, "{peers:?}");

    let watchdog: Option<(&str, [&str; 2], [&str; 2])> = match case {
        Case::Tcp => Some((
            "freeDiameterd's DWR answered by gyro",
            ["SND to 'ocs.gyro.test'", "Device-Watchdog-Request"],
            ["RCV from 'ocs.gyro.test'", "0/280 f:-"],
        )),
        Case::Tls13 => Some((
            "gyro's DWR answered by freeDiameterd",
            ["RCV from 'ocs.gyro.test'", "0/280 f:R"],
            ["SND to 'ocs.gyro.test'", "Device-Watchdog-Answer"],
        )),
        Case::Tls12 => None,
    };
    if let Some((what, request, answer)) = watchdog {
        wait_for(
            what,
            Duration::from_secs(40),
            || relay.count(&request) >= 1 && relay.count(&answer) >= 1,
            || context(&gyro, &relay),
        );
        let still = gyro.open_peer(RELAY).expect("the relay's link still open");
        assert_eq!(still["connected_since"], peer["connected_since"]);
    }
    assert_eq!(relay.count(&["Connected to 'ocs.gyro.test'"]), 1);

    stop_and_check_dpr(&mut gyro, &relay);
    assert_books(&gyro.data, &report);
    drop(relay);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gy_through_a_freediameter_relay_over_tcp() {
    through_a_relay("gy_through_a_freediameter_relay_over_tcp", Case::Tcp);
}

#[test]
fn gy_through_a_freediameter_relay_over_tls_1_3() {
    through_a_relay("gy_through_a_freediameter_relay_over_tls_1_3", Case::Tls13);
}

#[test]
fn gy_through_a_freediameter_relay_over_tls_1_2() {
    through_a_relay("gy_through_a_freediameter_relay_over_tls_1_2", Case::Tls12);
}

#[test]
fn gyro_refuses_a_relay_whose_certificate_does_not_name_it() {
    let Some(ext) = freediameter("gyro_refuses_a_relay_whose_certificate_does_not_name_it") else {
        return;
    };
    let dir = scratch("fd-refused");
    let certs = relay_certs(&dir);
    // gyro binds relay.gyro.test to a certificate naming
    // pinned.gyro.test; the relay's names relay.gyro.test only.
    let gyro = Gyro::start(&dir, 30.0, |port| {
        format!(
            "[[peers.identity]]\norigin_host = \"{RELAY}\"\nsan = \"pinned.gyro.test\"\n{}",
            tls_section(&certs, port, "1.2")
        )
    });
    let relay = Relay::start(
        &dir,
        "relay",
        &ext,
        RELAY,
        30,
        gyro.tls_port,
        link_tls(&certs),
    );
    // The TLS handshake completes (the certificate chains to the CA), the
    // CER is answered with DIAMETER_UNKNOWN_PEER and an Error-Message.
    wait_for(
        "gyro refusing the relay with 3010",
        Duration::from_secs(60),
        || {
            gyro.log().lines().any(|l| {
                l.contains("capabilities exchange refused")
                    && l.contains("code=3010")
                    && l.contains(&format!("host=\"{RELAY}\""))
                    && l.contains("pinned.gyro.test")
            }) && relay.count(&["DIAMETER_UNKNOWN_PEER", "3010", "pinned.gyro.test"]) >= 1
        },
        || context(&gyro, &relay),
    );
    assert!(
        relay.count(&["Connection to 'ocs.gyro.test' failed"]) >= 1,
        "freeDiameterd reports the refusal:\n{}",
        tail(&relay.log, 20)
    );
    assert!(gyro.open_peer(RELAY).is_none(), "{:?}", gyro.peers());

    // With no route to gyro, the relay answers gyro load's requests
    // itself (DIAMETER_UNABLE_TO_DELIVER, 3002); none reaches gyro.
    let report = load_through(&relay, 20);
    assert!(report["sent"].as_u64().unwrap() > 0, "{report:#}");
    assert_eq!(report["sent"], report["answered"], "{report:#}");
    assert_eq!(report["server_requests"], 0, "{report:#}");
    let codes = report["result_codes"].as_object().unwrap();
    assert!(
        codes.keys().all(|c| c == "3002"),
        "only 3002 from the relay: {report:#}"
    );
    let (_, workers) = gyro.get("/v1/peers");
    for w in workers["workers"].as_array().unwrap() {
        assert_eq!(w["requests"], 0, "{workers}");
    }
    drop(relay);

    // A relay whose Identity its certificate does not name at all:
    // freeDiameterd itself refuses to start with such a certificate
    // (GnuTLS checks the certificate against the Identity), and were it
    // to start, gyro would refuse it (3010): either way it never gets a
    // link.
    let rogue = Relay::start(
        &dir,
        "rogue",
        &ext,
        "rogue.gyro.test",
        30,
        gyro.tls_port,
        link_tls(&certs),
    );
    wait_for(
        "the rogue relay refused",
        Duration::from_secs(60),
        || {
            rogue.exited().is_some()
                || gyro.log().lines().any(|l| {
                    l.contains("capabilities exchange refused")
                        && l.contains("host=\"rogue.gyro.test\"")
                })
        },
        || context(&gyro, &rogue),
    );
    if let Some(status) = rogue.exited() {
        assert!(!status.success(), "{}", tail(&rogue.log, 20));
        eprintln!(
            "freeDiameterd refused to start as rogue.gyro.test with relay.gyro.test's \
             certificate ({status}): {}",
            rogue
                .log()
                .lines()
                .find(|l| l.contains("does not match"))
                .unwrap_or("")
        );
    }
    assert!(gyro.open_peer("rogue.gyro.test").is_none());
    drop(rogue);
    drop(gyro);
    let _ = std::fs::remove_dir_all(&dir);
}
