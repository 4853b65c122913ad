//! Property tests of the codec.
//!
//! * Any message built from AVP definitions encodes, decodes to the same
//!   AVPs and values, and re-encodes from its decoded form to the same
//!   bytes.
//! * Any byte string fed to the decoder yields values or errors, never a
//!   panic; so do mutations of valid messages.
//!
//! Case counts are proptest's defaults; set `PROPTEST_CASES` to run more.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use bytes::BytesMut;
use gyro_diameter::avp::flags as avp_flags;
use gyro_diameter::codes::AvpId;
use gyro_diameter::dict::AvpDef;
use gyro_diameter::header::{frame_length, MAX_MESSAGE_LEN};
use gyro_diameter::types::{decode_value, Value};
use gyro_diameter::validate::{encode_error_answer, validate_answer, validate_request, Options};
use gyro_diameter::{Address, Avp, AvpType, DiameterTime, Dictionary, Encoder, Message};
use proptest::prelude::*;

// ---- AVP definitions ----------------------------------------------------------

/// What the strategies need to know about an AVP.
#[derive(Debug, Clone)]
struct Def {
    code: u32,
    vendor: u32,
    ty: AvpType,
    /// Flags to send (M as the definition wants it).
    flags: u8,
    /// Named values of an Enumerated AVP (empty: any Integer32).
    enums: Vec<i32>,
    /// Indexes into [`defs`] of the AVPs a Grouped AVP's grammar names.
    children: Vec<usize>,
    /// Whether the grammar allows other AVPs (`*[AVP]`, or no grammar).
    open: bool,
}

/// Every format, under a vendor nobody has: the dictionary does not use
/// every format (no floats), and these AVPs are unknown to validation.
const EXTRA_VENDOR: u32 = 0x00FF_FF01;
const EXTRA: &[AvpType] = &[
    AvpType::OctetString,
    AvpType::Integer32,
    AvpType::Integer64,
    AvpType::Unsigned32,
    AvpType::Unsigned64,
    AvpType::Float32,
    AvpType::Float64,
    AvpType::Grouped,
    AvpType::Address,
    AvpType::Time,
    AvpType::UTF8String,
    AvpType::DiameterIdentity,
    AvpType::DiameterURI,
    AvpType::Enumerated,
    AvpType::IPFilterRule,
];

/// Every AVP of the built-in dictionary, then one private AVP per format.
fn defs() -> &'static [Def] {
    static DEFS: OnceLock<Vec<Def>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let dict = Dictionary::builtin();
        let all: Vec<&AvpDef> = dict.avps().collect();
        let index_of = |code: u32, vendor: u32| {
            all.iter()
                .position(|d| d.code == code && d.vendor == vendor)
        };
        let mut v: Vec<Def> = all
            .iter()
            .map(|d| Def {
                code: d.code,
                vendor: d.vendor,
                ty: d.ty,
                flags: d.id().flags,
                enums: d.enum_values().map(|(v, _)| v).collect(),
                children: d.grammar.as_ref().map_or(Vec::new(), |g| {
                    g.rules
                        .iter()
                        .filter(|r| r.max > 0)
                        .filter_map(|r| index_of(r.code, r.vendor))
                        .collect()
                }),
                open: d.grammar.as_ref().is_none_or(|g| g.any_avp),
            })
            .collect();
        v.extend(EXTRA.iter().enumerate().map(|(i, &ty)| Def {
            code: i as u32 + 1,
            vendor: EXTRA_VENDOR,
            ty,
            flags: 0,
            enums: Vec::new(),
            children: Vec::new(),
            open: true,
        }));
        v
    })
}

fn def_of(code: u32, vendor: u32) -> Option<&'static Def> {
    defs().iter().find(|d| d.code == code && d.vendor == vendor)
}

fn type_of(code: u32, vendor: u32) -> Option<AvpType> {
    def_of(code, vendor).map(|d| d.ty)
}

// ---- the model --------------------------------------------------------------------

