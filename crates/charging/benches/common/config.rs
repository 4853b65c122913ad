//! The engine benchmark's charging configuration, shared by
//! `benches/engine.rs` (criterion) and `examples/ccr_update_cost.rs`
//! (instruction counts), so both measure the same plan.

pub const CONFIG: &str = r#"
[engine]
node_id = "bench"
supervision_secs = 1200
dedup_ttl_secs = 300

[[tariff]]
name = "rg10"
service_context = "32251@3gpp.org"
rating_group = 10
unit = "octets"
price = 100
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "rg20"
service_context = "32251@3gpp.org"
rating_group = 20
unit = "octets"
price = 200
per = 104857600
increment = 1024
default_quota = 10485760
validity_time = 600

[[tariff]]
name = "rg30"
service_context = "32251@3gpp.org"
rating_group = 30
unit = "seconds"
price = 1
per = 60
default_quota = 600
validity_time = 600

[[account_range]]
first_id = 1
count = 1000
e164_first = "46700000000"
balance = 1000000000000000
"#;

/// The same accounts on a price plan of 50 rates (by rating group, time
/// of day, day of week, roaming zone and destination) in a time zone,
/// with a table of 100,000 destination prefixes; the requests carry a
/// called party and a visited network, so every request looks both up.
pub fn plan_config() -> String {
    use std::fmt::Write as _;
    let mut t = String::from(CONFIG);
    // [[account_range]] is last in CONFIG: give it the plan.
    t.push_str("plan = \"big\"\n\n[destinations]\n");
    // 100 destinations of 1,000 prefixes each: 100,000 prefixes of 5 to 8
    // digits under country codes 1..99.
    for d in 0..100u32 {
        let _ = write!(t, "d{d} = [");
        for k in 0..1000u32 {
            let _ = write!(t, "\"{}{:0w$}\",", d + 1, k, w = 4 + (k % 4) as usize);
        }
        t.push_str("]\n");
    }
    t.push_str("\n[zones]\neu = [\"262\", \"208\", \"214\"]\nworld = [\"310\", \"440\"]\n");
    t.push_str("\n[plans.big]\ntime_zone = \"Europe/Stockholm\"\n");
    let mut rate = |name: String, extra: &str, seconds: bool| {
        let unit = if seconds {
            "unit = \"seconds\"\nprice = 1\nper = 60\ndefault_quota = 600\n"
        } else {
            "unit = \"octets\"\nprice = 100\nper = 104857600\nincrement = 1024\n\
             default_quota = 10485760\n"
        };
        let _ = write!(
            t,
            "\n[[plans.big.rate]]\nname = \"{name}\"\nservice_context = \"32251@3gpp.org\"\n\
             {unit}validity_time = 600\n{extra}"
        );
    };
    for rg in [10, 20] {
        for (what, extra) in [
            ("roam-eu", "zone = \"eu\"\n"),
            ("roam-world", "zone = \"world\"\n"),
            ("night", "hours = \"00:00-06:00\"\n"),
            ("weekend", "days = [\"sat\", \"sun\"]\n"),
            ("evening", "hours = \"18:00-23:00\"\n"),
            ("dest", "destination = \"d45\"\n"),
            (
                "data",
                "volume_quota_threshold = 1048576\nquota_holding_time = 300\n",
            ),
        ] {
            rate(
                format!("{what}-{rg}"),
                &format!("rating_group = {rg}\n{extra}"),
                false,
            );
        }
    }
    rate(
        "rg30-night".into(),
        "rating_group = 30\nhours = \"01:00-05:00\"\n",
        true,
    );
    rate("rg30".into(), "rating_group = 30\n", true);
    for rg in 100..134 {
        rate(
            format!("other-{rg}"),
            &format!("rating_group = {rg}\n"),
            false,
        );
    }
    t
}
