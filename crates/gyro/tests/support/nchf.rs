//! Helpers of the Nchf tests: a `gyro serve` with an Nchf listener, the
//! requests an SMF sends, raw HTTP/2 frames for the abuse tests, and JSON
//! schema checks of every body against the TS 32.291 data model.
//!
//! The schemas below are transcribed from the data model of TS 32.291
//! (Nchf_ConvergedCharging API v3, `TS32291_Nchf_ConvergedCharging.yaml`)
//! and TS 29.571 (common data types), keeping every attribute gyro sends
//! or reads with its type, range and requiredness:
//!
//! * ChargingDataRequest: clause 6.1.6.2.1.1 (required:
//!   nfConsumerIdentification, invocationTimeStamp,
//!   invocationSequenceNumber);
//! * ChargingDataResponse: clause 6.1.6.2.1.2 (required:
//!   invocationTimeStamp, invocationSequenceNumber);
//! * NFIdentification 6.1.6.2.1.5 (required nodeFunctionality),
//!   MultipleUnitUsage 6.1.6.2.1.6 (required ratingGroup), InvocationResult
//!   6.1.6.2.1.7, Trigger 6.1.6.2.1.8 (required triggerCategory),
//!   MultipleUnitInformation 6.1.6.2.1.9 (required ratingGroup),
//!   RequestedUnit 6.1.6.2.1.10, UsedUnitContainer 6.1.6.2.1.11 (required
//!   localSequenceNumber), GrantedUnit 6.1.6.2.1.12, FinalUnitIndication
//!   6.1.6.2.1.13 (required finalUnitAction), RedirectServer 6.1.6.2.1.14
//!   (both attributes required);
//! * enumerations (clause 6.1.6.3): ResultCode, FinalUnitAction,
//!   RedirectAddressType, SessionFailover, TriggerCategory, FailureHandling.
//!   The specification makes each `anyOf(enum, string)` for extensibility;
//!   the checks here take the enumerated values only, so gyro is held to
//!   sending values the specification defines;
//! * what gyro sends is held to the attributes the specification defines:
//!   the schemas of the answer side (ChargingDataResponse and what it
//!   holds, ProblemDetails) are closed (`additionalProperties: false`), so
//!   an attribute the data model does not have, or a misspelt one, fails.
//!   The specification leaves them open for extensibility; requests stay
//!   open here too;
//! * TS 29.571: Uint32 (integer 0..=4294967295), Uint64 (integer >= 0),
//!   DateTime (RFC 3339), DurationSec (integer), RatingGroup (Uint32),
//!   ProblemDetails (clause 5.2.4.1) and InvalidParam (5.2.4.2, required
//!   param).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::free_port;
use serde_json::{json, Value};

// ---------------------------------------------------------------------
// Schemas and a validator for the subset of JSON Schema they use.

