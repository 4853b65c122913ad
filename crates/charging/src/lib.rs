//! gyro's charging engine: accounts, balances, bundles, tariffs and rating,
//! reservations, the server side of the credit-control session (RFC 8506),
//! one-shot events, duplicate detection, session supervision and charging
//! data records.
//!
//! The crate is sans-IO and deterministic: no clock, no thread, no socket,
//! no file. An [`Engine`] takes a request and the current time and returns
//! an answer, appending the ledger [`Effect`]s it applied, the [`Cdr`]s it
//! wrote and a compact record of the answer ([`answer_log`], for duplicate
//! detection) to a caller-provided [`Output`]. Money is `i64` minor units; there
//! is no floating point anywhere.
//!
//! # How a server uses it
//!
//! * **Sharding.** Run one [`Engine`] per core, each owning the accounts
//!   with `AccountId::shard(n) == i` ([`ChargingConfig::build_shard`]).
//!   Route a CCR-Initial or CCR-Event by its Subscription-Id through a
//!   shared read-only [`SubscriberDirectory`] ([`ChargingConfig::directory`]
//!   or [`Engine::resolve_subscriber`]), and a CCR-Update/Terminate by a
//!   Session-Id to shard map filled from the answers to CCR-Initial
//!   ([`Engine::session_account`]).
//! * **Handling.** [`Engine::handle`] writes the [`CcAnswer`] and appends
//!   effects, CDRs and the answer's record to [`Output`]. Journal all three
//!   before sending the answer (group commit), then [`Output::clear`]
//!   (buffers are kept). A repeated request returns
//!   [`Handled::Duplicate`] instead: read the named record from the journal
//!   and answer with [`Engine::resolve_duplicate`] (or, if it does not
//!   match, [`Engine::handle_fresh`]); [`Engine::handle_with`] does the
//!   three steps for a caller that can read records synchronously.
//!   The credit-control application's Gy mapping turns a decoded CCR into
//!   a [`CcRequest`] and a [`CcAnswer`] into CCA bytes; this crate knows no
//!   wire format.
//! * **Time.** Call [`Engine::tick`] when [`Engine::poll_timeout`] says, or
//!   periodically; it closes sessions idle past their supervision time
//!   (Tcc) and forgets old answers.
//! * **Restoring.** Persist [`Engine::snapshot`]; on restart
//!   [`Engine::restore`] it, [`Engine::apply`] every effect journaled
//!   since, and hand every retained answer section to
//!   [`Engine::replay_answers`] with the current time. Answer records below
//!   [`Engine::answer_horizon`] are no longer needed. Replaying the effects
//!   of a run onto the state it started from yields the state it ended
//!   with (tested).
//!
//! # Money
//!
//! For every account, `initial balance + top-ups == balance + reserved +
//! debited` after every step (refunds lower `debited`). The available
//! balance never goes below `-credit_limit`. Every debited or refunded
//! minor unit appears in exactly one CDR's `amount`.
//!
//! A request is charged once: a repeat of an answered request gets the
//! remembered answer and changes nothing ([`dedup`]). Every answer is
//! journaled with the effects of its request as a compact record
//! ([`answer_log`]), and the engine keeps only a small index entry per
//! answer, so duplicates are recognised across restarts too, for the
//! whole time to live (`dedup_ttl_secs`, counted from the original
//! answer) at full load.
//!
//! Quota: a request reserves up to the requested (or the tariff's default)
//! units, from bundles first (whole increments of the tariff), then with
//! money. If the account cannot pay the full quota, what it can pay is
//! granted with a Final-Unit-Indication (the tariff's action); if it can
//! pay nothing, the answer is 4012. A
//! usage report is rated once (rounded up to the tariff's increment; the
//! CDR's `rated_units`), paid from the reservation's bundle units, then
//! its money, and for usage past the grant from free bundle units and then
//! the balance down to the credit limit, the money for the units left
//! (not rounded again) rounded as configured; what is left beyond that is
//! recorded in the CDR's `unbilled` and not charged. The rest of the
//! reservation is released and, if more is requested, reserved again.
//!
//! # Answers to impossible or unusual sequences
//!
//! | Situation | Answer |
//! |---|---|
//! | Any request that repeats an answered one (same Session-Id and CC-Request-Number, or same Origin-Host, End-to-End Identifier and Session-Id), with or without the T flag, within the answers' time to live | the remembered answer, `duplicate = true`, no state change, no CDR; also after a restart, since answer records are journaled |
//! | CCR-Initial for a Session-Id that is already open (not a duplicate) | 5012 DIAMETER_UNABLE_TO_COMPLY; the open session is untouched |
//! | CCR-Update or CCR-Terminate for an unknown, closed, expired or never-opened Session-Id (including Terminate after Terminate once the first answer is no longer remembered) | 5002 DIAMETER_UNKNOWN_SESSION_ID |
//! | CCR-Update or CCR-Terminate arriving after the session's supervision time, before `tick` ran | the session is expired first (CDR with `supervision-expired`), then 5002 |
//! | CC-Request-Number lower than one already seen (out-of-order updates), or skipping numbers | processed normally; only exact repeats are duplicates |
//! | Usage reported for a rating group never granted (or already released) | rated and debited from bundles and balance (never below the credit limit); CDR written; MSCC answered normally |
//! | Usage reported for a service no tariff rates | recorded in a CDR with result 5031 and amount 0; MSCC Result-Code 5031 |
//! | Usage above the granted units | accepted and debited (RFC 8506 section 5.1.2); past the credit limit it is recorded as `unbilled` |
//! | MSCC with Multiple-Services-Indicator absent or 0 | lenient mode (default): processed as MSCC; strict mode: 5008 DIAMETER_AVP_NOT_ALLOWED, Failed-AVP MSCC |
//! | Requested-Action in a CCR-Initial/Update/Terminate | lenient mode: ignored; strict mode: 5008, Failed-AVP Requested-Action, nothing processed |
//! | CCR-Event without Requested-Action | 5005 DIAMETER_MISSING_AVP |
//! | CCR-Initial, single-service form, without Requested-Service-Unit | the tariff's default quota is granted |
//! | MSCC without Requested-Service-Unit | usage is debited, nothing new is granted |
//! | Requested-Service-Unit in a CCR-Terminate | ignored |
//! | CCR-Initial where no MSCC succeeded | command Result-Code is the first MSCC's; no session stays open |
//! | CCR-Update with MSCC where some MSCC fail (e.g. 4012) | command 2001, per-MSCC codes; the session stays open |
//! | CCR-Update, single-service form, that fails (4012, 5031, 4011) | usage debited, session closed (RFC 8506 table 6: Open, UPDATE not processed OK, goes Idle) with a session-end CDR `rejected` |
//! | Account blocked while a session is open | the next CCR-Update debits its usage, answers 4010 and closes the session; CCR-Terminate still succeeds |
//! | Subscriber known to the directory but its account is not in this engine (misrouted) | 5030 DIAMETER_USER_UNKNOWN |
//! | Unknown Service-Context-Id | 5031 DIAMETER_RATING_FAILED, Failed-AVP Service-Context-Id |
//! | Zero-rated service configured `not-applicable` | 4011 (per MSCC, or command level in the single-service form) |
//! | REFUND_ACCOUNT on a blocked account | allowed; other events get 4010 |

