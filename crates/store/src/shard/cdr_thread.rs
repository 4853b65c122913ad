//! The shard's CDR writer thread: everything a commit's answers need not
//! wait for. It is fed the committed batches' CDR records in order (in
//! [`Durability::Sync`] only once their journal frame is durable), encodes
//! them as CDR file lines and appends them to the open CDR file, closes
//! the file when it is due (fsync, rename, directory fsync), makes the CDR
//! file durable when a journal generation is closed (so the snapshot that
//! covers it may delete it), and in [`Durability::Async`] runs the
//! periodic `fdatasync` of the journal with its own handle of the file.
//!
//! The queue is bounded ([`QUEUE_BATCHES`]): a disk slower than the load
//! holds the commit job back (backpressure) instead of growing memory.
//! What it did and its errors are collected in [`Shared`] and handed to the
//! caller with the next [`CommitStats`](super::CommitStats).

use super::bursts;
use super::pool::BufferPool;
use super::Durability;
use crate::cdr_file::CdrWriter;
use crate::cdr_json;
use crate::error::{io_err, Error, Result};
use crate::names::CdrFormat;
use crate::record::{DecodeError, Decoder, TAG_CDR_SHARED};
use gyro_charging::cdr::CdrCsvWriter;
use gyro_charging::{CdrView, Timestamp};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SendError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Batches the CDR writer may be behind the journal before a commit job
/// waits for it.
pub(super) const QUEUE_BATCHES: usize = 2048;
/// Least time between two ticks the loop side sends.
const TICK_EVERY_MS: u64 = 50;

