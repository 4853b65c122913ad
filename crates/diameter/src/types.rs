//! The RFC 6733 data formats (section 4.2 basic, 4.3 derived): decoding
//! from borrowed AVP data and the value model used by the dictionary.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// The data format of an AVP, as a dictionary declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AvpType {
    /// Arbitrary bytes.
    OctetString,
    /// Signed 32-bit integer.
    Integer32,
    /// Signed 64-bit integer.
    Integer64,
    /// Unsigned 32-bit integer.
    Unsigned32,
    /// Unsigned 64-bit integer.
    Unsigned64,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
    /// A sequence of AVPs.
    Grouped,
    /// Address family plus address.
    Address,
    /// NTP seconds.
    Time,
    /// Valid UTF-8 text.
    UTF8String,
    /// ASCII FQDN or realm.
    DiameterIdentity,
    /// `aaa://` or `aaas://` URI.
    DiameterURI,
    /// Integer32 with named values.
    Enumerated,
    /// ASCII IP filter rule (RFC 6733 section 4.3.1).
    IPFilterRule,
}

impl AvpType {
    /// The name the RFC uses for this format.
    pub fn name(self) -> &'static str {
        match self {
            AvpType::OctetString => "OctetString",
            AvpType::Integer32 => "Integer32",
            AvpType::Integer64 => "Integer64",
            AvpType::Unsigned32 => "Unsigned32",
            AvpType::Unsigned64 => "Unsigned64",
            AvpType::Float32 => "Float32",
            AvpType::Float64 => "Float64",
            AvpType::Grouped => "Grouped",
            AvpType::Address => "Address",
            AvpType::Time => "Time",
            AvpType::UTF8String => "UTF8String",
            AvpType::DiameterIdentity => "DiameterIdentity",
            AvpType::DiameterURI => "DiameterURI",
            AvpType::Enumerated => "Enumerated",
            AvpType::IPFilterRule => "IPFilterRule",
        }
    }

    /// Parses a format name as the RFC (and the usual dictionaries) spell it.
    pub fn from_name(name: &str) -> Option<AvpType> {
        Some(match name {
            "OctetString" => AvpType::OctetString,
            "Integer32" => AvpType::Integer32,
            "Integer64" => AvpType::Integer64,
            "Unsigned32" => AvpType::Unsigned32,
            "Unsigned64" => AvpType::Unsigned64,
            "Float32" => AvpType::Float32,
            "Float64" => AvpType::Float64,
            "Grouped" => AvpType::Grouped,
            "Address" => AvpType::Address,
            "Time" => AvpType::Time,
            "UTF8String" => AvpType::UTF8String,
            "DiameterIdentity" => AvpType::DiameterIdentity,
            "DiameterURI" => AvpType::DiameterURI,
            "Enumerated" => AvpType::Enumerated,
            "IPFilterRule" => AvpType::IPFilterRule,
            _ => return None,
        })
    }
}

