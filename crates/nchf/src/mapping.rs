//! Nchf_ConvergedCharging on the charging engine: a ChargingDataRequest
//! becomes the engine's [`CcRequest`] (what a CCR becomes on Gy) and its
//! [`CcAnswer`] becomes the ChargingDataResponse or the error answer.
//! Sans-IO: no socket, no clock.
//!
//! | Nchf (TS 32.291) | engine (as Gy, RFC 8506 / TS 32.299) |
//! |---|---|
//! | Create / Update / Release (clause 6.1.3) | CC-Request-Type INITIAL / UPDATE / TERMINATION (Termination-Cause DIAMETER_LOGOUT) |
//! | ChargingDataRef | Session-Id (the CDR's `session_id`) |
//! | invocationSequenceNumber | CC-Request-Number (and the End-to-End key of duplicate detection) |
//! | retransmissionIndicator | the T flag |
//! | nfConsumerIdentification nFName, else nFFqdn, else nodeFunctionality | Origin-Host |
//! | subscriberIdentifier `imsi-`/`nai-`, then pDUSessionChargingInformation.userInformation.servedGPSI `msisdn-` | Subscription-Id END_USER_IMSI / END_USER_NAI / END_USER_E164 |
//! | (configured, `[nchf] service_context`) | Service-Context-Id |
//! | multipleUnitUsage | Multiple-Services-Credit-Control (Multiple-Services-Indicator set) |
//! | ratingGroup | Rating-Group |
//! | requestedUnit time / totalVolume / uplinkVolume / downlinkVolume / serviceSpecificUnits | Requested-Service-Unit CC-Time / CC-Total-Octets / CC-Input-Octets / CC-Output-Octets / CC-Service-Specific-Units |
//! | usedUnitContainer (all containers summed) | Used-Service-Unit |
//! | usedUnitContainer triggers triggerType | Reporting-Reason (kept in the CDR) |
//! | multipleUnitInformation grantedUnit / validityTime / finalUnitIndication / resultCode | MSCC Granted-Service-Unit / Validity-Time / Final-Unit-Indication / Result-Code |
//!
//! Command-level outcomes (TS 32.291 table 6.1.7.3-1, TS 29.500 table
//! 5.2.7.2-1): success is 201 Created (Create, with a Location), 200 OK
//! (Update) or 204 No Content (Release). 4010 is 403
//! END_USER_REQUEST_DENIED, 4011 403 CHARGING_NOT_APPLICABLE, 4012 403
//! QUOTA_LIMIT_REACHED, 5030 404 USER_UNKNOWN, 5002 404
//! CONTEXT_NOT_FOUND, 3004 503 NF_CONGESTION, any other 400
//! CHARGING_FAILED. Rating group outcomes (resultCode, clause 6.1.6.3):
//! 2001 SUCCESS, 4010 END_USER_SERVICE_DENIED, 4011
//! QUOTA_MANAGEMENT_NOT_APPLICABLE, 4012 QUOTA_LIMIT_REACHED, 5030
//! USER_UNKNOWN, 5031 RATING_FAILED, others END_USER_SERVICE_REJECTED.

use gyro_charging::{
    result_code, CcAnswer, CcRequest, FailedAvp, FinalUnitAction, Interface, Mscc,
    RedirectAddressType, RequestType, ServiceUnits, SubscriptionId, SubscriptionType,
};

use crate::model::{
    ChargingDataRequest, ChargingDataResponse, FinalUnitIndication, GrantedUnit,
    MultipleUnitInformation, RedirectServer, RequestedUnit, UsedUnitContainer,
};
use crate::problem::{cause, Problem};

/// DIAMETER_TOO_BUSY: the shard could not take or keep the request.
const TOO_BUSY: u32 = 3004;
/// Termination-Cause DIAMETER_LOGOUT (RFC 8506 section 8.15).
const LOGOUT: u32 = 1;

/// The three operations of the service (TS 32.291 clause 6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Nchf_ConvergedCharging_Create: `POST .../chargingdata`.
    Create,
    /// Nchf_ConvergedCharging_Update: `POST .../chargingdata/{ref}/update`.
    Update,
    /// Nchf_ConvergedCharging_Release: `POST .../chargingdata/{ref}/release`.
    Release,
}

impl Operation {
    /// The credit-control request type it is charged as.
    pub fn request_type(self) -> RequestType {
        match self {
            Operation::Create => RequestType::Initial,
            Operation::Update => RequestType::Update,
            Operation::Release => RequestType::Termination,
        }
    }

