//! The journal: an append-only file of checksummed frames, one frame per
//! group commit. See the crate documentation for the layout.

use crate::error::{corrupt, io_err, Error, Result};
use crate::record::{DecodeError, Decoder, StringCache};
use gyro_charging::{CdrView, Effect};
use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// First bytes of every journal file (format version 2: binary records).
pub const MAGIC: &[u8; 8] = b"GYJRNL02";
/// Frames larger than this are taken for damage.
pub const MAX_FRAME: u32 = 1 << 30;
/// Bytes before the payload: length and CRC-32.
pub const FRAME_HEADER: usize = 8;
/// Bytes of the payload header.
pub const PAYLOAD_HEADER: usize = 1 + 4 + 4 + 8 + 8 + 4 + 4 + 4 + 4;
/// First byte of a payload (the frame layout version).
pub const FRAME_VERSION: u8 = 2;

/// What a frame's payload header says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameInfo {
    /// Offset of the payload in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// Number of effect records.
    pub effects: u32,
    /// Number of CDR records.
    pub cdrs: u32,
    /// Sequence number of the first CDR (0 when `cdrs == 0`).
    pub first_cdr: u64,
    /// Sequence number of the first answer record (0 when `answers == 0`).
    pub first_answer: u64,
    /// Number of answer records.
    pub answers: u32,
    /// Bytes of the effects section.
    pub effects_len: u32,
    /// Bytes of the CDR section.
    pub cdrs_len: u32,
    /// Bytes of the answers section.
    pub answers_len: u32,
}

impl FrameInfo {
    /// One past the sequence number of its last CDR (0 without CDRs).
    pub fn cdrs_end(&self) -> u64 {
        match self.cdrs {
            0 => 0,
            n => self.first_cdr.saturating_add(n.into()),
        }
    }

    /// One past the sequence number of its last answer record (0 without
    /// answers).
    pub fn answers_end(&self) -> u64 {
        match self.answers {
            0 => 0,
            n => self.first_answer.saturating_add(n.into()),
        }
    }

    /// Offset of the answers section in the file.
    pub fn answers_offset(&self) -> u64 {
        self.offset + PAYLOAD_HEADER as u64 + self.effects_len as u64 + self.cdrs_len as u64
    }
}

/// Writes the frame and payload headers for sections of the given sizes
/// into `out`; the CRC field is left 0 (see [`seal`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn header(
    out: &mut [u8; FRAME_HEADER + PAYLOAD_HEADER],
    n_effects: u32,
    n_cdrs: u32,
    first_cdr: u64,
    first_answer: u64,
    n_answers: u32,
    sections: [usize; 3],
) -> Result<()> {
    let len = PAYLOAD_HEADER + sections.iter().sum::<usize>();
    if len > MAX_FRAME as usize || sections.iter().any(|&s| s > u32::MAX as usize) {
        return Err(Error::Encode {
            what: "journal frame",
            reason: format!("{len} bytes is more than one frame may hold"),
        });
    }
    let mut w = 0;
    let mut put = |b: &[u8]| {
        out[w..w + b.len()].copy_from_slice(b);
        w += b.len();
    };
    put(&(len as u32).to_le_bytes());
    put(&[0; 4]);
    put(&[FRAME_VERSION]);
    put(&n_effects.to_le_bytes());
    put(&n_cdrs.to_le_bytes());
    put(&first_cdr.to_le_bytes());
    put(&first_answer.to_le_bytes());
    put(&n_answers.to_le_bytes());
    for s in sections {
        put(&(s as u32).to_le_bytes());
    }
    Ok(())
}

/// Computes the CRC over the payload (the payload header in `head` and
/// the sections) and stores it in `head`.
pub(crate) fn seal(head: &mut [u8; FRAME_HEADER + PAYLOAD_HEADER], sections: [&[u8]; 3]) {
    let mut h = crc32fast::Hasher::new();
    h.update(&head[FRAME_HEADER..]);
    for s in sections {
        h.update(s);
    }
    head[4..8].copy_from_slice(&h.finalize().to_le_bytes());
}

