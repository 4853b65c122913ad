//! Validation of received messages against the [`Dictionary`], producing
//! the errors RFC 6733 section 7 prescribes, and the error answers built
//! from them.
//!
//! [`validate_request`] checks, in this order, and reports only the first
//! problem found (RFC 6733 section 7):
//!
//! 1. the header: version (5011), Message Length (5015), E bit set or R bit
//!    clear in a request, or a P bit that contradicts the command (3008);
//! 2. the command: unknown code (3001), not defined for the header's
//!    Application-Id (3007);
//! 3. the AVPs, in message order and recursively into Grouped AVPs against
//!    the command's request grammar: AVP lengths (5014; a top-level run
//!    that ends inside an AVP header is 5015), unknown AVPs with the M bit
//!    (5001), flag bits (3009), values that do not decode as the AVP's
//!    format or are not a listed enumerated value (5004), AVPs a grammar
//!    forbids (5008), too many occurrences (5009), contradicting AVPs
//!    (5007); then, per grammar, missing required AVPs (5005).
//!
//! Unknown AVPs without the M bit are skipped, as are their children.
//!
//! # 3009, not 5016
//!
//! An AVP whose flag bits contradict its definition is answered with 3009
//! DIAMETER_INVALID_AVP_BITS (E bit set, generic error answer), never with
//! 5016 DIAMETER_INVALID_AVP_BIT_COMBO. 3009 is the code RFC 6733 section
//! 7.1.3 gives for "flag bits ... inconsistent with the AVP's definition";
//! 5016 is kept for combinations a specific application forbids, and gyro
//! has none. Failed-AVP carries the offending AVP.
//!
//! # Lenient and strict mode
//!
//! [`Mode::Lenient`] (the default) accepts what real clients send and what
//! does no harm to a server that understands the message:
//!
//! * a known AVP whose M bit contradicts its definition (python-diameter
//!   sends Origin-Host and Origin-Realm without M; some gateways set M on
//!   AVPs defined without it). Strict: 3009.
//! * a known AVP whose deprecated P bit is set where its definition forbids
//!   it. Strict: 3009.
//! * a fixed-position AVP (`<Session-Id>`) somewhere else than its
//!   position (checklist A.10). Strict: 5008, Failed-AVP the misplaced AVP.
//! * a request without the P bit for a command whose definition requires
//!   it (CCR, RAR, STR, ASR). Strict: 3008. (A P bit on a command that must
//!   not have it, CER/DWR/DPR, is 3008 in both modes.)
//! * a known AVP with the M bit clear in a grammar that does not allow it
//!   is skipped. Strict: 5008 (with the M bit set it is 5008 in both modes).
//! * an Enumerated value not listed for a vendor-specific AVP (3GPP adds
//!   values release by release). Strict: 5004. Unlisted values of IETF
//!   AVPs (CC-Request-Type 7) are 5004 in both modes.
//! * a request for another node: a Destination-Host other than this
//!   server's Origin-Host, or a Destination-Realm other than its realm.
//!   Strict: 3002 and 3003 ([`check_destination`]).
//!
//! Not checked here because they are not grammar questions: the meaning of
//! values (Requested-Action in a session CCR, MSI = 0 with MSCC present,
//! Requested-Action missing from an EVENT CCR); the charging layer does.
//!
//! # Grammar details
//!
//! * `<x>` without a qualifier is required once, like `{x}`; leading fixed
//!   rules also fix the position.
//! * `*[AVP]` with any qualifier just allows other AVPs (known ones are
//!   still checked for flags and values).
//! * Exclusion groups: two members present give the group's conflict code
//!   (5007, Failed-AVP holding both AVPs; 5009 for Vendor-Specific-
//!   Application-Id per RFC 6733 section 6.11, Failed-AVP the second);
//!   an exactly-one group with no member gives 5005 for its first member.
//! * Grouped AVPs nest at most [`MAX_DEPTH`] deep; a deeper one is 5004.
//! * Children of opaque Grouped AVPs (Failed-AVP) and of Grouped AVPs whose
//!   children the dictionary does not describe (IMS-Information) are not
//!   checked.
//!
//! # Failed-AVP
//!
//! Errors inside Grouped AVPs record the offsets of the enclosing groups
//! ([`Parents`]); [`encode_error_answer`] nests the offending AVP in copies
//! of those groups' headers, as RFC 6733 section 7.5 describes. A missing
//! AVP (5005) is an example with zero-filled data of the minimum size of its
//! format; an AVP with a broken length (5014) that cannot be copied is its
//! header (with a corrected length) and a zero-filled minimum payload.
//!
//! # Cost
//!
//! Validating a valid message allocates nothing: occurrence counters are a
//! fixed array on the stack per grammar level, rule lookups use an index
//! built when the dictionary is loaded, and values are decoded in place.

