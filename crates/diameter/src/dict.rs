//! The dictionary: every AVP and command gyro knows, with names, codes,
//! vendors, data formats, flag rules, enumerated values and grammars.
//!
//! The data lives in TOML files (`crates/diameter/dict/*.toml`, described in
//! `crates/diameter/dict/README.md`) that are compiled into the binary with
//! `include_str!` and parsed once, on first use of [`Dictionary::builtin`]:
//!
//! * `base.toml`: RFC 6733 base protocol AVPs and commands (CER/CEA,
//!   DWR/DWA, DPR/DPA, RAR/RAA, STR/STA, ASR/ASA, ACR/ACA) and the generic
//!   error answer grammar of RFC 6733 section 7.2;
//! * `credit_control.toml`: RFC 8506 (CCR/CCA and every credit-control AVP,
//!   including the 653-669 extension AVPs);
//! * `tgpp_gy.toml`: the 3GPP (vendor 10415) AVPs a PGW or SMF sends on Gy
//!   (TS 32.299, TS 29.061, TS 29.212/29.214), and the Ro additions to the
//!   CCR/CCA and MSCC grammars.
//!
//! More vendors' AVPs are added without code: write a file in the same
//! format and load it with [`Dictionary::extend_from_toml_str`].
//!
//! Lookups on the hot path ([`Dictionary::avp`], [`Dictionary::command_for`],
//! [`Grammar::rule_index`]) are a hash probe with a cheap hash or a binary
//! search over a precomputed index; none allocates.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use serde::Deserialize;

use crate::avp::flags as avp_flags;
use crate::codes::AvpId;
use crate::error::Error;
use crate::types::AvpType;

/// Errors from loading dictionary data are the crate's [`Error`]
/// (variant [`Error::Dictionary`]).
pub type DictError = Error;

/// Most rules one grammar may have: the validator keeps one occurrence
/// counter per rule on the stack.
pub const MAX_RULES: usize = 128;

const BASE: &str = include_str!("../dict/base.toml");
const CREDIT_CONTROL: &str = include_str!("../dict/credit_control.toml");
const TGPP_GY: &str = include_str!("../dict/tgpp_gy.toml");

/// What a definition says about one flag bit of an AVP (or the P bit of a
/// command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlagRule {
    /// The bit must be set.
    Must,
    /// The bit may be set or clear.
    May,
    /// The bit must be clear.
    MustNot,
}

impl FlagRule {
    /// True when a bit in state `set` satisfies this rule.
    #[inline]
    pub fn allows(self, set: bool) -> bool {
        match self {
            FlagRule::Must => set,
            FlagRule::May => true,
            FlagRule::MustNot => !set,
        }
    }

    fn parse(s: &str) -> Result<FlagRule, DictError> {
        Ok(match s {
            "must" => FlagRule::Must,
            "may" => FlagRule::May,
            "must_not" => FlagRule::MustNot,
            other => {
                return Err(dict_err(format!(
                    "flag rule {other:?}: use must, may or must_not"
                )))
            }
        })
    }
}

/// One AVP definition.
#[derive(Debug, Clone, PartialEq)]
pub struct AvpDef {
    /// Name, e.g. `Multiple-Services-Credit-Control`.
    pub name: String,
    /// AVP Code.
    pub code: u32,
    /// Vendor-Id, 0 for IETF AVPs.
    pub vendor: u32,
    /// Data format.
    pub ty: AvpType,
    /// Rule for the M bit.
    pub m_bit: FlagRule,
    /// Rule for the V bit (must when `vendor` is non-zero, else must not).
    pub v_bit: FlagRule,
    /// Rule for the (deprecated) P bit; `May` unless the data says otherwise.
    pub p_bit: FlagRule,
    /// Grammar of a Grouped AVP (`None` for other formats, and for Grouped
    /// AVPs whose children are not described: any child is then allowed).
    pub grammar: Option<Grammar>,
    /// When true, the children of this Grouped AVP are not validated (used
    /// for Failed-AVP, whose children are echoes of broken AVPs).
    pub opaque: bool,
    /// Enumerated values, sorted by value.
    enums: Vec<(i32, String)>,
    grammar_src: Option<GrammarSrc>,
}

