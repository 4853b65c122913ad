//! A real `gyro serve` for the integration tests: started on a free
//! Diameter port (and, when configured, its admin API waited on until
//! `/readyz` says ready), stopped with SIGTERM or SIGKILL, and killed when
//! a test fails while it runs. Besides: the admin API over real HTTP and
//! `gyro ledger --json` on a stopped server's data directory.

use std::fmt::Display;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{free_port, serve};

/// A configuration line giving server-initiated requests (RAR, ASR) a
/// short answer timeout, so that a lost answer does not stall a test.
pub const SHORT_ANSWER_TIMEOUT: &str = "[peers]\nanswer_timeout_secs = 3.0\n";

/// An admin API answer: the status, the content type and the body (its
/// JSON, the text as a JSON string when it is not JSON, null when empty).
pub type Reply = (u16, String, Value);

/// Writes `dir/gyro.toml`: the admin API on loopback `port`, then `extra`
/// (more keys of `[admin]`, or further sections).
pub fn config(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let path = dir.join("gyro.toml");
    std::fs::write(
        &path,
        format!("[admin]\nlisten = \"127.0.0.1:{port}\"\n{extra}"),
    )
    .unwrap();
    path
}

/// A running `gyro serve`, killed (SIGKILL) when dropped.
pub struct Server {
    child: Option<Child>,
    /// Its Diameter listener.
    pub diameter: SocketAddr,
    /// Its data directory.
    pub data: PathBuf,
    /// The base URL of its admin API (empty when it has none).
    pub admin: String,
}

impl Server {
    /// Starts `gyro serve` (two workers) on a free Diameter port and
    /// `data`, with `args` added; returns once it accepts connections.
    pub fn start(data: &Path, args: &[&str]) -> Server {
        Server::start_on(SocketAddr::from(([127, 0, 0, 1], free_port())), data, args)
    }

    /// [`Server::start`] on the Diameter address `diameter`.
    pub fn start_on(diameter: SocketAddr, data: &Path, args: &[&str]) -> Server {
        Server::adopt(serve(diameter, data, args), diameter, data, None)
    }

    /// Starts `gyro serve` with the configuration file `config`, whose
    /// admin API listens on `admin_port`, and `args`; returns once
    /// `/readyz` answers 200 and says ready.
    pub fn start_admin(data: &Path, config: &Path, admin_port: u16, args: &[&str]) -> Server {
        let config = config.to_string_lossy().into_owned();
        let args: Vec<&str> = ["-c", config.as_str()]
            .into_iter()
            .chain(args.iter().copied())
            .collect();
        let diameter = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let server = Server::adopt(
            serve(diameter, data, &args),
            diameter,
            data,
            Some(admin_port),
        );
        server.wait_ready();
        server
    }

    /// [`Server::start_admin`] in `dir`: data in `dir/data`, the
    /// configuration file `dir/gyro.toml` written with the admin API on a
    /// free port and `extra` after it.
    pub fn in_dir(dir: &Path, extra: &str, args: &[&str]) -> Server {
        let port = free_port();
        let config = config(dir, port, extra);
        Server::start_admin(&dir.join("data"), &config, port, args)
    }

    /// Takes charge of a `gyro serve` the test started itself.
    pub fn adopt(
        child: Child,
        diameter: SocketAddr,
        data: &Path,
        admin_port: Option<u16>,
    ) -> Server {
        Server {
            child: Some(child),
            diameter,
            data: data.to_path_buf(),
            admin: admin_port.map_or_else(String::new, |p| format!("http://127.0.0.1:{p}")),
        }
    }

    /// Waits (30 s at most) until `/readyz` answers 200 and says ready.
    pub fn wait_ready(&self) {
        let t = Instant::now();
        loop {
            if let Ok((200, _, body)) = self.try_call("GET", "/readyz", None) {
                assert_eq!(body["status"], "ready");
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "never ready");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL, and waits for the end.
    pub fn kill(mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("SIGKILL the server");
        child.wait().unwrap();
    }

    /// SIGTERM: a clean stop, the exit status checked.
    pub fn stop(mut self) {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        assert!(child.wait().unwrap().success(), "gyro serve exits cleanly");
    }

    /// The URL of `path` on the admin API.
    pub fn url(&self, path: &str) -> String {
        assert!(!self.admin.is_empty(), "this server has no admin API");
        format!("{}{path}", self.admin)
    }

    /// An admin API call without token.
    pub fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, ureq::Error> {
        http(&self.url(path), method, body, None)
    }

    /// An admin API call without token; fails the test when no answer
    /// comes.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Reply {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Creates an account for `msisdn` with `balance` minor units.
    pub fn create_account(&self, msisdn: impl Display, balance: i64) {
        let (status, _, body) = self.call(
            "POST",
            "/v1/accounts",
            Some(json!({ "msisdn": msisdn.to_string(), "balance": balance })),
        );
        assert_eq!(status, 201, "{body}");
    }

    /// The account of `subscriber`, as the admin API shows it.
    pub fn account(&self, subscriber: impl Display) -> Value {
        let (status, _, body) = self.call("GET", &format!("/v1/accounts/{subscriber}"), None);
        assert_eq!(status, 200, "GET {subscriber}: {body}");
        body
    }

    /// Tops `subscriber` up by `amount` with the idempotency key `key`.
    pub fn top_up(&self, subscriber: impl Display, amount: i64, key: &str) -> Reply {
        self.call(
            "POST",
            &format!("/v1/accounts/{subscriber}/top-ups"),
            Some(json!({ "amount": amount, "idempotency_key": key })),
        )
    }

    /// `/metrics`: answered 200 as text, the text returned.
    pub fn metrics(&self) -> String {
        let (status, content_type, text) = self.call("GET", "/metrics", None);
        assert_eq!(status, 200);
        assert!(content_type.starts_with("text/plain"), "{content_type}");
        text.as_str().expect("text").to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Asserts that `r` (an [`http`] answer) is an RFC 9457 problem with
/// `status`: the problem media type and a non-empty type, title and detail.
pub fn is_problem(r: &(u16, String, Value), status: u16) {
    let (s, content_type, body) = r;
    assert_eq!(*s, status, "{body}");
    assert_eq!(content_type, "application/problem+json", "{body}");
    assert_eq!(body["status"], status, "{body}");
    for field in ["type", "title", "detail"] {
        assert!(
            body[field].as_str().is_some_and(|s| !s.is_empty()),
            "problem without {field}: {body}"
        );
    }
}

/// One HTTP request (GET, DELETE, PATCH, otherwise POST) with a 30 s
/// limit, with `token` as bearer token when given. Any status is an
/// answer; an error is a request that got none.
pub fn http(
    url: &str,
    method: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> Result<Reply, ureq::Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut response = match method {
        "GET" | "DELETE" => {
            let r = if method == "GET" {
                agent.get(url)
            } else {
                agent.delete(url)
            };
            match &auth {
                Some(a) => r.header("Authorization", a).call()?,
                None => r.call()?,
            }
        }
        _ => {
            let r = if method == "PATCH" {
                agent.patch(url)
            } else {
                agent.post(url)
            };
            let r = match &auth {
                Some(a) => r.header("Authorization", a),
                None => r,
            };
            r.send_json(body.unwrap_or(Value::Null))?
        }
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.body_mut().read_to_string()?;
    let value = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok((status, content_type, value))
}

/// `gyro ledger --json` with `args` on a stopped server's data directory;
/// fails the test when it fails.
pub fn ledger(data: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gyro"))
        .args(["ledger", "--json", "--data-dir"])
        .arg(data)
        .args(args)
        .env("GYRO_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gyro ledger: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
