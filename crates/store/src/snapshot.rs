//! Snapshot files: the whole [`Snapshot`] of an engine in CBOR (RFC 8949,
//! the serde form of the type), framed by a header and a checksummed
//! trailer, written to a temporary file, fsynced and renamed into place, so
//! a snapshot file is either whole or absent.
//!
//! ```text
//! file = "GYSNAP02" generation:u64le cbor len(cbor):u64le crc32(cbor):u32le "GYSE"
//! ```
//!
//! Files of the first version (`"GYSNAP01"`, the same frame around JSON)
//! are still read.

use crate::error::{corrupt, io_err, Result};
use crate::names::sync_dir;
use crate::writeback::BulkFile;
use gyro_charging::Snapshot;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &[u8; 8] = b"GYSNAP02";
const MAGIC_JSON: &[u8; 8] = b"GYSNAP01";
const END: &[u8; 4] = b"GYSE";
const TRAILER: usize = 8 + 4 + 4;

struct Hashing<W> {
    inner: W,
    crc: crc32fast::Hasher,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `snapshot` as `path` atomically: `path.tmp`, fsync, rename,
/// directory fsync. Returns the file's size. On error the temporary file
/// is removed and `path` is untouched.
pub(crate) fn write(path: &Path, generation: u64, snapshot: &Snapshot) -> Result<u64> {
    let tmp = path.with_extension("tmp");
    let r = write_tmp(&tmp, generation, snapshot);
    let size = match r {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err("rename", path)(e));
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(size)
}

fn write_tmp(tmp: &Path, generation: u64, snapshot: &Snapshot) -> Result<u64> {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(tmp)
        .map_err(io_err("create", tmp))?;
    let mut w = BufWriter::with_capacity(1 << 20, BulkFile::new(file));
    w.write_all(MAGIC).map_err(io_err("write", tmp))?;
    w.write_all(&generation.to_le_bytes())
        .map_err(io_err("write", tmp))?;
    let mut h = Hashing {
        inner: &mut w,
        crc: crc32fast::Hasher::new(),
        len: 0,
    };
    ciborium::into_writer(snapshot, &mut h).map_err(|e| match e {
        ciborium::ser::Error::Io(e) => io_err("write", tmp)(e),
        ciborium::ser::Error::Value(reason) => crate::Error::Encode {
            what: "snapshot",
            reason,
        },
    })?;
    let (len, crc) = (h.len, h.crc.finalize());
    w.write_all(&len.to_le_bytes())
        .map_err(io_err("write", tmp))?;
    w.write_all(&crc.to_le_bytes())
        .map_err(io_err("write", tmp))?;
    w.write_all(END).map_err(io_err("write", tmp))?;
    let file = w
        .into_inner()
        .map_err(|e| io_err("write", tmp)(e.into_error()))?
        .file;
    file.sync_all().map_err(io_err("fsync", tmp))?;
    Ok(8 + 8 + len + TRAILER as u64)
}

/// Reads and checks a snapshot file: its generation and contents.
pub(crate) fn read(path: &Path) -> Result<(u64, Snapshot)> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(io_err("read", path))?;
    decode_at(path, &buf)
}

/// Decodes the contents of a snapshot file held in memory (used by the
/// fuzz target): its generation and the snapshot.
pub fn decode(bytes: &[u8]) -> Result<(u64, Snapshot)> {
    decode_at(Path::new("<memory>"), bytes)
}

fn decode_at(path: &Path, buf: &[u8]) -> Result<(u64, Snapshot)> {
    if buf.len() < 16 + TRAILER || (&buf[..8] != MAGIC && &buf[..8] != MAGIC_JSON) {
        return Err(corrupt(path, 0, "not a snapshot (bad header)"));
    }
    let end = buf.len();
    if &buf[end - 4..] != END {
        return Err(corrupt(path, end as u64 - 4, "snapshot trailer missing"));
    }
    let mut g = [0; 8];
    g.copy_from_slice(&buf[8..16]);
    let generation = u64::from_le_bytes(g);
    let mut l = [0; 8];
    l.copy_from_slice(&buf[end - TRAILER..end - 8]);
    let len = u64::from_le_bytes(l);
    let mut c = [0; 4];
    c.copy_from_slice(&buf[end - 8..end - 4]);
    let crc = u32::from_le_bytes(c);
    let body = &buf[16..end - TRAILER];
    if body.len() as u64 != len {
        return Err(corrupt(path, 16, "snapshot length mismatch"));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt(path, 16, "snapshot checksum mismatch"));
    }
    let mut snap: Snapshot = if &buf[..8] == MAGIC_JSON {
        serde_json::from_slice(body)
            .map_err(|e| corrupt(path, 16, format!("snapshot does not decode: {e}")))?
    } else {
        ciborium::de::from_reader_with_recursion_limit(body, 64)
            .map_err(|e| corrupt(path, 16, format!("snapshot does not decode: {e}")))?
    };
    snap.ledger.rebuild_index();
    Ok((generation, snap))
}
