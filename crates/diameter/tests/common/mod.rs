//! Messages and helpers shared by the codec's integration tests and
//! benchmarks: realistic Gy messages built with the encoder, and a recursive
//! walk that decodes every AVP with its typed accessor.
#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd, AvpId, VENDOR_3GPP};
use gyro_diameter::error::Error;
use gyro_diameter::types::{Address, AvpType, DiameterTime};
use gyro_diameter::{Avp, Encoder, Message};

/// Origin-Host of the client in the sample messages.
pub const CLIENT_HOST: &str = "pgw1.epc.mnc001.mcc242.3gppnetwork.org";
/// Origin-Realm of the client.
pub const CLIENT_REALM: &str = "epc.mnc001.mcc242.3gppnetwork.org";
/// Origin-Host of the server.
pub const SERVER_HOST: &str = "ocs1.example.net";
/// Origin-Realm of the server.
pub const SERVER_REALM: &str = "example.net";
/// Session-Id of the sample CC session.
pub const SESSION_ID: &str = "pgw1.epc.mnc001.mcc242.3gppnetwork.org;1700000000;42;gy";

/// Event-Timestamp of the samples (2023-11-14 22:13:20 UTC).
pub fn event_time() -> DiameterTime {
    DiameterTime::from_unix(1_700_000_000).unwrap()
}

/// The format of every AVP the sample messages carry, for walking them
/// without a dictionary.
pub const TYPES: &[(u32, u32, AvpType)] = &[
    (1, 0, AvpType::UTF8String),             // User-Name
    (30, 0, AvpType::UTF8String),            // Called-Station-Id
    (55, 0, AvpType::Time),                  // Event-Timestamp
    (257, 0, AvpType::Address),              // Host-IP-Address
    (258, 0, AvpType::Unsigned32),           // Auth-Application-Id
    (263, 0, AvpType::UTF8String),           // Session-Id
    (264, 0, AvpType::DiameterIdentity),     // Origin-Host
    (265, 0, AvpType::Unsigned32),           // Supported-Vendor-Id
    (266, 0, AvpType::Unsigned32),           // Vendor-Id
    (267, 0, AvpType::Unsigned32),           // Firmware-Revision
    (268, 0, AvpType::Unsigned32),           // Result-Code
    (269, 0, AvpType::UTF8String),           // Product-Name
    (278, 0, AvpType::Unsigned32),           // Origin-State-Id
    (283, 0, AvpType::DiameterIdentity),     // Destination-Realm
    (292, 0, AvpType::DiameterURI),          // Redirect-Host
    (293, 0, AvpType::DiameterIdentity),     // Destination-Host
    (296, 0, AvpType::DiameterIdentity),     // Origin-Realm
    (412, 0, AvpType::Unsigned64),           // CC-Input-Octets
    (414, 0, AvpType::Unsigned64),           // CC-Output-Octets
    (415, 0, AvpType::Unsigned32),           // CC-Request-Number
    (416, 0, AvpType::Enumerated),           // CC-Request-Type
    (420, 0, AvpType::Unsigned32),           // CC-Time
    (421, 0, AvpType::Unsigned64),           // CC-Total-Octets
    (431, 0, AvpType::Grouped),              // Granted-Service-Unit
    (432, 0, AvpType::Unsigned32),           // Rating-Group
    (437, 0, AvpType::Grouped),              // Requested-Service-Unit
    (439, 0, AvpType::Unsigned32),           // Service-Identifier
    (443, 0, AvpType::Grouped),              // Subscription-Id
    (444, 0, AvpType::UTF8String),           // Subscription-Id-Data
    (446, 0, AvpType::Grouped),              // Used-Service-Unit
    (448, 0, AvpType::Unsigned32),           // Validity-Time
    (450, 0, AvpType::Enumerated),           // Subscription-Id-Type
    (455, 0, AvpType::Enumerated),           // Multiple-Services-Indicator
    (456, 0, AvpType::Grouped),              // Multiple-Services-Credit-Control
    (458, 0, AvpType::Grouped),              // User-Equipment-Info
    (459, 0, AvpType::Enumerated),           // User-Equipment-Info-Type
    (460, 0, AvpType::OctetString),          // User-Equipment-Info-Value
    (461, 0, AvpType::UTF8String),           // Service-Context-Id
    (2, VENDOR_3GPP, AvpType::Unsigned32),   // 3GPP-Charging-Id
    (3, VENDOR_3GPP, AvpType::Enumerated),   // 3GPP-PDP-Type
    (8, VENDOR_3GPP, AvpType::UTF8String),   // 3GPP-IMSI-MCC-MNC
    (9, VENDOR_3GPP, AvpType::UTF8String),   // 3GPP-GGSN-MCC-MNC
    (10, VENDOR_3GPP, AvpType::OctetString), // 3GPP-NSAPI
    (12, VENDOR_3GPP, AvpType::UTF8String),  // 3GPP-Selection-Mode
    (13, VENDOR_3GPP, AvpType::UTF8String),  // 3GPP-Charging-Characteristics
    (18, VENDOR_3GPP, AvpType::UTF8String),  // 3GPP-SGSN-MCC-MNC
    (21, VENDOR_3GPP, AvpType::OctetString), // 3GPP-RAT-Type
    (22, VENDOR_3GPP, AvpType::OctetString), // 3GPP-User-Location-Info
    (23, VENDOR_3GPP, AvpType::OctetString), // 3GPP-MS-TimeZone
    (847, VENDOR_3GPP, AvpType::Address),    // GGSN-Address
    (869, VENDOR_3GPP, AvpType::Unsigned32), // Volume-Quota-Threshold
    (871, VENDOR_3GPP, AvpType::Unsigned32), // Quota-Holding-Time
    (872, VENDOR_3GPP, AvpType::Enumerated), // Reporting-Reason
    (873, VENDOR_3GPP, AvpType::Grouped),    // Service-Information
    (874, VENDOR_3GPP, AvpType::Grouped),    // PS-Information
    (1227, VENDOR_3GPP, AvpType::Address),   // PDP-Address
    (1228, VENDOR_3GPP, AvpType::Address),   // SGSN-Address
];

