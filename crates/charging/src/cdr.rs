//! Charging data records: one per usage report, one per session end and
//! one per event. Every unit of money debited or refunded appears in
//! exactly one record's `amount`.

use crate::request::{Interface, RequestedAction};
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
pub type Cdr = CdrOf<String>;

/// A charging data record borrowing its text from a buffer (a journaled
/// record being written out as a CDR line: nothing copied).
pub type CdrView<'a> = CdrOf<&'a str>;

/// One charging data record, its text fields of type `S` ([`Cdr`] owns
/// them, [`CdrView`] borrows them).
///
/// As a JSON line, absent values and zero counters are left out (a reader
/// takes a missing field as absent or 0); every other field is always
/// there, under the names below.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize + AsRef<str>",
    deserialize = "S: Deserialize<'de> + Default"
))]
pub struct CdrOf<S> {
    /// Sequence number, increasing by one per record of this node.
    pub sequence: u64,
    /// The node (engine) that wrote it.
    pub node_id: S,
    /// What the record describes.
    pub record_type: RecordType,
    /// Session-Id.
    pub session_id: S,
    /// Account charged.
    pub account: AccountId,
    /// Subscriber, as `kind:data`.
    pub subscriber: S,
    /// Service-Context-Id.
    pub service_context: S,
    /// The interface that charged it: `gy` (Diameter Gy/Ro) or `nchf`
    /// (Nchf_ConvergedCharging). Records written before gyro recorded it
    /// read as `gy`.
    #[serde(default)]
    pub interface: Interface,
    /// Rating-Group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_id: Option<u32>,
    /// CC-Request-Number of the request that caused it.
    pub request_number: u32,
    /// Requested-Action, for events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_action: Option<RequestedAction>,
    /// Unit of the tariff used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<UnitKind>,
    /// Used CC-Time, seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub time: u64,
    /// Used CC-Input-Octets.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub input_octets: u64,
    /// Used CC-Output-Octets.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_octets: u64,
    /// Used CC-Total-Octets (or input + output).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub total_octets: u64,
    /// Used CC-Service-Specific-Units (events).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub service_units: u64,
    /// Units rated, in the tariff's unit: the usage rounded up to the
    /// charging increment (and the first interval), which bundle units and
    /// money pay for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rated_units: u64,
    /// Of those, units paid by bundles.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bundle_units: u64,
    /// Money charged, minor units (negative for a refund).
    #[serde(default)]
    pub amount: i64,
    /// Money the usage cost beyond what the account could pay (usage past
    /// the grant on an exhausted account); recorded, never charged.
    #[serde(default, skip_serializing_if = "is_zero")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closing_cause: Option<ClosingCause>,
    /// Termination-Cause sent by the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_cause: Option<u32>,
    /// Reporting-Reason sent by the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reporting_reason: Option<u32>,
    /// The account's price plan that rated it.
    #[serde(default, skip_serializing_if = "is_empty_text")]
    pub plan: S,
    /// The rate applied (its name in the plan).
    #[serde(default, skip_serializing_if = "is_empty_text")]
    pub rate: S,
    /// The destination of the called number (longest prefix), if any.
    #[serde(default, skip_serializing_if = "is_empty_text")]
    pub destination: S,
    /// The roaming zone of the visited network, if any.
    #[serde(default, skip_serializing_if = "is_empty_text")]
    pub zone: S,
    /// For usage split at a tariff change: which side of it this record
    /// prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tariff_change: Option<TariffChangeUsage>,
}

/// Which side of a tariff change usage is on (Tariff-Change-Usage, RFC
/// 8506 section 8.27).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TariffChangeUsage {
    /// UNIT_BEFORE_TARIFF_CHANGE: priced at the rate before the change.
    Before,
    /// UNIT_AFTER_TARIFF_CHANGE: priced at the rate after it.
    After,
}

impl TariffChangeUsage {
    /// The name used in CDR files.
    pub fn as_str(self) -> &'static str {
        match self {
            TariffChangeUsage::Before => "before",
            TariffChangeUsage::After => "after",
        }
    }
}

