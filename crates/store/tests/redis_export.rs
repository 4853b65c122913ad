//! CDR export from the slot streams to files on a real Redis Cluster: one
//! exporter per stream (a lease), files closed and fsynced before the
//! range is acknowledged and trimmed, gap-free ranges across files and
//! across nodes, and a range whose acknowledgement was lost written again
//! under the same name with the same content (its range pinned before the
//! file was written, even when more CDRs came meanwhile).

mod redis_support;

use gyro_charging::AccountId;
use gyro_store::redis::export::file_name;
use gyro_store::redis::{Debit, Export, RedisLedger, RedisOptions, Step};
use redis_support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn event(account: AccountId, n: u32) -> Step {
    Step::Debit(Debit {
        account,
        request: format!("ev;{};{n}", account.0),
        reservation: None,
        amount: 5,
        release: false,
        whole: false,
        cdr: cdr(&format!("ev-{}", account.0), n, rg(1)),
        bundles: None,
    })
}

/// Every exported file of `dirs` by name, with its lines.
fn files(dirs: &[&Path]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            assert!(name.ends_with(".jsonl"), "left behind: {name}");
            let text = std::fs::read_to_string(e.path()).unwrap();
            let lines: Vec<String> = text.lines().map(String::from).collect();
            if let Some(other) = out.insert(name.clone(), lines.clone()) {
                assert_eq!(other, lines, "{name} written twice with different content");
            }
        }
    }
    out
}

#[tokio::test]
async fn streams_are_exported_once_fsynced_by_one_node_at_a_time() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let opts = options(&nodes, "export", "node-a");
    let a = RedisLedger::connect(opts.clone()).await.unwrap();
    let b = RedisLedger::connect(RedisOptions {
        node_id: "node-b".into(),
        ..opts
    })
    .await
    .unwrap();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let accounts: Vec<AccountId> = (1..=4).map(acct).collect();
    let mut slots: Vec<u16> = accounts.iter().map(|&x| a.keys().account_slot(x)).collect();
    slots.sort_unstable();
    slots.dedup();
    for &x in &accounts {
        a.open_account(x, 10_000, 0, false).await.unwrap();
    }
    let mut n = 0;
    let mut charge = |count: u32| {
        let steps: Vec<Step> = (0..count)
            .flat_map(|_| {
                n += 1;
                accounts
                    .iter()
                    .map(move |&x| event(x, n))
                    .collect::<Vec<_>>()
            })
            .collect();
        steps
    };
    for r in a.run(&charge(7), NOW).await {
        r.unwrap();
    }
    let lease = Duration::from_secs(30);
    // Node A exports every stream, three records a file.
    for &slot in &slots {
        loop {
            match a.export_slot(slot, dir_a.path(), 3, lease).await.unwrap() {
                Export::Written(f) => assert!(f.records <= 3 && f.path.exists()),
                Export::Empty => break,
                other => panic!("{other:?}"),
            }
        }
        // Node B may not while A holds the lease.
        assert_eq!(
            b.export_slot(slot, dir_b.path(), 3, lease).await.unwrap(),
            Export::NotHolder
        );
    }
    // More CDRs. Node A writes the next file of the first stream, but its
    // acknowledgement is lost and then it dies (its lease lapses).
    for r in a.run(&charge(4), NOW).await {
        r.unwrap();
    }
    let slot = slots[0];
    let Export::Written(f) = a
        .write_export(slot, dir_a.path(), 100, lease)
        .await
        .unwrap()
    else {
        panic!("no file");
    };
    redis_cli(&["DEL", &a.keys().exporter(slot)]);
    // More CDRs come before node B takes over: B writes A's pinned range
    // again, the same file under the same name (not a longer range that
    // overlaps it), then the rest.
    for r in a.run(&charge(2), NOW).await {
        r.unwrap();
    }
    // Node B takes over and exports everything left, writing that range
    // again under the same name.
    for &slot in &slots {
        loop {
            match b.export_slot(slot, dir_b.path(), 100, lease).await.unwrap() {
                Export::Written(_) => {}
                Export::Empty => break,
                Export::NotHolder => {
                    // A still holds the other streams' leases: let them lapse.
                    redis_cli(&["DEL", &a.keys().exporter(slot)]);
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert!(dir_b.path().join(f.path.file_name().unwrap()).exists());
    // Node A, back, cannot acknowledge a range it no longer holds.
    assert!(!a.acknowledge_export(&f).await.unwrap());
    // Everything exported, once by name, ranges contiguous per slot, the
    // streams trimmed.
    let all = files(&[dir_a.path(), dir_b.path()]);
    let mut total = 0;
    for &slot in &slots {
        let prefix = format!("cdr-r{slot:05}-");
        let mut next = 1;
        for (name, lines) in all.iter().filter(|(k, _)| k.starts_with(&prefix)) {
            let last = next + lines.len() as u64 - 1;
            assert_eq!(*name, file_name(slot, next, last));
            for (i, line) in lines.iter().enumerate() {
                let c: gyro_charging::Cdr = serde_json::from_str(line).unwrap();
                assert_eq!(c.sequence, next + i as u64);
                assert_eq!(c.amount, 5);
            }
            next = last + 1;
            total += lines.len();
        }
        assert_eq!(redis_cli(&["XLEN", &a.keys().cdr_stream(slot)]).trim(), "0");
    }
    assert_eq!(total, 13 * accounts.len());
}

/// Two nodes export at the same time, again and again, while CDRs keep
/// coming: the streams are shared between them by lease, and every CDR is
/// in exactly one file, with contiguous ranges per slot.
#[tokio::test]
async fn two_nodes_exporting_at_once_write_every_cdr_once() {
    let Some(nodes) = cluster_nodes() else {
        return;
    };
    let opts = options(&nodes, "export-all", "node-a");
    let a = RedisLedger::connect(opts.clone()).await.unwrap();
    let b = RedisLedger::connect(RedisOptions {
        node_id: "node-b".into(),
        ..opts
    })
    .await
    .unwrap();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let accounts: Vec<AccountId> = (1..=12).map(acct).collect();
    for &x in &accounts {
        a.open_account(x, 10_000, 0, false).await.unwrap();
    }
    let lease = Duration::from_secs(30);
    let mut written = 0;
    for round in 0..5u32 {
        let steps: Vec<Step> = accounts.iter().map(|&x| event(x, round)).collect();
        for r in a.run(&steps, NOW).await {
            r.unwrap();
        }
        let (ra, rb) = tokio::join!(
            a.export_all(dir_a.path(), 4, lease),
            b.export_all(dir_b.path(), 4, lease)
        );
        for r in [&ra, &rb] {
            assert!(r.errors.is_empty() && r.unacknowledged.is_empty(), "{r:?}");
            written += r.files.iter().map(|f| f.records).sum::<usize>();
        }
    }
    assert_eq!(written, 5 * accounts.len());
    let all = files(&[dir_a.path(), dir_b.path()]);
    let lines: usize = all.values().map(Vec::len).sum();
    assert_eq!(lines, 5 * accounts.len(), "every CDR in exactly one file");
    let mut by_slot: BTreeMap<String, u64> = BTreeMap::new();
    for (name, lines) in &all {
        let slot = name[..10].to_string();
        let next = by_slot.entry(slot).or_insert(1);
        let first: u64 = name[11..27].parse().unwrap();
        assert_eq!(first, *next, "{name}");
        *next += lines.len() as u64;
    }
    let empty = a.export_all(dir_a.path(), 4, lease).await;
    assert!(empty.files.is_empty() && empty.errors.is_empty());
}