/// An owned AVP value, compared bit for bit (floats by their bits).
#[derive(Debug, Clone, PartialEq)]
enum Val {
    Octets(Vec<u8>),
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(u32),
    F64(u64),
    Group(Vec<ModelAvp>),
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    E164(String),
    OtherAddress(u16, Vec<u8>),
    Time(u32),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
struct ModelAvp {
    code: u32,
    vendor: u32,
    flags: u8,
    val: Val,
}

#[derive(Debug, Clone, PartialEq)]
struct ModelMessage {
    flags: u8,
    command_code: u32,
    application_id: u32,
    hop_by_hop: u32,
    end_to_end: u32,
    avps: Vec<ModelAvp>,
}

fn id_of(a: &ModelAvp) -> AvpId {
    AvpId {
        code: a.code,
        vendor: a.vendor,
        flags: a.flags,
    }
}

fn encode_avp(e: &mut Encoder<'_>, a: &ModelAvp) {
    let id = id_of(a);
    match &a.val {
        Val::Octets(b) => {
            e.octets(id, b);
        }
        Val::I32(v) => {
            e.i32(id, *v);
        }
        Val::I64(v) => {
            e.i64(id, *v);
        }
        Val::U32(v) => {
            e.u32(id, *v);
        }
        Val::U64(v) => {
            e.u64(id, *v);
        }
        Val::F32(bits) => {
            e.f32(id, f32::from_bits(*bits));
        }
        Val::F64(bits) => {
            e.f64(id, f64::from_bits(*bits));
        }
        Val::Group(children) => {
            let g = e.begin_group(id);
            for c in children {
                encode_avp(e, c);
            }
            e.end_group(g);
        }
        Val::Ipv4(ip) => {
            e.address(id, &Address::Ipv4(*ip));
        }
        Val::Ipv6(ip) => {
            e.address(id, &Address::Ipv6(*ip));
        }
        Val::E164(s) => {
            e.address(id, &Address::E164(s));
        }
        Val::OtherAddress(family, bytes) => {
            e.address(
                id,
                &Address::Other {
                    family: *family,
                    bytes,
                },
            );
        }
        Val::Time(t) => {
            e.time(id, DiameterTime(*t));
        }
        Val::Text(s) => {
            e.str(id, s);
        }
    }
}

fn encode_model(m: &ModelMessage) -> BytesMut {
    let mut buf = BytesMut::new();
    let mut e = Encoder::new(
        &mut buf,
        m.flags,
        m.command_code,
        m.application_id,
        m.hop_by_hop,
        m.end_to_end,
    );
    for a in &m.avps {
        encode_avp(&mut e, a);
    }
    e.finish().expect("generated messages are small");
    buf
}

/// Decodes an AVP into the model with `decode_value` and the definition's
/// format.
fn decode_avp(a: &Avp<'_>) -> Result<ModelAvp, TestCaseError> {
    let def = def_of(a.code(), a.vendor_id())
        .ok_or_else(|| TestCaseError::fail(format!("unknown AVP {a:?}")))?;
    let v = decode_value(def.ty, a.data())
        .map_err(|e| TestCaseError::fail(format!("{a:?} as {:?}: {e}", def.ty)))?;
    let val = match v {
        Value::OctetString(b) => Val::Octets(b.to_vec()),
        Value::Integer32(v) | Value::Enumerated(v) => Val::I32(v),
        Value::Integer64(v) => Val::I64(v),
        Value::Unsigned32(v) => Val::U32(v),
        Value::Unsigned64(v) => Val::U64(v),
        Value::Float32(v) => Val::F32(v.to_bits()),
        Value::Float64(v) => Val::F64(v.to_bits()),
        Value::Grouped => {
            let mut children = Vec::new();
            for c in a.grouped() {
                let c = c.map_err(|e| TestCaseError::fail(e.to_string()))?;
                children.push(decode_avp(&c)?);
            }
            Val::Group(children)
        }
        Value::Address(Address::Ipv4(ip)) => Val::Ipv4(ip),
        Value::Address(Address::Ipv6(ip)) => Val::Ipv6(ip),
        Value::Address(Address::E164(s)) => Val::E164(s.to_owned()),
        Value::Address(Address::Other { family, bytes }) => {
            Val::OtherAddress(family, bytes.to_vec())
        }
        Value::Time(t) => Val::Time(t.0),
        Value::UTF8String(s) | Value::DiameterIdentity(s) | Value::IPFilterRule(s) => {
            Val::Text(s.to_owned())
        }
        Value::DiameterURI(u) => Val::Text(u.to_string()),
    };
    Ok(ModelAvp {
        code: a.code(),
        vendor: a.vendor_id(),
        flags: a.flags(),
        val,
    })
}

/// Re-encodes a decoded AVP straight from the borrowed view and its typed
/// value, without going through the model.
fn reencode_avp(e: &mut Encoder<'_>, a: &Avp<'_>) {
    let id = AvpId {
        code: a.code(),
        vendor: a.vendor_id(),
        flags: a.flags(),
    };
    let ty = type_of(a.code(), a.vendor_id()).unwrap();
    match decode_value(ty, a.data()).unwrap() {
        Value::OctetString(b) => {
            e.octets(id, b);
        }
        Value::Integer32(v) | Value::Enumerated(v) => {
            e.i32(id, v);
        }
        Value::Integer64(v) => {
            e.i64(id, v);
        }
        Value::Unsigned32(v) => {
            e.u32(id, v);
        }
        Value::Unsigned64(v) => {
            e.u64(id, v);
        }
        Value::Float32(v) => {
            e.f32(id, v);
        }
        Value::Float64(v) => {
            e.f64(id, v);
        }
        Value::Grouped => {
            let g = e.begin_group(id);
            for c in a.grouped() {
                reencode_avp(e, &c.unwrap());
            }
            e.end_group(g);
        }
        Value::Address(addr) => {
            e.address(id, &addr);
        }
        Value::Time(t) => {
            e.time(id, t);
        }
        Value::UTF8String(s) | Value::DiameterIdentity(s) | Value::IPFilterRule(s) => {
            e.str(id, s);
        }
        Value::DiameterURI(u) => {
            e.str(id, &u.to_string());
        }
    }
}

// ---- strategies ----------------------------------------------------------------------

fn uri_strategy() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        "[a-zA-Z0-9-]{1,12}(\\.[a-zA-Z0-9-]{1,12}){0,3}",
        proptest::option::of(any::<u16>()),
        proptest::option::of(prop::sample::select(vec!["tcp", "sctp", "udp"])),
        proptest::option::of(prop::sample::select(vec!["diameter", "radius", "tacacs+"])),
    )
        .prop_map(|(secure, fqdn, port, transport, protocol)| {
            let mut s = format!("{}://{fqdn}", if secure { "aaas" } else { "aaa" });
            if let Some(p) = port {
                s += &format!(":{p}");
            }
            if let Some(t) = transport {
                s += &format!(";transport={t}");
            }
            if let Some(p) = protocol {
                s += &format!(";protocol={p}");
            }
            s
        })
}