impl AvpDef {
    /// The name of an enumerated value.
    pub fn enum_name(&self, value: i32) -> Option<&str> {
        self.enums
            .binary_search_by_key(&value, |e| e.0)
            .ok()
            .map(|i| self.enums[i].1.as_str())
    }

    /// The value of an enumerated name.
    pub fn enum_value(&self, name: &str) -> Option<i32> {
        self.enums.iter().find(|e| e.1 == name).map(|e| e.0)
    }

    /// All enumerated values, sorted by value.
    pub fn enum_values(&self) -> impl Iterator<Item = (i32, &str)> {
        self.enums.iter().map(|(v, n)| (*v, n.as_str()))
    }

    /// True when the definition lists enumerated values (an Enumerated AVP
    /// without listed values accepts any value).
    pub fn has_enum_values(&self) -> bool {
        !self.enums.is_empty()
    }

    /// The identity an encoder needs: code, vendor, and the M bit when the
    /// definition says it must be set.
    pub fn id(&self) -> AvpId {
        AvpId {
            code: self.code,
            vendor: self.vendor,
            flags: if self.m_bit == FlagRule::Must {
                avp_flags::MANDATORY
            } else {
                0
            },
        }
    }

    /// Smallest valid data size for this format, used for zero-filled
    /// example AVPs in Failed-AVP (RFC 6733 section 7.5).
    pub fn min_data_len(&self) -> usize {
        min_data_len(self.ty)
    }
}

/// Smallest data size of a format: 4 for 32-bit formats and Time, 8 for
/// 64-bit formats, 6 for Address (an IPv4 address), 0 for the rest.
pub fn min_data_len(ty: AvpType) -> usize {
    match ty {
        AvpType::Integer32
        | AvpType::Unsigned32
        | AvpType::Float32
        | AvpType::Enumerated
        | AvpType::Time => 4,
        AvpType::Integer64 | AvpType::Unsigned64 | AvpType::Float64 => 8,
        AvpType::Address => 6,
        _ => 0,
    }
}

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
    /// (code, vendor) key -> rule index, sorted by key.
    index: Vec<(u64, u16)>,
}

#[inline]
fn key(code: u32, vendor: u32) -> u64 {
    ((vendor as u64) << 32) | code as u64
}

impl Grammar {
    /// The index of the rule for this AVP, if the grammar names it.
    #[inline]
    pub fn rule_index(&self, code: u32, vendor: u32) -> Option<usize> {
        let k = key(code, vendor);
        if self.index.len() <= 8 {
            return self.index.iter().find(|e| e.0 == k).map(|e| e.1 as usize);
        }
        self.index
            .binary_search_by_key(&k, |e| e.0)
            .ok()
            .map(|i| self.index[i].1 as usize)
    }

    /// The rule for this AVP, if the grammar names it.
    pub fn rule(&self, code: u32, vendor: u32) -> Option<&Rule> {
        self.rule_index(code, vendor).map(|i| &self.rules[i])
    }
}

/// One command definition (request and answer).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandDef {
    /// Name, e.g. `Credit-Control`.
    pub name: String,
    /// Command Code.
    pub code: u32,
    /// The application that defines the command (0 for base commands).
    pub application_id: u32,
    /// Application-Ids the header may carry (RAR, ASR and STR are base
    /// commands used by applications such as credit control, 4).
    pub applications: Vec<u32>,
    /// Rule for the P bit.
    pub proxiable: FlagRule,
    /// Request grammar.
    pub request: Grammar,
    /// Answer grammar.
    pub answer: Grammar,
    short: [String; 2],
    request_src: GrammarSrc,
    answer_src: GrammarSrc,
}

impl CommandDef {
    /// Short name: `CCR` / `CCA`, `CER` / `CEA` and so on.
    pub fn short_name(&self, is_request: bool) -> &str {
        &self.short[usize::from(!is_request)]
    }

    /// The grammar for a request or an answer.
    pub fn grammar(&self, is_request: bool) -> &Grammar {
        if is_request {
            &self.request
        } else {
            &self.answer
        }
    }
}

