//! Data formats, padding and length corner cases through the public API:
//! what the encoder writes, what the decoder reads back, and where either
//! refuses.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};

use bytes::BytesMut;
use gyro_diameter::avp::{flags as avp_flags, padded};
use gyro_diameter::codes::{app, avp, cmd, AvpId, VENDOR_3GPP};
use gyro_diameter::header::{self, frame_length, MAX_MESSAGE_LEN};
use gyro_diameter::types::{decode_value, Transport, Value};
use gyro_diameter::{Address, AvpType, DiameterTime, Encoder, Error, Message};

const OCTETS: AvpId = AvpId::m(460, 0);
const VENDOR_OCTETS: AvpId = AvpId::m(22, VENDOR_3GPP);

fn request(buf: &mut BytesMut) -> Encoder<'_> {
    Encoder::request(buf, cmd::CREDIT_CONTROL, app::CREDIT_CONTROL, true, 1, 2)
}

/// Encodes one message whose body the closure writes.
fn message(body: impl FnOnce(&mut Encoder<'_>)) -> BytesMut {
    let mut buf = BytesMut::new();
    let mut e = request(&mut buf);
    body(&mut e);
    let n = e.finish().unwrap();
    assert_eq!(n, buf.len());
    buf
}

fn only_avp(buf: &[u8]) -> gyro_diameter::Avp<'_> {
    let m = Message::parse(buf).unwrap();
    let mut it = m.avps();
    let a = it.next().unwrap().unwrap();
    assert!(it.next().is_none());
    a
}

// ---- padding -------------------------------------------------------------

#[test]
fn octet_strings_of_0_to_8_bytes_are_padded_to_four() {
    let expected_padded = [0, 4, 4, 4, 4, 8, 8, 8, 8];
    for (n, want) in expected_padded.into_iter().enumerate() {
        let data: Vec<u8> = (1..=n as u8).collect();
        assert_eq!(padded(n), want);
        for (id, hlen) in [(OCTETS, 8), (VENDOR_OCTETS, 12)] {
            let buf = message(|e| {
                e.octets(id, &data);
            });
            assert_eq!(buf.len(), 20 + hlen + want, "{n} bytes, header {hlen}");
            let h = header::Header::parse(&buf).unwrap();
            assert_eq!(h.length as usize, buf.len());
            let a = only_avp(&buf);
            assert_eq!(a.length(), hlen + n, "AVP Length excludes padding");
            assert_eq!(a.octets(), &data[..]);
            assert!(
                buf[20 + hlen + n..].iter().all(|&b| b == 0),
                "padding is zero"
            );
        }
    }
}

#[test]
fn five_byte_octet_string_has_length_13_and_occupies_16() {
    let buf = message(|e| {
        e.octets(OCTETS, b"hello").u32(avp::RATING_GROUP, 1);
    });
    let m = Message::parse(&buf).unwrap();
    let v: Vec<_> = m.avps().map(Result::unwrap).collect();
    assert_eq!(v[0].length(), 13);
    assert_eq!(v[1].offset() - v[0].offset(), 16);
    assert_eq!(buf.len(), 20 + 16 + 12);
}

#[test]
fn group_length_counts_the_padding_of_its_children() {
    let buf = message(|e| {
        let g = e.begin_group(avp::USER_EQUIPMENT_INFO);
        e.octets(avp::USER_EQUIPMENT_INFO_VALUE, b"hello");
        e.i32(avp::USER_EQUIPMENT_INFO_TYPE, 0);
        e.end_group(g);
    });
    let g = only_avp(&buf);
    assert_eq!(g.length(), 8 + 16 + 12);
    assert_eq!(padded(g.length()), g.length(), "a group is always aligned");
    let children: Vec<_> = g.grouped().map(Result::unwrap).collect();
    assert_eq!(children.len(), 2);
    assert_eq!(children[0].octets(), b"hello");
    assert_eq!(children[1].i32(), Ok(0));
}