/// Encodes CDR file lines from decoded records, appending them to a
/// buffer: JSON Lines as [`CdrView::write_json_line`] writes them, CSV in
/// the columns of [`gyro_charging::cdr::CSV_HEADER`] through one
/// [`CdrCsvWriter`] (one buffer for all the lines, not one per line).
/// Call [`LineEncoder::finish`] once done: CSV lines reach the buffer
/// only then.
pub(super) enum LineEncoder<'o> {
    Json(&'o mut Vec<u8>),
    Csv(Box<CdrCsvWriter<&'o mut Vec<u8>>>),
}

fn encode_err(e: &dyn std::fmt::Display) -> Error {
    Error::Encode {
        what: "CDR line",
        reason: e.to_string(),
    }
}

impl<'o> LineEncoder<'o> {
    pub(super) fn new(format: CdrFormat, out: &'o mut Vec<u8>) -> Self {
        match format {
            CdrFormat::JsonLines => LineEncoder::Json(out),
            CdrFormat::Csv => LineEncoder::Csv(Box::new(CdrCsvWriter::new(out))),
        }
    }

    pub(super) fn line(&mut self, c: &CdrView<'_>) -> Result<()> {
        match self {
            LineEncoder::Json(out) => c.write_json_line(out).map_err(|e| encode_err(&e)),
            LineEncoder::Csv(w) => w.write(c).map_err(|e| encode_err(&e)),
        }
    }

    /// Flushes the lines into the buffer.
    pub(super) fn finish(self) -> Result<()> {
        match self {
            LineEncoder::Json(_) => Ok(()),
            LineEncoder::Csv(w) => w.into_inner().map(drop).map_err(|e| encode_err(&e)),
        }
    }
}

/// Appends the CDR file lines of a batch's CDR section (`n` records
/// numbered from `first`) to `out`. JSON lines are written straight from
/// the records ([`cdr_json`]); a record that path leaves, and every CSV
/// line, goes through the decoded record.
/// The shortest run of whole lines at the start of `lines` (whole lines
/// of `format`) that holds at least `room` bytes, or all of them: its
/// length in bytes and its number of lines. At least one line. A CSV
/// record may hold a newline inside a quoted field; a JSON line never
/// does (JSON escapes it).
fn lines_to_fill(format: CdrFormat, lines: &[u8], room: usize) -> (usize, u64) {
    let count = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() as u64;
    match format {
        CdrFormat::JsonLines => {
            let from = room.saturating_sub(1).min(lines.len());
            match lines[from..].iter().position(|&c| c == b'\n') {
                Some(at) => (from + at + 1, count(&lines[..from + at + 1])),
                None => (lines.len(), count(lines)),
            }
        }
        CdrFormat::Csv => {
            let (mut quoted, mut k) = (false, 0);
            for (i, &c) in lines.iter().enumerate() {
                match c {
                    b'"' => quoted = !quoted,
                    b'\n' if !quoted => {
                        k += 1;
                        if i + 1 >= room {
                            return (i + 1, k);
                        }
                    }
                    _ => {}
                }
            }
            (lines.len(), k)
        }
    }
}

pub(super) fn encode_lines(
    format: CdrFormat,
    cdrs: &[u8],
    n: u32,
    first: u64,
    line: &mut cdr_json::Line,
    out: &mut Vec<u8>,
) -> Result<()> {
    let bad = |at: usize, e: DecodeError| Error::Encode {
        what: "CDR line",
        reason: format!("record at byte {at}: {e}"),
    };
    let mut enc = LineEncoder::new(format, out);
    let mut pos = 0usize;
    let mut k = 0u64;
    // The strings of the record before, which a record may share.
    let mut prev = cdr_json::Strings::default();
    while pos < cdrs.len() {
        let expected = first.wrapping_add(k);
        let fast = match &mut enc {
            LineEncoder::Json(out) => cdr_json::json_line(&cdrs[pos..], line, out, &mut prev),
            LineEncoder::Csv(_) => None,
        };
        let (sequence, len) = match fast {
            Some(read) => read,
            None => {
                // The record before is needed only by a record that
                // shares its strings.
                let before = match cdrs[pos] == TAG_CDR_SHARED {
                    true => prev.view().map_err(|e| bad(pos, e))?,
                    false => None,
                };
                let mut d = Decoder::new(&cdrs[pos..]);
                let c = d.cdr_view_after(before.as_ref()).map_err(|e| bad(pos, e))?;
                if c.sequence == expected {
                    enc.line(&c)?;
                }
                prev = cdr_json::Strings::of(&c);
                (c.sequence, d.position())
            }
        };
        if sequence != expected {
            return Err(bad(
                pos,
                DecodeError::CountMismatch {
                    what: "CDR sequence",
                    expected,
                    found: sequence,
                },
            ));
        }
        pos += len;
        k += 1;
    }
    if k != u64::from(n) {
        return Err(bad(
            cdrs.len(),
            DecodeError::CountMismatch {
                what: "CDRs",
                expected: n.into(),
                found: k,
            },
        ));
    }
    enc.finish()
}

/// A message to the CDR writer.
pub(super) enum Msg {
    /// A batch was written to the journal (and synced, in synchronous
    /// mode): its CDR records (possibly none), numbered from `first`.
    Batch {
        cdrs: Vec<u8>,
        n: u32,
        first: u64,
        now: Timestamp,
    },
    /// The commit job started journal generation `generation`; `file` is
    /// a handle of the new journal. Every CDR of the closed generations
    /// has been sent before.
    JournalRotated {
        file: File,
        path: PathBuf,
        generation: u64,
    },
    /// Time-driven work (a file to close by age, an asynchronous sync,
    /// lines to retry).
    Tick(Timestamp),
    /// Does the time-driven work, then answers: everything sent before is
    /// done.
    Drain(Timestamp, SyncSender<()>),
    /// Closes the open CDR file now (after writing what is queued).
    Close(Timestamp, SyncSender<Result<Option<PathBuf>>>),
    /// Syncs the journal now (`force`) or if due; answers whether it did.
    SyncJournal {
        now: Timestamp,
        force: bool,
        reply: SyncSender<Result<bool>>,
    },
    /// Blocks the writer until the sender of this channel is dropped
    /// (tests: a CDR disk that does not answer).
    Hold(Receiver<()>),
    /// Ends the thread (after everything sent before).
    Stop,
}

/// What the writer did since the caller last looked, and its errors.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub(super) cdr_bytes: u64,
    pub(super) syncs: u32,
    pub(super) rotated: Option<PathBuf>,
    pub(super) cdr_error: Option<Error>,
    /// The open CDR file.
    pub(super) cdr_path: PathBuf,
    /// Why the store failed (an `fdatasync` of the journal failed).
    pub(super) failed: Option<String>,
}

