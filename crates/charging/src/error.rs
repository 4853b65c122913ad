//! The crate's error type.

use crate::types::AccountId;

/// Everything that can go wrong in the charging crate outside the answer to
/// a request. A request that cannot be served is never an `Error`: it gets a
/// credit-control answer with the right Result-Code instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The TOML configuration could not be parsed.
    #[error("configuration: {0}")]
    ConfigSyntax(String),
    /// The configuration parsed but holds an invalid value.
    #[error("configuration: {0}")]
    Config(String),
    /// The account does not exist in this engine.
    #[error("unknown account {0}")]
    UnknownAccount(AccountId),
    /// An account with this id already exists.
    #[error("account {0} already exists")]
    DuplicateAccount(AccountId),
    /// A subscriber identity is already mapped to another account.
    #[error("subscriber {0} already mapped to an account")]
    DuplicateSubscriber(String),
    /// The account still has open sessions (or money reserved), so it
    /// cannot be deleted.
    #[error("account {0} has open sessions")]
    AccountInUse(AccountId),
    /// A top-up repeats an idempotency key already used for this account
    /// with a different amount.
    #[error("idempotency key {key:?} was used for a top-up of {amount}")]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The amount it was first used with.
        amount: i64,
    },
    /// An account operation asked for something invalid (no identity,
    /// a bundle that does not add up, ...).
    #[error("invalid account: {0}")]
    InvalidAccount(String),
    /// A price plan that does not exist, or is priced in another currency
    /// than the account's money (the message names both).
    #[error("{0}")]
    InvalidPlan(String),
    /// No rate serves what was to be priced (the message says why).
    #[error("{0}")]
    Unrated(String),
    /// An amount was not positive where it must be, or out of range.
    #[error("invalid amount {0}")]
    InvalidAmount(i64),
    /// A top-up would take the balance or the sum of top-ups past the
    /// largest amount an account holds.
    #[error(
        "a top-up of {0} would take the account's balance or its top-ups past \
         9223372036854775807 minor units"
    )]
    WouldOverflow(i64),
    /// An effect could not be applied to the current state (a replayed
    /// journal that does not belong to this state).
    #[error("effect does not apply: {0}")]
    Replay(&'static str),
    /// An answer record ([`crate::answer_log`]) could not be read.
    #[error("answer record: {0}")]
    AnswerRecord(&'static str),
    /// A Diameter message could not be mapped to or from the engine's types.
    #[error("diameter mapping: {0}")]
    Mapping(String),
    /// A CCR the engine cannot take: answer it with `result_code`
    /// (Failed-AVP: the AVP with code `avp_code`).
    #[error("invalid CCR: result code {result_code}, AVP {avp_code}")]
    InvalidCcr {
        /// Result-Code to answer with (5004, 5005, 5014, 3001).
        result_code: u32,
        /// Code of the offending or missing AVP (0 when not about an AVP).
        avp_code: u32,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
