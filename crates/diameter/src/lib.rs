//! gyro's Diameter codec: the wire format of RFC 6733, the data formats of
//! its section 4, a dictionary of the base, credit-control (RFC 8506) and
//! 3GPP Gy AVPs and commands, and validation of requests against it.
//!
//! The crate is sans-IO: it never touches a socket, a clock or a thread.
//!
//! * Decoding is zero-copy. [`Message::parse`] checks the header and returns
//!   a view over the receive buffer; [`Message::avps`] iterates the AVPs in
//!   place, [`Avp::grouped`] iterates a Grouped AVP's children, and typed
//!   accessors ([`Avp::u32`], [`Avp::utf8`], [`Avp::address`], ...) decode
//!   values without allocating.
//! * Encoding writes straight into a `bytes::BytesMut` with [`Encoder`]:
//!   message and Grouped AVP lengths are back-patched, padding is added,
//!   and [`Encoder::answer`] starts an answer from its request.
//! * [`header::frame_length`] splits a byte stream into messages.

pub mod app;
pub mod avp;
pub mod codes;
pub mod connection;
pub mod dict;
pub mod encode;
pub mod error;
pub mod header;
pub mod message;
pub mod peer;
pub mod types;
pub mod validate;

pub use avp::{Avp, AvpIter};
pub use codes::AvpId;
pub use dict::Dictionary;
pub use encode::{Encoder, Group};
pub use error::{Error, Result};
pub use header::Header;
pub use message::Message;
pub use types::{Address, AvpType, DiameterTime, DiameterUri, Value};
