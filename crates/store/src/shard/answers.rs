//! Answer retention: where each journaled answer section lies, reading one
//! answer record back by its sequence number, and the horizon below which
//! answers are no longer kept.

use super::files::journal_name;
use super::recovery::RecoveryReport;
use super::ShardStore;
use crate::error::{corrupt, io_err, Result};
use crate::journal::FrameInfo;

/// Length of the answer record at the start of a buffer (`None`:
/// malformed). The store does not know the layout of answer records; it
/// needs only this to find one record among a section's.
pub type AnswerRecordLen = fn(&[u8]) -> Option<usize>;

/// The default [`AnswerRecordLen`], the layout of the engine's answer
/// records: a record starts with the length of the rest of it as a `u32`,
/// little-endian.
pub fn u32_prefixed_len(b: &[u8]) -> Option<usize> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let total = n.checked_add(4)?;
    (total <= b.len()).then_some(total)
}

pub(super) fn nth_answer(section: &[u8], n: usize, len: AnswerRecordLen) -> Option<&[u8]> {
    let mut rest = section;
    for _ in 0..n {
        rest = rest.get(len(rest)?..)?;
    }
    let l = len(rest)?;
    rest.get(..l)
}

/// Where the answers of one journal frame are.
#[derive(Clone, Copy, Debug)]
pub(super) struct AnswerSpan {
    pub(super) first: u64,
    pub(super) count: u32,
    pub(super) generation: u64,
    pub(super) offset: u64,
    pub(super) len: u32,
}

impl ShardStore {
    /// The smallest answer sequence number still live (from the engine's
    /// `answer_horizon(now)`): journals whose answers are all below it may
    /// be deleted once a snapshot covers them. `u64::MAX` (the default)
    /// keeps no journal for its answers.
    pub fn set_answer_horizon(&mut self, horizon: u64) {
        self.answer_horizon = horizon;
        // Spans wholly below the horizon are never asked for again.
        let keep_from = self
            .answer_index
            .partition_point(|s| s.first + s.count as u64 <= horizon);
        if keep_from > 4096 {
            self.answer_index.drain(..keep_from);
        }
    }

    /// The end (one past the last answer sequence number) of the answers
    /// each journal generation below `below` holds, from the answer
    /// index: what deciding whether a journal is still needed for its
    /// answers takes, without reading it. A generation absent from the
    /// list holds no answer at or above the horizon.
    pub(super) fn answer_ends_below(&self, below: u64) -> Vec<(u64, u64)> {
        let index = &self.answer_index;
        let mut ends = Vec::new();
        let mut i = 0;
        while let Some(g) = index.get(i).map(|s| s.generation).filter(|g| *g < below) {
            // Spans are in commit order, so in generation order.
            let j = i + index[i..].partition_point(|s| s.generation <= g);
            let last = &index[j - 1];
            ends.push((g, last.first + last.count as u64));
            i = j;
        }
        ends
    }

    /// How to find one answer record among a section's (default:
    /// [`u32_prefixed_len`]).
    pub fn set_answer_record_len(&mut self, len: AnswerRecordLen) {
        self.answer_len = len;
    }

    /// Reads answer record `seq` back: from the pending batch, the batch
    /// in flight, or the journal on disk. `None` when no retained journal
    /// holds it. Reading from disk is one positioned read on this thread
    /// (duplicates are rare).
    pub fn read_answer(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        if let Some(a) = self.pending.answer(seq, self.answer_len) {
            return Ok(Some(a));
        }
        if let Some(a) = self
            .inflight
            .as_ref()
            .and_then(|b| b.answer(seq, self.answer_len))
        {
            return Ok(Some(a));
        }
        let i = self
            .answer_index
            .partition_point(|s| s.first + s.count as u64 <= seq);
        let Some(span) = self.answer_index.get(i).filter(|s| s.first <= seq) else {
            return Ok(None);
        };
        let path = self.ledger_dir.join(journal_name(span.generation));
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let mut buf = vec![0u8; span.len as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, span.offset)
            .map_err(io_err("read", &path))?;
        match nth_answer(&buf, (seq - span.first) as usize, self.answer_len) {
            Some(r) => Ok(Some(r.to_vec())),
            None => Err(corrupt(&path, span.offset, "answer section does not split")),
        }
    }
}

pub(super) fn index_answers(
    index: &mut Vec<AnswerSpan>,
    generation: u64,
    frames: &[FrameInfo],
    report: &mut RecoveryReport,
) {
    for f in frames.iter().filter(|f| f.answers > 0) {
        report.journal_answers += f.answers as u64;
        index.push(AnswerSpan {
            first: f.first_answer,
            count: f.answers,
            generation,
            offset: f.answers_offset(),
            len: f.answers_len,
        });
    }
}