/// A decoded AVP value, borrowing from the message buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// OctetString.
    OctetString(&'a [u8]),
    /// Integer32.
    Integer32(i32),
    /// Integer64.
    Integer64(i64),
    /// Unsigned32.
    Unsigned32(u32),
    /// Unsigned64.
    Unsigned64(u64),
    /// Float32.
    Float32(f32),
    /// Float64.
    Float64(f64),
    /// Grouped: iterate the children with [`crate::Avp::grouped`].
    Grouped,
    /// Address.
    Address(Address<'a>),
    /// Time.
    Time(DiameterTime),
    /// UTF8String.
    UTF8String(&'a str),
    /// DiameterIdentity.
    DiameterIdentity(&'a str),
    /// DiameterURI.
    DiameterURI(DiameterUri<'a>),
    /// Enumerated.
    Enumerated(i32),
    /// IPFilterRule.
    IPFilterRule(&'a str),
}

/// Decodes AVP data as the given format.
pub fn decode_value(ty: AvpType, data: &[u8]) -> Result<Value<'_>> {
    Ok(match ty {
        AvpType::OctetString => Value::OctetString(data),
        AvpType::Integer32 => Value::Integer32(decode_i32(data)?),
        AvpType::Integer64 => Value::Integer64(decode_i64(data)?),
        AvpType::Unsigned32 => Value::Unsigned32(decode_u32(data)?),
        AvpType::Unsigned64 => Value::Unsigned64(decode_u64(data)?),
        AvpType::Float32 => Value::Float32(decode_f32(data)?),
        AvpType::Float64 => Value::Float64(decode_f64(data)?),
        AvpType::Grouped => Value::Grouped,
        AvpType::Address => Value::Address(decode_address(data)?),
        AvpType::Time => Value::Time(decode_time(data)?),
        AvpType::UTF8String => Value::UTF8String(decode_utf8(data)?),
        AvpType::DiameterIdentity => Value::DiameterIdentity(decode_identity(data)?),
        AvpType::DiameterURI => Value::DiameterURI(decode_uri(data)?),
        AvpType::Enumerated => Value::Enumerated(decode_i32(data)?),
        AvpType::IPFilterRule => Value::IPFilterRule(decode_ascii(data, "IPFilterRule")?),
    })
}

fn fixed<const N: usize>(data: &[u8], kind: &'static str) -> Result<[u8; N]> {
    data.try_into()
        .map_err(|_| Error::value_len(kind, "wrong data length for this format"))
}

/// Integer32: exactly 4 bytes, two's complement.
pub fn decode_i32(data: &[u8]) -> Result<i32> {
    Ok(i32::from_be_bytes(fixed(data, "Integer32")?))
}

/// Integer64: exactly 8 bytes.
pub fn decode_i64(data: &[u8]) -> Result<i64> {
    Ok(i64::from_be_bytes(fixed(data, "Integer64")?))
}

/// Unsigned32: exactly 4 bytes.
pub fn decode_u32(data: &[u8]) -> Result<u32> {
    Ok(u32::from_be_bytes(fixed(data, "Unsigned32")?))
}

/// Unsigned64: exactly 8 bytes.
pub fn decode_u64(data: &[u8]) -> Result<u64> {
    Ok(u64::from_be_bytes(fixed(data, "Unsigned64")?))
}

/// Float32: exactly 4 bytes, IEEE 754.
pub fn decode_f32(data: &[u8]) -> Result<f32> {
    Ok(f32::from_be_bytes(fixed(data, "Float32")?))
}

/// Float64: exactly 8 bytes, IEEE 754.
pub fn decode_f64(data: &[u8]) -> Result<f64> {
    Ok(f64::from_be_bytes(fixed(data, "Float64")?))
}

/// UTF8String: any valid UTF-8 (the length counts bytes).
pub fn decode_utf8(data: &[u8]) -> Result<&str> {
    std::str::from_utf8(data).map_err(|_| Error::value("UTF8String", "not valid UTF-8"))
}

fn decode_ascii<'a>(data: &'a [u8], kind: &'static str) -> Result<&'a str> {
    if !data.is_ascii() {
        return Err(Error::value(kind, "not ASCII"));
    }
    // ASCII is valid UTF-8.
    std::str::from_utf8(data).map_err(|_| Error::value(kind, "not ASCII"))
}

/// DiameterIdentity: a non-empty FQDN or realm of visible ASCII characters.
/// Compare identities with [`identity_eq`] (case-insensitive).
pub fn decode_identity(data: &[u8]) -> Result<&str> {
    check_identity(data)?;
    // Visible ASCII, checked above, is valid UTF-8.
    std::str::from_utf8(data).map_err(|_| Error::value("DiameterIdentity", "not ASCII"))
}

/// The checks of [`decode_identity`], without making a `str`.
pub(crate) fn check_identity(data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Err(Error::value("DiameterIdentity", "empty"));
    }
    if !is_visible_ascii(data) {
        return Err(Error::value(
            "DiameterIdentity",
            "contains a character outside visible ASCII",
        ));
    }
    Ok(())
}

/// Whether every byte is visible ASCII (0x21 to 0x7e), eight bytes at a
/// time: a byte below 0x21 borrows into its high bit when 0x21 is taken
/// from it, and one above 0x7e has its high bit set, or gets it when 1 is
/// added. A borrow or carry across bytes starts only at a byte that is
/// itself out of range, so the answer is exact.
#[inline]
fn is_visible_ascii(data: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let x = u64::from_le_bytes(b);
        let below = x.wrapping_sub(ONES * 0x21) & !x;
        let above = x.wrapping_add(ONES) | x;
        if (below | above) & HIGH != 0 {
            return false;
        }
    }
    chunks
        .remainder()
        .iter()
        .all(|&c| (0x21..0x7f).contains(&c))
}

/// Compares two DiameterIdentity values the way RFC 6733 says: ignoring case.
pub fn identity_eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// IANA address family numbers used by the Address format.
pub mod family {
    /// IPv4.
    pub const IPV4: u16 = 1;
    /// IPv6.
    pub const IPV6: u16 = 2;
    /// E.164 (ASCII digits).
    pub const E164: u16 = 8;
}

/// The Address format: a 2-byte IANA address family, then the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Address<'a> {
    /// Family 1, 4 bytes.
    Ipv4(Ipv4Addr),
    /// Family 2, 16 bytes.
    Ipv6(Ipv6Addr),
    /// Family 8: an E.164 number as ASCII digits.
    E164(&'a str),
    /// Any other family, kept as bytes.
    Other {
        /// IANA address family number.
        family: u16,
        /// The address bytes.
        bytes: &'a [u8],
    },
}

impl Address<'_> {
    /// The IANA address family number.
    pub fn family(&self) -> u16 {
        match self {
            Address::Ipv4(_) => family::IPV4,
            Address::Ipv6(_) => family::IPV6,
            Address::E164(_) => family::E164,
            Address::Other { family, .. } => *family,
        }
    }

    /// Appends the wire form (family, then address) to `out`.
    pub fn write_to(&self, out: &mut impl bytes::BufMut) {
        out.put_u16(self.family());
        match self {
            Address::Ipv4(a) => out.put_slice(&a.octets()),
            Address::Ipv6(a) => out.put_slice(&a.octets()),
            Address::E164(s) => out.put_slice(s.as_bytes()),
            Address::Other { bytes, .. } => out.put_slice(bytes),
        }
    }

    /// Length of the wire form.
    pub fn wire_len(&self) -> usize {
        2 + match self {
            Address::Ipv4(_) => 4,
            Address::Ipv6(_) => 16,
            Address::E164(s) => s.len(),
            Address::Other { bytes, .. } => bytes.len(),
        }
    }
}

impl From<std::net::IpAddr> for Address<'static> {
    fn from(ip: std::net::IpAddr) -> Self {
        match ip {
            std::net::IpAddr::V4(a) => Address::Ipv4(a),
            std::net::IpAddr::V6(a) => Address::Ipv6(a),
        }
    }
}

impl std::fmt::Display for Address<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Ipv4(a) => write!(f, "{a}"),
            Address::Ipv6(a) => write!(f, "{a}"),
            Address::E164(s) => write!(f, "E.164 {s}"),
            Address::Other { family, bytes } => {
                write!(f, "family {family} 0x")?;
                bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
        }
    }
}

/// Address: family plus an address of the right size for that family.
pub fn decode_address(data: &[u8]) -> Result<Address<'_>> {
    const K: &str = "Address";
    let (fam, rest) = match data {
        [a, b, rest @ ..] => (u16::from_be_bytes([*a, *b]), rest),
        _ => return Err(Error::value_len(K, "shorter than the 2-byte family")),
    };
    Ok(match fam {
        family::IPV4 => Address::Ipv4(Ipv4Addr::from(
            <[u8; 4]>::try_from(rest).map_err(|_| Error::value_len(K, "IPv4 needs 4 bytes"))?,
        )),
        family::IPV6 => Address::Ipv6(Ipv6Addr::from(
            <[u8; 16]>::try_from(rest).map_err(|_| Error::value_len(K, "IPv6 needs 16 bytes"))?,
        )),
        family::E164 => {
            if rest.is_empty() || rest.len() > 15 || !rest.iter().all(u8::is_ascii_digit) {
                return Err(Error::value(K, "E.164 needs 1 to 15 ASCII digits"));
            }
            Address::E164(decode_ascii(rest, K)?)
        }
        other => Address::Other {
            family: other,
            bytes: rest,
        },
    })
}