#[test]
fn unpadded_trailing_avp_is_an_invalid_avp_length() {
    // A 5-byte OctetString whose padding is missing: the message length
    // still has to be a multiple of 4, so the AVP claims bytes that are
    // the start of the next one and the next header is cut short.
    let mut buf = message(|e| {
        e.octets(OCTETS, b"hello");
    });
    // Shrink the AVP Length to 4 bytes of data: the iterator then expects a
    // following AVP in the 4 bytes of "o" plus padding.
    buf[20 + 7] = 12;
    let m = Message::parse(&buf).unwrap();
    let v: Vec<_> = m.avps().collect();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].as_ref().unwrap().octets(), b"hell");
    assert!(matches!(
        v[1],
        Err(Error::InvalidAvpLength {
            offset: 32,
            code: 0,
            ..
        })
    ));
}

// ---- exact AVP lengths per format -------------------------------------------

#[test]
fn every_fixed_format_has_the_rfc_avp_length() {
    let v4 = Address::Ipv4(Ipv4Addr::new(10, 0, 0, 1));
    let v6 = Address::Ipv6(Ipv6Addr::LOCALHOST);
    for (vendor, extra) in [(0, 0), (VENDOR_3GPP, 4)] {
        let id = AvpId::m(9999, vendor);
        let buf = message(|e| {
            e.i32(id, 0)
                .u32(id, 0)
                .f32(id, 0.0)
                .time(id, DiameterTime(0))
                .i64(id, 0)
                .u64(id, 0)
                .f64(id, 0.0)
                .address(id, &v4)
                .address(id, &v6)
                .str(id, "")
                .octets(id, b"");
        });
        let m = Message::parse(&buf).unwrap();
        let lengths: Vec<usize> = m.avps().map(|a| a.unwrap().length()).collect();
        let want: Vec<usize> = [12, 12, 12, 12, 16, 16, 16, 14, 26, 8, 8]
            .iter()
            .map(|l| l + extra)
            .collect();
        assert_eq!(lengths, want, "vendor {vendor}");
    }
}

// ---- round trips through the encoder --------------------------------------

#[test]
fn integer_edges_round_trip_through_the_encoder() {
    let id = AvpId::m(1000, 0);
    for v in [0, 1, -1, i32::MIN, i32::MAX] {
        let buf = message(|e| {
            e.i32(id, v);
        });
        let a = only_avp(&buf);
        assert_eq!((a.i32(), a.enumerated()), (Ok(v), Ok(v)));
        assert_eq!(
            decode_value(AvpType::Integer32, a.data()),
            Ok(Value::Integer32(v))
        );
    }
    for v in [0, 1, -1, i64::MIN, i64::MAX] {
        let a_buf = message(|e| {
            e.i64(id, v);
        });
        assert_eq!(only_avp(&a_buf).i64(), Ok(v));
    }
    for v in [0, 1, u32::MAX, 1 << 31] {
        let buf = message(|e| {
            e.u32(id, v);
        });
        assert_eq!(only_avp(&buf).u32(), Ok(v));
    }
    for v in [0, 1, u64::MAX, 1 << 63, u32::MAX as u64 + 1] {
        let buf = message(|e| {
            e.u64(id, v);
        });
        assert_eq!(only_avp(&buf).u64(), Ok(v));
    }
}

#[test]
fn float_edges_round_trip_bit_for_bit() {
    let id = AvpId::m(1001, 0);
    for v in [
        0.0f32,
        -0.0,
        1.5,
        f32::MIN,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ] {
        let buf = message(|e| {
            e.f32(id, v);
        });
        assert_eq!(only_avp(&buf).f32().unwrap().to_bits(), v.to_bits());
    }
    for v in [
        0.0f64,
        -0.0,
        f64::MIN,
        f64::MAX,
        f64::EPSILON,
        f64::from_bits(1),
        f64::INFINITY,
        f64::NAN,
    ] {
        let buf = message(|e| {
            e.f64(id, v);
        });
        assert_eq!(only_avp(&buf).f64().unwrap().to_bits(), v.to_bits());
    }
}

