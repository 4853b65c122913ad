//! gyro's embedded store: a durable journal of ledger effects and CDRs per
//! shard with group commit, snapshots that bound start-up time, and the
//! shard's CDR files for a billing system to pick up.
//!
//! The API is synchronous and runtime-free: a worker thread owns one
//! [`ShardStore`] for its shard, as it owns the shard's state. The store
//! knows effects, CDRs and opaque answer records, not the engine. Time is
//! passed in (`now`). The event loop only encodes records into the pending
//! batch; every `write`, `fdatasync`, rotation and snapshot runs on another
//! thread. A batch's answers wait only for what they need: its journal
//! `write` and (in synchronous mode) `fdatasync`, in a [`CommitJob`]. The
//! rest runs on the shard's CDR writer thread, owned by the store (started
//! by [`ShardStore::open`], stopped and joined when the store is dropped):
//! the CDR lines (encoded there), CDR file rotation, and in asynchronous
//! mode the periodic `fdatasync` of the journal. Snapshots are written by
//! a [`CompactionJob`]: the one the shard's compactor thread took from its
//! copy of the ledger, kept current from the committed batches
//! ([`ShardStore::start_compactor`]), or else one replayed from the closed
//! journals.
//!
//! # How a worker uses it
//!
//! ```no_run
//! # use gyro_store::*;
//! # use gyro_charging::*;
//! # fn demo(config: ChargingConfig, data_dir: &std::path::Path, now: Timestamp,
//! #         requests: Vec<CcRequest>) -> gyro_store::Result<()> {
//! let (shard, shards) = (0, 4);
//! // Start: the store hands back the latest snapshot, the effects after
//! // it and the retained answer sections; the caller rebuilds its state.
//! let (mut store, recovered) = ShardStore::open(data_dir, shard, StoreOptions::default(), now)?;
//! let catalog = config.catalog().unwrap();
//! let mut engine = match recovered.snapshot.clone() {
//!     Some(s) => Engine::restore(catalog.clone(), config.engine.clone(), s),
//!     None => config.build_shard(shard, shards).unwrap(),
//! };
//! recovered.replay_effects(|e| engine.apply(&e))?;
//! // A copy of the recovered ledger, kept current from the committed
//! // batches, takes the snapshots: none reads the journal back.
//! let copy = Engine::restore(catalog.clone(), config.engine.clone(), engine.snapshot());
//! store.start_compactor(copy, |e, effect| e.apply(effect), Engine::snapshot)?;
//! let mut out = Output::default();
//! let mut answer = CcAnswer::default();
//! // One loop iteration: handle every request that is ready...
//! for req in &requests {
//!     engine.handle(req, now, &mut answer, &mut out);
//!     store.append_output(&out)?; // encode binary records only
//!     out.clear();
//! }
//! // ...then hand the whole batch to the sync thread: one write and one
//! // fdatasync (the CDR lines go on to the CDR writer thread),
//! if let Some(job) = store.begin_commit(now)? {
//!     let done = std::thread::spawn(move || job.run()).join().unwrap();
//!     // and only after `finish_commit` is `Ok` send the batch's answers.
//!     let stats = store.finish_commit(done, now)?;
//! #   let _ = stats;
//! }
//! // Snapshots are written off the loop (the compactor's, or else one
//! // replayed from the last snapshot plus the closed journals):
//! if let Some(job) = store.begin_compaction() {
//!     let (cat, opts) = (catalog.clone(), config.engine.clone());
//!     let done = std::thread::spawn(move || {
//!         job.run(
//!             |snap| match snap {
//!                 Some(s) => Engine::restore(cat, opts, s),
//!                 None => Engine::new(cat, opts),
//!             },
//!             |engine, effect| engine.apply(effect),
//!             Engine::into_snapshot,
//!         )
//!     })
//!     .join()
//!     .unwrap();
//!     store.finish_compaction(&done);
//! }
//! # Ok(()) }
//! ```
//!
//! [`ShardStore::begin_commit`] also returns a job when the journal
//! generation a snapshot asked for is due with nothing pending, and
//! otherwise passes the time to the CDR writer (a CDR file to close by
//! age, an asynchronous sync, CDR lines to retry), so a runtime that calls
//! it about once a second never does I/O on its event loop.
//! [`ShardStore::commit`] and [`ShardStore::tick`] do the same work and
//! then wait for the CDR writer (tests, tools), and
//! [`ShardStore::close_cdr_file`] waits for it and closes the CDR file on
//! a clean shutdown.
//!
//! If the job fails, the batch is not durable: do not send its answers
//! (answer DIAMETER_TOO_BUSY, 3004); the batch goes back before what was
//! appended since and the next commit retries it (a full disk,
//! [`ErrorKind::DiskFull`], can be freed); the state in memory is ahead of
//! the disk until it succeeds. After [`Error::Failed`] (an fsync failed:
//! what the kernel kept is unknown) reopen the store and rebuild from it.
//!
//! Duplicate detection: the engine's answer records go into the batch with
//! [`ShardStore::append_answers`] (opaque bytes, numbered by the engine);
//! [`ShardStore::read_answer`] reads one back by number, from the pending
//! batch, the batch in flight or the journal.
//! [`ShardStore::set_answer_horizon`] says which are still live: a journal
//! is deleted only when a snapshot covers its effects, all its answers
//! are below the horizon, and the CDR writer made every CDR it holds
//! durable in a CDR file.
//!
//! # Files
//!
//! ```text
//! <data_dir>/ledger/shard-<i>/snapshot-<generation>.snap   latest snapshot
//! <data_dir>/ledger/shard-<i>/journal-<generation>.log     effects, CDRs, answers
//! <data_dir>/cdr/shard-<i>/cdr-s<i>-<first>.jsonl.part     CDR file being written
//! <data_dir>/cdr/shard-<i>/cdr-s<i>-<first>-<last>-<YYYYMMDDTHHMMSSZ>.jsonl
//! ```
//!
//! (`.csv` and `.csv.part` with [`CdrFormat::Csv`]; `.jsonl.zst` and
//! `.jsonl.zst.part`, `.csv.zst` and `.csv.zst.part` with
//! [`CdrCompression::Zstd`].) A snapshot of
//! generation `g` covers every journal of a generation below `g`; journals
//! below it are kept only for their answers.
//!
//! # Journal layout (version 2)
//!
//! ```text
//! file    = magic:"GYJRNL02" frame* zero*   zero bytes after the last frame: the end (below)
//! frame   = len:u32le crc:u32le payload          crc = CRC-32 (IEEE) of payload
//! payload = header effects cdrs answers          len = 41 + the three section lengths
//! header  = version:u8 (2)
//!           n_effects:u32le n_cdrs:u32le first_cdr:u64le
//!           first_answer:u64le n_answers:u32le
//!           effects_len:u32le cdrs_len:u32le answers_len:u32le
//! effects = n_effects effect records      (binary, see [`record`])
//! cdrs    = n_cdrs CDR records            (binary, see [`record`]; sequence
//!                                          numbers first_cdr, first_cdr + 1, ...)
//! answers = n_answers answer records      (the engine's opaque bytes, numbered
//!                                          first_answer, first_answer + 1, ...)
//! ```
//!
//! `first_cdr` and `first_answer` are 0 when their section is empty. Each
//! commit appends one frame with one `writev` and (in synchronous mode) one
//! `fdatasync`. Zero bytes after the last frame read as the end of the
//! journal (earlier versions wrote them ahead of their frames). A crash
//! can leave only the last frame incomplete ("torn"),
//! recognised by its length or checksum and cut off on open; damage
//! anywhere else is [`Error::Corrupt`] naming the file and byte offset,
//! and [`repair`] cuts such a journal to its last consistent frame (`gyro
//! ledger repair`, keeping a copy of what it changes).
//! [`ShardStore::read_only`] reads a shard without writing anything (tools:
//! a torn tail is left out in memory), also beside a running server.
//! The commit job then queues the batch's CDR records for the CDR writer
//! thread (in synchronous mode only once the frame is durable; the queue
//! is bounded, so a slow CDR disk holds commits back instead of growing
//! memory), which encodes them (JSON lines straight from the binary
//! records, with no decoded record in between) and appends the lines to
//! the open CDR file in order, without a sync: if they are lost in a crash, opening the
//! store writes them again from the journal; lines the journal never made
//! durable (asynchronous mode) are cut from the CDR file and their
//! sequence numbers are given again, so numbers stay unique and gap-free
//! per shard. The writer syncs the journal before it closes a CDR file, so
//! a closed file never holds a record the journal could still lose. When
//! a journal generation is closed, the writer fsyncs the CDR file, and no
//! snapshot covers (and deletes) the closed journal before that, so no CDR
//! ever lives only in a journal that is deleted. The writer's work and
//! errors are reported in the [`CommitStats`] of a later commit.
//!
//! With [`CdrCompression::Zstd`] ([`cdr_zstd`]) the open file is a
//! sequence of complete, independent zstd frames, each holding whole
//! lines. The writer keeps one compressor and ends a frame after 256 KiB
//! of lines, one second after the oldest line waiting for it, before every
//! fsync of the file (rotation, a closed journal generation) and on a
//! clean shutdown; until then the lines are only in memory, which is fine
//! because the journal, not the CDR file, is the durable copy. On open the
//! complete frames are kept, an incomplete or damaged trailing frame is
//! cut, and where lines must be cut inside a frame (records the journal
//! never made durable) the frame is cut and the lines kept from it are
//! written again in a new frame; then whatever the file lacks is written
//! from the journal, as for plain files. Everything the journal must give
//! back is read before the file is cut, so a file the journal cannot
//! complete is left as it is and reported ([`Error::Corrupt`]). An open
//! file of the other compression (or format) than the configured one is
//! cut to what the journal holds and closed under its own kind's name; the
//! next open file starts after it.
//!
//! # Pick-up contract for billing systems
//!
//! * A closed file is named `cdr-s<shard>-<first>-<last>-<closed>.jsonl`:
//!   shard index, the sequence numbers of its first and last records
//!   (16 digits, zero-padded) and the UTC time it was closed. Within a
//!   shard, names sort in sequence order, and the ranges of consecutive
//!   files are contiguous (`first` of one is `last + 1` of the one before).
//! * A closed file is complete and fsynced before it gets its name (by an
//!   atomic rename, followed by a directory fsync), and is never written,
//!   renamed or removed by gyro afterwards. A billing system may read,
//!   move or delete any file matching `cdr-s*-*-*-*.jsonl` at any time.
//! * With compression a closed file is `cdr-s<shard>-<first>-<last>-<closed>.jsonl.zst`
//!   (`.csv.zst`): one valid zstd stream (concatenated frames) whose
//!   content, as `zstd -d` or `zstdcat` give it, is exactly the lines the
//!   uncompressed file would hold. The same rules apply to it.
//! * Files ending in `.part` (`.jsonl.part`, `.jsonl.zst.part`) are being
//!   written: do not take them. A compressed one lags the server by up to
//!   a second (lines reach it in whole frames).
//!   They are closed when they reach [`StoreOptions::cdr_max_bytes`] or
//!   [`StoreOptions::cdr_max_age`], and on a clean shutdown.
//! * Each line is one JSON object (a [`gyro_charging::Cdr`]), or with
//!   [`CdrFormat::Csv`] one CSV record (every column of
//!   `gyro_charging::cdr::CSV_HEADER` in its order, empty where a value
//!   is absent, quoted as RFC 4180 says; no header line); `sequence`
//!   increases by one per record of the shard, across restarts. A gap in
//!   the ranges a billing system has taken means a file is missing.
//! * `gyro cdr` ([`cdr_tool`]) lists, prints, follows and converts them,
//!   in either format, and reports a closed file that does not hold
//!   exactly the records its name says (a truncated file).
//!
//! # Why a framed log and not an embedded database
//!
//! The engine keeps every account and session of its shard in memory and
//! changes it only through [`gyro_charging::Effect`]s; what must be durable
//! is the sequence of those effects, and a checkpoint to bound replay. That
//! is a write-ahead log plus snapshots: the thing an embedded database
//! builds for itself underneath its trees. Storing the same state as keyed
//! records in an LSM or B-tree store would add a second write (its own
//! log, then its tables), read amplification we never use (nothing is read
//! back except at start) and a page cache for data that already lives in
//! the engine. The log here is small (one file per shard, no shared state
//! between workers, so no contention), and its failure cases are few and
//! tested: a torn last frame is cut on open, anything else is reported as
//! [`Error::Corrupt`] with the file and offset.
//!
//! Measured on one small shared virtual machine (2 cores, virtio disk;
//! absolute times drift, compare within one run):
//!
//! * `examples/redb_compare.rs`: 3,000 durable commits of a 20 KB batch:
//!   redb (one write transaction per batch, durable commit) 420-460 µs per
//!   commit and a 129 MiB file; this journal 260-560 µs per commit with
//!   the JSON encoding included and a 57 MiB file.
//! * `benches/commit.rs`: a group commit of 64 requests (304 effects,
//!   64 of them the answers kept for duplicate detection, 96 CDRs):
//!   encoding on the loop 37 µs in binary records against 128 µs as the
//!   JSON lines of the first journal format; 35.6 KB of journal per batch
//!   (108 KB before), 55 KB of CDR lines written by the commit job. A
//!   typical CCR-Update (session touched, charged, released, reserved, one
//!   usage CDR) is 155 bytes of journal records (51 of effects, 104 of
//!   CDR) plus its answer record, against 1,386 bytes of JSON before.
//!   Measured over a whole run of `gyro load`'s data scenario (one
//!   CCR-Initial, three CCR-Updates and a CCR-Terminate per session, two
//!   rating groups): 469 bytes of journal per answer (92 of effects, 280
//!   of CDRs, 96 of answer records), 385 since a CDR shares its session's
//!   strings with the CDR before it in its section (195 of CDRs).
//! * `examples/startup.rs`: 1,000,000 accounts (a 168 MiB snapshot) and
//!   10,000,000 journaled effects with 3.6 million CDRs (3.25 GiB of
//!   journal): a restart that replays all of it takes 12.7 s; after a
//!   snapshot, 1.3 s. With the default snapshot policy (every 2 million
//!   records or 512 MiB of journal) a shard restarts in about 3 s.

mod cdr_file;
mod cdr_json;
pub mod cdr_tool;
pub mod cdr_zstd;
mod error;
pub mod journal;
mod lock;
pub mod names;
pub mod record;
pub mod redis;
pub mod repair;
mod shard;
pub mod snapshot;
mod writeback;

pub use cdr_file::CdrRepair;
pub use error::{Error, ErrorKind, Result};
pub use lock::{DataDirLock, LockHolder, LOCK_FILE};
pub use names::{CdrCompression, CdrFormat};
pub use shard::{
    cdr_dir, ledger_dir, u32_prefixed_len, AnswerRecordLen, CdrWriterHold, CommitJob, CommitStats,
    CompactionDone, CompactionJob, Durability, Recovered, RecoveryReport, ShardStore,
    SnapshotSource, SnapshotWriter, StoreOptions, SyncHandle,
};
