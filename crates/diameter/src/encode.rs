//! Encoding straight into a [`BytesMut`], with message and grouped AVP
//! lengths back-patched once their contents are written.

use bytes::BytesMut;

use crate::avp::{flags as avp_flags, padded, Avp};
use crate::codes::{avp, AvpId};
use crate::error::{Error, Result};
use crate::header::{flags, Header, HEADER_LEN, MAX_MESSAGE_LEN, VERSION};
use crate::message::Message;
use crate::types::{Address, DiameterTime};

/// Writes one message into a buffer.
///
/// The encoder appends to whatever the buffer already holds, so many answers
/// can be built back to back in one output buffer and sent with one write.
/// AVP writers never fail; a message or AVP that outgrows the 24-bit length
/// fields is reported by [`Encoder::finish`].
pub struct Encoder<'b> {
    buf: &'b mut BytesMut,
    start: usize,
    too_large: Option<usize>,
}

/// An open Grouped AVP, to be closed with [`Encoder::end_group`].
#[must_use = "a group must be closed with Encoder::end_group"]
#[derive(Debug)]
pub struct Group(usize);

impl<'b> Encoder<'b> {
    /// Starts a message with this header; the Message Length is filled in by
    /// [`Encoder::finish`].
    pub fn new(
        buf: &'b mut BytesMut,
        flags: u8,
        command_code: u32,
        application_id: u32,
        hop_by_hop: u32,
        end_to_end: u32,
    ) -> Self {
        let start = buf.len();
        let h = Header {
            version: VERSION,
            length: 0,
            flags,
            command_code,
            application_id,
            hop_by_hop,
            end_to_end,
        };
        buf.extend_from_slice(&h.to_bytes());
        Encoder {
            buf,
            start,
            too_large: None,
        }
    }

    /// Starts a request (R set, P as given).
    pub fn request(
        buf: &'b mut BytesMut,
        command_code: u32,
        application_id: u32,
        proxiable: bool,
        hop_by_hop: u32,
        end_to_end: u32,
    ) -> Self {
        let f = flags::REQUEST | if proxiable { flags::PROXIABLE } else { 0 };
        Self::new(buf, f, command_code, application_id, hop_by_hop, end_to_end)
    }

    /// Starts the answer to `request` as RFC 6733 section 6.2 says: same
    /// Command Code, Application-ID, Hop-by-Hop and End-to-End identifiers;
    /// R cleared, P copied, E set when `error` is true (3xxx answers), T
    /// cleared; and the request's Session-Id, if any, as the first AVP.
    pub fn answer(buf: &'b mut BytesMut, request: &Message<'_>, error: bool) -> Self {
        let h = request.header();
        let f = (h.flags & flags::PROXIABLE) | if error { flags::ERROR } else { 0 };
        let mut e = Self::new(
            buf,
            f,
            h.command_code,
            h.application_id,
            h.hop_by_hop,
            h.end_to_end,
        );
        if let Some(sid) = request.find(avp::SESSION_ID) {
            e.echo(avp::SESSION_ID, &sid);
        }
        e
    }

    /// Bytes written so far for this message.
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// True when nothing but the header has been written.
    pub fn is_empty(&self) -> bool {
        self.len() <= HEADER_LEN
    }

    /// The AVP header for `data_len` bytes of data (its first `.1` bytes).
    #[inline(always)]
    fn header_bytes(&mut self, id: AvpId, data_len: usize) -> ([u8; 12], usize) {
        let hlen = if id.vendor != 0 { 12 } else { 8 };
        let len = hlen + data_len;
        if len > MAX_MESSAGE_LEN {
            self.too_large.get_or_insert(len);
        }
        let f = if id.vendor != 0 {
            id.flags | avp_flags::VENDOR
        } else {
            id.flags & !avp_flags::VENDOR
        };
        let mut h = [0u8; 12];
        h[..4].copy_from_slice(&id.code.to_be_bytes());
        h[4..8].copy_from_slice(&(((f as u32) << 24) | (len as u32 & 0x00FF_FFFF)).to_be_bytes());
        h[8..].copy_from_slice(&id.vendor.to_be_bytes());
        (h, hlen)
    }

    // Bytes are appended with `BytesMut::extend_from_slice`, which inlines
    // (`BufMut::put_slice` is an out-of-line call per AVP), so copies of a
    // size known here become a few moves instead of a `memcpy` call.

    // Always inlined: it is most of the work of every AVP written, and a
    // call per AVP cost as much again (measured with callgrind).
    #[inline(always)]
    fn avp_header(&mut self, id: AvpId, data_len: usize) {
        let (h, n) = self.header_bytes(id, data_len);
        if n == 12 {
            self.buf.extend_from_slice(&h);
        } else {
            self.buf.extend_from_slice(&h[..8]);
        }
    }