/// The format of an AVP from the built-in dictionary.
pub fn dict_type(code: u32, vendor: u32) -> Option<AvpType> {
    gyro_diameter::Dictionary::builtin()
        .avp(code, vendor)
        .map(|d| d.ty)
}

/// The format of an AVP from [`TYPES`].
pub fn local_type(code: u32, vendor: u32) -> Option<AvpType> {
    TYPES
        .iter()
        .find(|(c, v, _)| *c == code && *v == vendor)
        .map(|(_, _, t)| *t)
}

/// Writes the identity AVPs of a CC request.
fn cc_request_head(e: &mut Encoder<'_>, request_type: i32, number: u32) {
    e.str(avp::SESSION_ID, SESSION_ID)
        .str(avp::ORIGIN_HOST, CLIENT_HOST)
        .str(avp::ORIGIN_REALM, CLIENT_REALM)
        .str(avp::DESTINATION_REALM, SERVER_REALM)
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
        .i32(avp::CC_REQUEST_TYPE, request_type)
        .u32(avp::CC_REQUEST_NUMBER, number)
        .str(avp::DESTINATION_HOST, SERVER_HOST)
        .u32(avp::ORIGIN_STATE_ID, 1_699_999_000)
        .time(avp::EVENT_TIMESTAMP, event_time());
    let g = e.begin_group(avp::SUBSCRIPTION_ID);
    e.i32(avp::SUBSCRIPTION_ID_TYPE, 0) // END_USER_E164
        .str(avp::SUBSCRIPTION_ID_DATA, "4790000001");
    e.end_group(g);
    let g = e.begin_group(avp::SUBSCRIPTION_ID);
    e.i32(avp::SUBSCRIPTION_ID_TYPE, 1) // END_USER_IMSI
        .str(avp::SUBSCRIPTION_ID_DATA, "242010000000001");
    e.end_group(g);
    e.i32(avp::MULTIPLE_SERVICES_INDICATOR, 1);
    let g = e.begin_group(avp::USER_EQUIPMENT_INFO);
    e.i32(avp::USER_EQUIPMENT_INFO_TYPE, 0) // IMEISV
        .octets(avp::USER_EQUIPMENT_INFO_VALUE, b"3534560123456701");
    e.end_group(g);
}