fn address_strategy() -> impl Strategy<Value = Val> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|b| Val::Ipv4(Ipv4Addr::from(b))),
        any::<[u8; 16]>().prop_map(|b| Val::Ipv6(Ipv6Addr::from(b))),
        "[0-9]{1,15}".prop_map(Val::E164),
        (
            any::<u16>().prop_filter("a family with its own decoding", |f| ![1, 2, 8].contains(f)),
            prop::collection::vec(any::<u8>(), 0..20)
        )
            .prop_map(|(f, b)| Val::OtherAddress(f, b)),
    ]
}

fn value_strategy(def: &'static Def) -> BoxedStrategy<Val> {
    match def.ty {
        AvpType::OctetString => prop::collection::vec(any::<u8>(), 0..24)
            .prop_map(Val::Octets)
            .boxed(),
        AvpType::Integer32 => any::<i32>().prop_map(Val::I32).boxed(),
        AvpType::Enumerated if !def.enums.is_empty() => prop::sample::select(def.enums.clone())
            .prop_map(Val::I32)
            .boxed(),
        AvpType::Enumerated => any::<i32>().prop_map(Val::I32).boxed(),
        AvpType::Integer64 => any::<i64>().prop_map(Val::I64).boxed(),
        AvpType::Unsigned32 => any::<u32>().prop_map(Val::U32).boxed(),
        AvpType::Unsigned64 => any::<u64>().prop_map(Val::U64).boxed(),
        AvpType::Float32 => any::<u32>().prop_map(Val::F32).boxed(),
        AvpType::Float64 => any::<u64>().prop_map(Val::F64).boxed(),
        AvpType::Address => address_strategy().boxed(),
        AvpType::Time => any::<u32>().prop_map(Val::Time).boxed(),
        AvpType::UTF8String => ".{0,16}".prop_map(Val::Text).boxed(),
        AvpType::DiameterIdentity => "[!-~]{1,32}".prop_map(Val::Text).boxed(),
        AvpType::IPFilterRule => "[ -~]{0,40}".prop_map(Val::Text).boxed(),
        AvpType::DiameterURI => uri_strategy().prop_map(Val::Text).boxed(),
        AvpType::Grouped => unreachable!("groups are built by avp_of"),
    }
}

