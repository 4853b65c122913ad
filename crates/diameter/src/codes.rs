//! Constants for command codes, application ids, result codes and the AVPs
//! gyro itself reads or writes. The full catalogue, with names, formats and
//! grammars, is the dictionary ([`crate::dict`]).

use avp_flags::MANDATORY;

/// AVP flag bits (RFC 6733 section 4.1).
pub mod avp_flags {
    /// V: a Vendor-ID field follows the AVP Length.
    pub const VENDOR: u8 = 0x80;
    /// M: the receiver must understand this AVP or reject the message.
    pub const MANDATORY: u8 = 0x40;
    /// P: end-to-end security (deprecated; sent as zero).
    pub const PROTECTED: u8 = 0x20;
    /// The five reserved bits: sent as zero.
    pub const RESERVED: u8 = 0x1F;
}

/// An AVP as an encoder needs it: code, vendor (0 for IETF AVPs) and the
/// flags to send (the V bit is derived from the vendor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AvpId {
    /// AVP Code.
    pub code: u32,
    /// Vendor-ID, 0 for none.
    pub vendor: u32,
    /// Flags to send (M, and V when vendor is non-zero).
    pub flags: u8,
}

impl AvpId {
    /// An AVP sent with the M bit set.
    pub const fn m(code: u32, vendor: u32) -> AvpId {
        AvpId {
            code,
            vendor,
            flags: MANDATORY,
        }
    }
    /// An AVP sent with the M bit clear.
    pub const fn plain(code: u32, vendor: u32) -> AvpId {
        AvpId {
            code,
            vendor,
            flags: 0,
        }
    }
}

/// Vendor-Id of 3GPP.
pub const VENDOR_3GPP: u32 = 10415;

/// Command Codes.
pub mod cmd {
    /// Capabilities-Exchange (CER/CEA).
    pub const CAPABILITIES_EXCHANGE: u32 = 257;
    /// Re-Auth (RAR/RAA).
    pub const RE_AUTH: u32 = 258;
    /// Accounting (ACR/ACA).
    pub const ACCOUNTING: u32 = 271;
    /// Credit-Control (CCR/CCA).
    pub const CREDIT_CONTROL: u32 = 272;
    /// Abort-Session (ASR/ASA).
    pub const ABORT_SESSION: u32 = 274;
    /// Session-Termination (STR/STA).
    pub const SESSION_TERMINATION: u32 = 275;
    /// Device-Watchdog (DWR/DWA).
    pub const DEVICE_WATCHDOG: u32 = 280;
    /// Disconnect-Peer (DPR/DPA).
    pub const DISCONNECT_PEER: u32 = 282;
}

/// Application-Ids.
pub mod app {
    /// Diameter common messages (CER, DWR, DPR).
    pub const COMMON: u32 = 0;
    /// Diameter Credit-Control (RFC 8506).
    pub const CREDIT_CONTROL: u32 = 4;
    /// Relay: shares every application.
    pub const RELAY: u32 = 0xFFFF_FFFF;
}

