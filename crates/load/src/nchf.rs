//! `gyro load --protocol nchf`: the data scenario over 5G converged
//! charging (Nchf_ConvergedCharging, 3GPP TS 32.291) instead of Diameter
//! Gy, so one tool benchmarks both interfaces side by side.
//!
//! Each of `--connections` HTTP/2 connections (prior knowledge, h2c) runs
//! `--window` sessions at once, closed loop: Create (`POST
//! /nchf-convergedcharging/v3/chargingdata`) asking for quota on every
//! `--rating-groups` rating group, `--updates` Updates reporting
//! `--used-octets` per rating group and asking for `--requested-octets`
//! more, and a Release, as an SMF does for a PDU session. The subscriber
//! is picked as for Diameter (`--subscriber-start`, `--subscribers`), sent
//! as the GPSI (`msisdn-...`), with the SUPI (`imsi-...`) when `--imsi` is
//! given. Many places may share a subscriber (`--subscribers` below
//! connections x window): its sessions are charged side by side. A window
//! above the server's SETTINGS_MAX_CONCURRENT_STREAMS is allowed: the
//! requests past it wait in the client for a stream to close (h2 opens
//! them in order), and their latency counts the wait. The places of a
//! connection share its counters, so a large window costs no memory.
//!
//! With `--rate` it runs open loop: requests are due at evenly spaced
//! intended times over the whole run (`--rate` a second, dealt round robin
//! to the connections), each the next step of a session waiting for one
//! (a new session's Create, an Update, a Release), and each request's
//! latency counts from its intended time, so a server that stalls shows up
//! as latency, not as a lower rate. A session that waits for its next
//! request goes before a new one, so sessions go on at the pace of their
//! answers. There are `--window` session places per connection (raised to
//! 20 ms of its share of the rate, as for Diameter); a request due while
//! every place waits for an answer waits for one and keeps its intended
//! time. Times are tokio's (1 ms resolution): requests
//! due within the same millisecond leave together.
//!
//! With `--tls` it connects over TLS offering ALPN `h2` (the server must
//! choose it), with the CA, client certificate and server name options of
//! Diameter over TLS; the report counts the handshakes.
//!
//! The report is the Diameter one: latency per request type (Create is
//! counted as CCR-I, Update as CCR-U, Release as CCR-T), with HTTP status
//! codes where Diameter has Result-Codes, and each rating group's
//! `resultCode` counted under the Result-Code it stands for (SUCCESS
//! 2001, QUOTA_LIMIT_REACHED 4012, ...). A session cut by the end of the
//! run is released first, so nothing stays reserved. Requests sent (open
//! loop: intended) in the first `--warmup` are left out of the latency
//! figures, as for Diameter.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use bytes::{Bytes, BytesMut};

use crate::args::LoadArgs;
use crate::conn::{tls_client_offering, TlsClient};
use crate::stats::{ConnStats, Report, ReqType, RunInfo};

const API: &str = "/nchf-convergedcharging/v3/chargingdata";

/// What every session shares.
struct Plan {
    args: LoadArgs,
    /// `http` (h2c) or `https` (TLS).
    scheme: &'static str,
    authority: String,
    deadline: Option<Instant>,
    /// When sending began (the per-second counters count from here).
    start: Instant,
    /// Requests sent (or intended) before this are left out of the
    /// latency figures (`--warmup`).
    measure_from: Instant,
    count: Option<u64>,
    sent: AtomicU64,
    stop: AtomicBool,
}

impl Plan {
    fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
            || self.deadline.is_some_and(|d| Instant::now() >= d)
            || self.count.is_some_and(|n| self.sent.load(Relaxed) >= n)
    }
}

/// The Diameter Result-Code a rating group `resultCode` stands for.
fn unit_code(s: &str) -> u32 {
    match s {
        "SUCCESS" => 2001,
        "END_USER_SERVICE_DENIED" => 4010,
        "QUOTA_MANAGEMENT_NOT_APPLICABLE" => 4011,
        "QUOTA_LIMIT_REACHED" => 4012,
        "USER_UNKNOWN" => 5030,
        "RATING_FAILED" => 5031,
        _ => 5012,
    }
}

