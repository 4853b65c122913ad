//! The dictionary: every AVP and command gyro knows, with names, codes,
//! vendors, data formats, flag rules, enumerated values and grammars.
//!
//! The data lives in TOML files (`crates/diameter/dict/*.toml`, described in
//! `crates/diameter/dict/README.md`) that are compiled into the binary with
//! `include_str!` and parsed once, on first use of [`Dictionary::builtin`]:
//!
//! * `base.toml`: RFC 6733 base protocol AVPs and commands (CER/CEA,
//!   DWR/DWA, DPR/DPA, RAR/RAA, STR/STA, ASR/ASA, ACR/ACA) and the generic
//!   error answer grammar of RFC 6733 section 7.2;
//! * `credit_control.toml`: RFC 8506 (CCR/CCA and every credit-control AVP,
//!   including the 653-669 extension AVPs);
//! * `tgpp_gy.toml`: the 3GPP (vendor 10415) AVPs a PGW or SMF sends on Gy
//!   (TS 32.299, TS 29.061, TS 29.212/29.214), and the Ro additions to the
//!   CCR/CCA and MSCC grammars.
//!
//! More vendors' AVPs are added without code: write a file in the same
//! format and load it with [`Dictionary::extend_from_toml_str`].
//!
//! Lookups on the hot path ([`Dictionary::avp`], [`Dictionary::command_for`],
//! [`Grammar::rule_index`]) are a hash probe (FxHash over the code and
//! vendor) or a binary search over a precomputed index; none allocates.
//!
//! The parts, one module each: `schema` (the TOML files as serde reads
//! them), `load` (merging documents and resolving grammars), `avp` (AVP
//! definitions and flag rules), `grammar` (rule syntax and compiled
//! grammars), `command` (command definitions), `lookup` (the queries
//! callers make) and `builtin` (the data compiled into the binary).

mod avp;
mod builtin;
mod command;
mod grammar;
mod load;
mod lookup;
mod schema;

use std::collections::{BTreeMap, HashMap};

use rustc_hash::FxHashMap;

use crate::error::Error;

pub use avp::{min_data_len, AvpDef, FlagRule};
pub use command::{CommandDef, CommandLookup};
pub(crate) use grammar::Fast;
pub use grammar::{Exclusive, Grammar, Rule, RuleKind, MAX_RULES, UNBOUNDED};

use schema::GrammarSrc;

/// Errors from loading dictionary data are the crate's [`Error`]
/// (variant [`Error::Dictionary`]).
pub type DictError = Error;

/// The dictionary. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Dictionary {
    vendors: BTreeMap<u32, String>,
    applications: BTreeMap<u32, String>,
    avps: Vec<AvpDef>,
    by_key: FxHashMap<u64, u32>,
    by_name: HashMap<String, u32>,
    commands: Vec<CommandDef>,
    error_answer: Grammar,
    error_answer_src: GrammarSrc,
}

/// The lookup key of an AVP: vendor in the high half, code in the low.
#[inline]
fn key(code: u32, vendor: u32) -> u64 {
    ((vendor as u64) << 32) | code as u64
}

fn dict_err(reason: String) -> DictError {
    Error::Dictionary { reason }
}
