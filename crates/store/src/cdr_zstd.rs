//! zstd-compressed CDR files: a file is a sequence of complete,
//! independent zstd frames, each holding whole lines (concatenated frames
//! are one valid zstd stream, so `zstd -d` gives the lines). The writer
//! ends a frame every 256 KiB of lines (`FRAME_INPUT`), when its oldest line
//! waited a second (`FRAME_DELAY_MS`), and before every fsync of the file; lines
//! not yet in a finished frame live only in memory (the journal holds
//! them, and opening the store writes them again).
//!
//! [`scan`] reads such a file back: the complete frames from the start,
//! stopping at the first frame that is incomplete (a crash while it was
//! written) or does not decode.

use crate::error::{Error, Result};
use zstd::zstd_safe;

/// Bytes of lines after which the writer ends a frame (the frame ends at
/// the end of the batch that reaches it).
pub(crate) const FRAME_INPUT: usize = 256 << 10;

/// The writer ends a frame once its oldest line waited this long, so that
/// a quiet server's open file is readable soon.
pub(crate) const FRAME_DELAY_MS: u64 = 1000;

/// Most content one frame may decode to when a file is read back; a frame
/// claiming more is treated as damaged (gyro's frames are at most
/// `FRAME_INPUT` (256 KiB) plus one batch of lines).
pub const MAX_FRAME_CONTENT: usize = 256 << 20;

/// One complete frame of a compressed CDR file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Byte offset in the file just past the frame.
    pub end: u64,
    /// Bytes of content (lines) up to the end of this frame.
    pub content_end: u64,
}

/// What [`scan`] found in a compressed CDR file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The complete frames, in file order.
    pub frames: Vec<Frame>,
    /// Their content, concatenated.
    pub content: Vec<u8>,
    /// Bytes of the file after the last complete frame (an incomplete
    /// frame being written or torn by a crash, or damage).
    pub tail: u64,
}

impl Scan {
    /// Bytes of the file held by complete frames.
    pub fn frames_len(&self) -> u64 {
        self.frames.last().map_or(0, |f| f.end)
    }

    /// The end (file offset, content offset) of the last frame whose
    /// content ends at or before `content` bytes.
    pub fn frame_before(&self, content: u64) -> (u64, u64) {
        self.frames
            .iter()
            .take_while(|f| f.content_end <= content)
            .last()
            .map_or((0, 0), |f| (f.end, f.content_end))
    }
}

/// Reads the complete frames of `data` (a compressed CDR file's bytes)
/// from its start; never panics, whatever the bytes.
pub fn scan(data: &[u8]) -> Scan {
    let mut s = Scan::default();
    let mut pos = 0usize;
    let Ok(mut d) = zstd::stream::raw::Decoder::new() else {
        s.tail = data.len() as u64;
        return s;
    };
    let mut buf = vec![0u8; 64 << 10];
    while pos < data.len() {
        let rest = &data[pos..];
        let Ok(size) = zstd_safe::find_frame_compressed_size(rest) else {
            break;
        };
        if size == 0 || size > rest.len() {
            break;
        }
        let frame = &rest[..size];
        let before = s.content.len();
        if decode_frame(&mut d, frame, &mut buf, &mut s.content).is_err() {
            s.content.truncate(before);
            break;
        }
        pos += size;
        s.frames.push(Frame {
            end: pos as u64,
            content_end: s.content.len() as u64,
        });
    }
    s.tail = (data.len() - pos) as u64;
    s
}

/// Appends the content of one whole frame (or skippable frame) to `out`:
/// an error unless the frame ends exactly at the end of `frame` (and its
/// checksum, when it has one, matches).
fn decode_frame(
    d: &mut zstd::stream::raw::Decoder<'static>,
    frame: &[u8],
    buf: &mut [u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    d.reinit()?;
    let start = out.len();
    let mut input = InBuffer::around(frame);
    loop {
        let mut output = OutBuffer::around(&mut *buf);
        let hint = d.run(&mut input, &mut output)?;
        let n = output.pos();
        out.extend_from_slice(&buf[..n]);
        if out.len() - start > MAX_FRAME_CONTENT {
            return Err(bad("frame too large"));
        }
        if hint == 0 && n < buf.len() {
            return if input.pos == frame.len() {
                Ok(())
            } else {
                Err(bad("the frame ends before its size"))
            };
        }
        if input.pos == frame.len() && n == 0 {
            return Err(bad("incomplete frame"));
        }
    }
}

/// Compresses whole lines into frames.
pub(crate) struct FrameEncoder {
    cctx: zstd::bulk::Compressor<'static>,
    out: Vec<u8>,
}

impl std::fmt::Debug for FrameEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameEncoder").finish_non_exhaustive()
    }
}