    /// Lower-case name, for logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Release => "release",
        }
    }
}

/// A SUPI or GPSI as a Subscription-Id: `imsi-<digits>`, `msisdn-<digits>`
/// (TS 29.571 `Supi`, `Gpsi`) or `nai-<nai>`.
pub fn identity(value: &str) -> Option<SubscriptionId> {
    let (kind, data) = if let Some(d) = value.strip_prefix("imsi-") {
        (SubscriptionType::Imsi, d)
    } else if let Some(d) = value.strip_prefix("msisdn-") {
        (SubscriptionType::E164, d)
    } else if let Some(d) = value.strip_prefix("nai-") {
        (SubscriptionType::Nai, d)
    } else {
        return None;
    };
    (!data.is_empty()).then(|| SubscriptionId::new(kind, data))
}

/// The subscriber identities of a request, in the order to try them:
/// subscriberIdentifier, then the served GPSI.
pub fn subscription_ids(r: &ChargingDataRequest) -> Vec<SubscriptionId> {
    let gpsi = r
        .pdu_session_charging_information
        .as_ref()
        .and_then(|p| p.user_information.as_ref())
        .and_then(|u| u.served_gpsi.as_deref());
    r.subscriber_identifier
        .as_deref()
        .into_iter()
        .chain(gpsi)
        .filter_map(identity)
        .collect()
}

fn requested(u: &RequestedUnit) -> ServiceUnits {
    ServiceUnits {
        time: u.time,
        total_octets: u.total_volume,
        input_octets: u.uplink_volume,
        output_octets: u.downlink_volume,
        service_specific: u.service_specific_units,
        tariff_time_change: None,
    }
}

fn used(containers: &[UsedUnitContainer]) -> Option<ServiceUnits> {
    if containers.is_empty() {
        return None;
    }
    let mut sum = ServiceUnits::default();
    for c in containers {
        sum.accumulate(&ServiceUnits {
            time: c.time,
            total_octets: c.total_volume,
            input_octets: c.uplink_volume,
            output_octets: c.downlink_volume,
            service_specific: c.service_specific_units,
            tariff_time_change: None,
        });
    }
    Some(sum)
}

/// Reporting-Reason (TS 32.299 section 7.2.175) of a TriggerType.
pub fn reporting_reason(trigger_type: &str) -> u32 {
    match trigger_type {
        "QUOTA_THRESHOLD" => 0,
        "QHT" => 1,
        "FINAL" => 2,
        "QUOTA_EXHAUSTED" => 3,
        "VALIDITY_TIME" => 4,
        "OTHER_QUOTA_TYPE" => 5,
        "FORCED_REAUTHORISATION" => 7,
        "UNUSED_QUOTA_TIMER" => 9,
        // Changes of charging conditions (RAT, location, QoS, ...).
        _ => 6,
    }
}

/// Fills `out` with the engine request for `r`, an `op` on the charging
/// session `session_id`, rated under `service_context`.
pub fn to_cc_request(
    r: &ChargingDataRequest,
    op: Operation,
    session_id: &str,
    service_context: &str,
    out: &mut CcRequest,
) {
    let nf = &r.nf_consumer_identification;
    out.session_id.clear();
    out.session_id.push_str(session_id);
    out.origin_host.clear();
    out.origin_host.push_str(
        nf.nf_name
            .as_deref()
            .or(nf.nf_fqdn.as_deref())
            .unwrap_or(&nf.node_functionality),
    );
    out.end_to_end = r.invocation_sequence_number;
    out.retransmit = r.retransmission_indicator.unwrap_or(false);
    out.request_type = op.request_type();
    out.request_number = r.invocation_sequence_number;
    out.service_context.clear();
    out.service_context.push_str(service_context);
    out.subscription_ids = subscription_ids(r);
    out.multiple_services = Some(true);
    out.requested_action = None;
    out.service_id = None;
    out.requested = None;
    out.used = None;
    out.termination_cause = (op == Operation::Release).then_some(LOGOUT);
    out.used_after = None;
    out.called_party.clear();
    out.visited_plmn.clear();
    // The session it opens, and every CDR it causes, say Nchf.
    out.interface = Interface::Nchf;
    out.mscc.clear();
    for u in &r.multiple_unit_usage {
        let reason = u
            .used_unit_container
            .iter()
            .flat_map(|c| c.triggers.iter())
            .find_map(|t| t.trigger_type.as_deref())
            .map(reporting_reason);
        out.mscc.push(Mscc {
            rating_group: Some(u.rating_group),
            service_id: None,
            requested: u.requested_unit.as_ref().map(requested),
            used: used(&u.used_unit_container),
            // Usage before and after a tariff change comes in separate
            // containers (TARIFF_TIME_CHANGE triggers); not split yet.
            used_after: None,
            reporting_reason: reason,
        });
    }
}