/// Writes the 3GPP Service-Information / PS-Information of a Gy request.
fn service_information(e: &mut Encoder<'_>) {
    let si = e.begin_group(avp::SERVICE_INFORMATION);
    let ps = e.begin_group(avp::PS_INFORMATION);
    e.u32(avp::TGPP_CHARGING_ID, 0x0a0b_0c0d)
        .i32(avp::TGPP_PDP_TYPE, 0)
        .address(
            avp::PDP_ADDRESS,
            &Address::Ipv4(Ipv4Addr::new(100, 64, 12, 34)),
        )
        .address(
            avp::SGSN_ADDRESS,
            &Address::Ipv4(Ipv4Addr::new(192, 0, 2, 10)),
        )
        .address(
            avp::GGSN_ADDRESS,
            &Address::Ipv6("2001:db8::7".parse::<Ipv6Addr>().unwrap()),
        )
        .str(avp::TGPP_IMSI_MCC_MNC, "24201")
        .str(avp::TGPP_GGSN_MCC_MNC, "24201")
        .octets(avp::TGPP_NSAPI, b"5")
        .str(AvpId::m(30, 0), "internet.example")
        .str(avp::TGPP_SELECTION_MODE, "0")
        .str(avp::TGPP_CHARGING_CHARACTERISTICS, "0800")
        .str(avp::TGPP_SGSN_MCC_MNC, "24201")
        .octets(avp::TGPP_MS_TIMEZONE, &[0x40, 0x00])
        .octets(
            avp::TGPP_USER_LOCATION_INFO,
            &[
                0x82, 0x42, 0xf2, 0x10, 0x00, 0x01, 0x42, 0xf2, 0x10, 0x00, 0x00, 0x10, 0x01,
            ],
        )
        .octets(avp::TGPP_RAT_TYPE, &[0x06]);
    e.end_group(ps);
    e.end_group(si);
}

/// Writes a Multiple-Services-Credit-Control of a request: an empty RSU and,
/// when `used` is given, a USU with time, volume and a Reporting-Reason.
fn mscc_request(e: &mut Encoder<'_>, rating_group: u32, used: Option<(u32, u64, u64)>) {
    let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
    let rsu = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
    e.end_group(rsu);
    if let Some((time, input, output)) = used {
        let usu = e.begin_group(avp::USED_SERVICE_UNIT);
        e.u32(avp::CC_TIME, time)
            .u64(avp::CC_TOTAL_OCTETS, input + output)
            .u64(avp::CC_INPUT_OCTETS, input)
            .u64(avp::CC_OUTPUT_OCTETS, output)
            .i32(avp::REPORTING_REASON, 3); // QUOTA_EXHAUSTED
        e.end_group(usu);
    }
    e.u32(avp::RATING_GROUP, rating_group)
        .u32(avp::SERVICE_IDENTIFIER, rating_group * 100);
    e.end_group(m);
}

/// A CCR-Initial of a Gy data session (two rating groups requested).
pub fn ccr_initial(buf: &mut BytesMut) -> usize {
    let mut e = Encoder::request(
        buf,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        0x1000,
        0x2000,
    );
    cc_request_head(&mut e, 1, 0);
    mscc_request(&mut e, 10, None);
    mscc_request(&mut e, 20, None);
    service_information(&mut e);
    e.finish().unwrap()
}