use bytes::BytesMut;

use crate::avp::{self, flags as avp_flags, Avp, AvpIter, AVP_HEADER_LEN};
use crate::codes::{self, app, cmd, result, AvpId};
use crate::dict::{
    min_data_len, CommandLookup, Dictionary, Exclusive, Fast, FlagRule, Grammar, MAX_RULES,
};
use crate::encode::Encoder;
use crate::error::{Error, Result};
use crate::header::{flags, Header, HEADER_LEN};
use crate::message::Message;
use crate::types::{self, decode_value, AvpType};

/// Deepest nesting of Grouped AVPs that is validated.
pub const MAX_DEPTH: usize = 8;

/// Strictness of validation (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Mode {
    /// Accept the documented deviations real clients send.
    #[default]
    Lenient,
    /// Answer every deviation from the definitions.
    Strict,
}

/// Validation options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Options {
    /// Lenient (default) or strict.
    pub mode: Mode,
}

impl Options {
    /// Strict validation.
    pub fn strict() -> Options {
        Options { mode: Mode::Strict }
    }

    /// Lenient validation (the default).
    pub fn lenient() -> Options {
        Options {
            mode: Mode::Lenient,
        }
    }

    #[inline]
    fn strict_mode(&self) -> bool {
        self.mode == Mode::Strict
    }
}

/// Offsets (from the start of the message) of the Grouped AVPs enclosing an
/// offending AVP, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Parents {
    len: u8,
    offsets: [u32; MAX_DEPTH],
}

impl Parents {
    /// The offsets, outermost first (empty for a top-level AVP).
    pub fn offsets(&self) -> &[u32] {
        &self.offsets[..self.len as usize]
    }

    fn push(mut self, offset: usize) -> Parents {
        if (self.len as usize) < MAX_DEPTH {
            self.offsets[self.len as usize] = offset as u32;
            self.len += 1;
        }
        self
    }

    fn depth(&self) -> usize {
        self.len as usize
    }
}

/// An AVP built for Failed-AVP rather than copied: a header and zero-filled
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthAvp {
    /// AVP Code.
    pub code: u32,
    /// Vendor-Id (0 for none).
    pub vendor: u32,
    /// Flags (the V bit follows `vendor`).
    pub flags: u8,
    /// Number of zero bytes of data.
    pub data_len: usize,
}

/// What Failed-AVP carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offending<'a> {
    /// The received AVP, copied as it is.
    Received(Avp<'a>),
    /// Two received AVPs that contradict each other (5007).
    Pair(Avp<'a>, Avp<'a>),
    /// A built example (5005 missing AVP, 5014 unreadable length).
    Synthesized(SynthAvp),
}

/// The Failed-AVP of a [`Problem`]: the offending AVP(s) and the groups
/// enclosing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedAvp<'a> {
    /// The groups enclosing the offending AVP, outermost first.
    pub parents: Parents,
    /// The offending AVP(s).
    pub avp: Offending<'a>,
}

impl FailedAvp<'_> {
    /// Code of the (first) offending AVP.
    pub fn code(&self) -> u32 {
        match &self.avp {
            Offending::Received(a) | Offending::Pair(a, _) => a.code(),
            Offending::Synthesized(s) => s.code,
        }
    }

    /// Vendor of the (first) offending AVP.
    pub fn vendor(&self) -> u32 {
        match &self.avp {
            Offending::Received(a) | Offending::Pair(a, _) => a.vendor_id(),
            Offending::Synthesized(s) => s.vendor,
        }
    }
}

