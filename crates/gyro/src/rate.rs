//! `gyro rate`: what some usage would cost under a charging file's plans,
//! and which rate prices it, without charging anything: check a plan
//! before it goes live. The same answer as `POST /v1/rate` of a running
//! server (`--json` prints the same document).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use gyro_admin::rate::{service_context, RateView};
use gyro_charging::rating::quote::{decimal, parse_instant};
use gyro_charging::{ChargingConfig, QuoteRequest, SubscriptionId, Timestamp, UnitKind};

/// `gyro rate` options.
#[derive(Debug, Parser)]
pub struct Args {
    /// Charging file with the plans (default: the embedded demo).
    #[arg(long)]
    pub charging: Option<PathBuf>,
    /// Subscriber (E.164 number or IMSI of an account in the charging
    /// file): its plan prices the usage.
    #[arg(long, conflicts_with = "plan")]
    pub subscriber: Option<String>,
    /// Plan to price with (default: the plan named "default").
    #[arg(long)]
    pub plan: Option<String>,
    /// data, voice or sms.
    #[arg(long, default_value = "data", conflicts_with = "context")]
    pub service: String,
    /// Service-Context-Id, instead of --service.
    #[arg(long)]
    pub context: Option<String>,
    /// Rating-Group.
    #[arg(long)]
    pub rating_group: Option<u32>,
    /// Service-Identifier.
    #[arg(long)]
    pub service_id: Option<u32>,
    /// Called party: a number or a tel:/sip: URI.
    #[arg(long)]
    pub called: Option<String>,
    /// Visited network, MCC and MNC digits (e.g. 26201).
    #[arg(long)]
    pub visited: Option<String>,
    /// Usage in the rate's unit: octets (k, M, G suffixes: 1000s),
    /// seconds (or 5m, 1h) or events.
    #[arg(long)]
    pub units: String,
    /// When the usage starts: RFC 3339 with an offset, or a local date and
    /// time in the plan's time zone (2026-01-15T17:59). Default: now.
    #[arg(long)]
    pub at: Option<String>,
    /// The usage continues a session (no first interval).
    #[arg(long)]
    pub continued: bool,
    /// Print the JSON that POST /v1/rate answers.
    #[arg(long)]
    pub json: bool,
}

/// `125`, `10M`, `1.5G`, `5m`, `1h`: a number of units.
fn units(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c {
                'k' | 'K' => 1_000,
                'M' => 1_000_000,
                'G' => 1_000_000_000,
                'm' => 60,
                'h' => 3_600,
                's' => 1,
                _ => bail!("units {s:?}: unknown suffix {c:?} (k, M, G, s, m, h)"),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let v: f64 = num
        .parse()
        .with_context(|| format!("units {s:?}: not a number"))?;
    if !(v >= 0.0 && v * (mult as f64) < 1.8e19) {
        bail!("units {s:?}: out of range");
    }
    Ok((v * mult as f64).round() as u64)
}

fn unit_name(u: UnitKind) -> &'static str {
    match u {
        UnitKind::Octets => "octets",
        UnitKind::Seconds => "s",
        UnitKind::Events => "events",
    }
}

/// Runs `gyro rate`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (text, source) = match &args.charging {
        Some(p) => (
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            p.display().to_string(),
        ),
        None => (gyro_ocs::DEMO_CHARGING.to_string(), "embedded demo".into()),
    };
    let config = ChargingConfig::from_toml_str(&text).with_context(|| format!("in {source}"))?;
    let catalog = config.catalog()?;
    let plan = match &args.subscriber {
        Some(s) => {
            let digits = s.strip_prefix('+').unwrap_or(s);
            let accounts = config.accounts()?;
            let found = accounts.iter().find(|(_, ids)| {
                ids.iter().any(|id: &SubscriptionId| {
                    id.data.strip_prefix('+').unwrap_or(&id.data) == digits
                })
            });
            match found {
                Some((acc, _)) => acc.plan.as_deref().map(str::to_string),
                None => bail!("no account for subscriber {s} in {source}"),
            }
        }
        None => args.plan.clone(),
    };
    let zone = catalog
        .plan_named(plan.as_deref())
        .map_or("UTC", |p| p.time_zone())
        .to_string();
    let at = match &args.at {
        Some(s) => parse_instant(s, Some(&zone))?,
        None => Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        ),
    };
    let ctx = match &args.context {
        Some(c) => c.clone(),
        None => service_context(&args.service)
            .with_context(|| format!("service {:?}: data, voice or sms", args.service))?
            .to_string(),
    };
    let request = QuoteRequest {
        service_context: ctx,
        rating_group: args.rating_group,
        service_id: args.service_id,
        called_party: args.called.clone().unwrap_or_default(),
        visited_plmn: args.visited.clone().unwrap_or_default(),
        units: units(&args.units)?,
        at,
        first: !args.continued,
    };
    let quote = catalog.quote(plan.as_deref(), &request)?;
    let view = RateView::new(&quote, &quote.time_zone);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    let exp = quote.currency.exponent;
    let mut head = format!(
        "plan {} ({}, {})",
        view.plan, view.currency, quote.time_zone
    );
    if let Some(d) = &view.destination {
        head.push_str(&format!(", destination {d}"));
    }
    if let Some(z) = &view.zone {
        head.push_str(&format!(", zone {z}"));
    }
    println!("{head}");
    let unit = unit_name(quote.unit);
    for p in &view.parts {
        println!(
            "  from {}  {} {unit} (charged {})  rate {}: {} per {} {unit}  = {}",
            p.from,
            p.units,
            p.charged_units,
            p.rate,
            decimal(p.rate_price, exp),
            p.rate_per,
            decimal(p.price, exp),
        );
    }
    println!("total {} {}", view.amount, view.currency);
    if let Some(c) = &view.next_change {
        println!("next price change {} to rate {}", c.at, c.rate);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_take_suffixes() {
        assert_eq!(units("125").unwrap(), 125);
        assert_eq!(units("10M").unwrap(), 10_000_000);
        assert_eq!(units("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(units("5m").unwrap(), 300);
        assert_eq!(units("1h").unwrap(), 3600);
        assert!(units("5x").is_err());
        assert!(units("-1").is_err());
    }
}