/// Column names of [`Cdr::write_csv`], comma separated, with a newline.
/// The one definition of the CSV columns: [`CdrCsvWriter`] writes them in
/// this order and [`CdrCsvReader`] reads them by these names (the names of
/// the JSON members).
pub const CSV_HEADER: &str = "sequence,node_id,record_type,session_id,account,subscriber,service_context,rating_group,service_id,request_number,requested_action,unit,time,input_octets,output_octets,total_octets,service_units,rated_units,bundle_units,amount,unbilled,balance_after,started,ended,result_code,closing_cause,termination_cause,reporting_reason,plan,rate,destination,zone,tariff_change,interface\n";

/// Number of columns of [`CSV_HEADER`]: every CSV line has exactly this
/// many fields, empty where a value is absent.
pub const CSV_COLUMNS: usize = {
    let b = CSV_HEADER.as_bytes();
    let mut n = 1;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b',' {
            n += 1;
        }
        i += 1;
    }
    n
};

fn is_zero<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

impl RecordType {
    /// The name used in CDR files.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordType::Usage => "usage",
            RecordType::SessionEnd => "session-end",
            RecordType::Event => "event",
        }
    }
}

impl ClosingCause {
    /// The name used in CDR files.
    pub fn as_str(self) -> &'static str {
        match self {
            ClosingCause::Terminated => "terminated",
            ClosingCause::SupervisionExpired => "supervision-expired",
            ClosingCause::Rejected => "rejected",
        }
    }
}

fn action_str(a: RequestedAction) -> &'static str {
    match a {
        RequestedAction::DirectDebiting => "direct-debiting",
        RequestedAction::RefundAccount => "refund-account",
        RequestedAction::CheckBalance => "check-balance",
        RequestedAction::PriceEnquiry => "price-enquiry",
    }
}

fn unit_str(u: UnitKind) -> &'static str {
    match u {
        UnitKind::Octets => "octets",
        UnitKind::Seconds => "seconds",
        UnitKind::Events => "events",
    }
}

/// Whether a text field is empty (left out of a JSON line).
fn is_empty_text<S: AsRef<str>>(s: &S) -> bool {
    s.as_ref().is_empty()
}

impl<S> CdrOf<S> {
    /// The same record with each text field mapped by `f` (called in the
    /// order the fields are declared).
    pub fn map_text<'s, T>(&'s self, mut f: impl FnMut(&'s S) -> T) -> CdrOf<T> {
        CdrOf {
            sequence: self.sequence,
            node_id: f(&self.node_id),
            record_type: self.record_type,
            session_id: f(&self.session_id),
            account: self.account,
            subscriber: f(&self.subscriber),
            service_context: f(&self.service_context),
            interface: self.interface,
            rating_group: self.rating_group,
            service_id: self.service_id,
            request_number: self.request_number,
            requested_action: self.requested_action,
            unit: self.unit,
            time: self.time,
            input_octets: self.input_octets,
            output_octets: self.output_octets,
            total_octets: self.total_octets,
            service_units: self.service_units,
            rated_units: self.rated_units,
            bundle_units: self.bundle_units,
            amount: self.amount,
            unbilled: self.unbilled,
            balance_after: self.balance_after,
            started: self.started,
            ended: self.ended,
            result_code: self.result_code,
            closing_cause: self.closing_cause,
            termination_cause: self.termination_cause,
            reporting_reason: self.reporting_reason,
            plan: f(&self.plan),
            rate: f(&self.rate),
            destination: f(&self.destination),
            zone: f(&self.zone),
            tariff_change: self.tariff_change,
        }
    }
}

impl Cdr {
    /// Makes this record a copy of `v`, reusing its text buffers (no
    /// allocation once they are large enough).
    pub fn set_from(&mut self, v: &CdrView<'_>) {
        for (to, from) in [
            (&mut self.node_id, v.node_id),
            (&mut self.session_id, v.session_id),
            (&mut self.subscriber, v.subscriber),
            (&mut self.service_context, v.service_context),
            (&mut self.plan, v.plan),
            (&mut self.rate, v.rate),
            (&mut self.destination, v.destination),
            (&mut self.zone, v.zone),
        ] {
            to.clear();
            to.push_str(from);
        }
        let CdrOf {
            node_id,
            session_id,
            subscriber,
            service_context,
            plan,
            rate,
            destination,
            zone,
            ..
        } = std::mem::take(self);
        *self = CdrOf {
            node_id,
            session_id,
            subscriber,
            service_context,
            plan,
            rate,
            destination,
            zone,
            ..v.map_text(|_| String::new())
        };
    }
}

