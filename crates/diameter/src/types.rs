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
    if data.is_empty() {
        return Err(Error::value("DiameterIdentity", "empty"));
    }
    if !data.iter().all(|&c| (0x21..0x7f).contains(&c)) {
        return Err(Error::value(
            "DiameterIdentity",
            "contains a character outside visible ASCII",
        ));
    }
    decode_ascii(data, "DiameterIdentity")
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiameterTime(pub u32);

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
            uri.transport = Some(match v.to_ascii_lowercase().as_str() {
                "tcp" => Transport::Tcp,
                "sctp" => Transport::Sctp,
                "udp" => Transport::Udp,
                _ => return Err(Error::value(K, "unknown transport")),
            });
        } else if k.eq_ignore_ascii_case("protocol") && uri.protocol.is_none() {
            uri.protocol = Some(match v.to_ascii_lowercase().as_str() {
                "diameter" => UriProtocol::Diameter,
                "radius" => UriProtocol::Radius,
                "tacacs+" => UriProtocol::TacacsPlus,
                _ => return Err(Error::value(K, "unknown protocol")),
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