#[test]
fn wrong_data_length_is_reported_by_each_typed_accessor() {
    let buf = message(|e| {
        e.octets(AvpId::m(1002, 0), &[0; 5]);
    });
    let a = only_avp(&buf);
    let is_len = |r: Result<(), Error>| matches!(r, Err(Error::InvalidValue { length: true, .. }));
    assert!(is_len(a.i32().map(drop)));
    assert!(is_len(a.u32().map(drop)));
    assert!(is_len(a.f32().map(drop)));
    assert!(is_len(a.i64().map(drop)));
    assert!(is_len(a.u64().map(drop)));
    assert!(is_len(a.f64().map(drop)));
    assert!(is_len(a.time().map(drop)));
    assert!(is_len(a.enumerated().map(drop)));
    // Family 0 with 3 bytes is an "other" address, so 5 bytes decode.
    assert_eq!(a.address().unwrap().family(), 0);
}

#[test]
fn text_formats_round_trip_and_are_checked_on_decode() {
    let buf = message(|e| {
        e.str(avp::SESSION_ID, "s\u{e9}ssion;1;2")
            .str(avp::ORIGIN_HOST, "OCS.Example.Net")
            .str(avp::REDIRECT_HOST, "aaas://ocs.example.net;transport=tcp")
            .octets(avp::ORIGIN_REALM, b"bad realm")
            .octets(avp::SESSION_ID, b"\xc0\x80");
    });
    let m = Message::parse(&buf).unwrap();
    let v: Vec<_> = m.avps().map(Result::unwrap).collect();
    assert_eq!(v[0].utf8(), Ok("s\u{e9}ssion;1;2"));
    assert!(v[0].identity().is_err(), "non-ASCII is no DiameterIdentity");
    assert_eq!(v[1].identity(), Ok("OCS.Example.Net"));
    let u = v[2].uri().unwrap();
    assert_eq!(
        (u.secure, u.port, u.transport),
        (true, 5658, Some(Transport::Tcp))
    );
    assert!(v[3].identity().is_err());
    assert!(v[4].utf8().is_err());
    assert_eq!(m.session_id(), Some("s\u{e9}ssion;1;2"), "first one wins");
}

#[test]
fn addresses_of_every_family_round_trip() {
    let addrs = [
        Address::Ipv4(Ipv4Addr::new(198, 51, 100, 1)),
        Address::Ipv6("2001:db8:1::42".parse().unwrap()),
        Address::E164("4790000001"),
        Address::Other {
            family: 16,
            bytes: b"\x01\x02\x03",
        },
    ];
    let buf = message(|e| {
        for a in &addrs {
            e.address(avp::HOST_IP_ADDRESS, a);
        }
    });
    let m = Message::parse(&buf).unwrap();
    let got: Vec<Address<'_>> = m.avps().map(|a| a.unwrap().address().unwrap()).collect();
    assert_eq!(got, addrs);
}

#[test]
fn address_with_a_wrong_size_for_its_family_fails_to_decode() {
    let buf = message(|e| {
        e.octets(avp::HOST_IP_ADDRESS, &[0, 1, 10, 0, 0])
            .octets(avp::HOST_IP_ADDRESS, &[0, 2, 0, 0, 0, 0])
            .octets(avp::HOST_IP_ADDRESS, &[0, 1, 10, 0, 0, 1, 0]);
    });
    let m = Message::parse(&buf).unwrap();
    for a in m.avps() {
        assert!(matches!(
            a.unwrap().address(),
            Err(Error::InvalidValue { length: true, .. })
        ));
    }
}

#[test]
fn time_round_trips_across_the_2036_wrap() {
    for unix in [
        DiameterTime::MIN_UNIX,
        0,
        1_700_000_000,
        2_085_978_495, // 2036-02-07 06:28:15, NTP 0xFFFFFFFF
        2_085_978_496, // 2036-02-07 06:28:16, NTP 0x00000000
        DiameterTime::MAX_UNIX,
    ] {
        let t = DiameterTime::from_unix(unix).unwrap();
        let buf = message(|e| {
            e.time(avp::EVENT_TIMESTAMP, t);
        });
        let a = only_avp(&buf);
        assert_eq!(a.time().unwrap().to_unix(), unix);
        assert_eq!(a.data(), t.0.to_be_bytes());
    }
    let wrap = DiameterTime::from_unix(2_085_978_496).unwrap();
    assert_eq!(wrap.0, 0);
}

