//! The journal: an append-only file of checksummed frames, one frame per
//! group commit.
//!
//! ```text
//! file    = magic "GYJRNL01" frame*
//! frame   = len:u32le crc32(payload):u32le payload
//! payload = 1:u8 effects:u32le cdrs:u32le first_cdr:u64le
//!           effects_len:u32le effect-json-lines cdr-json-lines
//! ```
//!
//! Effects and CDRs are JSON lines (the serde form of
//! [`gyro_charging::Effect`] and the CDR file's own line), so a journal can
//! be read with ordinary tools once the frame headers are skipped. A frame
//! is written with one `write` and made durable with one `fdatasync`; a
//! crash can leave only the last frame incomplete ("torn"), which is
//! recognised by its length or checksum and cut off on open.

use crate::error::{corrupt, io_err, Error, Result};
use gyro_charging::Effect;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// First bytes of every journal file.
pub(crate) const MAGIC: &[u8; 8] = b"GYJRNL01";
/// Frames larger than this are taken for damage.
pub(crate) const MAX_FRAME: u32 = 1 << 30;
const FRAME_HEADER: usize = 8;
const PAYLOAD_HEADER: usize = 1 + 4 + 4 + 8 + 4;
const TAG_BATCH: u8 = 1;

/// One valid frame found by [`scan`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameInfo {
    /// Offset of the payload in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// Number of effects.
    pub effects: u32,
    /// Number of CDRs.
    pub cdrs: u32,
    /// Sequence number of the first CDR (meaningless when `cdrs == 0`).
    pub first_cdr: u64,
}

/// What [`scan`] found in a journal file.
#[derive(Debug)]
pub(crate) struct Scan {
    pub frames: Vec<FrameInfo>,
    /// Length of the valid prefix (header and whole frames).
    pub valid_len: u64,
    /// Length of the file; more than `valid_len` when the tail is torn.
    pub file_len: u64,
}

