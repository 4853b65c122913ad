//! Reading pcap and pcapng captures: file formats with `pcap-file`, link,
//! network and transport layers with `etherparse`, then TCP reassembly.
//!
//! Supported link types: Ethernet (with VLAN tags), Linux cooked capture
//! v1 and v2, raw IP (DLT_RAW, IPv4, IPv6) and BSD loopback (NULL, LOOP).
//! Packets of other link types, non-TCP packets and IP fragments are
//! skipped and counted.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::DataLink;

use super::tcp::{Event, FlowKey, Reassembler, Seen, Segment};

/// Capture file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic libpcap (either byte order, micro- or nanosecond).
    Pcap,
    /// pcapng.
    PcapNg,
}

/// Recognises a capture file by its magic number.
pub fn detect(data: &[u8]) -> Option<Format> {
    match data.get(..4)? {
        [0xa1, 0xb2, 0xc3, 0xd4]
        | [0xd4, 0xc3, 0xb2, 0xa1]
        | [0xa1, 0xb2, 0x3c, 0x4d]
        | [0x4d, 0x3c, 0xb2, 0xa1] => Some(Format::Pcap),
        [0x0a, 0x0d, 0x0d, 0x0a] => Some(Format::PcapNg),
        _ => None,
    }
}

/// What a capture yields.
#[derive(Debug, Default)]
pub struct CaptureReport {
    /// Messages and flow problems, in capture order.
    pub events: Vec<Event>,
    /// Problems with the file or with packets that are not Diameter's
    /// fault (a damaged file, unsupported link types, unparsable packets).
    pub warnings: Vec<String>,
    /// Frames read.
    pub frames: u64,
}

/// Reads a whole capture.
pub fn read(data: &[u8], format: Format) -> CaptureReport {
    let mut st = State::default();
    match format {
        Format::Pcap => read_pcap(data, &mut st),
        Format::PcapNg => read_pcapng(data, &mut st),
    }
    st.finish()
}

#[derive(Default)]
struct State {
    reasm: Reassembler,
    report: CaptureReport,
    unsupported_link: u64,
    unparsable: u64,
}

impl State {
    fn packet(&mut self, link: DataLink, time: Option<Duration>, data: &[u8]) {
        self.report.frames += 1;
        let frame = self.report.frames;
        let sliced = match slice(link, data) {
            Some(Ok(s)) => s,
            Some(Err(())) => {
                self.unparsable += 1;
                return;
            }
            None => {
                self.unsupported_link += 1;
                return;
            }
        };
        let (src, dst) = match &sliced.net {
            Some(NetSlice::Ipv4(ip)) => (
                IpAddr::V4(ip.header().source_addr()),
                IpAddr::V4(ip.header().destination_addr()),
            ),
            Some(NetSlice::Ipv6(ip)) => (
                IpAddr::V6(ip.header().source_addr()),
                IpAddr::V6(ip.header().destination_addr()),
            ),
            None => return,
        };
        let Some(TransportSlice::Tcp(tcp)) = &sliced.transport else {
            return;
        };
        let seen = Seen {
            frame,
            time,
            flow: FlowKey {
                src: SocketAddr::new(src, tcp.source_port()),
                dst: SocketAddr::new(dst, tcp.destination_port()),
            },
        };
        let seg = Segment {
            seen,
            seq: tcp.sequence_number(),
            syn: tcp.syn(),
            payload: tcp.payload(),
        };
        self.reasm.push(seg, &mut self.report.events);
    }

    fn finish(mut self) -> CaptureReport {
        self.reasm.finish(&mut self.report.events);
        if self.unsupported_link > 0 {
            self.report.warnings.push(format!(
                "{} frames skipped: unsupported link type",
                self.unsupported_link
            ));
        }
        if self.unparsable > 0 {
            self.report.warnings.push(format!(
                "{} frames skipped: truncated or malformed link, IP or TCP headers",
                self.unparsable
            ));
        }
        self.report
    }
}

/// Parses the layers under TCP. `None`: unsupported link type.
fn slice(link: DataLink, data: &[u8]) -> Option<Result<SlicedPacket<'_>, ()>> {
    let r = match link {
        DataLink::ETHERNET => SlicedPacket::from_ethernet(data).map_err(|_| ()),
        DataLink::LINUX_SLL => SlicedPacket::from_linux_sll(data).map_err(|_| ()),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => {
            SlicedPacket::from_ip(data).map_err(|_| ())
        }
        DataLink::LINUX_SLL2 => {
            // 20-byte header; the protocol (an EtherType) comes first.
            match data.get(..2) {
                Some([0x08, 0x00]) | Some([0x86, 0xdd]) => {
                    SlicedPacket::from_ip(&data[20.min(data.len())..]).map_err(|_| ())
                }
                Some(_) => return Some(Err(())),
                None => Err(()),
            }
        }
        DataLink::NULL | DataLink::LOOP => {
            // A 4-byte address family, in the capturing host's byte order
            // (NULL) or big-endian (LOOP): 2 is IPv4, 24/28/30 are IPv6.
            let fam = data.get(..4)?;
            let le = u32::from_le_bytes([fam[0], fam[1], fam[2], fam[3]]);
            let be = u32::from_be_bytes([fam[0], fam[1], fam[2], fam[3]]);
            if [le, be].iter().any(|f| matches!(f, 2 | 24 | 28 | 30)) {
                SlicedPacket::from_ip(&data[4..]).map_err(|_| ())
            } else {
                Err(())
            }
        }
        _ => return None,
    };
    Some(r)
}

