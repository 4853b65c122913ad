//! The loop side of a commit: the pending batch, into which effects, CDRs
//! and answer records are encoded without any I/O.

use super::answers::{nth_answer, AnswerRecordLen};
use super::ShardStore;
use crate::error::{Error, Result};
use crate::record::{encode_cdr, encode_cdr_after, EffectEncoder};
use gyro_charging::{Cdr, Effect, Output};

/// The records of one batch, encoded: the three sections of a journal
/// frame. Moved (not copied) to the disk side.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) effects: Vec<u8>,
    pub(super) n_effects: u32,
    /// Encodes `effects` (against the effects before in the section).
    pub(super) effect_encoder: EffectEncoder,
    pub(super) cdrs: Vec<u8>,
    pub(super) n_cdrs: u32,
    pub(super) first_cdr: u64,
    /// The last CDR encoded (meaningful while `n_cdrs > 0`): the next one
    /// is written against it.
    pub(super) last_cdr: Cdr,
    /// The rate and rating group of the CDR before `last_cdr`
    /// (meaningful while `n_cdrs > 1`).
    pub(super) back_rate: String,
    pub(super) back_rating_group: Option<u32>,
    pub(super) answers: Vec<u8>,
    pub(super) n_answers: u32,
    pub(super) first_answer: u64,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.n_effects == 0 && self.n_cdrs == 0 && self.n_answers == 0
    }

    pub(super) fn clear(&mut self) {
        self.effects.clear();
        self.effect_encoder.reset();
        self.cdrs.clear();
        self.answers.clear();
        self.n_effects = 0;
        self.n_cdrs = 0;
        self.n_answers = 0;
        self.first_cdr = 0;
        self.first_answer = 0;
    }

    /// `self` followed by `later` (a failed batch put back before the
    /// records appended since).
    pub(super) fn prepend_to(&self, later: &mut Batch) {
        let mut b = Batch {
            effects: self.effects.clone(),
            n_effects: self.n_effects + later.n_effects,
            // The later batch's effects use only what its own carried.
            effect_encoder: later.effect_encoder,
            cdrs: self.cdrs.clone(),
            n_cdrs: self.n_cdrs + later.n_cdrs,
            first_cdr: if self.n_cdrs > 0 {
                self.first_cdr
            } else {
                later.first_cdr
            },
            back_rate: match later.n_cdrs {
                0 => self.back_rate.clone(),
                1 => self.last_cdr.rate.clone(),
                _ => std::mem::take(&mut later.back_rate),
            },
            back_rating_group: match later.n_cdrs {
                0 => self.back_rating_group,
                1 => self.last_cdr.rating_group,
                _ => later.back_rating_group,
            },
            last_cdr: if later.n_cdrs > 0 {
                std::mem::take(&mut later.last_cdr)
            } else {
                self.last_cdr.clone()
            },
            answers: self.answers.clone(),
            n_answers: self.n_answers + later.n_answers,
            first_answer: if self.n_answers > 0 {
                self.first_answer
            } else {
                later.first_answer
            },
        };
        b.effects.extend_from_slice(&later.effects);
        b.cdrs.extend_from_slice(&later.cdrs);
        b.answers.extend_from_slice(&later.answers);
        *later = b;
    }

    /// The answer record `seq`, if this batch holds it.
    pub(super) fn answer(&self, seq: u64, len: AnswerRecordLen) -> Option<Vec<u8>> {
        if self.n_answers == 0
            || seq < self.first_answer
            || seq >= self.first_answer + self.n_answers as u64
        {
            return None;
        }
        nth_answer(&self.answers, (seq - self.first_answer) as usize, len).map(<[u8]>::to_vec)
    }
}

impl ShardStore {
    /// Adds the effects and CDRs of one request (or any number) to the
    /// pending batch. Only encodes binary records: no I/O. CDRs must carry
    /// consecutive sequence numbers continuing
    /// [`ShardStore::next_cdr_sequence`]; otherwise nothing is added.
    pub fn append(&mut self, effects: &[Effect], cdrs: &[Cdr]) -> Result<()> {
        self.check_failed()?;
        let next = self.next_cdr_sequence();
        for (expected, c) in (next..).zip(cdrs) {
            if c.sequence != expected {
                return Err(Error::Sequence {
                    expected,
                    found: c.sequence,
                });
            }
        }
        for e in effects {
            self.pending
                .effect_encoder
                .encode(&mut self.pending.effects, e);
        }
        if !cdrs.is_empty() {
            if self.pending.n_cdrs == 0 {
                self.pending.first_cdr = next;
            }
            // Each record after the first of the section is written
            // against the one before it (the first of a batch stands
            // alone, so a failed batch put back before a later one still
            // reads).
            let b = &mut self.pending;
            let before = b.n_cdrs as usize;
            for (i, c) in cdrs.iter().enumerate() {
                let prev = match i {
                    0 if before == 0 => None,
                    0 => Some(&b.last_cdr),
                    _ => Some(&cdrs[i - 1]),
                };
                let two_back = match i {
                    0 if before > 1 => Some((b.back_rate.as_str(), b.back_rating_group)),
                    0 => None,
                    1 if before > 0 => Some((b.last_cdr.rate.as_str(), b.last_cdr.rating_group)),
                    1 => None,
                    _ => Some((cdrs[i - 2].rate.as_str(), cdrs[i - 2].rating_group)),
                };
                match prev {
                    None => encode_cdr(&mut b.cdrs, c),
                    Some(p) => encode_cdr_after(&mut b.cdrs, c, p, two_back),
                }
            }
            // What the next records are written against: the last two.
            let n = cdrs.len();
            if n >= 2 {
                copy_text(&mut b.back_rate, &cdrs[n - 2].rate);
                b.back_rating_group = cdrs[n - 2].rating_group;
            } else if before > 0 {
                std::mem::swap(&mut b.back_rate, &mut b.last_cdr.rate);
                b.back_rating_group = b.last_cdr.rating_group;
            }
            keep_last(&mut b.last_cdr, &cdrs[n - 1]);
        }
        self.pending.n_effects += effects.len() as u32;
        self.pending.n_cdrs += cdrs.len() as u32;
        Ok(())
    }

