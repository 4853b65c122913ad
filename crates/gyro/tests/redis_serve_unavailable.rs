//! `gyro serve` on the Redis Cluster ledger while the cluster stops
//! answering: requests are answered 3004 DIAMETER_TOO_BUSY ("nothing
//! happened") instead of hanging, and once the cluster answers again the
//! node serves by itself, a retransmission of a request answered 3004
//! charged once. The cluster is a private one-master cluster of this test
//! (a real `redis-server`, frozen with SIGSTOP and thawed with SIGCONT),
//! so that the shared test cluster is never disturbed.

#[path = "../../store/tests/redis_support/mod.rs"]
mod redis_support;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyro_charging::{AccountId, RequestType};
use gyro_store::redis::{RedisLedger, RedisOptions};
use redis_support::cluster_nodes;
use support::common::{result_code, Client};
use support::gateway::{exchange, Gateway};
use support::server::Server;
use support::{data_ccr, free_port, scratch, serve};

/// A one-master Redis Cluster owning every slot, killed when dropped.
struct OneNodeCluster {
    child: Child,
    port: u16,
}

impl OneNodeCluster {
    fn start(dir: &Path) -> OneNodeCluster {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-announce-ip", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--cluster-config-file")
            .arg(dir.join("nodes.conf"))
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let c = OneNodeCluster { child, port };
        let t = Instant::now();
        while c.cli(&["PING"]).trim() != "PONG" {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "redis-server never up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        c.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        while !c.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(t.elapsed() < Duration::from_secs(10), "cluster never ok");
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }
}

impl Drop for OneNodeCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MSISDN: &str = "46709000002";

#[test]
fn an_unanswering_cluster_gets_3004_and_the_node_recovers_by_itself() {
    // redis-server comes with the shared test cluster (installed by its
    // script when missing); without it the Redis tests are skipped.
    if cluster_nodes().is_none() {
        return;
    }
    let root = scratch("redis-unavailable");
    let redis_dir = root.join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let redis = OneNodeCluster::start(&redis_dir);
    std::fs::write(
        root.join("charging.toml"),
        format!(
            "[[tariff]]\nname = \"data\"\nservice_context = \"32251@3gpp.org\"\n\
             unit = \"octets\"\nprice = 100\nper = 104857600\nincrement = 1024\n\
             default_quota = 10485760\n\
             [[account]]\nid = 7\nbalance = 100000\nsubscribers = [\"e164:{MSISDN}\"]\n"
        ),
    )
    .unwrap();
    let config = root.join("gyro.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\nbackend = \"redis-cluster\"\n[storage.redis]\n\
             nodes = [\"127.0.0.1:{}\"]\nnamespace = \"unavailable\"\nnode_id = \"n1\"\n\
             response_timeout_ms = 300\n",
            redis.port
        ),
    )
    .unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let server = Server::adopt(
        serve(
            addr,
            &root.join("data"),
            &[
                "-c",
                config.to_str().unwrap(),
                "--charging",
                root.join("charging.toml").to_str().unwrap(),
            ],
        ),
        addr,
        &root.join("data"),
        None,
    );
    let gw = Gateway {
        host: "pgw.gyro.test",
        realm: "gyro.test",
        ids: 0x7100_0000,
    };
    let mut c: Client = gw.connect(addr);
    let session = "pgw.gyro.test;down;1";
    let ccr = |kind, n, used| data_ccr(gw.host, gw.ids, session, MSISDN, kind, n, used);
    let i = ccr(RequestType::Initial, 0, 0);
    assert_eq!(
        result_code(&exchange(&mut c, &gw.encode(&i, 0))),
        Some(2001)
    );

    // The cluster stops answering: 3004, promptly.
    redis.signal("-STOP");
    let mut u = ccr(RequestType::Update, 1, 10 * 1024 * 1024);
    let t = Instant::now();
    let a = exchange(&mut c, &gw.encode(&u, 1));
    assert_eq!(result_code(&a), Some(3004));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    // It answers again: the retransmission is answered 2001 (at once, or
    // after a few more 3004 while the client reconnects) and charged once.
    redis.signal("-CONT");
    u.retransmit = true;
    let t = Instant::now();
    loop {
        let a = exchange(&mut c, &gw.encode(&u, 1));
        match result_code(&a) {
            Some(2001) => break,
            Some(3004) => {
                assert!(t.elapsed() < Duration::from_secs(15), "never recovered");
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("{other:?}"),
        }
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ledger = rt
        .block_on(RedisLedger::connect(RedisOptions {
            nodes: vec![format!("127.0.0.1:{}", redis.port)],
            namespace: "unavailable".into(),
            node_id: "checker".into(),
            ..RedisOptions::default()
        }))
        .unwrap();
    let account = rt.block_on(ledger.account(AccountId(7))).unwrap().unwrap();
    assert_eq!(account.debited, 10, "{account:?}");
    let books = rt.block_on(ledger.books()).unwrap();
    assert!(books.is_balanced(), "{books:?}");
    drop(c);
    server.stop();
}