    /// Writes an AVP of fixed-size data (no padding needed): header and
    /// data are put together on the stack and appended with one copy of a
    /// length known at compile time (two copies and their capacity checks
    /// cost about twice as much per AVP, measured with callgrind).
    #[inline]
    fn fixed<const N: usize>(&mut self, id: AvpId, data: [u8; N]) -> &mut Self {
        const { assert!(N <= 8) };
        let (h, n) = self.header_bytes(id, N);
        let mut out = [0u8; 20];
        out[..12].copy_from_slice(&h);
        if n == 12 {
            out[12..12 + N].copy_from_slice(&data);
            self.buf.extend_from_slice(&out[..12 + N]);
        } else {
            out[8..8 + N].copy_from_slice(&data);
            self.buf.extend_from_slice(&out[..8 + N]);
        }
        self
    }

    /// Pads data of `data_len` bytes to a multiple of four: four zero bytes
    /// are appended (a copy of a constant size, where one of 0 to 3 bytes
    /// cost a call) and the buffer cut back to the padded length.
    #[inline]
    fn pad(&mut self, data_len: usize) {
        let end = self.buf.len() + padded(data_len) - data_len;
        self.buf.extend_from_slice(&[0; 4]);
        self.buf.truncate(end);
    }

    /// Writes an AVP whose data are these bytes (OctetString, UTF8String,
    /// DiameterIdentity, DiameterURI, IPFilterRule), then padding.
    pub fn octets(&mut self, id: AvpId, data: &[u8]) -> &mut Self {
        self.buf.reserve(12 + padded(data.len()));
        self.avp_header(id, data.len());
        self.buf.extend_from_slice(data);
        self.pad(data.len());
        self
    }

    /// Writes a text AVP (UTF8String, DiameterIdentity, DiameterURI,
    /// IPFilterRule).
    pub fn str(&mut self, id: AvpId, s: &str) -> &mut Self {
        self.octets(id, s.as_bytes())
    }

    /// Writes an Unsigned32 AVP.
    pub fn u32(&mut self, id: AvpId, v: u32) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes an Unsigned64 AVP.
    pub fn u64(&mut self, id: AvpId, v: u64) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes an Integer32 (or Enumerated) AVP.
    pub fn i32(&mut self, id: AvpId, v: i32) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes an Integer64 AVP.
    pub fn i64(&mut self, id: AvpId, v: i64) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes a Float32 AVP.
    pub fn f32(&mut self, id: AvpId, v: f32) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes a Float64 AVP.
    pub fn f64(&mut self, id: AvpId, v: f64) -> &mut Self {
        self.fixed(id, v.to_be_bytes())
    }

    /// Writes a Time AVP.
    pub fn time(&mut self, id: AvpId, t: DiameterTime) -> &mut Self {
        self.u32(id, t.0)
    }

    /// Writes an Address AVP.
    pub fn address(&mut self, id: AvpId, a: &Address<'_>) -> &mut Self {
        let n = a.wire_len();
        self.avp_header(id, n);
        a.write_to(&mut *self.buf);
        self.pad(n);
        self
    }

    /// Writes the data of `a`, an AVP of a request, under `id`'s header:
    /// what an answer repeats of its request (Session-Id, CC-Request-Type,
    /// CC-Request-Number) is the answer's own AVP, so its flags are the
    /// ones its definition prescribes (M as `id` says, V only with a
    /// vendor, P and the reserved bits clear: RFC 6733 section 4.1), not
    /// the ones the sender set.
    pub fn echo(&mut self, id: AvpId, a: &Avp<'_>) -> &mut Self {
        self.octets(id, a.data())
    }

    /// Copies an AVP exactly as received (for Failed-AVP and Proxy-Info),
    /// then padding.
    pub fn raw_avp(&mut self, a: &Avp<'_>) -> &mut Self {
        let raw = a.raw();
        self.buf.extend_from_slice(raw);
        self.pad(raw.len());
        self
    }

    /// Opens a Grouped AVP; write its children, then call
    /// [`Encoder::end_group`]. Groups nest.
    pub fn begin_group(&mut self, id: AvpId) -> Group {
        let at = self.buf.len();
        self.avp_header(id, 0);
        Group(at)
    }

