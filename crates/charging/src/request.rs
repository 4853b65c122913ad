//! The engine's view of a Credit-Control-Request: plain Rust, no Diameter
//! encoding. The Gy mapping (in the credit-control application) builds it
//! from a decoded CCR.

use crate::accounts::SubscriptionId;
use crate::types::{RatingKey, ServiceUnits};
use serde::{Deserialize, Serialize};

/// CC-Request-Type (RFC 8506 section 8.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestType {
    /// INITIAL_REQUEST (1).
    #[default]
    Initial = 1,
    /// UPDATE_REQUEST (2).
    Update = 2,
    /// TERMINATION_REQUEST (3).
    Termination = 3,
    /// EVENT_REQUEST (4).
    Event = 4,
}

impl RequestType {
    /// From the CC-Request-Type value.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            1 => Self::Initial,
            2 => Self::Update,
            3 => Self::Termination,
            4 => Self::Event,
            _ => return None,
        })
    }
    /// The CC-Request-Type value.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// The interface a request arrived over, kept by its session and written
/// in every CDR it causes (`interface` in CDR files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interface {
    /// Diameter Credit-Control (RFC 8506): Gy, and Ro for voice and SMS.
    #[default]
    Gy,
    /// 5G Nchf_ConvergedCharging over HTTP/2 (TS 32.291), the SMF's N40.
    Nchf,
}

impl Interface {
    /// The name used in CDR files: `gy` or `nchf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Gy => "gy",
            Interface::Nchf => "nchf",
        }
    }
    /// Whether it is [`Interface::Gy`] (the default, left out when
    /// serialised).
    pub fn is_gy(&self) -> bool {
        *self == Interface::Gy
    }
}

/// Requested-Action (RFC 8506 section 8.41).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestedAction {
    /// DIRECT_DEBITING (0).
    DirectDebiting = 0,
    /// REFUND_ACCOUNT (1).
    RefundAccount = 1,
    /// CHECK_BALANCE (2).
    CheckBalance = 2,
    /// PRICE_ENQUIRY (3).
    PriceEnquiry = 3,
}

impl RequestedAction {
    /// From the Requested-Action value.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            0 => Self::DirectDebiting,
            1 => Self::RefundAccount,
            2 => Self::CheckBalance,
            3 => Self::PriceEnquiry,
            _ => return None,
        })
    }
    /// The Requested-Action value.
    pub fn code(self) -> u32 {
        self as u32
    }
}

/// One Multiple-Services-Credit-Control AVP of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mscc {
    /// Rating-Group.
    pub rating_group: Option<u32>,
    /// Service-Identifier (the first one, if several).
    pub service_id: Option<u32>,
    /// Requested-Service-Unit; `Some(empty)` asks for the default quota,
    /// `None` asks for nothing new.
    pub requested: Option<ServiceUnits>,
    /// Used-Service-Unit, summed over all USU AVPs; `None` reports nothing.
    pub used: Option<ServiceUnits>,
    /// Reporting-Reason, if any (kept for CDRs).
    pub reporting_reason: Option<u32>,
    /// The part of `used` reported after a tariff change (the
    /// Used-Service-Units with Tariff-Change-Usage UNIT_AFTER_TARIFF_CHANGE),
    /// summed; `None`: no split reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_after: Option<ServiceUnits>,
}

impl Mscc {
    /// The rating key of this MSCC.
    pub fn key(&self) -> RatingKey {
        RatingKey {
            rating_group: self.rating_group,
            service_id: self.service_id,
        }
    }
}

/// A Credit-Control-Request as the engine sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CcRequest {
    /// Session-Id.
    pub session_id: String,
    /// Origin-Host of the client (duplicate detection key, with
    /// `end_to_end`).
    pub origin_host: String,
    /// End-to-End Identifier of the header.
    pub end_to_end: u32,
    /// The T flag: the client says this may be a retransmission.
    pub retransmit: bool,
    /// CC-Request-Type.
    pub request_type: RequestType,
    /// CC-Request-Number.
    pub request_number: u32,
    /// Service-Context-Id.
    pub service_context: String,
    /// Subscription-Id AVPs, in order.
    pub subscription_ids: Vec<SubscriptionId>,
    /// Multiple-Services-Indicator: `Some(true)` for
    /// MULTIPLE_SERVICES_SUPPORTED, `Some(false)` for NOT_SUPPORTED.
    pub multiple_services: Option<bool>,
    /// Requested-Action.
    pub requested_action: Option<RequestedAction>,
    /// Command-level Service-Identifier (single-service form).
    pub service_id: Option<u32>,
    /// Command-level Requested-Service-Unit (single-service form).
    pub requested: Option<ServiceUnits>,
    /// Command-level Used-Service-Unit, summed (single-service form).
    pub used: Option<ServiceUnits>,
    /// Multiple-Services-Credit-Control AVPs.
    pub mscc: Vec<Mscc>,
    /// Termination-Cause.
    pub termination_cause: Option<u32>,
    /// Command-level part of `used` reported after a tariff change
    /// (single-service form; see [`Mscc::used_after`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_after: Option<ServiceUnits>,
    /// The called party (Ro: Service-Information / IMS-Information
    /// Called-Party-Address, or SMS-Information Recipient-Address
    /// Address-Data); empty: none. Rates by destination look at it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub called_party: String,
    /// The visited network's MCC and MNC digits (3GPP-SGSN-MCC-MNC, or
    /// from 3GPP-User-Location-Info); empty: none. Rates by roaming zone
    /// look at it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub visited_plmn: String,
    /// The interface it arrived over: Gy unless the Nchf mapping built it.
    #[serde(default, skip_serializing_if = "Interface::is_gy")]
    pub interface: Interface,
}