/// Why a message was rejected: the Result-Code, a short text for
/// Error-Message, and the Failed-AVP where RFC 6733 asks for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem<'a> {
    /// Result-Code to answer with.
    pub result_code: u32,
    /// Short description (sent as Error-Message).
    pub message: &'static str,
    /// The offending AVP, where the error has one.
    pub failed_avp: Option<FailedAvp<'a>>,
}

impl<'a> Problem<'a> {
    fn new(result_code: u32, message: &'static str) -> Self {
        Problem {
            result_code,
            message,
            failed_avp: None,
        }
    }

    fn avp(result_code: u32, message: &'static str, a: Avp<'a>, parents: Parents) -> Self {
        Problem {
            result_code,
            message,
            failed_avp: Some(FailedAvp {
                parents,
                avp: Offending::Received(a),
            }),
        }
    }

    fn synth(result_code: u32, message: &'static str, s: SynthAvp, parents: Parents) -> Self {
        Problem {
            result_code,
            message,
            failed_avp: Some(FailedAvp {
                parents,
                avp: Offending::Synthesized(s),
            }),
        }
    }

    /// True for 3xxx protocol errors: the answer has the E bit set.
    pub fn is_protocol_error(&self) -> bool {
        (3000..4000).contains(&self.result_code)
    }
}

impl std::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.result_code, self.message)?;
        if let Some(fa) = &self.failed_avp {
            write!(f, " (AVP {}", fa.code())?;
            if fa.vendor() != 0 {
                write!(f, ", vendor {}", fa.vendor())?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// Validates a request (one whole message in `buf`) against the dictionary.
/// On success returns the parsed message.
#[allow(clippy::result_large_err)] // returned once per bad message; boxing would allocate
pub fn validate_request<'a>(
    dict: &Dictionary,
    buf: &'a [u8],
    opts: &Options,
) -> Result<Message<'a>, Problem<'a>> {
    let msg = parse_header(buf)?;
    let h = msg.header();
    if !h.is_request() {
        return Err(Problem::new(
            result::INVALID_HDR_BITS,
            "R bit clear: not a request",
        ));
    }
    if h.is_error() {
        return Err(Problem::new(
            result::INVALID_HDR_BITS,
            "E bit set in a request",
        ));
    }
    let command = lookup(dict, h)?;
    match command.proxiable {
        FlagRule::MustNot if h.is_proxiable() => {
            return Err(Problem::new(
                result::INVALID_HDR_BITS,
                "P bit set on a command that must not be proxied",
            ))
        }
        FlagRule::Must if !h.is_proxiable() && opts.strict_mode() => {
            return Err(Problem::new(
                result::INVALID_HDR_BITS,
                "P bit clear on a proxiable command",
            ))
        }
        _ => {}
    }
    let v = Validator { dict, buf, opts };
    v.check(msg.avps(), &command.request, Parents::default(), true)?;
    Ok(msg)
}

/// Whether this node serves the Application-Id in the header of the
/// request `buf`: the base protocol's (0) and those in `served` (the ones
/// its CEA advertises). Any other is DIAMETER_APPLICATION_UNSUPPORTED
/// (3007, RFC 6733 section 7.1.3), checked before the command and its
/// AVPs as a header question: a node answers so for an application it
/// does not run even when its dictionary knows the command (Accounting,
/// 3). A buffer without a readable header passes: framing has judged it.
#[allow(clippy::result_large_err)] // returned once per bad message; boxing would allocate
pub fn check_application<'a>(buf: &[u8], served: &[u32]) -> Result<(), Problem<'a>> {
    match Header::parse(buf) {
        Ok(h) if h.application_id != app::COMMON && !served.contains(&h.application_id) => {
            Err(Problem::new(
                result::APPLICATION_UNSUPPORTED,
                "application not served by this node",
            ))
        }
        _ => Ok(()),
    }
}

/// Strict mode: whether a request that passed [`validate_request`] is
/// addressed to this node (`host`, `realm`), as RFC 6733 section 6.1
/// routes requests. A node that relays nothing cannot deliver one meant
/// for another: a Destination-Host other than `host` is
/// DIAMETER_UNABLE_TO_DELIVER (3002), a Destination-Realm other than
/// `realm` DIAMETER_REALM_NOT_SERVED (3003), each with the AVP as
/// Failed-AVP; names are compared without regard to case (DiameterIdentity).
/// Lenient mode accepts both, as most servers do: test clients and
/// gateways often send a default or a group realm.
#[allow(clippy::result_large_err)] // returned once per bad message; boxing would allocate
pub fn check_destination<'a>(
    msg: &Message<'a>,
    host: &str,
    realm: &str,
    opts: &Options,
) -> Result<(), Problem<'a>> {
    if !opts.strict_mode() {
        return Ok(());
    }
    let not = |a: &Avp<'a>, ours: &str| !a.data().eq_ignore_ascii_case(ours.as_bytes());
    for a in msg.avps() {
        let Ok(a) = a else { break };
        let is = |id: AvpId| (a.code(), a.vendor_id()) == (id.code, id.vendor);
        let (code, message) = if is(codes::avp::DESTINATION_HOST) && not(&a, host) {
            (
                result::UNABLE_TO_DELIVER,
                "Destination-Host is not this server",
            )
        } else if is(codes::avp::DESTINATION_REALM) && not(&a, realm) {
            (
                result::REALM_NOT_SERVED,
                "Destination-Realm is not served here",
            )
        } else {
            continue;
        };
        return Err(Problem::avp(code, message, a, Parents::default()));
    }
    Ok(())
}

