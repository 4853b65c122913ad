//! A whole message read in place.

use crate::avp::{find, Avp, AvpIter};
use crate::codes::AvpId;
use crate::error::{Error, Result};
use crate::header::{Header, HEADER_LEN, VERSION};

/// A Diameter message borrowed from its receive buffer.
///
/// Parsing checks the header only (version, and that Message Length matches
/// the buffer and is a multiple of 4); AVPs are decoded lazily by
/// [`Message::avps`], so a parse allocates nothing and costs a few loads.
#[derive(Clone, Copy)]
pub struct Message<'a> {
    header: Header,
    buf: &'a [u8],
}

impl<'a> Message<'a> {
    /// Views `buf`, which must hold exactly one message.
    pub fn parse(buf: &'a [u8]) -> Result<Message<'a>> {
        let header = Header::parse(buf)?;
        if header.version != VERSION {
            return Err(Error::UnsupportedVersion(header.version));
        }
        let len = header.length as usize;
        if len < HEADER_LEN || len % 4 != 0 || len != buf.len() {
            return Err(Error::InvalidMessageLength {
                declared: header.length,
                actual: buf.len(),
            });
        }
        Ok(Message { header, buf })
    }

    /// The header.
    #[inline]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Command Code.
    #[inline]
    pub fn command_code(&self) -> u32 {
        self.header.command_code
    }

    /// Application-ID.
    #[inline]
    pub fn application_id(&self) -> u32 {
        self.header.application_id
    }

    /// R bit.
    #[inline]
    pub fn is_request(&self) -> bool {
        self.header.is_request()
    }

    /// The whole message as it is on the wire.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }

    /// The top-level AVPs, in order.
    #[inline]
    pub fn avps(&self) -> AvpIter<'a> {
        AvpIter::new(&self.buf[HEADER_LEN..], HEADER_LEN)
    }

    /// The first top-level AVP with this AVP's code and vendor (the flags
    /// of `id` are not compared). The search stops at a malformed AVP;
    /// validation reports those.
    #[inline]
    pub fn find(&self, id: AvpId) -> Option<Avp<'a>> {
        find(self.avps(), id.code, id.vendor)
    }

    /// The Session-Id, if the message carries a valid one.
    pub fn session_id(&self) -> Option<&'a str> {
        self.find(crate::codes::avp::SESSION_ID)?.utf8().ok()
    }
}

impl std::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("header", &self.header)
            .field("avps", &self.avps().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dwr() -> Vec<u8> {
        let mut m = vec![
            1, 0, 0, 0, 0x80, 0, 1, 0x18, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
        ];
        m.extend_from_slice(&[0, 0, 1, 8, 0x40, 0, 0, 11, b'a', b'.', b'b', 0]);
        m[3] = m.len() as u8;
        m
    }

    #[test]
    fn parses_header_and_finds_avps() {
        let buf = dwr();
        let m = Message::parse(&buf).unwrap();
        assert_eq!(m.command_code(), 280);
        assert!(m.is_request());
        assert_eq!(m.find(AvpId::m(264, 0)).unwrap().identity().unwrap(), "a.b");
        assert!(m.find(AvpId::m(264, 10415)).is_none());
    }

    #[test]
    fn rejects_wrong_version_and_length() {
        let mut buf = dwr();
        buf[0] = 2;
        assert_eq!(
            Message::parse(&buf).unwrap_err(),
            Error::UnsupportedVersion(2)
        );
        let mut buf = dwr();
        buf[3] += 4;
        assert!(matches!(
            Message::parse(&buf),
            Err(Error::InvalidMessageLength { .. })
        ));
        let mut buf = dwr();
        buf.extend_from_slice(&[0; 4]);
        assert!(Message::parse(&buf).is_err());
    }
}
