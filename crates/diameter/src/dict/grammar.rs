//! Grammars (RFC 6733 section 3.2): the rule syntax, the compiled
//! [`Grammar`] of a command or Grouped AVP with its lookup index, and the
//! compilation of a grammar's text with names resolved to codes.

use super::schema::GrammarSrc;
use super::{key, Dictionary};
use crate::types::AvpType;

/// Most rules one grammar may have: the validator keeps one occurrence
/// counter per rule on the stack.
pub const MAX_RULES: usize = 128;

/// How a grammar element is written in RFC 6733 section 3.2 ABNF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// `<x>`: fixed position (leading fixed rules must come first, in order).
    Fixed,
    /// `{x}`: required.
    Required,
    /// `[x]`: optional.
    Optional,
}

/// Maximum occurrences meaning "no limit".
pub const UNBOUNDED: u32 = u32::MAX;

/// One element of a grammar.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The AVP's name.
    pub name: String,
    /// The AVP's code.
    pub code: u32,
    /// The AVP's vendor.
    pub vendor: u32,
    /// Fixed, required or optional.
    pub kind: RuleKind,
    /// Minimum occurrences.
    pub min: u32,
    /// Maximum occurrences ([`UNBOUNDED`] for no limit; 0 means the AVP
    /// must not appear).
    pub max: u32,
    /// For leading fixed rules: the position the AVP must have.
    pub position: Option<u32>,
    /// A value the AVP must have (`{Auth-Application-Id = 4}`), compared
    /// with the decoded integer value.
    pub value: Option<i64>,
}

/// A set of AVPs that contradict each other when more than one is present.
#[derive(Debug, Clone, PartialEq)]
pub struct Exclusive {
    /// Indices into [`Grammar::rules`].
    pub rules: Vec<usize>,
    /// When true, exactly one of them must be present (none is 5005).
    pub required: bool,
    /// Result-Code when more than one is present (5007 unless the data says
    /// otherwise).
    pub conflict_code: u32,
}

/// A command's or Grouped AVP's grammar (RFC 6733 section 3.2).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Grammar {
    /// The rules, in the order written.
    pub rules: Vec<Rule>,
    /// Whether `*[AVP]` appears: AVPs not named by a rule are allowed.
    pub any_avp: bool,
    /// Exclusion groups (5007 when violated, see [`Exclusive`]).
    pub exclusive: Vec<Exclusive>,
    /// (code, vendor) key -> rule index and AVP definition.
    index: RuleIndex,
    /// Indexes of the rules with a minimum, in grammar order.
    required: Vec<u16>,
    /// Bit `i` set: rule `i` belongs to an exclusion group.
    exclusive_rules: u128,
}

/// An open-addressing table (linear probing) from an AVP's (code, vendor)
/// key to its rule and its definition: one or two probes per AVP of every
/// request validated, where a binary search over a command's ~50 rules took
/// six unpredictable branches, and the definition needs no second lookup in
/// the dictionary's hash map.
#[derive(Debug, Clone, PartialEq, Default)]
struct RuleIndex {
    /// A power of two, at least twice the number of rules.
    slots: Vec<Slot>,
}

/// One slot of a [`RuleIndex`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct Slot {
    key: u64,
    /// The AVP's definition: its index in the dictionary.
    def: u32,
    /// [`EMPTY`] marks a free slot.
    rule: u8,
    /// The rule's maximum, at most 255 (a lower bound of the real one).
    max: u8,
    /// How the validator's fast path checks the AVP.
    fast: Fast,
}

const EMPTY: u8 = u8::MAX;

/// How the validator's lenient fast path checks an AVP a grammar names:
/// the checks of its definition and rule that remain once the M and P bits
/// (lenient), the fixed position (lenient) and the value a rule fixes
/// (none here) are out of the question. Anything else ([`Fast::Slow`],
/// or a check that fails) goes through the full path, which finds and
/// reports the problem as before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Fast {
    /// Only the full path: a rule that fixes a value, belongs to an
    /// exclusion group or allows no occurrence, or a format whose check is
    /// not simple (Address, DiameterURI, IPFilterRule).
    Slow,
    /// Exactly 4 bytes (Integer32, Unsigned32, Float32, Time, and
    /// Enumerated without listed values or, lenient, of a vendor).
    Fixed4,
    /// Exactly 8 bytes (Integer64, Unsigned64, Float64).
    Fixed8,
    /// Any bytes (OctetString).
    Octets,
    /// ASCII text (UTF8String; other text takes the full path).
    Ascii,
    /// DiameterIdentity.
    Identity,
    /// An IETF Enumerated with listed values: 4 bytes and a listed value.
    Enumerated,
    /// Grouped: its children are checked by its own grammar.
    Grouped,
}

