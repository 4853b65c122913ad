//! Reading a ChargingDataRequest body: JSON into the serde model, with
//! every refusal a ProblemDetails naming the attribute at fault
//! (TS 29.500 clause 5.2.7.2: `INVALID_MSG_FORMAT` for what is not a JSON
//! object, `MANDATORY_IE_MISSING`, `MANDATORY_IE_INCORRECT` or
//! `OPTIONAL_IE_INCORRECT` with `invalidParams` as JSON pointers).

use serde_path_to_error::Segment;

use crate::model::ChargingDataRequest;
use crate::problem::{cause, Problem};

/// Most MultipleUnitUsage entries taken in one request (each is a quota
/// the engine grants and a MultipleUnitInformation in the answer), as Gy
/// takes at most 128 MSCC.
pub const MAX_UNIT_USAGE: usize = 128;

/// Attributes the data model marks required, as JSON pointers without
/// array indices. A wrong value there is MANDATORY_IE_INCORRECT; anywhere
/// else, OPTIONAL_IE_INCORRECT.
const REQUIRED: &[&str] = &[
    "/nfConsumerIdentification",
    "/nfConsumerIdentification/nodeFunctionality",
    "/invocationTimeStamp",
    "/invocationSequenceNumber",
    "/multipleUnitUsage/ratingGroup",
    "/multipleUnitUsage/usedUnitContainer/localSequenceNumber",
    "/multipleUnitUsage/usedUnitContainer/triggers/triggerCategory",
    "/triggers/triggerCategory",
    "/pDUSessionChargingInformation/pduSessionInformation/pduSessionID",
    "/pDUSessionChargingInformation/pduSessionInformation/dnnId",
];

/// The JSON pointer of a deserializer path, and the same without array
/// indices.
fn pointers(path: &serde_path_to_error::Path) -> (String, String) {
    let (mut full, mut bare) = (String::new(), String::new());
    for s in path.iter() {
        match s {
            Segment::Seq { index } => {
                full.push('/');
                full.push_str(&index.to_string());
            }
            Segment::Map { key } => {
                let k = key.replace('~', "~0").replace('/', "~1");
                full.push('/');
                full.push_str(&k);
                bare.push('/');
                bare.push_str(&k);
            }
            Segment::Enum { variant } => {
                full.push('/');
                full.push_str(variant);
            }
            Segment::Unknown => {}
        }
    }
    (full, bare)
}

