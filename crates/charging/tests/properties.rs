//! Property tests: random interleavings of sessions on shared accounts,
//! top-ups, events, duplicates, retransmissions and supervision expiries.
//! After every step: money is conserved on every account, no balance passes
//! its credit limit, reservations agree with sessions; a duplicate changes
//! nothing; every debited minor unit is in exactly one CDR; and replaying
//! the effects rebuilds the final state, remembered answers included.
//! Restarts (from the journal, or from a snapshot) happen in the middle of
//! a run: a repeat of a request answered within the cache's lifetime gets
//! the same answer and changes nothing, across the restart too.

use gyro_charging::*;
use proptest::prelude::*;
use std::collections::HashMap;

const CONFIG: &str = r#"
[engine]
node_id = "prop"
supervision_secs = 120
dedup_ttl_secs = 300
dedup_capacity = 100000

[[tariff]]
name = "rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 10
per = 1000000
increment = 1000
default_quota = 1000000
validity_time = 60
final_unit = { action = "terminate" }

[zones]
eu = ["262"]

[[tariff]]
name = "rg10-roaming"
service_context = "32251@3gpp.org"
rating_group = 10
zone = "eu"
unit = "octets"
price = 40
per = 1000000
increment = 1000
default_quota = 500000
validity_time = 60

[[tariff]]
name = "rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 7
per = 100000
rounding = "nearest"
default_quota = 400000
final_unit = { action = "redirect", redirect = { address_type = "url", address = "http://x/" } }

[[tariff]]
name = "rg30-time"
service_context = "32251@3gpp.org"
rating_group = 30
unit = "seconds"
price = 3
per = 10
increment = 10
default_quota = 120

[[tariff]]
name = "rg40-free"
service_context = "32251@3gpp.org"
rating_group = 40
unit = "octets"
default_quota = 1000000
zero_rated = "free"

[[tariff]]
name = "sms"
service_context = "32274@3gpp.org"
unit = "events"
price = 9
default_quota = 1

[[account]]
id = 1
balance = 50
subscribers = ["e164:1"]

[[account]]
id = 2
balance = 0
credit_limit = 30
subscribers = ["e164:2"]

[[account]]
id = 3
balance = 200
subscribers = ["e164:3"]
[[account.bundle]]
unit = "octets"
units = 2500000
rating_groups = [10]
[[account.bundle]]
unit = "events"
units = 2

[[account]]
id = 4
balance = 1000
subscribers = ["e164:4"]
"#;

const RGS: [u32; 4] = [10, 20, 30, 40];

/// Visited networks a request may carry: none, one in the zone with its
/// own rate for rating group 10, one in no zone.
const VISITED: [&str; 3] = ["", "26201", "24001"];