/// The schemas, by name (OpenAPI `components/schemas`).
pub fn schemas() -> Value {
    let uint32 = json!({"type": "integer", "minimum": 0, "maximum": 4294967295u64});
    let uint64 = json!({"type": "integer", "minimum": 0});
    let date_time = json!({"type": "string", "format": "date-time"});
    let duration = json!({"type": "integer"});
    let trigger_list = json!({"type": "array", "items": {"$ref": "Trigger"}});
    json!({
        "ChargingDataRequest": {
            "type": "object",
            "required": ["nfConsumerIdentification", "invocationTimeStamp", "invocationSequenceNumber"],
            "properties": {
                "subscriberIdentifier": {"type": "string"},
                "nfConsumerIdentification": {"$ref": "NFIdentification"},
                "invocationTimeStamp": date_time,
                "invocationSequenceNumber": uint32,
                "retransmissionIndicator": {"type": "boolean"},
                "oneTimeEvent": {"type": "boolean"},
                "notifyUri": {"type": "string"},
                "multipleUnitUsage": {"type": "array", "items": {"$ref": "MultipleUnitUsage"}},
                "triggers": trigger_list,
                "pDUSessionChargingInformation": {"$ref": "PDUSessionChargingInformation"}
            }
        },
        "ChargingDataResponse": {
            "type": "object",
            "additionalProperties": false,
            "required": ["invocationTimeStamp", "invocationSequenceNumber"],
            "properties": {
                "invocationTimeStamp": date_time,
                "invocationSequenceNumber": uint32,
                "invocationResult": {"$ref": "InvocationResult"},
                "sessionFailover": {"type": "string", "enum": ["FAILOVER_NOT_SUPPORTED", "FAILOVER_SUPPORTED"]},
                "multipleUnitInformation": {"type": "array", "items": {"$ref": "MultipleUnitInformation"}},
                "triggers": trigger_list
            }
        },
        "NFIdentification": {
            "type": "object",
            "required": ["nodeFunctionality"],
            "properties": {
                "nFName": {"type": "string"},
                "nFIPv4Address": {"type": "string"},
                "nFIPv6Address": {"type": "string"},
                "nodeFunctionality": {"type": "string"},
                "nFFqdn": {"type": "string"}
            }
        },
        "MultipleUnitUsage": {
            "type": "object",
            "required": ["ratingGroup"],
            "properties": {
                "ratingGroup": uint32,
                "requestedUnit": {"$ref": "RequestedUnit"},
                "usedUnitContainer": {"type": "array", "items": {"$ref": "UsedUnitContainer"}},
                "uPFID": {"type": "string"}
            }
        },
        "RequestedUnit": {
            "type": "object",
            "properties": {
                "time": uint32, "totalVolume": uint64, "uplinkVolume": uint64,
                "downlinkVolume": uint64, "serviceSpecificUnits": uint64
            }
        },
        "UsedUnitContainer": {
            "type": "object",
            "required": ["localSequenceNumber"],
            "properties": {
                "serviceId": uint32,
                "quotaManagementIndicator": {"type": "string"},
                "triggers": trigger_list,
                "triggerTimestamp": date_time,
                "time": uint32, "totalVolume": uint64, "uplinkVolume": uint64,
                "downlinkVolume": uint64, "serviceSpecificUnits": uint64,
                "localSequenceNumber": {"type": "integer"}
            }
        },
        "Trigger": {
            "type": "object",
            "required": ["triggerCategory"],
            "properties": {
                "triggerType": {"type": "string"},
                "triggerCategory": {"type": "string", "enum": ["IMMEDIATE_REPORT", "DEFERRED_REPORT"]},
                "timeLimit": duration, "volumeLimit": uint32, "volumeLimit64": uint64,
                "eventLimit": uint32, "maxNumberOfccc": uint32, "tariffTimeChange": date_time
            }
        },
        "InvocationResult": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "error": {"$ref": "ProblemDetails"},
                "failureHandling": {"type": "string", "enum": ["TERMINATE", "CONTINUE", "RETRY_AND_TERMINATE"]}
            }
        },
        "MultipleUnitInformation": {
            "type": "object",
            "additionalProperties": false,
            "required": ["ratingGroup"],
            "properties": {
                "resultCode": {"type": "string", "enum": [
                    "SUCCESS", "END_USER_SERVICE_DENIED", "QUOTA_MANAGEMENT_NOT_APPLICABLE",
                    "QUOTA_LIMIT_REACHED", "END_USER_SERVICE_REJECTED", "USER_UNKNOWN",
                    "RATING_FAILED", "QUOTA_MANAGEMENT"]},
                "ratingGroup": uint32,
                "grantedUnit": {"$ref": "GrantedUnit"},
                "triggers": trigger_list,
                "validityTime": duration,
                "quotaHoldingTime": duration,
                "finalUnitIndication": {"$ref": "FinalUnitIndication"},
                "timeQuotaThreshold": {"type": "integer"},
                "volumeQuotaThreshold": uint64,
                "unitQuotaThreshold": {"type": "integer"}
            }
        },
        "GrantedUnit": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "tariffTimeChange": date_time,
                "time": uint32, "totalVolume": uint64, "uplinkVolume": uint64,
                "downlinkVolume": uint64, "serviceSpecificUnits": uint64
            }
        },
        "FinalUnitIndication": {
            "type": "object",
            "additionalProperties": false,
            "required": ["finalUnitAction"],
            "properties": {
                "finalUnitAction": {"type": "string", "enum": ["TERMINATE", "REDIRECT", "RESTRICT_ACCESS"]},
                "restrictionFilterRule": {"type": "string"},
                "restrictionFilterRuleList": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "filterId": {"type": "string"},
                "filterIdList": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "redirectServer": {"$ref": "RedirectServer"}
            }
        },
        "RedirectServer": {
            "type": "object",
            "additionalProperties": false,
            "required": ["redirectAddressType", "redirectServerAddress"],
            "properties": {
                "redirectAddressType": {"type": "string", "enum": ["IPV4", "IPV6", "URL", "URI"]},
                "redirectServerAddress": {"type": "string"}
            }
        },
        "PDUSessionChargingInformation": {
            "type": "object",
            "properties": {
                "chargingId": uint32,
                "userInformation": {"type": "object", "properties": {"servedGPSI": {"type": "string"}}},
                "pduSessionInformation": {
                    "type": "object",
                    "required": ["pduSessionID", "dnnId"],
                    "properties": {
                        "pduSessionID": {"type": "integer", "minimum": 0, "maximum": 255},
                        "dnnId": {"type": "string"}
                    }
                }
            }
        },
        "ProblemDetails": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "instance": {"type": "string"},
                "cause": {"type": "string"},
                "invalidParams": {"type": "array", "minItems": 1, "items": {"$ref": "InvalidParam"}}
            }
        },
        "InvalidParam": {
            "type": "object",
            "additionalProperties": false,
            "required": ["param"],
            "properties": {"param": {"type": "string"}, "reason": {"type": "string"}}
        }
    })
}

