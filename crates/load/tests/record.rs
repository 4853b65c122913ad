//! The `--record` file: one JSON object per answer, and with
//! `--record-messages` the request and its answer whole, so that a request
//! can be sent again and its answer compared.

mod common;

use std::time::Duration;

use common::{start, FakeConfig};
use gyro_diameter::codes::avp;
use gyro_diameter::Message;
use gyro_load::{run_async, LoadArgs};

fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("gyro-load-{}-{name}.jsonl", std::process::id()))
}

fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn run(record: &std::path::Path, messages: bool) -> Vec<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (addr, _) = start(FakeConfig::default()).await;
        let a = LoadArgs {
            target: addr.to_string(),
            connections: 2,
            window: 4,
            quiet: true,
            timeout: Duration::from_secs(2),
            count: Some(100),
            record: Some(record.to_path_buf()),
            record_messages: messages,
            ..LoadArgs::default()
        };
        let r = run_async(a).await.unwrap();
        assert_eq!(r.answered, 100);
    });
    let l = lines(record);
    let _ = std::fs::remove_file(record);
    l
}

#[test]
fn record_writes_one_line_per_answer_without_messages_by_default() {
    let l = run(&scratch("plain"), false);
    assert_eq!(l.len(), 100);
    for a in &l {
        assert_eq!(a["result_code"], 2001);
        assert!(a["session_id"].is_string() && a["number"].is_u64());
        assert!(a.get("request").is_none() && a.get("answer").is_none());
    }
}

#[test]
fn record_messages_writes_each_request_with_its_answer() {
    let l = run(&scratch("messages"), true);
    assert_eq!(l.len(), 100);
    for a in &l {
        let req = hex::decode(a["request"].as_str().unwrap()).unwrap();
        let ans = hex::decode(a["answer"].as_str().unwrap()).unwrap();
        let (req, ans) = (Message::parse(&req).unwrap(), Message::parse(&ans).unwrap());
        assert!(req.is_request() && !ans.is_request());
        // The answer is this request's: same identifiers, same session.
        assert_eq!(req.header().hop_by_hop, ans.header().hop_by_hop);
        assert_eq!(req.header().end_to_end, ans.header().end_to_end);
        assert_eq!(req.session_id(), a["session_id"].as_str());
        assert_eq!(ans.session_id(), a["session_id"].as_str());
        let number = req.find(avp::CC_REQUEST_NUMBER).unwrap().u32().unwrap();
        assert_eq!(u64::from(number), a["number"].as_u64().unwrap());
    }
}
