//! The 20-byte Diameter message header (RFC 6733 section 3) and stream framing.

use crate::error::{Error, Result};

/// Size of the Diameter message header in bytes.
pub const HEADER_LEN: usize = 20;

/// The only Diameter version there is.
pub const VERSION: u8 = 1;

/// Largest value the 24-bit Message Length field can hold.
pub const MAX_MESSAGE_LEN: usize = 0x00FF_FFFF;

/// Command flag bits (RFC 6733 section 3).
pub mod flags {
    /// R: the message is a request.
    pub const REQUEST: u8 = 0x80;
    /// P: the message may be proxied, relayed or redirected.
    pub const PROXIABLE: u8 = 0x40;
    /// E: the answer carries a protocol error (3xxx).
    pub const ERROR: u8 = 0x20;
    /// T: a request retransmitted after a link failover; a possible duplicate.
    pub const RETRANSMIT: u8 = 0x10;
    /// The four reserved bits: sent as zero, ignored on receipt.
    pub const RESERVED: u8 = 0x0F;
}

/// A decoded message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Version octet (1 for every valid message).
    pub version: u8,
    /// Message Length: header plus padded AVPs, in bytes.
    pub length: u32,
    /// Command flags (see [`flags`]).
    pub flags: u8,
    /// 24-bit Command Code.
    pub command_code: u32,
    /// Application-ID.
    pub application_id: u32,
    /// Hop-by-Hop Identifier.
    pub hop_by_hop: u32,
    /// End-to-End Identifier.
    pub end_to_end: u32,
}

impl Header {
    /// Reads the fixed header fields from the first 20 bytes of `buf`.
    ///
    /// This checks nothing but the size of `buf`: callers that need a valid
    /// message use [`crate::Message::parse`]; this is what lets an error
    /// answer (5011, 5015) still copy the identifiers of a broken request.
    pub fn parse(buf: &[u8]) -> Result<Header> {
        let b: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(Error::Incomplete {
                have: buf.len(),
                need: HEADER_LEN,
            })?;
        Ok(Header {
            version: b[0],
            length: u32::from_be_bytes([0, b[1], b[2], b[3]]),
            flags: b[4],
            command_code: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            application_id: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            hop_by_hop: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            end_to_end: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
        })
    }

    /// Writes the header as 20 bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.version;
        b[1..4].copy_from_slice(&self.length.to_be_bytes()[1..]);
        b[4] = self.flags;
        b[5..8].copy_from_slice(&self.command_code.to_be_bytes()[1..]);
        b[8..12].copy_from_slice(&self.application_id.to_be_bytes());
        b[12..16].copy_from_slice(&self.hop_by_hop.to_be_bytes());
        b[16..20].copy_from_slice(&self.end_to_end.to_be_bytes());
        b
    }

    /// R bit: this is a request.
    pub fn is_request(&self) -> bool {
        self.flags & flags::REQUEST != 0
    }

    /// P bit: the message is proxiable.
    pub fn is_proxiable(&self) -> bool {
        self.flags & flags::PROXIABLE != 0
    }

    /// E bit: an answer carrying a protocol error.
    pub fn is_error(&self) -> bool {
        self.flags & flags::ERROR != 0
    }

    /// T bit: a possibly retransmitted request.
    pub fn is_retransmit(&self) -> bool {
        self.flags & flags::RETRANSMIT != 0
    }
}

/// Finds the length of the message at the start of a byte stream.
///
/// Returns `Ok(None)` while fewer than 4 bytes are buffered (the length is not
/// known yet), `Ok(Some(len))` once the Message Length is readable and sane,
/// and an error when the stream cannot be framed any more: a version other
/// than 1 (RFC 6733 says such a stream cannot be trusted), a length below 20,
/// not a multiple of 4, or above `max_len`. A connection whose stream fails
/// here must be closed; nothing after it can be parsed.
pub fn frame_length(buf: &[u8], max_len: usize) -> Result<Option<usize>> {
    let Some(b) = buf.get(..4) else {
        return Ok(None);
    };
    if b[0] != VERSION {
        return Err(Error::UnsupportedVersion(b[0]));
    }
    let len = u32::from_be_bytes([0, b[1], b[2], b[3]]);
    let n = len as usize;
    if n < HEADER_LEN || n % 4 != 0 || n > max_len {
        return Err(Error::InvalidMessageLength {
            declared: len,
            actual: buf.len(),
        });
    }
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_every_field() {
        let h = Header {
            version: 1,
            length: 0x00ab_cdef & !3,
            flags: flags::REQUEST | flags::PROXIABLE | flags::RETRANSMIT,
            command_code: 0x00ff_fffe,
            application_id: 0xffff_ffff,
            hop_by_hop: 0x1234_5678,
            end_to_end: 0x9abc_def0,
        };
        let b = h.to_bytes();
        assert_eq!(Header::parse(&b).unwrap(), h);
        assert!(h.is_request() && h.is_proxiable() && h.is_retransmit() && !h.is_error());
    }

    #[test]
    fn header_needs_twenty_bytes() {
        assert_eq!(
            Header::parse(&[1; 19]),
            Err(Error::Incomplete { have: 19, need: 20 })
        );
    }

    #[test]
    fn framing_waits_for_length_then_checks_it() {
        assert_eq!(frame_length(&[1, 0, 0], 4096), Ok(None));
        assert_eq!(frame_length(&[1, 0, 0, 20], 4096), Ok(Some(20)));
        assert!(frame_length(&[2, 0, 0, 20], 4096).is_err());
        assert!(frame_length(&[1, 0, 0, 16], 4096).is_err());
        assert!(frame_length(&[1, 0, 0, 22], 4096).is_err());
        assert!(frame_length(&[1, 0, 0x10, 0], 4095).is_err());
        assert_eq!(frame_length(&[1, 0, 0x10, 0], 4096), Ok(Some(4096)));
    }
}
