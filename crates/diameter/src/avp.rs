//! AVPs read in place: the AVP header, a borrowed AVP view and the iterator
//! over a run of AVPs (a message body or a Grouped AVP's data).

use crate::error::{Error, Result};
use crate::types::{self, Address, DiameterTime, DiameterUri};

pub use crate::codes::avp_flags as flags;

/// Size of an AVP header without Vendor-ID.
pub const AVP_HEADER_LEN: usize = 8;
/// Size of an AVP header with Vendor-ID.
pub const AVP_VENDOR_HEADER_LEN: usize = 12;

/// Rounds a length up to the next multiple of four.
#[inline]
pub const fn padded(len: usize) -> usize {
    (len + 3) & !3
}

/// One AVP, borrowed from the buffer that holds its message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Avp<'a> {
    code: u32,
    flags: u8,
    vendor_id: u32,
    header_len: u8,
    raw: &'a [u8],
    offset: usize,
}

impl<'a> Avp<'a> {
    /// AVP Code.
    #[inline]
    pub fn code(&self) -> u32 {
        self.code
    }

    /// The flags octet (see [`flags`]).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Vendor-ID, or 0 when the V bit is clear.
    #[inline]
    pub fn vendor_id(&self) -> u32 {
        self.vendor_id
    }

    /// V bit.
    #[inline]
    pub fn is_vendor_specific(&self) -> bool {
        self.flags & flags::VENDOR != 0
    }

    /// M bit.
    #[inline]
    pub fn is_mandatory(&self) -> bool {
        self.flags & flags::MANDATORY != 0
    }

    /// P bit.
    #[inline]
    pub fn is_protected(&self) -> bool {
        self.flags & flags::PROTECTED != 0
    }

    /// The AVP Length field: header plus data, without padding.
    #[inline]
    pub fn length(&self) -> usize {
        self.raw.len()
    }

    /// Offset of this AVP's header from the start of the message.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The AVP's data, without header or padding.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        &self.raw[self.header_len as usize..]
    }

    /// The AVP as it is on the wire: header plus data, without padding.
    /// Copying this (and padding it) reproduces the AVP exactly, which is what
    /// Failed-AVP and Proxy-Info echoing need.
    #[inline]
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// OctetString data.
    #[inline]
    pub fn octets(&self) -> &'a [u8] {
        self.data()
    }

    /// Integer32 (and Enumerated) data.
    #[inline]
    pub fn i32(&self) -> Result<i32> {
        types::decode_i32(self.data())
    }

    /// Enumerated data (an Integer32).
    #[inline]
    pub fn enumerated(&self) -> Result<i32> {
        self.i32()
    }

    /// Integer64 data.
    #[inline]
    pub fn i64(&self) -> Result<i64> {
        types::decode_i64(self.data())
    }

    /// Unsigned32 data.
    #[inline]
    pub fn u32(&self) -> Result<u32> {
        types::decode_u32(self.data())
    }

    /// Unsigned64 data.
    #[inline]
    pub fn u64(&self) -> Result<u64> {
        types::decode_u64(self.data())
    }

    /// Float32 data.
    #[inline]
    pub fn f32(&self) -> Result<f32> {
        types::decode_f32(self.data())
    }

    /// Float64 data.
    #[inline]
    pub fn f64(&self) -> Result<f64> {
        types::decode_f64(self.data())
    }

    /// UTF8String data, validated.
    #[inline]
    pub fn utf8(&self) -> Result<&'a str> {
        types::decode_utf8(self.data())
    }

    /// DiameterIdentity data (ASCII FQDN or realm), validated.
    #[inline]
    pub fn identity(&self) -> Result<&'a str> {
        types::decode_identity(self.data())
    }

    /// DiameterURI data, parsed.
    #[inline]
    pub fn uri(&self) -> Result<DiameterUri<'a>> {
        types::decode_uri(self.data())
    }

    /// Address data.
    #[inline]
    pub fn address(&self) -> Result<Address<'a>> {
        types::decode_address(self.data())
    }

    /// Time data (NTP seconds, with the 2036 wrap handled).
    #[inline]
    pub fn time(&self) -> Result<DiameterTime> {
        types::decode_time(self.data())
    }

    /// The children of a Grouped AVP. Offsets of the children stay relative
    /// to the start of the message.
    #[inline]
    pub fn grouped(&self) -> AvpIter<'a> {
        AvpIter::new(self.data(), self.offset + self.header_len as usize)
    }

    /// The first child of a Grouped AVP with this AVP's code and vendor.
    /// Malformed children end the search.
    pub fn child(&self, id: crate::codes::AvpId) -> Option<Avp<'a>> {
        find(self.grouped(), id.code, id.vendor)
    }
}

impl std::fmt::Debug for Avp<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Avp")
            .field("code", &self.code)
            .field("flags", &format_args!("{:#04x}", self.flags))
            .field("vendor_id", &self.vendor_id)
            .field("offset", &self.offset)
            .field("data", &format_args!("{:02x?}", self.data()))
            .finish()
    }
}