#[derive(Clone, Debug)]
enum Op {
    Initial {
        slot: usize,
        account: u8,
        rgs: Vec<(usize, Option<u64>)>,
        /// The visited network carried ([`VISITED`]).
        visited: usize,
    },
    Update {
        slot: usize,
        reports: Vec<(usize, u64, bool)>,
        skip: u32,
        /// The visited network carried ([`VISITED`]): none, or a move.
        visited: usize,
    },
    Terminate {
        slot: usize,
        reports: Vec<(usize, u64)>,
    },
    Event {
        account: u8,
        action: u8,
        units: u64,
    },
    TopUp {
        account: u8,
        amount: i64,
    },
    Repeat {
        back: usize,
        new_e2e: bool,
        /// Same End-to-End id under a CC-Request-Number never used: still
        /// the same request by RFC 6733's rule (Origin-Host, End-to-End).
        new_number: bool,
    },
    Wait {
        secs: u64,
    },
    Restart {
        from_snapshot: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let rg = 0usize..RGS.len();
    prop_oneof![
        3 => (0usize..6, 1u8..=5, prop::collection::vec((rg.clone(), prop::option::of(0u64..3_000_000)), 0..4), 0..VISITED.len())
            .prop_map(|(slot, account, rgs, visited)| Op::Initial { slot, account, rgs, visited }),
        6 => (0usize..6, prop::collection::vec((rg.clone(), 0u64..2_500_000, any::<bool>()), 0..4), 0u32..2, prop_oneof![3 => Just(0), 1 => 1..VISITED.len()])
            .prop_map(|(slot, reports, skip, visited)| Op::Update { slot, reports, skip, visited }),
        2 => (0usize..6, prop::collection::vec((rg, 0u64..2_000_000), 0..3))
            .prop_map(|(slot, reports)| Op::Terminate { slot, reports }),
        2 => (1u8..=5, 0u8..5, 0u64..4).prop_map(|(account, action, units)| Op::Event { account, action, units }),
        1 => (1u8..=4, 1i64..100).prop_map(|(account, amount)| Op::TopUp { account, amount }),
        3 => (0usize..12, any::<bool>(), any::<bool>())
            .prop_map(|(back, new_e2e, new_number)| Op::Repeat { back, new_e2e, new_number }),
        2 => (0u64..150).prop_map(|secs| Op::Wait { secs }),
        1 => any::<bool>().prop_map(|from_snapshot| Op::Restart { from_snapshot }),
    ]
}

fn units(rg: u32, n: u64) -> ServiceUnits {
    if rg == 30 {
        ServiceUnits {
            time: Some((n / 10_000) as u32),
            ..ServiceUnits::default()
        }
    } else {
        ServiceUnits {
            input_octets: Some(n / 3),
            output_octets: Some(n - n / 3),
            ..ServiceUnits::default()
        }
    }
}

struct World {
    engine: Engine,
    start: Snapshot,
    now: Timestamp,
    topups: HashMap<AccountId, i64>,
    cdr_amounts: HashMap<AccountId, i64>,
    cdr_sequences: Vec<u64>,
    journal: Vec<Effect>,
    answers: AnswerArchive,
    sent: Vec<(CcRequest, CcAnswer, Timestamp)>,
    slots: [Option<(String, u32)>; 6],
    next_session: u32,
    e2e: u32,
    out: Output,
}

impl World {
    fn new() -> Self {
        let engine = ChargingConfig::from_toml_str(CONFIG)
            .unwrap()
            .build_engine()
            .unwrap();
        World {
            start: engine.snapshot(),
            engine,
            now: Timestamp::from_secs(1_700_000_000),
            topups: HashMap::new(),
            cdr_amounts: HashMap::new(),
            cdr_sequences: Vec::new(),
            journal: Vec::new(),
            answers: AnswerArchive::new(),
            sent: Vec::new(),
            slots: Default::default(),
            next_session: 0,
            e2e: 0,
            out: Output::default(),
        }
    }

    fn request(&mut self, session: String, kind: RequestType, number: u32) -> CcRequest {
        self.e2e += 1;
        CcRequest {
            session_id: session,
            origin_host: "pgw".into(),
            end_to_end: self.e2e,
            request_type: kind,
            request_number: number,
            service_context: "32251@3gpp.org".into(),
            multiple_services: Some(true),
            ..CcRequest::default()
        }
    }

    /// Handles a request as a server does: a duplicate is answered from its
    /// journaled record.
    fn handle(&mut self, req: &CcRequest) -> CcAnswer {
        let mut a = CcAnswer::default();
        let archive = &self.answers;
        self.engine
            .handle_with(req, self.now, &mut a, &mut self.out, |seq| {
                archive.read(seq)
            });
        self.answers.append(&self.out.answers);
        a
    }

    fn send(&mut self, req: CcRequest) -> CcAnswer {
        self.out.clear();
        let a = self.handle(&req);
        self.collect();
        self.sent.push((req, a.clone(), self.now));
        a
    }

