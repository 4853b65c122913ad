//! `gyro certs`: a throwaway certificate authority, a server certificate
//! and a client certificate for Diameter over TLS, for tests and first use
//! (not for production: the CA's key lies beside its certificate).
//!
//! Into the directory given:
//!
//! * `ca.pem`, `ca.key`: the CA (ECDSA P-256), made once and reused by
//!   later runs on the same directory, so certificates issued later (a new
//!   server certificate to reload, a second client) chain to it too;
//! * `server.pem`, `server.key`: the server certificate (DNS name
//!   `ocs.gyro.test` unless `--server-name` says otherwise), new at every
//!   run unless `--only client`;
//! * `client.pem`, `client.key` (or `--client-file NAME`): a client
//!   certificate whose DNS names are the Origin-Hosts given with
//!   `--client`; by default `load.gyro.test` and `*.gyro.test`, which
//!   covers every connection of `gyro load` (`load-1.gyro.test`, ...).
//!
//! Keys are written readable by their owner only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
};

/// The CA's subject: a CA found in the directory is recognised by it.
const CA_NAME: &str = "gyro throwaway CA";

/// Which certificates `gyro certs` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// Only the server certificate.
    Server,
    /// Only the client certificate.
    Client,
}

/// Options of `gyro certs`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Directory to write into (created when missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// DNS names of the server certificate (repeatable). Default
    /// `ocs.gyro.test` (gyro's default Origin-Host).
    #[arg(long = "server-name", value_name = "HOST", value_parser = dns_name)]
    pub server_names: Vec<String>,
    /// Origin-Hosts of the client certificate, as DNS names (repeatable;
    /// `*.example.net` covers one label). Default `load.gyro.test` and
    /// `*.gyro.test`.
    #[arg(long = "client", value_name = "ORIGIN_HOST", value_parser = dns_name)]
    pub clients: Vec<String>,
    /// File name (without extension) of the client certificate and key.
    #[arg(long, value_name = "NAME", default_value = "client")]
    pub client_file: String,
    /// Days the new certificates are valid (1 to 36500).
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub days: u32,
    /// Write only the server or only the client certificate.
    #[arg(long, value_enum)]
    pub only: Option<Only>,
}

/// Runs `gyro certs`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let written = make(args)?;
    for w in &written {
        println!(
            "{:<7} {}\n        {}\n        names: {}\n        SHA-256 {}",
            w.what,
            w.cert.display(),
            w.key.display(),
            w.names.join(", "),
            w.fingerprint
        );
    }
    let d = args.dir.display();
    println!(
        "\nTo serve Diameter over TLS (RFC 6733, port 5658), add to the configuration:\n\n\
         [tls]\n\
         listen = [\"127.0.0.1:5658\"]\n\
         cert = \"{d}/server.pem\"\n\
         key = \"{d}/server.key\"\n\
         client_ca = \"{d}/ca.pem\"\n\n\
         and load it over TLS with:\n\n\
         gyro load --target 127.0.0.1:5658 --tls --ca {d}/ca.pem --cert {d}/{c}.pem \
         --key {d}/{c}.key --server-name {s}",
        c = args.client_file,
        s = args
            .server_names
            .first()
            .map_or("ocs.gyro.test", String::as_str)
    );
    Ok(ExitCode::SUCCESS)
}

/// One certificate written.
#[derive(Debug)]
pub struct Written {
    /// "CA", "server" or "client".
    pub what: &'static str,
    /// Its certificate file.
    pub cert: PathBuf,
    /// Its key file.
    pub key: PathBuf,
    /// Its DNS names.
    pub names: Vec<String>,
    /// SHA-256 of its DER, colon-separated hex.
    pub fingerprint: String,
}

/// A DNS name a certificate can carry: dot-separated labels of letters,
/// digits and inner hyphens (at most 63 bytes each, 253 in all), the
/// first label possibly `*` (a wildcard covering one label).
fn dns_name(s: &str) -> Result<String, String> {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let rest = s.strip_prefix("*.").unwrap_or(s);
    if s.len() <= 253 && rest.split('.').all(label) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a DNS name (labels of letters, digits and inner hyphens, \
             separated by dots; `*.` may begin it)"
        ))
    }
}

