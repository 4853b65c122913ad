//! The lookups callers make, on the hot path among them: by code and
//! vendor (one hash probe), by name, by command code and Application-Id.

use super::{key, AvpDef, CommandDef, CommandLookup, Dictionary, Grammar};

impl Dictionary {
    /// The AVP with this code and vendor.
    #[inline]
    pub fn avp(&self, code: u32, vendor: u32) -> Option<&AvpDef> {
        self.by_key
            .get(&key(code, vendor))
            .map(|&i| &self.avps[i as usize])
    }

    /// The definition at `index` (from a compiled grammar's index).
    #[inline]
    pub(crate) fn avp_at(&self, index: u32) -> &AvpDef {
        &self.avps[index as usize]
    }

    /// The index of the AVP with this name.
    pub(crate) fn avp_index(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
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
}

#[cfg(test)]
mod tests {
    use crate::dict::*;
    use crate::types::AvpType;

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
}
