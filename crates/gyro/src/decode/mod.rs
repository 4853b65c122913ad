//! `gyro decode`: prints Diameter messages as readable trees.
//!
//! Input is `--hex HEX`, or a FILE holding a raw message (or several back
//! to back), a hex dump of one, or a pcap/pcapng capture of Diameter over
//! TCP. Every message is printed with its header and every AVP (name, code,
//! vendor, flags, decoded value; grouped AVPs nested). Requests are checked
//! with the same validation as gyro's server; an invalid message is printed
//! as far as it decodes, followed by what is wrong, the Result-Code gyro
//! would answer with and the Failed-AVP. The exit status is 1 when any
//! message (or flow of a capture) is invalid or the input holds none, 2
//! when the input cannot be read at all, 0 otherwise.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use gyro_diameter::header::{frame_length, MAX_MESSAGE_LEN};

pub mod capture;
pub mod dictionary;
pub mod hex_input;
pub mod json;
pub mod model;
pub mod render;
pub mod tcp;

use model::Decoded;
use tcp::{Event, Seen};

/// Arguments of `gyro decode`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    gyro decode --hex 0100001480000118000000000000000100000002\n  \
    gyro decode capture.pcapng\n  \
    gyro decode --json --strict message.bin")]
pub struct Args {
    /// The message bytes in hex (spaces, colons, newlines and a 0x prefix
    /// are ignored); several messages may follow each other.
    #[arg(long, value_name = "HEX", conflicts_with = "file")]
    pub hex: Option<String>,

    /// A raw message file, a hex dump or a pcap/pcapng capture.
    #[arg(value_name = "FILE", required_unless_present = "hex")]
    pub file: Option<PathBuf>,

    /// Print a JSON array instead of text.
    #[arg(long)]
    pub json: bool,

    /// Validate requests strictly (by default the lenient settings of the
    /// server are used, which accept common peer quirks).
    #[arg(long)]
    pub strict: bool,
}

/// One thing to report.
#[derive(Debug)]
pub enum Item {
    /// A message.
    Message(Box<Decoded>),
    /// A capture flow that could not be turned into messages.
    FlowError {
        /// Where.
        seen: Seen,
        /// What.
        message: String,
    },
}

impl Item {
    fn is_error(&self) -> bool {
        match self {
            Item::Message(d) => !d.is_valid(),
            Item::FlowError { .. } => true,
        }
    }
}

/// Runs `gyro decode`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut warnings = Vec::new();
    let items = match (&args.hex, &args.file) {
        (Some(h), _) => decode_bytes(&parse_hex(h)?, args.strict),
        (None, Some(path)) => {
            let data =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            decode_file(&data, args.strict, &mut warnings)?
        }
        (None, None) => bail!("give --hex HEX or a FILE"),
    };
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let mut out = String::new();
    if args.json {
        let arr: Vec<_> = items
            .iter()
            .map(|i| match i {
                Item::Message(d) => json::message(d),
                Item::FlowError { seen, message } => json::flow_error(seen, message),
            })
            .collect();
        out = serde_json::to_string_pretty(&arr)?;
        out.push('\n');
    } else {
        for (n, i) in items.iter().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            match i {
                Item::Message(d) => render::message(&mut out, d),
                Item::FlowError { seen, message } => render::flow_error(&mut out, seen, message),
            }
        }
        if items.is_empty() {
            eprintln!("no Diameter messages found");
        }
    }
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = stdout
        .write_all(out.as_bytes())
        .and_then(|_| stdout.flush());
    let failed = items.is_empty() || items.iter().any(Item::is_error);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Decodes a file: a capture, a hex dump or raw bytes.
pub fn decode_file(
    data: &[u8],
    strict: bool,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<Item>> {
    if let Some(format) = capture::detect(data) {
        let report = capture::read(data, format);
        warnings.extend(report.warnings);
        let mut items = Vec::new();
        for e in report.events {
            match e {
                Event::Message { seen, bytes, .. } => {
                    let mut d = model::decode(&bytes, strict);
                    d.seen = Some(seen);
                    items.push(Item::Message(Box::new(d)));
                }
                Event::Error { seen, message } => items.push(Item::FlowError { seen, message }),
                Event::Note { message, .. } => warnings.push(message),
            }
        }
        return Ok(items);
    }
    if hex_input::looks_like_hex(data) {
        let text = String::from_utf8_lossy(data);
        return Ok(decode_bytes(&parse_hex(&text)?, strict));
    }
    Ok(decode_bytes(data, strict))
}

/// Decodes messages that follow each other in `data`. Whatever cannot be
/// framed is decoded as one last (invalid) message.
pub fn decode_bytes(data: &[u8], strict: bool) -> Vec<Item> {
    let mut items = Vec::new();
    let mut at = 0;
    let mut several = false;
    while at < data.len() {
        let rest = &data[at..];
        let n = match frame_length(rest, MAX_MESSAGE_LEN) {
            Ok(Some(n)) if n <= rest.len() => n,
            _ => rest.len(),
        };
        if n < rest.len() {
            several = true;
        }
        let mut d = model::decode(&rest[..n], strict);
        d.offset = Some(at);
        items.push(Item::Message(Box::new(d)));
        at += n;
    }
    if !several && items.len() == 1 {
        if let Some(Item::Message(d)) = items.first_mut() {
            d.offset = None;
        }
    }
    items
}

/// Parses hex, ignoring whitespace, colons and `0x` prefixes.
pub fn parse_hex(s: &str) -> anyhow::Result<Vec<u8>> {
    hex_input::parse_hex(s).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_parsing_ignores_separators() {
        assert_eq!(parse_hex("0x01 00:00\n14").unwrap(), vec![1, 0, 0, 0x14]);
        assert!(parse_hex("0").is_err());
        assert!(parse_hex("zz").is_err());
        assert!(parse_hex(" ").is_err());
    }

    const DWR: &str = "0100002c80000118000000000000000100000002\
                       000001084000000b612e6200000001284000000962000000";

    #[test]
    fn back_to_back_messages_are_split_and_leftovers_reported() {
        let dwr = parse_hex(DWR).unwrap();
        let mut data = dwr.clone();
        data.extend_from_slice(&dwr);
        data.extend_from_slice(&[1, 0, 0]);
        let items = decode_bytes(&data, false);
        assert_eq!(items.len(), 3);
        assert!(!items[0].is_error() && !items[1].is_error() && items[2].is_error());
        assert!(matches!(&items[1], Item::Message(d) if d.offset == Some(44)));
        let single = decode_bytes(&dwr, false);
        assert!(matches!(&single[0], Item::Message(d) if d.offset.is_none()));
    }
}
