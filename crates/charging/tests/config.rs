//! The example configuration parses and holds the demo defaults.

use gyro_charging::*;

const EXAMPLE: &str = include_str!("../../../config/example-charging.toml");

#[test]
fn example_config_parses_with_the_demo_defaults() {
    let cfg = ChargingConfig::from_toml_str(EXAMPLE).expect("example parses");
    let e = cfg.build_engine().expect("engine builds");
    assert_eq!(e.accounts().count(), 1001);
    for n in [46700000000u64, 46700000500, 46700000999] {
        let id = e.resolve_subscriber(&SubscriptionId::e164(n.to_string()));
        assert_eq!(id, Some(AccountId(1000 + n - 46700000000)));
    }
    assert_eq!(
        e.resolve_subscriber(&SubscriptionId::e164("46700001000")),
        None
    );
    assert_eq!(e.account(AccountId(1500)).unwrap().balance, 10_000_000);
    let c = e.catalog();
    let key = |rg| RatingKey {
        rating_group: Some(rg),
        service_id: None,
    };
    for ctx in ["32251@3gpp.org", "12.32251@3gpp.org"] {
        for rg in [10, 20] {
            let t = c.tariff(c.find(ctx, key(rg)).unwrap()).unwrap();
            assert_eq!(t.unit, UnitKind::Octets);
        }
    }
    let sms = c
        .tariff(c.find("32274@3gpp.org", RatingKey::default()).unwrap())
        .unwrap();
    assert_eq!(sms.unit, UnitKind::Events);
    assert!(cfg.directory().unwrap().len() >= 2001);
}

#[test]
fn shards_split_the_accounts() {
    let cfg = ChargingConfig::from_toml_str(EXAMPLE).unwrap();
    let shards: Vec<Engine> = (0..4).map(|i| cfg.build_shard(i, 4).unwrap()).collect();
    assert_eq!(
        shards.iter().map(|e| e.accounts().count()).sum::<usize>(),
        1001
    );
    let id = AccountId(1003);
    assert!(shards[id.shard(4)].account(id).is_some());
    assert!(shards[(id.shard(4) + 1) % 4].account(id).is_none());
}

#[test]
fn bad_configurations_are_reported() {
    for (text, what) in [
        ("[[tariff]]\nname='x'\nservice_context='a'\nunit='octets'\nper=0\ndefault_quota=1\n", "per"),
        ("[[tariff]]\nname='x'\nservice_context='a'\nunit='litres'\ndefault_quota=1\n", "litres"),
        ("[[account]]\nid=1\nbalance=1\nsubscribers=['phone:1']\n", "phone"),
        ("[[account]]\nid=1\nbalance=1\nsubscribers=['e164:1']\n[[account]]\nid=2\nbalance=1\nsubscribers=['e164:1']\n", "e164:1"),
        ("[[account]]\nid=1\nbalance=1\n[[account]]\nid=1\nbalance=2\n", "1"),
    ] {
        let err = ChargingConfig::from_toml_str(text).and_then(|c| c.build_engine().map(|_| ()));
        let msg = err.expect_err(text).to_string();
        assert!(msg.contains(what), "{msg:?} should mention {what:?}");
    }
}