/// What in `value` breaks the schema named `name`, as JSON pointers with
/// what is wrong there (empty: it follows the schema).
pub fn violations(name: &str, value: &Value) -> Vec<String> {
    let all = schemas();
    assert!(all.get(name).is_some(), "no schema {name}");
    let mut errors = Vec::new();
    check(&all, &all[name], value, "", &mut errors);
    errors
}

/// Checks `value` against the schema named `name`; panics with every
/// violation, as JSON pointers.
pub fn validate(name: &str, value: &Value) {
    let errors = violations(name, value);
    assert!(
        errors.is_empty(),
        "{name} does not follow TS 32.291: {errors:?}\n{value:#}"
    );
}

fn check(all: &Value, schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return check(all, &all[r], v, at, errors);
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    let ok = match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        _ => true,
    };
    if !ok {
        errors.push(format!("{at}: not {ty}: {v}"));
        return;
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_i64) {
        if v.as_i64().is_some_and(|n| n < min) {
            errors.push(format!("{at}: below {min}"));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_u64) {
        if v.as_u64().is_some_and(|n| n > max) {
            errors.push(format!("{at}: above {max}"));
        }
    }
    if let Some(list) = schema.get("enum").and_then(Value::as_array) {
        if !list.contains(v) {
            errors.push(format!("{at}: {v} is not one of {list:?}"));
        }
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && gyro_nchf::time::parse_rfc3339(v.as_str().unwrap_or("")).is_none()
    {
        errors.push(format!("{at}: {v} is not an RFC 3339 date-time"));
    }
    if let Some(o) = v.as_object() {
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !o.contains_key(r) {
                errors.push(format!("{at}/{r}: required"));
            }
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                if let Some(x) = o.get(k) {
                    check(all, sub, x, &format!("{at}/{k}"), errors);
                }
            }
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                for k in o.keys().filter(|k| !props.contains_key(*k)) {
                    errors.push(format!("{at}/{k}: not an attribute of the data model"));
                }
            }
        }
    }
    if let Some(a) = v.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (a.len() as u64) < min {
                errors.push(format!("{at}: fewer than {min} items"));
            }
        }
        if let Some(items) = schema.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(all, items, x, &format!("{at}/{i}"), errors);
            }
        }
    }
}

// ---------------------------------------------------------------------
// A server with an Nchf listener.

