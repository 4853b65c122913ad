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
//! given.
//!
//! The report is the Diameter one: latency per request type (Create is
//! counted as CCR-I, Update as CCR-U, Release as CCR-T), with HTTP status
//! codes where Diameter has Result-Codes, and each rating group's
//! `resultCode` counted under the Result-Code it stands for (SUCCESS
//! 2001, QUOTA_LIMIT_REACHED 4012, ...). A session cut by the end of the
//! run is released first, so nothing stays reserved. Open loop (`--rate`)
//! and TLS are Diameter only for now.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use bytes::{Bytes, BytesMut};

use crate::args::LoadArgs;
use crate::stats::{ConnStats, Report, ReqType, RunInfo};

const API: &str = "/nchf-convergedcharging/v3/chargingdata";

/// What every session shares.
struct Plan {
    args: LoadArgs,
    authority: String,
    deadline: Option<Instant>,
    /// When sending began (the per-second counters count from here).
    start: Instant,
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
    authority: &str,
    path: &str,
    body: Bytes,
) -> Result<(u16, Option<String>, Bytes), h2::Error> {
    let mut send = send.clone().ready().await?;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{authority}{path}"))
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

/// Sends one request of a session, records it; returns the answer if it
/// came.
async fn exchange(
    plan: &Plan,
    send: &h2::client::SendRequest<Bytes>,
    stats: &mut ConnStats,
    kind: ReqType,
    path: &str,
    body: Bytes,
) -> Option<(u16, Option<String>)> {
    plan.sent.fetch_add(1, Relaxed);
    let t = &mut stats.types[kind as usize];
    t.sent += 1;
    let started = Instant::now();
    stats.per_second.sent(started);
    let answer = tokio::time::timeout(plan.args.timeout, post(send, &plan.authority, path, body));
    match answer.await {
        Err(_) => {
            stats.types[kind as usize].timeouts += 1;
            stats.per_second.timeout(Instant::now());
            None
        }
        Ok(Err(e)) => {
            stats.lost += 1;
            stats.per_second.lost(Instant::now(), 1);
            stats.connection_error(format!("HTTP/2: {e}"));
            None
        }
        Ok(Ok((status, location, body))) => {
            let t = &mut stats.types[kind as usize];
            t.answered += 1;
            let us = started.elapsed().as_micros() as u64;
            t.record_latency(us);
            t.result_codes.add(u32::from(status));
            let ok = (200..300).contains(&status);
            if !ok {
                t.errors += 1;
            }
            stats.per_second.answered(Instant::now(), us, ok);
            stats.last_answer = Some(Instant::now());
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

/// Data sessions, one after the other, until the run stops.
async fn sessions(plan: Arc<Plan>, send: h2::client::SendRequest<Bytes>) -> ConnStats {
    let mut stats = ConnStats::starting_at(plan.start);
    let a = &plan.args;
    while !plan.stopping() {
        let subscriber = a.subscriber_start + fastrand::u64(..a.subscribers.max(1));
        stats.sessions_started += 1;
        let created = exchange(
            &plan,
            &send,
            &mut stats,
            ReqType::Initial,
            API,
            body(a, subscriber, 0, false, true),
        )
        .await;
        let reference = match created {
            Some((201, Some(location))) => location.rsplit('/').next().unwrap_or("").to_string(),
            Some(_) => {
                stats.sessions_failed += 1;
                continue;
            }
            None => {
                stats.sessions_failed += 1;
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
                &mut stats,
                ReqType::Update,
                &path,
                body(a, subscriber, seq, true, true),
            )
            .await;
            seq += 1;
            if !matches!(r, Some((200, _))) {
                ok = false;
                break;
            }
        }
        let path = format!("{API}/{reference}/release");
        let r = exchange(
            &plan,
            &send,
            &mut stats,
            ReqType::Terminate,
            &path,
            body(a, subscriber, seq, true, false),
        )
        .await;
        if ok && matches!(r, Some((204, _))) {
            stats.sessions_completed += 1;
        } else {
            stats.sessions_failed += 1;
        }
    }
    stats
}

/// Runs the load over Nchf and builds the report.
pub(crate) async fn run(args: LoadArgs, handle_signals: bool) -> anyhow::Result<Report> {
    anyhow::ensure!(
        args.rate.is_none(),
        "--rate (open loop) is not available with --protocol nchf yet"
    );
    anyhow::ensure!(
        !args.tls.enabled,
        "--tls is not available with --protocol nchf yet (h2c only)"
    );
    anyhow::ensure!(
        !args.rating_groups.is_empty(),
        "--rating-groups must name at least one"
    );
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
    let (connections, window) = (args.connections, args.window.max(1));
    let mut sends = Vec::new();
    let mut failed = Vec::new();
    for _ in 0..connections {
        match connect(addr).await {
            Ok(s) => sends.push(s),
            Err(e) => {
                let mut s = ConnStats::new();
                s.connection_error(format!("connecting to {addr}: {e}"));
                failed.push(s);
            }
        }
    }
    let start = Instant::now();
    let plan = Arc::new(Plan {
        authority: target.clone(),
        deadline: duration.map(|d| start + d),
        start,
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
    let mut tasks = Vec::new();
    for send in &sends {
        for _ in 0..window {
            tasks.push(tokio::spawn(sessions(plan.clone(), send.clone())));
        }
    }
    let mut stats = failed;
    for (i, t) in tasks.into_iter().enumerate() {
        let mut s = t.await.unwrap_or_else(|e| {
            let mut s = ConnStats::new();
            s.connection_error(format!("session task failed: {e}"));
            s
        });
        // One "opened" per connection.
        s.opened = i % window as usize == 0;
        stats.push(s);
    }
    if let Some(s) = signals {
        s.abort();
    }
    let end = Instant::now();
    Ok(Report::build(
        RunInfo {
            target,
            scenario: "nchf-data",
            connections,
            window,
            target_rate: None,
            duration: None,
            start,
            end,
            // The Nchf load runs on the caller's runtime.
            threads: None,
        },
        &stats,
    ))
}

async fn connect(addr: SocketAddr) -> anyhow::Result<h2::client::SendRequest<Bytes>> {
    let tcp = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .context("timed out")??;
    tcp.set_nodelay(true)?;
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .handshake(tcp)
        .await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(send)
}

#[cfg(test)]
mod tests {
    use super::*;

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