/// Validates an answer (one whole message in `buf`): R bit clear, T bit
/// clear, a known command, and the AVPs against the command's answer
/// grammar, or the generic error answer grammar when the E bit is set.
#[allow(clippy::result_large_err)] // returned once per bad message; boxing would allocate
pub fn validate_answer<'a>(
    dict: &Dictionary,
    buf: &'a [u8],
    opts: &Options,
) -> Result<Message<'a>, Problem<'a>> {
    let msg = parse_header(buf)?;
    let h = msg.header();
    if h.is_request() {
        return Err(Problem::new(
            result::INVALID_HDR_BITS,
            "R bit set: not an answer",
        ));
    }
    if h.is_retransmit() {
        return Err(Problem::new(
            result::INVALID_HDR_BITS,
            "T bit set in an answer",
        ));
    }
    let command = lookup(dict, h)?;
    let grammar = if h.is_error() {
        dict.error_answer()
    } else {
        &command.answer
    };
    let v = Validator { dict, buf, opts };
    v.check(msg.avps(), grammar, Parents::default(), true)?;
    Ok(msg)
}

#[allow(clippy::result_large_err)]
fn parse_header(buf: &[u8]) -> Result<Message<'_>, Problem<'_>> {
    Message::parse(buf).map_err(|e| match e {
        Error::UnsupportedVersion(_) => {
            Problem::new(result::UNSUPPORTED_VERSION, "unsupported Diameter version")
        }
        _ => Problem::new(result::INVALID_MESSAGE_LENGTH, "invalid message length"),
    })
}

#[allow(clippy::result_large_err)]
fn lookup<'d, 'a>(
    dict: &'d Dictionary,
    h: &Header,
) -> Result<&'d crate::dict::CommandDef, Problem<'a>> {
    dict.command_for(h.command_code, h.application_id)
        .map_err(|e| match e {
            CommandLookup::UnknownCommand => {
                Problem::new(result::COMMAND_UNSUPPORTED, "command not supported")
            }
            CommandLookup::UnsupportedApplication => Problem::new(
                result::APPLICATION_UNSUPPORTED,
                "application not supported for this command",
            ),
        })
}

struct Validator<'d, 'a, 'o> {
    dict: &'d Dictionary,
    buf: &'a [u8],
    opts: &'o Options,
}

