//! Command definitions: [`CommandDef`] (request and answer grammars) and
//! why a lookup found none ([`CommandLookup`]).

use super::schema::GrammarSrc;
use super::{FlagRule, Grammar};

/// One command definition (request and answer).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandDef {
    /// Name, e.g. `Credit-Control`.
    pub name: String,
    /// Command Code.
    pub code: u32,
    /// The application that defines the command (0 for base commands).
    pub application_id: u32,
    /// Application-Ids the header may carry (RAR, ASR and STR are base
    /// commands used by applications such as credit control, 4).
    pub applications: Vec<u32>,
    /// Rule for the P bit.
    pub proxiable: FlagRule,
    /// Request grammar.
    pub request: Grammar,
    /// Answer grammar.
    pub answer: Grammar,
    pub(super) short: [String; 2],
    pub(super) request_src: GrammarSrc,
    pub(super) answer_src: GrammarSrc,
}

impl CommandDef {
    /// Short name: `CCR` / `CCA`, `CER` / `CEA` and so on.
    pub fn short_name(&self, is_request: bool) -> &str {
        &self.short[usize::from(!is_request)]
    }

    /// The grammar for a request or an answer.
    pub fn grammar(&self, is_request: bool) -> &Grammar {
        if is_request {
            &self.request
        } else {
            &self.answer
        }
    }
}

/// Why [`Dictionary::command_for`](super::Dictionary::command_for) found
/// no command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandLookup {
    /// No command has this code (3001 DIAMETER_COMMAND_UNSUPPORTED).
    UnknownCommand,
    /// The command exists but not for this Application-Id (3007
    /// DIAMETER_APPLICATION_UNSUPPORTED).
    UnsupportedApplication,
}