// ---- AVP header bits -------------------------------------------------------

#[test]
fn vendor_bit_follows_the_vendor_id() {
    let with_v_but_no_vendor = AvpId {
        code: 1,
        vendor: 0,
        flags: avp_flags::VENDOR | avp_flags::MANDATORY,
    };
    let vendor_without_v = AvpId {
        code: 2,
        vendor: VENDOR_3GPP,
        flags: 0,
    };
    let buf = message(|e| {
        e.u32(with_v_but_no_vendor, 1).u32(vendor_without_v, 2);
    });
    let m = Message::parse(&buf).unwrap();
    let v: Vec<_> = m.avps().map(Result::unwrap).collect();
    assert_eq!(v[0].flags(), avp_flags::MANDATORY);
    assert_eq!((v[0].vendor_id(), v[0].length()), (0, 12));
    assert_eq!(v[1].flags(), avp_flags::VENDOR);
    assert_eq!((v[1].vendor_id(), v[1].length()), (VENDOR_3GPP, 16));
}

// ---- grouped nesting ---------------------------------------------------------

#[test]
fn deeply_nested_groups_are_back_patched_at_every_level() {
    const DEPTH: usize = 40;
    let buf = message(|e| {
        let mut open = Vec::new();
        for d in 0..DEPTH {
            open.push(e.begin_group(AvpId::m(5000 + d as u32, 0)));
            e.octets(OCTETS, &[d as u8; 3]);
        }
        e.u64(avp::CC_TOTAL_OCTETS, u64::MAX);
        while let Some(g) = open.pop() {
            e.end_group(g);
        }
    });
    let mut g = only_avp(&buf);
    for d in 0..DEPTH {
        assert_eq!(g.code(), 5000 + d as u32);
        // Each level: header 8 + 3-byte OctetString padded to 12 + the rest.
        let rest = (DEPTH - d - 1) * 20 + 16;
        assert_eq!(g.length(), 8 + 12 + rest, "level {d}");
        let mut it = g.grouped();
        assert_eq!(it.next().unwrap().unwrap().octets(), [d as u8; 3]);
        let next = it.next().unwrap().unwrap();
        assert!(it.next().is_none());
        if d + 1 == DEPTH {
            assert_eq!(next.u64(), Ok(u64::MAX));
        } else {
            g = next;
        }
    }
}

#[test]
fn empty_group_has_header_length_only() {
    let buf = message(|e| {
        let g = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
        e.end_group(g);
        let g = e.begin_group(avp::SERVICE_INFORMATION);
        e.end_group(g);
    });
    let m = Message::parse(&buf).unwrap();
    let v: Vec<_> = m.avps().map(Result::unwrap).collect();
    assert_eq!((v[0].length(), v[1].length()), (8, 12));
    assert!(v[0].grouped().next().is_none() && v[1].grouped().next().is_none());
}

#[test]
fn child_running_past_its_group_is_an_error_inside_the_group_only() {
    let mut buf = message(|e| {
        let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
        e.u32(avp::RATING_GROUP, 10);
        e.end_group(g);
        e.u32(avp::CC_REQUEST_NUMBER, 3);
    });
    // Rating-Group claims 16 bytes: it fits in the message, not in its group.
    buf[28 + 7] = 16;
    let m = Message::parse(&buf).unwrap();
    let top: Vec<_> = m.avps().map(Result::unwrap).collect();
    assert_eq!(top.len(), 2);
    assert_eq!(top[1].u32(), Ok(3));
    let children: Vec<_> = top[0].grouped().collect();
    assert!(matches!(
        children[..],
        [Err(Error::InvalidAvpLength {
            offset: 28,
            code: 432,
            length: 16,
            ..
        })]
    ));
}

#[test]
fn child_offsets_are_relative_to_the_message() {
    let mut buf = BytesMut::new();
    common::ccr_update(&mut buf);
    let m = Message::parse(&buf).unwrap();
    fn check(a: gyro_diameter::Avp<'_>, buf: &[u8]) {
        assert_eq!(&buf[a.offset()..a.offset() + a.length()], a.raw());
        if a.code() == 456 || a.code() == 446 || a.code() == 873 || a.code() == 874 {
            for c in a.grouped() {
                check(c.unwrap(), buf);
            }
        }
    }
    for a in m.avps() {
        check(a.unwrap(), &buf);
    }
}