pub mod accounts;
pub mod answer;
pub mod answer_log;
pub mod cdr;
pub mod config;
mod config_check;
pub mod dedup;
pub mod effects;
pub mod engine;
pub mod rating;
pub mod request;
pub mod session;
pub mod tariff;
pub mod types;

mod error;

pub use accounts::{
    Account, AccountStatus, Bundle, SubscriberDirectory, SubscriptionId, SubscriptionType,
};
pub use answer::{CcAnswer, CheckBalanceResult, CostInformation, FailedAvp, MsccAnswer};
pub use answer_log::{AnswerArchive, AnswerLog};
pub use cdr::{Cdr, CdrBuffer, CdrOf, CdrView, ClosingCause, RecordType, TariffChangeUsage};
pub use config::ChargingConfig;
pub use effects::{Effect, Ledger};
pub use engine::{
    AnswerRef, Engine, EngineOptions, Handled, NewAccount, Output, Snapshot, TopUp,
    MAX_IDEMPOTENCY_KEY,
};
pub use error::{Error, Result};
pub use rating::quote::{Quote, QuotePart, QuoteRequest};
pub use rating::{Choice, Location, Plan, PlanSpec, RatingError, DEFAULT_PLAN};
pub use request::{CcRequest, Interface, Mscc, RequestType, RequestedAction};
pub use session::{Digits, RatingContext, Reservation, Session};
pub use tariff::{
    Catalog, Currency, FinalUnitAction, FinalUnitIndication, HourWindow, RedirectAddressType,
    RedirectServer, Rounding, Tariff, Weekday, ZeroRated,
};
pub use types::{result_code, AccountId, RatingKey, ServiceUnits, SessionKey, Timestamp, UnitKind};