/// Result-Code values (RFC 6733 section 7.1, RFC 8506 section 9).
pub mod result {
    /// DIAMETER_MULTI_ROUND_AUTH (1001).
    pub const MULTI_ROUND_AUTH: u32 = 1001;
    /// DIAMETER_SUCCESS (2001).
    pub const SUCCESS: u32 = 2001;
    /// DIAMETER_LIMITED_SUCCESS (2002).
    pub const LIMITED_SUCCESS: u32 = 2002;
    /// DIAMETER_COMMAND_UNSUPPORTED (3001).
    pub const COMMAND_UNSUPPORTED: u32 = 3001;
    /// DIAMETER_UNABLE_TO_DELIVER (3002).
    pub const UNABLE_TO_DELIVER: u32 = 3002;
    /// DIAMETER_REALM_NOT_SERVED (3003).
    pub const REALM_NOT_SERVED: u32 = 3003;
    /// DIAMETER_TOO_BUSY (3004).
    pub const TOO_BUSY: u32 = 3004;
    /// DIAMETER_LOOP_DETECTED (3005).
    pub const LOOP_DETECTED: u32 = 3005;
    /// DIAMETER_REDIRECT_INDICATION (3006).
    pub const REDIRECT_INDICATION: u32 = 3006;
    /// DIAMETER_APPLICATION_UNSUPPORTED (3007).
    pub const APPLICATION_UNSUPPORTED: u32 = 3007;
    /// DIAMETER_INVALID_HDR_BITS (3008).
    pub const INVALID_HDR_BITS: u32 = 3008;
    /// DIAMETER_INVALID_AVP_BITS (3009).
    pub const INVALID_AVP_BITS: u32 = 3009;
    /// DIAMETER_UNKNOWN_PEER (3010).
    pub const UNKNOWN_PEER: u32 = 3010;
    /// DIAMETER_AUTHENTICATION_REJECTED (4001).
    pub const AUTHENTICATION_REJECTED: u32 = 4001;
    /// DIAMETER_OUT_OF_SPACE (4002).
    pub const OUT_OF_SPACE: u32 = 4002;
    /// DIAMETER_ELECTION_LOST (4003).
    pub const ELECTION_LOST: u32 = 4003;
    /// DIAMETER_END_USER_SERVICE_DENIED (4010).
    pub const END_USER_SERVICE_DENIED: u32 = 4010;
    /// DIAMETER_CREDIT_CONTROL_NOT_APPLICABLE (4011).
    pub const CREDIT_CONTROL_NOT_APPLICABLE: u32 = 4011;
    /// DIAMETER_CREDIT_LIMIT_REACHED (4012).
    pub const CREDIT_LIMIT_REACHED: u32 = 4012;
    /// DIAMETER_AVP_UNSUPPORTED (5001).
    pub const AVP_UNSUPPORTED: u32 = 5001;
    /// DIAMETER_UNKNOWN_SESSION_ID (5002).
    pub const UNKNOWN_SESSION_ID: u32 = 5002;
    /// DIAMETER_AUTHORIZATION_REJECTED (5003).
    pub const AUTHORIZATION_REJECTED: u32 = 5003;
    /// DIAMETER_INVALID_AVP_VALUE (5004).
    pub const INVALID_AVP_VALUE: u32 = 5004;
    /// DIAMETER_MISSING_AVP (5005).
    pub const MISSING_AVP: u32 = 5005;
    /// DIAMETER_RESOURCES_EXCEEDED (5006).
    pub const RESOURCES_EXCEEDED: u32 = 5006;
    /// DIAMETER_CONTRADICTING_AVPS (5007).
    pub const CONTRADICTING_AVPS: u32 = 5007;
    /// DIAMETER_AVP_NOT_ALLOWED (5008).
    pub const AVP_NOT_ALLOWED: u32 = 5008;
    /// DIAMETER_AVP_OCCURS_TOO_MANY_TIMES (5009).
    pub const AVP_OCCURS_TOO_MANY_TIMES: u32 = 5009;
    /// DIAMETER_NO_COMMON_APPLICATION (5010).
    pub const NO_COMMON_APPLICATION: u32 = 5010;
    /// DIAMETER_UNSUPPORTED_VERSION (5011).
    pub const UNSUPPORTED_VERSION: u32 = 5011;
    /// DIAMETER_UNABLE_TO_COMPLY (5012).
    pub const UNABLE_TO_COMPLY: u32 = 5012;
    /// DIAMETER_INVALID_BIT_IN_HEADER (5013).
    pub const INVALID_BIT_IN_HEADER: u32 = 5013;
    /// DIAMETER_INVALID_AVP_LENGTH (5014).
    pub const INVALID_AVP_LENGTH: u32 = 5014;
    /// DIAMETER_INVALID_MESSAGE_LENGTH (5015).
    pub const INVALID_MESSAGE_LENGTH: u32 = 5015;
    /// DIAMETER_INVALID_AVP_BIT_COMBO (5016).
    pub const INVALID_AVP_BIT_COMBO: u32 = 5016;
    /// DIAMETER_NO_COMMON_SECURITY (5017).
    pub const NO_COMMON_SECURITY: u32 = 5017;
    /// DIAMETER_USER_UNKNOWN (5030).
    pub const USER_UNKNOWN: u32 = 5030;
    /// DIAMETER_RATING_FAILED (5031).
    pub const RATING_FAILED: u32 = 5031;
}

/// AVPs by name, with the flags gyro sends them with.
pub mod avp {
    use super::AvpId;