    fn collect(&mut self) {
        for c in self.out.cdrs.iter() {
            *self.cdr_amounts.entry(c.account).or_default() += c.amount;
            self.cdr_sequences.push(c.sequence);
        }
        self.journal.append(&mut self.out.effects);
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Initial {
                slot,
                account,
                rgs,
                visited,
            } => {
                self.next_session += 1;
                let sid = format!("gw;{};{}", self.next_session, slot);
                let mut r = self.request(sid.clone(), RequestType::Initial, 0);
                r.visited_plmn = VISITED[visited].into();
                r.subscription_ids = vec![SubscriptionId::e164(account.to_string())];
                r.mscc = rgs
                    .into_iter()
                    .map(|(i, amount)| Mscc {
                        rating_group: Some(RGS[i]),
                        requested: Some(
                            amount.map_or_else(ServiceUnits::default, |n| units(RGS[i], n)),
                        ),
                        ..Mscc::default()
                    })
                    .collect();
                let a = self.send(r);
                if a.result_code == result_code::SUCCESS {
                    self.slots[slot] = Some((sid, 0));
                }
            }
            Op::Update {
                slot,
                reports,
                skip,
                visited,
            } => {
                let Some((sid, n)) = self.slots[slot].clone() else {
                    return;
                };
                let number = n + 1 + skip;
                self.slots[slot] = Some((sid.clone(), number));
                let mut r = self.request(sid, RequestType::Update, number);
                r.visited_plmn = VISITED[visited].into();
                r.mscc = reports
                    .into_iter()
                    .map(|(i, used, more)| Mscc {
                        rating_group: Some(RGS[i]),
                        used: Some(units(RGS[i], used)),
                        requested: more.then(ServiceUnits::default),
                        ..Mscc::default()
                    })
                    .collect();
                self.send(r);
            }
            Op::Terminate { slot, reports } => {
                let Some((sid, n)) = self.slots[slot].take() else {
                    return;
                };
                let mut r = self.request(sid, RequestType::Termination, n + 1);
                r.mscc = reports
                    .into_iter()
                    .map(|(i, used)| Mscc {
                        rating_group: Some(RGS[i]),
                        used: Some(units(RGS[i], used)),
                        ..Mscc::default()
                    })
                    .collect();
                self.send(r);
            }
            Op::Event {
                account,
                action,
                units,
            } => {
                self.next_session += 1;
                let mut r =
                    self.request(format!("sms;{}", self.next_session), RequestType::Event, 0);
                r.service_context = "32274@3gpp.org".into();
                r.subscription_ids = vec![SubscriptionId::e164(account.to_string())];
                r.requested_action = RequestedAction::from_code(u32::from(action));
                r.requested = (units > 0).then_some(ServiceUnits {
                    service_specific: Some(units),
                    ..ServiceUnits::default()
                });
                self.send(r);
            }
            Op::TopUp { account, amount } => {
                self.out.clear();
                let id = AccountId(u64::from(account));
                self.engine.top_up(id, amount, &mut self.out).unwrap();
                *self.topups.entry(id).or_default() += amount;
                self.collect();
            }
            Op::Repeat {
                back,
                new_e2e,
                new_number,
            } => {
                let Some(i) = self.sent.len().checked_sub(back + 1) else {
                    return;
                };
                let (mut r, first, when) = self.sent[i].clone();
                r.retransmit = true;
                if new_e2e {
                    // A retransmission through another path: same Session-Id
                    // and CC-Request-Number, new End-to-End id.
                    self.e2e += 1;
                    r.end_to_end = self.e2e;
                } else if new_number {
                    r.request_number += 1_000_000;
                }
                let before = self.engine.snapshot();
                self.out.clear();
                let a = self.handle(&r);
                let fresh = self.now.as_millis() - when.as_millis() < 300_000;
                if fresh {
                    assert!(a.duplicate, "repeat within the window not recognised");
                    assert_eq!(
                        CcAnswer {
                            duplicate: false,
                            ..a
                        },
                        CcAnswer {
                            duplicate: false,
                            ..first
                        }
                    );
                    assert!(self.out.effects.is_empty() && self.out.cdrs.is_empty());
                    assert_eq!(self.engine.snapshot(), before, "a duplicate changed state");
                }
                self.collect();
            }
            Op::Wait { secs } => {
                self.now = self.now.plus_secs(secs);
                self.out.clear();
                self.engine.tick(self.now, &mut self.out);
                self.collect();
            }
            Op::Restart { from_snapshot } => {
                // A crash and restart: the engine is rebuilt from what a
                // store keeps and carries on; later repeats must still be
                // recognised.
                let rebuilt = if from_snapshot {
                    let mut e = Engine::restore(
                        self.engine.catalog().clone(),
                        self.engine.options().clone(),
                        self.engine.snapshot(),
                    );
                    // The store keeps only the answers a snapshot still
                    // needs: those at or above the horizon.
                    self.replay_answers(&mut e, self.engine.answer_horizon(self.now));
                    e
                } else {
                    self.replay()
                };
                assert_eq!(rebuilt.snapshot(), self.engine.snapshot());
                self.engine.expire_answers(self.now);
                assert_eq!(
                    rebuilt.remembered_answers(),
                    self.engine.remembered_answers()
                );
                assert_eq!(
                    rebuilt.answer_horizon(self.now),
                    self.engine.answer_horizon(self.now)
                );
                self.engine = rebuilt;
            }
        }
    }