/// A rule's fast-path facts, from [`Grammar::fast`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastRule {
    /// Index of the rule.
    pub rule: usize,
    /// Index of the AVP's definition in the dictionary.
    pub def: u32,
    /// The rule's maximum occurrences, at most 255.
    pub max: u16,
    /// How to check it.
    pub fast: Fast,
}

impl RuleIndex {
    /// `entries`: each rule's (key, definition index), in rule order.
    fn build(entries: impl ExactSizeIterator<Item = (u64, u32)>) -> RuleIndex {
        let size = (entries.len() * 2).next_power_of_two().max(8);
        let free = Slot {
            key: 0,
            def: 0,
            rule: EMPTY,
            max: 0,
            fast: Fast::Slow,
        };
        let mut slots = vec![free; size];
        for (rule, (k, def)) in entries.enumerate() {
            let mut i = Self::home(k, size);
            while slots[i].rule != EMPTY && slots[i].key != k {
                i = (i + 1) & (size - 1);
            }
            if slots[i].rule == EMPTY {
                slots[i] = Slot {
                    key: k,
                    def,
                    rule: rule as u8,
                    max: 0,
                    fast: Fast::Slow,
                };
            }
        }
        RuleIndex { slots }
    }

    #[inline]
    fn home(k: u64, size: usize) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & (size - 1)
    }

    #[inline]
    fn get(&self, k: u64) -> Option<&Slot> {
        let size = self.slots.len();
        if size == 0 {
            return None;
        }
        let mut i = Self::home(k, size);
        loop {
            let slot = &self.slots[i];
            if slot.rule == EMPTY {
                return None;
            }
            if slot.key == k {
                return Some(slot);
            }
            i = (i + 1) & (size - 1);
        }
    }
}

impl Grammar {
    /// The index of the rule for this AVP, if the grammar names it.
    #[inline]
    pub fn rule_index(&self, code: u32, vendor: u32) -> Option<usize> {
        self.index.get(key(code, vendor)).map(|s| s.rule as usize)
    }

    /// The fast-path facts of the rule for this AVP, if the grammar names
    /// it and it has a fast path (see [`Fast`]): one probe.
    #[inline]
    pub(crate) fn fast(&self, code: u32, vendor: u32) -> Option<FastRule> {
        self.index
            .get(key(code, vendor))
            .filter(|s| s.fast != Fast::Slow)
            .map(|s| FastRule {
                rule: s.rule as usize,
                def: s.def,
                max: u16::from(s.max),
                fast: s.fast,
            })
    }

    /// The index of the rule for this AVP and the index of the AVP's
    /// definition in the dictionary that compiled the grammar
    /// ([`Dictionary::avp_at`]), if the grammar names it: one probe.
    #[inline]
    pub(crate) fn lookup(&self, code: u32, vendor: u32) -> Option<(usize, u32)> {
        self.index
            .get(key(code, vendor))
            .map(|s| (s.rule as usize, s.def))
    }

    /// Whether rule `i` belongs to an exclusion group.
    #[inline]
    pub(crate) fn is_exclusive(&self, i: usize) -> bool {
        i < 128 && self.exclusive_rules & (1u128 << i) != 0
    }

    /// The indexes of the rules that ask for at least one occurrence, in
    /// grammar order.
    #[inline]
    pub fn required(&self) -> impl Iterator<Item = usize> + '_ {
        self.required.iter().map(|&i| i as usize)
    }

    /// The rule for this AVP, if the grammar names it.
    pub fn rule(&self, code: u32, vendor: u32) -> Option<&Rule> {
        self.rule_index(code, vendor).map(|i| &self.rules[i])
    }
}

