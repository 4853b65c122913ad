//! The engine's view of a Credit-Control-Answer. The Gy mapping (in the
//! credit-control application) encodes it into a CCA.

use crate::request::RequestType;
use crate::tariff::FinalUnitIndication;
use crate::types::{ServiceUnits, UnitKind};
use serde::{Deserialize, Serialize};

/// Which AVP made a request fail, so the CCA can carry a Failed-AVP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailedAvp {
    /// Service-Context-Id (unknown context: 5031).
    ServiceContextId,
    /// Subscription-Id (unknown subscriber: 5030).
    SubscriptionId,
    /// Requested-Action (missing on an event, or not allowed).
    RequestedAction,
    /// Multiple-Services-Credit-Control (sent without MSI in strict mode).
    MultipleServicesCreditControl,
    /// Rating-Group with this value (no tariff).
    RatingGroup(u32),
    /// Service-Identifier with this value (no tariff).
    ServiceIdentifier(u32),
}

/// Check-Balance-Result (RFC 8506 section 8.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckBalanceResult {
    /// ENOUGH_CREDIT (0).
    EnoughCredit = 0,
    /// NO_CREDIT (1).
    NoCredit = 1,
}

/// Cost-Information (RFC 8506 section 8.7): `value * 10^exponent` of the
/// currency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostInformation {
    /// Value-Digits.
    pub value_digits: i64,
    /// Exponent (negative of the currency's minor-unit decimals).
    pub exponent: i32,
    /// Currency-Code (ISO 4217).
    pub currency_code: u32,
}

/// The answer part for one rating group / service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsccAnswer {
    /// Rating-Group, echoed.
    pub rating_group: Option<u32>,
    /// Service-Identifier, echoed.
    pub service_id: Option<u32>,
    /// Result-Code for this MSCC.
    pub result_code: u32,
    /// Granted-Service-Unit.
    pub granted: Option<ServiceUnits>,
    /// Validity-Time, seconds.
    pub validity_time: Option<u32>,
    /// Final-Unit-Indication.
    pub final_unit: Option<FinalUnitIndication>,
    /// The unit the grant is in (not encoded; for tests and tools).
    pub unit: Option<UnitKind>,
    /// Volume-Quota-Threshold (TS 32.299): octets left of the grant at
    /// which the client asks for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_quota_threshold: Option<u32>,
    /// Time-Quota-Threshold (TS 32.299): seconds left of the grant at
    /// which the client asks for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_quota_threshold: Option<u32>,
    /// Quota-Holding-Time (TS 32.299): seconds of no traffic after which
    /// the client reports and gives the quota back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_holding_time: Option<u32>,
}

/// A Credit-Control-Answer as the engine produces it. The Diameter layer
/// adds Session-Id, Origin-Host/Realm and Auth-Application-Id.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CcAnswer {
    /// Command-level Result-Code.
    pub result_code: u32,
    /// CC-Request-Type, echoed.
    pub request_type: RequestType,
    /// CC-Request-Number, echoed.
    pub request_number: u32,
    /// Command-level Granted-Service-Unit (single-service form, events).
    pub granted: Option<ServiceUnits>,
    /// Command-level Validity-Time.
    pub validity_time: Option<u32>,
    /// Command-level Final-Unit-Indication.
    pub final_unit: Option<FinalUnitIndication>,
    /// Multiple-Services-Credit-Control answers, one per request MSCC.
    pub mscc: Vec<MsccAnswer>,
    /// Cost-Information (PRICE_ENQUIRY, and DIRECT_DEBITING/REFUND).
    pub cost: Option<CostInformation>,
    /// Check-Balance-Result (CHECK_BALANCE).
    pub check_balance: Option<CheckBalanceResult>,
    /// The AVP that caused a failure, for Failed-AVP.
    pub failed_avp: Option<FailedAvp>,
    /// True when this answer was replayed from the duplicate cache; the
    /// request changed nothing.
    pub duplicate: bool,
}

impl Clone for CcAnswer {
    fn clone(&self) -> Self {
        let mut a = CcAnswer::default();
        a.clone_from(self);
        a
    }

    /// Copies `source` into `self`, reusing `self`'s buffers.
    fn clone_from(&mut self, source: &Self) {
        self.result_code = source.result_code;
        self.request_type = source.request_type;
        self.request_number = source.request_number;
        self.granted = source.granted;
        self.validity_time = source.validity_time;
        self.final_unit.clone_from(&source.final_unit);
        self.mscc.clone_from(&source.mscc);
        self.cost = source.cost;
        self.check_balance = source.check_balance;
        self.failed_avp = source.failed_avp;
        self.duplicate = source.duplicate;
    }
}

impl CcAnswer {
    /// Clears the answer for a new request, keeping buffers.
    pub fn reset(&mut self, request_type: RequestType, request_number: u32) {
        self.result_code = crate::types::result_code::SUCCESS;
        self.request_type = request_type;
        self.request_number = request_number;
        self.granted = None;
        self.validity_time = None;
        self.final_unit = None;
        self.mscc.clear();
        self.cost = None;
        self.check_balance = None;
        self.failed_avp = None;
        self.duplicate = false;
    }

    /// An answer carrying only a Result-Code.
    pub fn error(request_type: RequestType, request_number: u32, result_code: u32) -> Self {
        let mut a = CcAnswer::default();
        a.reset(request_type, request_number);
        a.result_code = result_code;
        a
    }
}