impl<'a> Validator<'_, 'a, '_> {
    /// Checks one run of AVPs (message body or Grouped AVP data) against a
    /// grammar.
    #[allow(clippy::result_large_err)]
    fn check(
        &self,
        iter: AvpIter<'a>,
        g: &Grammar,
        parents: Parents,
        top: bool,
    ) -> Result<(), Problem<'a>> {
        let strict = self.opts.strict_mode();
        let mut counts = [0u16; MAX_RULES];
        let start = iter.clone();
        for (this_pos, item) in (0u32..).zip(iter) {
            let a = match item {
                Ok(a) => a,
                Err(e) => return Err(self.length_problem(e, parents, top)),
            };
            if !strict && self.fast(&a, g, &mut counts, parents)? {
                continue;
            }
            self.full(a, g, &mut counts, this_pos, &start, parents, strict)?;
        }
        // Minimum occurrences, in grammar order.
        for i in g.required() {
            let rule = &g.rules[i];
            if u32::from(counts[i]) < rule.min {
                return Err(self.missing(rule.code, rule.vendor, parents));
            }
        }
        for x in g.exclusive.iter().filter(|x| x.required) {
            if x.rules.iter().all(|&j| counts[j] == 0) {
                let r = &g.rules[x.rules[0]];
                return Err(self.missing(r.code, r.vendor, parents));
            }
        }
        Ok(())
    }

    /// The full checks of one AVP, in the order RFC 6733 section 7 asks,
    /// for what the fast path does not settle. Out of line: the fast loop
    /// stays small (and its registers free) without the code that builds
    /// problems.
    #[inline(never)]
    #[allow(clippy::result_large_err, clippy::too_many_arguments)]
    fn full(
        &self,
        a: Avp<'a>,
        g: &Grammar,
        counts: &mut [u16; MAX_RULES],
        this_pos: u32,
        start: &AvpIter<'a>,
        parents: Parents,
        strict: bool,
    ) -> Result<(), Problem<'a>> {
        // One probe finds the grammar's rule and the definition of an
        // AVP the grammar names; any other is looked up by itself.
        let (rule_idx, def) = match g.lookup(a.code(), a.vendor_id()) {
            Some((i, d)) => (Some(i), Some(self.dict.avp_at(d))),
            None => (None, self.dict.avp(a.code(), a.vendor_id())),
        };
        let Some(def) = def else {
            if a.is_mandatory() {
                return Err(Problem::avp(
                    result::AVP_UNSUPPORTED,
                    "unknown AVP with the M bit set",
                    a,
                    parents,
                ));
            }
            return Ok(());
        };
        // Flag bits.
        let f = a.flags();
        let v_bad = f & avp_flags::VENDOR != 0 && a.vendor_id() == 0;
        let m_bad = || !def.m_bit.allows(f & avp_flags::MANDATORY != 0);
        let p_bad = || !def.p_bit.allows(f & avp_flags::PROTECTED != 0);
        if v_bad || (strict && (m_bad() || p_bad())) {
            return Err(Problem::avp(
                result::INVALID_AVP_BITS,
                "AVP flag bits contradict the AVP definition",
                a,
                parents,
            ));
        }
        // Grammar.
        match rule_idx {
            Some(i) => {
                let rule = &g.rules[i];
                if rule.max == 0 {
                    return Err(Problem::avp(
                        result::AVP_NOT_ALLOWED,
                        "AVP not allowed here",
                        a,
                        parents,
                    ));
                }
                if strict && rule.position.is_some_and(|p| p != this_pos) {
                    return Err(Problem::avp(
                        result::AVP_NOT_ALLOWED,
                        "AVP not in its fixed position",
                        a,
                        parents,
                    ));
                }
                counts[i] = counts[i].saturating_add(1);
                if u32::from(counts[i]) > rule.max {
                    return Err(Problem::avp(
                        result::AVP_OCCURS_TOO_MANY_TIMES,
                        "AVP occurs too many times",
                        a,
                        parents,
                    ));
                }
                // A rule in no exclusion group (most) skips the search.
                let in_group = |x: &&Exclusive| g.is_exclusive(i) && x.rules.contains(&i);
                for x in g.exclusive.iter().filter(in_group) {
                    let other = x.rules.iter().copied().find(|&j| j != i && counts[j] > 0);
                    if let Some(j) = other {
                        return Err(self.conflict(
                            start.clone(),
                            g,
                            j,
                            a,
                            x.conflict_code,
                            parents,
                        ));
                    }
                }
            }
            None if g.any_avp => {}
            None => {
                if strict || a.is_mandatory() {
                    return Err(Problem::avp(
                        result::AVP_NOT_ALLOWED,
                        "AVP not allowed here",
                        a,
                        parents,
                    ));
                }
                return Ok(());
            }
        }
        // Value.
        if def.ty == AvpType::Grouped {
            if def.opaque {
                return Ok(());
            }
            if parents.depth() >= MAX_DEPTH {
                return Err(Problem::avp(
                    result::INVALID_AVP_VALUE,
                    "Grouped AVPs nested too deep",
                    a,
                    parents,
                ));
            }
            // A Grouped AVP whose children the dictionary does not
            // describe is accepted as it is, like an opaque one.
            if let Some(cg) = &def.grammar {
                self.check(a.grouped(), cg, parents.push(a.offset()), false)?;
            }
            return Ok(());
        }
        let value = match check_value(def.ty, a.data()) {
            Ok(v) => v,
            Err(Error::InvalidValue { length: true, .. }) => {
                return Err(Problem::avp(
                    result::INVALID_AVP_LENGTH,
                    "AVP data length wrong for its format",
                    a,
                    parents,
                ))
            }
            Err(_) => {
                return Err(Problem::avp(
                    result::INVALID_AVP_VALUE,
                    "AVP value invalid for its format",
                    a,
                    parents,
                ))
            }
        };
        if def.ty == AvpType::Enumerated
            && def.has_enum_values()
            && value.and_then(|n| def.enum_name(n as i32)).is_none()
            && (strict || def.vendor == 0)
        {
            return Err(Problem::avp(
                result::INVALID_AVP_VALUE,
                "unknown enumerated value",
                a,
                parents,
            ));
        }
        if let Some(want) = rule_idx.and_then(|i| g.rules[i].value) {
            if value != Some(want) {
                return Err(Problem::avp(
                    result::INVALID_AVP_VALUE,
                    "AVP value not the one the command requires",
                    a,
                    parents,
                ));
            }
        }
        Ok(())
    }

    /// The lenient fast path for an AVP the grammar names (see
    /// [`Fast`]): true when the AVP passed every check it takes, with its
    /// occurrence counted (and a Grouped AVP's children checked). False,
    /// with nothing counted, leaves the AVP to the full path, which checks
    /// it again from the start and reports the first problem in order.
    #[inline(always)]
    #[allow(clippy::result_large_err)]
    fn fast(
        &self,
        a: &Avp<'a>,
        g: &Grammar,
        counts: &mut [u16; MAX_RULES],
        parents: Parents,
    ) -> Result<bool, Problem<'a>> {
        let Some(f) = g.fast(a.code(), a.vendor_id()) else {
            return Ok(false);
        };
        // A V bit with Vendor-Id 0 is 3009; the occurrence limit is
        // checked by the full path when this one would exceed it.
        let v_bad = a.flags() & avp_flags::VENDOR != 0 && a.vendor_id() == 0;
        let Some(count) = counts.get_mut(f.rule) else {
            return Ok(false);
        };
        if v_bad || *count >= f.max {
            return Ok(false);
        }
        let data = a.data();
        let ok = match f.fast {
            Fast::Fixed4 => data.len() == 4,
            Fast::Fixed8 => data.len() == 8,
            Fast::Octets => true,
            Fast::Ascii => data.is_ascii(),
            Fast::Identity => types::check_identity(data).is_ok(),
            Fast::Enumerated => match <[u8; 4]>::try_from(data) {
                Ok(b) => self
                    .dict
                    .avp_at(f.def)
                    .enum_name(i32::from_be_bytes(b))
                    .is_some(),
                Err(_) => false,
            },
            Fast::Grouped => parents.depth() < MAX_DEPTH,
            Fast::Slow => false,
        };
        if !ok {
            return Ok(false);
        }
        *count += 1;
        if f.fast == Fast::Grouped {
            let def = self.dict.avp_at(f.def);
            if !def.opaque {
                if let Some(cg) = &def.grammar {
                    self.check(a.grouped(), cg, parents.push(a.offset()), false)?;
                }
            }
        }
        Ok(true)
    }

    fn missing(&self, code: u32, vendor: u32, parents: Parents) -> Problem<'a> {
        let (flags, data_len) = match self.dict.avp(code, vendor) {
            Some(d) => (d.id().flags, d.min_data_len()),
            None => (avp_flags::MANDATORY, 0),
        };
        Problem::synth(
            result::MISSING_AVP,
            "required AVP missing",
            SynthAvp {
                code,
                vendor,
                flags,
                data_len,
            },
            parents,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn conflict(
        &self,
        start: AvpIter<'a>,
        g: &Grammar,
        j: usize,
        second: Avp<'a>,
        code: u32,
        parents: Parents,
    ) -> Problem<'a> {
        let r = &g.rules[j];
        let first = start
            .filter_map(|x| x.ok())
            .find(|x| x.code() == r.code && x.vendor_id() == r.vendor);
        match first {
            Some(first) if code == result::CONTRADICTING_AVPS => Problem {
                result_code: code,
                message: "AVPs contradict each other",
                failed_avp: Some(FailedAvp {
                    parents,
                    avp: Offending::Pair(first, second),
                }),
            },
            _ => Problem::avp(code, "AVPs contradict each other", second, parents),
        }
    }

    fn length_problem(&self, e: Error, parents: Parents, top: bool) -> Problem<'a> {
        let Error::InvalidAvpLength {
            offset,
            code,
            vendor,
            flags,
            length,
        } = e
        else {
            return Problem::new(result::INVALID_AVP_LENGTH, "invalid AVP length");
        };
        let (mut code, mut flags) = (code, flags);
        if code == 0 && length == 0 {
            // Fewer than 8 bytes were left: the AVP header itself is cut.
            // At the top level the message length does not match its AVPs.
            if top {
                return Problem::new(
                    result::INVALID_MESSAGE_LENGTH,
                    "message length does not match its AVPs",
                );
            }
            let mut h = [0u8; AVP_HEADER_LEN];
            if let Some(rest) = self.buf.get(offset..) {
                let n = rest.len().min(AVP_HEADER_LEN);
                h[..n].copy_from_slice(&rest[..n]);
            }
            code = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
            flags = h[4];
        }
        let data_len = self
            .dict
            .avp(code, vendor)
            .map_or(0, |d| min_data_len(d.ty));
        Problem::synth(
            result::INVALID_AVP_LENGTH,
            "invalid AVP length",
            SynthAvp {
                code,
                vendor,
                flags: flags & !avp_flags::VENDOR,
                data_len,
            },
            parents,
        )
    }
}