    /// User-Name (1).
    pub const USER_NAME: AvpId = AvpId::m(1, 0);
    /// Filter-Id (11).
    pub const FILTER_ID: AvpId = AvpId::m(11, 0);
    /// Called-Station-Id (30).
    pub const CALLED_STATION_ID: AvpId = AvpId::m(30, 0);
    /// Event-Timestamp (55).
    pub const EVENT_TIMESTAMP: AvpId = AvpId::m(55, 0);
    /// Host-Ip-Address (257).
    pub const HOST_IP_ADDRESS: AvpId = AvpId::m(257, 0);
    /// Auth-Application-Id (258).
    pub const AUTH_APPLICATION_ID: AvpId = AvpId::m(258, 0);
    /// Acct-Application-Id (259).
    pub const ACCT_APPLICATION_ID: AvpId = AvpId::m(259, 0);
    /// Vendor-Specific-Application-Id (260).
    pub const VENDOR_SPECIFIC_APPLICATION_ID: AvpId = AvpId::m(260, 0);
    /// Session-Id (263).
    pub const SESSION_ID: AvpId = AvpId::m(263, 0);
    /// Origin-Host (264).
    pub const ORIGIN_HOST: AvpId = AvpId::m(264, 0);
    /// Supported-Vendor-Id (265).
    pub const SUPPORTED_VENDOR_ID: AvpId = AvpId::m(265, 0);
    /// Vendor-Id (266).
    pub const VENDOR_ID: AvpId = AvpId::m(266, 0);
    /// Firmware-Revision (267).
    pub const FIRMWARE_REVISION: AvpId = AvpId::plain(267, 0);
    /// Result-Code (268).
    pub const RESULT_CODE: AvpId = AvpId::m(268, 0);
    /// Product-Name (269).
    pub const PRODUCT_NAME: AvpId = AvpId::plain(269, 0);
    /// Disconnect-Cause (273).
    pub const DISCONNECT_CAUSE: AvpId = AvpId::m(273, 0);
    /// Auth-Session-State (277).
    pub const AUTH_SESSION_STATE: AvpId = AvpId::m(277, 0);
    /// Origin-State-Id (278).
    pub const ORIGIN_STATE_ID: AvpId = AvpId::m(278, 0);
    /// Failed-Avp (279).
    pub const FAILED_AVP: AvpId = AvpId::m(279, 0);
    /// Error-Message (281).
    pub const ERROR_MESSAGE: AvpId = AvpId::plain(281, 0);
    /// Route-Record (282).
    pub const ROUTE_RECORD: AvpId = AvpId::m(282, 0);
    /// Destination-Realm (283).
    pub const DESTINATION_REALM: AvpId = AvpId::m(283, 0);
    /// Proxy-Info (284).
    pub const PROXY_INFO: AvpId = AvpId::m(284, 0);
    /// Re-Auth-Request-Type (285).
    pub const RE_AUTH_REQUEST_TYPE: AvpId = AvpId::m(285, 0);
    /// Destination-Host (293).
    pub const DESTINATION_HOST: AvpId = AvpId::m(293, 0);
    /// Error-Reporting-Host (294).
    pub const ERROR_REPORTING_HOST: AvpId = AvpId::plain(294, 0);
    /// Termination-Cause (295).
    pub const TERMINATION_CAUSE: AvpId = AvpId::m(295, 0);
    /// Origin-Realm (296).
    pub const ORIGIN_REALM: AvpId = AvpId::m(296, 0);
    /// Experimental-Result (297).
    pub const EXPERIMENTAL_RESULT: AvpId = AvpId::m(297, 0);
    /// Experimental-Result-Code (298).
    pub const EXPERIMENTAL_RESULT_CODE: AvpId = AvpId::m(298, 0);
    /// Inband-Security-Id (299).
    pub const INBAND_SECURITY_ID: AvpId = AvpId::m(299, 0);
    /// Cc-Correlation-Id (411).
    pub const CC_CORRELATION_ID: AvpId = AvpId::plain(411, 0);
    /// Cc-Input-Octets (412).
    pub const CC_INPUT_OCTETS: AvpId = AvpId::m(412, 0);
    /// Cc-Money (413).
    pub const CC_MONEY: AvpId = AvpId::m(413, 0);
    /// Cc-Output-Octets (414).
    pub const CC_OUTPUT_OCTETS: AvpId = AvpId::m(414, 0);
    /// Cc-Request-Number (415).
    pub const CC_REQUEST_NUMBER: AvpId = AvpId::m(415, 0);
    /// Cc-Request-Type (416).
    pub const CC_REQUEST_TYPE: AvpId = AvpId::m(416, 0);
    /// Cc-Service-Specific-Units (417).
    pub const CC_SERVICE_SPECIFIC_UNITS: AvpId = AvpId::m(417, 0);
    /// Cc-Session-Failover (418).
    pub const CC_SESSION_FAILOVER: AvpId = AvpId::m(418, 0);
    /// Cc-Sub-Session-Id (419).
    pub const CC_SUB_SESSION_ID: AvpId = AvpId::m(419, 0);
    /// Cc-Time (420).
    pub const CC_TIME: AvpId = AvpId::m(420, 0);
    /// Cc-Total-Octets (421).
    pub const CC_TOTAL_OCTETS: AvpId = AvpId::m(421, 0);
    /// Check-Balance-Result (422).
    pub const CHECK_BALANCE_RESULT: AvpId = AvpId::m(422, 0);
    /// Cost-Information (423).
    pub const COST_INFORMATION: AvpId = AvpId::m(423, 0);
    /// Cost-Unit (424).
    pub const COST_UNIT: AvpId = AvpId::m(424, 0);
    /// Currency-Code (425).
    pub const CURRENCY_CODE: AvpId = AvpId::m(425, 0);
    /// Credit-Control (426).
    pub const CREDIT_CONTROL: AvpId = AvpId::m(426, 0);
    /// Credit-Control-Failure-Handling (427).
    pub const CREDIT_CONTROL_FAILURE_HANDLING: AvpId = AvpId::m(427, 0);
    /// Direct-Debiting-Failure-Handling (428).
    pub const DIRECT_DEBITING_FAILURE_HANDLING: AvpId = AvpId::m(428, 0);
    /// Exponent (429).
    pub const EXPONENT: AvpId = AvpId::m(429, 0);
    /// Final-Unit-Indication (430).
    pub const FINAL_UNIT_INDICATION: AvpId = AvpId::m(430, 0);
    /// Granted-Service-Unit (431).
    pub const GRANTED_SERVICE_UNIT: AvpId = AvpId::m(431, 0);
    /// Rating-Group (432).
    pub const RATING_GROUP: AvpId = AvpId::m(432, 0);
    /// Redirect-Address-Type (433).
    pub const REDIRECT_ADDRESS_TYPE: AvpId = AvpId::m(433, 0);
    /// Redirect-Server (434).
    pub const REDIRECT_SERVER: AvpId = AvpId::m(434, 0);
    /// Redirect-Server-Address (435).
    pub const REDIRECT_SERVER_ADDRESS: AvpId = AvpId::m(435, 0);
    /// Requested-Action (436).
    pub const REQUESTED_ACTION: AvpId = AvpId::m(436, 0);
    /// Requested-Service-Unit (437).
    pub const REQUESTED_SERVICE_UNIT: AvpId = AvpId::m(437, 0);
    /// Restriction-Filter-Rule (438).
    pub const RESTRICTION_FILTER_RULE: AvpId = AvpId::m(438, 0);
    /// Service-Identifier (439).
    pub const SERVICE_IDENTIFIER: AvpId = AvpId::m(439, 0);
    /// Service-Parameter-Info (440).
    pub const SERVICE_PARAMETER_INFO: AvpId = AvpId::plain(440, 0);
    /// Service-Parameter-Type (441).
    pub const SERVICE_PARAMETER_TYPE: AvpId = AvpId::plain(441, 0);
    /// Service-Parameter-Value (442).
    pub const SERVICE_PARAMETER_VALUE: AvpId = AvpId::plain(442, 0);
    /// Subscription-Id (443).
    pub const SUBSCRIPTION_ID: AvpId = AvpId::m(443, 0);
    /// Subscription-Id-Data (444).
    pub const SUBSCRIPTION_ID_DATA: AvpId = AvpId::m(444, 0);
    /// Unit-Value (445).
    pub const UNIT_VALUE: AvpId = AvpId::m(445, 0);
    /// Used-Service-Unit (446).
    pub const USED_SERVICE_UNIT: AvpId = AvpId::m(446, 0);
    /// Value-Digits (447).
    pub const VALUE_DIGITS: AvpId = AvpId::m(447, 0);
    /// Validity-Time (448).
    pub const VALIDITY_TIME: AvpId = AvpId::m(448, 0);
    /// Final-Unit-Action (449).
    pub const FINAL_UNIT_ACTION: AvpId = AvpId::m(449, 0);
    /// Subscription-Id-Type (450).
    pub const SUBSCRIPTION_ID_TYPE: AvpId = AvpId::m(450, 0);
    /// Tariff-Time-Change (451).
    pub const TARIFF_TIME_CHANGE: AvpId = AvpId::m(451, 0);
    /// Tariff-Change-Usage (452).
    pub const TARIFF_CHANGE_USAGE: AvpId = AvpId::m(452, 0);
    /// G-S-U-Pool-Identifier (453).
    pub const G_S_U_POOL_IDENTIFIER: AvpId = AvpId::m(453, 0);
    /// Cc-Unit-Type (454).
    pub const CC_UNIT_TYPE: AvpId = AvpId::m(454, 0);
    /// Multiple-Services-Indicator (455).
    pub const MULTIPLE_SERVICES_INDICATOR: AvpId = AvpId::m(455, 0);
    /// Multiple-Services-Credit-Control (456).
    pub const MULTIPLE_SERVICES_CREDIT_CONTROL: AvpId = AvpId::m(456, 0);
    /// G-S-U-Pool-Reference (457).
    pub const G_S_U_POOL_REFERENCE: AvpId = AvpId::m(457, 0);
    /// User-Equipment-Info (458).
    pub const USER_EQUIPMENT_INFO: AvpId = AvpId::plain(458, 0);
    /// User-Equipment-Info-Type (459).
    pub const USER_EQUIPMENT_INFO_TYPE: AvpId = AvpId::plain(459, 0);
    /// User-Equipment-Info-Value (460).
    pub const USER_EQUIPMENT_INFO_VALUE: AvpId = AvpId::plain(460, 0);
    /// Service-Context-Id (461).
    pub const SERVICE_CONTEXT_ID: AvpId = AvpId::m(461, 0);
    /// Redirect-Host (292).
    pub const REDIRECT_HOST: AvpId = AvpId::m(292, 0);
    /// Redirect-Host-Usage (261).
    pub const REDIRECT_HOST_USAGE: AvpId = AvpId::m(261, 0);
    /// Redirect-Max-Cache-Time (262).
    pub const REDIRECT_MAX_CACHE_TIME: AvpId = AvpId::m(262, 0);
    /// Acct-Multi-Session-Id (50).
    pub const ACCT_MULTI_SESSION_ID: AvpId = AvpId::m(50, 0);
    /// 3Gpp-Charging-Id (2, vendor 10415).
    pub const TGPP_CHARGING_ID: AvpId = AvpId::m(2, 10415);
    /// 3Gpp-Pdp-Type (3, vendor 10415).
    pub const TGPP_PDP_TYPE: AvpId = AvpId::m(3, 10415);
    /// 3Gpp-Imsi-Mcc-Mnc (8, vendor 10415).
    pub const TGPP_IMSI_MCC_MNC: AvpId = AvpId::m(8, 10415);
    /// 3Gpp-Ggsn-Mcc-Mnc (9, vendor 10415).
    pub const TGPP_GGSN_MCC_MNC: AvpId = AvpId::m(9, 10415);
    /// 3Gpp-Nsapi (10, vendor 10415).
    pub const TGPP_NSAPI: AvpId = AvpId::m(10, 10415);
    /// 3Gpp-Selection-Mode (12, vendor 10415).
    pub const TGPP_SELECTION_MODE: AvpId = AvpId::m(12, 10415);
    /// 3Gpp-Charging-Characteristics (13, vendor 10415).
    pub const TGPP_CHARGING_CHARACTERISTICS: AvpId = AvpId::m(13, 10415);
    /// 3Gpp-Sgsn-Mcc-Mnc (18, vendor 10415).
    pub const TGPP_SGSN_MCC_MNC: AvpId = AvpId::m(18, 10415);
    /// 3Gpp-Rat-Type (21, vendor 10415).
    pub const TGPP_RAT_TYPE: AvpId = AvpId::m(21, 10415);
    /// 3Gpp-User-Location-Info (22, vendor 10415).
    pub const TGPP_USER_LOCATION_INFO: AvpId = AvpId::m(22, 10415);
    /// 3Gpp-Ms-Timezone (23, vendor 10415).
    pub const TGPP_MS_TIMEZONE: AvpId = AvpId::m(23, 10415);
    /// Ggsn-Address (847, vendor 10415).
    pub const GGSN_ADDRESS: AvpId = AvpId::m(847, 10415);
    /// Time-Quota-Threshold (868, vendor 10415).
    pub const TIME_QUOTA_THRESHOLD: AvpId = AvpId::m(868, 10415);
    /// Volume-Quota-Threshold (869, vendor 10415).
    pub const VOLUME_QUOTA_THRESHOLD: AvpId = AvpId::m(869, 10415);
    /// Trigger-Type (870, vendor 10415).
    pub const TRIGGER_TYPE: AvpId = AvpId::m(870, 10415);
    /// Quota-Holding-Time (871, vendor 10415).
    pub const QUOTA_HOLDING_TIME: AvpId = AvpId::m(871, 10415);
    /// Reporting-Reason (872, vendor 10415).
    pub const REPORTING_REASON: AvpId = AvpId::m(872, 10415);
    /// Service-Information (873, vendor 10415).
    pub const SERVICE_INFORMATION: AvpId = AvpId::m(873, 10415);
    /// Ps-Information (874, vendor 10415).
    pub const PS_INFORMATION: AvpId = AvpId::m(874, 10415);
    /// Quota-Consumption-Time (881, vendor 10415).
    pub const QUOTA_CONSUMPTION_TIME: AvpId = AvpId::m(881, 10415);
    /// Sgsn-Address (1228, vendor 10415).
    pub const SGSN_ADDRESS: AvpId = AvpId::m(1228, 10415);
    /// Pdp-Address (1227, vendor 10415).
    pub const PDP_ADDRESS: AvpId = AvpId::m(1227, 10415);
    /// Unit-Quota-Threshold (1226, vendor 10415).
    pub const UNIT_QUOTA_THRESHOLD: AvpId = AvpId::m(1226, 10415);
    /// Trigger (1264, vendor 10415).
    pub const TRIGGER: AvpId = AvpId::m(1264, 10415);
    /// Low-Balance-Indication (2020, vendor 10415).
    pub const LOW_BALANCE_INDICATION: AvpId = AvpId::m(2020, 10415);
    /// Remaining-Balance (2021, vendor 10415).
    pub const REMAINING_BALANCE: AvpId = AvpId::m(2021, 10415);
    /// Sms-Information (2000, vendor 10415).
    pub const SMS_INFORMATION: AvpId = AvpId::m(2000, 10415);
    /// IMS-Information (876, vendor 10415).
    pub const IMS_INFORMATION: AvpId = AvpId::m(876, 10415);
    /// Node-Functionality (862, vendor 10415).
    pub const NODE_FUNCTIONALITY: AvpId = AvpId::m(862, 10415);
    /// Role-Of-Node (829, vendor 10415).
    pub const ROLE_OF_NODE: AvpId = AvpId::m(829, 10415);
    /// Calling-Party-Address (831, vendor 10415).
    pub const CALLING_PARTY_ADDRESS: AvpId = AvpId::m(831, 10415);
    /// Called-Party-Address (832, vendor 10415).
    pub const CALLED_PARTY_ADDRESS: AvpId = AvpId::m(832, 10415);
    /// Recipient-Info (2026, vendor 10415).
    pub const RECIPIENT_INFO: AvpId = AvpId::m(2026, 10415);
    /// Recipient-Address (1201, vendor 10415).
    pub const RECIPIENT_ADDRESS: AvpId = AvpId::m(1201, 10415);
    /// Address-Type (899, vendor 10415).
    pub const ADDRESS_TYPE: AvpId = AvpId::m(899, 10415);
    /// Address-Data (897, vendor 10415).
    pub const ADDRESS_DATA: AvpId = AvpId::m(897, 10415);
}