/// The field a serde "missing field `x`" message names.
fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// Parses a request body.
pub fn decode_request(body: &[u8]) -> Result<ChargingDataRequest, Problem> {
    // serde would also read a struct from an array: only an object is one.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Problem::bad_request(
            cause::INVALID_MSG_FORMAT,
            "the body must be a JSON object (a ChargingDataRequest)",
        ));
    }
    // The body must be one JSON value as a whole before its attributes
    // are looked at: `{..} trailing` is malformed, not a request that
    // lacks attributes.
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        return Err(Problem::bad_request(
            cause::INVALID_MSG_FORMAT,
            format!("the body is not valid JSON: {e}"),
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    let request: ChargingDataRequest = match serde_path_to_error::deserialize(&mut *de) {
        Ok(r) => r,
        Err(e) => {
            let (full, bare) = pointers(e.path());
            let inner = e.into_inner();
            let message = inner.to_string();
            if !inner.is_data() {
                return Err(Problem::bad_request(
                    cause::INVALID_MSG_FORMAT,
                    format!("the body is not valid JSON: {message}"),
                ));
            }
            if let Some(field) = missing_field(&message) {
                return Err(Problem::bad_request(
                    cause::MANDATORY_IE_MISSING,
                    format!(
                        "{field} is required in {}",
                        if full.is_empty() {
                            "ChargingDataRequest"
                        } else {
                            &full
                        }
                    ),
                )
                .param(format!("{full}/{field}"), "missing"));
            }
            if full.is_empty() {
                return Err(Problem::bad_request(
                    cause::INVALID_MSG_FORMAT,
                    format!("the body must be a ChargingDataRequest object: {message}"),
                ));
            }
            let kind = if REQUIRED.contains(&bare.as_str()) {
                cause::MANDATORY_IE_INCORRECT
            } else {
                cause::OPTIONAL_IE_INCORRECT
            };
            return Err(
                Problem::bad_request(kind, format!("{full}: {message}")).param(full, message)
            );
        }
    };
    if let Err(e) = de.end() {
        return Err(Problem::bad_request(
            cause::INVALID_MSG_FORMAT,
            format!("the body is not valid JSON: {e}"),
        ));
    }
    check(&request)?;
    Ok(request)
}

/// What the types alone do not check: the time stamp is an RFC 3339
/// date-time, a rating group is reported once, and not too many.
fn check(r: &ChargingDataRequest) -> Result<(), Problem> {
    if crate::time::parse_rfc3339(&r.invocation_time_stamp).is_none() {
        return Err(Problem::bad_request(
            cause::MANDATORY_IE_INCORRECT,
            "invocationTimeStamp is not an RFC 3339 date-time",
        )
        .param("/invocationTimeStamp", "not an RFC 3339 date-time"));
    }
    if r.multiple_unit_usage.len() > MAX_UNIT_USAGE {
        return Err(Problem::bad_request(
            cause::OPTIONAL_IE_INCORRECT,
            format!("more than {MAX_UNIT_USAGE} multipleUnitUsage entries"),
        )
        .param("/multipleUnitUsage", "too many entries"));
    }
    for (i, u) in r.multiple_unit_usage.iter().enumerate() {
        if r.multiple_unit_usage[..i]
            .iter()
            .any(|o| o.rating_group == u.rating_group)
        {
            return Err(Problem::bad_request(
                cause::MANDATORY_IE_INCORRECT,
                format!(
                    "rating group {} appears twice in multipleUnitUsage",
                    u.rating_group
                ),
            )
            .param(
                format!("/multipleUnitUsage/{i}/ratingGroup"),
                "rating group repeated",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"nfConsumerIdentification":{"nodeFunctionality":"SMF"},
        "invocationTimeStamp":"2025-01-01T00:00:00Z","invocationSequenceNumber":0}"#;

    #[test]
    fn a_minimal_request_is_read_and_unknown_attributes_are_ignored() {
        let body = OK.replace("\"SMF\"}", "\"SMF\",\"vendorThing\":[1,2]}");
        let r = decode_request(body.as_bytes()).unwrap();
        assert_eq!(r.nf_consumer_identification.node_functionality, "SMF");
        assert_eq!(r.invocation_sequence_number, 0);
    }

    #[test]
    fn malformed_json_is_invalid_msg_format() {
        let trailing = format!("{OK} {{}}");
        for body in [
            "{",
            "",
            "nonsense",
            "[1,2]",
            "42",
            "{\"a\":}",
            &trailing,
            // Valid JSON up to a point, then more: the body as a whole is
            // malformed, whatever attributes its first object lacks.
            "{\"a\":1} trailing",
            "{\"a\":1}]",
            "{\"a\":1}{\"b\":2}",
        ] {
            let p = decode_request(body.as_bytes()).unwrap_err();
            assert_eq!(p.status, 400, "{body}");
            assert_eq!(p.cause(), Some(cause::INVALID_MSG_FORMAT), "{body}");
        }
    }

    #[test]
    fn a_missing_required_attribute_is_named() {
        let body = OK.replace(",\"invocationSequenceNumber\":0", "");
        let p = decode_request(body.as_bytes()).unwrap_err();
        assert_eq!(p.cause(), Some(cause::MANDATORY_IE_MISSING));
        assert_eq!(
            p.details.invalid_params[0].param,
            "/invocationSequenceNumber"
        );
        let body = OK.replace(
            "\"invocationSequenceNumber\":0",
            "\"invocationSequenceNumber\":0,\"multipleUnitUsage\":[{\"requestedUnit\":{}}]",
        );
        let p = decode_request(body.as_bytes()).unwrap_err();
        assert_eq!(p.cause(), Some(cause::MANDATORY_IE_MISSING));
        assert_eq!(
            p.details.invalid_params[0].param,
            "/multipleUnitUsage/0/ratingGroup"
        );
    }

    #[test]
    fn wrong_types_are_mandatory_or_optional_ie_incorrect() {
        let body = OK.replace(
            "\"invocationSequenceNumber\":0",
            "\"invocationSequenceNumber\":\"zero\"",
        );
        let p = decode_request(body.as_bytes()).unwrap_err();
        assert_eq!(p.cause(), Some(cause::MANDATORY_IE_INCORRECT));
        assert_eq!(
            p.details.invalid_params[0].param,
            "/invocationSequenceNumber"
        );
        let body = OK.replace(
            "\"invocationSequenceNumber\":0",
            "\"invocationSequenceNumber\":4294967296",
        );
        assert_eq!(
            decode_request(body.as_bytes()).unwrap_err().cause(),
            Some(cause::MANDATORY_IE_INCORRECT)
        );
        let body = OK.replace(
            "\"invocationSequenceNumber\":0",
            "\"invocationSequenceNumber\":0,\"multipleUnitUsage\":[{\"ratingGroup\":10,\"requestedUnit\":{\"totalVolume\":-1}}]",
        );
        let p = decode_request(body.as_bytes()).unwrap_err();
        assert_eq!(p.cause(), Some(cause::OPTIONAL_IE_INCORRECT));
        assert_eq!(
            p.details.invalid_params[0].param,
            "/multipleUnitUsage/0/requestedUnit/totalVolume"
        );
    }

    #[test]
    fn a_bad_time_stamp_or_a_repeated_rating_group_is_refused() {
        let body = OK.replace("2025-01-01T00:00:00Z", "yesterday");
        assert_eq!(
            decode_request(body.as_bytes()).unwrap_err().cause(),
            Some(cause::MANDATORY_IE_INCORRECT)
        );
        let body = OK.replace(
            "\"invocationSequenceNumber\":0",
            "\"invocationSequenceNumber\":0,\"multipleUnitUsage\":[{\"ratingGroup\":10},{\"ratingGroup\":10}]",
        );
        let p = decode_request(body.as_bytes()).unwrap_err();
        assert_eq!(
            p.details.invalid_params[0].param,
            "/multipleUnitUsage/1/ratingGroup"
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = decode_request(&body);
        }
    }
}
