//! The loop side of a commit: the pending batch, into which effects, CDRs
//! and answer records are encoded without any I/O.

use super::answers::{nth_answer, AnswerRecordLen};
use super::ShardStore;
use crate::error::{Error, Result};
use crate::record::{encode_cdr_after, encode_effect};
use gyro_charging::{Cdr, Effect, Output};

/// The records of one batch, encoded: the three sections of a journal
/// frame. Moved (not copied) to the disk side.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) effects: Vec<u8>,
    pub(super) n_effects: u32,
    pub(super) cdrs: Vec<u8>,
    pub(super) n_cdrs: u32,
    pub(super) first_cdr: u64,
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
            cdrs: self.cdrs.clone(),
            n_cdrs: self.n_cdrs + later.n_cdrs,
            first_cdr: if self.n_cdrs > 0 {
                self.first_cdr
            } else {
                later.first_cdr
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
            encode_effect(&mut self.pending.effects, e);
        }
        if !cdrs.is_empty() {
            if self.pending.n_cdrs == 0 {
                self.pending.first_cdr = next;
            }
            // The CDRs of one call (one request's) share their session's
            // strings; each call's first CDR stands alone, so sections
            // joined end to end (`prepend_to`) still read from their start.
            let mut prev = None;
            for c in cdrs {
                encode_cdr_after(&mut self.pending.cdrs, c, prev);
                prev = Some(c);
            }
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