/// A CCR-Update of a Gy data session: two MSCCs, each with an RSU and a
/// USU reporting time and volume, two Subscription-Ids and 3GPP
/// PS-Information.
pub fn ccr_update(buf: &mut BytesMut) -> usize {
    let mut e = Encoder::request(
        buf,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        0x1001,
        0x2001,
    );
    cc_request_head(&mut e, 2, 1);
    mscc_request(&mut e, 10, Some((600, 1_048_576, 52_428_800)));
    mscc_request(&mut e, 20, Some((300, 4096, 65_536)));
    service_information(&mut e);
    e.finish().unwrap()
}

/// The CCA answering `request`: Session-Id copied by the encoder, then
/// identity, result and one granted MSCC per rating group.
pub fn cca(buf: &mut BytesMut, request: &Message<'_>) -> usize {
    let mut e = Encoder::answer(buf, request, false);
    e.u32(avp::RESULT_CODE, 2001)
        .str(avp::ORIGIN_HOST, SERVER_HOST)
        .str(avp::ORIGIN_REALM, SERVER_REALM)
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
        .i32(avp::CC_REQUEST_TYPE, 2)
        .u32(avp::CC_REQUEST_NUMBER, 1);
    for rg in [10u32, 20] {
        let m = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        let gsu = e.begin_group(avp::GRANTED_SERVICE_UNIT);
        e.u32(avp::CC_TIME, 3600)
            .u64(avp::CC_TOTAL_OCTETS, 10_485_760);
        e.end_group(gsu);
        e.u32(avp::RATING_GROUP, rg)
            .u32(avp::VALIDITY_TIME, 3600)
            .u32(avp::RESULT_CODE, 2001)
            .u32(avp::VOLUME_QUOTA_THRESHOLD, 1_048_576)
            .u32(avp::QUOTA_HOLDING_TIME, 300);
        e.end_group(m);
    }
    e.finish().unwrap()
}

/// A CER from the sample client.
pub fn cer(buf: &mut BytesMut) -> usize {
    let mut e = Encoder::request(buf, cmd::CAPABILITIES_EXCHANGE, app::COMMON, false, 1, 1);
    e.str(avp::ORIGIN_HOST, CLIENT_HOST)
        .str(avp::ORIGIN_REALM, CLIENT_REALM)
        .address(
            avp::HOST_IP_ADDRESS,
            &Address::Ipv4(Ipv4Addr::new(192, 0, 2, 1)),
        )
        .address(
            avp::HOST_IP_ADDRESS,
            &Address::Ipv6("2001:db8::1".parse::<Ipv6Addr>().unwrap()),
        )
        .u32(avp::VENDOR_ID, 10415)
        .str(avp::PRODUCT_NAME, "gyro-test-client")
        .u32(avp::ORIGIN_STATE_ID, 7)
        .u32(avp::SUPPORTED_VENDOR_ID, VENDOR_3GPP)
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
        .u32(avp::FIRMWARE_REVISION, 1);
    e.finish().unwrap()
}

/// The message of the thesis's codec benchmark: eleven AVPs added to a
/// message, which is then encoded (here: built straight into `buf`).
pub fn thesis_ccr(buf: &mut BytesMut) -> usize {
    let mut e = Encoder::request(buf, cmd::CREDIT_CONTROL, app::CREDIT_CONTROL, true, 7, 7);
    e.str(avp::SESSION_ID, SESSION_ID) // 1
        .str(avp::ORIGIN_HOST, CLIENT_HOST) // 2
        .str(avp::ORIGIN_REALM, CLIENT_REALM) // 3
        .str(avp::DESTINATION_REALM, SERVER_REALM) // 4
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL) // 5
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org") // 6
        .i32(avp::CC_REQUEST_TYPE, 1) // 7
        .u32(avp::CC_REQUEST_NUMBER, 0); // 8
    let g = e.begin_group(avp::SUBSCRIPTION_ID); // 9
    e.i32(avp::SUBSCRIPTION_ID_TYPE, 0)
        .str(avp::SUBSCRIPTION_ID_DATA, "4790000001");
    e.end_group(g);
    let g = e.begin_group(avp::REQUESTED_SERVICE_UNIT); // 10
    e.u32(avp::CC_TIME, 60);
    e.end_group(g);
    e.time(avp::EVENT_TIMESTAMP, event_time()); // 11
    e.finish().unwrap()
}