/// Seconds between the NTP epoch (1900-01-01) and the Unix epoch.
pub const NTP_UNIX_OFFSET: i64 = 2_208_988_800;

/// The Time format: NTP seconds since 1900-01-01 00:00 UTC, 32 bits.
///
/// The field wraps on 2036-02-07 06:28:16 UTC. As RFC 2030 (and RFC 6733
/// section 4.3.1) advise, a value whose top bit is clear is read as after
/// the wrap, so the format covers 1968-01-20 to 2104-02-26.
///
/// Values order by the instant they stand for, so a time just after the
/// wrap sorts after one just before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiameterTime(pub u32);

impl Ord for DiameterTime {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.to_unix().cmp(&other.to_unix())
    }
}

impl PartialOrd for DiameterTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl DiameterTime {
    /// Earliest Unix time the format can carry (1968-01-20 03:14:08 UTC).
    pub const MIN_UNIX: i64 = 0x8000_0000 - NTP_UNIX_OFFSET;
    /// Latest Unix time the format can carry (2104-02-26 09:42:23 UTC).
    pub const MAX_UNIX: i64 = 0x1_7fff_ffff - NTP_UNIX_OFFSET;

    /// The Unix time (seconds) this value stands for.
    pub fn to_unix(self) -> i64 {
        let v = self.0 as i64;
        if self.0 & 0x8000_0000 != 0 {
            v - NTP_UNIX_OFFSET
        } else {
            v + (1 << 32) - NTP_UNIX_OFFSET
        }
    }

    /// The value for a Unix time, or `None` outside [`Self::MIN_UNIX`]..=
    /// [`Self::MAX_UNIX`].
    pub fn from_unix(secs: i64) -> Option<Self> {
        if !(Self::MIN_UNIX..=Self::MAX_UNIX).contains(&secs) {
            return None;
        }
        Some(DiameterTime((secs + NTP_UNIX_OFFSET) as u32))
    }
}

/// Time: exactly 4 bytes.
pub fn decode_time(data: &[u8]) -> Result<DiameterTime> {
    Ok(DiameterTime(u32::from_be_bytes(fixed(data, "Time")?)))
}

/// Transport named in a DiameterURI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `transport=tcp`.
    Tcp,
    /// `transport=sctp`.
    Sctp,
    /// `transport=udp`.
    Udp,
}

/// Protocol named in a DiameterURI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UriProtocol {
    /// `protocol=diameter`.
    Diameter,
    /// `protocol=radius`.
    Radius,
    /// `protocol=tacacs+`.
    TacacsPlus,
}

/// A parsed DiameterURI (RFC 6733 section 4.3.1):
/// `aaa://FQDN[:port][;transport=tcp|sctp|udp][;protocol=diameter|radius|tacacs+]`,
/// or `aaas://` for TLS/DTLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiameterUri<'a> {
    /// `aaas://` (secure transport).
    pub secure: bool,
    /// The FQDN.
    pub fqdn: &'a str,
    /// The port given, or the default: 3868 for `aaa`, 5658 for `aaas`.
    pub port: u16,
    /// Whether the port was written explicitly.
    pub explicit_port: bool,
    /// The transport parameter, if present.
    pub transport: Option<Transport>,
    /// The protocol parameter, if present.
    pub protocol: Option<UriProtocol>,
}