/// A ChargingDataRequest body.
fn body(a: &LoadArgs, subscriber: u64, seq: u32, used: bool, more: bool) -> Bytes {
    let now = humantime::format_rfc3339_millis(SystemTime::now());
    let mut s = String::with_capacity(640);
    s.push('{');
    if a.imsi {
        let imsi = a.imsi_start + (subscriber - a.subscriber_start);
        let _ = write!(s, "\"subscriberIdentifier\":\"imsi-{imsi:015}\",");
    }
    let _ = write!(
        s,
        "\"nfConsumerIdentification\":{{\"nodeFunctionality\":\"SMF\",\"nFName\":\"5e1a3c02-0000-4000-8000-00000000load\"}},\
         \"invocationTimeStamp\":\"{now}\",\"invocationSequenceNumber\":{seq},\"multipleUnitUsage\":["
    );
    for (i, rg) in a.rating_groups.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{{\"ratingGroup\":{rg}");
        if more {
            let _ = write!(
                s,
                ",\"requestedUnit\":{{\"totalVolume\":{}}}",
                a.requested_octets
            );
        }
        if used {
            let up = a.used_octets / 4;
            let _ = write!(
                s,
                ",\"usedUnitContainer\":[{{\"localSequenceNumber\":{seq},\"time\":{},\
                 \"uplinkVolume\":{up},\"downlinkVolume\":{},\"totalVolume\":{},\
                 \"triggers\":[{{\"triggerType\":\"{}\",\"triggerCategory\":\"IMMEDIATE_REPORT\"}}]}}]",
                a.used_time,
                a.used_octets - up,
                a.used_octets,
                if more { "QUOTA_THRESHOLD" } else { "FINAL" },
            );
        }
        s.push('}');
    }
    let _ = write!(
        s,
        "],\"pDUSessionChargingInformation\":{{\"chargingId\":{seq},\"userInformation\":\
         {{\"servedGPSI\":\"msisdn-{subscriber}\"}},\"pduSessionInformation\":\
         {{\"pduSessionID\":1,\"dnnId\":\"internet\",\"ratType\":\"NR\"}}}}}}"
    );
    Bytes::from(s)
}