/// Encodes a batch frame into `out` (cleared first).
pub(crate) fn encode_frame(
    out: &mut Vec<u8>,
    effects: &[u8],
    n_effects: u32,
    cdrs: &[u8],
    n_cdrs: u32,
    first_cdr: u64,
) -> Result<()> {
    let len = PAYLOAD_HEADER + effects.len() + cdrs.len();
    if len > MAX_FRAME as usize {
        return Err(Error::Encode {
            what: "journal frame",
            reason: format!("{len} bytes is more than one frame may hold"),
        });
    }
    out.clear();
    out.reserve(FRAME_HEADER + len);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(TAG_BATCH);
    out.extend_from_slice(&n_effects.to_le_bytes());
    out.extend_from_slice(&n_cdrs.to_le_bytes());
    out.extend_from_slice(&first_cdr.to_le_bytes());
    out.extend_from_slice(&(effects.len() as u32).to_le_bytes());
    out.extend_from_slice(effects);
    out.extend_from_slice(cdrs);
    let crc = crc32fast::hash(&out[FRAME_HEADER..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
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

/// The parts of a payload: effect count, CDR count, first CDR sequence,
/// effects blob, CDR blob.
type Parts<'a> = (u32, u32, u64, &'a [u8], &'a [u8]);

fn split_payload(p: &[u8]) -> Option<Parts<'_>> {
    if p.len() < PAYLOAD_HEADER || p[0] != TAG_BATCH {
        return None;
    }
    let n_eff = u32_at(p, 1);
    let n_cdr = u32_at(p, 5);
    let first = u64_at(p, 9);
    let elen = u32_at(p, 17) as usize;
    let rest = &p[PAYLOAD_HEADER..];
    if elen > rest.len() {
        return None;
    }
    Some((n_eff, n_cdr, first, &rest[..elen], &rest[elen..]))
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
            });
        }
        return Err(corrupt(path, 0, "not a journal (bad magic)"));
    }
    let mut frames = Vec::new();
    let mut pos = 8u64;
    let mut payload = Vec::new();
    loop {
        let mut h = [0u8; FRAME_HEADER];
        let got = read_full(&mut r, &mut h).map_err(io_err("read", path))?;
        if got == 0 {
            break;
        }
        let bad = |why: &str, r: &mut std::io::BufReader<File>, seen: &[u8]| -> Result<()> {
            // Torn if nothing but zeros follows.
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).map_err(io_err("read", path))?;
            if seen.iter().chain(rest.iter()).all(|&b| b == 0) || rest.is_empty() {
                Ok(())
            } else {
                Err(corrupt(path, pos, why.to_string()))
            }
        };
        if got < FRAME_HEADER {
            break; // torn header
        }
        let len = u32_at(&h, 0);
        let crc = u32_at(&h, 4);
        if len > MAX_FRAME || (len as usize) < PAYLOAD_HEADER {
            bad("impossible frame length", &mut r, &h)?;
            break;
        }
        payload.resize(len as usize, 0);
        let got = read_full(&mut r, &mut payload).map_err(io_err("read", path))?;
        if got < len as usize {
            break; // torn payload: the file ends inside it
        }
        if crc32fast::hash(&payload) != crc {
            let mut seen = h.to_vec();
            seen.extend_from_slice(&payload);
            bad("checksum mismatch", &mut r, &seen)?;
            break;
        }
        let Some((effects, cdrs, first_cdr, _, _)) = split_payload(&payload) else {
            return Err(corrupt(path, pos, "malformed frame payload"));
        };
        frames.push(FrameInfo {
            offset: pos + FRAME_HEADER as u64,
            len,
            effects,
            cdrs,
            first_cdr,
        });
        pos += FRAME_HEADER as u64 + len as u64;
    }
    Ok(Scan {
        frames,
        valid_len: pos,
        file_len,
    })
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

    /// Decodes the effects of a frame, calling `each` for every one with
    /// its index among the frame's effects.
    pub(crate) fn effects(
        &mut self,
        f: &FrameInfo,
        mut each: impl FnMut(Effect) -> Result<()>,
    ) -> Result<()> {
        self.load(f)?;
        let Some((_, _, _, blob, _)) = split_payload(&self.buf) else {
            return Err(corrupt(&self.path, f.offset, "malformed frame payload"));
        };
        let mut n = 0u32;
        for line in blob.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let e: Effect = serde_json::from_slice(line).map_err(|e| {
                corrupt(&self.path, f.offset, format!("effect does not decode: {e}"))
            })?;
            each(e)?;
            n += 1;
        }
        if n != f.effects {
            return Err(corrupt(&self.path, f.offset, "effect count mismatch"));
        }
        Ok(())
    }

    /// Appends to `out` the CDR lines of a frame whose sequence number is
    /// at least `from`.
    pub(crate) fn cdr_lines_from(
        &mut self,
        f: &FrameInfo,
        from: u64,
        out: &mut Vec<u8>,
    ) -> Result<u64> {
        self.load(f)?;
        let Some((_, _, first, _, blob)) = split_payload(&self.buf) else {
            return Err(corrupt(&self.path, f.offset, "malformed frame payload"));
        };
        let mut seq = first;
        let mut added = 0;
        let mut rest = blob;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            if seq >= from {
                out.extend_from_slice(&rest[..=i]);
                added += 1;
            }
            seq += 1;
            rest = &rest[i + 1..];
        }
        if seq - first != f.cdrs as u64 {
            return Err(corrupt(&self.path, f.offset, "CDR count mismatch"));
        }
        Ok(added)
    }
}

/// The journal being appended to.
pub(crate) struct JournalWriter {
    pub path: PathBuf,
    file: std::sync::Arc<File>,
    /// Bytes known to be whole frames (what a failed write is cut back to).
    pub len: u64,
}

impl JournalWriter {
    /// Creates a new, empty journal and makes its contents durable (the
    /// caller syncs the directory).
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(io_err("create", path))?;
        file.write_all(MAGIC).map_err(io_err("write", path))?;
        file.sync_all().map_err(io_err("fsync", path))?;
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file: std::sync::Arc::new(file),
            len: MAGIC.len() as u64,
        })
    }

    /// Opens a scanned journal for appending, cutting off a torn tail.
    pub(crate) fn open(path: &Path, scan: &Scan) -> Result<Self> {
        let mut file = OpenOptions::new()
            .append(true)
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
        Ok(JournalWriter {
            path: path.to_path_buf(),
            file: std::sync::Arc::new(file),
            len,
        })
    }

    /// Appends one encoded frame. On failure the file is cut back to its
    /// last whole frame; `Err(Some(..))` from the cut means the file may
    /// hold a partial frame (harmless on reopen, but the writer is unsafe
    /// to use).
    pub(crate) fn write(&mut self, frame: &[u8]) -> std::result::Result<(), (Error, bool)> {
        match (&*self.file).write_all(frame) {
            Ok(()) => {
                self.len += frame.len() as u64;
                Ok(())
            }
            Err(e) => {
                let err = io_err("write", &self.path)(e);
                let cut_ok = self.file.set_len(self.len).is_ok();
                Err((err, cut_ok))
            }
        }
    }

    /// The file, for a sync on another thread.
    pub(crate) fn sync_handle(&self) -> std::sync::Arc<File> {
        self.file.clone()
    }

    /// `fdatasync`.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync_data().map_err(io_err("fsync", &self.path))
    }
}