/// DiameterURI: parsed and checked against the RFC grammar.
pub fn decode_uri(data: &[u8]) -> Result<DiameterUri<'_>> {
    const K: &str = "DiameterURI";
    let s = decode_ascii(data, K)?;
    let (secure, rest) = if let Some(r) = strip_prefix_ci(s, "aaas://") {
        (true, r)
    } else if let Some(r) = strip_prefix_ci(s, "aaa://") {
        (false, r)
    } else {
        return Err(Error::value(K, "must start with aaa:// or aaas://"));
    };
    let mut parts = rest.split(';');
    let authority = parts.next().unwrap_or("");
    let (fqdn, port, explicit_port) = match authority.rsplit_once(':') {
        Some((host, p)) => {
            let port: u16 = p
                .parse()
                .ok()
                .filter(|_| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
                .ok_or(Error::value(K, "invalid port"))?;
            (host, port, true)
        }
        None => (authority, if secure { 5658 } else { 3868 }, false),
    };
    if fqdn.is_empty()
        || !fqdn
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-' || c == b'_')
    {
        return Err(Error::value(K, "invalid FQDN"));
    }
    let mut uri = DiameterUri {
        secure,
        fqdn,
        port,
        explicit_port,
        transport: None,
        protocol: None,
    };
    for param in parts {
        let (k, v) = param
            .split_once('=')
            .ok_or(Error::value(K, "parameter without '='"))?;
        if k.eq_ignore_ascii_case("transport") && uri.transport.is_none() {
            uri.transport = Some(if v.eq_ignore_ascii_case("tcp") {
                Transport::Tcp
            } else if v.eq_ignore_ascii_case("sctp") {
                Transport::Sctp
            } else if v.eq_ignore_ascii_case("udp") {
                Transport::Udp
            } else {
                return Err(Error::value(K, "unknown transport"));
            });
        } else if k.eq_ignore_ascii_case("protocol") && uri.protocol.is_none() {
            uri.protocol = Some(if v.eq_ignore_ascii_case("diameter") {
                UriProtocol::Diameter
            } else if v.eq_ignore_ascii_case("radius") {
                UriProtocol::Radius
            } else if v.eq_ignore_ascii_case("tacacs+") {
                UriProtocol::TacacsPlus
            } else {
                return Err(Error::value(K, "unknown protocol"));
            });
        } else {
            return Err(Error::value(K, "unknown or repeated parameter"));
        }
    }
    Ok(uri)
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

impl std::fmt::Display for DiameterUri<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}",
            if self.secure { "aaas" } else { "aaa" },
            self.fqdn
        )?;
        if self.explicit_port {
            write!(f, ":{}", self.port)?;
        }
        if let Some(t) = self.transport {
            let t = match t {
                Transport::Tcp => "tcp",
                Transport::Sctp => "sctp",
                Transport::Udp => "udp",
            };
            write!(f, ";transport={t}")?;
        }
        if let Some(p) = self.protocol {
            let p = match p {
                UriProtocol::Diameter => "diameter",
                UriProtocol::Radius => "radius",
                UriProtocol::TacacsPlus => "tacacs+",
            };
            write!(f, ";protocol={p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_ascii_agrees_with_a_byte_by_byte_check_for_every_byte_anywhere() {
        let slow = |d: &[u8]| d.iter().all(|&c| (0x21..0x7f).contains(&c));
        for len in 1..=20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut d = vec![b'a'; len];
                    d[at] = b;
                    assert_eq!(is_visible_ascii(&d), slow(&d), "{d:?}");
                    // Neighbours out of range too (borrows and carries).
                    d[(at + 1) % len] = 0x20;
                    assert_eq!(is_visible_ascii(&d), slow(&d), "{d:?}");
                    d[(at + 1) % len] = 0xff;
                    assert_eq!(is_visible_ascii(&d), slow(&d), "{d:?}");
                }
            }
        }
    }

    const ALL_TYPES: [AvpType; 15] = [
        AvpType::OctetString,
        AvpType::Integer32,
        AvpType::Integer64,
        AvpType::Unsigned32,
        AvpType::Unsigned64,
        AvpType::Float32,
        AvpType::Float64,
        AvpType::Grouped,
        AvpType::Address,
        AvpType::Time,
        AvpType::UTF8String,
        AvpType::DiameterIdentity,
        AvpType::DiameterURI,
        AvpType::Enumerated,
        AvpType::IPFilterRule,
    ];

    fn is_length_error(r: Result<impl std::fmt::Debug>) -> bool {
        matches!(r, Err(Error::InvalidValue { length: true, .. }))
    }

    fn is_value_error(r: Result<impl std::fmt::Debug>) -> bool {
        matches!(r, Err(Error::InvalidValue { length: false, .. }))
    }

    // ---- names -------------------------------------------------------------

    #[test]
    fn every_type_name_round_trips_and_unknown_names_are_rejected() {
        for ty in ALL_TYPES {
            assert_eq!(AvpType::from_name(ty.name()), Some(ty));
        }
        assert_eq!(AvpType::from_name("octetstring"), None);
        assert_eq!(AvpType::from_name("Unsigned16"), None);
        assert_eq!(AvpType::from_name(""), None);
    }

    // ---- integers ----------------------------------------------------------

    #[test]
    fn integer32_edges_decode_big_endian_twos_complement() {
        assert_eq!(decode_i32(&[0, 0, 0, 0]), Ok(0));
        assert_eq!(decode_i32(&[0, 0, 0, 1]), Ok(1));
        assert_eq!(decode_i32(&[0xff; 4]), Ok(-1));
        assert_eq!(decode_i32(&[0x7f, 0xff, 0xff, 0xff]), Ok(i32::MAX));
        assert_eq!(decode_i32(&[0x80, 0, 0, 0]), Ok(i32::MIN));
        assert_eq!(decode_i32(&[0x12, 0x34, 0x56, 0x78]), Ok(0x1234_5678));
    }

    #[test]
    fn integer64_edges_decode_big_endian_twos_complement() {
        assert_eq!(decode_i64(&[0; 8]), Ok(0));
        assert_eq!(decode_i64(&[0xff; 8]), Ok(-1));
        assert_eq!(
            decode_i64(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Ok(i64::MAX)
        );
        assert_eq!(decode_i64(&[0x80, 0, 0, 0, 0, 0, 0, 0]), Ok(i64::MIN));
        assert_eq!(
            decode_i64(&[1, 2, 3, 4, 5, 6, 7, 8]),
            Ok(0x0102_0304_0506_0708)
        );
    }

    #[test]
    fn unsigned32_edges_decode_big_endian() {
        assert_eq!(decode_u32(&[0; 4]), Ok(0));
        assert_eq!(decode_u32(&[0xff; 4]), Ok(u32::MAX));
        assert_eq!(decode_u32(&[0x80, 0, 0, 0]), Ok(0x8000_0000));
        assert_eq!(decode_u32(&[0, 0, 0x0b, 0xb8]), Ok(3000));
    }

    #[test]
    fn unsigned64_edges_decode_big_endian() {
        assert_eq!(decode_u64(&[0; 8]), Ok(0));
        assert_eq!(decode_u64(&[0xff; 8]), Ok(u64::MAX));
        assert_eq!(decode_u64(&[0x80, 0, 0, 0, 0, 0, 0, 0]), Ok(1 << 63));
        assert_eq!(decode_u64(&[0, 0, 0, 1, 0, 0, 0, 0]), Ok(1 << 32));
    }

    #[test]
    fn four_byte_formats_reject_every_other_length() {
        let buf = [0u8; 9];
        for n in (0..=9).filter(|&n| n != 4) {
            let d = &buf[..n];
            assert!(is_length_error(decode_i32(d)), "Integer32 len {n}");
            assert!(is_length_error(decode_u32(d)), "Unsigned32 len {n}");
            assert!(is_length_error(decode_f32(d)), "Float32 len {n}");
            assert!(is_length_error(decode_time(d)), "Time len {n}");
            for ty in [
                AvpType::Integer32,
                AvpType::Unsigned32,
                AvpType::Float32,
                AvpType::Time,
                AvpType::Enumerated,
            ] {
                assert!(is_length_error(decode_value(ty, d)), "{ty:?} len {n}");
            }
        }
    }

    #[test]
    fn eight_byte_formats_reject_every_other_length() {
        let buf = [0u8; 17];
        for n in (0..=17).filter(|&n| n != 8) {
            let d = &buf[..n];
            assert!(is_length_error(decode_i64(d)), "Integer64 len {n}");
            assert!(is_length_error(decode_u64(d)), "Unsigned64 len {n}");
            assert!(is_length_error(decode_f64(d)), "Float64 len {n}");
            for ty in [AvpType::Integer64, AvpType::Unsigned64, AvpType::Float64] {
                assert!(is_length_error(decode_value(ty, d)), "{ty:?} len {n}");
            }
        }
    }

    #[test]
    fn length_errors_name_the_format() {
        assert!(matches!(
            decode_u64(&[0; 4]),
            Err(Error::InvalidValue {
                kind: "Unsigned64",
                length: true,
                ..
            })
        ));
        assert!(matches!(
            decode_value(AvpType::Enumerated, &[0; 3]),
            Err(Error::InvalidValue {
                kind: "Integer32",
                length: true,
                ..
            })
        ));
    }

    // ---- floats ------------------------------------------------------------

    #[test]
    fn float32_is_ieee754_big_endian_including_specials() {
        assert_eq!(decode_f32(&[0x3f, 0x80, 0, 0]), Ok(1.0));
        assert_eq!(decode_f32(&[0xc0, 0, 0, 0]), Ok(-2.0));
        assert_eq!(decode_f32(&f32::MAX.to_be_bytes()), Ok(f32::MAX));
        assert_eq!(decode_f32(&f32::MIN.to_be_bytes()), Ok(f32::MIN));
        assert_eq!(
            decode_f32(&f32::MIN_POSITIVE.to_be_bytes()),
            Ok(f32::MIN_POSITIVE)
        );
        assert_eq!(decode_f32(&[0x7f, 0x80, 0, 0]), Ok(f32::INFINITY));
        assert_eq!(decode_f32(&[0xff, 0x80, 0, 0]), Ok(f32::NEG_INFINITY));
        let neg_zero = decode_f32(&[0x80, 0, 0, 0]).unwrap();
        assert!(neg_zero == 0.0 && neg_zero.is_sign_negative());
        let nan = decode_f32(&[0x7f, 0xc0, 0, 1]).unwrap();
        assert!(nan.is_nan());
        assert_eq!(nan.to_bits(), 0x7fc0_0001, "NaN payload is kept");
        // The smallest subnormal.
        assert_eq!(decode_f32(&[0, 0, 0, 1]).unwrap().to_bits(), 1);
    }

    #[test]
    fn float64_is_ieee754_big_endian_including_specials() {
        assert_eq!(
            decode_f64(&[0x3f, 0xf0, 0, 0, 0, 0, 0, 0]),
            Ok(1.0),
            "1.0 is 0x3ff0000000000000"
        );
        assert_eq!(decode_f64(&f64::MAX.to_be_bytes()), Ok(f64::MAX));
        assert_eq!(decode_f64(&f64::MIN.to_be_bytes()), Ok(f64::MIN));
        assert_eq!(decode_f64(&f64::EPSILON.to_be_bytes()), Ok(f64::EPSILON));
        assert_eq!(
            decode_f64(&f64::NEG_INFINITY.to_be_bytes()),
            Ok(f64::NEG_INFINITY)
        );
        let nan = decode_f64(&0x7ff8_0000_0000_0042u64.to_be_bytes()).unwrap();
        assert_eq!(nan.to_bits(), 0x7ff8_0000_0000_0042);
    }

    // ---- UTF8String --------------------------------------------------------

    #[test]
    fn utf8_accepts_empty_ascii_and_multibyte_text() {
        assert_eq!(decode_utf8(b""), Ok(""));
        assert_eq!(decode_utf8(b"gw.example;1;2"), Ok("gw.example;1;2"));
        assert_eq!(decode_utf8("h\u{e9}".as_bytes()), Ok("h\u{e9}"));
        // Largest scalar of each encoded width: U+007F, U+07FF, U+FFFF, U+10FFFF.
        let s = "\u{7f}\u{7ff}\u{ffff}\u{10ffff}";
        assert_eq!(s.len(), 1 + 2 + 3 + 4, "the length counts bytes");
        assert_eq!(decode_utf8(s.as_bytes()), Ok(s));
        // NUL is a valid UTF-8 character.
        assert_eq!(decode_utf8(&[b'a', 0, b'b']), Ok("a\0b"));
    }

    #[test]
    fn utf8_rejects_every_kind_of_invalid_sequence() {
        let bad: &[(&str, &[u8])] = &[
            ("lone continuation byte", &[0x80]),
            ("continuation after ASCII", b"ab\xbf"),
            ("truncated two-byte sequence", &[0xc3]),
            ("truncated three-byte sequence", &[0xe2, 0x82]),
            ("truncated four-byte sequence", &[0xf0, 0x9f, 0x98]),
            ("overlong NUL", &[0xc0, 0x80]),
            ("overlong slash", &[0xc1, 0xaf]),
            ("overlong three-byte", &[0xe0, 0x80, 0xaf]),
            ("overlong four-byte", &[0xf0, 0x80, 0x80, 0xaf]),
            ("UTF-16 high surrogate", &[0xed, 0xa0, 0x80]),
            ("UTF-16 low surrogate", &[0xed, 0xbf, 0xbf]),
            ("above U+10FFFF", &[0xf4, 0x90, 0x80, 0x80]),
            ("five-byte lead", &[0xf8, 0x88, 0x80, 0x80, 0x80]),
            ("0xfe", &[0xfe]),
            ("0xff", &[0xff]),
            ("Latin-1 text", b"caf\xe9"),
            (
                "invalid byte after valid text",
                b"valid \xe2\x82\xac then \xc0",
            ),
        ];
        for (what, bytes) in bad {
            assert!(is_value_error(decode_utf8(bytes)), "{what} was accepted");
            assert!(
                is_value_error(decode_value(AvpType::UTF8String, bytes)),
                "{what} was accepted by decode_value"
            );
        }
    }

    // ---- DiameterIdentity --------------------------------------------------

    #[test]
    fn identity_accepts_fqdns_and_realms_of_visible_ascii() {
        for ok in [
            "a",
            "ocs.example.com",
            "example.com",
            "pcef-1.epc.mnc001.mcc001.3gppnetwork.org",
            "HOST.Example.COM",
            "under_score.example",
            "!~",
        ] {
            assert_eq!(decode_identity(ok.as_bytes()), Ok(ok));
        }
    }

    #[test]
    fn identity_rejects_empty_whitespace_control_and_non_ascii() {
        let bad: &[&[u8]] = &[
            b"",
            b" ",
            b"host example.com",
            b"host.example.com\0",
            b"\thost",
            b"host\r\n",
            b"host\x7f",
            "h\u{f6}st.example".as_bytes(),
            &[0x80],
            &[0xff],
        ];
        for b in bad {
            assert!(is_value_error(decode_identity(b)), "{b:?} was accepted");
            assert!(is_value_error(decode_value(AvpType::DiameterIdentity, b)));
        }
    }

    #[test]
    fn identities_compare_ignoring_ascii_case_only() {
        assert!(identity_eq("OCS.Example.COM", "ocs.example.com"));
        assert!(identity_eq("", ""));
        assert!(!identity_eq("ocs.example.com", "ocs.example.org"));
        assert!(!identity_eq("ocs.example.com", "ocs.example.com."));
        assert!(!identity_eq("a", "ab"));
    }

    // ---- IPFilterRule ------------------------------------------------------

    #[test]
    fn ip_filter_rule_is_ascii_text() {
        let rule = "permit in ip from 10.0.0.1 to any";
        assert_eq!(
            decode_value(AvpType::IPFilterRule, rule.as_bytes()),
            Ok(Value::IPFilterRule(rule))
        );
        assert_eq!(
            decode_value(AvpType::IPFilterRule, b""),
            Ok(Value::IPFilterRule(""))
        );
        assert!(is_value_error(decode_value(
            AvpType::IPFilterRule,
            "permit \u{e9}".as_bytes()
        )));
        assert!(is_value_error(decode_value(AvpType::IPFilterRule, &[0xff])));
    }

    // ---- Address -----------------------------------------------------------

    #[test]
    fn address_ipv4_needs_exactly_four_bytes() {
        assert_eq!(
            decode_address(&[0, 1, 192, 0, 2, 1]),
            Ok(Address::Ipv4(Ipv4Addr::new(192, 0, 2, 1)))
        );
        assert_eq!(
            decode_address(&[0, 1, 0, 0, 0, 0]),
            Ok(Address::Ipv4(Ipv4Addr::UNSPECIFIED))
        );
        assert_eq!(
            decode_address(&[0, 1, 255, 255, 255, 255]),
            Ok(Address::Ipv4(Ipv4Addr::BROADCAST))
        );
        let mut buf = vec![0, 1];
        for n in (0..=20).filter(|&n| n != 4) {
            buf.truncate(2);
            buf.extend(std::iter::repeat_n(7, n));
            assert!(is_length_error(decode_address(&buf)), "IPv4 with {n} bytes");
        }
    }

    #[test]
    fn address_ipv6_needs_exactly_sixteen_bytes() {
        let a: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let mut buf = vec![0, 2];
        buf.extend_from_slice(&a.octets());
        assert_eq!(decode_address(&buf), Ok(Address::Ipv6(a)));
        let mut buf = vec![0, 2];
        buf.extend_from_slice(&[0xff; 16]);
        assert_eq!(
            decode_address(&buf),
            Ok(Address::Ipv6(Ipv6Addr::from(u128::MAX)))
        );
        for n in (0..=20).filter(|&n| n != 16) {
            buf.truncate(2);
            buf.extend(std::iter::repeat_n(1, n));
            assert!(is_length_error(decode_address(&buf)), "IPv6 with {n} bytes");
        }
    }

    #[test]
    fn address_e164_takes_one_to_fifteen_ascii_digits() {
        assert_eq!(decode_address(b"\0\x081"), Ok(Address::E164("1")));
        assert_eq!(
            decode_address(b"\0\x08123456789012345"),
            Ok(Address::E164("123456789012345"))
        );
        for bad in [
            &b"\0\x08"[..],
            b"\0\x081234567890123456",
            b"\0\x08+4712345678",
            b"\0\x0812 34",
            b"\0\x08abc",
            b"\0\x08\xff",
        ] {
            assert!(is_value_error(decode_address(bad)), "{bad:?} was accepted");
        }
    }

    #[test]
    fn address_other_families_keep_their_bytes_whatever_the_size() {
        assert_eq!(
            decode_address(&[0, 0]),
            Ok(Address::Other {
                family: 0,
                bytes: &[]
            })
        );
        assert_eq!(
            decode_address(&[0, 3, 1, 2, 3]),
            Ok(Address::Other {
                family: 3,
                bytes: &[1, 2, 3]
            })
        );
        assert_eq!(
            decode_address(&[0xff, 0xff, 9]),
            Ok(Address::Other {
                family: 0xffff,
                bytes: &[9]
            })
        );
        // Family 0x0100 is not IPv4: the family is big-endian.
        assert_eq!(decode_address(&[1, 0, 1, 2, 3, 4]).unwrap().family(), 256);
    }

    #[test]
    fn address_shorter_than_its_family_is_a_length_error() {
        assert!(is_length_error(decode_address(&[])));
        assert!(is_length_error(decode_address(&[0])));
        assert!(is_length_error(decode_value(AvpType::Address, &[1])));
    }

    #[test]
    fn address_wire_form_round_trips_for_every_family() {
        let v6: Ipv6Addr = "fe80::1:2".parse().unwrap();
        let addrs = [
            Address::Ipv4(Ipv4Addr::new(10, 1, 2, 3)),
            Address::Ipv6(v6),
            Address::E164("4712345678"),
            Address::Other {
                family: 5,
                bytes: b"xyz",
            },
            Address::Other {
                family: 9,
                bytes: b"",
            },
        ];
        for a in addrs {
            let mut out = Vec::new();
            a.write_to(&mut out);
            assert_eq!(out.len(), a.wire_len());
            assert_eq!(u16::from_be_bytes([out[0], out[1]]), a.family());
            assert_eq!(decode_address(&out), Ok(a));
        }
    }

    #[test]
    fn address_converts_from_std_and_displays() {
        let v4: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let v6: std::net::IpAddr = "::1".parse().unwrap();
        assert_eq!(Address::from(v4).family(), family::IPV4);
        assert_eq!(Address::from(v6).family(), family::IPV6);
        assert_eq!(Address::from(v4).to_string(), "192.0.2.7");
        assert_eq!(Address::from(v6).to_string(), "::1");
        assert_eq!(Address::E164("47").to_string(), "E.164 47");
        let other = Address::Other {
            family: 6,
            bytes: &[0xab, 0x01],
        };
        assert_eq!(other.to_string(), "family 6 0xab01");
    }

    // ---- Time --------------------------------------------------------------

    /// 2036-02-07 06:28:16 UTC, when the 32-bit NTP seconds field wraps.
    const WRAP_UNIX: i64 = (1 << 32) - NTP_UNIX_OFFSET;

    #[test]
    fn time_era_boundaries_around_the_2036_wrap() {
        assert_eq!(WRAP_UNIX, 2_085_978_496);
        // Last second before the wrap.
        assert_eq!(DiameterTime(0xFFFF_FFFF).to_unix(), WRAP_UNIX - 1);
        // First second after it: top bit clear means the era after 2036.
        assert_eq!(DiameterTime(0).to_unix(), WRAP_UNIX);
        assert_eq!(DiameterTime(1).to_unix(), WRAP_UNIX + 1);
        // The pivot: 0x80000000 is the earliest representable time (1968).
        assert_eq!(DiameterTime(0x8000_0000).to_unix(), DiameterTime::MIN_UNIX);
        assert_eq!(DiameterTime(0x7FFF_FFFF).to_unix(), DiameterTime::MAX_UNIX);
        assert_eq!(DiameterTime::MIN_UNIX, -61_505_152);
        assert_eq!(DiameterTime::MAX_UNIX, 4_233_462_143);
        assert_eq!(
            DiameterTime::MAX_UNIX - DiameterTime::MIN_UNIX,
            u32::MAX as i64,
            "the window covers every 32-bit value once"
        );
        // Unix epoch: NTP 2208988800.
        assert_eq!(DiameterTime(2_208_988_800).to_unix(), 0);
        assert_eq!(DiameterTime::from_unix(0), Some(DiameterTime(0x83AA_7E80)));
    }

    #[test]
    fn time_from_unix_is_the_inverse_of_to_unix() {
        for ntp in [
            0u32,
            1,
            0x7FFF_FFFE,
            0x7FFF_FFFF,
            0x8000_0000,
            0x8000_0001,
            0x83AA_7E80,
            0xE000_0000,
            0xFFFF_FFFE,
            0xFFFF_FFFF,
        ] {
            let t = DiameterTime(ntp);
            assert_eq!(DiameterTime::from_unix(t.to_unix()), Some(t), "{ntp:#x}");
        }
        for unix in [
            DiameterTime::MIN_UNIX,
            -1,
            0,
            1_700_000_000,
            WRAP_UNIX - 1,
            WRAP_UNIX,
            WRAP_UNIX + 1,
            DiameterTime::MAX_UNIX,
        ] {
            assert_eq!(DiameterTime::from_unix(unix).unwrap().to_unix(), unix);
        }
    }

    #[test]
    fn time_from_unix_rejects_out_of_range_seconds() {
        assert_eq!(DiameterTime::from_unix(DiameterTime::MIN_UNIX - 1), None);
        assert_eq!(DiameterTime::from_unix(DiameterTime::MAX_UNIX + 1), None);
        assert_eq!(DiameterTime::from_unix(i64::MIN), None);
        assert_eq!(DiameterTime::from_unix(i64::MAX), None);
        assert_eq!(DiameterTime::from_unix(-NTP_UNIX_OFFSET), None, "1900");
    }

    #[test]
    fn time_order_follows_the_instant_across_the_2036_wrap() {
        // 0xFFFF_FFFF is the last second before the wrap, 0 the first after.
        assert!(DiameterTime(0) > DiameterTime(0xFFFF_FFFF));
        assert!(DiameterTime(0x8000_0000) < DiameterTime(0xFFFF_FFFF));
        assert!(DiameterTime(0x7FFF_FFFF) > DiameterTime(0));
    }

    #[test]
    fn time_decodes_four_bytes() {
        assert_eq!(
            decode_time(&[0xFF, 0xFF, 0xFF, 0xFF]),
            Ok(DiameterTime(u32::MAX))
        );
        assert_eq!(
            decode_value(AvpType::Time, &[0x83, 0xAA, 0x7E, 0x80]),
            Ok(Value::Time(DiameterTime(0x83AA_7E80)))
        );
    }

    // ---- DiameterURI -------------------------------------------------------

    fn uri(s: &str) -> DiameterUri<'_> {
        decode_uri(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn uri_examples_of_rfc_6733_section_4_3_1() {
        use Transport::*;
        use UriProtocol::*;
        type Case = (
            &'static str,
            u16,
            bool,
            Option<Transport>,
            Option<UriProtocol>,
        );
        let cases: [Case; 6] = [
            (
                "aaa://host.example.com;transport=tcp",
                3868,
                false,
                Some(Tcp),
                None,
            ),
            (
                "aaa://host.example.com:6666;transport=tcp",
                6666,
                true,
                Some(Tcp),
                None,
            ),
            (
                "aaa://host.example.com;protocol=diameter",
                3868,
                false,
                None,
                Some(Diameter),
            ),
            (
                "aaa://host.example.com:6666;protocol=diameter",
                6666,
                true,
                None,
                Some(Diameter),
            ),
            (
                "aaa://host.example.com:6666;transport=tcp;protocol=diameter",
                6666,
                true,
                Some(Tcp),
                Some(Diameter),
            ),
            (
                "aaa://host.example.com:1813;transport=udp;protocol=radius",
                1813,
                true,
                Some(Udp),
                Some(Radius),
            ),
        ];
        for (s, port, explicit, transport, protocol) in cases {
            let u = uri(s);
            assert_eq!(
                u,
                DiameterUri {
                    secure: false,
                    fqdn: "host.example.com",
                    port,
                    explicit_port: explicit,
                    transport,
                    protocol,
                },
                "{s}"
            );
            assert_eq!(u.to_string(), s, "display reproduces {s}");
        }
    }

    #[test]
    fn uri_default_ports_are_3868_and_5658_with_tls() {
        let plain = uri("aaa://ocs.example.com");
        assert_eq!(
            (plain.secure, plain.port, plain.explicit_port),
            (false, 3868, false)
        );
        let tls = uri("aaas://ocs.example.com");
        assert_eq!(
            (tls.secure, tls.port, tls.explicit_port),
            (true, 5658, false)
        );
        let tls_sctp = uri("aaas://ocs.example.com;transport=sctp");
        assert_eq!(
            (tls_sctp.port, tls_sctp.transport),
            (5658, Some(Transport::Sctp))
        );
        assert_eq!(uri("aaas://h:3868").port, 3868);
        assert_eq!(uri("aaa://h:5658").port, 5658);
        assert_eq!(
            uri("aaas://ocs.example.com").to_string(),
            "aaas://ocs.example.com"
        );
    }

    #[test]
    fn uri_port_edges() {
        assert_eq!(uri("aaa://h:0").port, 0);
        assert_eq!(uri("aaa://h:65535").port, 65535);
        assert_eq!(uri("aaa://h:00080").port, 80);
    }

    #[test]
    fn uri_scheme_and_parameters_ignore_case() {
        let u = uri("AAAS://Host.Example.Com:1;Transport=SCTP;PROTOCOL=Tacacs+");
        assert!(u.secure);
        assert_eq!(u.fqdn, "Host.Example.Com");
        assert_eq!(u.transport, Some(Transport::Sctp));
        assert_eq!(u.protocol, Some(UriProtocol::TacacsPlus));
        assert_eq!(
            uri("aaa://h;protocol=RADIUS").protocol,
            Some(UriProtocol::Radius)
        );
        // Parameters may come in either order.
        let u = uri("aaa://h;protocol=diameter;transport=tcp");
        assert_eq!(
            (u.transport, u.protocol),
            (Some(Transport::Tcp), Some(UriProtocol::Diameter))
        );
    }

    #[test]
    fn uri_rejects_malformed_input() {
        for bad in [
            "",
            "aaa:/host",
            "aaa:host",
            "http://host.example.com",
            "aaaa://host",
            "aaa://",
            "aaas://",
            "aaa://:3868",
            "aaa://host:",
            "aaa://host:port",
            "aaa://host:65536",
            "aaa://host:-1",
            "aaa://host:+1",
            "aaa://host:1:2",
            "aaa://host/path",
            "aaa://ho st",
            "aaa://host@realm",
            "aaa://[::1]:3868",
            "aaa://host;",
            "aaa://host;transport",
            "aaa://host;transport=",
            "aaa://host;transport=tls",
            "aaa://host;protocol=http",
            "aaa://host;transport=tcp;transport=sctp",
            "aaa://host;protocol=diameter;protocol=radius",
            "aaa://host;foo=bar",
            "aaa://h\u{f6}st",
        ] {
            assert!(
                is_value_error(decode_uri(bad.as_bytes())),
                "{bad:?} was accepted"
            );
        }
        assert!(is_value_error(decode_uri(&[b'a', b'a', b'a', 0xff])));
    }

    // ---- decode_value ------------------------------------------------------

    #[test]
    fn decode_value_dispatches_every_format() {
        let four = [0xff, 0xff, 0xff, 0xfe];
        let eight = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe];
        assert_eq!(
            decode_value(AvpType::OctetString, &[0, 0xff]),
            Ok(Value::OctetString(&[0, 0xff][..]))
        );
        assert_eq!(
            decode_value(AvpType::OctetString, &[]),
            Ok(Value::OctetString(&[][..]))
        );
        assert_eq!(
            decode_value(AvpType::Integer32, &four),
            Ok(Value::Integer32(-2))
        );
        assert_eq!(
            decode_value(AvpType::Unsigned32, &four),
            Ok(Value::Unsigned32(u32::MAX - 1))
        );
        assert_eq!(
            decode_value(AvpType::Enumerated, &four),
            Ok(Value::Enumerated(-2))
        );
        assert_eq!(
            decode_value(AvpType::Integer64, &eight),
            Ok(Value::Integer64(-2))
        );
        assert_eq!(
            decode_value(AvpType::Unsigned64, &eight),
            Ok(Value::Unsigned64(u64::MAX - 1))
        );
        assert!(matches!(
            decode_value(AvpType::Float32, &four),
            Ok(Value::Float32(f)) if f.is_nan()
        ));
        assert!(matches!(
            decode_value(AvpType::Float64, &eight),
            Ok(Value::Float64(f)) if f.is_nan()
        ));
        assert_eq!(
            decode_value(AvpType::Time, &four),
            Ok(Value::Time(DiameterTime(u32::MAX - 1)))
        );
        assert_eq!(
            decode_value(AvpType::Address, &[0, 1, 127, 0, 0, 1]),
            Ok(Value::Address(Address::Ipv4(Ipv4Addr::LOCALHOST)))
        );
        assert_eq!(
            decode_value(AvpType::UTF8String, "\u{20ac}".as_bytes()),
            Ok(Value::UTF8String("\u{20ac}"))
        );
        assert_eq!(
            decode_value(AvpType::DiameterIdentity, b"realm"),
            Ok(Value::DiameterIdentity("realm"))
        );
        assert!(matches!(
            decode_value(AvpType::DiameterURI, b"aaa://x"),
            Ok(Value::DiameterURI(DiameterUri { port: 3868, .. }))
        ));
        // Grouped data are not looked at here; the AVP iterator walks them.
        assert_eq!(
            decode_value(AvpType::Grouped, &[1, 2, 3]),
            Ok(Value::Grouped)
        );
    }
}