/// Encodes a whole frame into one buffer (tests, fuzz seeds).
pub fn encode_frame(
    effects: (&[u8], u32),
    cdrs: (&[u8], u32, u64),
    answers: (&[u8], u32, u64),
) -> Result<Vec<u8>> {
    let mut head = [0u8; FRAME_HEADER + PAYLOAD_HEADER];
    header(
        &mut head,
        effects.1,
        cdrs.1,
        cdrs.2,
        answers.2,
        answers.1,
        [effects.0.len(), cdrs.0.len(), answers.0.len()],
    )?;
    seal(&mut head, [effects.0, cdrs.0, answers.0]);
    let mut out = head.to_vec();
    out.extend_from_slice(effects.0);
    out.extend_from_slice(cdrs.0);
    out.extend_from_slice(answers.0);
    Ok(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Parses a payload header; `None` when it is inconsistent with `len`.
pub(crate) fn parse_payload_header(p: &[u8], offset: u64, len: u32) -> Option<FrameInfo> {
    if p.len() < PAYLOAD_HEADER || p[0] != FRAME_VERSION {
        return None;
    }
    let f = FrameInfo {
        offset,
        len,
        effects: u32_at(p, 1),
        cdrs: u32_at(p, 5),
        first_cdr: u64_at(p, 9),
        first_answer: u64_at(p, 17),
        answers: u32_at(p, 25),
        effects_len: u32_at(p, 29),
        cdrs_len: u32_at(p, 33),
        answers_len: u32_at(p, 37),
    };
    let total =
        PAYLOAD_HEADER as u64 + f.effects_len as u64 + f.cdrs_len as u64 + f.answers_len as u64;
    (total == len as u64).then_some(f)
}

/// The three sections of a checked payload.
pub(crate) fn sections<'a>(p: &'a [u8], f: &FrameInfo) -> (&'a [u8], &'a [u8], &'a [u8]) {
    let e = PAYLOAD_HEADER + f.effects_len as usize;
    let c = e + f.cdrs_len as usize;
    (&p[PAYLOAD_HEADER..e], &p[e..c], &p[c..])
}

/// Decodes every effect of a section, checking the count; with a
/// `cache`, repeated strings share its allocations.
pub(crate) fn decode_effects(
    section: &[u8],
    count: u32,
    mut cache: Option<&mut StringCache>,
    mut each: impl FnMut(Effect) -> Result<()>,
) -> std::result::Result<Result<()>, (usize, DecodeError)> {
    let mut d = Decoder::new(section);
    let mut n = 0u64;
    while !d.is_empty() {
        let at = d.position();
        match d.effect_sharing(cache.as_deref_mut()) {
            Ok(e) => {
                n += 1;
                if let Err(e) = each(e) {
                    return Ok(Err(e));
                }
            }
            Err(e) => return Err((at, e)),
        }
    }
    if n != count as u64 {
        return Err((
            section.len(),
            DecodeError::CountMismatch {
                what: "effects",
                expected: count.into(),
                found: n,
            },
        ));
    }
    Ok(Ok(()))
}

/// Decodes every CDR of a section (each borrowing its text from the
/// section), checking the count and that sequence numbers run from
/// `first`.
pub(crate) fn decode_cdrs<'a>(
    section: &'a [u8],
    count: u32,
    first: u64,
    mut each: impl FnMut(&CdrView<'a>),
) -> std::result::Result<(), (usize, DecodeError)> {
    let mut d = Decoder::new(section);
    let mut n = 0u64;
    let mut prev: Option<CdrView<'a>> = None;
    while !d.is_empty() {
        let at = d.position();
        let cdr = d.cdr_view_after(prev.as_ref()).map_err(|e| (at, e))?;
        if cdr.sequence != first.wrapping_add(n) {
            return Err((
                at,
                DecodeError::CountMismatch {
                    what: "CDR sequence",
                    expected: first.wrapping_add(n),
                    found: cdr.sequence,
                },
            ));
        }
        n += 1;
        each(&cdr);
        prev = Some(cdr);
    }
    if n != count as u64 {
        return Err((
            section.len(),
            DecodeError::CountMismatch {
                what: "CDRs",
                expected: count.into(),
                found: n,
            },
        ));
    }
    Ok(())
}

/// Decodes a whole journal held in memory: checks the magic, every
/// frame's checksum and header, and decodes every effect and CDR. A torn
/// last frame, or zero bytes to the end, ends the journal; anything else
/// is an error. Returns the
/// frames. Used by the fuzz target and by tests.
pub fn decode_journal(data: &[u8]) -> Result<Vec<FrameInfo>> {
    let path = Path::new("<memory>");
    if data.len() < MAGIC.len() || &data[..8] != MAGIC {
        return Err(corrupt(path, 0, "not a journal (bad magic)"));
    }
    let mut frames = Vec::new();
    let mut pos = 8usize;
    while pos + FRAME_HEADER <= data.len() {
        let len = u32_at(data, pos);
        let crc = u32_at(data, pos + 4);
        let start = pos + FRAME_HEADER;
        if len > MAX_FRAME || start + len as usize > data.len() {
            break;
        }
        if len == 0 && crc == 0 && data[pos..].iter().all(|&b| b == 0) {
            break; // zero bytes after the last frame
        }
        let p = &data[start..start + len as usize];
        if crc32fast::hash(p) != crc {
            return Err(corrupt(path, pos as u64, "checksum mismatch"));
        }
        let f = parse_payload_header(p, start as u64, len)
            .ok_or_else(|| corrupt(path, pos as u64, "malformed frame header"))?;
        let (e, c, _) = sections(p, &f);
        decode_effects(e, f.effects, None, |_| Ok(())).map_err(|(at, e)| {
            corrupt(path, (start + PAYLOAD_HEADER + at) as u64, e.to_string())
        })??;
        decode_cdrs(c, f.cdrs, f.first_cdr, |_| {}).map_err(|(at, e)| {
            corrupt(
                path,
                (start + PAYLOAD_HEADER + f.effects_len as usize + at) as u64,
                e.to_string(),
            )
        })?;
        frames.push(f);
        pos = start + len as usize;
    }
    Ok(frames)
}

/// What [`scan`] found in a journal file.
#[derive(Debug)]
pub(crate) struct Scan {
    pub frames: Vec<FrameInfo>,
    /// Length of the valid prefix (header and whole frames).
    pub valid_len: u64,
    /// Length of the file; more than `valid_len` when the tail is torn or
    /// zero bytes follow the last frame.
    pub file_len: u64,
    /// Everything after `valid_len` is zero bytes, not damage: space
    /// journals written by earlier versions of gyro kept ahead of their
    /// frames, or blocks a crash left allocated but never written.
    pub zero_tail: bool,
}

impl Scan {
    /// Bytes of a torn last frame after the valid prefix (0 when only
    /// zero bytes follow it).
    pub fn torn_bytes(&self) -> u64 {
        if self.zero_tail {
            0
        } else {
            self.file_len.saturating_sub(self.valid_len)
        }
    }
}

/// Reads as much of `buf` as the reader has; returns the count.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads every frame of a journal and checks its checksum. A damaged
/// frame at the end of the file (or followed only by zero bytes) is a torn
/// tail: scanning stops before it. A damaged frame followed by data is
/// [`Error::Corrupt`].
pub(crate) fn scan(path: &Path) -> Result<Scan> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let file_len = file.metadata().map_err(io_err("stat", path))?.len();
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    let mut magic = [0u8; 8];
    let n = read_full(&mut r, &mut magic).map_err(io_err("read", path))?;
    if n < 8 || &magic != MAGIC {
        if n < 8 && magic[..n] == MAGIC[..n] {
            // Created but its header never made it: an empty journal.
            return Ok(Scan {
                frames: Vec::new(),
                valid_len: 0,
                file_len,
                zero_tail: false,
            });
        }
        if magic.starts_with(b"GYJRNL") {
            return Err(corrupt(
                path,
                0,
                "journal of another format version (this gyro reads version 02)",
            ));
        }
        return Err(corrupt(path, 0, "not a journal (bad magic)"));
    }
    let mut frames = Vec::new();
    let mut pos = 8u64;
    let mut payload = Vec::new();
    let mut zero_tail = true;
    loop {
        let mut h = [0u8; FRAME_HEADER];
        let got = read_full(&mut r, &mut h).map_err(io_err("read", path))?;
        if got == 0 {
            break;
        }
        // A damaged frame ends the journal when nothing but zero bytes
        // follows it (torn: the file ends inside it, or the rest was never
        // written), or when it is itself zero bytes (see [`Scan::zero_tail`]);
        // data after it is damage.
        let bad = |why: &str,
                   r: &mut std::io::BufReader<File>,
                   seen: &[u8],
                   zero_tail: &mut bool|
         -> Result<()> {
            if !all_zero_after(r, path)? {
                return Err(corrupt(path, pos, why.to_string()));
            }
            *zero_tail = seen.iter().all(|&b| b == 0);
            Ok(())
        };
        if got < FRAME_HEADER {
            zero_tail = h[..got].iter().all(|&b| b == 0);
            break; // torn header
        }
        let len = u32_at(&h, 0);
        let crc = u32_at(&h, 4);
        if len > MAX_FRAME || (len as usize) < PAYLOAD_HEADER {
            bad("impossible frame length", &mut r, &h, &mut zero_tail)?;
            break;
        }
        payload.resize(len as usize, 0);
        let got = read_full(&mut r, &mut payload).map_err(io_err("read", path))?;
        if got < len as usize {
            zero_tail = false;
            break; // torn payload: the file ends inside it
        }
        if crc32fast::hash(&payload) != crc {
            let mut seen = h.to_vec();
            seen.extend_from_slice(&payload);
            bad("checksum mismatch", &mut r, &seen, &mut zero_tail)?;
            break;
        }
        let Some(f) = parse_payload_header(&payload, pos + FRAME_HEADER as u64, len) else {
            return Err(corrupt(path, pos, "malformed frame header"));
        };
        frames.push(f);
        pos += FRAME_HEADER as u64 + len as u64;
    }
    Ok(Scan {
        frames,
        valid_len: pos,
        file_len,
        zero_tail,
    })
}