/// Why [`Dictionary::command_for`] found no command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandLookup {
    /// No command has this code (3001 DIAMETER_COMMAND_UNSUPPORTED).
    UnknownCommand,
    /// The command exists but not for this Application-Id (3007
    /// DIAMETER_APPLICATION_UNSUPPORTED).
    UnsupportedApplication,
}

#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

type FastMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The dictionary. See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Dictionary {
    vendors: BTreeMap<u32, String>,
    applications: BTreeMap<u32, String>,
    avps: Vec<AvpDef>,
    by_key: FastMap<u32>,
    by_name: HashMap<String, u32>,
    commands: Vec<CommandDef>,
    error_answer: Grammar,
    error_answer_src: GrammarSrc,
}

impl Dictionary {
    /// The dictionary compiled into the binary: base protocol, credit
    /// control and 3GPP Gy. Parsed once; every caller shares the instance.
    pub fn builtin() -> &'static Dictionary {
        static DICT: OnceLock<Dictionary> = OnceLock::new();
        DICT.get_or_init(|| {
            // The embedded data is checked by the unit tests; an error here
            // is a build defect, not an input problem.
            Dictionary::load(&[BASE, CREDIT_CONTROL, TGPP_GY])
                .unwrap_or_else(|e| panic!("built-in dictionary data is invalid: {e}"))
        })
    }

    /// A fresh copy of the built-in dictionary, to be extended with more
    /// vendors' AVPs.
    pub fn builtin_clone() -> Dictionary {
        Dictionary::builtin().clone()
    }

    /// A dictionary from one TOML document (see the data file README).
    pub fn from_toml_str(s: &str) -> Result<Dictionary, DictError> {
        Dictionary::load(&[s])
    }

    fn load(docs: &[&str]) -> Result<Dictionary, DictError> {
        let mut d = Dictionary::default();
        for doc in docs {
            d.merge(doc)?;
        }
        d.resolve()?;
        Ok(d)
    }

    /// Adds the vendors, applications, AVPs, commands and grammar extensions
    /// of a TOML document. On error the dictionary is left unchanged.
    pub fn extend_from_toml_str(&mut self, s: &str) -> Result<(), DictError> {
        let mut next = self.clone();
        next.merge(s)?;
        next.resolve()?;
        *self = next;
        Ok(())
    }

    /// The AVP with this code and vendor.
    #[inline]
    pub fn avp(&self, code: u32, vendor: u32) -> Option<&AvpDef> {
        self.by_key
            .get(&key(code, vendor))
            .map(|&i| &self.avps[i as usize])
    }

    /// The AVP with this name.
    pub fn avp_by_name(&self, name: &str) -> Option<&AvpDef> {
        self.by_name.get(name).map(|&i| &self.avps[i as usize])
    }

    /// Every AVP definition.
    pub fn avps(&self) -> impl Iterator<Item = &AvpDef> {
        self.avps.iter()
    }

    /// The first command with this code.
    pub fn command(&self, code: u32) -> Option<&CommandDef> {
        self.commands.iter().find(|c| c.code == code)
    }

    /// The command with this code usable with this Application-Id.
    pub fn command_for(&self, code: u32, application: u32) -> Result<&CommandDef, CommandLookup> {
        let mut seen = false;
        for c in &self.commands {
            if c.code == code {
                if c.applications.contains(&application) {
                    return Ok(c);
                }
                seen = true;
            }
        }
        Err(if seen {
            CommandLookup::UnsupportedApplication
        } else {
            CommandLookup::UnknownCommand
        })
    }

    /// Every command definition.
    pub fn commands(&self) -> impl Iterator<Item = &CommandDef> {
        self.commands.iter()
    }

    /// The name of a vendor.
    pub fn vendor_name(&self, vendor: u32) -> Option<&str> {
        self.vendors.get(&vendor).map(String::as_str)
    }

    /// The name of an application.
    pub fn application_name(&self, id: u32) -> Option<&str> {
        self.applications.get(&id).map(String::as_str)
    }

    /// The generic error answer grammar of RFC 6733 section 7.2 (answers
    /// with the E bit set).
    pub fn error_answer(&self) -> &Grammar {
        &self.error_answer
    }

    fn merge(&mut self, doc: &str) -> Result<(), DictError> {
        let file: File =
            toml::from_str(doc).map_err(|e| dict_err(format!("invalid dictionary TOML: {e}")))?;
        for v in file.vendor {
            self.vendors.insert(v.id, v.name);
        }
        for a in file.application {
            self.applications.insert(a.id, a.name);
        }
        for a in file.avp {
            self.add_avp(a)?;
        }
        for c in file.command {
            self.add_command(c)?;
        }
        if let Some(rules) = file.error_answer {
            self.error_answer_src.rules.extend(rules);
        }
        for x in file.extend {
            self.apply_extend(x)?;
        }
        Ok(())
    }

    fn add_avp(&mut self, a: AvpEntry) -> Result<(), DictError> {
        let ty = AvpType::from_name(&a.ty)
            .ok_or_else(|| dict_err(format!("AVP {}: unknown type {:?}", a.name, a.ty)))?;
        let v_default = if a.vendor != 0 { "must" } else { "must_not" };
        let mut enums = Vec::with_capacity(a.values.len());
        for (name, v) in a.values {
            let v = i32::try_from(v)
                .map_err(|_| dict_err(format!("AVP {}: value {name} out of range", a.name)))?;
            enums.push((v, name));
        }
        enums.sort_by_key(|e| e.0);
        if enums.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(dict_err(format!(
                "AVP {}: duplicate enumerated value",
                a.name
            )));
        }
        if !enums.is_empty() && ty != AvpType::Enumerated {
            return Err(dict_err(format!(
                "AVP {}: values on a non-Enumerated AVP",
                a.name
            )));
        }
        let grammar_src = match (&a.rules, ty) {
            (Some(r), AvpType::Grouped) => Some(GrammarSrc {
                rules: r.clone(),
                exclusive: a.exclusive.clone(),
            }),
            (Some(_), _) => {
                return Err(dict_err(format!(
                    "AVP {}: rules on a non-Grouped AVP",
                    a.name
                )))
            }
            (None, _) => None,
        };
        let def = AvpDef {
            m_bit: FlagRule::parse(a.m.as_deref().unwrap_or("must"))?,
            v_bit: FlagRule::parse(a.v.as_deref().unwrap_or(v_default))?,
            p_bit: FlagRule::parse(a.p.as_deref().unwrap_or("may"))?,
            name: a.name,
            code: a.code,
            vendor: a.vendor,
            ty,
            grammar: None,
            opaque: a.opaque,
            enums,
            grammar_src,
        };
        let k = key(def.code, def.vendor);
        if self.by_key.contains_key(&k) {
            return Err(dict_err(format!(
                "AVP {} ({}, vendor {}) is defined twice",
                def.name, def.code, def.vendor
            )));
        }
        if self.by_name.contains_key(&def.name) {
            return Err(dict_err(format!("AVP name {} is defined twice", def.name)));
        }
        let idx = u32::try_from(self.avps.len()).map_err(|_| dict_err("too many AVPs".into()))?;
        self.by_key.insert(k, idx);
        self.by_name.insert(def.name.clone(), idx);
        self.avps.push(def);
        Ok(())
    }

    fn add_command(&mut self, c: CommandEntry) -> Result<(), DictError> {
        let applications = c.applications.unwrap_or_else(|| vec![c.application]);
        if self
            .commands
            .iter()
            .any(|o| o.code == c.code && o.applications.iter().any(|a| applications.contains(a)))
        {
            return Err(dict_err(format!("command {} is defined twice", c.name)));
        }
        self.commands.push(CommandDef {
            proxiable: FlagRule::parse(&c.proxiable)?,
            short: c.short,
            name: c.name,
            code: c.code,
            application_id: c.application,
            applications,
            request: Grammar::default(),
            answer: Grammar::default(),
            request_src: GrammarSrc {
                rules: c.request,
                exclusive: c.request_exclusive,
            },
            answer_src: GrammarSrc {
                rules: c.answer,
                exclusive: c.answer_exclusive,
            },
        });
        Ok(())
    }

    fn apply_extend(&mut self, x: ExtendEntry) -> Result<(), DictError> {
        match (x.command, x.avp) {
            (Some(name), None) => {
                let c = self
                    .commands
                    .iter_mut()
                    .find(|c| c.name == name)
                    .ok_or_else(|| dict_err(format!("extend: no command {name}")))?;
                for a in x.applications {
                    if !c.applications.contains(&a) {
                        c.applications.push(a);
                    }
                }
                c.request_src.rules.extend(x.request);
                c.request_src.exclusive.extend(x.request_exclusive);
                c.answer_src.rules.extend(x.answer);
                c.answer_src.exclusive.extend(x.answer_exclusive);
                if !x.rules.is_empty() || !x.exclusive.is_empty() {
                    return Err(dict_err(format!(
                        "extend {name}: commands take request and answer, not rules"
                    )));
                }
            }
            (None, Some(name)) => {
                let i = *self
                    .by_name
                    .get(&name)
                    .ok_or_else(|| dict_err(format!("extend: no AVP {name}")))?;
                let def = &mut self.avps[i as usize];
                if def.ty != AvpType::Grouped {
                    return Err(dict_err(format!("extend: {name} is not Grouped")));
                }
                let src = def.grammar_src.get_or_insert_with(GrammarSrc::default);
                src.rules.extend(x.rules);
                src.exclusive.extend(x.exclusive);
                if !x.request.is_empty() || !x.answer.is_empty() || !x.applications.is_empty() {
                    return Err(dict_err(format!("extend {name}: AVPs take rules only")));
                }
            }
            _ => {
                return Err(dict_err(
                    "extend: name exactly one of command or avp".into(),
                ))
            }
        }
        Ok(())
    }

    /// Compiles every grammar from its source (names resolved to codes).
    fn resolve(&mut self) -> Result<(), DictError> {
        for i in 0..self.avps.len() {
            if let Some(src) = self.avps[i].grammar_src.clone() {
                let g = self
                    .compile(&src)
                    .map_err(|e| dict_err(format!("grammar of {}: {e}", self.avps[i].name)))?;
                self.avps[i].grammar = Some(g);
            }
        }
        for i in 0..self.commands.len() {
            let (rq, an) = (
                self.commands[i].request_src.clone(),
                self.commands[i].answer_src.clone(),
            );
            let name = self.commands[i].name.clone();
            let rq = self
                .compile(&rq)
                .map_err(|e| dict_err(format!("{name} request: {e}")))?;
            let an = self
                .compile(&an)
                .map_err(|e| dict_err(format!("{name} answer: {e}")))?;
            self.commands[i].request = rq;
            self.commands[i].answer = an;
        }
        let src = self.error_answer_src.clone();
        self.error_answer = self
            .compile(&src)
            .map_err(|e| dict_err(format!("error answer: {e}")))?;
        Ok(())
    }

    fn compile(&self, src: &GrammarSrc) -> Result<Grammar, String> {
        let mut g = Grammar::default();
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
            let def = self
                .avp_by_name(&p.name)
                .ok_or_else(|| format!("{text}: unknown AVP {}", p.name))?;
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
        g.index = g
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (key(r.code, r.vendor), i as u16))
            .collect();
        g.index.sort_by_key(|e| e.0);
        for x in &src.exclusive {
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
            g.exclusive.push(Exclusive {
                rules,
                required: x.required,
                conflict_code: x.code.unwrap_or(crate::codes::result::CONTRADICTING_AVPS),
            });
        }
        Ok(g)
    }
}