// ---- TooLarge ----------------------------------------------------------------

#[test]
fn largest_message_the_length_field_allows_encodes() {
    // 0xFFFFFC is the largest multiple of 4 below 2^24.
    let data = vec![0xab; 0xFF_FFFC - 20 - 8];
    let mut buf = BytesMut::new();
    let mut e = request(&mut buf);
    e.octets(OCTETS, &data);
    assert_eq!(e.finish(), Ok(0xFF_FFFC));
    assert_eq!(frame_length(&buf, MAX_MESSAGE_LEN), Ok(Some(0xFF_FFFC)));
    let a = only_avp(&buf);
    assert_eq!(a.octets().len(), data.len());
}

#[test]
fn one_byte_more_makes_the_message_too_large() {
    let data = vec![0; 0xFF_FFFC - 20 - 8 + 1];
    let mut buf = BytesMut::from(&b"prev"[..]);
    let mut e = request(&mut buf);
    e.octets(OCTETS, &data);
    assert_eq!(
        e.finish(),
        Err(Error::TooLarge {
            what: "message",
            len: 0x100_0000,
        })
    );
    assert_eq!(
        &buf[..],
        b"prev",
        "a failed message leaves the buffer as it was"
    );
}

#[test]
fn avp_longer_than_24_bits_is_too_large() {
    let data = vec![0; MAX_MESSAGE_LEN - 8 + 1];
    let mut buf = BytesMut::new();
    let mut e = request(&mut buf);
    e.octets(OCTETS, &data).u32(avp::RATING_GROUP, 1);
    assert_eq!(
        e.finish(),
        Err(Error::TooLarge {
            what: "AVP",
            len: MAX_MESSAGE_LEN + 1,
        })
    );
    assert!(buf.is_empty());
}

#[test]
fn group_longer_than_24_bits_is_too_large() {
    let chunk = vec![0; 1 << 22];
    let mut buf = BytesMut::new();
    let mut e = request(&mut buf);
    let g = e.begin_group(avp::SERVICE_INFORMATION);
    for _ in 0..4 {
        e.octets(OCTETS, &chunk);
    }
    e.end_group(g);
    let err = e.finish().unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { what: "AVP", len } if len == 12 + 4 * (8 + (1 << 22))),
        "{err:?}"
    );
    assert!(buf.is_empty());
}

// ---- message length corner cases ----------------------------------------------

#[test]
fn header_only_message_has_no_avps() {
    let buf = message(|_| {});
    assert_eq!(buf.len(), 20);
    let m = Message::parse(&buf).unwrap();
    assert!(m.avps().next().is_none());
    assert_eq!(m.session_id(), None);
}

#[test]
fn message_length_must_match_the_buffer_exactly() {
    let buf = message(|e| {
        e.u32(avp::RATING_GROUP, 1);
    });
    assert!(Message::parse(&buf).is_ok());
    for cut in [0, 1, 19] {
        assert!(matches!(
            Message::parse(&buf[..cut]),
            Err(Error::Incomplete { .. })
        ));
    }
    for cut in [20, 24, 31] {
        assert!(matches!(
            Message::parse(&buf[..cut]),
            Err(Error::InvalidMessageLength { declared: 32, .. })
        ));
    }
    let mut longer = buf.to_vec();
    longer.extend_from_slice(&[0; 4]);
    assert!(Message::parse(&longer).is_err());
    for declared in [0u8, 4, 16, 19, 21, 30, 33, 36] {
        let mut b = buf.to_vec();
        b[3] = declared;
        assert!(
            matches!(Message::parse(&b), Err(Error::InvalidMessageLength { .. })),
            "declared {declared}"
        );
    }
}

