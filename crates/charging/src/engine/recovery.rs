//! Rebuilding an engine: snapshots, journaled effects and answer records.

use super::*;

impl Engine {
    /// Rebuilds an engine from a snapshot (then replay the effects
    /// journaled after it with [`Engine::apply`]).
    pub fn restore(catalog: Catalog, options: EngineOptions, snapshot: Snapshot) -> Self {
        let mut e = Engine::new(catalog, options);
        e.ledger = snapshot.ledger;
        e.ledger.rebuild_index();
        e.directory = snapshot.directory;
        for s in e.ledger.sessions.values_mut() {
            share_identifiers(s, &e.directory, &mut e.contexts);
        }
        e.next_cdr_sequence = snapshot.next_cdr_sequence.max(1);
        for s in e.ledger.sessions.values() {
            e.timers.push(Reverse((s.supervision_until, s.key)));
        }
        e.next_answer_seq = snapshot.next_answer_seq.max(1);
        e
    }

    /// The state to persist, taken out of the engine: no copy of the
    /// ledger is made.
    pub fn into_snapshot(self) -> Snapshot {
        Snapshot {
            ledger: self.ledger,
            directory: self.directory,
            next_cdr_sequence: self.next_cdr_sequence,
            next_answer_seq: self.next_answer_seq,
        }
    }

    /// Lends the state to persist to `f` without copying it: the ledger
    /// and the directory move into the snapshot for the call and back.
    /// (A copy of a large ledger is as large again and, freed, leaves the
    /// heap fragmented.)
    pub fn with_snapshot<R>(&mut self, f: impl FnOnce(&Snapshot) -> R) -> R {
        let lent = Snapshot {
            ledger: std::mem::take(&mut self.ledger),
            directory: std::mem::take(&mut self.directory),
            next_cdr_sequence: self.next_cdr_sequence,
            next_answer_seq: self.next_answer_seq,
        };
        let r = f(&lent);
        self.ledger = lent.ledger;
        self.directory = lent.directory;
        r
    }

    /// A copy of the state to persist.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            ledger: self.ledger.clone(),
            directory: self.directory.clone(),
            next_cdr_sequence: self.next_cdr_sequence,
            next_answer_seq: self.next_answer_seq,
        }
    }
    /// Applies a journaled effect (replay). The engine applies the effects
    /// it emits itself; call this only to rebuild state.
    pub fn apply(&mut self, effect: &Effect) -> Result<()> {
        if let Effect::AccountCreated {
            account,
            subscribers,
            ..
        } = effect
        {
            if subscribers.is_empty() {
                return Err(Error::Replay("account without identity"));
            }
            for s in subscribers {
                if self.directory.lookup(s.kind, &s.data).is_some() {
                    return Err(Error::Replay("subscriber already mapped"));
                }
            }
            self.ledger.apply(effect)?;
            for s in subscribers {
                self.directory.insert(s, *account)?;
            }
            return Ok(());
        }
        self.ledger.apply(effect)?;
        if let Effect::AccountDeleted { account } = effect {
            self.directory.remove_account(*account);
        }
        if let Effect::SessionOpened {
            session,
            supervision_until,
            ..
        } = effect
        {
            self.timers.push(Reverse((*supervision_until, *session)));
            if let Some(s) = self.ledger.sessions.get_mut(session) {
                share_identifiers(s, &self.directory, &mut self.contexts);
            }
            self.drop_stale_timers();
        }
        Ok(())
    }

    /// Forgets remembered answers past their time to live at `now`, and
    /// nothing else: no session is closed and no effect is produced.
    pub fn expire_answers(&mut self, now: Timestamp) {
        self.dedup.expire(now);
    }

    /// Rebuilds the duplicate index from a journaled section of answer
    /// records (`records`, as [`AnswerLog::as_bytes`] held them, the first
    /// numbered `first_seq`), dropping those past their time to live at
    /// `now`. Hand sections in `seq` order; records below the newest one
    /// already indexed are ignored. Also moves the answer numbering past
    /// the section.
    pub fn replay_answers(&mut self, first_seq: u64, records: &[u8], now: Timestamp) -> Result<()> {
        let ttl = self.options.dedup_ttl_secs;
        let mut seq = first_seq;
        for rec in answer_log::records(records) {
            let key = RecordKey::parse(rec?)?;
            if key.at.plus_secs(ttl) > now {
                self.dedup.insert_parts(
                    seq,
                    key.session_id,
                    key.request_number,
                    key.origin_host,
                    key.end_to_end,
                    key.at,
                );
            }
            seq += 1;
            self.next_answer_seq = self.next_answer_seq.max(seq);
        }
        self.dedup.expire(now);
        Ok(())
    }

    /// The smallest answer sequence number still live at `now`: journaled
    /// answer records below it are no longer needed for duplicate
    /// detection.
    pub fn answer_horizon(&self, now: Timestamp) -> u64 {
        let h = self.dedup.horizon(now);
        if h >= self.dedup.head() {
            self.next_answer_seq
        } else {
            h
        }
    }

    /// The sequence number the next answer record gets.
    pub fn next_answer_seq(&self) -> u64 {
        self.next_answer_seq
    }

    /// Heap bytes held by the duplicate index.
    pub fn dedup_memory_bytes(&self) -> usize {
        self.dedup.memory_bytes()
    }
}

/// Makes a rebuilt session share its subscriber with the directory and its
/// Service-Context-Id with the other sessions, as a live engine does.
fn share_identifiers(
    s: &mut crate::Session,
    directory: &SubscriberDirectory,
    contexts: &mut ContextNames,
) {
    s.subscriber = directory.share(&s.subscriber);
    s.service_context = contexts.share(&s.service_context);
}