/// Checks that `data` decodes as format `ty` (the errors of
/// [`decode_value`]) and returns its value when it is an integer that fits
/// an `i64`, for the checks of enumerated values and of rules that fix the
/// value. Unlike [`decode_value`] it builds no [`Value`](types::Value): texts are only
/// checked.
fn check_value(ty: AvpType, data: &[u8]) -> Result<Option<i64>> {
    Ok(match ty {
        AvpType::Integer32 | AvpType::Enumerated => Some(i64::from(types::decode_i32(data)?)),
        AvpType::Integer64 => Some(types::decode_i64(data)?),
        AvpType::Unsigned32 => Some(i64::from(types::decode_u32(data)?)),
        AvpType::Unsigned64 => i64::try_from(types::decode_u64(data)?).ok(),
        // ASCII is valid UTF-8; the word-at-a-time ASCII check settles the
        // common case before the full decoder runs.
        AvpType::UTF8String if data.is_ascii() => None,
        AvpType::DiameterIdentity => {
            types::check_identity(data)?;
            None
        }
        _ => {
            decode_value(ty, data)?;
            None
        }
    })
}

/// Builds the error answer for a request that failed validation, appending
/// it to `buf`, and returns its length.
///
/// As RFC 6733 sections 6.2 and 7 (checklist B.10, B.11) say: same Command
/// Code, Application-Id, Hop-by-Hop and End-to-End identifiers; R and T
/// cleared, P copied, E set for 3xxx and clear otherwise; the request's
/// Session-Id first (when it can be read); Origin-Host, Origin-Realm,
/// Result-Code; for an error on a CCR, Auth-Application-Id 4 (what the
/// header says, whatever the request's AVP said, or if it had none) and
/// the request's CC-Request-Type and CC-Request-Number when they can be
/// read (a non-3xxx answer follows the CCA grammar, which requires them; a
/// 3xxx answer follows the generic error grammar, whose `*[AVP]` allows
/// them, and a client matches the answer to its request by them either
/// way); the AVPs repeated from the request are written with the flags
/// their definitions prescribe ([`Encoder::echo`]), not the sender's;
/// Error-Message (M clear); Failed-AVP
/// (nested in copies of the enclosing groups' headers); and the request's
/// Proxy-Info AVPs in order.
///
/// Only the first 20 bytes must be a header: this works for requests with a
/// broken version or length (5011, 5015). AVPs are looked for as far as
/// they can be read. Callers must not answer answers.
pub fn encode_error_answer(
    buf: &mut BytesMut,
    request: &[u8],
    problem: &Problem<'_>,
    origin_host: &str,
    origin_realm: &str,
) -> Result<usize> {
    encode_error_answer_with(buf, request, problem, origin_host, origin_realm, |_| {})
}

