//! The TS 32.291 data types gyro reads and writes for PDU session
//! charging (the OpenAPI of Nchf_ConvergedCharging v3,
//! `TS32291_Nchf_ConvergedCharging.yaml`; structured types in clause
//! 6.1.6.2, enumerations in clause 6.1.6.3), and ProblemDetails
//! (TS 29.571 clause 5.2.4.1).
//!
//! Names are the specification's, camelCase (with its irregular ones such
//! as `nFName` or `pDUSessionChargingInformation`). As 3GPP APIs require
//! (TS 29.501 clause 5.2.7, extensibility), attributes gyro does not use
//! are ignored, never refused; attributes the specification marks
//! required are required here too (a request without one is answered
//! 400 MANDATORY_IE_MISSING). Enumerations are `anyOf(enum, string)` in
//! the specification, so they are strings here: a value added in a later
//! release is carried, not refused.

use serde::{Deserialize, Serialize};

/// ChargingDataRequest (clause 6.1.6.2.1.1): the body of Create, Update
/// and Release.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChargingDataRequest {
    /// SUPI, e.g. `imsi-001010000000001` (TS 29.571 `Supi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscriber_identifier: Option<String>,
    /// The NF that asks (required).
    pub nf_consumer_identification: NfIdentification,
    /// When the NF sent it, RFC 3339 (required; `DateTime`).
    pub invocation_time_stamp: String,
    /// Sequence number of this request in the charging session (required;
    /// `Uint32`): the duplicate detection key, as CC-Request-Number is.
    pub invocation_sequence_number: u32,
    /// Set on a request sent again (as the Diameter T flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmission_indicator: Option<bool>,
    /// Event-based charging (not served by gyro over Nchf: 403
    /// CHARGING_NOT_APPLICABLE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_time_event: Option<bool>,
    /// Where the CHF would send ChargingNotify requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_uri: Option<String>,
    /// Usage and quota requests, per rating group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multiple_unit_usage: Vec<MultipleUnitUsage>,
    /// Chargeable events that caused this request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// PDU session charging information (clause 6.1.6.2.2.1).
    #[serde(
        rename = "pDUSessionChargingInformation",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pdu_session_charging_information: Option<PduSessionChargingInformation>,
}

/// NFIdentification (clause 6.1.6.2.1.5).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NfIdentification {
    /// NF instance id (a UUID).
    #[serde(rename = "nFName", default, skip_serializing_if = "Option::is_none")]
    pub nf_name: Option<String>,
    /// IPv4 address.
    #[serde(
        rename = "nFIPv4Address",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub nf_ipv4_address: Option<String>,
    /// IPv6 address.
    #[serde(
        rename = "nFIPv6Address",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub nf_ipv6_address: Option<String>,
    /// `SMF`, `AMF`, `PGW_C_SMF`, ... (required; `NodeFunctionality`).
    #[serde(rename = "nodeFunctionality")]
    pub node_functionality: String,
    /// FQDN.
    #[serde(rename = "nFFqdn", default, skip_serializing_if = "Option::is_none")]
    pub nf_fqdn: Option<String>,
}

/// MultipleUnitUsage (clause 6.1.6.2.1.6): one rating group's usage and
/// quota request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultipleUnitUsage {
    /// Rating group (required; `Uint32`).
    pub rating_group: u32,
    /// Quota asked for; present and empty asks for the default quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_unit: Option<RequestedUnit>,
    /// Usage reports (Release 15's OpenAPI spelt it `UsedUnitContainer`).
    #[serde(
        default,
        alias = "UsedUnitContainer",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub used_unit_container: Vec<UsedUnitContainer>,
    /// The UPF that reports.
    #[serde(rename = "uPFID", default, skip_serializing_if = "Option::is_none")]
    pub upf_id: Option<String>,
}

/// RequestedUnit (clause 6.1.6.2.1.10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestedUnit {
    /// Seconds (`Uint32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    /// Octets, both directions (`Uint64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_volume: Option<u64>,
    /// Octets from the UE (`Uint64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_volume: Option<u64>,
    /// Octets to the UE (`Uint64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_volume: Option<u64>,
    /// Service specific units (`Uint64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_specific_units: Option<u64>,
}

/// UsedUnitContainer (clause 6.1.6.2.1.11): one usage report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsedUnitContainer {
    /// Service id (`Uint32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_id: Option<u32>,
    /// `ONLINE_CHARGING`, `OFFLINE_CHARGING`, `QUOTA_MANAGEMENT_SUSPENDED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_management_indicator: Option<String>,
    /// Why this report was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// When the trigger fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_timestamp: Option<String>,
    /// Seconds used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    /// Octets used, both directions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_volume: Option<u64>,
    /// Octets used from the UE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_volume: Option<u64>,
    /// Octets used to the UE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_volume: Option<u64>,
    /// Service specific units used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_specific_units: Option<u64>,
    /// Sequence number of the container (required; `integer`).
    pub local_sequence_number: i64,
}