impl<S: AsRef<str>> CdrOf<S> {
    /// The record borrowing this one's text.
    pub fn view(&self) -> CdrView<'_> {
        self.map_text(|s| s.as_ref())
    }

    /// Appends the record as one JSON line (with a trailing newline): the
    /// bytes `serde_json` writes for it, written field by field without
    /// going through the serializer (this runs once per record on the CDR
    /// writer; the keys are constants and most strings need no escaping).
    pub fn write_json_line(&self, out: &mut Vec<u8>) -> crate::Result<()> {
        let mut j = JsonLine::new(out, self.sequence);
        j.str(key!("node_id"), self.node_id.as_ref());
        j.word(key!("record_type"), self.record_type.as_str());
        j.str(key!("session_id"), self.session_id.as_ref());
        j.num(key!("account"), self.account.0);
        j.str(key!("subscriber"), self.subscriber.as_ref());
        j.str(key!("service_context"), self.service_context.as_ref());
        j.word(key!("interface"), self.interface.as_str());
        if let Some(v) = self.rating_group {
            j.num(key!("rating_group"), v);
        }
        if let Some(v) = self.service_id {
            j.num(key!("service_id"), v);
        }
        j.num(key!("request_number"), self.request_number);
        if let Some(a) = self.requested_action {
            j.word(key!("requested_action"), action_str(a));
        }
        if let Some(u) = self.unit {
            j.word(key!("unit"), unit_str(u));
        }
        for (key, v) in [
            (key!("time"), self.time),
            (key!("input_octets"), self.input_octets),
            (key!("output_octets"), self.output_octets),
            (key!("total_octets"), self.total_octets),
            (key!("service_units"), self.service_units),
            (key!("rated_units"), self.rated_units),
            (key!("bundle_units"), self.bundle_units),
        ] {
            if v != 0 {
                j.num(key, v);
            }
        }
        j.num(key!("amount"), self.amount);
        if self.unbilled != 0 {
            j.num(key!("unbilled"), self.unbilled);
        }
        j.num(key!("balance_after"), self.balance_after);
        j.num(key!("started"), self.started.0);
        j.num(key!("ended"), self.ended.0);
        j.num(key!("result_code"), self.result_code);
        if let Some(c) = self.closing_cause {
            j.word(key!("closing_cause"), c.as_str());
        }
        if let Some(v) = self.termination_cause {
            j.num(key!("termination_cause"), v);
        }
        if let Some(v) = self.reporting_reason {
            j.num(key!("reporting_reason"), v);
        }
        for (key, v) in [
            (key!("plan"), self.plan.as_ref()),
            (key!("rate"), self.rate.as_ref()),
            (key!("destination"), self.destination.as_ref()),
            (key!("zone"), self.zone.as_ref()),
        ] {
            if !v.is_empty() {
                j.str(key, v);
            }
        }
        if let Some(t) = self.tariff_change {
            j.word(key!("tariff_change"), t.as_str());
        }
        j.end();
        Ok(())
    }

    /// Appends the record as one CSV line (columns of [`CSV_HEADER`]). To
    /// write many, [`CdrCsvWriter`] reuses its buffers.
    pub fn write_csv(&self, out: &mut String) {
        let mut w = CdrCsvWriter::new(Vec::new());
        // Writing to memory cannot fail, and the fields are UTF-8.
        let _ = w.write(self);
        if let Ok(bytes) = w.into_inner() {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
}

/// `,"name":`: a member's separator and key, spelled out at compile time
/// (keys are constants that need no escaping), so that each member costs
/// one copy for its key.
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}
use key;

