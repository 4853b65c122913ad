//! A Redis Cluster of its own for a test that kills one of its masters
//! (so that the shared cluster stays whole for the other tests), and what
//! such a test needs: which master serves a slot, whether the cluster has
//! failed over, SIGKILL.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The test's own cluster, stopped when dropped.
pub struct Cluster {
    /// Its scratch directory.
    pub dir: PathBuf,
    /// Its first port.
    pub port: u16,
    /// Its seed nodes.
    pub nodes: Vec<String>,
}

impl Cluster {
    fn script() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-cluster.sh")
    }

    fn run(&self, what: &str) -> std::process::Output {
        Command::new("bash")
            .arg(Self::script())
            .arg(what)
            .env("GYRO_REDIS_PORT", self.port.to_string())
            .env("GYRO_REDIS_DIR", &self.dir)
            .output()
            .expect("run redis-cluster.sh")
    }

    /// Starts a fresh cluster on six ports from `$port_var` (default
    /// `default_port`); `None` when the Redis tests are skipped.
    pub fn start(port_var: &str, default_port: u16) -> Option<Cluster> {
        // Skipped (loudly) exactly when the shared cluster is.
        super::cluster_nodes()?;
        let port = std::env::var(port_var)
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(default_port);
        let dir = std::env::temp_dir().join(format!("gyro-redis-failover-{port}"));
        let mut c = Cluster {
            dir,
            port,
            nodes: Vec::new(),
        };
        // A fresh cluster: a node left failed over by an earlier run would
        // leave a master without a replica.
        c.run("stop");
        let out = c.run("start");
        assert!(
            out.status.success(),
            "redis-cluster.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.nodes = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        Some(c)
    }

    pub fn pid(&self, port: &str) -> i32 {
        std::fs::read_to_string(self.dir.join(port).join("redis.pid"))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }

    pub fn healthy(&self) -> bool {
        self.run("status").status.success()
    }

    pub fn restart(&self, port: &str) {
        let status = Command::new("redis-server")
            .arg(self.dir.join(port).join("redis.conf"))
            .status()
            .expect("redis-server");
        assert!(status.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.run("stop");
    }
}

/// Whether `master` (`host:port`) serves `slot`, by its own CLUSTER SLOTS.
pub fn master_serves(cluster: &Cluster, master: &str, slot: u16) -> bool {
    let out = Command::new("redis-cli")
        .args(["-p", &cluster.port.to_string(), "cluster", "nodes"])
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 8
            && f[1].starts_with(&format!("{master}@"))
            && f[2].contains("master")
            && f[8..].iter().any(|r| match r.split_once('-') {
                Some((a, b)) => {
                    a.parse::<u16>().is_ok_and(|a| a <= slot)
                        && b.parse::<u16>().is_ok_and(|b| slot <= b)
                }
                None => r.parse::<u16>() == Ok(slot),
            })
    })
}

/// Whether the cluster has promoted another node in place of the master on
/// `port` (asked of a node that is still up).
pub fn failed_over(cluster: &Cluster, port: &str) -> bool {
    let ask = (0..6)
        .map(|i| (cluster.port + i).to_string())
        .find(|p| p != port)
        .unwrap_or_default();
    let out = Command::new("redis-cli")
        .args(["-p", &ask, "cluster", "nodes"])
        .output();
    let Ok(out) = out else { return false };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let dead = text
        .lines()
        .find(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.contains(&format!(":{port}@")))
        })
        .is_some_and(|l| l.contains("fail"));
    let masters = text
        .lines()
        .filter(|l| l.contains("master") && !l.contains("fail") && l.split_whitespace().count() > 8)
        .count();
    dead && masters == 3
}

/// SIGKILL.
pub fn kill9(pid: i32) -> bool {
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

impl Cluster {
    /// SIGKILLs the master on `port` (no shutdown, no last write to its
    /// append-only file), waits until its replica has taken over, starts
    /// it again (it rejoins as that replica's replica, so that `WAIT 1`
    /// can be answered again on that shard) and waits until the cluster
    /// is whole again. Returns the time from the kill to the promotion.
    /// Panics when that takes longer than `within`.
    pub fn kill_and_heal(&self, port: &str, within: std::time::Duration) -> std::time::Duration {
        use std::time::{Duration, Instant};
        let pid = self.pid(port);
        let killed = Instant::now();
        assert!(kill9(pid), "kill {pid}");
        while !failed_over(self, port) {
            assert!(
                killed.elapsed() < within,
                "no failover of the master on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let promoted = killed.elapsed();
        self.restart(port);
        while !self.healthy() {
            assert!(killed.elapsed() < within, "the cluster did not heal");
            std::thread::sleep(Duration::from_millis(100));
        }
        promoted
    }
}