/// An AVP of this definition; a Grouped one gets up to four children from
/// its grammar (or any known AVP), `depth` levels deep at most.
fn avp_of(index: usize, depth: u32) -> BoxedStrategy<ModelAvp> {
    let def = &defs()[index];
    let val = if def.ty == AvpType::Grouped {
        if depth == 0 {
            Just(Val::Group(Vec::new())).boxed()
        } else {
            let named = || {
                prop::sample::select(def.children.clone())
                    .prop_flat_map(move |i| avp_of(i, depth - 1))
                    .boxed()
            };
            let child = match (def.children.is_empty(), def.open) {
                (true, _) => any_avp(depth - 1),
                (false, false) => named(),
                (false, true) => prop_oneof![3 => named(), 1 => any_avp(depth - 1)].boxed(),
            };
            prop::collection::vec(child, 0..4)
                .prop_map(Val::Group)
                .boxed()
        }
    } else {
        value_strategy(def)
    };
    val.prop_map(move |val| ModelAvp {
        code: def.code,
        vendor: def.vendor,
        flags: def.flags
            | if def.vendor != 0 {
                avp_flags::VENDOR
            } else {
                0
            },
        val,
    })
    .boxed()
}

fn any_avp(depth: u32) -> BoxedStrategy<ModelAvp> {
    (0..defs().len())
        .prop_flat_map(move |i| avp_of(i, depth))
        .boxed()
}

fn message_strategy() -> impl Strategy<Value = ModelMessage> {
    (
        prop::sample::select(vec![0x80u8, 0xc0, 0x40, 0x00, 0x20, 0x90]),
        0u32..=0x00FF_FFFF,
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec(any_avp(3), 0..10),
    )
        .prop_map(
            |(flags, command_code, application_id, hop_by_hop, end_to_end, avps)| ModelMessage {
                flags,
                command_code,
                application_id,
                hop_by_hop,
                end_to_end,
                avps,
            },
        )
}

// ---- never panic ---------------------------------------------------------------------

/// Validation in both modes and, when it fails, the error answer: built
/// for any input that has a header, and itself a parseable answer.
fn validate_everything(buf: &[u8]) {
    let dict = Dictionary::builtin();
    for opts in [Options::lenient(), Options::strict()] {
        if let Err(problem) = validate_request(dict, buf, &opts) {
            let _ = problem.to_string();
            let mut out = BytesMut::new();
            let answered =
                encode_error_answer(&mut out, buf, &problem, "ocs.example.net", "example.net");
            if buf.len() >= 20 {
                let n = answered.expect("an error answer for any request with a header");
                let answer = Message::parse(&out[..n]).expect("the error answer parses");
                assert!(!answer.is_request());
                assert_eq!(answer.header().is_error(), problem.is_protocol_error());
            }
        }
        let _ = validate_answer(dict, buf, &opts);
    }
}

/// Everything a receiver does with untrusted bytes; must return, not panic.
fn decode_everything(buf: &[u8]) {
    validate_everything(buf);
    let _ = frame_length(buf, MAX_MESSAGE_LEN);
    let _ = gyro_diameter::Header::parse(buf);
    if let Ok(m) = Message::parse(buf) {
        let _ = m.session_id();
        let _ = common::walk(&m, &type_of);
        // Every AVP, whatever its code, through every accessor.
        fn all(a: &Avp<'_>, depth: u32) {
            let _ = (a.i32(), a.i64(), a.u32(), a.u64(), a.f32(), a.f64());
            let _ = (a.utf8(), a.identity(), a.uri(), a.address(), a.time());
            let _ = (a.raw(), a.offset(), a.flags(), a.length());
            if depth < 8 {
                for c in a.grouped().flatten() {
                    all(&c, depth + 1);
                }
            }
        }
        for a in m.avps().flatten() {
            all(&a, 0);
        }
        let _ = format!("{m:?}");
    }
}