/// One JSON object on one line, written member by member; the first
/// member is always `sequence`.
struct JsonLine<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> JsonLine<'a> {
    fn new(out: &'a mut Vec<u8>, sequence: u64) -> Self {
        // Room for a whole typical line: members then append without
        // growing the buffer one piece at a time.
        out.reserve(640);
        out.extend_from_slice(b"{\"sequence\":");
        out.extend_from_slice(itoa::Buffer::new().format(sequence).as_bytes());
        JsonLine { out }
    }

    /// A member with an integer value; `key` is a [`key!`].
    #[inline(always)]
    fn num(&mut self, key: &str, v: impl itoa::Integer) {
        self.out.extend_from_slice(key.as_bytes());
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    /// A member whose value is one of gyro's own names (an enum's
    /// `as_str`: lowercase words that never need escaping).
    #[inline(always)]
    fn word(&mut self, key: &str, v: &'static str) {
        debug_assert!(!needs_escape(v.as_bytes()));
        self.out.extend_from_slice(key.as_bytes());
        self.out.push(b'"');
        self.out.extend_from_slice(v.as_bytes());
        self.out.push(b'"');
    }

    /// A member with a string value; `key` is a [`key!`].
    #[inline(always)]
    fn str(&mut self, key: &str, v: &str) {
        self.out.extend_from_slice(key.as_bytes());
        if needs_escape(v.as_bytes()) {
            // Writing a string to memory cannot fail.
            let _ = serde_json::to_writer(&mut *self.out, v);
        } else {
            self.out.push(b'"');
            self.out.extend_from_slice(v.as_bytes());
            self.out.push(b'"');
        }
    }

    fn end(self) {
        self.out.extend_from_slice(b"}\n");
    }
}

/// Whether a JSON string needs escaping: it holds a control character
/// (below 0x20), a quote or a backslash. Eight bytes at a time (the
/// classic "has a zero byte" / "has a byte less than n" word tricks, exact
/// for whether any byte matches), as nearly every string does not.
fn needs_escape(s: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    let special = |word: [u8; 8]| {
        let x = u64::from_ne_bytes(word);
        x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0
            || has_zero(x ^ (ONES * u64::from(b'"')))
            || has_zero(x ^ (ONES * u64::from(b'\\')))
    };
    let mut chunks = s.chunks_exact(8);
    for c in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(c);
        if special(word) {
            return true;
        }
    }
    // The last bytes, padded with a letter (which needs no escaping).
    let rest = chunks.remainder();
    if rest.is_empty() {
        return false;
    }
    let mut word = [b'a'; 8];
    word[..rest.len()].copy_from_slice(rest);
    special(word)
}

/// Writes CDRs as CSV lines (columns of [`CSV_HEADER`], which it does not
/// write), quoting as RFC 4180 says, with no allocation per record once
/// warm.
#[derive(Debug)]
pub struct CdrCsvWriter<W: std::io::Write> {
    csv: csv::Writer<W>,
    num: String,
}

impl<W: std::io::Write> CdrCsvWriter<W> {
    /// A writer onto `w`.
    pub fn new(w: W) -> Self {
        CdrCsvWriter {
            csv: csv::WriterBuilder::new()
                .has_headers(false)
                .terminator(csv::Terminator::Any(b'\n'))
                .buffer_capacity(4096)
                .from_writer(w),
            num: String::new(),
        }
    }

    fn num(&mut self, v: impl std::fmt::Display) -> csv::Result<()> {
        use std::fmt::Write;
        self.num.clear();
        let _ = write!(self.num, "{v}");
        self.csv.write_field(&self.num)
    }

    fn opt(&mut self, v: Option<impl std::fmt::Display>) -> csv::Result<()> {
        match v {
            Some(v) => self.num(v),
            None => self.csv.write_field(""),
        }
    }

