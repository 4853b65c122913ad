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
                b.back_rate.clone_from(&cdrs[n - 2].rate);
                b.back_rating_group = cdrs[n - 2].rating_group;
            } else if before > 0 {
                std::mem::swap(&mut b.back_rate, &mut b.last_cdr.rate);
                b.back_rating_group = b.last_cdr.rating_group;
            }
            b.last_cdr.set_from(&cdrs[n - 1].view());
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
