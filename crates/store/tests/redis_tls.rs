//! The Redis ledger over TLS with a password: a one-node Redis Cluster
//! (every slot on one master) that speaks only TLS, with a certificate
//! from a CA of the test's own and `requirepass`. The client connects with
//! `tls_ca` and the password, and charges; a wrong password and a client
//! that does not trust the CA are errors, not panics; when the node dies
//! and comes back, the ledger answers Unavailable meanwhile and then works
//! again by itself.

mod redis_support;

use gyro_store::redis::{Debit, Outcome, RedisLedger, RedisOptions, Reserve, Step, TopUp};
use gyro_store::ErrorKind;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use redis_support::*;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A TLS-only, password-protected one-node cluster; killed when dropped.
struct TlsNode {
    child: Child,
    port: u16,
}

impl Drop for TlsNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pem_files(dir: &Path) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "gyro test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()]).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let files = [
        ("ca.pem", ca.pem()),
        ("cert.pem", cert.pem()),
        ("key.pem", key.serialize_pem()),
    ];
    for (name, pem) in &files {
        std::fs::write(dir.join(name), pem).unwrap();
    }
    let path = |n: &str| dir.join(n).display().to_string();
    (path("ca.pem"), path("cert.pem"), path("key.pem"))
}

/// Starts the node in `dir` (with new certificates and its slots the first
/// time; again from its files afterwards).
fn start(dir: &Path, port: u16) -> TlsNode {
    let first = !dir.join("ca.pem").exists();
    let (ca, cert, key) = if first {
        pem_files(dir)
    } else {
        let path = |n: &str| dir.join(n).display().to_string();
        (path("ca.pem"), path("cert.pem"), path("key.pem"))
    };
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
        ])
        .args(["--tls-auth-clients", "no", "--tls-cluster", "yes"])
        .args(["--cluster-enabled", "yes", "--cluster-config-file"])
        .arg(dir.join("nodes.conf"))
        .arg("--dir")
        .arg(dir)
        .args([
            "--requirepass",
            "s3cret",
            "--save",
            "",
            "--appendonly",
            "yes",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    let node = TlsNode { child, port };
    let cli = |args: &[&str]| {
        Command::new("redis-cli")
            .args([
                "--tls",
                "--cacert",
                &ca,
                "-p",
                &port.to_string(),
                "-a",
                "s3cret",
            ])
            .arg("--no-auth-warning")
            .args(args)
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cli(&["ping"]).contains("PONG") {
        assert!(
            Instant::now() < deadline,
            "the TLS node did not start: {}",
            cli(&["ping"])
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    if first {
        cli(&["cluster", "addslotsrange", "0", "16383"]);
    }
    while !cli(&["cluster", "info"]).contains("cluster_state:ok") {
        assert!(
            Instant::now() < deadline,
            "the TLS node did not take its slots"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    node
}

#[tokio::test]
async fn the_ledger_charges_over_tls_with_a_password() {
    // Skipped (loudly) exactly when the other Redis tests are.
    if cluster_nodes().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::env::var("GYRO_REDIS_TLS_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(7398);
    let mut node = start(dir.path(), port);
    let base = RedisOptions {
        nodes: vec![format!("rediss://127.0.0.1:{}", node.port)],
        tls: true,
        tls_ca: Some(dir.path().join("ca.pem")),
        password: Some("s3cret".into()),
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(2),
        ..options(&[], "tls", "node-a")
    };
    let ledger = RedisLedger::connect(base.clone())
        .await
        .expect("connect over TLS");
    let a = acct(1);
    assert!(ledger.open_account(a, 500, 0, false).await.unwrap());
    let steps = [
        Step::Reserve(Reserve {
            account: a,
            request: "t;0".into(),
            session: "t".into(),
            key: rg(1),
            money: 100,
            units: 10,
            min_money: 1,
            expires: NOW.plus_secs(30),
            bundles: None,
        }),
        Step::Debit(Debit {
            account: a,
            request: "t;1".into(),
            reservation: Some(("t".into(), rg(1))),
            amount: 70,
            release: true,
            whole: false,
            cdr: cdr("t", 1, rg(1)),
            bundles: None,
        }),
    ];
    let answers = ledger.run(&steps, NOW).await;
    assert!(matches!(
        answers[1].as_ref().unwrap().outcome,
        Outcome::Debited {
            charged: 70,
            released: 30,
            ..
        }
    ));
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.reserved, s.debited), (430, 0, 70));
    assert_eq!(ledger.account_cdrs(a).await.unwrap().len(), 1);

    let wrong = RedisLedger::connect(RedisOptions {
        password: Some("guess".into()),
        ..base.clone()
    })
    .await;
    assert!(wrong.is_err(), "a wrong password connected");
    let untrusted = RedisLedger::connect(RedisOptions {
        tls_ca: None,
        ..base
    })
    .await;
    assert!(untrusted.is_err(), "a server the client does not trust");

    // The cluster goes away: a step is an error value (3004 for the
    // caller), not a hang or a panic; when it comes back, the same ledger
    // works again by itself, and the step retried with its request key
    // is applied once.
    drop(node);
    let top_up = Step::TopUp(TopUp {
        account: a,
        request: "top-up-1".into(),
        amount: 1000,
    });
    let e = ledger.step(&top_up, NOW).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    node = start(dir.path(), port);
    let deadline = Instant::now() + Duration::from_secs(15);
    let answer = loop {
        match ledger.step(&top_up, NOW).await {
            Ok(a) => break a,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                assert!(Instant::now() < deadline, "no recovery: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(answer.code, 2001);
    assert!(ledger.step(&top_up, NOW).await.unwrap().replayed);
    let s = ledger.account(a).await.unwrap().unwrap();
    assert_eq!((s.balance, s.topped_up, s.debited), (1430, 1000, 70));
    drop(node);
}
