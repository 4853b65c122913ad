//! gyro's 5G converged charging interface: Nchf_ConvergedCharging (3GPP
//! TS 32.290, TS 32.291, API version v3) over HTTP/2, for the PDU session
//! charging an SMF does.
//!
//! * `POST {apiRoot}/nchf-convergedcharging/v3/chargingdata` (Create),
//!   `.../chargingdata/{ChargingDataRef}/update` and `.../release`
//!   (TS 32.291 clause 6.1.3), over HTTP/2 with prior knowledge (h2c) or
//!   over TLS with ALPN `h2` ([`server`]).
//! * The same engine, accounts, tariffs, reservations, duplicate
//!   detection, supervision, group commit and CDRs as Gy: a request is
//!   mapped to the engine request a CCR becomes ([`mapping`]) and charged
//!   on the shard that owns the account, as a control operation of the
//!   runtime (`gyro_server::control`): its effects join that shard's
//!   group commit and the HTTP answer leaves only once they are durable,
//!   exactly like a CCA.
//! * Errors are ProblemDetails with the status and `cause` TS 29.500 and
//!   TS 32.291 give ([`problem`]); bodies are bounded, and so is HTTP/2
//!   (streams per connection, header list size, resets, connections,
//!   requests in flight).
//! * [`metrics`]: requests by operation and HTTP status and their
//!   latency, for the admin API's `/metrics`.
//! * [`client`]: a small HTTP/2 client for the load generator and tests.

pub mod client;
pub mod decode;
pub mod mapping;
pub mod metrics;
pub mod model;
pub mod problem;
pub mod reference;
pub mod server;
pub mod time;

pub use decode::decode_request;
pub use mapping::Operation;
pub use model::{ChargingDataRequest, ChargingDataResponse, ProblemDetails};
pub use problem::Problem;
pub use server::{Backend, Error, NchfServer};