/// Iterates over a run of AVPs in place.
///
/// Each item is an AVP or the error that stops the run: after an error the
/// iterator yields nothing more, because AVP boundaries can no longer be
/// trusted. Every AVP yielded, including its padding, lies inside the run.
#[derive(Clone, Debug)]
pub struct AvpIter<'a> {
    rest: &'a [u8],
    offset: usize,
}

impl<'a> AvpIter<'a> {
    /// Iterates over `buf`, whose first byte is at `offset` from the start of
    /// the message (used for error reports).
    #[inline]
    pub fn new(buf: &'a [u8], offset: usize) -> Self {
        AvpIter { rest: buf, offset }
    }

    /// The bytes not yet iterated.
    #[inline]
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }

    /// The next AVP with this code and vendor, passing over the others
    /// reading only their headers; `None` at the end of the run or at a
    /// malformed AVP, as `self.flatten().find(..)` would give, and with the
    /// iterator left where that would leave it.
    pub fn next_matching(&mut self, code: u32, vendor_id: u32) -> Option<Avp<'a>> {
        loop {
            let buf = self.rest;
            let Some(h) = buf.get(..AVP_HEADER_LEN) else {
                // The end, or a cut header: `next` reports it.
                return self.next().and_then(|x| x.ok());
            };
            let c = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            let len = u32::from_be_bytes([0, h[5], h[6], h[7]]) as usize;
            let vendor = h[4] & flags::VENDOR != 0;
            let header_len = if vendor {
                AVP_VENDOR_HEADER_LEN
            } else {
                AVP_HEADER_LEN
            };
            let total = padded(len);
            if len < header_len || total > buf.len() || c == code {
                // Malformed (`next` reports it) or a candidate.
                match self.next() {
                    Some(Ok(a)) if a.code == code && a.vendor_id == vendor_id => return Some(a),
                    Some(Ok(_)) => continue,
                    _ => return None,
                }
            }
            self.rest = &buf[total..];
            self.offset += total;
        }
    }

    fn fail(&mut self, err: Error) -> Option<Result<Avp<'a>>> {
        self.rest = &[];
        Some(Err(err))
    }
}

impl<'a> Iterator for AvpIter<'a> {
    type Item = Result<Avp<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let buf = self.rest;
        if buf.is_empty() {
            return None;
        }
        let offset = self.offset;
        let Some(h) = buf.get(..AVP_HEADER_LEN) else {
            return self.fail(Error::InvalidAvpLength {
                offset,
                code: 0,
                vendor: 0,
                flags: 0,
                length: 0,
            });
        };
        let code = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let avp_flags = h[4];
        let length = u32::from_be_bytes([0, h[5], h[6], h[7]]);
        let (vendor_id, header_len) = if avp_flags & flags::VENDOR != 0 {
            match buf.get(8..12) {
                Some(v) => (
                    u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
                    AVP_VENDOR_HEADER_LEN,
                ),
                None => {
                    return self.fail(Error::InvalidAvpLength {
                        offset,
                        code,
                        vendor: 0,
                        flags: avp_flags,
                        length,
                    })
                }
            }
        } else {
            (0, AVP_HEADER_LEN)
        };
        let len = length as usize;
        let total = padded(len);
        if len < header_len || total > buf.len() {
            return self.fail(Error::InvalidAvpLength {
                offset,
                code,
                vendor: vendor_id,
                flags: avp_flags,
                length,
            });
        }
        self.rest = &buf[total..];
        self.offset += total;
        Some(Ok(Avp {
            code,
            flags: avp_flags,
            vendor_id,
            header_len: header_len as u8,
            raw: &buf[..len],
            offset,
        }))
    }
}

