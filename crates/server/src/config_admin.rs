//! `[admin]`: the operator API (HTTP) that `gyro serve` runs beside
//! Diameter.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[admin]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Whether the admin API runs. Default true.
    pub enabled: bool,
    /// Address of the admin API. Default `127.0.0.1:3869`. gyro refuses
    /// to start with an address other than loopback and no `token_file`.
    pub listen: SocketAddr,
    /// File holding the bearer token every request but `/healthz` and
    /// `/readyz` must carry (`Authorization: Bearer <token>`). Default
    /// none: no token asked (loopback only).
    pub token_file: Option<PathBuf>,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 3869)),
            token_file: None,
        }
    }
}