/// What a walk over a message saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    /// AVPs visited, at every depth.
    pub avps: usize,
    /// Grouped AVPs among them.
    pub groups: usize,
    /// AVPs whose format was unknown (read as OctetString).
    pub unknown: usize,
    /// Deepest nesting seen (1 for top-level AVPs only).
    pub depth: usize,
    /// A checksum of every decoded value, so nothing is optimised away.
    pub checksum: u64,
}

fn mix(sum: u64, v: u64) -> u64 {
    (sum ^ v).wrapping_mul(0x0100_0000_01b3).rotate_left(5)
}

fn mix_bytes(sum: u64, b: &[u8]) -> u64 {
    b.iter()
        .fold(mix(sum, b.len() as u64), |s, &c| mix(s, c as u64))
}

/// Decodes one AVP with the typed accessor for `ty`, folding the value into
/// the checksum; Grouped AVPs are walked recursively.
pub fn walk_avp(
    a: &Avp<'_>,
    types: &dyn Fn(u32, u32) -> Option<AvpType>,
    depth: usize,
    w: &mut Walk,
) -> Result<(), Error> {
    w.avps += 1;
    w.depth = w.depth.max(depth);
    w.checksum = mix(w.checksum, ((a.code() as u64) << 32) | a.vendor_id() as u64);
    let ty = types(a.code(), a.vendor_id()).unwrap_or_else(|| {
        w.unknown += 1;
        AvpType::OctetString
    });
    let v = match ty {
        AvpType::OctetString => mix_bytes(0, a.octets()),
        AvpType::Integer32 => a.i32()? as u64,
        AvpType::Enumerated => a.enumerated()? as u64,
        AvpType::Integer64 => a.i64()? as u64,
        AvpType::Unsigned32 => a.u32()? as u64,
        AvpType::Unsigned64 => a.u64()?,
        AvpType::Float32 => a.f32()?.to_bits() as u64,
        AvpType::Float64 => a.f64()?.to_bits(),
        AvpType::UTF8String => mix_bytes(1, a.utf8()?.as_bytes()),
        AvpType::DiameterIdentity => mix_bytes(2, a.identity()?.as_bytes()),
        AvpType::IPFilterRule => mix_bytes(3, a.octets()),
        AvpType::DiameterURI => {
            let u = a.uri()?;
            mix_bytes(u.port as u64, u.fqdn.as_bytes())
        }
        AvpType::Address => match a.address()? {
            Address::Ipv4(ip) => u32::from(ip) as u64,
            Address::Ipv6(ip) => u128::from(ip) as u64,
            Address::E164(s) => mix_bytes(8, s.as_bytes()),
            Address::Other { family, bytes } => mix_bytes(family as u64, bytes),
        },
        AvpType::Time => a.time()?.to_unix() as u64,
        AvpType::Grouped => {
            w.groups += 1;
            for child in a.grouped() {
                walk_avp(&child?, types, depth + 1, w)?;
            }
            0
        }
    };
    w.checksum = mix(w.checksum, v);
    Ok(())
}

/// Walks every AVP of `m`, recursively, with typed accessors.
pub fn walk(m: &Message<'_>, types: &dyn Fn(u32, u32) -> Option<AvpType>) -> Result<Walk, Error> {
    let mut w = Walk::default();
    for a in m.avps() {
        walk_avp(&a?, types, 1, &mut w)?;
    }
    Ok(w)
}
