//! The credit-control application: the charging engine, one instance per
//! shard, behind the runtime's [`AppFactory`] / [`ShardApp`] interface.
//!
//! Requests are routed by the account of their Subscription-Id (through the
//! read-only subscriber directory shared by all workers); a CCR-Update or
//! -Terminate without one follows its session (see the runtime).
//! Every shard appends its charging data records as JSON Lines to
//! `<data_dir>/cdr/shard-<i>.jsonl`.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::BytesMut;
use gyro_charging::gy::{self, LocalIdentity};
use gyro_charging::{
    CcAnswer, CcRequest, ChargingConfig, Engine, Output, SubscriberDirectory, SubscriptionType,
    Timestamp,
};
use gyro_diameter::codes::{avp, cmd, result};
use gyro_diameter::{Encoder, Message};
use tracing::warn;

use crate::app::{AppFactory, ShardApp};
use crate::error::Error;

/// The charging configuration gyro runs with when none is given: demo
/// tariffs for data (rating groups 10 and 20 under 32251@3gpp.org) and SMS
/// (32274@3gpp.org), and 1,000 accounts for 46700000000..=46700000999.
pub const DEMO_CHARGING: &str = include_str!("../../../config/example-charging.toml");

/// Counters of one shard, for reports (`gyro demo`).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardTotals {
    /// CDRs written.
    pub cdrs: AtomicU64,
    /// Money debited minus refunded, minor units.
    pub amount: AtomicI64,
    /// CDRs that could not be written.
    pub cdr_write_errors: AtomicU64,
}

/// Builds credit-control shards and routes requests to them.
pub struct CreditControl {
    charging: ChargingConfig,
    directory: SubscriberDirectory,
    identity: LocalIdentity,
    cdr_dir: Option<PathBuf>,
    totals: Arc<[ShardTotals]>,
}

impl CreditControl {
    /// A credit-control application for `shards` shards answering as
    /// `origin_host`/`origin_realm`. CDRs go under `data_dir/cdr` (created),
    /// or nowhere when `data_dir` is `None`.
    pub fn new(
        charging: ChargingConfig,
        origin_host: &str,
        origin_realm: &str,
        data_dir: Option<&Path>,
        shards: usize,
    ) -> Result<Self, Error> {
        let directory = charging
            .directory()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        charging
            .catalog()
            .map_err(|e| Error::Config(format!("charging: {e}")))?;
        let cdr_dir = match data_dir {
            Some(d) => {
                let dir = d.join("cdr");
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::Config(format!("cannot create {}: {e}", dir.display())))?;
                Some(dir)
            }
            None => None,
        };
        Ok(CreditControl {
            charging,
            directory,
            identity: LocalIdentity {
                origin_host: origin_host.to_string(),
                origin_realm: origin_realm.to_string(),
            },
            cdr_dir,
            totals: (0..shards.max(1)).map(|_| ShardTotals::default()).collect(),
        })
    }

    /// Per-shard totals, shared with the running shards.
    pub fn totals(&self) -> Arc<[ShardTotals]> {
        self.totals.clone()
    }

    /// Where CDR files are written, if anywhere.
    pub fn cdr_dir(&self) -> Option<&Path> {
        self.cdr_dir.as_deref()
    }
}

/// One shard: an engine and its reusable buffers.
pub struct CreditShard {
    engine: Engine,
    request: CcRequest,
    answer: CcAnswer,
    output: Output,
    identity: LocalIdentity,
    cdrs: Option<BufWriter<File>>,
    line: Vec<u8>,
    totals: Arc<[ShardTotals]>,
    index: usize,
}

impl AppFactory for CreditControl {
    type Shard = CreditShard;

    fn shard(&self, index: usize, count: usize) -> CreditShard {
        let engine = match self.charging.build_shard(index, count) {
            Ok(e) => e,
            Err(e) => {
                // The configuration was checked in `new`; this cannot fail
                // differently per shard, but never panic a worker over it.
                warn!(shard = index, error = %e, "cannot build the shard; it starts empty");
                Engine::new(
                    self.charging.catalog().unwrap_or_default(),
                    self.charging.engine.clone(),
                )
            }
        };
        let cdrs = self.cdr_dir.as_ref().and_then(|d| {
            let path = d.join(format!("shard-{index}.jsonl"));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => Some(BufWriter::with_capacity(256 * 1024, f)),
                Err(e) => {
                    warn!(path = %path.display(), error = %e, "cannot open the CDR file");
                    None
                }
            }
        });
        CreditShard {
            engine,
            request: CcRequest::default(),
            answer: CcAnswer::default(),
            output: Output::default(),
            identity: self.identity.clone(),
            cdrs,
            line: Vec::with_capacity(1024),
            totals: self.totals.clone(),
            index,
        }
    }

    fn route(&self, request: &Message<'_>, count: usize) -> Option<usize> {
        for a in request.avps().flatten() {
            if a.code() != avp::SUBSCRIPTION_ID.code || a.vendor_id() != 0 {
                continue;
            }
            let kind = a
                .child(avp::SUBSCRIPTION_ID_TYPE)
                .and_then(|t| t.u32().ok())
                .and_then(SubscriptionType::from_code);
            let data = a
                .child(avp::SUBSCRIPTION_ID_DATA)
                .and_then(|d| d.utf8().ok());
            if let (Some(kind), Some(data)) = (kind, data) {
                if let Some(account) = self.directory.lookup(kind, data) {
                    return Some(account.shard(count));
                }
            }
        }
        None
    }
}