/// Writes the certificates `args` asks for; returns what was written.
pub fn make(args: &Args) -> anyhow::Result<Vec<Written>> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let (ca_cert_path, ca_key_path) = (dir.join("ca.pem"), dir.join("ca.key"));
    let days = i64::from(args.days);
    let (ca, ca_key) = if ca_cert_path.exists() && ca_key_path.exists() {
        // Reuse: only the CA's name and key matter to what it signs.
        let pem = std::fs::read_to_string(&ca_key_path)
            .with_context(|| format!("reading {}", ca_key_path.display()))?;
        let key = KeyPair::from_pem(&pem)
            .with_context(|| format!("{} is not a private key", ca_key_path.display()))?;
        (ca_params(days)?.self_signed(&key)?, key)
    } else {
        let key = KeyPair::generate()?;
        let ca = ca_params(days)?.self_signed(&key)?;
        write(&ca_cert_path, &ca.pem(), false)?;
        write(&ca_key_path, &key.serialize_pem(), true)?;
        written.push(Written {
            what: "CA",
            fingerprint: fingerprint(ca.der()),
            cert: ca_cert_path,
            key: ca_key_path,
            names: vec![CA_NAME.to_string()],
        });
        (ca, key)
    };
    if args.only != Some(Only::Client) {
        let names = if args.server_names.is_empty() {
            vec!["ocs.gyro.test".to_string()]
        } else {
            args.server_names.clone()
        };
        written.push(issue(
            dir,
            "server",
            "server",
            names,
            ExtendedKeyUsagePurpose::ServerAuth,
            days,
            (&ca, &ca_key),
        )?);
    }
    if args.only != Some(Only::Server) {
        let names = if args.clients.is_empty() {
            vec!["load.gyro.test".to_string(), "*.gyro.test".to_string()]
        } else {
            args.clients.clone()
        };
        anyhow::ensure!(
            !args.client_file.is_empty()
                && !args.client_file.contains(['/', '\\'])
                && !matches!(args.client_file.as_str(), "ca" | "server"),
            "--client-file must be a plain file name other than ca and server"
        );
        written.push(issue(
            dir,
            "client",
            &args.client_file,
            names,
            ExtendedKeyUsagePurpose::ClientAuth,
            days,
            (&ca, &ca_key),
        )?);
    }
    Ok(written)
}

fn ca_params(days: i64) -> anyhow::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_NAME);
    dn.push(DnType::OrganizationName, "gyro");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut p, days);
    Ok(p)
}

fn validity(p: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(days);
    // Random serial numbers: a renewed certificate is told apart by its.
    let mut serial = [0u8; 16];
    fastrand::fill(&mut serial);
    serial[0] &= 0x7f;
    serial[0] |= 0x01;
    p.serial_number = Some(SerialNumber::from_slice(&serial));
}

fn issue(
    dir: &Path,
    what: &'static str,
    file: &str,
    names: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
    days: i64,
    (ca, ca_key): (&Certificate, &KeyPair),
) -> anyhow::Result<Written> {
    let mut p = CertificateParams::new(names.clone())
        .with_context(|| format!("the {what} names {names:?}"))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names[0].as_str());
    p.distinguished_name = dn;
    p.is_ca = IsCa::ExplicitNoCa;
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![usage];
    p.use_authority_key_identifier_extension = true;
    validity(&mut p, days);
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, ca, ca_key)?;
    let (cert_path, key_path) = (
        dir.join(format!("{file}.pem")),
        dir.join(format!("{file}.key")),
    );
    write(&key_path, &key.serialize_pem(), true)?;
    write(&cert_path, &cert.pem(), false)?;
    Ok(Written {
        what,
        fingerprint: fingerprint(cert.der()),
        cert: cert_path,
        key: key_path,
        names,
    })
}

/// SHA-256 of a DER certificate, colon-separated upper-case hex.
fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let mut fp = [0u8; 32];
    fp.copy_from_slice(d.as_ref());
    gyro_server::tls::fingerprint_hex(&fp)
}

/// Writes a file whole (through a temporary beside it, so a server that
/// reloads meanwhile never reads half a file); a key readable by its
/// owner only.
fn write(path: &Path, text: &str, secret: bool) -> anyhow::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        open.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut f = open
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}