/// Whether the rest of `r` is zero bytes (read in steps, never held whole).
fn all_zero_after(r: &mut impl Read, path: &Path) -> Result<bool> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = read_full(r, &mut buf).map_err(io_err("read", path))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        if n < buf.len() {
            return Ok(true);
        }
    }
}

/// Reads frames back for replay and CDR repair.
pub(crate) struct FrameReader {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
}

impl FrameReader {
    pub(crate) fn open(path: &Path) -> Result<Self> {
        Ok(FrameReader {
            path: path.to_path_buf(),
            file: File::open(path).map_err(io_err("open", path))?,
            buf: Vec::new(),
        })
    }

    fn load(&mut self, f: &FrameInfo) -> Result<()> {
        self.file
            .seek(SeekFrom::Start(f.offset))
            .map_err(io_err("seek", &self.path))?;
        self.buf.resize(f.len as usize, 0);
        self.file
            .read_exact(&mut self.buf)
            .map_err(io_err("read", &self.path))?;
        Ok(())
    }

    /// Decodes the effects of a frame, calling `each` for every one.
    pub(crate) fn effects(
        &mut self,
        f: &FrameInfo,
        each: impl FnMut(Effect) -> Result<()>,
    ) -> Result<()> {
        self.load(f)?;
        let (e, _, _) = sections(&self.buf, f);
        let base = f.offset + PAYLOAD_HEADER as u64;
        decode_effects(e, f.effects, None, each)
            .map_err(|(at, e)| corrupt(&self.path, base + at as u64, e.to_string()))?
    }

