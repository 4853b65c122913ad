//! Charging data records: one per usage report, one per session end and
//! one per event. Every unit of money debited or refunded appears in
//! exactly one record's `amount`.

use crate::request::RequestedAction;
use crate::types::{AccountId, Timestamp, UnitKind};
use serde::{Deserialize, Serialize};

/// What a record describes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordType {
    /// Usage reported for one rating group / service (CCR-U or CCR-T).
    #[default]
    Usage,
    /// The end of a session (no usage; carries the closing cause).
    SessionEnd,
    /// A one-shot event (CCR-Event).
    Event,
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClosingCause {
    /// The client sent CCR-Terminate.
    Terminated,
    /// Nothing arrived within the supervision time (Tcc).
    SupervisionExpired,
    /// An update failed (single-service 4012, blocked account, ...): the
    /// result code says why.
    Rejected,
}

/// One charging data record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cdr {
    /// Sequence number, increasing by one per record of this node.
    pub sequence: u64,
    /// The node (engine) that wrote it.
    pub node_id: String,
    /// What the record describes.
    pub record_type: RecordType,
    /// Session-Id.
    pub session_id: String,
    /// Account charged.
    pub account: AccountId,
    /// Subscriber, as `kind:data`.
    pub subscriber: String,
    /// Service-Context-Id.
    pub service_context: String,
    /// Rating-Group.
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    pub service_id: Option<u32>,
    /// CC-Request-Number of the request that caused it.
    pub request_number: u32,
    /// Requested-Action, for events.
    pub requested_action: Option<RequestedAction>,
    /// Unit of the tariff used.
    pub unit: Option<UnitKind>,
    /// Used CC-Time, seconds.
    pub time: u64,
    /// Used CC-Input-Octets.
    pub input_octets: u64,
    /// Used CC-Output-Octets.
    pub output_octets: u64,
    /// Used CC-Total-Octets (or input + output).
    pub total_octets: u64,
    /// Used CC-Service-Specific-Units (events).
    pub service_units: u64,
    /// Units rated, in the tariff's unit.
    pub rated_units: u64,
    /// Of those, units paid by bundles.
    pub bundle_units: u64,
    /// Money charged, minor units (negative for a refund).
    pub amount: i64,
    /// Money the usage cost beyond what the account could pay (usage past
    /// the grant on an exhausted account); recorded, never charged.
    pub unbilled: i64,
    /// Money left on the account after this record: available balance
    /// plus what open reservations hold (unaffected by reservations coming
    /// and going).
    pub balance_after: i64,
    /// Start of the period covered.
    pub started: Timestamp,
    /// End of the period covered.
    pub ended: Timestamp,
    /// Result-Code of the answer.
    pub result_code: u32,
    /// Why the session ended (session-end records).
    pub closing_cause: Option<ClosingCause>,
    /// Termination-Cause sent by the client.
    pub termination_cause: Option<u32>,
    /// Reporting-Reason sent by the client.
    pub reporting_reason: Option<u32>,
}

/// Column names of [`Cdr::write_csv`], comma separated, with a newline.
pub const CSV_HEADER: &str = "sequence,node_id,record_type,session_id,account,subscriber,service_context,rating_group,service_id,request_number,requested_action,unit,time,input_octets,output_octets,total_octets,service_units,rated_units,bundle_units,amount,unbilled,balance_after,started,ended,result_code,closing_cause,termination_cause,reporting_reason\n";

fn csv_text(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        for c in s.chars() {
            if c == '"' {
                out.push('"');
            }
            out.push(c);
        }
        out.push('"');
    } else {
        out.push_str(s);
    }
}

impl Cdr {
    /// Appends the record as one JSON line (with a trailing newline).
    pub fn write_json_line(&self, out: &mut Vec<u8>) -> crate::Result<()> {
        serde_json::to_writer(&mut *out, self).map_err(|e| crate::Error::Mapping(e.to_string()))?;
        out.push(b'\n');
        Ok(())
    }

    /// Appends the record as one CSV line (columns of [`CSV_HEADER`]).
    pub fn write_csv(&self, out: &mut String) {
        use std::fmt::Write;
        fn opt<T: std::fmt::Display>(o: Option<T>) -> String {
            o.map(|v| v.to_string()).unwrap_or_default()
        }
        fn tag<T: Serialize>(v: &T) -> String {
            serde_json::to_value(v)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        }
        let _ = write!(out, "{},", self.sequence);
        csv_text(out, &self.node_id);
        let _ = write!(out, ",{},", tag(&self.record_type));
        csv_text(out, &self.session_id);
        let _ = write!(out, ",{},", self.account);
        csv_text(out, &self.subscriber);
        out.push(',');
        csv_text(out, &self.service_context);
        let _ = writeln!(
            out,
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            opt(self.rating_group),
            opt(self.service_id),
            self.request_number,
            self.requested_action.map(|a| tag(&a)).unwrap_or_default(),
            self.unit.map(|u| tag(&u)).unwrap_or_default(),
            self.time,
            self.input_octets,
            self.output_octets,
            self.total_octets,
            self.service_units,
            self.rated_units,
            self.bundle_units,
            self.amount,
            self.unbilled,
            self.balance_after,
            self.started.as_millis(),
            self.ended.as_millis(),
            self.result_code,
            self.closing_cause.map(|c| tag(&c)).unwrap_or_default(),
            opt(self.termination_cause),
            opt(self.reporting_reason),
        );
    }
}

/// A growable list of CDRs that keeps its records' buffers when cleared,
/// so a hot loop that drains it after every batch allocates nothing once
/// warm.
#[derive(Clone, Debug, Default)]
pub struct CdrBuffer {
    items: Vec<Cdr>,
    len: usize,
}

impl CdrBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Forgets all records, keeping their memory.
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// Number of records.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The records.
    pub fn as_slice(&self) -> &[Cdr] {
        &self.items[..self.len]
    }
    /// Iterates the records.
    pub fn iter(&self) -> std::slice::Iter<'_, Cdr> {
        self.as_slice().iter()
    }
    /// A slot for the next record (its old contents are to be overwritten).
    pub(crate) fn next_slot(&mut self) -> &mut Cdr {
        if self.len == self.items.len() {
            self.items.push(Cdr::default());
        }
        self.len += 1;
        &mut self.items[self.len - 1]
    }
}

impl<'a> IntoIterator for &'a CdrBuffer {
    type Item = &'a Cdr;
    type IntoIter = std::slice::Iter<'a, Cdr>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
