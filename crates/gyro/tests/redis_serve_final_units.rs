//! Final units used up under REDIRECT and RESTRICT_ACCESS on the Redis
//! Cluster ledger, against the embedded store (RFC 8506 sections 5.6.2
//! and 5.6.3): a partial grant carries the Final-Unit-Indication; the
//! CCR-Update that reports the final units without asking for more is
//! answered without units and with the Validity-Time the redirection or
//! restriction holds for, in the MSCC or, for a single service, at
//! command level. Asking again afterwards, with nothing left and nothing
//! to report, is 4012 without it (the report was answered); reported
//! while asking for more, 4012 with it. Part of the grant reported is not
//! the final units, and a TERMINATE final unit gets none. The same CCRs go over real sockets to
//! `gyro serve` on its own data directory and to two `gyro serve` nodes
//! on a real Redis Cluster (each session's requests alternate between
//! them); both answer the same and hold the same money.

mod redis_serve_support;
#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use gyro_charging::{CcRequest, Mscc, RequestType, ServiceUnits};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use redis_serve_support::*;
use redis_support::{cluster_nodes, options};
use support::common::Client;
use support::gateway::{exchange, Gateway};
use support::scratch;

/// Subscribers, one account each (0.50 each).
const REDIRECT: &str = "46709740001";
const RESTRICT: &str = "46709740002";
const TERMINATE: &str = "46709740003";
const SINGLE: &str = "46709740004";
const PARTIAL: &str = "46709740005";
const ASKING: &str = "46709740006";
const DATA: &str = "32251@3gpp.org";
const VOICE: &str = "32260@3gpp.org";