    /// Adds `count` answer records (the engine's opaque bytes, numbered
    /// from `first_seq`) to the pending batch. Sequence numbers continue
    /// those already pending.
    pub fn append_answers(&mut self, records: &[u8], first_seq: u64, count: u32) -> Result<()> {
        self.check_failed()?;
        if count == 0 {
            return Ok(());
        }
        if self.pending.n_answers == 0 {
            self.pending.first_answer = first_seq;
        } else {
            let expected = self.pending.first_answer + self.pending.n_answers as u64;
            if first_seq != expected {
                return Err(Error::Sequence {
                    expected,
                    found: first_seq,
                });
            }
        }
        self.pending.answers.extend_from_slice(records);
        self.pending.n_answers += count;
        Ok(())
    }

    /// [`ShardStore::append`] and [`ShardStore::append_answers`] of
    /// everything in an engine [`Output`].
    pub fn append_output(&mut self, out: &Output) -> Result<()> {
        self.append(&out.effects, out.cdrs.as_slice())?;
        let a = &out.answers;
        self.append_answers(a.as_bytes(), a.first_seq(), a.count())
    }
}

/// Makes `d` hold `s`, copying only when it does not already (most of a
/// CDR's text repeats from one request to the next).
fn copy_text(d: &mut String, s: &str) {
    if d != s {
        d.clear();
        d.push_str(s);
    }
}

/// Keeps in `last` what [`encode_cdr_after`] compares of `c`: every field
/// but the counters and amounts (always written whole), which are left
/// as they were.
fn keep_last(last: &mut Cdr, c: &Cdr) {
    // Destructured so that a new field fails to compile here.
    let Cdr {
        sequence,
        node_id,
        record_type,
        session_id,
        account,
        subscriber,
        service_context,
        interface,
        rating_group,
        service_id,
        request_number,
        requested_action,
        unit,
        time: _,
        input_octets: _,
        output_octets: _,
        total_octets: _,
        service_units: _,
        rated_units: _,
        bundle_units: _,
        amount: _,
        unbilled: _,
        balance_after: _,
        started,
        ended,
        result_code,
        closing_cause,
        termination_cause,
        reporting_reason,
        plan,
        rate,
        destination,
        zone,
        tariff_change,
    } = c;
    last.sequence = *sequence;
    copy_text(&mut last.node_id, node_id);
    last.record_type = *record_type;
    copy_text(&mut last.session_id, session_id);
    last.account = *account;
    copy_text(&mut last.subscriber, subscriber);
    copy_text(&mut last.service_context, service_context);
    last.interface = *interface;
    last.rating_group = *rating_group;
    last.service_id = *service_id;
    last.request_number = *request_number;
    last.requested_action = *requested_action;
    last.unit = *unit;
    last.started = *started;
    last.ended = *ended;
    last.result_code = *result_code;
    last.closing_cause = *closing_cause;
    last.termination_cause = *termination_cause;
    last.reporting_reason = *reporting_reason;
    copy_text(&mut last.plan, plan);
    copy_text(&mut last.rate, rate);
    copy_text(&mut last.destination, destination);
    copy_text(&mut last.zone, zone);
    last.tariff_change = *tariff_change;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::decode_cdrs;
    use crate::record::tests::cdr_run;
    use crate::StoreOptions;
    use gyro_charging::Timestamp;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Requests of any number of CDRs appended one after the other,
        /// and a failed batch put back before them, leave a CDR section
        /// that reads back record for record.
        #[test]
        fn appended_cdrs_read_back_in_order(
            run in cdr_run(),
            more in cdr_run(),
            cuts in proptest::collection::vec(0usize..4, 1..8).prop_map(|mut v| {
                v.push(1);
                v
            }),
            fail_after in 0usize..8,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let now = Timestamp::from_secs(1_772_323_200);
            let (mut store, _) =
                ShardStore::open(dir.path(), 0, StoreOptions::default(), now).unwrap();
            let mut all: Vec<Cdr> = run.into_iter().chain(more).collect();
            let first = store.next_cdr_sequence();
            for (i, c) in all.iter_mut().enumerate() {
                c.sequence = first + i as u64;
            }
            let mut failed: Option<Batch> = None;
            let mut at = 0;
            for (k, n) in cuts.iter().cycle().enumerate() {
                if at == all.len() {
                    break;
                }
                if k == fail_after && failed.is_none() {
                    // What is pending goes to disk and fails; appends go on.
                    failed = Some(std::mem::take(&mut store.pending));
                    store.next_cdr += failed.as_ref().unwrap().n_cdrs as u64;
                }
                let end = (at + n).min(all.len());
                store.append(&[], &all[at..end]).unwrap();
                at = end;
            }
            if let Some(f) = failed {
                store.next_cdr -= f.n_cdrs as u64;
                f.prepend_to(&mut store.pending);
            }
            let b = &store.pending;
            prop_assert_eq!(b.n_cdrs as usize, all.len());
            let mut back = Vec::new();
            decode_cdrs(&b.cdrs, b.n_cdrs, first, |c| back.push(c.clone())).unwrap();
            let want: Vec<_> = all.iter().map(Cdr::view).collect();
            prop_assert_eq!(back, want);
        }
    }
}