/// One request and its answer: (status, Location, body).
async fn post(
    send: &h2::client::SendRequest<Bytes>,
    scheme: &str,
    authority: &str,
    path: &str,
    body: Bytes,
) -> Result<(u16, Option<String>, Bytes), h2::Error> {
    let mut send = send.clone().ready().await?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("{scheme}://{authority}{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(())
        .expect("a valid request");
    let (response, mut stream) = send.send_request(request, false)?;
    stream.send_data(body, true)?;
    let response = response.await?;
    let (parts, mut body) = response.into_parts();
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let location = parts
        .headers
        .get(http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Ok((parts.status.as_u16(), location, buf.freeze()))
}

/// What came back for one request: an answer, an HTTP/2 error, or nothing
/// within `--timeout`.
type Outcome = Result<Result<(u16, Option<String>, Bytes), h2::Error>, tokio::time::error::Elapsed>;

/// The counters a connection's requests share.
type Shared = Arc<Mutex<ConnStats>>;

fn lock(stats: &Shared) -> std::sync::MutexGuard<'_, ConnStats> {
    stats.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends one request of a session and records it; returns the answer if
/// it came. Its latency counts from `intended` (open loop) or from when
/// it left.
async fn exchange(
    plan: &Plan,
    send: &h2::client::SendRequest<Bytes>,
    stats: &Shared,
    kind: ReqType,
    path: &str,
    body: Bytes,
    intended: Option<Instant>,
) -> Option<(u16, Option<String>)> {
    plan.sent.fetch_add(1, Relaxed);
    let left = Instant::now();
    let from = intended.unwrap_or(left);
    {
        let mut s = lock(stats);
        s.types[kind as usize].sent += 1;
        s.per_second.sent(from);
        if let Some(intended) = intended {
            s.record_send(intended, left, plan.deadline);
        }
    }
    let answer = post(send, plan.scheme, &plan.authority, path, body);
    let outcome: Outcome = tokio::time::timeout(plan.args.timeout, answer).await;
    let measured = from >= plan.measure_from;
    account(&mut lock(stats), kind, from, measured, outcome)
}

/// Counts what came back for a request sent (or intended) at `from`; its
/// latency goes into the figures when `measured` (after `--warmup`).
fn account(
    stats: &mut ConnStats,
    kind: ReqType,
    from: Instant,
    measured: bool,
    outcome: Outcome,
) -> Option<(u16, Option<String>)> {
    match outcome {
        Err(_) => {
            stats.types[kind as usize].timeouts += 1;
            stats.per_second.timeout(Instant::now());
            stats.last_settled = Some(Instant::now());
            None
        }
        Ok(Err(e)) => {
            stats.lost += 1;
            stats.per_second.lost(Instant::now(), 1);
            stats.last_settled = Some(Instant::now());
            stats.connection_error(format!("HTTP/2: {e}"));
            None
        }
        Ok(Ok((status, location, body))) => {
            let t = &mut stats.types[kind as usize];
            t.answered += 1;
            let us = from.elapsed().as_micros() as u64;
            if measured {
                t.record_latency(us);
            }
            t.result_codes.add(u32::from(status));
            let ok = (200..300).contains(&status);
            if !ok {
                t.errors += 1;
            }
            stats.per_second.answered(Instant::now(), us, ok);
            stats.last_settled = Some(Instant::now());
            if status == 200 || status == 201 {
                count_units(stats, &body);
            }
            Some((status, location))
        }
    }
}

fn count_units(stats: &mut ConnStats, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        stats.protocol_errors += 1;
        return;
    };
    for m in v["multipleUnitInformation"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(code) = m["resultCode"].as_str() {
            stats.mscc_result_codes.add(unit_code(code));
        }
    }
}

/// The ChargingDataRef of a Create's Location.
fn reference_of(location: &str) -> String {
    location.rsplit('/').next().unwrap_or("").to_string()
}

/// Data sessions, one after the other, until the run stops (closed loop).
async fn sessions(plan: Arc<Plan>, send: h2::client::SendRequest<Bytes>, stats: Shared) {
    let a = &plan.args;
    while !plan.stopping() {
        let subscriber = a.subscriber_start + fastrand::u64(..a.subscribers.max(1));
        lock(&stats).sessions_started += 1;
        let created = exchange(
            &plan,
            &send,
            &stats,
            ReqType::Initial,
            API,
            body(a, subscriber, 0, false, true),
            None,
        )
        .await;
        let reference = match created {
            Some((201, Some(location))) => reference_of(&location),
            Some(_) => {
                lock(&stats).sessions_failed += 1;
                continue;
            }
            None => {
                lock(&stats).sessions_failed += 1;
                if send.clone().ready().await.is_err() {
                    break;
                }
                continue;
            }
        };
        let mut ok = true;
        let mut seq = 1;
        while seq <= a.updates && !plan.stopping() {
            let path = format!("{API}/{reference}/update");
            let r = exchange(
                &plan,
                &send,
                &stats,
                ReqType::Update,
                &path,
                body(a, subscriber, seq, true, true),
                None,
            )
            .await;
            seq += 1;
            if !matches!(r, Some((200, _))) {
                ok = false;
                break;
            }
        }
        release(&plan, &send, &stats, subscriber, &reference, seq, ok, None).await;
    }
}

/// Sends a session's Release (number `seq`) and counts the session as
/// completed when it and everything before it (`ok`) succeeded.
#[allow(clippy::too_many_arguments)]
async fn release(
    plan: &Plan,
    send: &h2::client::SendRequest<Bytes>,
    stats: &Shared,
    subscriber: u64,
    reference: &str,
    seq: u32,
    ok: bool,
    intended: Option<Instant>,
) {
    let path = format!("{API}/{reference}/release");
    let body = body(&plan.args, subscriber, seq, true, false);
    let r = exchange(plan, send, stats, ReqType::Terminate, &path, body, intended).await;
    let mut s = lock(stats);
    if ok && matches!(r, Some((204, _))) {
        s.sessions_completed += 1;
    } else {
        s.sessions_failed += 1;
    }
}

/// An open-loop session between two of its requests.
#[derive(Debug, Clone)]
struct Session {
    subscriber: u64,
    reference: String,
    /// The number of its next request.
    seq: u32,
    /// Whether every request so far succeeded.
    ok: bool,
}

/// A session place: `None` holds no session (its next request is a new
/// session's Create).
type Place = Option<Session>;

/// A connection: its sender and its counters.
#[derive(Clone)]
struct Conn {
    send: h2::client::SendRequest<Bytes>,
    stats: Shared,
}

/// The next request of the session in `place`, intended at `intended`;
/// gives the place back once answered.
async fn step(
    plan: Arc<Plan>,
    conn: Conn,
    place: Place,
    intended: Instant,
    back: tokio::sync::mpsc::UnboundedSender<Place>,
) {
    let a = &plan.args;
    let next = match place {
        None => {
            let subscriber = a.subscriber_start + fastrand::u64(..a.subscribers.max(1));
            lock(&conn.stats).sessions_started += 1;
            let body = body(a, subscriber, 0, false, true);
            let r = exchange(
                &plan,
                &conn.send,
                &conn.stats,
                ReqType::Initial,
                API,
                body,
                Some(intended),
            )
            .await;
            match r {
                Some((201, Some(location))) => Some(Session {
                    subscriber,
                    reference: reference_of(&location),
                    seq: 1,
                    ok: true,
                }),
                _ => {
                    lock(&conn.stats).sessions_failed += 1;
                    None
                }
            }
        }
        Some(mut s) if s.ok && s.seq <= a.updates => {
            let path = format!("{API}/{}/update", s.reference);
            let body = body(a, s.subscriber, s.seq, true, true);
            let r = exchange(
                &plan,
                &conn.send,
                &conn.stats,
                ReqType::Update,
                &path,
                body,
                Some(intended),
            )
            .await;
            s.seq += 1;
            s.ok = matches!(r, Some((200, _)));
            Some(s)
        }
        Some(s) => {
            let (send, stats) = (&conn.send, &conn.stats);
            release(
                &plan,
                send,
                stats,
                s.subscriber,
                &s.reference,
                s.seq,
                s.ok,
                Some(intended),
            )
            .await;
            None
        }
    };
    let _ = back.send(next);
}

/// The session places of an open-loop run: sessions waiting for their
/// next request, and places holding none.
struct Places {
    ready: std::collections::VecDeque<Session>,
    free: usize,
}

impl Places {
    fn put(&mut self, place: Place) {
        match place {
            Some(s) => self.ready.push_back(s),
            None => self.free += 1,
        }
    }

    /// A session that waits for its next request before a new one: so
    /// sessions go on at the pace of their answers and only as many are
    /// open as the rate and the answers' latency need.
    fn take(&mut self) -> Option<Place> {
        if let Some(s) = self.ready.pop_front() {
            return Some(Some(s));
        }
        (self.free > 0).then(|| {
            self.free -= 1;
            None
        })
    }
}

/// Open loop: one request of a waiting session at each intended time
/// until the run stops, then the Release of every session still open.
async fn open_loop(plan: Arc<Plan>, conns: &[Conn], places: usize, rate: f64) {
    let (back, mut answered) = tokio::sync::mpsc::unbounded_channel::<Place>();
    let mut waiting = Places {
        ready: Default::default(),
        free: places,
    };
    let mut steps = tokio::task::JoinSet::new();
    let mut slot: u64 = 0;
    while !plan.stopping() {
        let offset = (slot as f64 / rate).min(1.0e9);
        let intended = plan.start + Duration::from_secs_f64(offset);
        if plan.deadline.is_some_and(|d| intended >= d) {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        while let Ok(p) = answered.try_recv() {
            waiting.put(p);
        }
        // A request due while every place waits for an answer waits for
        // one, keeping its intended time, but not past the end of the run.
        let place = loop {
            if let Some(p) = waiting.take() {
                break Some(p);
            }
            let got = match plan.deadline {
                Some(d) => tokio::time::timeout_at(d.into(), answered.recv())
                    .await
                    .ok()
                    .flatten(),
                None => answered.recv().await,
            };
            match got {
                Some(p) => waiting.put(p),
                None => break None,
            }
        };
        let Some(place) = place else { break };
        let conn = conns[(slot % conns.len() as u64) as usize].clone();
        steps.spawn(step(plan.clone(), conn, place, intended, back.clone()));
        slot += 1;
        while steps.try_join_next().is_some() {}
    }
    while steps.join_next().await.is_some() {}
    // Every place is back: release the sessions the end of the run cut.
    drop(back);
    while let Ok(p) = answered.try_recv() {
        waiting.put(p);
    }
    let mut releases = tokio::task::JoinSet::new();
    for s in waiting.ready.drain(..) {
        let (plan, conn) = (plan.clone(), conns[0].clone());
        releases.spawn(async move {
            let (send, stats) = (&conn.send, &conn.stats);
            release(
                &plan,
                send,
                stats,
                s.subscriber,
                &s.reference,
                s.seq,
                s.ok,
                None,
            )
            .await;
        });
    }
    while releases.join_next().await.is_some() {}
}

/// Runs the load over Nchf and builds the report.
pub(crate) async fn run(args: LoadArgs, handle_signals: bool) -> anyhow::Result<Report> {
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be above 0"
    );
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    anyhow::ensure!(
        !args.rating_groups.is_empty(),
        "--rating-groups must name at least one"
    );
    let tls = tls_client_offering(&args, vec![b"h2".to_vec()])?;
    let target = if args.target == "127.0.0.1:3868" {
        "127.0.0.1:8585".to_string()
    } else {
        args.target.clone()
    };
    let addr: SocketAddr = tokio::net::lookup_host(&target)
        .await
        .with_context(|| format!("resolving {target}"))?
        .next()
        .with_context(|| format!("{target} has no address"))?;
    let duration = match (args.duration, args.count) {
        (None, None) => Some(crate::DEFAULT_DURATION),
        (d, _) => d,
    };
    let connections = args.connections;
    let window = args.effective_window().max(1);
    let rate = args.rate;
    let mut conns = Vec::new();
    let mut failed = Vec::new();
    for _ in 0..connections {
        let stats = ConnStats::new();
        match connect(addr, tls.as_ref()).await {
            Ok((send, took)) => {
                let mut stats = stats;
                stats.opened = true;
                stats.tls_handshake_us = took.map(|d| d.as_micros() as u64);
                conns.push((send, stats));
            }
            Err(e) => {
                let mut s = stats;
                s.connection_error(format!("connecting to {addr}: {e:#}"));
                failed.push(s);
            }
        }
    }
    let start = Instant::now();
    let plan = Arc::new(Plan {
        scheme: if tls.is_some() { "https" } else { "http" },
        authority: target.clone(),
        deadline: duration.map(|d| start + d),
        start,
        measure_from: start + args.warmup,
        count: args.count,
        sent: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        args,
    });
    let signals = handle_signals.then(|| {
        let plan = plan.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                plan.stop.store(true, Relaxed);
            }
        })
    });
    // One set of counters per connection, shared by its session places:
    // a full set per place (five latency histograms of about 190 KB each)
    // would cost connections x window of them, gigabytes and seconds of
    // page faults at a large window, spent after the run's clock started.
    let conns: Vec<Conn> = conns
        .into_iter()
        .map(|(send, mut stats)| {
            stats.per_second.start = Some(start);
            Conn {
                send,
                stats: Arc::new(Mutex::new(stats)),
            }
        })
        .collect();
    let counters: Vec<Shared> = conns.iter().map(|c| c.stats.clone()).collect();
    match rate {
        Some(rate) if !conns.is_empty() => {
            open_loop(plan.clone(), &conns, conns.len() * window as usize, rate).await;
        }
        _ => {
            let mut tasks = Vec::new();
            for c in &conns {
                for _ in 0..window {
                    let (plan, c) = (plan.clone(), c.clone());
                    tasks.push(tokio::spawn(sessions(plan, c.send, c.stats)));
                }
            }
            for t in tasks {
                if let Err(e) = t.await {
                    let mut s = ConnStats::new();
                    s.connection_error(format!("session task failed: {e}"));
                    failed.push(s);
                }
            }
        }
    }
    if let Some(s) = signals {
        s.abort();
    }
    let end = Instant::now();
    let mut stats = failed;
    for c in counters {
        let s = std::mem::replace(&mut *lock(&c), ConnStats::new());
        stats.push(s);
    }
    Ok(Report::build(
        RunInfo {
            target,
            scenario: "nchf-data",
            connections,
            window,
            target_rate: rate,
            duration: rate.and(duration),
            start,
            end,
            // The Nchf load runs on the caller's runtime.
            threads: None,
        },
        &stats,
    ))
}