#[test]
fn version_other_than_one_is_refused() {
    for version in [0u8, 2, 0xff] {
        let mut b = message(|_| {}).to_vec();
        b[0] = version;
        assert_eq!(
            Message::parse(&b).unwrap_err(),
            Error::UnsupportedVersion(version)
        );
        assert_eq!(
            frame_length(&b, 4096).unwrap_err(),
            Error::UnsupportedVersion(version)
        );
    }
}

#[test]
fn stray_bytes_after_the_last_avp_are_an_invalid_avp_length() {
    let mut b = message(|e| {
        e.u32(avp::RATING_GROUP, 1);
    })
    .to_vec();
    b.extend_from_slice(&[0; 4]);
    b[3] += 4;
    let m = Message::parse(&b).unwrap();
    let v: Vec<_> = m.avps().collect();
    assert_eq!(v.len(), 2);
    assert!(matches!(
        v[1],
        Err(Error::InvalidAvpLength { offset: 32, .. })
    ));
}

#[test]
fn frame_length_splits_back_to_back_messages() {
    let mut stream = BytesMut::new();
    common::cer(&mut stream);
    common::ccr_initial(&mut stream);
    common::ccr_update(&mut stream);
    let mut rest = &stream[..];
    let mut commands = Vec::new();
    while let Some(n) = frame_length(rest, 65536).unwrap() {
        if rest.len() < n {
            break;
        }
        let m = Message::parse(&rest[..n]).unwrap();
        commands.push(m.command_code());
        rest = &rest[n..];
    }
    assert!(rest.is_empty());
    assert_eq!(commands, [257, 272, 272]);
    // A partial header waits; a too-large declared length is refused.
    assert_eq!(frame_length(&stream[..3], 65536), Ok(None));
    assert!(frame_length(&stream, 64).is_err());
}

// ---- sample messages -------------------------------------------------------------

#[test]
fn sample_messages_decode_completely_with_typed_accessors() {
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    let m = Message::parse(&req).unwrap();
    let w = common::walk(&m, &common::local_type).unwrap();
    assert_eq!(w.unknown, 0);
    assert_eq!(w.depth, 3, "MSCC > USU > CC-Time");
    assert!(w.avps > 50, "{w:?}");
    assert_eq!(m.session_id(), Some(common::SESSION_ID));

    let mut ans = BytesMut::new();
    common::cca(&mut ans, &m);
    let a = Message::parse(&ans).unwrap();
    assert!(!a.is_request());
    assert_eq!(a.header().hop_by_hop, m.header().hop_by_hop);
    assert_eq!(a.session_id(), Some(common::SESSION_ID));
    assert_eq!(common::walk(&a, &common::local_type).unwrap().unknown, 0);

    for build in [common::cer, common::ccr_initial, common::thesis_ccr] {
        let mut b = BytesMut::new();
        build(&mut b);
        let m = Message::parse(&b).unwrap();
        assert_eq!(common::walk(&m, &common::local_type).unwrap().unknown, 0);
    }
    let mut t = BytesMut::new();
    common::thesis_ccr(&mut t);
    assert_eq!(Message::parse(&t).unwrap().avps().count(), 11);
}

#[test]
fn sample_formats_agree_with_the_builtin_dictionary() {
    for &(code, vendor, ty) in common::TYPES {
        assert_eq!(
            common::dict_type(code, vendor),
            Some(ty),
            "AVP {code}/{vendor}"
        );
    }
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    let m = Message::parse(&req).unwrap();
    let by_dict = common::walk(&m, &common::dict_type).unwrap();
    let by_table = common::walk(&m, &common::local_type).unwrap();
    assert_eq!(by_dict, by_table);
}

#[test]
fn redirect_uri_decodes_in_a_walk() {
    let buf = message(|e| {
        e.str(
            avp::REDIRECT_HOST,
            "aaa://ocs2.example.net:3869;transport=sctp;protocol=diameter",
        );
    });
    let m = Message::parse(&buf).unwrap();
    let w = common::walk(&m, &common::local_type).unwrap();
    assert_eq!((w.avps, w.unknown), (1, 0));
    let bad = message(|e| {
        e.str(avp::REDIRECT_HOST, "aaa://ocs2.example.net;transport=quic");
    });
    assert!(common::walk(&Message::parse(&bad).unwrap(), &common::local_type).is_err());
}
