//! The credit-control application's error type.

/// What can go wrong in the credit-control application.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A CCR the engine cannot take: answer it with `result_code`
    /// (Failed-AVP: the AVP with code `avp_code`, none when 0).
    #[error("invalid CCR: result code {result_code}, AVP {avp_code}")]
    InvalidCcr {
        /// Result-Code to answer with (5004, 5005, 5014, 3001).
        result_code: u32,
        /// Code of the offending or missing AVP (0 when not about an AVP).
        avp_code: u32,
    },
    /// A message could not be encoded (too large for a Diameter message).
    #[error("cannot encode: {0}")]
    Encode(String),
    /// The charging configuration or the data directory is unusable; the
    /// message names what and where.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// The Result-Code and the Failed-AVP code (0: none) of the answer to a
    /// CCR that failed with this error: its own for
    /// [`Error::InvalidCcr`], DIAMETER_UNABLE_TO_COMPLY otherwise.
    pub fn answer_codes(&self) -> (u32, u32) {
        match *self {
            Error::InvalidCcr {
                result_code,
                avp_code,
            } => (result_code, avp_code),
            _ => (gyro_diameter::codes::result::UNABLE_TO_COMPLY, 0),
        }
    }
}

/// Result with the application's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
