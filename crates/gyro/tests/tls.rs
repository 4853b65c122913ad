//! Diameter over TLS/TCP (RFC 6733 section 13) against a real `gyro serve`
//! with certificates made by `gyro certs`: TLS at connect, before the CER;
//! the client certificate's identity bound to the CER's Origin-Host (its
//! DNS name, or a configured fingerprint); client certificates required;
//! plain TCP and TLS listeners at once; the certificate reloaded by SIGHUP
//! and by the admin API while connections stay up; `gyro load --tls`; and
//! OpenSSL's client (TLS 1.3 and 1.2) against the listener.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use gyro_charging::RequestType;
use gyro_diameter::codes::{app, avp, cmd};
use gyro_diameter::header::frame_length;
use gyro_diameter::{Address, Encoder, Message};
use gyro_ocs::gy::encode_ccr;
use rustls::{ClientConnection, StreamOwned};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::{data_ccr, free_port, gyro, scratch, serve};

/// A running `gyro serve` with a plain and a TLS listener, killed when
/// dropped.
struct Server {
    child: Option<Child>,
    plain: SocketAddr,
    tls: SocketAddr,
    admin: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Server {
    /// Starts `gyro serve` on the certificates in `certs` with `extra`
    /// configuration lines (`[tls]` keys first, then any section), and an
    /// admin API when `admin` is set.
    fn start(dir: &Path, certs: &Path, tls_extra: &str, extra: &str, admin: bool) -> Server {
        let plain = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let tls = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin_port = free_port();
        let admin_section = if admin {
            format!("[admin]\nlisten = \"127.0.0.1:{admin_port}\"\n")
        } else {
            "[admin]\nenabled = false\n".to_string()
        };
        let config = format!(
            "[storage]\ndurability = \"none\"\n{admin_section}\
             [tls]\nlisten = [\"{tls}\"]\ncert = \"{c}/server.pem\"\nkey = \"{c}/server.key\"\n\
             {tls_extra}\n{extra}",
            c = certs.display()
        );
        let path = dir.join("gyro.toml");
        std::fs::write(&path, config).unwrap();
        let path = path.to_string_lossy().into_owned();
        let child = serve(plain, &dir.join("data"), &["-c", &path]);
        let server = Server {
            child: Some(child),
            plain,
            tls,
            admin: admin.then(|| format!("http://127.0.0.1:{admin_port}")),
        };
        if let Some(url) = &server.admin {
            let t = Instant::now();
            while post(&format!("{url}/readyz"), "GET").0 != 200 {
                assert!(t.elapsed() < Duration::from_secs(30), "never ready");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        server
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }
}

/// `gyro certs DIR ARGS...`; panics when it fails.
fn make_certs(dir: &Path, args: &[&str]) {
    let d = dir.to_string_lossy();
    let mut all = vec!["certs", &d];
    all.extend_from_slice(args);
    let (code, out, err) = gyro(&all);
    assert_eq!(code, 0, "gyro certs {args:?}: {out}{err}");
}

/// A directory with a CA, the server certificate for ocs.gyro.test and a
/// client certificate `pgw1.pem` for pgw1.tls.test.
fn pki(name: &str) -> PathBuf {
    let dir = scratch(name);
    let certs_dir = dir.join("certs");
    make_certs(
        &certs_dir,
        &["--client", "pgw1.tls.test", "--client-file", "pgw1"],
    );
    dir
}

fn pem_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

fn fingerprint(der: &[u8]) -> String {
    let id = gyro_server::tls::certificate_identity(der);
    gyro_server::tls::fingerprint_hex(&id.sha256)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// Connects over TLS to `addr`, trusting the CA of `certs`, presenting the
/// client certificate `client` (`certs/<client>.pem`) if given; returns the
/// stream once the handshake is done, or the error.
fn tls_connect(addr: SocketAddr, certs: &Path, client: Option<&str>) -> Result<Tls, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certs(&certs.join("ca.pem")) {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some(name) => {
            let chain = pem_certs(&certs.join(format!("{name}.pem")));
            let key = PrivateKeyDer::from_pem_file(certs.join(format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("ocs.gyro.test").unwrap();
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| e.to_string())?;
    }
    Ok(tls)
}

/// The SHA-256 of the certificate the server presented.
fn presented(tls: &Tls) -> String {
    fingerprint(&tls.conn.peer_certificates().expect("server certificate")[0])
}

/// A blocking Diameter peer over any stream.
struct Peer<S: Read + Write> {
    s: S,
    buf: Vec<u8>,
    host: String,
    next: u32,
}

impl<S: Read + Write> Peer<S> {
    fn new(s: S, host: &str) -> Self {
        Peer {
            s,
            buf: Vec::new(),
            host: host.to_string(),
            next: 1,
        }
    }

    /// One whole message, or None once the server closed (or failed).
    fn recv(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Ok(Some(n)) = frame_length(&self.buf, 1 << 20) {
                if self.buf.len() >= n {
                    return Some(self.buf.drain(..n).collect());
                }
            }
            let mut tmp = [0u8; 16384];
            match self.s.read(&mut tmp) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            }
        }
    }

    fn send(&mut self, b: &[u8]) -> bool {
        self.s.write_all(b).and_then(|_| self.s.flush()).is_ok()
    }

    /// Sends a CER for credit control (with Inband-Security-Id
    /// NO_INBAND_SECURITY, as a TLS/TCP peer does) and returns the CEA.
    fn cer(&mut self) -> Option<Vec<u8>> {
        self.next += 1;
        let mut b = BytesMut::new();
        let mut e = Encoder::request(
            &mut b,
            cmd::CAPABILITIES_EXCHANGE,
            app::COMMON,
            false,
            self.next,
            self.next,
        );
        e.str(avp::ORIGIN_HOST, &self.host)
            .str(avp::ORIGIN_REALM, "tls.test")
            .address(
                avp::HOST_IP_ADDRESS,
                &Address::from(std::net::IpAddr::from([127, 0, 0, 1])),
            )
            .u32(avp::VENDOR_ID, 0)
            .str(avp::PRODUCT_NAME, "tls test")
            .u32(avp::INBAND_SECURITY_ID, 0)
            .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
        e.finish().unwrap();
        if !self.send(&b) {
            return None;
        }
        self.recv()
    }

    /// Sends a data CCR of `kind` for `session` and returns its
    /// Result-Code.
    fn ccr(&mut self, session: &str, kind: RequestType, number: u32) -> Option<u32> {
        let req = data_ccr(
            &self.host,
            0x7100_0000,
            session,
            "46700000042",
            kind,
            number,
            1000,
        );
        let mut b = BytesMut::new();
        encode_ccr(&mut b, &req, 0x7100 | number, &self.host, "tls.test").unwrap();
        if !self.send(&b) {
            return None;
        }
        self.recv().and_then(|a| result_code(&a))
    }
}

fn result_code(b: &[u8]) -> Option<u32> {
    Message::parse(b).ok()?.find(avp::RESULT_CODE)?.u32().ok()
}

fn error_message(b: &[u8]) -> String {
    Message::parse(b)
        .ok()
        .and_then(|m| m.find(avp::ERROR_MESSAGE))
        .map(|a| String::from_utf8_lossy(a.data()).into_owned())
        .unwrap_or_default()
}

/// Opens a TLS connection presenting `client`, exchanges capabilities as
/// `host`; returns the peer and the CEA.
fn open(server: &Server, certs: &Path, client: &str, host: &str) -> (Peer<Tls>, Vec<u8>) {
    let tls = tls_connect(server.tls, certs, Some(client)).expect("TLS handshake");
    let mut p = Peer::new(tls, host);
    let cea = p.cer().expect("CEA");
    (p, cea)
}

/// An HTTP request without body: (status, body).
fn post(url: &str, method: &str) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let r = if method == "GET" {
        agent.get(url).call()
    } else {
        agent.post(url).send_empty()
    };
    match r {
        Ok(mut r) => {
            let status = r.status().as_u16();
            let body = r.body_mut().read_json().unwrap_or(serde_json::Value::Null);
            (status, body)
        }
        Err(_) => (0, serde_json::Value::Null),
    }
}

#[test]
fn a_client_certificate_naming_the_origin_host_opens_and_charges() {
    let dir = pki("tls-open");
    let certs = dir.join("certs");
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", false);
    let (mut p, cea) = open(&server, &certs, "pgw1", "pgw1.tls.test");
    assert_eq!(result_code(&cea), Some(2001), "{}", error_message(&cea));
    // RFC 6733 section 13: TLS/TCP port, so no in-band security: the CEA
    // says NO_INBAND_SECURITY (0) or nothing.
    let m = Message::parse(&cea).unwrap();
    assert!(m
        .find(avp::INBAND_SECURITY_ID)
        .is_none_or(|a| a.u32().ok() == Some(0)));
    assert_eq!(
        p.ccr("pgw1.tls.test;1;1", RequestType::Initial, 0),
        Some(2001)
    );
    assert_eq!(
        p.ccr("pgw1.tls.test;1;1", RequestType::Termination, 1),
        Some(2001)
    );
}

#[test]
fn the_same_certificate_for_another_origin_host_gets_3010_and_a_close() {
    let dir = pki("tls-mismatch");
    let certs = dir.join("certs");
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", false);
    let (mut p, cea) = open(&server, &certs, "pgw1", "pgw2.tls.test");
    assert_eq!(result_code(&cea), Some(3010));
    assert!(Message::parse(&cea).unwrap().header().is_error());
    let text = error_message(&cea);
    assert!(
        text.contains("pgw2.tls.test") && text.contains("pgw1.tls.test"),
        "{text}"
    );
    assert!(
        p.recv().is_none(),
        "the connection is closed after the 3010"
    );
}

#[test]
fn without_a_client_certificate_the_required_handshake_fails() {
    let dir = pki("tls-required");
    let certs = dir.join("certs");
    let ca = format!(
        "client_ca = \"{}/ca.pem\"\nclient_auth = \"required\"",
        certs.display()
    );
    let server = Server::start(&dir, &certs, &ca, "", false);
    // TLS 1.3 lets the client finish its side before the server has seen
    // its (empty) certificate: the refusal then arrives as an alert at the
    // first read. Either way no CEA ever comes.
    match tls_connect(server.tls, &certs, None) {
        Err(e) => assert!(e.to_lowercase().contains("certificate"), "{e}"),
        Ok(tls) => {
            let mut p = Peer::new(tls, "pgw1.tls.test");
            assert!(p.cer().is_none(), "a CEA without a client certificate");
        }
    }
    // A certificate from another CA is refused too.
    let other = dir.join("other");
    make_certs(
        &other,
        &["--client", "pgw1.tls.test", "--client-file", "pgw1"],
    );
    let foreign = tls_connect(
        server.tls,
        &certs_with_client_of(&dir, &other),
        Some("pgw1"),
    );
    if let Ok(tls) = foreign {
        let mut p = Peer::new(tls, "pgw1.tls.test");
        assert!(p.cer().is_none(), "a CEA for a certificate of another CA");
    }
    // The certificate of the right CA still opens.
    let (_, cea) = open(&server, &certs, "pgw1", "pgw1.tls.test");
    assert_eq!(result_code(&cea), Some(2001));
}

/// A directory trusting the CA of `certs_dir`, with the client certificate
/// of `other` (issued by another CA).
fn certs_with_client_of(dir: &Path, other: &Path) -> PathBuf {
    let mixed = dir.join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    std::fs::copy(dir.join("certs/ca.pem"), mixed.join("ca.pem")).unwrap();
    for f in ["pgw1.pem", "pgw1.key"] {
        std::fs::copy(other.join(f), mixed.join(f)).unwrap();
    }
    mixed
}

#[test]
fn a_configured_fingerprint_admits_its_certificate_and_refuses_another() {
    let dir = pki("tls-fingerprint");
    let certs = dir.join("certs");
    make_certs(
        &certs,
        &[
            "--only",
            "client",
            "--client",
            "pgw2.tls.test",
            "--client-file",
            "pgw2",
        ],
    );
    let fp1 = fingerprint(&pem_certs(&certs.join("pgw1.pem"))[0]);
    let fp2 = fingerprint(&pem_certs(&certs.join("pgw2.pem"))[0]);
    // pgw1 must present exactly its certificate (whatever its names);
    // "pgw3.tls.test" is expected to present pgw1's, so pgw2's is refused
    // although it chains to the same CA.
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let identities = format!(
        "[[peers.identity]]\norigin_host = \"pgw1.tls.test\"\nfingerprint_sha256 = \"{fp1}\"\n\
         [[peers.identity]]\norigin_host = \"pgw3.tls.test\"\nfingerprint_sha256 = \"{fp1}\"\n"
    );
    let server = Server::start(&dir, &certs, &ca, &identities, false);
    let (mut p, cea) = open(&server, &certs, "pgw1", "pgw1.tls.test");
    assert_eq!(result_code(&cea), Some(2001), "{}", error_message(&cea));
    assert_eq!(
        p.ccr("pgw1.tls.test;2;1", RequestType::Initial, 0),
        Some(2001)
    );
    let (mut p, cea) = open(&server, &certs, "pgw2", "pgw3.tls.test");
    assert_eq!(result_code(&cea), Some(3010));
    assert!(
        error_message(&cea).contains("fingerprint"),
        "{}",
        error_message(&cea)
    );
    assert!(p.recv().is_none());
    assert_ne!(fp1, fp2);
}

#[test]
fn plain_tcp_and_tls_listeners_serve_at_once() {
    let dir = pki("tls-both");
    let certs = dir.join("certs");
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", false);
    let mut plain = Peer::new(TcpStream::connect(server.plain).unwrap(), "pgw9.tls.test");
    plain
        .s
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (mut secure, cea) = open(&server, &certs, "pgw1", "pgw1.tls.test");
    assert_eq!(result_code(&cea), Some(2001));
    let cea = plain.cer().expect("CEA over plain TCP");
    assert_eq!(result_code(&cea), Some(2001));
    for n in 0..3 {
        let kind = if n == 0 {
            RequestType::Initial
        } else {
            RequestType::Update
        };
        assert_eq!(plain.ccr("pgw9.tls.test;3;1", kind, n), Some(2001));
        assert_eq!(secure.ccr("pgw1.tls.test;3;1", kind, n), Some(2001));
    }
    // A TLS client on the plain port, or a plain CER on the TLS port, gets
    // nowhere.
    assert!(tls_connect(server.plain, &certs, Some("pgw1")).is_err());
    let mut wrong = Peer::new(TcpStream::connect(server.tls).unwrap(), "pgw9.tls.test");
    wrong
        .s
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert!(wrong.cer().is_none());
}

/// Connects until the server presents the certificate `fp` (a reload is
/// asynchronous), at most 10 s.
fn wait_for_certificate(server: &Server, certs: &Path, fp: &str) -> Tls {
    let t = Instant::now();
    loop {
        let tls = tls_connect(server.tls, certs, Some("pgw1")).expect("TLS handshake");
        if presented(&tls) == fp {
            return tls;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server never presented the new certificate"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_certificate_reloads_on_sighup_and_by_the_admin_api_while_connections_stay() {
    let dir = pki("tls-reload");
    let certs = dir.join("certs");
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", true);
    let first = fingerprint(&pem_certs(&certs.join("server.pem"))[0]);
    let tls = tls_connect(server.tls, &certs, Some("pgw1")).unwrap();
    assert_eq!(presented(&tls), first);
    let mut old = Peer::new(tls, "pgw1.tls.test");
    assert_eq!(result_code(&old.cer().unwrap()), Some(2001));
    assert_eq!(
        old.ccr("pgw1.tls.test;4;1", RequestType::Initial, 0),
        Some(2001)
    );

    // A new server certificate from the same CA, then SIGHUP.
    make_certs(&certs, &["--only", "server"]);
    let second = fingerprint(&pem_certs(&certs.join("server.pem"))[0]);
    assert_ne!(first, second);
    let status = Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let tls = wait_for_certificate(&server, &certs, &second);
    let mut new = Peer::new(tls, "pgw1.tls.test");
    assert_eq!(result_code(&new.cer().unwrap()), Some(2001));
    assert_eq!(
        new.ccr("pgw1.tls.test;4;2", RequestType::Initial, 0),
        Some(2001)
    );
    // The connection opened before the reload goes on.
    assert_eq!(
        old.ccr("pgw1.tls.test;4;1", RequestType::Update, 1),
        Some(2001)
    );

    // Again through the admin API, which answers the new certificate.
    make_certs(&certs, &["--only", "server"]);
    let third = fingerprint(&pem_certs(&certs.join("server.pem"))[0]);
    let admin = server.admin.as_deref().unwrap();
    let (status, body) = post(&format!("{admin}/v1/tls/reload"), "POST");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["fingerprint_sha256"], third.as_str());
    assert_eq!(body["dns_names"][0], "ocs.gyro.test");
    let tls = tls_connect(server.tls, &certs, Some("pgw1")).unwrap();
    assert_eq!(presented(&tls), third);

    // A broken file is refused and changes nothing.
    std::fs::write(certs.join("server.pem"), "not a certificate\n").unwrap();
    let (status, body) = post(&format!("{admin}/v1/tls/reload"), "POST");
    assert_eq!(status, 422, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("tls.cert"),
        "{body}"
    );
    let tls = tls_connect(server.tls, &certs, Some("pgw1")).unwrap();
    assert_eq!(presented(&tls), third);
    for (peer, n) in [(&mut old, 2), (&mut new, 1)] {
        let sid = if n == 2 {
            "pgw1.tls.test;4;1"
        } else {
            "pgw1.tls.test;4;2"
        };
        assert_eq!(peer.ccr(sid, RequestType::Termination, n), Some(2001));
    }
}

#[test]
fn gyro_load_runs_over_tls_and_counts_its_handshakes() {
    let dir = scratch("tls-load");
    let certs = dir.join("certs");
    // The default client certificate: load.gyro.test and *.gyro.test,
    // which cover load-1.gyro.test and load-2.gyro.test.
    make_certs(&certs, &[]);
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", false);
    let c = |f: &str| certs.join(f).to_string_lossy().into_owned();
    let target = server.tls.to_string();
    let (code, out, err) = gyro(&[
        "load",
        "--target",
        &target,
        "--tls",
        "--ca",
        &c("ca.pem"),
        "--cert",
        &c("client.pem"),
        "--key",
        &c("client.key"),
        "--server-name",
        "ocs.gyro.test",
        "-c",
        "2",
        "--count",
        "400",
        "--threads",
        "1",
        "--json",
        "-q",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["connections_opened"], 2, "{r}");
    assert_eq!(r["answered"], 400, "{r}");
    assert_eq!(r["result_codes"]["2001"], 400, "{r}");
    assert_eq!(r["tls_handshakes_us"]["count"], 2, "{r}");
    assert!(r["tls_handshakes_us"]["max"].as_u64().unwrap() > 0);
    // Without --tls the same port does not open.
    let (code, out, _) = gyro(&[
        "load", "--target", &target, "-c", "1", "--count", "10", "--json", "-q",
    ]);
    assert_ne!(code, 0);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["connections_opened"], 0, "{r}");
}

#[test]
fn a_tls_file_that_cannot_be_read_is_named_with_its_key() {
    let dir = scratch("tls-config");
    let config = dir.join("gyro.toml");
    let missing = dir.join("nowhere/server.pem");
    std::fs::write(
        &config,
        format!(
            "[tls]\nlisten = [\"127.0.0.1:{}\"]\ncert = \"{}\"\nkey = \"{}\"\nclient_auth = \"none\"\n",
            free_port(),
            missing.display(),
            dir.join("server.key").display()
        ),
    )
    .unwrap();
    let data = dir.join("data");
    let (code, _, err) = gyro(&[
        "serve",
        "-c",
        &config.to_string_lossy(),
        "--data-dir",
        &data.to_string_lossy(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("tls.cert") && err.contains(&missing.display().to_string()),
        "{err}"
    );
    assert!(!data.exists(), "nothing is created for a bad configuration");
}

/// OpenSSL's client, when installed: TLS 1.3 and TLS 1.2 handshakes with
/// a client certificate verify the server's chain.
#[test]
fn openssl_s_client_completes_tls_1_3_and_1_2_handshakes() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("openssl not installed: skipped");
        return;
    }
    let dir = pki("tls-openssl");
    let certs = dir.join("certs");
    let ca = format!("client_ca = \"{}/ca.pem\"", certs.display());
    let server = Server::start(&dir, &certs, &ca, "", false);
    let c = |f: &str| certs.join(f).to_string_lossy().into_owned();
    for version in ["-tls1_3", "-tls1_2"] {
        let out = Command::new("openssl")
            .args(["s_client", version, "-connect", &server.tls.to_string()])
            .args(["-servername", "ocs.gyro.test", "-verify_return_error"])
            .args(["-CAfile", &c("ca.pem"), "-cert", &c("pgw1.pem")])
            .args(["-key", &c("pgw1.key")])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Verify return code: 0 (ok)"),
            "{version}: {text}"
        );
        let want = if version == "-tls1_3" {
            "TLSv1.3"
        } else {
            "TLSv1.2"
        };
        assert!(text.contains(want), "{version}: {text}");
    }
}
