//! The dictionary compiled into the binary: the data files under
//! `crates/diameter/dict/`, parsed once.

use std::sync::OnceLock;

use super::Dictionary;

pub(super) const BASE: &str = include_str!("../../dict/base.toml");
pub(super) const CREDIT_CONTROL: &str = include_str!("../../dict/credit_control.toml");
pub(super) const TGPP_GY: &str = include_str!("../../dict/tgpp_gy.toml");

impl Dictionary {
    /// The dictionary compiled into the binary: base protocol, credit
    /// control and 3GPP Gy. Parsed once; every caller shares the instance.
    pub fn builtin() -> &'static Dictionary {
        static DICT: OnceLock<Dictionary> = OnceLock::new();
        DICT.get_or_init(|| {
            // The embedded data is checked by the unit tests; an error here
            // is a build defect, not an input problem.
            Dictionary::load(&[BASE, CREDIT_CONTROL, TGPP_GY])
                .unwrap_or_else(|e| panic!("built-in dictionary data is invalid: {e}"))
        })
    }

    /// A fresh copy of the built-in dictionary, to be extended with more
    /// vendors' AVPs.
    pub fn builtin_clone() -> Dictionary {
        Dictionary::builtin().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avp::flags as avp_flags;
    use crate::codes::{avp, cmd};
    use crate::dict::FlagRule;

    #[test]
    fn builtin_is_one_shared_instance() {
        assert!(std::ptr::eq(Dictionary::builtin(), Dictionary::builtin()));
    }

    #[test]
    fn each_data_file_loads_on_top_of_the_previous() {
        assert!(Dictionary::from_toml_str(BASE).is_ok());
        assert!(Dictionary::load(&[BASE, CREDIT_CONTROL]).is_ok());
        assert!(Dictionary::load(&[BASE, CREDIT_CONTROL, TGPP_GY]).is_ok());
    }

    #[test]
    fn every_code_constant_agrees_with_the_dictionary() {
        let d = Dictionary::builtin();
        let ids = [
            avp::USER_NAME,
            avp::FILTER_ID,
            avp::CALLED_STATION_ID,
            avp::EVENT_TIMESTAMP,
            avp::HOST_IP_ADDRESS,
            avp::AUTH_APPLICATION_ID,
            avp::ACCT_APPLICATION_ID,
            avp::VENDOR_SPECIFIC_APPLICATION_ID,
            avp::SESSION_ID,
            avp::ORIGIN_HOST,
            avp::SUPPORTED_VENDOR_ID,
            avp::VENDOR_ID,
            avp::FIRMWARE_REVISION,
            avp::RESULT_CODE,
            avp::PRODUCT_NAME,
            avp::DISCONNECT_CAUSE,
            avp::AUTH_SESSION_STATE,
            avp::ORIGIN_STATE_ID,
            avp::FAILED_AVP,
            avp::ERROR_MESSAGE,
            avp::ROUTE_RECORD,
            avp::DESTINATION_REALM,
            avp::PROXY_INFO,
            avp::RE_AUTH_REQUEST_TYPE,
            avp::DESTINATION_HOST,
            avp::ERROR_REPORTING_HOST,
            avp::TERMINATION_CAUSE,
            avp::ORIGIN_REALM,
            avp::EXPERIMENTAL_RESULT,
            avp::EXPERIMENTAL_RESULT_CODE,
            avp::INBAND_SECURITY_ID,
            avp::CC_CORRELATION_ID,
            avp::CC_INPUT_OCTETS,
            avp::CC_MONEY,
            avp::CC_OUTPUT_OCTETS,
            avp::CC_REQUEST_NUMBER,
            avp::CC_REQUEST_TYPE,
            avp::CC_SERVICE_SPECIFIC_UNITS,
            avp::CC_SESSION_FAILOVER,
            avp::CC_SUB_SESSION_ID,
            avp::CC_TIME,
            avp::CC_TOTAL_OCTETS,
            avp::CHECK_BALANCE_RESULT,
            avp::COST_INFORMATION,
            avp::COST_UNIT,
            avp::CURRENCY_CODE,
            avp::CREDIT_CONTROL,
            avp::CREDIT_CONTROL_FAILURE_HANDLING,
            avp::DIRECT_DEBITING_FAILURE_HANDLING,
            avp::EXPONENT,
            avp::FINAL_UNIT_INDICATION,
            avp::GRANTED_SERVICE_UNIT,
            avp::RATING_GROUP,
            avp::REDIRECT_ADDRESS_TYPE,
            avp::REDIRECT_SERVER,
            avp::REDIRECT_SERVER_ADDRESS,
            avp::REQUESTED_ACTION,
            avp::REQUESTED_SERVICE_UNIT,
            avp::RESTRICTION_FILTER_RULE,
            avp::SERVICE_IDENTIFIER,
            avp::SERVICE_PARAMETER_INFO,
            avp::SERVICE_PARAMETER_TYPE,
            avp::SERVICE_PARAMETER_VALUE,
            avp::SUBSCRIPTION_ID,
            avp::SUBSCRIPTION_ID_DATA,
            avp::UNIT_VALUE,
            avp::USED_SERVICE_UNIT,
            avp::VALUE_DIGITS,
            avp::VALIDITY_TIME,
            avp::FINAL_UNIT_ACTION,
            avp::SUBSCRIPTION_ID_TYPE,
            avp::TARIFF_TIME_CHANGE,
            avp::TARIFF_CHANGE_USAGE,
            avp::G_S_U_POOL_IDENTIFIER,
            avp::CC_UNIT_TYPE,
            avp::MULTIPLE_SERVICES_INDICATOR,
            avp::MULTIPLE_SERVICES_CREDIT_CONTROL,
            avp::G_S_U_POOL_REFERENCE,
            avp::USER_EQUIPMENT_INFO,
            avp::USER_EQUIPMENT_INFO_TYPE,
            avp::USER_EQUIPMENT_INFO_VALUE,
            avp::SERVICE_CONTEXT_ID,
            avp::REDIRECT_HOST,
            avp::REDIRECT_HOST_USAGE,
            avp::REDIRECT_MAX_CACHE_TIME,
            avp::ACCT_MULTI_SESSION_ID,
            avp::TGPP_CHARGING_ID,
            avp::TGPP_PDP_TYPE,
            avp::TGPP_IMSI_MCC_MNC,
            avp::TGPP_GGSN_MCC_MNC,
            avp::TGPP_NSAPI,
            avp::TGPP_SELECTION_MODE,
            avp::TGPP_CHARGING_CHARACTERISTICS,
            avp::TGPP_SGSN_MCC_MNC,
            avp::TGPP_RAT_TYPE,
            avp::TGPP_USER_LOCATION_INFO,
            avp::TGPP_MS_TIMEZONE,
            avp::GGSN_ADDRESS,
            avp::TIME_QUOTA_THRESHOLD,
            avp::VOLUME_QUOTA_THRESHOLD,
            avp::TRIGGER_TYPE,
            avp::QUOTA_HOLDING_TIME,
            avp::REPORTING_REASON,
            avp::SERVICE_INFORMATION,
            avp::PS_INFORMATION,
            avp::QUOTA_CONSUMPTION_TIME,
            avp::SGSN_ADDRESS,
            avp::PDP_ADDRESS,
            avp::UNIT_QUOTA_THRESHOLD,
            avp::TRIGGER,
            avp::LOW_BALANCE_INDICATION,
            avp::REMAINING_BALANCE,
            avp::SMS_INFORMATION,
        ];
        for id in ids {
            let def = d
                .avp(id.code, id.vendor)
                .unwrap_or_else(|| panic!("AVP {} vendor {} missing", id.code, id.vendor));
            let m = id.flags & avp_flags::MANDATORY != 0;
            assert!(
                def.m_bit.allows(m),
                "{}: M bit {m} against {:?}",
                def.name,
                def.m_bit
            );
            assert_eq!(def.vendor != 0, def.v_bit == FlagRule::Must, "{}", def.name);
        }
        for c in [
            cmd::CAPABILITIES_EXCHANGE,
            cmd::RE_AUTH,
            cmd::ACCOUNTING,
            cmd::CREDIT_CONTROL,
            cmd::ABORT_SESSION,
            cmd::SESSION_TERMINATION,
            cmd::DEVICE_WATCHDOG,
            cmd::DISCONNECT_PEER,
        ] {
            assert!(d.command(c).is_some(), "command {c}");
        }
    }
}