    /// The engine rebuilt from the start state and the journal, brought to
    /// the current time (a restarted server ticks). The next CDR sequence
    /// number comes from the CDRs written, as a store sets it.
    fn replay(&self) -> Engine {
        let start = Snapshot {
            next_cdr_sequence: self.cdr_sequences.iter().max().map_or(1, |s| s + 1),
            ..self.start.clone()
        };
        let mut replayed = Engine::restore(
            self.engine.catalog().clone(),
            self.engine.options().clone(),
            start,
        );
        for e in &self.journal {
            replayed.apply(e).expect("journal replays");
        }
        // No snapshot covers the journal: every answer section is kept.
        self.replay_answers(&mut replayed, 0);
        let mut out = Output::default();
        replayed.tick(self.now, &mut out);
        assert!(
            out.effects.is_empty() && out.cdrs.is_empty(),
            "ticking the replayed engine changed it"
        );
        replayed
    }

    /// Rebuilds `e`'s duplicate index from the journaled answers a store
    /// keeps (the sections with records at or above `horizon`), at the
    /// current time.
    fn replay_answers(&self, e: &mut Engine, horizon: u64) {
        let mut kept = self.answers.clone();
        kept.forget_below(horizon);
        for (first, records) in kept.sections() {
            e.replay_answers(first, records, self.now)
                .expect("answers replay");
        }
    }

    fn check(&self) {
        let ledger = self.engine.ledger();
        for a in self.engine.accounts() {
            let initial = self.start.ledger.accounts[&a.id].balance;
            let topups = self.topups.get(&a.id).copied().unwrap_or(0);
            assert_eq!(
                initial + topups,
                a.balance + a.reserved + a.debited,
                "money not conserved on account {}",
                a.id
            );
            assert!(a.is_conserved());
            assert!(
                a.balance >= -a.credit_limit,
                "account {} past its credit limit",
                a.id
            );
            assert!(a.reserved >= 0);
            let sessions = || ledger.sessions.values().filter(|s| s.account == a.id);
            let held: i64 = sessions().map(|s| s.reserved_money()).sum();
            assert_eq!(held, a.reserved);
            for b in &a.bundles {
                let held: u64 = sessions()
                    .flat_map(|s| s.reservations.iter())
                    .flat_map(|r| r.bundles.iter())
                    .filter(|h| h.bundle == b.id)
                    .map(|h| h.units)
                    .sum();
                assert_eq!(
                    held, b.reserved,
                    "bundle holds disagree on account {}",
                    a.id
                );
            }
            assert_eq!(
                self.cdr_amounts.get(&a.id).copied().unwrap_or(0),
                a.debited,
                "CDR amounts disagree with debited money on account {}",
                a.id
            );
        }
    }

    fn finish(self) {
        // CDR sequence numbers are unique and gap-free.
        let mut seq = self.cdr_sequences.clone();
        seq.sort_unstable();
        for (i, s) in seq.iter().enumerate() {
            assert_eq!(*s, i as u64 + 1);
        }
        // Replaying the journal onto the start rebuilds the end.
        assert_eq!(self.replay().snapshot(), self.engine.snapshot());
    }

    /// After a restart (from the journal or a snapshot), every request
    /// answered within the cache's lifetime, repeated, gets its answer
    /// again and changes nothing.
    fn repeat_all_after_restart(&mut self, from_snapshot: bool) {
        self.step(Op::Restart { from_snapshot });
        let sent = self.sent.clone();
        for (mut r, first, when) in sent {
            if self.now.as_millis() - when.as_millis() >= 300_000 {
                continue;
            }
            r.retransmit = true;
            let before = self.engine.snapshot();
            self.out.clear();
            let a = self.handle(&r);
            assert!(a.duplicate, "repeat after a restart not recognised");
            assert_eq!(
                CcAnswer {
                    duplicate: false,
                    ..a
                },
                first
            );
            assert!(self.out.effects.is_empty() && self.out.cdrs.is_empty());
            assert_eq!(self.engine.snapshot(), before, "a duplicate changed state");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn money_is_conserved_and_duplicates_change_nothing(ops in prop::collection::vec(op(), 1..80)) {
        let mut w = World::new();
        w.check();
        for op in ops {
            w.step(op);
            w.check();
        }
        w.repeat_all_after_restart(false);
        w.repeat_all_after_restart(true);
        w.check();
        // Let every session expire: everything reserved comes back.
        w.now = w.now.plus_secs(10_000);
        w.out.clear();
        w.engine.tick(w.now, &mut w.out);
        w.collect();
        w.check();
        prop_assert_eq!(w.engine.session_count(), 0);
        for a in w.engine.accounts() {
            prop_assert_eq!(a.reserved, 0);
            prop_assert!(a.bundles.iter().all(|b| b.reserved == 0));
        }
        w.finish();
    }
}