    /// Closes a Grouped AVP, back-patching its length.
    pub fn end_group(&mut self, g: Group) -> &mut Self {
        let len = self.buf.len() - g.0;
        if len > MAX_MESSAGE_LEN {
            self.too_large.get_or_insert(len);
        }
        let b = &mut self.buf[g.0 + 5..g.0 + 8];
        b.copy_from_slice(&(len as u32).to_be_bytes()[1..]);
        self
    }

    /// Finishes the message: back-patches Message Length and returns it.
    pub fn finish(self) -> Result<usize> {
        let len = self.buf.len() - self.start;
        if let Some(n) = self.too_large {
            self.buf.truncate(self.start);
            return Err(Error::TooLarge {
                what: "AVP",
                len: n,
            });
        }
        if len > MAX_MESSAGE_LEN {
            self.buf.truncate(self.start);
            return Err(Error::TooLarge {
                what: "message",
                len,
            });
        }
        let b = &mut self.buf[self.start + 1..self.start + 4];
        b.copy_from_slice(&(len as u32).to_be_bytes()[1..]);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{app, cmd};

    #[test]
    fn an_answer_repeats_the_session_id_with_its_own_flags() {
        let mut req = BytesMut::new();
        let mut e = Encoder::request(
            &mut req,
            cmd::CREDIT_CONTROL,
            app::CREDIT_CONTROL,
            true,
            7,
            9,
        );
        // Reserved bits set and M clear, as a careless sender might.
        e.str(
            AvpId {
                code: 263,
                vendor: 0,
                flags: 0x07,
            },
            "a;1;2",
        );
        e.finish().unwrap();
        let req = Message::parse(&req).unwrap();
        let mut out = BytesMut::new();
        let mut e = Encoder::answer(&mut out, &req, false);
        e.u32(avp::RESULT_CODE, 2001);
        e.finish().unwrap();
        let m = Message::parse(&out).unwrap();
        let sid = m.avps().next().unwrap().unwrap();
        assert_eq!(
            (sid.code(), sid.flags(), sid.data()),
            (263, 0x40, &b"a;1;2"[..])
        );
    }

    #[test]
    fn nested_groups_are_back_patched() {
        let mut buf = BytesMut::new();
        let mut e = Encoder::request(
            &mut buf,
            cmd::CREDIT_CONTROL,
            app::CREDIT_CONTROL,
            true,
            7,
            9,
        );
        e.str(avp::SESSION_ID, "a;1;2");
        let mscc = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        let rsu = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
        e.u64(avp::CC_TOTAL_OCTETS, 1000);
        e.end_group(rsu);
        e.u32(avp::RATING_GROUP, 10);
        e.end_group(mscc);
        let n = e.finish().unwrap();
        assert_eq!(n, buf.len());
        let m = Message::parse(&buf).unwrap();
        let g = m.find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL).unwrap();
        assert_eq!(g.length(), 8 + (8 + 16) + 12);
        let rsu = g.child(avp::REQUESTED_SERVICE_UNIT).unwrap();
        assert_eq!(
            rsu.child(avp::CC_TOTAL_OCTETS).unwrap().u64().unwrap(),
            1000
        );
        assert_eq!(g.child(avp::RATING_GROUP).unwrap().u32().unwrap(), 10);
    }

    #[test]
    fn answer_copies_ids_and_session_and_sets_flags() {
        let mut req = BytesMut::new();
        let mut e = Encoder::new(
            &mut req,
            flags::REQUEST | flags::PROXIABLE | flags::RETRANSMIT,
            272,
            4,
            0xdead,
            0xbeef,
        );
        e.u32(avp::AUTH_APPLICATION_ID, 4);
        e.str(avp::SESSION_ID, "gw;1;1");
        e.finish().unwrap();
        let m = Message::parse(&req).unwrap();
        let mut out = BytesMut::new();
        let mut a = Encoder::answer(&mut out, &m, false);
        a.u32(avp::RESULT_CODE, 2001);
        a.finish().unwrap();
        let ans = Message::parse(&out).unwrap();
        let h = ans.header();
        assert_eq!(h.flags, flags::PROXIABLE);
        assert_eq!(
            (h.hop_by_hop, h.end_to_end, h.command_code),
            (0xdead, 0xbeef, 272)
        );
        let first = ans.avps().next().unwrap().unwrap();
        assert_eq!(first.utf8().unwrap(), "gw;1;1");
    }

    #[test]
    fn appends_after_existing_bytes() {
        let mut buf = BytesMut::from(&b"xxxx"[..]);
        let e = Encoder::request(&mut buf, 280, 0, false, 1, 1);
        assert_eq!(e.finish().unwrap(), 20);
        assert_eq!(buf.len(), 24);
        assert!(Message::parse(&buf[4..]).is_ok());
    }
}