/// [`encode_error_answer`] with more AVPs, written by `more` after the
/// Result-Code: what the command's own answer grammar requires beyond the
/// generic one (a CEA's capabilities).
pub fn encode_error_answer_with(
    buf: &mut BytesMut,
    request: &[u8],
    problem: &Problem<'_>,
    origin_host: &str,
    origin_realm: &str,
    more: impl FnOnce(&mut Encoder<'_>),
) -> Result<usize> {
    let h = Header::parse(request)?;
    let e_bit = problem.is_protocol_error();
    let f = (h.flags & flags::PROXIABLE) | if e_bit { flags::ERROR } else { 0 };
    let end = (h.length as usize).clamp(HEADER_LEN, request.len());
    let body = AvpIter::new(&request[HEADER_LEN..end], HEADER_LEN);
    let mut e = Encoder::new(
        buf,
        f,
        h.command_code,
        h.application_id,
        h.hop_by_hop,
        h.end_to_end,
    );
    if let Some(sid) = avp::find(body.clone(), codes::avp::SESSION_ID.code, 0) {
        e.echo(codes::avp::SESSION_ID, &sid);
    }
    e.str(codes::avp::ORIGIN_HOST, origin_host);
    e.str(codes::avp::ORIGIN_REALM, origin_realm);
    e.u32(codes::avp::RESULT_CODE, problem.result_code);
    more(&mut e);
    if h.command_code == cmd::CREDIT_CONTROL && h.application_id == app::CREDIT_CONTROL {
        e.u32(codes::avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
        for id in [codes::avp::CC_REQUEST_TYPE, codes::avp::CC_REQUEST_NUMBER] {
            if let Some(a) = avp::find(body.clone(), id.code, 0) {
                if a.data().len() == 4 {
                    e.echo(id, &a);
                }
            }
        }
    }
    if !problem.message.is_empty() {
        e.str(codes::avp::ERROR_MESSAGE, problem.message);
    }
    if let Some(fa) = &problem.failed_avp {
        let g = e.begin_group(codes::avp::FAILED_AVP);
        write_nested(&mut e, request, fa.parents.offsets(), &fa.avp);
        e.end_group(g);
    }
    for a in body.map_while(|x| x.ok()) {
        if a.code() == codes::avp::PROXY_INFO.code && a.vendor_id() == 0 {
            e.raw_avp(&a);
        }
    }
    e.finish()
}

fn write_nested(e: &mut Encoder<'_>, request: &[u8], parents: &[u32], avp: &Offending<'_>) {
    if let [first, rest @ ..] = parents {
        let at = *first as usize;
        let mut hdr = [0u8; 12];
        if let Some(src) = request.get(at..) {
            let n = src.len().min(12);
            hdr[..n].copy_from_slice(&src[..n]);
        }
        let code = u32::from_be_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let fl = hdr[4];
        let vendor = if fl & avp_flags::VENDOR != 0 {
            u32::from_be_bytes([hdr[8], hdr[9], hdr[10], hdr[11]])
        } else {
            0
        };
        let g = e.begin_group(AvpId {
            code,
            vendor,
            flags: fl & (avp_flags::MANDATORY | avp_flags::PROTECTED),
        });
        write_nested(e, request, rest, avp);
        e.end_group(g);
        return;
    }
    match avp {
        Offending::Received(a) => {
            e.raw_avp(a);
        }
        Offending::Pair(a, b) => {
            e.raw_avp(a);
            e.raw_avp(b);
        }
        Offending::Synthesized(s) => {
            const ZEROS: [u8; 16] = [0; 16];
            e.octets(
                AvpId {
                    code: s.code,
                    vendor: s.vendor,
                    flags: s.flags & !avp_flags::VENDOR,
                },
                &ZEROS[..s.data_len.min(16)],
            );
        }
    }
}
