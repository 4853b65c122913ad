//! `gyro account ...` and `gyro session ...`: the operator API of a
//! running `gyro serve` on the command line. The address and the token
//! come from the server's configuration file (`[admin]`), or from
//! `--admin` and `--token-file`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

/// Where the admin API is and how to reach it.
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// The server's configuration file: its `[admin]` section gives the
    /// address and the token file.
    #[arg(long, short = 'c', value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    /// The admin API's base URL; replaces `[admin] listen`.
    #[arg(long, value_name = "URL", global = true)]
    pub admin: Option<String>,
    /// File holding the bearer token; replaces `[admin] token_file`.
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Print the API's JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Options of `gyro account`.
#[derive(Debug, clap::Args)]
pub struct AccountArgs {
    #[command(subcommand)]
    command: AccountCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum AccountCommand {
    /// Create an account (durable when this returns).
    Create {
        /// E.164 number (MSISDN).
        msisdn: Option<String>,
        /// IMSI.
        #[arg(long)]
        imsi: Option<String>,
        /// Initial balance, minor units.
        #[arg(long, default_value_t = 0)]
        balance: i64,
        /// Credit limit, minor units.
        #[arg(long)]
        credit_limit: Option<i64>,
        /// Status: active or blocked.
        #[arg(long, value_parser = ["active", "blocked"])]
        status: Option<String>,
        /// Account id (default: the next free one).
        #[arg(long)]
        id: Option<u64>,
    },
    /// Show an account.
    Show {
        /// MSISDN or IMSI.
        subscriber: String,
    },
    /// Add money to an account, once per idempotency key.
    TopUp {
        /// MSISDN or IMSI.
        subscriber: String,
        /// Amount, minor units.
        amount: i64,
        /// Idempotency key: the same key again tops up once (default: a
        /// new one, printed, to retry with).
        #[arg(long)]
        key: Option<String>,
    },
    /// List accounts in id order.
    List {
        /// Only accounts with an id above this one.
        #[arg(long)]
        after: Option<u64>,
        /// Most accounts listed.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Change an account's status, credit limit and/or price plan.
    #[command(group(clap::ArgGroup::new("change").required(true).multiple(true)
        .args(["status", "credit_limit", "plan"])))]
    Set {
        /// MSISDN or IMSI.
        subscriber: String,
        /// Status: active or blocked.
        #[arg(long, value_parser = ["active", "blocked"])]
        status: Option<String>,
        /// Credit limit, minor units.
        #[arg(long)]
        credit_limit: Option<i64>,
        /// Price plan, by name (`default` for the plan of accounts that
        /// name none); open sessions are rated by it from their next
        /// request.
        #[arg(long)]
        plan: Option<String>,
    },
    /// Delete an account with no open session.
    Delete {
        /// MSISDN or IMSI.
        subscriber: String,
    },
}

/// Options of `gyro session`.
#[derive(Debug, clap::Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    command: SessionCommand,
    #[command(flatten)]
    connection: Connection,
}

#[derive(Debug, clap::Subcommand)]
enum SessionCommand {
    /// List open credit-control sessions.
    List {
        /// Only this subscriber's (MSISDN or IMSI).
        #[arg(long)]
        subscriber: Option<String>,
        /// Most sessions listed.
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
    /// End a session: gyro sends an Abort-Session-Request to the client
    /// holding it, whose CCR-Terminate then releases its reservation.
    Abort {
        /// The Diameter Session-Id.
        session_id: String,
    },
}

/// `text` as one URL path segment (RFC 3986: everything but the
/// characters a segment may hold is percent-encoded).
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~;:@!$&'()*+,=".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A client of one admin API.
struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    json: bool,
}