/// ResultCode (clause 6.1.6.3) of a rating group's Result-Code.
pub fn unit_result(code: u32) -> &'static str {
    match code {
        result_code::SUCCESS => "SUCCESS",
        result_code::END_USER_SERVICE_DENIED => "END_USER_SERVICE_DENIED",
        result_code::CREDIT_CONTROL_NOT_APPLICABLE => "QUOTA_MANAGEMENT_NOT_APPLICABLE",
        result_code::CREDIT_LIMIT_REACHED => "QUOTA_LIMIT_REACHED",
        result_code::USER_UNKNOWN => "USER_UNKNOWN",
        result_code::RATING_FAILED => "RATING_FAILED",
        _ => "END_USER_SERVICE_REJECTED",
    }
}

fn granted(u: &ServiceUnits) -> GrantedUnit {
    GrantedUnit {
        tariff_time_change: u
            .tariff_time_change
            .map(|t| crate::time::format_rfc3339(t.as_millis())),
        time: u.time,
        total_volume: u.total_octets,
        uplink_volume: u.input_octets,
        downlink_volume: u.output_octets,
        service_specific_units: u.service_specific,
    }
}

fn final_unit(f: &gyro_charging::FinalUnitIndication) -> FinalUnitIndication {
    let action = match f.action {
        FinalUnitAction::Terminate => "TERMINATE",
        FinalUnitAction::Redirect => "REDIRECT",
        FinalUnitAction::RestrictAccess => "RESTRICT_ACCESS",
    };
    let one_or_list = |v: &[String]| match v {
        [one] => (Some(one.clone()), Vec::new()),
        more => (None, more.to_vec()),
    };
    let (rule, rules) = one_or_list(&f.restriction_filter_rules);
    let (id, ids) = one_or_list(&f.filter_ids);
    FinalUnitIndication {
        final_unit_action: action.to_string(),
        restriction_filter_rule: rule,
        restriction_filter_rule_list: rules,
        filter_id: id,
        filter_id_list: ids,
        redirect_server: f.redirect.as_ref().map(|r| RedirectServer {
            redirect_address_type: match r.address_type {
                RedirectAddressType::Ipv4 => "IPV4",
                RedirectAddressType::Ipv6 => "IPV6",
                RedirectAddressType::Url => "URL",
                RedirectAddressType::SipUri => "URI",
            }
            .to_string(),
            redirect_server_address: r.address.clone(),
        }),
    }
}

/// What to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// 201 Created (Create) or 200 OK (Update) with this body.
    Charged(Box<ChargingDataResponse>),
    /// 204 No Content (Release).
    Released,
    /// An error answer.
    Refused(Problem),
}

/// The answer to `op` whose engine answer is `a`, at `now_ms` (Unix
/// milliseconds).
pub fn reply(op: Operation, request: &ChargingDataRequest, a: &CcAnswer, now_ms: u64) -> Reply {
    if a.result_code != result_code::SUCCESS {
        return Reply::Refused(refusal(request, a));
    }
    if op == Operation::Release {
        return Reply::Released;
    }
    let units = a
        .mscc
        .iter()
        .map(|m| MultipleUnitInformation {
            result_code: Some(unit_result(m.result_code).to_string()),
            rating_group: m.rating_group.unwrap_or_default(),
            granted_unit: m.granted.as_ref().map(granted),
            triggers: Vec::new(),
            validity_time: m.validity_time,
            quota_holding_time: m.quota_holding_time,
            final_unit_indication: m.final_unit.as_ref().map(final_unit),
            time_quota_threshold: m.time_quota_threshold,
            volume_quota_threshold: m.volume_quota_threshold.map(u64::from),
        })
        .collect();
    Reply::Charged(Box::new(ChargingDataResponse {
        invocation_time_stamp: crate::time::format_rfc3339(now_ms),
        invocation_sequence_number: a.request_number,
        invocation_result: None,
        // Sessions survive a restart of gyro, not a move to another CHF.
        session_failover: (op == Operation::Create).then(|| "FAILOVER_NOT_SUPPORTED".into()),
        multiple_unit_information: units,
        triggers: Vec::new(),
    }))
}

