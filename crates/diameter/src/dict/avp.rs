//! AVP definitions: [`AvpDef`] with its flag rules ([`FlagRule`]) and
//! enumerated values.

use crate::avp::flags as avp_flags;
use crate::codes::AvpId;
use crate::types::AvpType;

use super::schema::GrammarSrc;
use super::{dict_err, DictError, Grammar};

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

    pub(super) fn parse(s: &str) -> Result<FlagRule, DictError> {
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
    pub(super) enums: Vec<(i32, String)>,
    pub(super) grammar_src: Option<GrammarSrc>,
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