impl FrameEncoder {
    /// An encoder at `level`, whose frames carry their content size and a
    /// checksum of it.
    pub(crate) fn new(level: i32) -> Result<Self> {
        let enc = |e: std::io::Error| Error::Encode {
            what: "zstd frame",
            reason: e.to_string(),
        };
        let mut cctx = zstd::bulk::Compressor::new(level).map_err(enc)?;
        cctx.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))
            .map_err(enc)?;
        Ok(FrameEncoder {
            cctx,
            out: Vec::new(),
        })
    }

    /// One complete frame holding `lines`.
    pub(crate) fn frame(&mut self, lines: &[u8]) -> Result<&[u8]> {
        self.out.clear();
        self.out.reserve(zstd_safe::compress_bound(lines.len()));
        self.cctx
            .compress_to_buffer(lines, &mut self.out)
            .map_err(|e| Error::Encode {
                what: "zstd frame",
                reason: e.to_string(),
            })?;
        Ok(&self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the fuzz target checks: the kept frames lie inside the input,
    /// in order, and the standard decoder reads them to the same content.
    fn check(data: &[u8]) {
        let s = scan(data);
        let (mut end, mut content) = (0, 0);
        for f in &s.frames {
            assert!(f.end > end && f.end <= data.len() as u64);
            assert!(f.content_end >= content);
            (end, content) = (f.end, f.content_end);
        }
        assert_eq!(s.frames_len(), end);
        assert_eq!(s.content.len() as u64, content);
        assert_eq!(s.tail, data.len() as u64 - end);
        if end > 0 {
            // (The standard decoder calls no input at all incomplete.)
            let whole = zstd::stream::decode_all(&data[..end as usize]).unwrap();
            assert_eq!(whole, s.content);
        }
    }

    proptest! {
        #[test]
        fn damaged_files_are_scanned_without_panics(
            lines in proptest::collection::vec("[a-z0-9{}\":,]{0,80}", 1..30),
            split in any::<prop::sample::Index>(),
            cut in any::<prop::sample::Index>(),
            flips in proptest::collection::vec(any::<(prop::sample::Index, u8)>(), 0..4),
        ) {
            let text: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
            let at = split.index(text.len() + 1);
            let mut enc = FrameEncoder::new(1).unwrap();
            let mut file = enc.frame(&text[..at]).unwrap().to_vec();
            file.extend_from_slice(enc.frame(&text[at..]).unwrap());
            check(&file);
            prop_assert_eq!(scan(&file).content, text);
            let mut bad = file[..cut.index(file.len() + 1)].to_vec();
            for (i, x) in flips {
                if !bad.is_empty() {
                    let i = i.index(bad.len());
                    bad[i] ^= x;
                }
            }
            check(&bad);
        }
    }

    #[test]
    fn frames_round_trip_and_a_torn_frame_is_the_tail() {
        let mut enc = FrameEncoder::new(3).unwrap();
        let mut file = Vec::new();
        let a = b"{\"sequence\":1}\n{\"sequence\":2}\n".repeat(50);
        let b = b"{\"sequence\":3}\n".to_vec();
        file.extend_from_slice(enc.frame(&a).unwrap());
        let first_end = file.len() as u64;
        file.extend_from_slice(enc.frame(&b).unwrap());
        let s = scan(&file);
        assert_eq!(s.frames.len(), 2);
        assert_eq!(s.content, [a.clone(), b.clone()].concat());
        assert_eq!(s.tail, 0);
        assert_eq!(s.frames[0].end, first_end);
        assert_eq!(
            s.frame_before(a.len() as u64 + 3),
            (first_end, a.len() as u64)
        );
        assert_eq!(s.frame_before(3), (0, 0));
        // The standard decoder reads the concatenated frames as one stream.
        assert_eq!(zstd::stream::decode_all(&file[..]).unwrap(), s.content);
        for cut in 1..file.len() as u64 - first_end {
            let s = scan(&file[..(first_end + cut) as usize]);
            assert_eq!(s.frames.len(), 1, "cut {cut}");
            assert_eq!(s.content, a);
            assert_eq!(s.tail, cut);
        }
        // A damaged byte fails the checksum (or the frame) and ends the scan.
        let mut bad = file.clone();
        let i = bad.len() - 6;
        bad[i] ^= 0x40;
        let s = scan(&bad);
        assert_eq!(s.frames.len(), 1);
        assert_eq!(s.tail, file.len() as u64 - first_end);
        // Zeros (blocks a crash left unwritten) are a tail too.
        let mut z = file.clone();
        z.extend_from_slice(&[0; 4096]);
        assert_eq!(scan(&z).tail, 4096);
        assert_eq!(scan(b""), Scan::default());
    }
}
