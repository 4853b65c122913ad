//! What each answer counts for: per-type counters and latency, the
//! counters the progress bar reads, and the `--record` file.

use std::sync::atomic::Ordering;
use std::time::Instant;

use gyro_diameter::codes::result;
use gyro_diameter::Message;

use super::sessions::processed;
use super::{Conn, Phase};
use crate::args::Scenario;
use crate::ccr;
use crate::stats::{Counts, ReqType};

impl Conn<'_> {
    pub(super) fn flush_live(&mut self) {
        let sent: u64 = self.stats.types.iter().map(|t| t.sent).sum();
        let answered: u64 = self.stats.types.iter().map(|t| t.answered).sum();
        let (ps, pa, pe) = self.pushed;
        if sent != ps {
            self.live.sent.fetch_add(sent - ps, Ordering::Relaxed);
        }
        if answered != pa {
            self.live
                .answered
                .fetch_add(answered - pa, Ordering::Relaxed);
        }
        if self.errors != pe {
            self.live
                .errors
                .fetch_add(self.errors - pe, Ordering::Relaxed);
        }
        self.pushed = (sent, answered, self.errors);
    }

    /// Writes the buffered `--record` lines.
    pub(super) fn flush_record(&mut self) {
        use std::io::Write;
        if let Some(f) = &self.plan.record {
            if !self.recorded.is_empty() {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(&self.recorded);
                }
                self.recorded.clear();
            }
        }
    }

    pub(super) fn on_answer(&mut self, msg: &Message<'_>, now: Instant) {
        let hbh = msg.header().hop_by_hop;
        let s = (hbh & self.slot_mask) as usize;
        let matched = self
            .slots
            .get(s)
            .is_some_and(|x| x.phase == Phase::InFlight && x.hbh == hbh);
        if !matched {
            self.stats.unmatched_answers += 1;
            return;
        }
        let slot = &mut self.slots[s];
        let drain = slot.drain;
        // Drain answers count apart, out of every measured figure.
        let mut scratch = (Counts::default(), Counts::default());
        let (mscc, experimental) = if drain {
            (&mut scratch.0, &mut scratch.1)
        } else {
            (
                &mut self.stats.mscc_result_codes,
                &mut self.stats.experimental_result_codes,
            )
        };
        let ans = ccr::read_answer(msg, &slot.sid, mscc, experimental);
        let ok = ans.is_success();
        if drain {
            self.stats.drain_answered += 1;
        } else {
            let t = &mut self.stats.types[slot.req as usize];
            t.answered += 1;
            let us = now.saturating_duration_since(slot.intended).as_micros() as u64;
            if slot.intended >= self.measure_from {
                t.record_latency(us);
            }
            if let Some(c) = ans.code() {
                t.result_codes.add(c);
            }
            self.stats.per_second.answered(now, us, ok);
            if !ans.well_formed {
                self.stats.protocol_errors += 1;
            }
            if !ok {
                t.errors += 1;
                self.errors += 1;
            }
            self.stats.last_settled = Some(now);
        }
        self.in_flight -= 1;
        if self.plan.record.is_some() {
            use std::io::Write;
            let (req, number) = (slot.req, slot.number);
            let sid = String::from_utf8_lossy(&slot.sid).into_owned();
            let _ = write!(
                self.recorded,
                "{{\"session_id\":{},\"type\":\"{}\",\"number\":{},\"result_code\":{}",
                serde_json::Value::String(sid),
                req.name(),
                number,
                ans.code().unwrap_or(0)
            );
            if self.plan.args.record_messages {
                self.recorded.extend_from_slice(b",\"request\":\"");
                push_hex(&mut self.recorded, &self.slots[s].request);
                self.recorded.extend_from_slice(b"\",\"answer\":\"");
                push_hex(&mut self.recorded, msg.as_bytes());
                self.recorded.push(b'"');
            }
            self.recorded.extend_from_slice(b"}\n");
            if self.recorded.len() >= 64 * 1024 {
                self.flush_record();
            }
        }
        let slot = &mut self.slots[s];
        let topup = self.plan.args.scenario == Scenario::Topup;
        let code = ans.code();
        if slot.req == ReqType::Initial && ok {
            slot.open = true;
        }
        if topup && slot.req == ReqType::Initial && code == Some(result::CREDIT_LIMIT_REACHED) {
            self.park(s, now);
        } else if slot.req == ReqType::Terminate {
            self.terminated(s, ok, code, now);
        } else if !ok && slot.open && !processed(code) {
            // A CCR-Update the server did not process: the session is
            // still open there.
            self.terminate_next(s);
        } else if !ok || slot.req == ReqType::Event {
            self.end_session(s, ok);
        } else if topup && ans.starved && !slot.aborted {
            slot.number += 1;
            self.wait_for_credit(s);
        } else {
            slot.number += 1;
            slot.phase = Phase::Ready;
            self.ready.push_back(s as u32);
        }
    }
}

/// Appends `bytes` to `out` as lowercase hex.
fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + 2 * bytes.len(), 0);
    // The target is exactly twice as long as the input.
    let _ = hex::encode_to_slice(bytes, &mut out[start..]);
}