fn dict_err(reason: String) -> DictError {
    Error::Dictionary { reason }
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

#[derive(Debug, Clone, Default, PartialEq)]
struct GrammarSrc {
    rules: Vec<String>,
    exclusive: Vec<ExclusiveEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    vendor: Vec<NamedId>,
    #[serde(default)]
    application: Vec<NamedId>,
    #[serde(default)]
    avp: Vec<AvpEntry>,
    #[serde(default)]
    command: Vec<CommandEntry>,
    #[serde(default)]
    extend: Vec<ExtendEntry>,
    #[serde(default)]
    error_answer: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedId {
    id: u32,
    name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AvpEntry {
    name: String,
    code: u32,
    #[serde(default)]
    vendor: u32,
    #[serde(rename = "type")]
    ty: String,
    m: Option<String>,
    v: Option<String>,
    p: Option<String>,
    #[serde(default)]
    values: BTreeMap<String, i64>,
    rules: Option<Vec<String>>,
    #[serde(default)]
    exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    opaque: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExclusiveEntry {
    avps: Vec<String>,
    #[serde(default)]
    required: bool,
    code: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandEntry {
    name: String,
    code: u32,
    application: u32,
    applications: Option<Vec<u32>>,
    short: [String; 2],
    proxiable: String,
    request: Vec<String>,
    answer: Vec<String>,
    #[serde(default)]
    request_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    answer_exclusive: Vec<ExclusiveEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtendEntry {
    command: Option<String>,
    avp: Option<String>,
    #[serde(default)]
    applications: Vec<u32>,
    #[serde(default)]
    request: Vec<String>,
    #[serde(default)]
    answer: Vec<String>,
    #[serde(default)]
    request_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    answer_exclusive: Vec<ExclusiveEntry>,
    #[serde(default)]
    rules: Vec<String>,
    #[serde(default)]
    exclusive: Vec<ExclusiveEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{avp, cmd};

    #[test]
    fn builtin_is_one_shared_instance() {
        assert!(std::ptr::eq(Dictionary::builtin(), Dictionary::builtin()));
    }

    #[test]
    fn each_data_file_loads_on_top_of_the_previous() {
        assert!(Dictionary::from_toml_str(BASE).is_ok());
        assert!(Dictionary::load(&[BASE, CREDIT_CONTROL]).is_ok());
        assert!(Dictionary::load(&[BASE, CREDIT_CONTROL, TGPP_GY]).is_ok());
    }

    #[test]
    fn every_code_constant_agrees_with_the_dictionary() {
        let d = Dictionary::builtin();
        let ids = [
            avp::USER_NAME,
            avp::FILTER_ID,
            avp::CALLED_STATION_ID,
            avp::EVENT_TIMESTAMP,
            avp::HOST_IP_ADDRESS,
            avp::AUTH_APPLICATION_ID,
            avp::ACCT_APPLICATION_ID,
            avp::VENDOR_SPECIFIC_APPLICATION_ID,
            avp::SESSION_ID,
            avp::ORIGIN_HOST,
            avp::SUPPORTED_VENDOR_ID,
            avp::VENDOR_ID,
            avp::FIRMWARE_REVISION,
            avp::RESULT_CODE,
            avp::PRODUCT_NAME,
            avp::DISCONNECT_CAUSE,
            avp::AUTH_SESSION_STATE,
            avp::ORIGIN_STATE_ID,
            avp::FAILED_AVP,
            avp::ERROR_MESSAGE,
            avp::ROUTE_RECORD,
            avp::DESTINATION_REALM,
            avp::PROXY_INFO,
            avp::RE_AUTH_REQUEST_TYPE,
            avp::DESTINATION_HOST,
            avp::ERROR_REPORTING_HOST,
            avp::TERMINATION_CAUSE,
            avp::ORIGIN_REALM,
            avp::EXPERIMENTAL_RESULT,
            avp::EXPERIMENTAL_RESULT_CODE,
            avp::INBAND_SECURITY_ID,
            avp::CC_CORRELATION_ID,
            avp::CC_INPUT_OCTETS,
            avp::CC_MONEY,
            avp::CC_OUTPUT_OCTETS,
            avp::CC_REQUEST_NUMBER,
            avp::CC_REQUEST_TYPE,
            avp::CC_SERVICE_SPECIFIC_UNITS,
            avp::CC_SESSION_FAILOVER,
            avp::CC_SUB_SESSION_ID,
            avp::CC_TIME,
            avp::CC_TOTAL_OCTETS,
            avp::CHECK_BALANCE_RESULT,
            avp::COST_INFORMATION,
            avp::COST_UNIT,
            avp::CURRENCY_CODE,
            avp::CREDIT_CONTROL,
            avp::CREDIT_CONTROL_FAILURE_HANDLING,
            avp::DIRECT_DEBITING_FAILURE_HANDLING,
            avp::EXPONENT,
            avp::FINAL_UNIT_INDICATION,
            avp::GRANTED_SERVICE_UNIT,
            avp::RATING_GROUP,
            avp::REDIRECT_ADDRESS_TYPE,
            avp::REDIRECT_SERVER,
            avp::REDIRECT_SERVER_ADDRESS,
            avp::REQUESTED_ACTION,
            avp::REQUESTED_SERVICE_UNIT,
            avp::RESTRICTION_FILTER_RULE,
            avp::SERVICE_IDENTIFIER,
            avp::SERVICE_PARAMETER_INFO,
            avp::SERVICE_PARAMETER_TYPE,
            avp::SERVICE_PARAMETER_VALUE,
            avp::SUBSCRIPTION_ID,
            avp::SUBSCRIPTION_ID_DATA,
            avp::UNIT_VALUE,
            avp::USED_SERVICE_UNIT,
            avp::VALUE_DIGITS,
            avp::VALIDITY_TIME,
            avp::FINAL_UNIT_ACTION,
            avp::SUBSCRIPTION_ID_TYPE,
            avp::TARIFF_TIME_CHANGE,
            avp::TARIFF_CHANGE_USAGE,
            avp::G_S_U_POOL_IDENTIFIER,
            avp::CC_UNIT_TYPE,
            avp::MULTIPLE_SERVICES_INDICATOR,
            avp::MULTIPLE_SERVICES_CREDIT_CONTROL,
            avp::G_S_U_POOL_REFERENCE,
            avp::USER_EQUIPMENT_INFO,
            avp::USER_EQUIPMENT_INFO_TYPE,
            avp::USER_EQUIPMENT_INFO_VALUE,
            avp::SERVICE_CONTEXT_ID,
            avp::REDIRECT_HOST,
            avp::REDIRECT_HOST_USAGE,
            avp::REDIRECT_MAX_CACHE_TIME,
            avp::ACCT_MULTI_SESSION_ID,
            avp::TGPP_CHARGING_ID,
            avp::TGPP_PDP_TYPE,
            avp::TGPP_IMSI_MCC_MNC,
            avp::TGPP_GGSN_MCC_MNC,
            avp::TGPP_NSAPI,
            avp::TGPP_SELECTION_MODE,
            avp::TGPP_CHARGING_CHARACTERISTICS,
            avp::TGPP_SGSN_MCC_MNC,
            avp::TGPP_RAT_TYPE,
            avp::TGPP_USER_LOCATION_INFO,
            avp::TGPP_MS_TIMEZONE,
            avp::GGSN_ADDRESS,
            avp::TIME_QUOTA_THRESHOLD,
            avp::VOLUME_QUOTA_THRESHOLD,
            avp::TRIGGER_TYPE,
            avp::QUOTA_HOLDING_TIME,
            avp::REPORTING_REASON,
            avp::SERVICE_INFORMATION,
            avp::PS_INFORMATION,
            avp::QUOTA_CONSUMPTION_TIME,
            avp::SGSN_ADDRESS,
            avp::PDP_ADDRESS,
            avp::UNIT_QUOTA_THRESHOLD,
            avp::TRIGGER,
            avp::LOW_BALANCE_INDICATION,
            avp::REMAINING_BALANCE,
            avp::SMS_INFORMATION,
        ];
        for id in ids {
            let def = d
                .avp(id.code, id.vendor)
                .unwrap_or_else(|| panic!("AVP {} vendor {} missing", id.code, id.vendor));
            let m = id.flags & avp_flags::MANDATORY != 0;
            assert!(
                def.m_bit.allows(m),
                "{}: M bit {m} against {:?}",
                def.name,
                def.m_bit
            );
            assert_eq!(def.vendor != 0, def.v_bit == FlagRule::Must, "{}", def.name);
        }
        for c in [
            cmd::CAPABILITIES_EXCHANGE,
            cmd::RE_AUTH,
            cmd::ACCOUNTING,
            cmd::CREDIT_CONTROL,
            cmd::ABORT_SESSION,
            cmd::SESSION_TERMINATION,
            cmd::DEVICE_WATCHDOG,
            cmd::DISCONNECT_PEER,
        ] {
            assert!(d.command(c).is_some(), "command {c}");
        }
    }

    #[test]
    fn lookups_by_code_name_and_application() {
        let d = Dictionary::builtin();
        let rr = d.avp(872, 10415).unwrap();
        assert_eq!(rr.name, "Reporting-Reason");
        assert_eq!(rr.ty, AvpType::Enumerated);
        assert_eq!(rr.enum_name(2), Some("FINAL"));
        assert_eq!(rr.enum_name(99), None);
        assert_eq!(d.avp_by_name("Reporting-Reason").unwrap().code, 872);
        let t = d.avp_by_name("CC-Request-Type").unwrap();
        assert_eq!(
            (t.enum_name(4), t.enum_value("EVENT_REQUEST")),
            (Some("EVENT_REQUEST"), Some(4))
        );
        let s = d.avp_by_name("Subscription-Id-Type").unwrap();
        assert_eq!(s.enum_name(4), Some("END_USER_PRIVATE"));
        assert_eq!(d.vendor_name(10415), Some("3GPP"));
        assert_eq!(d.application_name(4), Some("Diameter Credit Control"));
        let ccr = d.command_for(272, 4).unwrap();
        assert_eq!(
            (ccr.short_name(true), ccr.short_name(false)),
            ("CCR", "CCA")
        );
        assert_eq!(ccr.proxiable, FlagRule::Must);
        assert_eq!(
            d.command_for(272, 0),
            Err(CommandLookup::UnsupportedApplication)
        );
        assert_eq!(d.command_for(999, 0), Err(CommandLookup::UnknownCommand));
        assert!(d.command_for(258, 4).is_ok() && d.command_for(274, 4).is_ok());
        assert!(d.command_for(275, 4).is_ok() && d.command_for(280, 0).is_ok());
    }

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

    #[test]
    fn a_vendor_is_added_from_data_without_code() {
        let mut d = Dictionary::builtin_clone();
        d.extend_from_toml_str(
            r#"
            [[vendor]]
            id = 9999
            name = "Example"

            [[avp]]
            name = "Example-Counter"
            code = 1
            vendor = 9999
            type = "Unsigned64"

            [[avp]]
            name = "Example-Info"
            code = 2
            vendor = 9999
            type = "Grouped"
            rules = ["{Example-Counter}"]

            [[extend]]
            avp = "Multiple-Services-Credit-Control"
            rules = ["[Example-Info]"]
            "#,
        )
        .unwrap();
        assert_eq!(d.vendor_name(9999), Some("Example"));
        let def = d.avp(1, 9999).unwrap();
        assert_eq!(
            (def.ty, def.m_bit, def.v_bit),
            (AvpType::Unsigned64, FlagRule::Must, FlagRule::Must)
        );
        let mscc = d.avp(456, 0).unwrap().grammar.as_ref().unwrap();
        assert!(mscc.rule(2, 9999).is_some());
        assert!(Dictionary::builtin().avp(1, 9999).is_none());
    }

    #[test]
    fn bad_data_is_an_error_and_leaves_the_dictionary_unchanged() {
        let mut d = Dictionary::builtin_clone();
        for bad in [
            "[[avp]]\nname = \"X\"\ncode = 1\ntype = \"Nope\"",
            "[[avp]]\nname = \"Session-Id\"\ncode = 9000\ntype = \"UTF8String\"",
            "[[avp]]\nname = \"Y\"\ncode = 263\ntype = \"UTF8String\"",
            "[[avp]]\nname = \"G\"\ncode = 9001\ntype = \"Grouped\"\nrules = [\"{Nope}\"]",
            "[[avp]]\nname = \"F\"\ncode = 9002\ntype = \"Unsigned32\"\nm = \"sometimes\"",
            "[[extend]]\navp = \"Nope\"\nrules = []",
            "not toml [",
            "[[avp]]\nname = \"Z\"\ncode = 9003\ntype = \"Unsigned32\"\nextra = 1",
        ] {
            let e = d.extend_from_toml_str(bad).unwrap_err();
            assert!(matches!(e, Error::Dictionary { .. }), "{bad}: {e}");
        }
        assert_eq!(d.avps().count(), Dictionary::builtin().avps().count());
    }
}