/// The JSON pointer of the request attribute an engine failure names.
fn failed_param(request: &ChargingDataRequest, f: FailedAvp) -> Option<(String, &'static str)> {
    match f {
        FailedAvp::RatingGroup(rg) => request
            .multiple_unit_usage
            .iter()
            .position(|u| u.rating_group == rg)
            .map(|i| (format!("/multipleUnitUsage/{i}/ratingGroup"), "no tariff")),
        FailedAvp::SubscriptionId => Some(("/subscriberIdentifier".into(), "unknown")),
        _ => None,
    }
}

fn refusal(request: &ChargingDataRequest, a: &CcAnswer) -> Problem {
    let (status, why, detail) = match a.result_code {
        result_code::END_USER_SERVICE_DENIED => (
            403,
            cause::END_USER_REQUEST_DENIED,
            "the subscriber's account does not allow this service (blocked)",
        ),
        result_code::CREDIT_CONTROL_NOT_APPLICABLE => (
            403,
            cause::CHARGING_NOT_APPLICABLE,
            "the service is allowed without charging",
        ),
        result_code::CREDIT_LIMIT_REACHED => (
            403,
            cause::QUOTA_LIMIT_REACHED,
            "no quota can be granted: the account has no credit left",
        ),
        result_code::USER_UNKNOWN => (
            404,
            cause::USER_UNKNOWN,
            "no account for the subscriber (subscriberIdentifier, servedGPSI)",
        ),
        result_code::UNKNOWN_SESSION_ID => {
            return Problem::new(
                404,
                Some(cause::CONTEXT_NOT_FOUND),
                "no such charging data resource: never created, already released, or \
                 closed after its supervision time",
            )
            .param("{ChargingDataRef}", "unknown");
        }
        TOO_BUSY => {
            return Problem::congestion(
                "the charging could not be made durable now; nothing was charged, try again",
            )
        }
        result_code::RATING_FAILED => (
            400,
            cause::CHARGING_FAILED,
            "rating failed: no tariff for the service or a rating group",
        ),
        _ => (
            400,
            cause::CHARGING_FAILED,
            "the information needed to charge is incomplete or erroneous",
        ),
    };
    let mut p = Problem::new(
        status,
        Some(why),
        format!("{detail} (result {})", a.result_code),
    );
    if let Some((param, reason)) = a.failed_avp.and_then(|f| failed_param(request, f)) {
        p = p.param(param, reason);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MultipleUnitUsage, NfIdentification, Trigger};
    use gyro_charging::MsccAnswer;

    fn request() -> ChargingDataRequest {
        ChargingDataRequest {
            subscriber_identifier: Some("imsi-001010000000001".into()),
            nf_consumer_identification: NfIdentification {
                node_functionality: "SMF".into(),
                nf_name: Some("5e1a3c02-0000-4000-8000-000000000001".into()),
                ..Default::default()
            },
            invocation_time_stamp: "2025-01-01T00:00:00Z".into(),
            invocation_sequence_number: 3,
            multiple_unit_usage: vec![
                MultipleUnitUsage {
                    rating_group: 10,
                    requested_unit: Some(RequestedUnit::default()),
                    used_unit_container: vec![
                        UsedUnitContainer {
                            total_volume: Some(100),
                            triggers: vec![Trigger {
                                trigger_type: Some("QUOTA_EXHAUSTED".into()),
                                trigger_category: "IMMEDIATE_REPORT".into(),
                                ..Default::default()
                            }],
                            local_sequence_number: 1,
                            ..Default::default()
                        },
                        UsedUnitContainer {
                            uplink_volume: Some(5),
                            total_volume: Some(50),
                            local_sequence_number: 2,
                            ..Default::default()
                        },
                    ],
                    upf_id: None,
                },
                MultipleUnitUsage {
                    rating_group: 20,
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_request_maps_to_the_engine_request_gy_would_make() {
        let mut cc = CcRequest::default();
        to_cc_request(
            &request(),
            Operation::Update,
            "ref",
            "32251@3gpp.org",
            &mut cc,
        );
        assert_eq!(cc.request_type, RequestType::Update);
        assert_eq!(cc.request_number, 3);
        assert_eq!(cc.end_to_end, 3);
        assert_eq!(cc.session_id, "ref");
        assert_eq!(cc.origin_host, "5e1a3c02-0000-4000-8000-000000000001");
        assert_eq!(
            cc.subscription_ids,
            vec![SubscriptionId::new(
                SubscriptionType::Imsi,
                "001010000000001"
            )]
        );
        assert_eq!(cc.multiple_services, Some(true));
        assert_eq!(cc.interface, Interface::Nchf);
        assert_eq!(cc.mscc.len(), 2);
        let m = &cc.mscc[0];
        assert_eq!(m.rating_group, Some(10));
        assert_eq!(m.requested, Some(ServiceUnits::default()));
        let u = m.used.unwrap();
        assert_eq!((u.total_octets, u.input_octets), (Some(150), Some(5)));
        assert_eq!(m.reporting_reason, Some(3));
        assert_eq!((cc.mscc[1].requested, cc.mscc[1].used), (None, None));
        to_cc_request(&request(), Operation::Release, "ref", "x", &mut cc);
        assert_eq!(cc.request_type, RequestType::Termination);
        assert_eq!(cc.termination_cause, Some(LOGOUT));
    }

    #[test]
    fn identities_come_from_the_supi_then_the_gpsi() {
        let mut r = request();
        r.subscriber_identifier = Some("imsi-1".into());
        r.pdu_session_charging_information = Some(crate::model::PduSessionChargingInformation {
            user_information: Some(crate::model::UserInformation {
                served_gpsi: Some("msisdn-46700000001".into()),
                served_pei: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            subscription_ids(&r),
            vec![
                SubscriptionId::new(SubscriptionType::Imsi, "1"),
                SubscriptionId::e164("46700000001")
            ]
        );
        assert_eq!(identity("gci-xyz"), None);
        assert_eq!(identity("imsi-"), None);
    }

    #[test]
    fn answers_map_to_statuses_and_causes() {
        let r = request();
        let mut a = CcAnswer::error(RequestType::Initial, 0, result_code::SUCCESS);
        a.mscc.push(MsccAnswer {
            rating_group: Some(10),
            result_code: 2001,
            granted: Some(ServiceUnits::of(gyro_charging::UnitKind::Octets, 1024)),
            validity_time: Some(600),
            final_unit: Some(gyro_charging::FinalUnitIndication::default()),
            volume_quota_threshold: Some(100),
            quota_holding_time: Some(30),
            ..Default::default()
        });
        let Reply::Charged(body) = reply(Operation::Create, &r, &a, 0) else {
            panic!()
        };
        let m = &body.multiple_unit_information[0];
        assert_eq!(m.result_code.as_deref(), Some("SUCCESS"));
        assert_eq!(m.granted_unit.as_ref().unwrap().total_volume, Some(1024));
        // Thresholds and holding time pass through; no time threshold was
        // configured, so none is sent.
        assert_eq!(m.volume_quota_threshold, Some(100));
        assert_eq!(m.quota_holding_time, Some(30));
        assert_eq!(m.time_quota_threshold, None);
        assert_eq!(m.granted_unit.as_ref().unwrap().tariff_time_change, None);
        assert_eq!(
            m.final_unit_indication.as_ref().unwrap().final_unit_action,
            "TERMINATE"
        );
        assert_eq!(
            body.session_failover.as_deref(),
            Some("FAILOVER_NOT_SUPPORTED")
        );
        assert_eq!(reply(Operation::Release, &r, &a, 0), Reply::Released);
        for (code, status, c) in [
            (4010, 403, cause::END_USER_REQUEST_DENIED),
            (4011, 403, cause::CHARGING_NOT_APPLICABLE),
            (4012, 403, cause::QUOTA_LIMIT_REACHED),
            (5030, 404, cause::USER_UNKNOWN),
            (5002, 404, cause::CONTEXT_NOT_FOUND),
            (3004, 503, cause::NF_CONGESTION),
            (5031, 400, cause::CHARGING_FAILED),
            (5012, 400, cause::CHARGING_FAILED),
        ] {
            a.result_code = code;
            let Reply::Refused(p) = reply(Operation::Update, &r, &a, 0) else {
                panic!("{code}")
            };
            assert_eq!((p.status, p.cause()), (status, Some(c)), "{code}");
        }
    }
}