/// An HTTP/2 connection to `addr`: h2c, or over TLS with ALPN `h2` (then
/// with the handshake's time).
async fn connect(
    addr: SocketAddr,
    tls: Option<&TlsClient>,
) -> anyhow::Result<(h2::client::SendRequest<Bytes>, Option<Duration>)> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .context("timed out")??;
    tcp.set_nodelay(true)?;
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(1 << 20);
    let Some(tls) = tls else {
        let (send, connection) = builder.handshake(tcp).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        return Ok((send, None));
    };
    let started = Instant::now();
    let stream = tokio::time::timeout(Duration::from_secs(5), tls.handshake(tcp))
        .await
        .context("TLS handshake timed out")?
        .context("TLS handshake")?;
    let took = started.elapsed();
    anyhow::ensure!(
        stream.get_ref().1.alpn_protocol() == Some(b"h2"),
        "the server did not choose HTTP/2 (ALPN h2) over TLS"
    );
    let (send, connection) = builder.handshake(stream).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((send, Some(took)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_loop_takes_a_waiting_session_before_a_new_one_and_waits_when_all_are_out() {
        let session = |seq| Session {
            subscriber: 1,
            reference: format!("nchf-1-{seq}"),
            seq,
            ok: true,
        };
        let mut p = Places {
            ready: Default::default(),
            free: 2,
        };
        assert!(matches!(p.take(), Some(None)), "a new session");
        p.put(Some(session(1)));
        p.put(Some(session(2)));
        assert_eq!(p.take().unwrap().unwrap().seq, 1, "the longest waiting");
        assert_eq!(p.take().unwrap().unwrap().seq, 2);
        assert!(matches!(p.take(), Some(None)));
        assert!(p.take().is_none(), "every place is out: wait for an answer");
        p.put(None);
        assert!(matches!(p.take(), Some(None)));
    }

    #[test]
    fn bodies_are_json_charging_data_requests() {
        let a = LoadArgs {
            imsi: true,
            ..LoadArgs::default()
        };
        let b = body(&a, a.subscriber_start + 7, 3, true, true);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["invocationSequenceNumber"], 3);
        assert_eq!(
            v["subscriberIdentifier"],
            format!("imsi-{:015}", a.imsi_start + 7)
        );
        let u = &v["multipleUnitUsage"][0];
        assert_eq!(u["ratingGroup"], 10);
        assert_eq!(u["usedUnitContainer"][0]["totalVolume"], a.used_octets);
        assert_eq!(
            v["pDUSessionChargingInformation"]["userInformation"]["servedGPSI"],
            format!("msisdn-{}", a.subscriber_start + 7)
        );
        let b = body(&a, a.subscriber_start, 0, false, true);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert!(v["multipleUnitUsage"][1].get("usedUnitContainer").is_none());
    }
}