impl Dictionary {
    /// Compiles one grammar from its source (names resolved to codes).
    pub(super) fn compile(&self, src: &GrammarSrc) -> Result<Grammar, String> {
        let mut g = Grammar::default();
        let mut defs = Vec::new();
        let mut leading_fixed = true;
        for text in &src.rules {
            let p = parse_rule(text)?;
            if p.name == "AVP" {
                if p.value.is_some() {
                    return Err(format!("{text}: AVP takes no value"));
                }
                g.any_avp = true;
                continue;
            }
            let def_index = self
                .avp_index(&p.name)
                .ok_or_else(|| format!("{text}: unknown AVP {}", p.name))?;
            let def = self.avp_at(def_index);
            defs.push(def_index);
            if g.rule_index(def.code, def.vendor).is_some()
                || g.rules
                    .iter()
                    .any(|r| r.code == def.code && r.vendor == def.vendor)
            {
                return Err(format!("{} appears twice", p.name));
            }
            let value = match &p.value {
                None => None,
                Some(v) => Some(match v.parse::<i64>() {
                    Ok(n) => n,
                    Err(_) => i64::from(
                        def.enum_value(v)
                            .ok_or_else(|| format!("{text}: {v} is not a value of {}", def.name))?,
                    ),
                }),
            };
            let position = if p.kind == RuleKind::Fixed && leading_fixed {
                Some(g.rules.len() as u32)
            } else {
                leading_fixed = false;
                None
            };
            g.rules.push(Rule {
                name: def.name.clone(),
                code: def.code,
                vendor: def.vendor,
                kind: p.kind,
                min: p.min,
                max: p.max,
                position,
                value,
            });
        }
        if g.rules.len() > MAX_RULES {
            return Err(format!("more than {MAX_RULES} rules"));
        }
        g.index = RuleIndex::build(
            g.rules
                .iter()
                .zip(defs)
                .map(|(r, def)| (key(r.code, r.vendor), def)),
        );
        g.required = (0..g.rules.len() as u16)
            .filter(|&i| g.rules[i as usize].min > 0)
            .collect();
        for x in &src.exclusive {
            // (the fast path facts are set below, once the groups are known)
            let mut rules = Vec::new();
            for name in &x.avps {
                let def = self
                    .avp_by_name(name)
                    .ok_or_else(|| format!("exclusive: unknown AVP {name}"))?;
                let i = g
                    .rule_index(def.code, def.vendor)
                    .ok_or_else(|| format!("exclusive: {name} has no rule in this grammar"))?;
                rules.push(i);
            }
            if rules.len() < 2 {
                return Err("exclusive: name at least two AVPs".into());
            }
            for &i in &rules {
                g.exclusive_rules |= 1u128 << i;
            }
            g.exclusive.push(Exclusive {
                rules,
                required: x.required,
                conflict_code: x.code.unwrap_or(crate::codes::result::CONTRADICTING_AVPS),
            });
        }
        for slot in g.index.slots.iter_mut().filter(|s| s.rule != EMPTY) {
            let i = slot.rule as usize;
            let rule = &g.rules[i];
            let def = self.avp_at(slot.def);
            slot.max = rule.max.min(255) as u8;
            slot.fast = if rule.value.is_some() || g.exclusive_rules & (1u128 << i) != 0 {
                Fast::Slow
            } else {
                match def.ty {
                    AvpType::Integer32 | AvpType::Unsigned32 | AvpType::Float32 | AvpType::Time => {
                        Fast::Fixed4
                    }
                    AvpType::Enumerated if def.has_enum_values() && def.vendor == 0 => {
                        Fast::Enumerated
                    }
                    AvpType::Enumerated => Fast::Fixed4,
                    AvpType::Integer64 | AvpType::Unsigned64 | AvpType::Float64 => Fast::Fixed8,
                    AvpType::OctetString => Fast::Octets,
                    AvpType::UTF8String => Fast::Ascii,
                    AvpType::DiameterIdentity => Fast::Identity,
                    AvpType::Grouped => Fast::Grouped,
                    AvpType::Address | AvpType::DiameterURI | AvpType::IPFilterRule => Fast::Slow,
                }
            };
        }
        Ok(g)
    }
}

struct ParsedRule {
    name: String,
    kind: RuleKind,
    min: u32,
    max: u32,
    value: Option<String>,
}

