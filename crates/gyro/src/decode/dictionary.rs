//! Names and validation for the decoder, from gyro-diameter's built-in
//! dictionary.

use bytes::BytesMut;
use gyro_diameter::codes;
use gyro_diameter::dict::Dictionary;
use gyro_diameter::types::AvpType;
use gyro_diameter::validate::{
    encode_error_answer, validate_answer, validate_request, Offending, Options,
};
use gyro_diameter::{Header, Message};

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

fn dict() -> &'static Dictionary {
    Dictionary::builtin()
}

/// Looks up an AVP.
pub fn avp(code: u32, vendor: u32) -> Option<AvpInfo> {
    dict().avp(code, vendor).map(|d| AvpInfo {
        name: d.name.as_str(),
        ty: d.ty,
    })
}

/// The name of an enumerated value.
pub fn enum_name(code: u32, vendor: u32, value: i32) -> Option<&'static str> {
    dict().avp(code, vendor)?.enum_name(value)
}

/// Names of a command, preferring the definition for this application.
pub fn command(code: u32, application: u32, request: bool) -> Option<CommandNames> {
    let d = dict();
    let c = d
        .command_for(code, application)
        .ok()
        .or_else(|| d.command(code))?;
    Some(CommandNames {
        name: format!("{}-{}", c.name, if request { "Request" } else { "Answer" }),
        short: c.short_name(request).to_string(),
    })
}

/// The name of an application.
pub fn application_name(id: u32) -> Option<&'static str> {
    dict().application_name(id)
}

/// The name of a vendor.
pub fn vendor_name(id: u32) -> Option<&'static str> {
    dict().vendor_name(id)
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

/// Validates a message the way gyro's server does: requests with
/// `validate_request`, answers with `validate_answer`, in lenient mode
/// unless `strict`. The Failed-AVP is taken from the error answer gyro
/// would send, so it is exactly what a peer would receive.
pub fn validate(buf: &[u8], strict: bool) -> Result<(), Problem> {
    let opts = if strict {
        Options::strict()
    } else {
        Options::lenient()
    };
    let request = Header::parse(buf).is_ok_and(|h| h.is_request());
    let result = if request {
        validate_request(dict(), buf, &opts)
    } else {
        validate_answer(dict(), buf, &opts)
    };
    let Err(p) = result else {
        return Ok(());
    };
    let mut message = p.message.to_string();
    if let Some(fa) = &p.failed_avp {
        let name = avp(fa.code(), fa.vendor()).map_or("Unknown-AVP", |i| i.name);
        message.push_str(&format!(": {name} (code {}", fa.code()));
        if fa.vendor() != 0 {
            message.push_str(&format!(", vendor {}", fa.vendor()));
        }
        message.push(')');
    }
    let failed_avps = if request {
        let mut out = BytesMut::new();
        match encode_error_answer(&mut out, buf, &p, "gyro-decode", "gyro-decode") {
            Ok(_) => failed_avp_contents(&out),
            Err(_) => Vec::new(),
        }
    } else {
        match p.failed_avp.map(|f| f.avp) {
            Some(Offending::Received(a)) => vec![padded(a.raw())],
            Some(Offending::Pair(a, b)) => vec![padded(a.raw()), padded(b.raw())],
            _ => Vec::new(),
        }
    };
    Err(Problem {
        message,
        result_code: p.result_code,
        failed_avps,
    })
}

fn padded(raw: &[u8]) -> Vec<u8> {
    let mut v = raw.to_vec();
    v.resize(raw.len().div_ceil(4) * 4, 0);
    v
}

/// The data of every Failed-AVP in an encoded answer.
fn failed_avp_contents(answer: &[u8]) -> Vec<Vec<u8>> {
    let Ok(m) = Message::parse(answer) else {
        return Vec::new();
    };
    m.avps()
        .filter_map(Result::ok)
        .filter(|a| a.code() == codes::avp::FAILED_AVP.code && a.vendor_id() == 0)
        .map(|a| a.data().to_vec())
        .collect()
}