impl CreditShard {
    fn write_cdrs(&mut self) {
        let totals = &self.totals[self.index.min(self.totals.len() - 1)];
        for cdr in self.output.cdrs.iter() {
            totals.cdrs.fetch_add(1, Relaxed);
            totals.amount.fetch_add(cdr.amount, Relaxed);
            if let Some(w) = &mut self.cdrs {
                self.line.clear();
                if cdr.write_json_line(&mut self.line).is_err() || w.write_all(&self.line).is_err()
                {
                    totals.cdr_write_errors.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// Answers a request the engine cannot take with `code`, echoing what a
    /// CCA must echo and naming the offending AVP.
    fn reject(&self, req: &Message<'_>, code: u32, avp_code: u32, out: &mut BytesMut) {
        let protocol_error = (3000..4000).contains(&code);
        let mut e = Encoder::answer(out, req, protocol_error);
        e.u32(avp::RESULT_CODE, code)
            .str(avp::ORIGIN_HOST, &self.identity.origin_host)
            .str(avp::ORIGIN_REALM, &self.identity.origin_realm);
        if req.command_code() == cmd::CREDIT_CONTROL {
            for id in [
                avp::AUTH_APPLICATION_ID,
                avp::CC_REQUEST_TYPE,
                avp::CC_REQUEST_NUMBER,
            ] {
                if let Some(a) = req.find(id) {
                    e.raw_avp(&a);
                }
            }
        }
        if avp_code != 0 {
            if let Some(a) = req.avps().flatten().find(|a| a.code() == avp_code) {
                let g = e.begin_group(avp::FAILED_AVP);
                e.raw_avp(&a);
                e.end_group(g);
            }
        }
        if e.finish().is_err() {
            warn!("error answer too large");
        }
    }
}

impl ShardApp for CreditShard {
    fn handle(&mut self, req: &Message<'_>, now_ms: u64, out: &mut BytesMut) {
        if req.command_code() != cmd::CREDIT_CONTROL {
            // RAR, ASR and STR are sent by a credit-control server, not to it.
            self.reject(req, result::COMMAND_UNSUPPORTED, 0, out);
            return;
        }
        if let Err(e) = gy::decode_ccr(req, &mut self.request) {
            let (code, avp_code) = match e {
                gyro_charging::Error::InvalidCcr {
                    result_code,
                    avp_code,
                } => (result_code, avp_code),
                _ => (result::UNABLE_TO_COMPLY, 0),
            };
            self.reject(req, code, avp_code, out);
            return;
        }
        self.output.clear();
        self.engine.handle(
            &self.request,
            Timestamp(now_ms),
            &mut self.answer,
            &mut self.output,
        );
        self.write_cdrs();
        if gy::encode_cca(out, req, &self.answer, &self.identity).is_err() {
            self.reject(req, result::UNABLE_TO_COMPLY, 0, out);
        }
    }

    fn tick(&mut self, now_ms: u64) {
        self.output.clear();
        self.engine.tick(Timestamp(now_ms), &mut self.output);
        self.write_cdrs();
        if let Some(w) = &mut self.cdrs {
            if w.flush().is_err() {
                self.totals[self.index.min(self.totals.len() - 1)]
                    .cdr_write_errors
                    .fetch_add(1, Relaxed);
            }
        }
    }
}

impl Drop for CreditShard {
    fn drop(&mut self) {
        if let Some(w) = &mut self.cdrs {
            let _ = w.flush();
        }
    }
}

/// The demo charging configuration, parsed.
pub fn demo_charging() -> ChargingConfig {
    // The embedded file is tested to parse (see the tests below).
    ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_demo_configuration_parses() {
        let c = ChargingConfig::from_toml_str(DEMO_CHARGING).unwrap();
        let dir = c.directory().unwrap();
        assert!(dir.lookup(SubscriptionType::E164, "46700000000").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700000999").is_some());
        assert!(dir.lookup(SubscriptionType::E164, "46700001000").is_none());
    }
}