/// The first AVP of a run with this code and vendor; stops at a malformed AVP.
pub fn find<'a>(iter: AvpIter<'a>, code: u32, vendor_id: u32) -> Option<Avp<'a>> {
    for avp in iter {
        match avp {
            Ok(a) if a.code == code && a.vendor_id == vendor_id => return Some(a),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_matching_finds_what_flatten_and_filter_find_and_stops_where_they_stop() {
        let avp = |code: u32, flags: u8, vendor: Option<u32>, data: &[u8]| {
            let hl = if vendor.is_some() { 12 } else { 8 };
            let mut b = code.to_be_bytes().to_vec();
            b.push(flags);
            b.extend_from_slice(&((hl + data.len()) as u32).to_be_bytes()[1..]);
            if let Some(v) = vendor {
                b.extend_from_slice(&v.to_be_bytes());
            }
            b.extend_from_slice(data);
            b.resize(padded(b.len()), 0);
            b
        };
        let mut good = Vec::new();
        good.extend(avp(263, 0x40, None, b"sid"));
        good.extend(avp(284, 0x40, None, &avp(280, 0x40, None, b"h")));
        good.extend(avp(284, 0xc0, Some(10415), b"x"));
        good.extend(avp(284, 0x80, Some(0), b"v0"));
        good.extend(avp(1, 0, None, b""));
        good.extend(avp(284, 0x00, None, b"second"));
        let mut cut = good.clone();
        cut.extend_from_slice(&[0, 0, 1, 28, 0x40, 0, 0]);
        let mut bad_len = good[..good.len() - 16].to_vec();
        bad_len.extend(avp(284, 0x40, None, b"x"));
        bad_len.extend_from_slice(&[0, 0, 1, 28, 0x40, 0, 0, 4]);
        bad_len.extend(avp(284, 0x40, None, b"after"));
        let mut short_vendor = good.clone();
        short_vendor.extend_from_slice(&[0, 0, 1, 28, 0xc0, 0, 0, 12]);
        for buf in [&good, &cut, &bad_len, &short_vendor] {
            for (code, vendor) in [(284, 0), (284, 10415), (263, 0), (1, 0), (9, 0)] {
                let want: Vec<_> = AvpIter::new(buf, 20)
                    .flatten()
                    .filter(|a| a.code() == code && a.vendor_id() == vendor)
                    .map(|a| (a.offset(), a.raw()))
                    .collect();
                let mut it = AvpIter::new(buf, 20);
                let mut got = Vec::new();
                while let Some(a) = it.next_matching(code, vendor) {
                    got.push((a.offset(), a.raw()));
                }
                assert_eq!(got, want, "code {code} vendor {vendor}");
                assert!(it.next().is_none());
            }
        }
    }

    fn avps(buf: &[u8]) -> Vec<Result<Avp<'_>>> {
        AvpIter::new(buf, 20).collect()
    }

    #[test]
    fn five_byte_octet_string_has_length_13_and_takes_16_bytes() {
        let mut buf = vec![
            0, 0, 1, 7, 0x40, 0, 0, 13, b'h', b'e', b'l', b'l', b'o', 0, 0, 0,
        ];
        buf.extend_from_slice(&[0, 0, 1, 8, 0x40, 0, 0, 12, 0, 0, 0, 1]);
        let v = avps(&buf);
        assert_eq!(v.len(), 2);
        let a = v[0].as_ref().unwrap();
        assert_eq!((a.code(), a.length(), a.data()), (263, 13, &b"hello"[..]));
        assert_eq!(a.offset(), 20);
        let b = v[1].as_ref().unwrap();
        assert_eq!((b.code(), b.offset(), b.u32().unwrap()), (264, 36, 1));
    }

    #[test]
    fn vendor_header_is_twelve_bytes() {
        let buf = [0, 0, 3, 0x6a, 0xc0, 0, 0, 16, 0, 0, 0x28, 0xaf, 0, 0, 0, 9];
        let a = AvpIter::new(&buf, 0).next().unwrap().unwrap();
        assert_eq!((a.code(), a.vendor_id(), a.u32().unwrap()), (874, 10415, 9));
        assert!(a.is_vendor_specific() && a.is_mandatory() && !a.is_protected());
    }

    #[test]
    fn missing_padding_is_an_invalid_length() {
        let buf = [0, 0, 1, 7, 0x40, 0, 0, 13, b'h', b'e', b'l', b'l', b'o'];
        assert!(matches!(
            avps(&buf)[0],
            Err(Error::InvalidAvpLength {
                code: 263,
                length: 13,
                ..
            })
        ));
    }

    #[test]
    fn length_below_header_and_truncated_headers_are_invalid() {
        assert!(avps(&[0, 0, 1, 7, 0x40, 0, 0, 7])[0].is_err());
        assert!(avps(&[0, 0, 1, 7, 0xc0, 0, 0, 11, 0, 0, 0, 1])[0].is_err());
        assert!(avps(&[0, 0, 1, 7])[0].is_err());
        assert!(avps(&[0, 0, 1, 7, 0xc0, 0, 0, 12])[0].is_err());
    }

    #[test]
    fn iteration_stops_after_an_error() {
        let buf = [0, 0, 1, 7, 0x40, 0, 0, 200, 0, 0, 1, 8, 0x40, 0, 0, 12];
        let v = avps(&buf);
        assert_eq!(v.len(), 1);
        assert!(v[0].is_err());
    }

    #[test]
    fn grouped_children_keep_message_offsets() {
        // Grouped 456 at offset 20 holding Rating-Group 432 = 10.
        let buf = [
            0, 0, 1, 0xc8, 0x40, 0, 0, 20, 0, 0, 1, 0xb0, 0x40, 0, 0, 12, 0, 0, 0, 10,
        ];
        let g = AvpIter::new(&buf, 20).next().unwrap().unwrap();
        let c = g.child(crate::codes::avp::RATING_GROUP).unwrap();
        assert_eq!((c.offset(), c.u32().unwrap()), (28, 10));
    }
}