/// State shared by the loop side, the commit job and the writer.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Set once `report.failed` is.
    pub(super) failed: AtomicBool,
    /// Every CDR journaled in a generation below this one is durable in a
    /// CDR file (and in asynchronous mode those journals are synced): a
    /// snapshot may cover (and delete) them.
    pub(super) ready_generation: AtomicU64,
    pub(super) report: Mutex<Report>,
    /// Buffers of CDR sections, between the commit job and the writer.
    pub(super) pool: BufferPool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    pub(super) fn report(&self) -> MutexGuard<'_, Report> {
        lock(&self.report)
    }

    pub(super) fn fail_writer_gone(&self) {
        self.fail("the CDR writer thread stopped".into());
    }

    fn fail(&self, reason: String) {
        let mut r = self.report();
        r.failed.get_or_insert(reason);
        self.failed.store(true, Ordering::Release);
    }
}

/// The loop side's handle of the writer thread; stops and joins it when
/// dropped (after it wrote everything queued).
#[derive(Debug)]
pub(super) struct CdrThread {
    pub(super) tx: SyncSender<Msg>,
    pub(super) shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    last_tick: u64,
}

/// Holds the CDR writer (see `ShardStore::hold_cdr_writer`) until dropped.
#[derive(Debug)]
pub struct CdrWriterHold {
    _release: SyncSender<()>,
}

impl CdrThread {
    /// Starts the writer of a shard. `generation` is the journal being
    /// appended to; the writer first makes the open CDR file durable, so
    /// that older generations may be covered by a snapshot.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn(
        shard: usize,
        cdr: CdrWriter,
        journal: File,
        journal_path: PathBuf,
        generation: u64,
        durability: Durability,
    ) -> Result<CdrThread> {
        let shared = Arc::new(Shared::default());
        shared.report().cdr_path = cdr.path.clone();
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        let format = cdr.format;
        let reported_bytes = cdr.appended;
        let jp = journal_path.clone();
        let mut w = Writer {
            cdr,
            journal,
            journal_released: 0,
            journal_path,
            durability,
            unsynced_since: None,
            ready_pending: Some(generation),
            lines: Vec::with_capacity(64 << 10),
            line: cdr_json::Line::new(),
            reported_bytes,
            format,
            shared: shared.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("gyro-cdr-{shard}"))
            .spawn(move || w.serve(rx))
            .map_err(|source| Error::Io {
                op: "start the CDR writer for",
                path: jp,
                source,
            })?;
        Ok(CdrThread {
            tx,
            shared,
            thread: Some(thread),
            last_tick: 0,
        })
    }

    /// Asks for time-driven work without waiting (at most every 50 ms;
    /// skipped when the queue is full: the writer is busy anyway).
    pub(super) fn tick(&mut self, now: Timestamp) {
        let t = now.as_millis();
        if t.saturating_sub(self.last_tick) < TICK_EVERY_MS && t >= self.last_tick {
            return;
        }
        self.last_tick = t;
        match self.tx.try_send(Msg::Tick(now)) {
            Ok(()) | Err(TrySendError::Full(_)) => {}
            Err(TrySendError::Disconnected(_)) => self.gone(),
        }
    }

    /// Waits until the writer did everything sent so far and the
    /// time-driven work due at `now`.
    pub(super) fn drain(&self, now: Timestamp) {
        let (reply, done) = sync_channel(1);
        if self.send_now(Msg::Drain(now, reply)).is_err() || done.recv().is_err() {
            self.gone();
        }
    }

    /// Sends a message the writer handles at once, even in the pause it
    /// takes between batches.
    fn send_now(&self, msg: Msg) -> std::result::Result<(), SendError<Msg>> {
        self.tx.send(msg)?;
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        Ok(())
    }

    /// Sends a request and waits for its answer.
    pub(super) fn ask<T>(&self, msg: impl FnOnce(SyncSender<Result<T>>) -> Msg) -> Result<T> {
        let (reply, answer) = sync_channel(1);
        if self.send_now(msg(reply)).is_ok() {
            if let Ok(r) = answer.recv() {
                return r;
            }
        }
        self.gone();
        Err(Error::Busy("the CDR writer stopped"))
    }

    pub(super) fn hold(&self) -> CdrWriterHold {
        let (release, held) = sync_channel(1);
        let _ = self.send_now(Msg::Hold(held));
        CdrWriterHold { _release: release }
    }

    fn gone(&self) {
        self.shared.fail_writer_gone();
    }
}

