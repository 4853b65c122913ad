//! Loading dictionary data: TOML documents merged into a [`Dictionary`]
//! (vendors, applications, AVPs, commands, grammar extensions), then every
//! grammar resolved.

use super::schema::{AvpEntry, CommandEntry, ExtendEntry, File, GrammarSrc};
use super::{dict_err, key, AvpDef, CommandDef, DictError, Dictionary, FlagRule, Grammar};
use crate::types::AvpType;

impl Dictionary {
    /// A dictionary from one TOML document (see the data file README).
    pub fn from_toml_str(s: &str) -> Result<Dictionary, DictError> {
        Dictionary::load(&[s])
    }

    pub(super) fn load(docs: &[&str]) -> Result<Dictionary, DictError> {
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
}

#[cfg(test)]
mod tests {
    use crate::dict::*;
    use crate::error::Error;
    use crate::types::AvpType;

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