    /// Calls `each` with the CDRs of a frame whose sequence number is at
    /// least `from`.
    pub(crate) fn cdrs_from(
        &mut self,
        f: &FrameInfo,
        from: u64,
        mut each: impl FnMut(&CdrView<'_>),
    ) -> Result<()> {
        self.load(f)?;
        let (_, c, _) = sections(&self.buf, f);
        let base = f.offset + PAYLOAD_HEADER as u64 + f.effects_len as u64;
        decode_cdrs(c, f.cdrs, f.first_cdr, |c| {
            if c.sequence >= from {
                each(c)
            }
        })
        .map_err(|(at, e)| corrupt(&self.path, base + at as u64, e.to_string()))
    }

    /// The answers section of a frame.
    pub(crate) fn answers(&mut self, f: &FrameInfo) -> Result<&[u8]> {
        self.load(f)?;
        Ok(sections(&self.buf, f).2)
    }
}

/// The journal being appended to.
#[derive(Debug)]
pub(crate) struct JournalWriter {
    pub path: PathBuf,
    file: File,
    /// Bytes known to be whole frames (what a failed write is cut back to).
    /// The file's position stays here: frames are written at it.
    pub len: u64,
    /// Bytes before this are durable and were dropped from the page cache.
    released: u64,
}

impl JournalWriter {
    /// Creates a new, empty journal and makes its contents durable (the
    /// caller syncs the directory).
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path)
            .map_err(io_err("create", path))?;
        file.write_all(MAGIC).map_err(io_err("write", path))?;
        file.sync_all().map_err(io_err("fsync", path))?;
        let len = MAGIC.len() as u64;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file,
            len,
            released: 0,
        })
    }

    /// Opens a scanned journal for appending, cutting off a torn tail (and
    /// any zero bytes after the last frame: earlier versions wrote some
    /// ahead).
    pub(crate) fn open(path: &Path, scan: &Scan) -> Result<Self> {
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err("open", path))?;
        let mut len = scan.valid_len;
        if len < MAGIC.len() as u64 {
            file.set_len(0).map_err(io_err("truncate", path))?;
            file.write_all(MAGIC).map_err(io_err("write", path))?;
            file.sync_all().map_err(io_err("fsync", path))?;
            len = MAGIC.len() as u64;
        } else if scan.file_len != len {
            file.set_len(len).map_err(io_err("truncate", path))?;
            file.sync_all().map_err(io_err("fsync", path))?;
        }
        file.seek(SeekFrom::Start(len))
            .map_err(io_err("seek", path))?;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file,
            len,
            released: 0,
        })
    }

    /// Appends one frame given as slices (one `writev` in the common
    /// case). On failure the file is cut back to its last whole frame; the
    /// `bool` says whether that cut worked (if not, the file may hold a
    /// partial frame: harmless on reopen, but the writer is unsafe to use).
    pub(crate) fn write(&mut self, parts: &[&[u8]]) -> std::result::Result<u64, (Error, bool)> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0usize;
        let r = (|| {
            while done < total {
                let mut skip = done;
                // On the stack: a frame is a few parts (more are written
                // by the next turns of the loop).
                let mut slices = [IoSlice::new(&[]); 8];
                let mut k = 0;
                for p in parts {
                    if skip >= p.len() {
                        skip -= p.len();
                        continue;
                    }
                    if k == slices.len() {
                        break;
                    }
                    slices[k] = IoSlice::new(&p[skip..]);
                    k += 1;
                    skip = 0;
                }
                match (&self.file).write_vectored(&slices[..k]) {
                    Ok(0) => return Err(std::io::Error::from(std::io::ErrorKind::WriteZero)),
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                let at = self.len;
                self.len += total as u64;
                Ok(at)
            }
            Err(e) => {
                let err = io_err("write", &self.path)(e);
                let cut_ok = self.file.set_len(self.len).is_ok()
                    && self.file.seek(SeekFrom::Start(self.len)).is_ok();
                Err((err, cut_ok))
            }
        }
    }

    /// Another handle of the file (for a thread that syncs it).
    pub(crate) fn handle(&self) -> Result<File> {
        self.file
            .try_clone()
            .map_err(io_err("duplicate", &self.path))
    }

    /// `fdatasync`; then the whole pages now durable leave the page cache
    /// (the journal is read back only at recovery and for a rare
    /// retransmission; see [`writeback`](crate::writeback)).
    ///
    /// Frames are appended at the end of the file, so each `fdatasync`
    /// also writes the file's new size. Keeping zero bytes written ahead
    /// of the last frame (so that a sync writes the data alone) was tried
    /// and measured side by side: on one connection at full load writing
    /// the zeros cost more server CPU than the syncs saved (7.0-7.6
    /// against 6.5-7.1 us per answer), at 5,000 requests a second they
    /// saved about 2 us per answer (of about 50), and they wrote each
    /// journal page twice (2,920 against 2,280 disk bytes per
    /// CCR-Update).
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(io_err("fsync", &self.path))?;
        self.released = crate::writeback::release(&self.file, self.released, self.len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_cdr, encode_effect};
    use gyro_charging::{AccountId, Cdr, Effect};

    fn sample() -> Vec<u8> {
        let mut e = Vec::new();
        encode_effect(
            &mut e,
            &Effect::ToppedUp {
                account: AccountId(7),
                amount: 100,
            },
        );
        let mut c = Vec::new();
        encode_cdr(
            &mut c,
            &Cdr {
                sequence: 5,
                ..Cdr::default()
            },
        );
        let mut data = MAGIC.to_vec();
        data.extend(encode_frame((&e, 1), (&c, 1, 5), (b"ans", 1, 9)).unwrap());
        data
    }

    #[test]
    fn a_frame_decodes_with_its_sections() {
        let data = sample();
        let frames = decode_journal(&data).unwrap();
        assert_eq!(frames.len(), 1);
        let f = frames[0];
        assert_eq!((f.effects, f.cdrs, f.first_cdr), (1, 1, 5));
        assert_eq!((f.answers, f.first_answer, f.answers_len), (1, 9, 3));
        let at = f.answers_offset() as usize;
        assert_eq!(&data[at..at + 3], b"ans");
    }

    #[test]
    fn a_flipped_bit_is_a_checksum_error_with_offset() {
        let mut data = sample();
        let n = data.len();
        data[n - 5] ^= 1;
        let err = decode_journal(&data).unwrap_err();
        assert!(err.to_string().contains("at byte 8"), "{err}");
    }

    fn scan_bytes(data: &[u8]) -> Result<Scan> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.log");
        std::fs::write(&path, data).unwrap();
        scan(&path)
    }

    #[test]
    fn zero_bytes_after_the_last_frame_are_its_end_not_damage() {
        let frame_end = sample().len() as u64;
        let mut data = sample();
        data.resize(data.len() + 5000, 0);
        let s = scan_bytes(&data).unwrap();
        assert_eq!(s.frames.len(), 1);
        assert_eq!(s.valid_len, frame_end);
        assert_eq!(s.torn_bytes(), 0);
        assert_eq!(decode_journal(&data).unwrap().len(), 1);
    }

    #[test]
    fn a_torn_frame_before_zero_bytes_is_a_torn_tail_and_data_after_them_is_damage() {
        let one = sample();
        let mut data = one.clone();
        data.extend_from_slice(&one[8..8 + 20]); // the start of a second frame
        data.resize(data.len() + 5000, 0);
        let s = scan_bytes(&data).unwrap();
        assert_eq!(s.frames.len(), 1);
        assert_eq!(s.torn_bytes(), data.len() as u64 - one.len() as u64);

        let mut data = one.clone();
        data.resize(data.len() + 5000, 0);
        data.extend_from_slice(&one[8..]); // a frame after the zero bytes
        let err = scan_bytes(&data).unwrap_err();
        assert!(err.to_string().contains("impossible frame length"), "{err}");
    }
}
