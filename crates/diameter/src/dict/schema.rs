//! The TOML schema of the dictionary data files (described in
//! `crates/diameter/dict/README.md`), as read by serde, and the source of
//! a grammar before its names are resolved.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct GrammarSrc {
    pub(super) rules: Vec<String>,
    pub(super) exclusive: Vec<ExclusiveEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    #[serde(default)]
    pub(super) vendor: Vec<NamedId>,
    #[serde(default)]
    pub(super) application: Vec<NamedId>,
    #[serde(default)]
    pub(super) avp: Vec<AvpEntry>,
    #[serde(default)]
    pub(super) command: Vec<CommandEntry>,
    #[serde(default)]
    pub(super) extend: Vec<ExtendEntry>,
    #[serde(default)]
    pub(super) error_answer: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NamedId {
    pub(super) id: u32,
    pub(super) name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AvpEntry {
    pub(super) name: String,
    pub(super) code: u32,
    #[serde(default)]
    pub(super) vendor: u32,
    #[serde(rename = "type")]
    pub(super) ty: String,
    pub(super) m: Option<String>,
    pub(super) v: Option<String>,
    pub(super) p: Option<String>,
    #[serde(default)]
    pub(super) values: BTreeMap<String, i64>,
    pub(super) rules: Option<Vec<String>>,
    #[serde(default)]
    pub(super) exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    pub(super) opaque: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExclusiveEntry {
    pub(super) avps: Vec<String>,
    #[serde(default)]
    pub(super) required: bool,
    pub(super) code: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommandEntry {
    pub(super) name: String,
    pub(super) code: u32,
    pub(super) application: u32,
    pub(super) applications: Option<Vec<u32>>,
    pub(super) short: [String; 2],
    pub(super) proxiable: String,
    pub(super) request: Vec<String>,
    pub(super) answer: Vec<String>,
    #[serde(default)]
    pub(super) request_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    pub(super) answer_exclusive: Vec<ExclusiveEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExtendEntry {
    pub(super) command: Option<String>,
    pub(super) avp: Option<String>,
    #[serde(default)]
    pub(super) applications: Vec<u32>,
    #[serde(default)]
    pub(super) request: Vec<String>,
    #[serde(default)]
    pub(super) answer: Vec<String>,
    #[serde(default)]
    pub(super) request_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    pub(super) answer_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    pub(super) rules: Vec<String>,
    #[serde(default)]
    pub(super) exclusive: Vec<ExclusiveEntry>,
}