/// Data at 1.00 a MB in rating groups 10 (TERMINATE), 20 (REDIRECT,
/// Validity-Time 600) and 40 (RESTRICT_ACCESS, 120); voice at 0.01 a
/// second, RESTRICT_ACCESS, Validity-Time 90.
fn charging() -> String {
    let data = |rg: u32, validity: u32, fui: &str| {
        format!(
            r#"
[[tariff]]
name = "data-rg{rg}"
service_context = "{DATA}"
rating_group = {rg}
unit = "octets"
price = 100
per = 1000000
increment = 1000
default_quota = 10000000
validity_time = {validity}
final_unit = {fui}
"#
        )
    };
    let account = |id: u32, msisdn: &str| {
        format!(
            r#"
[[account]]
id = {id}
balance = 50
subscribers = ["e164:{msisdn}"]
"#
        )
    };
    format!(
        r#"
currency = "SEK"

[engine]
node_id = "final-units"
supervision_secs = {TCC_SECS}
lenient = true
{}{}{}
[[tariff]]
name = "voice"
service_context = "{VOICE}"
unit = "seconds"
price = 60
per = 60
default_quota = 300
validity_time = 90
final_unit = {{ action = "restrict-access", filter_ids = ["walled-garden"] }}
{}{}{}{}{}{}"#,
        data(10, 600, r#"{ action = "terminate" }"#),
        data(
            20,
            600,
            r#"{ action = "redirect", redirect = { address_type = "url", address = "http://top-up.example.invalid/" } }"#
        ),
        data(
            40,
            120,
            r#"{ action = "restrict-access", restriction_filter_rules = ["permit out ip from any to 10.1.1.1"] }"#
        ),
        account(7401, REDIRECT),
        account(7402, RESTRICT),
        account(7403, TERMINATE),
        account(7404, SINGLE),
        account(7405, PARTIAL),
        account(7406, ASKING),
    )
}

/// The CCRs of the test, in order, with what each is.
fn script(gw: &Gateway) -> Vec<(CcRequest, &'static str)> {
    use RequestType::{Initial, Termination, Update};
    let mut out = Vec::new();
    let mut n = 0u32;
    let mut session =
        |msisdn: &str,
         rg: Option<u32>,
         steps: Vec<(RequestType, Option<u64>, bool, &'static str)>| {
            n += 1;
            let id = format!("pgw.gyro.test;final-units;{n}");
            for (number, (kind, used, more, what)) in steps.into_iter().enumerate() {
                let mut r = gw.data_ccr(&id, msisdn, kind, number as u32, 0);
                r.end_to_end = gw.ids | (n << 8) | number as u32;
                let units = |u: u64| match rg {
                    Some(_) => ServiceUnits {
                        total_octets: Some(u),
                        ..ServiceUnits::default()
                    },
                    None => ServiceUnits {
                        time: Some(u as u32),
                        ..ServiceUnits::default()
                    },
                };
                let requested = more.then(ServiceUnits::default);
                match rg {
                    Some(rg) => {
                        r.mscc = vec![Mscc {
                            rating_group: Some(rg),
                            requested,
                            used: used.map(units),
                            ..Mscc::default()
                        }]
                    }
                    None => {
                        r.service_context = VOICE.into();
                        r.multiple_services = None;
                        r.mscc.clear();
                        r.requested = requested;
                        r.used = used.map(units);
                    }
                }
                out.push((r, what));
            }
        };
    // 0.50 buys 500,000 octets; they are reported, nothing asked; then
    // asked for again.
    let mscc_steps = || {
        vec![
            (Initial, None, true, "partial grant"),
            (Update, Some(500_000), false, "final units reported"),
            (Update, Some(0), true, "asked again with nothing left"),
            (Termination, Some(0), false, "end"),
        ]
    };
    session(REDIRECT, Some(20), mscc_steps());
    session(RESTRICT, Some(40), mscc_steps());
    session(TERMINATE, Some(10), mscc_steps()[..2].to_vec());
    // 0.50 buys 50 seconds.
    session(
        SINGLE,
        None,
        vec![
            (Initial, None, true, "partial grant (single service)"),
            (
                Update,
                Some(50),
                false,
                "final units reported (single service)",
            ),
            (Termination, Some(0), false, "end (single service)"),
        ],
    );
    // Part of a REDIRECT grant reported without asking for more: not the
    // final units, no Validity-Time.
    session(
        PARTIAL,
        Some(20),
        vec![
            (Initial, None, true, "partial grant (partly used)"),
            (
                Update,
                Some(1_000),
                false,
                "part of the final units reported",
            ),
            (Termination, Some(0), false, "end (partly used)"),
        ],
    );
    // The final units reported while asking for more: 4012, and the
    // redirection holds.
    session(
        ASKING,
        Some(20),
        vec![
            (Initial, None, true, "partial grant (asking again)"),
            (
                Update,
                Some(500_000),
                true,
                "final units reported, more asked",
            ),
            (Termination, Some(0), false, "end (asking again)"),
        ],
    );
    out
}

/// What a CCA says, for comparing the two backends: per level (the
/// command, then each MSCC) its rating group, Result-Code, granted units
/// (octets or seconds), Validity-Time and Final-Unit-Action.
type Level = (
    Option<u32>,
    Option<u32>,
    Option<u64>,
    Option<u32>,
    Option<u32>,
);

fn level(a: &gyro_diameter::Avp<'_>) -> Level {
    let u32_of = |code| a.child(code).and_then(|c| c.u32().ok());
    let gsu = a.child(avp::GRANTED_SERVICE_UNIT);
    let granted = gsu.as_ref().and_then(|g| {
        g.child(avp::CC_TOTAL_OCTETS)
            .and_then(|c| c.u64().ok())
            .or_else(|| {
                g.child(avp::CC_TIME)
                    .and_then(|c| c.u32().ok())
                    .map(u64::from)
            })
    });
    let action = a
        .child(avp::FINAL_UNIT_INDICATION)
        .and_then(|f| f.child(avp::FINAL_UNIT_ACTION))
        .and_then(|c| c.u32().ok());
    (
        u32_of(avp::RATING_GROUP),
        u32_of(avp::RESULT_CODE),
        granted,
        u32_of(avp::VALIDITY_TIME),
        action,
    )
}

fn said(cca: &[u8]) -> Vec<Level> {
    let m = Message::parse(cca).expect("a CCA");
    let top = |code| m.find(code);
    let granted = top(avp::GRANTED_SERVICE_UNIT).and_then(|g| {
        g.child(avp::CC_TIME)
            .and_then(|c| c.u32().ok())
            .map(u64::from)
    });
    let action = top(avp::FINAL_UNIT_INDICATION)
        .and_then(|f| f.child(avp::FINAL_UNIT_ACTION))
        .and_then(|c| c.u32().ok());
    let mut out = vec![(
        None,
        top(avp::RESULT_CODE).and_then(|a| a.u32().ok()),
        granted,
        top(avp::VALIDITY_TIME).and_then(|a| a.u32().ok()),
        action,
    )];
    out.extend(
        m.avps()
            .filter_map(|a| a.ok())
            .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
            .map(|a| level(&a)),
    );
    out
}

#[test]
fn final_units_used_under_redirect_or_restrict_carry_validity_time_on_redis_as_on_the_embedded_store(
) {
    let Some(seeds) = cluster_nodes() else {
        return;
    };
    let opts = options(&seeds, "final-units", "checker");
    let namespace = opts.namespace.clone();
    let root = scratch("redis-serve-final-units");
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x5700_0000,
    };
    let plans = charging();
    let script = script(&gw);

    // The embedded store.
    let embedded = embedded_node(&root, &plans);
    let mut to_embedded = gw.connect(embedded.diameter);
    let expected: Vec<Vec<Level>> = script
        .iter()
        .enumerate()
        .map(|(i, (r, _))| said(&exchange(&mut to_embedded, &gw.encode(r, i as u32))))
        .collect();

    // What RFC 8506 sections 5.6.2 and 5.6.3 ask for.
    let ok = (None, Some(2001), None, None, None);
    let story: Vec<Vec<Level>> = vec![
        vec![
            ok,
            (Some(20), Some(2001), Some(500_000), Some(600), Some(1)),
        ],
        vec![ok, (Some(20), Some(2001), None, Some(600), None)],
        vec![ok, (Some(20), Some(4012), None, None, None)],
        vec![ok],
        vec![
            ok,
            (Some(40), Some(2001), Some(500_000), Some(120), Some(2)),
        ],
        vec![ok, (Some(40), Some(2001), None, Some(120), None)],
        vec![ok, (Some(40), Some(4012), None, None, None)],
        vec![ok],
        vec![
            ok,
            (Some(10), Some(2001), Some(500_000), Some(600), Some(0)),
        ],
        vec![ok, (Some(10), Some(2001), None, None, None)],
        vec![(None, Some(2001), Some(50), Some(90), Some(2))],
        vec![(None, Some(2001), None, Some(90), None)],
        vec![ok],
        vec![
            ok,
            (Some(20), Some(2001), Some(500_000), Some(600), Some(1)),
        ],
        vec![ok, (Some(20), Some(2001), None, None, None)],
        vec![ok],
        vec![
            ok,
            (Some(20), Some(2001), Some(500_000), Some(600), Some(1)),
        ],
        vec![ok, (Some(20), Some(4012), None, Some(600), None)],
        vec![ok],
    ];
    assert_eq!(story.len(), script.len());
    for ((s, (_, what)), want) in expected.iter().zip(&script).zip(&story) {
        assert_eq!(s, want, "{what}: the embedded store answered {s:?}");
    }

    // Two nodes on the Redis Cluster: a session's requests alternate
    // between them.
    let a = Node::new(&root, "node-a", &seeds, &namespace);
    let b = Node::new(&root, "node-b", &seeds, &namespace);
    std::fs::write(a.dir.join("charging.toml"), &plans).unwrap();
    std::fs::write(b.dir.join("charging.toml"), &plans).unwrap();
    let (redis_a, redis_b) = (a.start(), b.start());
    let mut to_a: Client = gw.connect(a.diameter);
    let mut to_b: Client = gw.connect(b.diameter);
    let answered: Vec<Vec<Level>> = script
        .iter()
        .enumerate()
        .map(|(i, (r, _))| {
            let c = if r.request_number % 2 == 1 {
                &mut to_b
            } else {
                &mut to_a
            };
            said(&exchange(c, &gw.encode(r, i as u32)))
        })
        .collect();
    for (((_, what), e), r) in script.iter().zip(&expected).zip(&answered) {
        assert_eq!(
            r, e,
            "{what}: Redis answered {r:?}, the embedded store {e:?}"
        );
    }

    // The same money on both.
    for msisdn in [REDIRECT, RESTRICT, TERMINATE, SINGLE, PARTIAL, ASKING] {
        let e = embedded.account(msisdn);
        let r = redis_a.account(msisdn);
        assert_eq!(
            (&r["balance"], &r["reserved"], &r["debited"]),
            (&e["balance"], &e["reserved"], &e["debited"]),
            "{msisdn}: {r}\n{e}"
        );
    }

    drop(to_embedded);
    drop(to_a);
    drop(to_b);
    embedded.stop();
    redis_a.stop();
    redis_b.stop();
    let _ = std::fs::remove_dir_all(&root);
}
