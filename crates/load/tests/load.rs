//! The load generator against a fake credit-control server.

mod common;

use std::time::Duration;

use common::{start, FakeConfig};
use gyro_load::{run_async, LoadArgs, Report, Scenario};

fn args(addr: std::net::SocketAddr) -> LoadArgs {
    LoadArgs {
        target: addr.to_string(),
        connections: 1,
        window: 8,
        quiet: true,
        timeout: Duration::from_secs(2),
        ..LoadArgs::default()
    }
}

fn per_type(r: &Report, name: &str) -> (u64, u64) {
    r.per_type
        .iter()
        .find(|t| t.name == name)
        .map_or((0, 0), |t| (t.sent, t.answered))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_sessions_run_initial_updates_terminate_in_order() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        count: Some(200),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.sent, 200, "{}", r.human());
    assert_eq!(r.answered, 200);
    assert_eq!(per_type(&r, "CCR-I"), (40, 40));
    assert_eq!(per_type(&r, "CCR-U"), (120, 120));
    assert_eq!(per_type(&r, "CCR-T"), (40, 40));
    assert_eq!(per_type(&r, "CCR-E"), (0, 0));
    assert_eq!(r.result_codes.get(&2001), Some(&200));
    // Two rating groups: one MSCC Result-Code each in CCA-I and CCA-U.
    assert_eq!(r.mscc_result_codes.get(&2001), Some(&320));
    assert_eq!((r.errors, r.timeouts, r.protocol_errors), (0, 0, 0));
    assert_eq!(r.error_ratio(), 0.0);
    assert_eq!(r.sessions.started, 40);
    assert_eq!(r.sessions.completed, 40);
    assert_eq!(r.connections_opened, 1);
    assert!(r.latency_us.count == 200 && r.latency_us.max >= r.latency_us.p50);

    // The server saw each session as I, U, U, U, T numbered 0..=4, the
    // Subscription-Id on CCR-I only, and one MSCC per rating group.
    let sessions = obs.sessions();
    assert_eq!(sessions.len(), 40);
    for (sid, reqs) in &sessions {
        assert!(sid.starts_with("load.gyro.test;"), "{sid}");
        assert_eq!(sid.split(';').count(), 4, "{sid}");
        let types: Vec<i32> = reqs.iter().map(|s| s.request_type).collect();
        let numbers: Vec<u32> = reqs.iter().map(|s| s.number).collect();
        assert_eq!(types, vec![1, 2, 2, 2, 3], "{sid}");
        assert_eq!(numbers, vec![0, 1, 2, 3, 4], "{sid}");
        assert!(reqs[0].has_subscription_id && !reqs[1].has_subscription_id);
        assert!(reqs.iter().all(|s| s.mscc == 2));
    }
    // The server's DWR was answered, and the client said goodbye with a DPR.
    assert_eq!(obs.dwa.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(obs.dpr.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_is_respected_with_answers_out_of_order() {
    let (addr, obs) = start(FakeConfig {
        hold: Some(Duration::from_millis(2)),
        log: false,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        connections: 3,
        window: 16,
        count: Some(3000),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.sent, 3000, "{}", r.human());
    assert_eq!(r.answered, 3000);
    assert_eq!(r.unmatched_answers, 0);
    assert_eq!(r.errors, 0);
    let max = obs.max_outstanding.lock().unwrap().clone();
    assert_eq!(max.len(), 3);
    for m in max {
        assert!(m <= 16, "window exceeded: {m} in flight");
        assert!(m >= 8, "window not filled: at most {m} in flight");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sms_events_are_one_shot_direct_debits() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        scenario: Scenario::Sms,
        count: Some(100),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(per_type(&r, "CCR-E"), (100, 100), "{}", r.human());
    assert_eq!(r.per_type.len(), 1);
    let sessions = obs.sessions();
    assert_eq!(sessions.len(), 100);
    for reqs in sessions.values() {
        assert_eq!(reqs.len(), 1);
        let s = &reqs[0];
        assert_eq!((s.request_type, s.number), (4, 0));
        assert_eq!(s.requested_action, Some(0));
        assert!(s.has_subscription_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mix_sends_both_kinds_and_uses_the_whole_count() {
    let (addr, _obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        scenario: Scenario::Mix,
        sms_ratio: 0.5,
        connections: 2,
        count: Some(601),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.sent, 601, "{}", r.human());
    let (i, _) = per_type(&r, "CCR-I");
    let (t, _) = per_type(&r, "CCR-T");
    let (e, _) = per_type(&r, "CCR-E");
    assert!(i > 10 && e > 10, "{}", r.human());
    assert_eq!(i, t);
    assert_eq!(r.errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_run_sends_about_rate_times_duration() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        connections: 2,
        window: 16,
        rate: Some(2000.0),
        duration: Some(Duration::from_millis(1000)),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    // 2000 scheduled in the second, plus the rest of the sessions still open
    // at the end (at most 4 more requests for each of the 32 sessions).
    assert!((1000..=2400).contains(&r.sent), "{}", r.human());
    assert_eq!(r.answered, r.sent);
    assert_eq!(r.errors, 0);
    // Sessions open at the deadline were finished: every CCR-I has a CCR-T.
    assert_eq!(r.sessions.started, r.sessions.completed);
    for reqs in obs.sessions().values() {
        assert_eq!(reqs.last().map(|s| s.request_type), Some(3));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_duration_run_finishes_its_sessions() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        connections: 2,
        window: 32,
        duration: Some(Duration::from_millis(300)),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert!(r.sent > 100, "{}", r.human());
    assert_eq!(r.answered, r.sent);
    assert_eq!(r.sessions.started, r.sessions.completed);
    // The sessions open at the deadline were ended with a CCR-T in the
    // drain, counted apart from the measured requests.
    let (i, _) = per_type(&r, "CCR-I");
    let (t, _) = per_type(&r, "CCR-T");
    assert!(r.drain.sessions_finished > 0, "{}", r.human());
    assert_eq!(i, t + r.drain.sessions_finished, "{}", r.human());
    assert_eq!(r.drain.requests, r.drain.sessions_finished);
    assert_eq!(r.drain.answered, r.drain.requests);
    assert_eq!(r.drain.sessions_left_open, 0);
    assert_eq!(obs.sessions().len() as u64, i);
    for reqs in obs.sessions().values() {
        assert_eq!(reqs.last().map(|s| s.request_type), Some(3));
    }
    assert!(r.rate > 0.0 && r.elapsed_secs > 0.2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_never_answers_gives_timeouts_and_errors() {
    let (addr, _obs) = start(FakeConfig {
        answer_ccr: false,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        scenario: Scenario::Sms,
        window: 32,
        count: Some(20),
        timeout: Duration::from_millis(300),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.sent, 20, "{}", r.human());
    assert_eq!(r.answered, 0);
    assert_eq!(r.timeouts, 20);
    assert_eq!(r.error_ratio(), 1.0);
    assert!(r.exceeds_error_ratio(0.01));
    assert_eq!(
        gyro_load::exit_code(&r, 0.01),
        std::process::ExitCode::FAILURE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_without_cea_is_a_connection_error() {
    let (addr, _obs) = start(FakeConfig {
        answer_cer: false,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        count: Some(10),
        timeout: Duration::from_millis(300),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(
        (r.sent, r.connections_opened, r.connection_errors),
        (0, 0, 1)
    );
    assert!(r.first_connection_error.is_some());
    assert_eq!(r.error_ratio(), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_initial_answer_ends_the_session() {
    let (addr, obs) = start(FakeConfig {
        initial_result: 4012,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        count: Some(50),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    let (i, ia) = per_type(&r, "CCR-I");
    assert_eq!(r.per_type.len(), 1, "{}", r.human());
    assert!(i >= 46 && i == ia && i == r.sent, "{}", r.human());
    assert_eq!(r.result_codes.get(&4012), Some(&i));
    assert_eq!(r.sessions.failed, i);
    assert_eq!(r.error_ratio(), 1.0);
    assert!(obs.sessions().values().all(|v| v.len() == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_report_parses_and_round_trips() {
    let (addr, _obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        count: Some(50),
        scenario: Scenario::Mix,
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    let json = r.to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["sent"], 50);
    assert_eq!(v["result_codes"]["2001"], 50);
    assert!(v["latency_us"]["p99"].is_u64());
    assert!(v["per_type"].as_array().is_some_and(|t| !t.is_empty()));
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.sent, r.sent);
    assert_eq!(back.result_codes, r.result_codes);
    assert!(r.human().contains("p99.9"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unframeable_answers_close_the_connection_and_lose_its_requests() {
    let (addr, _obs) = start(FakeConfig {
        garbage: true,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        count: Some(40),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.answered, 0, "{}", r.human());
    assert!(r.sent > 0 && r.lost == r.sent);
    assert_eq!(r.connection_errors, 1);
    assert!(r.protocol_errors >= 1);
    assert_eq!(r.error_ratio(), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_connection_has_its_own_origin_host_and_says_goodbye_with_a_dpr() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        connections: 3,
        count: Some(30),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!((r.connections_opened, r.errors), (3, 0), "{}", r.human());
    let mut hosts = obs.cer_hosts.lock().unwrap().clone();
    hosts.sort();
    assert_eq!(
        hosts,
        ["load-1.gyro.test", "load-2.gyro.test", "load-3.gyro.test"]
    );
    // DO_NOT_WANT_TO_TALK_TO_YOU (2): the run is over, do not reconnect.
    assert_eq!(*obs.dpr_causes.lock().unwrap(), [2, 2, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_origin_host_keeps_one_identity_for_every_connection() {
    let (addr, obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        connections: 2,
        count: Some(10),
        same_origin_host: true,
        ..args(addr)
    };
    run_async(a).await.unwrap();
    assert_eq!(
        *obs.cer_hosts.lock().unwrap(),
        ["load.gyro.test", "load.gyro.test"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_offers_rates_above_one_request_per_millisecond() {
    let (addr, _obs) = start(FakeConfig {
        log: false,
        ..FakeConfig::default()
    })
    .await;
    // 20,000/s on one connection: 20 requests per millisecond, so a pacer
    // that slept on a 1 ms timer per request could not offer it.
    let a = LoadArgs {
        rate: Some(20_000.0),
        duration: Some(Duration::from_millis(500)),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.errors, 0, "{}", r.human());
    // 10,000 scheduled, plus the tails of the sessions open at the end.
    assert!(r.sent >= 9_000, "{}", r.human());
    let lag = r.send_lag_us.expect("open loop reports its send lag");
    assert_eq!(lag.count, r.sent);
    // Sessions sized to the rate: 20 ms of it, not the default 128.
    assert_eq!(r.window, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_deals_the_rate_evenly_over_threads_and_connections() {
    let (addr, obs) = start(FakeConfig::default()).await;
    // Five connections on two load threads (three and two connections):
    // each thread offers its share of the rate, and each connection a
    // fifth of it.
    let a = LoadArgs {
        connections: 5,
        threads: 2,
        rate: Some(2_000.0),
        duration: Some(Duration::from_millis(1_000)),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.errors, 0, "{}", r.human());
    assert_eq!(r.answered, r.sent);
    assert_eq!(r.sessions.started, r.sessions.completed);
    // 2,000 scheduled in the second, plus at most 4 more requests for each
    // of the 8 sessions of each connection still open at the end.
    assert!(
        (1_800..=2_200 + 5 * 8 * 4).contains(&r.sent),
        "{}",
        r.human()
    );
    let lag = r
        .send_lag_us
        .as_ref()
        .expect("open loop reports its send lag");
    assert_eq!(lag.count, r.sent);
    let offered = r.offered_rate.expect("open loop reports the rate offered");
    assert!((1_800.0..=2_200.0).contains(&offered), "{}", r.human());
    // On the caller's runtime the generator cannot tell its CPU time.
    assert!(r.generator.is_none());
    let per_conn: Vec<usize> = obs.log.lock().unwrap().iter().map(Vec::len).collect();
    assert_eq!(per_conn.len(), 5);
    assert_eq!(per_conn.iter().sum::<usize>() as u64, r.sent);
    // Every connection got its fifth of the slots; they differ by no more
    // than the tails of their sessions.
    let (lo, hi) = (
        per_conn.iter().min().unwrap(),
        per_conn.iter().max().unwrap(),
    );
    assert!(hi - lo <= 8 * 4 + 2, "{per_conn:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_leaves_the_first_requests_out_of_the_latency_only() {
    let (addr, _obs) = start(FakeConfig::default()).await;
    // A warm-up longer than the run: every request answered and counted,
    // no latency recorded.
    let a = LoadArgs {
        count: Some(100),
        warmup: Duration::from_secs(3600),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!((r.sent, r.answered), (100, 100), "{}", r.human());
    assert_eq!(r.latency_us.count, 0);
    // No warm-up: every answer's latency is recorded.
    let r = run_async(LoadArgs {
        count: Some(100),
        ..args(addr)
    })
    .await
    .unwrap();
    assert_eq!(r.latency_us.count, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_auth_request_is_answered_with_one_session_id_and_a_valid_raa() {
    use gyro_diameter::codes::avp;
    use gyro_diameter::validate::{validate_answer, Options};
    use gyro_diameter::Message;
    let (addr, obs) = start(FakeConfig {
        send_rar: true,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        connections: 1,
        count: Some(20),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.errors, 0, "{}", r.human());
    let raas = obs.raas.lock().unwrap().clone();
    let sessions = obs.sessions();
    assert_eq!(raas.len(), sessions.len(), "one RAA per session's RAR");
    let dict = gyro_diameter::dict::Dictionary::builtin();
    for raa in &raas {
        let m = Message::parse(raa).unwrap();
        let sids: Vec<_> = m
            .avps()
            .map(|a| a.unwrap())
            .filter(|a| a.code() == avp::SESSION_ID.code)
            .collect();
        assert_eq!(sids.len(), 1, "exactly one Session-Id in {m:?}");
        assert!(sessions.contains_key(sids[0].utf8().unwrap()));
        assert_eq!(
            m.find(avp::RESULT_CODE).and_then(|a| a.u32().ok()),
            Some(2001)
        );
        if let Err(p) = validate_answer(dict, raa, &Options::strict()) {
            panic!("not a valid RAA: {} {}", p.result_code, p.message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_does_not_shorten_the_measured_run() {
    // 100 answers in the first milliseconds, then silence: the run lasts
    // its 2 s of requests timing out, and its time and rate say so.
    let (addr, _obs) = start(FakeConfig {
        answer_first: Some(100),
        log: false,
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        connections: 1,
        window: 4,
        duration: Some(Duration::from_secs(2)),
        timeout: Duration::from_millis(300),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(r.answered, 100, "{}", r.human());
    assert!(r.timeouts > 0, "{}", r.human());
    assert!(r.elapsed_secs >= 1.9, "{}", r.human());
    assert!(r.rate <= 100.0 / 1.9, "{}", r.human());
    // The table's columns add up: the all row counts errors among answers
    // as each row does; the timeouts have their own column.
    let text = r.human();
    let all: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with("all "))
        .expect("an all row")
        .split_whitespace()
        .collect();
    let per_type: u64 = r.per_type.iter().map(|t| t.errors).sum();
    assert_eq!(all[3], r.timeouts.to_string(), "{text}");
    assert_eq!(all[4], per_type.to_string(), "{text}");
    assert!(r.errors >= r.timeouts, "the summary keeps them all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_cannot_be_opened_fails_the_run() {
    // Two connections asked, the second never gets its CEA: half the
    // count is sent, and the run is not the one asked for.
    let (addr, _obs) = start(FakeConfig {
        cer_connections: Some(1),
        ..FakeConfig::default()
    })
    .await;
    let a = LoadArgs {
        connections: 2,
        count: Some(20),
        timeout: Duration::from_millis(300),
        ..args(addr)
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(
        (r.connections_opened, r.connection_errors),
        (1, 1),
        "{}",
        r.human()
    );
    assert!(r.sent > 0 && r.errors == 0, "{}", r.human());
    assert_eq!(
        gyro_load::exit_code(&r, 0.01),
        std::process::ExitCode::FAILURE
    );
}