fn read_pcap(data: &[u8], st: &mut State) {
    let (mut rest, parser) = match PcapParser::new(data) {
        Ok(x) => x,
        Err(e) => {
            st.report
                .warnings
                .push(format!("not a readable pcap file: {e}"));
            return;
        }
    };
    let link = parser.header().datalink;
    while !rest.is_empty() {
        match parser.next_packet(rest) {
            Ok((r, pkt)) => {
                rest = r;
                st.packet(link, Some(pkt.timestamp), &pkt.data);
            }
            Err(e) => {
                st.report.warnings.push(format!(
                    "capture file damaged after frame {}: {e}; the rest is ignored",
                    st.report.frames
                ));
                return;
            }
        }
    }
}

/// Link type and timestamp unit of a pcapng interface.
#[derive(Clone, Copy)]
struct Interface {
    link: DataLink,
    /// Timestamp ticks per second.
    ticks: u64,
}

fn ticks_per_second(opts: &[InterfaceDescriptionOption<'_>]) -> u64 {
    for o in opts {
        if let InterfaceDescriptionOption::IfTsResol(r) = o {
            let exp = u32::from(r & 0x7f);
            let ticks = if r & 0x80 == 0 {
                10u64.checked_pow(exp)
            } else {
                2u64.checked_pow(exp)
            };
            // Finer than a nanosecond cannot be a real capture clock.
            return ticks.filter(|&t| t > 0).unwrap_or(1_000_000);
        }
    }
    1_000_000
}

/// Converts a raw pcapng timestamp (in interface ticks) to a duration.
fn ticks_to_duration(raw: u64, ticks: u64) -> Duration {
    let secs = raw / ticks;
    let frac = raw % ticks;
    let nanos = (u128::from(frac) * 1_000_000_000 / u128::from(ticks)) as u32;
    Duration::new(secs, nanos)
}

fn read_pcapng(data: &[u8], st: &mut State) {
    let (mut rest, mut parser) = match PcapNgParser::new(data) {
        Ok(x) => x,
        Err(e) => {
            st.report
                .warnings
                .push(format!("not a readable pcapng file: {e}"));
            return;
        }
    };
    // The parser keeps the interfaces of the current section too, but its
    // packet timestamps ignore if_tsresol; track them here.
    let mut ifaces: Vec<Interface> = Vec::new();
    while !rest.is_empty() {
        let (r, block) = match parser.next_block(rest) {
            Ok(x) => x,
            Err(e) => {
                st.report.warnings.push(format!(
                    "capture file damaged after frame {}: {e}; the rest is ignored",
                    st.report.frames
                ));
                return;
            }
        };
        rest = r;
        match block {
            Block::SectionHeader(_) => ifaces.clear(),
            Block::InterfaceDescription(idb) => ifaces.push(Interface {
                link: idb.linktype,
                ticks: ticks_per_second(&idb.options),
            }),
            Block::EnhancedPacket(epb) => {
                let Some(iface) = ifaces.get(epb.interface_id as usize).copied() else {
                    st.unparsable += 1;
                    continue;
                };
                // pcap-file hands the raw 64-bit tick count over as nanoseconds.
                let raw = u64::try_from(epb.timestamp.as_nanos()).unwrap_or(u64::MAX);
                let time = ticks_to_duration(raw, iface.ticks);
                st.packet(iface.link, Some(time), &epb.data);
            }
            Block::SimplePacket(spb) => {
                let Some(iface) = ifaces.first().copied() else {
                    st.unparsable += 1;
                    continue;
                };
                st.packet(iface.link, None, &spb.data);
            }
            Block::Packet(pb) => {
                let Some(iface) = ifaces.get(usize::from(pb.interface_id)).copied() else {
                    st.unparsable += 1;
                    continue;
                };
                let time = ticks_to_duration(pb.timestamp, iface.ticks);
                st.packet(iface.link, Some(time), &pb.data);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats_by_magic() {
        assert_eq!(detect(&[0xd4, 0xc3, 0xb2, 0xa1, 0]), Some(Format::Pcap));
        assert_eq!(detect(&[0x4d, 0x3c, 0xb2, 0xa1]), Some(Format::Pcap));
        assert_eq!(detect(&[0x0a, 0x0d, 0x0d, 0x0a]), Some(Format::PcapNg));
        assert_eq!(detect(&[1, 0, 0, 20]), None);
        assert_eq!(detect(&[0xd4]), None);
    }

    #[test]
    fn pcapng_timestamps_follow_the_interface_resolution() {
        assert_eq!(ticks_per_second(&[]), 1_000_000);
        assert_eq!(
            ticks_per_second(&[InterfaceDescriptionOption::IfTsResol(9)]),
            1_000_000_000
        );
        assert_eq!(
            ticks_per_second(&[InterfaceDescriptionOption::IfTsResol(0x80 | 10)]),
            1024
        );
        assert_eq!(
            ticks_to_duration(1_500_000, 1_000_000),
            Duration::from_millis(1500)
        );
        assert_eq!(ticks_to_duration(u64::MAX, 1).as_secs(), u64::MAX);
    }

    #[test]
    fn garbage_and_truncated_files_do_not_panic() {
        let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&[0xff, 0xff, 0, 0, 1, 0, 0, 0]);
        for n in 0..pcap.len() {
            read(&pcap[..n], Format::Pcap);
        }
        let mut bytes = pcap.clone();
        bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0]);
        let r = read(&bytes, Format::Pcap);
        assert_eq!(r.events.len(), 0);
        let ng = [
            0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0, 6, 0, 0, 0, 12, 0, 0, 0,
        ];
        for n in 0..ng.len() {
            read(&ng[..n], Format::PcapNg);
        }
    }
}