impl Client {
    fn new(c: &Connection) -> anyhow::Result<Client> {
        let admin = match &c.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                gyro_server::Config::from_toml_str(&text)
                    .with_context(|| format!("in {}", path.display()))?
                    .admin
            }
            None => Default::default(),
        };
        let base = match &c.admin {
            Some(url) => url.trim_end_matches('/').to_string(),
            None if c.config.is_some() && !admin.enabled => anyhow::bail!(
                "the admin API is off in {} ([admin] enabled = false): \
                 nothing to ask; give --admin URL for a server whose API is on",
                c.config
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string())
            ),
            None => {
                let mut addr = admin.listen;
                if addr.ip().is_unspecified() {
                    addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                }
                format!("http://{addr}")
            }
        };
        let token = match c.token_file.as_ref().or(admin.token_file.as_ref()) {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading the token file {}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        Ok(Client {
            base,
            token,
            agent,
            json: c.json,
        })
    }

    /// Sends a request; returns the status and the JSON body (if any).
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<(u16, Value)> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let response = match (method, body) {
            ("GET" | "DELETE", _) => {
                let r = if method == "GET" {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                match &auth {
                    Some(a) => r.header("Authorization", a).call(),
                    None => r.call(),
                }
            }
            (_, body) => {
                let r = if method == "PATCH" {
                    self.agent.patch(&url)
                } else {
                    self.agent.post(&url)
                };
                let r = match &auth {
                    Some(a) => r.header("Authorization", a),
                    None => r,
                };
                r.send_json(body.unwrap_or(Value::Null))
            }
        };
        let mut response = response.with_context(|| {
            format!(
                "cannot reach the admin API at {} (is gyro serve running?)",
                self.base
            )
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }

    /// Prints a successful answer with `show`, or fails with the
    /// problem's detail.
    fn answer(&self, (status, v): (u16, Value), show: impl Fn(&Value)) -> anyhow::Result<ExitCode> {
        if !(200..300).contains(&status) {
            let detail = v["detail"]
                .as_str()
                .map_or_else(|| v.to_string(), str::to_string);
            if self.json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            bail!(
                "{status} {}: {detail}",
                v["title"].as_str().unwrap_or("error")
            );
        }
        if self.json {
            if !v.is_null() {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
        } else {
            show(&v);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Text for one account.
fn print_account(a: &Value) {
    let id = |k: &str| a[k].as_str().unwrap_or("-").to_string();
    println!(
        "account {}  msisdn {}  imsi {}  status {}",
        a["id"],
        id("msisdn"),
        id("imsi"),
        a["status"].as_str().unwrap_or("?")
    );
    println!(
        "  balance {}  reserved {}  credit limit {}  (minor units)",
        a["balance"], a["reserved"], a["credit_limit"]
    );
    println!(
        "  initial {}  top-ups {}  debited {}  open sessions {}",
        a["initial_balance"], a["topped_up"], a["debited"], a["open_sessions"]
    );
    for b in a["bundles"].as_array().into_iter().flatten() {
        println!(
            "  bundle {}: {} of {} {} left ({} reserved, {} consumed)",
            b["id"],
            b["remaining"],
            b["initial"],
            b["unit"].as_str().unwrap_or(""),
            b["reserved"],
            b["consumed"]
        );
    }
}

/// A new idempotency key: time, process and a counter.
fn fresh_key() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("cli-{nanos:x}-{:x}", std::process::id())
}

/// Runs `gyro account`.
pub fn run_account(args: &AccountArgs) -> anyhow::Result<ExitCode> {
    let c = Client::new(&args.connection)?;
    let path = |s: &str| format!("/v1/accounts/{s}");
    match &args.command {
        AccountCommand::Create {
            msisdn,
            imsi,
            balance,
            credit_limit,
            status,
            id,
        } => {
            let mut body = json!({ "balance": balance });
            for (k, v) in [("msisdn", msisdn), ("imsi", imsi), ("status", status)] {
                if let Some(v) = v {
                    body[k] = json!(v);
                }
            }
            if let Some(l) = credit_limit {
                body["credit_limit"] = json!(l);
            }
            if let Some(i) = id {
                body["id"] = json!(i);
            }
            c.answer(c.call("POST", "/v1/accounts", Some(body))?, |a| {
                println!("created:");
                print_account(a);
            })
        }
        AccountCommand::Show { subscriber } => {
            c.answer(c.call("GET", &path(subscriber), None)?, print_account)
        }
        AccountCommand::TopUp {
            subscriber,
            amount,
            key,
        } => {
            let key = key.clone().unwrap_or_else(fresh_key);
            let body = json!({ "amount": amount, "idempotency_key": key });
            let r = c.call("POST", &format!("{}/top-ups", path(subscriber)), Some(body))?;
            c.answer(r, |a| {
                if a["replayed"] == json!(true) {
                    println!("already done (idempotency key {key}); nothing added");
                } else {
                    println!("topped up {amount} (idempotency key {key})");
                }
                print_account(a);
            })
        }
        AccountCommand::List { after, limit } => {
            let mut q = format!("/v1/accounts?limit={limit}");
            if let Some(a) = after {
                q.push_str(&format!("&after={a}"));
            }
            c.answer(c.call("GET", &q, None)?, |v| {
                println!(
                    "{:>10}  {:<16} {:<16} {:>14} {:>12} {:>12}  status",
                    "id", "msisdn", "imsi", "balance", "reserved", "limit"
                );
                for a in v["accounts"].as_array().into_iter().flatten() {
                    println!(
                        "{:>10}  {:<16} {:<16} {:>14} {:>12} {:>12}  {}",
                        a["id"].to_string(),
                        a["msisdn"].as_str().unwrap_or("-"),
                        a["imsi"].as_str().unwrap_or("-"),
                        a["balance"].to_string(),
                        a["reserved"].to_string(),
                        a["credit_limit"].to_string(),
                        a["status"].as_str().unwrap_or("?")
                    );
                }
            })
        }
        AccountCommand::Set {
            subscriber,
            status,
            credit_limit,
            plan,
        } => {
            let mut body = json!({});
            if let Some(s) = status {
                body["status"] = json!(s);
            }
            if let Some(p) = plan {
                body["plan"] = json!(p);
            }
            if let Some(l) = credit_limit {
                body["credit_limit"] = json!(l);
            }
            c.answer(
                c.call("PATCH", &path(subscriber), Some(body))?,
                print_account,
            )
        }
        AccountCommand::Delete { subscriber } => {
            c.answer(c.call("DELETE", &path(subscriber), None)?, |_| {
                println!("deleted {subscriber}");
            })
        }
    }
}

/// Runs `gyro session`.
pub fn run_session(args: &SessionArgs) -> anyhow::Result<ExitCode> {
    let c = Client::new(&args.connection)?;
    match &args.command {
        SessionCommand::List { subscriber, limit } => {
            let mut q = format!("/v1/sessions?limit={limit}");
            if let Some(s) = subscriber {
                q.push_str(&format!("&subscriber={s}"));
            }
            c.answer(c.call("GET", &q, None)?, |v| {
                let list = v["sessions"].as_array().cloned().unwrap_or_default();
                let total = v["total"].as_u64().unwrap_or(list.len() as u64);
                if (list.len() as u64) < total {
                    println!(
                        "{total} open sessions, {} listed (--limit lists more)",
                        list.len()
                    );
                } else {
                    println!("{total} open sessions");
                }
                for s in list {
                    println!(
                        "{}  account {}  {}  request {}  reserved {}  {}",
                        s["session_id"].as_str().unwrap_or(""),
                        s["account"],
                        s["subscriber"].as_str().unwrap_or(""),
                        s["request_number"],
                        s["reserved"],
                        s["service_context"].as_str().unwrap_or("")
                    );
                }
            })
        }
        SessionCommand::Abort { session_id } => {
            let path = format!("/v1/sessions/{}", path_segment(session_id));
            c.answer(c.call("DELETE", &path, None)?, |v| {
                let sid = v["session_id"].as_str().unwrap_or("");
                let peer = v["peer"].as_str().unwrap_or("");
                if v["released"] == true {
                    println!("{sid}: the client did not know it (5002); released");
                } else {
                    println!(
                        "{sid}: Abort-Session-Request sent to {peer}, answered {}; \
                         its CCR-Terminate releases the reservation",
                        v["result_code"]
                    );
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn a_session_id_is_one_path_segment() {
        assert_eq!(path_segment("pgw.example;1;2"), "pgw.example;1;2");
        assert_eq!(path_segment("a/b c?%#"), "a%2Fb%20c%3F%25%23");
    }
}