/// Trigger (clause 6.1.6.2.1.8).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// `QUOTA_THRESHOLD`, `QHT`, `FINAL`, `QUOTA_EXHAUSTED`,
    /// `VALIDITY_TIME`, ... (`TriggerType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_type: Option<String>,
    /// `IMMEDIATE_REPORT` or `DEFERRED_REPORT` (required).
    pub trigger_category: String,
    /// Seconds (`DurationSec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<i64>,
    /// Octets (`Uint32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_limit: Option<u32>,
    /// Octets (`Uint64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_limit64: Option<u64>,
    /// Events (`Uint32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_limit: Option<u32>,
    /// Most changes of charging conditions (`Uint32`).
    #[serde(
        rename = "maxNumberOfccc",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_number_of_ccc: Option<u32>,
}

/// PDUSessionChargingInformation (clause 6.1.6.2.2.1), the parts gyro
/// reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PduSessionChargingInformation {
    /// Charging id (`Uint32`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charging_id: Option<u32>,
    /// The served user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_information: Option<UserInformation>,
    /// The PDU session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdu_session_information: Option<PduSessionInformation>,
}

/// UserInformation (clause 6.1.6.2.2.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInformation {
    /// GPSI, e.g. `msisdn-46700000000`.
    #[serde(
        rename = "servedGPSI",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub served_gpsi: Option<String>,
    /// PEI.
    #[serde(rename = "servedPEI", default, skip_serializing_if = "Option::is_none")]
    pub served_pei: Option<String>,
}

/// PDUSessionInformation (clause 6.1.6.2.2.3), the parts gyro reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PduSessionInformation {
    /// PDU session id (required; `PduSessionId`, 0..=255).
    #[serde(rename = "pduSessionID")]
    pub pdu_session_id: u8,
    /// DNN (required).
    pub dnn_id: String,
    /// RAT type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rat_type: Option<String>,
}

/// ChargingDataResponse (clause 6.1.6.2.1.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChargingDataResponse {
    /// When the CHF answered (required).
    pub invocation_time_stamp: String,
    /// The request's, echoed (required).
    pub invocation_sequence_number: u32,
    /// Errors the CHF reports with the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_result: Option<InvocationResult>,
    /// `FAILOVER_SUPPORTED` or `FAILOVER_NOT_SUPPORTED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_failover: Option<String>,
    /// Quota per rating group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multiple_unit_information: Vec<MultipleUnitInformation>,
    /// Triggers the CHF arms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
}

/// InvocationResult (clause 6.1.6.2.1.7).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationResult {
    /// The error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProblemDetails>,
    /// `TERMINATE`, `CONTINUE` or `RETRY_AND_TERMINATE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_handling: Option<String>,
}

/// MultipleUnitInformation (clause 6.1.6.2.1.9): the answer for one
/// rating group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultipleUnitInformation {
    /// `SUCCESS`, `QUOTA_LIMIT_REACHED`, ... (`ResultCode`, clause
    /// 6.1.6.3.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_code: Option<String>,
    /// Rating group (required).
    pub rating_group: u32,
    /// The quota granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_unit: Option<GrantedUnit>,
    /// Triggers for this rating group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Trigger>,
    /// Seconds the quota is valid (`DurationSec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_time: Option<u32>,
    /// Seconds an idle quota is kept (`DurationSec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_holding_time: Option<u32>,
    /// What to do when the granted units are used up: they are the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_unit_indication: Option<FinalUnitIndication>,
    /// Seconds of the granted time left when the SMF asks for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_quota_threshold: Option<u32>,
    /// Octets of the granted volume left when the SMF asks for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_quota_threshold: Option<u64>,
}

/// GrantedUnit (clause 6.1.6.2.1.12).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantedUnit {
    /// When the price changes inside this grant (RFC 3339); usage after it
    /// is reported in its own container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tariff_time_change: Option<String>,
    /// Seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u32>,
    /// Octets, both directions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_volume: Option<u64>,
    /// Octets from the UE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplink_volume: Option<u64>,
    /// Octets to the UE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downlink_volume: Option<u64>,
    /// Service specific units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_specific_units: Option<u64>,
}

/// FinalUnitIndication (clause 6.1.6.2.1.13).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalUnitIndication {
    /// `TERMINATE`, `REDIRECT` or `RESTRICT_ACCESS` (required).
    pub final_unit_action: String,
    /// The one restriction filter rule (IPFilterRule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restriction_filter_rule: Option<String>,
    /// Several restriction filter rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restriction_filter_rule_list: Vec<String>,
    /// The one filter id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_id: Option<String>,
    /// Several filter ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filter_id_list: Vec<String>,
    /// Where to redirect to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_server: Option<RedirectServer>,
}

/// RedirectServer (clause 6.1.6.2.1.14).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedirectServer {
    /// `IPV4`, `IPV6`, `URL` or `URI` (required).
    pub redirect_address_type: String,
    /// The address (required).
    pub redirect_server_address: String,
}

/// ProblemDetails (TS 29.571 clause 5.2.4.1, after RFC 7807): the body of
/// every error answer, `application/problem+json`, with the application
/// error in `cause` (TS 29.500 clause 5.2.7).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProblemDetails {
    /// A URI naming the problem type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A short summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The HTTP status code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What happened, for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The request's URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The application error, e.g. `USER_UNKNOWN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The attributes at fault (JSON pointers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_params: Vec<InvalidParam>,
}

/// InvalidParam (TS 29.571 clause 5.2.4.2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidParam {
    /// A JSON pointer to the attribute (`/multipleUnitUsage/0/ratingGroup`).
    pub param: String,
    /// Why it is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