/// A running `gyro serve` with Diameter, the admin API and Nchf.
pub struct Server {
    pub child: Child,
    pub diameter: SocketAddr,
    pub admin: String,
    pub nchf: SocketAddr,
    pub data: PathBuf,
}

fn wait_for(addr: SocketAddr, what: &str) {
    let t = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Server {
    /// Starts one with two workers in `dir`, `extra` lines appended to
    /// its configuration file (after its `[nchf]` keys) and the charging
    /// file `charging`, if any.
    pub fn start(dir: &Path, nchf_extra: &str, charging: Option<&Path>) -> Server {
        let (d, a, n) = (free_port(), free_port(), free_port());
        let config = dir.join("gyro.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nworkers = 2\nlisten = [\"127.0.0.1:{d}\"]\ndata_dir = \"{}\"\n{}\
                 [admin]\nlisten = \"127.0.0.1:{a}\"\n[nchf]\nlisten = \"127.0.0.1:{n}\"\n{nchf_extra}\n",
                dir.join("data").display(),
                charging
                    .map(|c| format!("charging = \"{}\"\n", c.display()))
                    .unwrap_or_default(),
            ),
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gyro"))
            .args(["serve", "--config"])
            .arg(&config)
            .env("GYRO_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("start gyro serve");
        let (diameter, nchf) = (
            SocketAddr::from(([127, 0, 0, 1], d)),
            SocketAddr::from(([127, 0, 0, 1], n)),
        );
        wait_for(diameter, "gyro serve");
        wait_for(nchf, "the Nchf listener");
        let server = Server {
            child,
            diameter,
            admin: format!("http://127.0.0.1:{a}"),
            nchf,
            data: dir.join("data"),
        };
        // Listening comes before the shards have recovered: the admin
        // API answers 503 until they have.
        let ready = format!("{}/readyz", server.admin);
        let t = std::time::Instant::now();
        while !ureq::get(&ready).call().is_ok_and(|r| r.status() == 200) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "gyro serve not ready"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Stops it with SIGTERM and waits.
    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let t = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// An admin API call: (status, JSON body).
    pub fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let url = format!("{}{path}", self.admin);
        let mut r = match method {
            "GET" => agent.get(&url).call(),
            "DELETE" => agent.delete(&url).call(),
            "PATCH" => agent.patch(&url).send_json(body.unwrap_or(Value::Null)),
            _ => agent.post(&url).send_json(body.unwrap_or(Value::Null)),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `/metrics` as text (the classic Prometheus format).
    pub fn metrics(&self) -> String {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        agent
            .get(&format!("{}/metrics", self.admin))
            .call()
            .expect("GET /metrics")
            .body_mut()
            .read_to_string()
            .expect("the metrics text")
    }

    /// Creates an account for `msisdn` with `balance` minor units.
    pub fn account_with(&self, msisdn: &str, balance: i64) {
        let (s, b) = self.admin(
            "POST",
            "/v1/accounts",
            Some(json!({"msisdn": msisdn, "balance": balance})),
        );
        assert_eq!(s, 201, "{b}");
    }

    /// The account of `msisdn`, as the admin API shows it.
    pub fn account(&self, msisdn: &str) -> Value {
        let (s, b) = self.admin("GET", &format!("/v1/accounts/{msisdn}"), None);
        assert_eq!(s, 200, "{b}");
        b
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------
// What an SMF sends.

/// A ChargingDataRequest as JSON: an SMF's, for `msisdn` (as the GPSI
/// beside an IMSI nobody knows, so the GPSI finds the account), numbered
/// `seq`, with per rating group (rating group, octets used, whether more
/// quota is requested).
pub fn smf_request(msisdn: &str, seq: u32, units: &[(u32, u64, bool)]) -> Value {
    let usage: Vec<Value> = units
        .iter()
        .map(|&(rg, used, more)| {
            let mut u = json!({"ratingGroup": rg});
            if more {
                u["requestedUnit"] = json!({});
            }
            if used > 0 {
                u["usedUnitContainer"] = json!([{
                    "localSequenceNumber": seq,
                    "uplinkVolume": used / 4,
                    "downlinkVolume": used - used / 4,
                    "totalVolume": used,
                    "triggers": [{"triggerType": "QUOTA_EXHAUSTED", "triggerCategory": "IMMEDIATE_REPORT"}],
                    "triggerTimestamp": "2025-06-01T12:00:00Z"
                }]);
            }
            u
        })
        .collect();
    let body = json!({
        "subscriberIdentifier": "imsi-999990000000001",
        "nfConsumerIdentification": {
            "nodeFunctionality": "SMF",
            "nFName": "5e1a3c02-0000-4000-8000-000000000001",
            "nFIPv4Address": "127.0.0.1"
        },
        "invocationTimeStamp": "2025-06-01T12:00:00.000Z",
        "invocationSequenceNumber": seq,
        "notifyUri": "http://127.0.0.1:9/notify",
        "multipleUnitUsage": usage,
        "triggers": [],
        "pDUSessionChargingInformation": {
            "chargingId": 7,
            "userInformation": {"servedGPSI": format!("msisdn-{msisdn}")},
            "pduSessionInformation": {"pduSessionID": 5, "dnnId": "internet", "ratType": "NR"}
        }
    });
    validate("ChargingDataRequest", &body);
    body
}

/// Octets a usage report sums to, rounded up to the demo tariffs' 1 kB
/// increment.
pub fn kb(octets: u64) -> u64 {
    octets.div_ceil(1024) * 1024
}

// ---------------------------------------------------------------------
// Raw HTTP/2 (RFC 9113) for the abuse tests.

/// The client connection preface and an empty SETTINGS frame.
pub fn preface() -> Vec<u8> {
    let mut v = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    v.extend(frame(0x4, 0, 0, &[]));
    v
}

/// One frame: type, flags, stream, payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut v = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    v.extend((stream & 0x7fff_ffff).to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    // Not Huffman-coded; a 7-bit prefix integer.
    if s.len() < 127 {
        out.push(s.len() as u8);
    } else {
        out.push(127);
        let mut n = s.len() - 127;
        while n >= 128 {
            out.push((n % 128 + 128) as u8);
            n /= 128;
        }
        out.push(n as u8);
    }
    out.extend_from_slice(s);
}

/// A HEADERS block (HPACK, literals without indexing) of a POST to
/// `path` with application/json and the `extra` headers.
pub fn post_headers(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    b.push(0x04); // :path, literal without indexing, name index 4
    hpack_string(&mut b, path.as_bytes());
    b.push(0x01); // :authority, name index 1
    hpack_string(&mut b, b"gyro.test");
    b.push(0x0f);
    b.push(0x10); // content-type, name index 31 (15 + 16)
    hpack_string(&mut b, b"application/json");
    for (k, v) in extra {
        b.push(0x00);
        hpack_string(&mut b, k.as_bytes());
        hpack_string(&mut b, v.as_bytes());
    }
    b
}

/// What a raw connection read back: frames as (type, flags, stream,
/// payload), until the server closed it or `wait` passed without a byte.
/// A frame read back: type, flags, stream, payload.
pub type Frame = (u8, u8, u32, Vec<u8>);

pub fn read_frames(s: &mut TcpStream, wait: Duration) -> (Vec<Frame>, bool) {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = Vec::new();
    let mut closed = false;
    let mut chunk = [0u8; 65536];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= buf.len() {
        let n = ((buf[at] as usize) << 16) | ((buf[at + 1] as usize) << 8) | buf[at + 2] as usize;
        if at + 9 + n > buf.len() {
            break;
        }
        let stream =
            u32::from_be_bytes([buf[at + 5], buf[at + 6], buf[at + 7], buf[at + 8]]) & 0x7fff_ffff;
        frames.push((
            buf[at + 3],
            buf[at + 4],
            stream,
            buf[at + 9..at + 9 + n].to_vec(),
        ));
        at += 9 + n;
    }
    (frames, closed)
}

/// Writes all of `bytes`, tolerating a server that already closed.
pub fn send(s: &mut TcpStream, bytes: &[u8]) -> bool {
    s.write_all(bytes).is_ok()
}
