//! `[nchf]`: 5G converged charging (Nchf_ConvergedCharging, 3GPP TS
//! 32.291) over HTTP/2, beside Diameter. Off unless an address is given.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// `[nchf]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NchfSection {
    /// HTTP/2 with prior knowledge (h2c) on this address. Default none
    /// (off).
    pub listen: Option<SocketAddr>,
    /// HTTP/2 over TLS (ALPN `h2`) on this address, with the certificate,
    /// key and client certificate settings of `[tls]`. Default none.
    pub tls_listen: Option<SocketAddr>,
    /// The Service-Context-Id a PDU session charged over Nchf is rated
    /// under (the tariffs' `service_context`). Default `32251@3gpp.org`,
    /// the data tariffs Gy uses.
    pub service_context: String,
    /// Threads serving HTTP/2 (the charging itself runs on the workers'
    /// shards). 0 = as many as `server.workers` makes. Default 0.
    pub threads: usize,
    /// Largest request body accepted (bytes); a larger one is answered
    /// 413. Default 65536.
    pub max_body_bytes: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: requests one connection may have
    /// open at once (more are refused with RST_STREAM). Default 128.
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE (bytes): a request with larger
    /// headers is answered 431. Default 16384.
    pub max_header_list_size: u32,
    /// Connections open at once; one more is closed as soon as it is
    /// accepted. Default 1024.
    pub max_connections: usize,
    /// Requests being charged at once on the whole server; past it a
    /// request is answered 503 NF_CONGESTION at once. Default 4096.
    pub max_inflight: usize,
    /// Milliseconds a request may take to arrive whole (headers to the
    /// end of its body), and the TLS handshake; then 408 or a close.
    /// Default 10000.
    pub request_timeout_ms: u64,
}

impl Default for NchfSection {
    fn default() -> Self {
        NchfSection {
            listen: None,
            tls_listen: None,
            service_context: "32251@3gpp.org".to_string(),
            threads: 0,
            max_body_bytes: 65_536,
            max_concurrent_streams: 128,
            max_header_list_size: 16_384,
            max_connections: 1024,
            max_inflight: 4096,
            request_timeout_ms: 10_000,
        }
    }
}

impl NchfSection {
    /// Whether any Nchf listener is configured.
    pub fn enabled(&self) -> bool {
        self.listen.is_some() || self.tls_listen.is_some()
    }

    /// Checks the values; errors name the key.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |m: &str| Err(Error::Config(m.to_string()));
        if self.service_context.is_empty() {
            return bad("nchf.service_context must not be empty");
        }
        if self.max_body_bytes < 64 || self.max_body_bytes > 16 << 20 {
            return bad("nchf.max_body_bytes must be between 64 and 16777216");
        }
        if self.max_concurrent_streams == 0 {
            return bad("nchf.max_concurrent_streams must be at least 1");
        }
        if self.max_header_list_size < 1024 {
            return bad("nchf.max_header_list_size must be at least 1024");
        }
        if self.max_connections == 0 || self.max_inflight == 0 {
            return bad("nchf.max_connections and nchf.max_inflight must be at least 1");
        }
        if self.request_timeout_ms == 0 {
            return bad("nchf.request_timeout_ms must be at least 1");
        }
        if self.threads > 1024 {
            return bad("nchf.threads: at most 1024 (0 = as many as the workers)");
        }
        if let (Some(a), Some(b)) = (self.listen, self.tls_listen) {
            if a == b && a.port() != 0 {
                return bad("nchf.listen and nchf.tls_listen must differ");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_bad_values_name_their_key() {
        let s = NchfSection::default();
        assert!(!s.enabled());
        s.check().unwrap();
        let s = NchfSection {
            max_concurrent_streams: 0,
            ..NchfSection::default()
        };
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("nchf.max_concurrent_streams"));
        let mut s = NchfSection::default();
        s.service_context.clear();
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("nchf.service_context"));
    }
}