/// Rewrites the header's Message Length to the buffer's length, rounded down
/// to a multiple of 4, so that mutated messages get past `Message::parse`.
fn fix_length(buf: &mut Vec<u8>) {
    buf.truncate(buf.len() & !3);
    if buf.len() >= 20 {
        let n = buf.len() as u32;
        buf[1..4].copy_from_slice(&n.to_be_bytes()[1..]);
        buf[0] = 1;
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            prop::sample::select(vec![0u8, 1, 3, 4, 7, 8, 12, 0x7f, 0x80, 0xc0, 0xff])
        )
            .prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..12).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn mutate(buf: &mut Vec<u8>, m: &Mutation) {
    if buf.is_empty() {
        return;
    }
    let at = |i: usize| i % buf.len();
    match m {
        Mutation::Flip(i, b) => {
            let i = at(*i);
            buf[i] ^= b;
        }
        Mutation::Set(i, b) => {
            let i = at(*i);
            buf[i] = *b;
        }
        Mutation::Truncate(i) => buf.truncate(at(*i)),
        Mutation::Insert(i, b) => {
            let i = at(*i);
            buf.splice(i..i, b.iter().copied());
        }
        Mutation::Remove(i, n) => {
            let i = at(*i);
            let end = (i + n).min(buf.len());
            buf.drain(i..end);
        }
    }
}

// ---- properties ----------------------------------------------------------------------

proptest! {
    #[test]
    fn built_messages_decode_to_the_same_avps_and_reencode_to_the_same_bytes(
        model in message_strategy()
    ) {
        let bytes = encode_model(&model);
        prop_assert_eq!(bytes.len() % 4, 0);

        let m = Message::parse(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let h = m.header();
        prop_assert_eq!(h.length as usize, bytes.len());
        prop_assert_eq!(
            (h.flags, h.command_code, h.application_id, h.hop_by_hop, h.end_to_end),
            (model.flags, model.command_code, model.application_id, model.hop_by_hop, model.end_to_end)
        );
        let mut decoded = Vec::new();
        for a in m.avps() {
            let a = a.map_err(|e| TestCaseError::fail(e.to_string()))?;
            decoded.push(decode_avp(&a)?);
        }
        prop_assert_eq!(&decoded, &model.avps);

        // The typed walk agrees: nothing unknown, nothing invalid.
        let w = common::walk(&m, &type_of).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(w.unknown, 0);

        let mut again = BytesMut::new();
        let mut e = Encoder::new(
            &mut again, h.flags, h.command_code, h.application_id, h.hop_by_hop, h.end_to_end,
        );
        for a in m.avps() {
            reencode_avp(&mut e, &a.unwrap());
        }
        e.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&again[..], &bytes[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        decode_everything(&bytes);
        let mut framed = bytes.clone();
        fix_length(&mut framed);
        decode_everything(&framed);
    }

    #[test]
    fn mutated_messages_never_panic_the_decoder(
        model in message_strategy(),
        mutations in prop::collection::vec(mutation_strategy(), 1..6),
        refit in any::<bool>(),
    ) {
        let mut buf = encode_model(&model).to_vec();
        for m in &mutations {
            mutate(&mut buf, m);
        }
        if refit {
            fix_length(&mut buf);
        }
        decode_everything(&buf);
    }
}

fn samples() -> &'static [Vec<u8>] {
    static SAMPLES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        type Build = fn(&mut BytesMut) -> usize;
        let builds: [Build; 4] = [
            common::cer,
            common::ccr_initial,
            common::ccr_update,
            common::thesis_ccr,
        ];
        builds
            .iter()
            .map(|b| {
                let mut buf = BytesMut::new();
                b(&mut buf);
                buf.to_vec()
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn mutated_valid_requests_never_panic_validation(
        which in 0..4usize,
        mutations in prop::collection::vec(mutation_strategy(), 1..4),
        refit in any::<bool>(),
    ) {
        let mut buf = samples()[which].clone();
        prop_assert!(validate_request(Dictionary::builtin(), &buf, &Options::strict()).is_ok());
        for m in &mutations {
            mutate(&mut buf, m);
        }
        if refit {
            fix_length(&mut buf);
        }
        decode_everything(&buf);
    }
}

#[test]
fn every_format_is_covered_by_the_definitions() {
    for ty in EXTRA {
        assert!(defs().iter().any(|d| d.ty == *ty), "{ty:?}");
    }
    // The extra vendor really is unused by the dictionary, and the
    // dictionary's AVPs are all there.
    let dict = Dictionary::builtin();
    assert!(dict.avps().all(|d| d.vendor != EXTRA_VENDOR));
    assert_eq!(defs().len(), dict.avps().count() + EXTRA.len());
    // Grouped AVPs with a grammar get their children from it.
    let mscc = defs()
        .iter()
        .find(|d| d.code == 456 && d.vendor == 0)
        .unwrap();
    assert!(mscc.children.iter().any(|&i| defs()[i].code == 446));
}
