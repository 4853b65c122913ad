//! Diameter over TLS/TCP (RFC 6733 section 13), on rustls with the ring
//! provider: TLS 1.2 and 1.3, the server's certificate chain and key from
//! PEM files, client certificates required, optional or not asked for,
//! verified against a CA bundle.
//!
//! TLS starts as soon as a connection is accepted on a TLS listener, before
//! the CER. The identity the verified client certificate proves (its DNS
//! names and SHA-256 fingerprint, [`certificate_identity`]) goes to the
//! connection's peer state machine, which checks the CER's Origin-Host
//! against it (`gyro_diameter::peer::identity_refusal`).
//!
//! [`TlsContext::reload`] reads the files again (certificate, key and CA
//! bundle) and makes new connections use them; connections already open
//! keep the session they have. A reload that fails changes nothing.

use std::path::Path;
use std::sync::{Arc, RwLock};

use gyro_diameter::peer::CertificateIdentity;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{ClientAuth, TlsSection, TlsVersion};
use crate::error::Error;

/// The TLS settings every TLS listener of the server shares, reloadable.
pub struct TlsContext {
    section: TlsSection,
    current: RwLock<Loaded>,
}

/// What one load of the files made.
#[derive(Clone)]
struct Loaded {
    config: Arc<ServerConfig>,
    summary: CertificateSummary,
}

/// The server certificate in use, as the operator API and the logs show
/// it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertificateSummary {
    /// The DNS names of its subject alternative name extension.
    pub dns_names: Vec<String>,
    /// SHA-256 of the DER certificate, colon-separated hex.
    pub fingerprint_sha256: String,
    /// Certificates in the chain (the end-entity one included).
    pub chain_length: usize,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("section", &self.section)
            .field("certificate", &self.certificate())
            .finish()
    }
}

impl TlsContext {
    /// Reads the files `[tls]` names. Errors name the key and the file.
    pub fn load(section: &TlsSection) -> Result<TlsContext, Error> {
        let loaded = build(section)?;
        Ok(TlsContext {
            section: section.clone(),
            current: RwLock::new(loaded),
        })
    }

    /// Reads the certificate, key and CA bundle again: new connections get
    /// them, open ones keep theirs. On an error nothing changes.
    pub fn reload(&self) -> Result<CertificateSummary, Error> {
        let loaded = build(&self.section)?;
        let summary = loaded.summary.clone();
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(summary)
    }

    /// The server certificate in use.
    pub fn certificate(&self) -> CertificateSummary {
        self.read().summary
    }

    /// The rustls configuration for a connection accepted now.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.read().config)
    }

    /// The rustls configuration in use (for another protocol served with
    /// the same certificate, such as Nchf over HTTP/2).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.read().config
    }

    fn read(&self) -> Loaded {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The identity a (verified) certificate proves: its DNS subject
/// alternative names and the SHA-256 of its DER encoding.
pub fn certificate_identity(der: &[u8]) -> CertificateIdentity {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest.as_ref());
    let der = CertificateDer::from(der);
    let dns_names = webpki::EndEntityCert::try_from(&der)
        .map(|c| c.valid_dns_names().map(str::to_string).collect())
        .unwrap_or_default();
    CertificateIdentity { dns_names, sha256 }
}

/// A fingerprint as colon-separated upper-case hex (as `openssl x509
/// -fingerprint` prints it).
pub fn fingerprint_hex(sha256: &[u8; 32]) -> String {
    let mut s = String::with_capacity(95);
    for (i, b) in sha256.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{b:02X}"));
    }
    s
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path)
        .map_err(|e| Error::Config(format!("{key}: cannot read {}: {e}", path.display())))
}

fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Config(format!("{key}: {} is not valid PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "{key}: no certificate (-----BEGIN CERTIFICATE-----) in {}",
            path.display()
        )));
    }
    Ok(certs)
}

fn build(section: &TlsSection) -> Result<Loaded, Error> {
    let missing = |key: &str| Error::Config(format!("{key}: needed to serve TLS"));
    let cert_path = section.cert.as_deref().ok_or_else(|| missing("tls.cert"))?;
    let key_path = section.key.as_deref().ok_or_else(|| missing("tls.key"))?;
    let chain = certificates("tls.cert", cert_path)?;
    let key_pem = read("tls.key", key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        Error::Config(format!(
            "tls.key: no private key in {} ({e})",
            key_path.display()
        ))
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match section.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| Error::Config(format!("tls.min_version: {e}")))?;
    let verifier = match section.client_auth {
        ClientAuth::None => WebPkiClientVerifier::no_client_auth(),
        auth => {
            let ca_path = section
                .client_ca
                .as_deref()
                .ok_or_else(|| missing("tls.client_ca"))?;
            let mut roots = RootCertStore::empty();
            for c in certificates("tls.client_ca", ca_path)? {
                roots.add(c).map_err(|e| {
                    Error::Config(format!(
                        "tls.client_ca: a certificate in {} cannot be a trust anchor: {e}",
                        ca_path.display()
                    ))
                })?;
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let b = if auth == ClientAuth::Optional {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| Error::Config(format!("tls.client_ca: {e}")))?
        }
    };
    let identity = certificate_identity(&chain[0]);
    let summary = CertificateSummary {
        dns_names: identity.dns_names,
        fingerprint_sha256: fingerprint_hex(&identity.sha256),
        chain_length: chain.len(),
    };
    let config = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| {
            Error::Config(format!(
                "tls.key: {} does not go with tls.cert {}: {e}",
                key_path.display(),
                cert_path.display()
            ))
        })?;
    Ok(Loaded {
        config: Arc::new(config),
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_print_as_openssl_does() {
        let mut fp = [0u8; 32];
        fp[0] = 0xab;
        fp[31] = 0x01;
        let s = fingerprint_hex(&fp);
        assert!(s.starts_with("AB:00:") && s.ends_with(":00:01"), "{s}");
        assert_eq!(s.len(), 95);
    }

    #[test]
    fn missing_files_name_the_key_and_the_path() {
        let section = TlsSection {
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            cert: Some("/nonexistent/server.pem".into()),
            key: Some("/nonexistent/server.key".into()),
            client_ca: Some("/nonexistent/ca.pem".into()),
            ..TlsSection::default()
        };
        let e = TlsContext::load(&section).unwrap_err().to_string();
        assert!(
            e.contains("tls.cert") && e.contains("/nonexistent/server.pem"),
            "{e}"
        );
    }
}