impl Drop for CdrThread {
    fn drop(&mut self) {
        let _ = self.send_now(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread's state.
struct Writer {
    cdr: CdrWriter,
    /// A handle of the journal generation whose frames were last sent.
    journal: File,
    /// Bytes of `journal` already synced and dropped from the page cache.
    journal_released: u64,
    journal_path: PathBuf,
    durability: Durability,
    unsynced_since: Option<Timestamp>,
    /// A generation to publish as ready once the CDR file is durable.
    ready_pending: Option<u64>,
    lines: Vec<u8>,
    /// Where each JSON line is written before it joins `lines`.
    line: cdr_json::Line,
    /// `cdr.appended` when the bytes were last reported.
    reported_bytes: u64,
    format: CdrFormat,
    shared: Arc<Shared>,
}

impl Writer {
    fn serve(&mut self, rx: Receiver<Msg>) {
        let mut now = Timestamp(0);
        // What an earlier run left in the open file may still be only in
        // the page cache: make it durable before older journals may go
        // (not counted in the commit statistics; retried on failure).
        if let Some(g) = self.ready_pending {
            if self.cdr.sync().is_ok() {
                self.ready_pending = None;
                self.shared.ready_generation.fetch_max(g, Ordering::AcqRel);
            }
        }
        // Idle, it waits for the next message; while batches keep coming
        // it takes them in bursts (requests that wait for their answer
        // unpark it at once: `CdrThread::send_now`).
        bursts::serve(
            &rx,
            |msg| matches!(msg, Msg::Batch { .. }),
            |msg| self.handle(msg, &mut now),
        );
        // Whatever is queued is written (a compressed frame ended; not
        // closed: that is `close_cdr_file`); what fails is rewritten from
        // the journal.
        let _ = self.cdr.flush(now);
    }

    /// Does what one message asks; false for [`Msg::Stop`].
    fn handle(&mut self, msg: Msg, now: &mut Timestamp) -> bool {
        match msg {
            Msg::Batch {
                cdrs,
                n,
                first,
                now: t,
            } => {
                *now = (*now).max(t);
                self.batch(&cdrs, n, first, t);
                self.shared.pool.give_back(cdrs);
                self.housekeeping(*now);
            }
            Msg::JournalRotated {
                file,
                path,
                generation,
            } => {
                if let Err(e) = self.sync_journal() {
                    self.shared.fail(e.to_string());
                }
                self.journal = file;
                self.journal_released = 0;
                self.journal_path = path;
                self.ready_pending = Some(generation);
                self.housekeeping(*now);
            }
            Msg::Tick(t) => {
                *now = (*now).max(t);
                self.housekeeping(*now);
            }
            Msg::Drain(t, reply) => {
                *now = (*now).max(t);
                self.housekeeping(*now);
                let _ = reply.send(());
            }
            Msg::Close(t, reply) => {
                *now = (*now).max(t);
                let _ = reply.send(self.close(t));
            }
            Msg::SyncJournal {
                now: t,
                force,
                reply,
            } => {
                *now = (*now).max(t);
                let due = self.unsynced_since.is_some() && (force || self.sync_due(t));
                let r = if due {
                    self.sync_journal().map(|()| true)
                } else {
                    Ok(false)
                };
                if let Err(e) = &r {
                    self.shared.fail(e.to_string());
                }
                let _ = reply.send(r);
            }
            Msg::Hold(held) => {
                let _ = held.recv();
            }
            Msg::Stop => return false,
        }
        true
    }

    fn batch(&mut self, cdrs: &[u8], n: u32, first: u64, now: Timestamp) {
        if matches!(self.durability, Durability::Async { .. }) {
            self.unsynced_since.get_or_insert(now);
        }
        if n == 0 {
            return;
        }
        self.lines.clear();
        if let Err(e) = encode_lines(self.format, cdrs, n, first, &mut self.line, &mut self.lines) {
            self.error(e);
            self.count_bytes();
            return;
        }
        // A plain file closes once it holds `cdr_max_bytes`: a batch that
        // would take it past goes into it up to the line that reaches the
        // limit, and the rest into the next file (one group commit can
        // carry megabytes of lines).
        let lines = std::mem::take(&mut self.lines);
        let (mut rest, mut left) = (&lines[..], u64::from(n));
        while left > 0 {
            let (take, k) = match self.cdr.room() {
                Some(room) if rest.len() as u64 > room => {
                    lines_to_fill(self.format, rest, room as usize)
                }
                _ => (rest.len(), left),
            };
            if let Err(e) = self.cdr.write(&rest[..take], k, now) {
                self.error(e);
                // Kept in order behind the failed lines, retried with them.
                if k < left {
                    let _ = self.cdr.write(&rest[take..], left - k, now);
                }
                break;
            }
            (rest, left) = (&rest[take..], left - k);
            if left > 0 {
                self.housekeeping_work(now);
            }
        }
        self.lines = lines;
        self.count_bytes();
    }

    /// Reports the bytes appended to the CDR file (compressed bytes with
    /// compression) since the last report.
    fn count_bytes(&mut self) {
        let delta = self.cdr.appended - self.reported_bytes;
        if delta > 0 {
            self.reported_bytes = self.cdr.appended;
            self.shared.report().cdr_bytes += delta;
        }
    }

    fn sync_due(&self, now: Timestamp) -> bool {
        match (self.durability, self.unsynced_since) {
            (Durability::Async { interval }, Some(t)) => {
                now.as_millis().saturating_sub(t.as_millis()) >= interval.as_millis() as u64
            }
            _ => false,
        }
    }

    /// `fdatasync` of the journal if anything sent is unsynced.
    fn sync_journal(&mut self) -> Result<()> {
        if self.unsynced_since.is_none() {
            return Ok(());
        }
        // The whole pages written before the sync are durable after it and
        // leave the page cache (see `writeback`).
        let written = self.journal.metadata().map_or(0, |m| m.len()) & !4095;
        self.journal
            .sync_data()
            .map_err(io_err("fsync", &self.journal_path))?;
        self.journal_released =
            crate::writeback::release(&self.journal, self.journal_released, written);
        self.unsynced_since = None;
        self.shared.report().syncs += 1;
        Ok(())
    }

    fn error(&self, e: Error) {
        self.shared.report().cdr_error.get_or_insert(e);
    }

    /// Lines to retry (or a compressed frame to end), an asynchronous
    /// sync, a file to close, a closed journal generation to make ready.
    fn housekeeping(&mut self, now: Timestamp) {
        self.housekeeping_work(now);
        self.count_bytes();
    }

    fn housekeeping_work(&mut self, now: Timestamp) {
        if self.cdr.backlog() > 0 || self.cdr.frame_due(now) {
            if let Err(e) = self.cdr.flush(now) {
                self.error(e);
                return;
            }
        }
        if self.sync_due(now) {
            if let Err(e) = self.sync_journal() {
                self.shared.fail(e.to_string());
                return;
            }
        }
        if self.cdr.due(now) {
            // A closed file must never hold a record the journal could
            // still lose.
            if let Err(e) = self.sync_journal() {
                self.shared.fail(e.to_string());
                return;
            }
            match self.cdr.rotate(now) {
                Ok(p) => {
                    let mut r = self.shared.report();
                    r.syncs += 2;
                    r.cdr_path = self.cdr.path.clone();
                    if p.is_some() {
                        r.rotated = p;
                    }
                }
                Err(e) => {
                    self.error(e);
                    return;
                }
            }
        }
        if let Some(g) = self.ready_pending {
            // The journals below `g` may be deleted once a snapshot covers
            // them: no CDR may live only there.
            match self.cdr.sync() {
                Ok(()) => {
                    self.ready_pending = None;
                    self.shared.report().syncs += 2;
                    self.shared.ready_generation.fetch_max(g, Ordering::AcqRel);
                }
                Err(e) => self.error(e),
            }
        }
    }

    fn close(&mut self, now: Timestamp) -> Result<Option<PathBuf>> {
        self.cdr.flush(now)?;
        if let Err(e) = self.sync_journal() {
            self.shared.fail(e.to_string());
            return Err(e);
        }
        let r = self.cdr.rotate(now);
        self.count_bytes();
        let r = r?;
        self.shared.report().cdr_path = self.cdr.path.clone();
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::{cdr, plain_cdr};
    use crate::record::{encode_cdr, encode_cdr_after};
    use gyro_charging::Cdr;
    use proptest::prelude::*;

    #[test]
    fn a_batch_is_split_after_the_line_that_fills_the_file() {
        let json = b"{\"a\":1}\n{\"b\":\"x\\ny\"}\n{\"c\":3}\n";
        // 8 bytes of room: the first line (8 bytes) fills it.
        assert_eq!(lines_to_fill(CdrFormat::JsonLines, json, 8), (8, 1));
        // 9: the second line too (JSON escapes its newline).
        assert_eq!(lines_to_fill(CdrFormat::JsonLines, json, 9), (21, 2));
        assert_eq!(lines_to_fill(CdrFormat::JsonLines, json, 0), (8, 1));
        assert_eq!(
            lines_to_fill(CdrFormat::JsonLines, json, 1000),
            (json.len(), 3)
        );
        // A CSV field may hold a newline inside its quotes.
        let csv = b"1,\"a\nb\",x\n2,c,y\n";
        assert_eq!(lines_to_fill(CdrFormat::Csv, csv, 3), (10, 1));
        assert_eq!(lines_to_fill(CdrFormat::Csv, csv, 12), (csv.len(), 2));
    }

    /// The lines through the decoded records only (the reference).
    fn decoded_lines(format: CdrFormat, cdrs: &[Cdr]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = LineEncoder::new(format, &mut out);
        for c in cdrs {
            enc.line(&c.view()).unwrap();
        }
        enc.finish().unwrap();
        out
    }

    /// A section as the store writes one: the records numbered from
    /// `first`, each after the first sharing the strings it has in common
    /// with the one before it.
    fn numbered(mut cdrs: Vec<Cdr>, first: u64) -> (Vec<Cdr>, Vec<u8>) {
        let mut section = Vec::new();
        for (i, c) in cdrs.iter_mut().enumerate() {
            c.sequence = first.wrapping_add(i as u64);
        }
        for (i, c) in cdrs.iter().enumerate() {
            encode_cdr_after(&mut section, c, i.checked_sub(1).map(|j| &cdrs[j]));
        }
        (cdrs, section)
    }

    /// The records with every other one taking the strings of the one
    /// before it (the CDRs of one request share their session's).
    fn sharing(mut cdrs: Vec<Cdr>, which: u8) -> Vec<Cdr> {
        for i in (1..cdrs.len()).step_by(2) {
            let p = cdrs[i - 1].clone();
            let c = &mut cdrs[i];
            let fields: [(&mut String, &String); 8] = [
                (&mut c.node_id, &p.node_id),
                (&mut c.session_id, &p.session_id),
                (&mut c.subscriber, &p.subscriber),
                (&mut c.service_context, &p.service_context),
                (&mut c.plan, &p.plan),
                (&mut c.rate, &p.rate),
                (&mut c.destination, &p.destination),
                (&mut c.zone, &p.zone),
            ];
            for (k, (to, from)) in fields.into_iter().enumerate() {
                if which & (1 << k) != 0 {
                    to.clone_from(from);
                }
            }
        }
        cdrs
    }

    #[test]
    fn csv_lines_have_every_column_of_the_header() {
        use gyro_charging::cdr::{CdrCsvReader, CSV_COLUMNS};
        // A usage record with most optional values absent: the old
        // writer left their columns out.
        let c = Cdr {
            node_id: "gyro-demo".into(),
            session_id: "s;1".into(),
            subscriber: "e164:46700000628".into(),
            service_context: "32251@3gpp.org".into(),
            rating_group: Some(10),
            request_number: 1,
            unit: Some(gyro_charging::UnitKind::Octets),
            total_octets: 1000,
            result_code: 2001,
            ..Cdr::default()
        };
        let (cdrs, section) = numbered(vec![c.clone(), c], 5);
        let mut out = Vec::new();
        let mut line = cdr_json::Line::new();
        encode_lines(CdrFormat::Csv, &section, 2, 5, &mut line, &mut out).unwrap();
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(&out[..]);
        let mut back = Vec::new();
        for rec in r.byte_records() {
            let rec = rec.unwrap();
            assert_eq!(rec.len(), CSV_COLUMNS);
            back.push(CdrCsvReader::new().record(&rec).unwrap());
        }
        assert_eq!(back, cdrs);
        assert!(String::from_utf8(out).unwrap().ends_with(",gy\n"));
    }

    #[test]
    fn a_plain_gy_record_takes_the_direct_path() {
        let c = Cdr {
            sequence: 12,
            node_id: "gyro-1".into(),
            session_id: "pgw.example;1;2".into(),
            subscriber: "e164:46700000001".into(),
            service_context: "32251@3gpp.org".into(),
            rating_group: Some(10),
            unit: Some(gyro_charging::UnitKind::Octets),
            total_octets: 500_000,
            amount: -3,
            balance_after: 99,
            result_code: 2001,
            plan: "default".into(),
            ..Cdr::default()
        };
        let (cdrs, section) = numbered(vec![c], 12);
        let mut out = Vec::new();
        assert_eq!(
            cdr_json::json_line(
                &section,
                &mut cdr_json::Line::new(),
                &mut out,
                &mut cdr_json::Strings::default()
            ),
            Some((12, section.len()))
        );
        assert_eq!(out, decoded_lines(CdrFormat::JsonLines, &cdrs));
        // A line too long for the direct path goes through the decoder.
        let mut long = cdrs[0].clone();
        long.session_id = "s".repeat(5000);
        let (cdrs, section) = numbered(vec![cdrs[0].clone(), long], 12);
        let first_len = {
            let mut b = Vec::new();
            encode_cdr(&mut b, &cdrs[0]);
            b.len()
        };
        let mut prev = cdr_json::Strings::default();
        let mut first_line = Vec::new();
        let line = &mut cdr_json::Line::new();
        assert!(cdr_json::json_line(&section, line, &mut first_line, &mut prev).is_some());
        assert_eq!(section[first_len], crate::record::TAG_CDR_SHARED);
        assert_eq!(
            cdr_json::json_line(&section[first_len..], line, &mut out, &mut prev),
            None
        );
        out.clear();
        encode_lines(
            CdrFormat::JsonLines,
            &section,
            2,
            12,
            &mut cdr_json::Line::new(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, decoded_lines(CdrFormat::JsonLines, &cdrs));
    }

    proptest! {
        #[test]
        fn json_lines_from_records_are_the_bytes_of_the_decoded_records(
            cdrs in proptest::collection::vec(prop_oneof![plain_cdr(), cdr()], 1..8),
            first in any::<u64>(),
            shared in any::<u8>(),
        ) {
            let (cdrs, section) = numbered(sharing(cdrs, shared), first);
            for format in [CdrFormat::JsonLines, CdrFormat::Csv] {
                let mut out = b"kept".to_vec();
                encode_lines(format, &section, cdrs.len() as u32, first, &mut cdr_json::Line::new(), &mut out).unwrap();
                prop_assert_eq!(&out[..4], b"kept");
                let want = decoded_lines(format, &cdrs);
                // The reference itself: the lines `gyro cdr` prints for
                // the records (every CSV column, in the header's order).
                let mut printed = String::new();
                for c in &cdrs {
                    match format {
                        CdrFormat::JsonLines => {
                            let mut l = Vec::new();
                            c.write_json_line(&mut l).unwrap();
                            printed.push_str(&String::from_utf8(l).unwrap());
                        }
                        CdrFormat::Csv => c.write_csv(&mut printed),
                    }
                }
                prop_assert_eq!(String::from_utf8_lossy(&want), printed);
                prop_assert_eq!(
                    String::from_utf8_lossy(&out[4..]),
                    String::from_utf8_lossy(&want)
                );
            }
        }

        #[test]
        fn damaged_sections_are_errors_not_panics(
            cdrs in proptest::collection::vec(plain_cdr(), 1..4),
            cut in any::<prop::sample::Index>(),
            flip in any::<(prop::sample::Index, u8)>(),
            shared in any::<u8>(),
        ) {
            let (cdrs, section) = numbered(sharing(cdrs, shared), 7);
            let n = cdrs.len() as u32;
            let mut out = Vec::new();
            let at = cut.index(section.len());
            prop_assert!(encode_lines(CdrFormat::JsonLines, &section[..at], n, 7, &mut cdr_json::Line::new(), &mut out).is_err());
            prop_assert!(encode_lines(CdrFormat::JsonLines, &section, n + 1, 7, &mut cdr_json::Line::new(), &mut out).is_err());
            prop_assert!(encode_lines(CdrFormat::JsonLines, &section, n, 8, &mut cdr_json::Line::new(), &mut out).is_err());
            let mut bad = section.clone();
            let i = flip.0.index(bad.len());
            bad[i] ^= flip.1 | 1;
            // Anything but a panic.
            let _ = encode_lines(CdrFormat::JsonLines, &bad, n, 7, &mut cdr_json::Line::new(), &mut out);
        }
    }
}