    /// Writes one record as one line.
    pub fn write<S: AsRef<str>>(&mut self, c: &CdrOf<S>) -> csv::Result<()> {
        self.num(c.sequence)?;
        self.csv.write_field(c.node_id.as_ref())?;
        self.csv.write_field(c.record_type.as_str())?;
        self.csv.write_field(c.session_id.as_ref())?;
        self.num(c.account)?;
        self.csv.write_field(c.subscriber.as_ref())?;
        self.csv.write_field(c.service_context.as_ref())?;
        self.opt(c.rating_group)?;
        self.opt(c.service_id)?;
        self.num(c.request_number)?;
        self.csv
            .write_field(c.requested_action.map_or("", action_str))?;
        self.csv.write_field(c.unit.map_or("", unit_str))?;
        for v in [
            c.time,
            c.input_octets,
            c.output_octets,
            c.total_octets,
            c.service_units,
            c.rated_units,
            c.bundle_units,
        ] {
            self.num(v)?;
        }
        self.num(c.amount)?;
        self.num(c.unbilled)?;
        self.num(c.balance_after)?;
        self.num(c.started.as_millis())?;
        self.num(c.ended.as_millis())?;
        self.num(c.result_code)?;
        self.csv
            .write_field(c.closing_cause.map_or("", ClosingCause::as_str))?;
        self.opt(c.termination_cause)?;
        self.opt(c.reporting_reason)?;
        self.csv.write_field(c.plan.as_ref())?;
        self.csv.write_field(c.rate.as_ref())?;
        self.csv.write_field(c.destination.as_ref())?;
        self.csv.write_field(c.zone.as_ref())?;
        self.csv
            .write_field(c.tariff_change.map_or("", TariffChangeUsage::as_str))?;
        self.csv.write_field(c.interface.as_str())?;
        self.csv.write_record(None::<&[u8]>)
    }

    /// Flushes buffered lines to the underlying writer.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.csv.flush()
    }
    /// Flushes and returns the underlying writer.
    pub fn into_inner(self) -> std::io::Result<W> {
        self.csv.into_inner().map_err(|e| e.into_error())
    }
}

/// Why a CSV record is not a CDR (see [`CdrCsvReader`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CsvRecordError {
    /// The record does not have the [`CSV_COLUMNS`] columns of
    /// [`CSV_HEADER`].
    #[error("{found} columns, expected the {expected} of gyro's CSV header")]
    Columns {
        /// Columns found.
        found: usize,
        /// [`CSV_COLUMNS`].
        expected: usize,
    },
    /// A column does not hold a value of its type.
    #[error("{0}")]
    Field(String),
}

/// Reads CDRs from CSV records in the columns of [`CSV_HEADER`], as
/// [`CdrCsvWriter`] writes them (empty fields are absent values).
#[derive(Debug, Clone)]
pub struct CdrCsvReader {
    header: csv::ByteRecord,
}

impl Default for CdrCsvReader {
    fn default() -> Self {
        Self::new()
    }
}

impl CdrCsvReader {
    /// A reader of [`CSV_HEADER`]'s columns.
    pub fn new() -> Self {
        CdrCsvReader {
            header: CSV_HEADER.trim_end().split(',').collect(),
        }
    }

    /// The CDR of one CSV record (one line, split into fields by a
    /// `csv::Reader`).
    pub fn record(&self, r: &csv::ByteRecord) -> Result<Cdr, CsvRecordError> {
        if r.len() != CSV_COLUMNS {
            return Err(CsvRecordError::Columns {
                found: r.len(),
                expected: CSV_COLUMNS,
            });
        }
        r.deserialize(Some(&self.header)).map_err(|e| {
            CsvRecordError::Field(match e.kind() {
                // Named by its column where the csv crate knows which
                // (the record's position in its file is the caller's).
                csv::ErrorKind::Deserialize { err, .. } => {
                    let column = err.field().and_then(|i| self.header.get(i as usize));
                    match column {
                        Some(name) => {
                            format!("column {}: {}", String::from_utf8_lossy(name), err.kind())
                        }
                        None => err.kind().to_string(),
                    }
                }
                _ => e.to_string(),
            })
        })
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
    /// The last record.
    pub(crate) fn last_mut(&mut self) -> Option<&mut Cdr> {
        self.len.checked_sub(1).map(|i| &mut self.items[i])
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

#[cfg(test)]
mod tests {
    use super::needs_escape;

    fn naive(s: &[u8]) -> bool {
        s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
    }

    #[test]
    fn the_word_at_a_time_escape_check_agrees_with_the_byte_at_a_time_one() {
        // Every byte value at every position of strings up to 24 bytes,
        // among neighbours that do and do not need escaping themselves.
        for len in 0..24 {
            for fill in [b'a', 0x7f, 0x80, 0xff, 0x21, 0x5d, b'"', 0x1f] {
                for pos in 0..len {
                    for b in 0..=255u8 {
                        let mut s = vec![fill; len];
                        s[pos] = b;
                        assert_eq!(needs_escape(&s), naive(&s), "{s:?}");
                    }
                }
            }
        }
    }
}
