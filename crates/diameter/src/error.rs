//! The crate's error type.

/// Everything that can go wrong while framing, decoding or encoding Diameter.
///
/// Errors carry enough context (offsets, codes) for the validator to build the
/// answer RFC 6733 section 7 prescribes, including a Failed-AVP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer bytes than a header (or than the declared length) are available.
    #[error("incomplete message: have {have} bytes, need {need}")]
    Incomplete {
        /// Bytes available.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The version octet is not 1 (answer 5011 DIAMETER_UNSUPPORTED_VERSION).
    #[error("unsupported Diameter version {0}")]
    UnsupportedVersion(u8),
    /// The header's Message Length is below 20, not a multiple of 4, above
    /// the configured maximum or does not match the bytes given.
    #[error("invalid message length {declared} (message has {actual} bytes)")]
    InvalidMessageLength {
        /// The Message Length field.
        declared: u32,
        /// Bytes actually given to the parser.
        actual: usize,
    },
    /// An AVP header is truncated, its AVP Length is below its header size, or
    /// the AVP (with padding) runs past the end of the enclosing message or
    /// grouped AVP (answer 5014 DIAMETER_INVALID_AVP_LENGTH).
    #[error("AVP {code} (vendor {vendor}) at offset {offset}: invalid AVP length {length}")]
    InvalidAvpLength {
        /// Offset of the AVP header from the start of the message.
        offset: usize,
        /// AVP code (0 when the header itself is truncated).
        code: u32,
        /// Vendor-Id (0 when absent).
        vendor: u32,
        /// AVP flags octet.
        flags: u8,
        /// The AVP Length field (0 when the header itself is truncated).
        length: u32,
    },
    /// The AVP data does not fit its data format (answer 5004
    /// DIAMETER_INVALID_AVP_VALUE, or 5014 when only the size is wrong).
    #[error("invalid {kind} value: {reason}")]
    InvalidValue {
        /// The data format that was expected.
        kind: &'static str,
        /// What is wrong with it.
        reason: &'static str,
        /// True when the problem is the size of the data (a 5014 case).
        length: bool,
    },
    /// An encoded message or AVP would exceed the 24-bit length field.
    #[error("encoded {what} is too large ({len} bytes)")]
    TooLarge {
        /// "message" or "AVP".
        what: &'static str,
        /// The size it would have had.
        len: usize,
    },
    /// Dictionary data could not be loaded (bad TOML, unknown type or AVP
    /// name in a grammar, duplicate definition, ...).
    #[error("dictionary: {reason}")]
    Dictionary {
        /// What is wrong, naming the AVP or command.
        reason: String,
    },
}

impl Error {
    pub(crate) fn value(kind: &'static str, reason: &'static str) -> Self {
        Error::InvalidValue {
            kind,
            reason,
            length: false,
        }
    }

    pub(crate) fn value_len(kind: &'static str, reason: &'static str) -> Self {
        Error::InvalidValue {
            kind,
            reason,
            length: true,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