/// Parses one ABNF element: `[min]*[max]` qualifier, then `<x>`, `{x}` or
/// `[x]`, where x is a name optionally followed by `= value`.
fn parse_rule(text: &str) -> Result<ParsedRule, String> {
    let t = text.trim();
    let open = t
        .find(['<', '{', '['])
        .ok_or_else(|| format!("{text:?}: expected <x>, {{x}} or [x]"))?;
    let (qual, rest) = t.split_at(open);
    let qual = qual.trim();
    let (kind, close) = match rest.as_bytes()[0] {
        b'<' => (RuleKind::Fixed, '>'),
        b'{' => (RuleKind::Required, '}'),
        _ => (RuleKind::Optional, ']'),
    };
    let inner = rest[1..]
        .strip_suffix(close)
        .ok_or_else(|| format!("{text:?}: missing {close:?}"))?;
    let (name, value) = match inner.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim().to_string())),
        None => (inner.trim(), None),
    };
    if name.is_empty() {
        return Err(format!("{text:?}: empty name"));
    }
    let num = |s: &str| -> Result<Option<u32>, String> {
        let s = s.trim();
        if s.is_empty() {
            Ok(None)
        } else {
            s.parse()
                .map(Some)
                .map_err(|_| format!("{text:?}: bad qualifier {s:?}"))
        }
    };
    let default_min = u32::from(kind != RuleKind::Optional);
    let (min, max) = if qual.is_empty() {
        (default_min, 1)
    } else {
        let (lo, hi) = qual
            .split_once('*')
            .ok_or_else(|| format!("{text:?}: qualifier must contain '*'"))?;
        let min = num(lo)?.unwrap_or(if kind == RuleKind::Required { 1 } else { 0 });
        let max = num(hi)?.unwrap_or(UNBOUNDED);
        (min, max)
    };
    if min > max {
        return Err(format!("{text:?}: min above max"));
    }
    Ok(ParsedRule {
        name: name.to_string(),
        kind,
        min,
        max,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::Dictionary;

    #[test]
    fn ccr_grammar_follows_rfc_8506_and_ro() {
        let g = &Dictionary::builtin().command_for(272, 4).unwrap().request;
        let sid = g.rule(263, 0).unwrap();
        assert_eq!(
            (sid.kind, sid.position, sid.min, sid.max),
            (RuleKind::Fixed, Some(0), 1, 1)
        );
        let app = g.rule(258, 0).unwrap();
        assert_eq!((app.kind, app.value), (RuleKind::Required, Some(4)));
        let sub = g.rule(443, 0).unwrap();
        assert_eq!((sub.min, sub.max), (0, UNBOUNDED));
        assert_eq!(g.rule(455, 0).unwrap().max, 1);
        assert!(g.rule(873, 10415).is_some() && g.rule(2055, 10415).is_some());
        assert!(g.any_avp);
        let mscc = Dictionary::builtin()
            .avp(456, 0)
            .unwrap()
            .grammar
            .as_ref()
            .unwrap();
        assert!(mscc.rule(872, 10415).is_some() && mscc.rule(871, 10415).is_some());
        let cer = &Dictionary::builtin().command(257).unwrap().request;
        assert_eq!(cer.rule(257, 0).unwrap().min, 1);
        assert_eq!(cer.rule(257, 0).unwrap().max, UNBOUNDED);
    }

    #[test]
    fn rule_syntax() {
        let r = parse_rule("1*{Host-IP-Address}").unwrap();
        assert_eq!((r.kind, r.min, r.max), (RuleKind::Required, 1, UNBOUNDED));
        let r = parse_rule("*2[X]").unwrap();
        assert_eq!((r.kind, r.min, r.max), (RuleKind::Optional, 0, 2));
        let r = parse_rule("0*1<Session-Id>").unwrap();
        assert_eq!((r.kind, r.min, r.max), (RuleKind::Fixed, 0, 1));
        let r = parse_rule("{ Auth-Application-Id = 4 }").unwrap();
        assert_eq!(
            (r.name.as_str(), r.value.as_deref()),
            ("Auth-Application-Id", Some("4"))
        );
        assert!(parse_rule("Session-Id").is_err());
        assert!(parse_rule("[X").is_err());
        assert!(parse_rule("3*1[X]").is_err());
    }
}
