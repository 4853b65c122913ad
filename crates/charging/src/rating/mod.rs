//! Price plans and rating: which rate of an account's plan prices a
//! service at an instant, and when that price changes.
//!
//! A [`Catalog`] holds the named [`Plan`]s of a configuration (each a list
//! of rates, [`Tariff`]s, in one currency and time zone), the destination
//! prefix table and the roaming zone table. Every account names a plan
//! (none: the plan named [`DEFAULT_PLAN`], which the configuration's
//! top-level `[[tariff]]` list makes).
//!
//! A rate applies to a request when its Service-Context-Id matches, its
//! rating group and service identifier (when it names them) are the
//! request's, its destination (when it names one) is the one the called
//! number's longest prefix names, its zone (when it names one) is the
//! visited network's, and the local time is in its days and hours. Of the
//! rates that apply, the most specific wins: one naming a zone before one
//! that does not, then one naming a destination, then by rating group and
//! service identifier (both, service only, group only, neither), then one
//! restricted in time before one that is not; on a tie the first listed.
//!
//! Rating runs for every unit of every request, so the engine remembers
//! (`RatingMemo`) the rates that may apply to each (plan, context,
//! rating key, destination, zone) it has seen, sorted by specificity, and
//! the segment of the plan's week the current time is in: choosing a rate
//! is then a hash of the context, a short scan and a bit test per
//! candidate.

pub mod prefix;
pub mod quote;
pub mod schedule;
pub mod zones;

use crate::error::{Error, Result};
use crate::tariff::{context_matches, Currency, Tariff};
use crate::types::{RatingKey, Timestamp};
use prefix::PrefixTable;
use schedule::{covers, intervals, Schedule};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;
use zones::ZoneTable;

/// The plan of accounts that name none.
pub const DEFAULT_PLAN: &str = "default";

/// Why a service could not be rated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatingError {
    /// No rate of the plan serves this Service-Context-Id at all.
    UnknownContext,
    /// The context is known but no rate serves this rating group /
    /// service (here, now).
    NoTariff,
}

/// Where a request is: the destination of its called number and the
/// roaming zone of its visited network (indexes into the catalog's
/// tables).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Location {
    /// Destination, by longest prefix of the called number.
    pub destination: Option<u32>,
    /// Roaming zone of the visited network.
    pub zone: Option<u32>,
}

/// The rate chosen for a service at an instant, and when the price
/// changes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Index of the rate in its plan.
    pub rate: u16,
    /// The next instant another rate takes over (within a week), and
    /// which.
    pub change: Option<(Timestamp, u16)>,
}

/// Candidate rates, most specific first.
type Candidates = SmallVec<[u16; 4]>;

/// What one plan says: its rates in one currency and time zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Name, as accounts refer to it.
    pub name: Arc<str>,
    /// The currency of its prices.
    pub currency: Currency,
    /// Its rates, in configuration order.
    pub rates: Vec<Tariff>,
    schedule: Schedule,
    /// Per rate: the segments of the week it applies in (a bit set), or
    /// none when it applies at all times.
    active: Vec<Option<Vec<u64>>>,
    /// Per rate: its destination and zone, resolved.
    locations: Vec<Location>,
    /// Whether any rate names a destination or zone.
    located: bool,
}

/// A plan as configured, before names are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSpec {
    /// Name.
    pub name: String,
    /// Currency of its prices.
    pub currency: Currency,
    /// IANA time zone its days and hours are in.
    pub time_zone: String,
    /// Rates.
    pub rates: Vec<Tariff>,
}

impl Plan {
    fn new(spec: PlanSpec, destinations: &[String], zones: &[String]) -> Result<Self> {
        let mut windows = Vec::with_capacity(spec.rates.len());
        let mut locations = Vec::with_capacity(spec.rates.len());
        for r in &spec.rates {
            r.validate()
                .map_err(|e| Error::Config(format!("plan {:?}: {}", spec.name, strip(&e))))?;
            let find = |what: &str, name: &Option<String>, names: &[String]| match name {
                None => Ok(None),
                Some(n) => names
                    .iter()
                    .position(|x| x == n)
                    .map(|i| Some(i as u32))
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "plan {:?}, rate {:?}: no {what} named {n:?}",
                            spec.name, r.name
                        ))
                    }),
            };
            locations.push(Location {
                destination: find("destination", &r.destination, destinations)?,
                zone: find("zone", &r.zone, zones)?,
            });
            windows.push(intervals(&r.days, r.hours));
        }
        if spec.rates.len() > usize::from(u16::MAX) {
            return Err(Error::Config(format!(
                "plan {:?}: too many rates",
                spec.name
            )));
        }
        let schedule = Schedule::new(&spec.time_zone, &windows)
            .map_err(|e| Error::Config(format!("plan {:?}: {}", spec.name, strip(&e))))?;
        let n = schedule.segments();
        let active = windows
            .iter()
            .map(|w| {
                (!w.is_empty()).then(|| {
                    let mut bits = vec![0u64; n.div_ceil(64)];
                    for s in 0..n {
                        if covers(w, schedule.start_of(s as u16)) {
                            bits[s / 64] |= 1 << (s % 64);
                        }
                    }
                    bits
                })
            })
            .collect();
        Ok(Plan {
            located: locations
                .iter()
                .any(|l| l.destination.is_some() || l.zone.is_some()),
            name: Arc::from(spec.name.as_str()),
            currency: spec.currency,
            rates: spec.rates,
            schedule,
            active,
            locations,
        })
    }

    /// The IANA time zone of its days and hours.
    pub fn time_zone(&self) -> &str {
        &self.schedule.zone_name
    }

    /// The rate at `index`.
    pub fn rate(&self, index: u16) -> Option<&Tariff> {
        self.rates.get(usize::from(index))
    }

    /// Whether any rate depends on where the request is (destination or
    /// zone).
    pub fn uses_location(&self) -> bool {
        self.located
    }

    /// Whether any rate depends on the called number's destination.
    pub fn uses_destinations(&self) -> bool {
        self.locations.iter().any(|l| l.destination.is_some())
    }

    /// Whether any rate depends on the roaming zone.
    pub fn uses_zones(&self) -> bool {
        self.locations.iter().any(|l| l.zone.is_some())
    }

    /// Whether any rate serves this Service-Context-Id.
    pub fn knows_context(&self, ctx: &str) -> bool {
        self.rates
            .iter()
            .any(|t| context_matches(&t.service_context, ctx))
    }

    /// The rates that may serve `key` under `ctx` at `loc`, at some time,
    /// most specific first.
    fn candidates(
        &self,
        ctx: &str,
        key: RatingKey,
        loc: Location,
    ) -> Result<Candidates, RatingError> {
        let mut found: SmallVec<[(u16, u16); 8]> = SmallVec::new();
        let mut context_known = false;
        for (i, t) in self.rates.iter().enumerate() {
            if !context_matches(&t.service_context, ctx) {
                continue;
            }
            context_known = true;
            let rg = match t.rating_group {
                None => Some(false),
                Some(rg) if key.rating_group == Some(rg) => Some(true),
                Some(_) => None,
            };
            let sid = match t.service_identifier {
                None => Some(false),
                Some(s) if key.service_id == Some(s) => Some(true),
                Some(_) => None,
            };
            let keys: u16 = match (rg, sid) {
                (Some(true), Some(true)) => 4,
                (Some(false), Some(true)) => 3,
                (Some(true), Some(false)) => 2,
                (Some(false), Some(false)) => 1,
                _ => continue,
            };
            let l = self.locations[i];
            let zone = match l.zone {
                None => 0,
                Some(z) if loc.zone == Some(z) => 1,
                Some(_) => continue,
            };
            let dest = match l.destination {
                None => 0,
                Some(d) if loc.destination == Some(d) => 1,
                Some(_) => continue,
            };
            let timed = u16::from(self.active[i].is_some());
            found.push((zone << 5 | dest << 4 | keys << 1 | timed, i as u16));
        }
        if found.is_empty() {
            return Err(if context_known {
                RatingError::NoTariff
            } else {
                RatingError::UnknownContext
            });
        }
        // Most specific first; on a tie the first listed.
        found.sort_by_key(|&(score, i)| (std::cmp::Reverse(score), i));
        Ok(found.into_iter().map(|(_, i)| i).collect())
    }

    /// Whether rate `rate` applies in segment `segment`.
    fn applies(&self, rate: u16, segment: u16) -> bool {
        match &self.active[usize::from(rate)] {
            None => true,
            Some(bits) => {
                let s = usize::from(segment);
                bits[s / 64] & (1 << (s % 64)) != 0
            }
        }
    }

    /// The first of `candidates` that applies in `segment`.
    fn pick(&self, candidates: &[u16], segment: u16) -> Option<u16> {
        candidates
            .iter()
            .copied()
            .find(|&r| self.applies(r, segment))
    }

    /// The choice in `segment` with the next change among `upcoming`.
    fn choose(
        &self,
        candidates: &[u16],
        segment: u16,
        upcoming: &[(Timestamp, u16)],
    ) -> Option<Choice> {
        let rate = self.pick(candidates, segment)?;
        let mut change = None;
        for &(at, s) in upcoming {
            match self.pick(candidates, s) {
                Some(r) if r == rate => continue,
                Some(r) => change = Some((at, r)),
                // Nothing applies after: no price to change to.
                None => {}
            }
            break;
        }
        Some(Choice { rate, change })
    }

    /// The rate for `key` under `ctx` at `loc` at instant `at`, and when
    /// the price changes next (no remembering: see `RatingMemo`).
    pub fn rate_at(
        &self,
        ctx: &str,
        key: RatingKey,
        loc: Location,
        at: Timestamp,
    ) -> Result<Choice, RatingError> {
        let c = self.candidates(ctx, key, loc)?;
        let placed = self.schedule.place(at);
        let upcoming = self.schedule.upcoming(at);
        self.choose(&c, placed.segment, &upcoming)
            .ok_or(RatingError::NoTariff)
    }
}

/// An error's message without the "configuration: " its Display adds.
fn strip(e: &Error) -> String {
    match e {
        Error::Config(m) | Error::ConfigSyntax(m) => m.clone(),
        other => other.to_string(),
    }
}

/// All plans, the destination and zone tables, and the default currency.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The configuration's currency: of accounts and plans that name none.
    pub currency: Currency,
    plans: Vec<Plan>,
    default_plan: Option<u16>,
    destinations: PrefixTable,
    destination_names: Vec<String>,
    zones: ZoneTable,
    zone_names: Vec<String>,
}

impl Catalog {
    /// A catalog with one plan, [`DEFAULT_PLAN`], of validated tariffs in
    /// UTC.
    pub fn new(currency: Currency, tariffs: Vec<Tariff>) -> Result<Self> {
        let plans = vec![PlanSpec {
            name: DEFAULT_PLAN.into(),
            currency,
            time_zone: "UTC".into(),
            rates: tariffs,
        }];
        Catalog::build(currency, plans, Vec::new(), Vec::new())
    }

    /// A catalog of `plans` (distinct names), with destinations (name and
    /// its prefixes) and zones (name and its networks).
    pub fn build(
        currency: Currency,
        plans: Vec<PlanSpec>,
        destinations: Vec<(String, Vec<String>)>,
        zones: Vec<(String, Vec<String>)>,
    ) -> Result<Self> {
        let destination_names: Vec<String> = destinations.iter().map(|(n, _)| n.clone()).collect();
        let zone_names: Vec<String> = zones.iter().map(|(n, _)| n.clone()).collect();
        let table = PrefixTable::new(
            destinations
                .into_iter()
                .enumerate()
                .flat_map(|(i, (_, ps))| ps.into_iter().map(move |p| (p, i as u32))),
        )?;
        let ztable = ZoneTable::new(
            zones
                .into_iter()
                .enumerate()
                .flat_map(|(i, (_, ns))| ns.into_iter().map(move |n| (n, i as u32))),
        )?;
        if plans.len() > usize::from(u16::MAX) {
            return Err(Error::Config("too many plans".into()));
        }
        let mut built: Vec<Plan> = Vec::with_capacity(plans.len());
        for p in plans {
            if p.name.is_empty() {
                return Err(Error::Config("a plan needs a name".into()));
            }
            if built.iter().any(|b| *b.name == *p.name) {
                return Err(Error::Config(format!("plan {:?} is defined twice", p.name)));
            }
            built.push(Plan::new(p, &destination_names, &zone_names)?);
        }
        let default_plan = built
            .iter()
            .position(|p| &*p.name == DEFAULT_PLAN)
            .map(|i| i as u16);
        Ok(Catalog {
            currency,
            plans: built,
            default_plan,
            destinations: table,
            destination_names,
            zones: ztable,
            zone_names,
        })
    }

    /// The plans.
    pub fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// The plan at `index`.
    pub fn plan(&self, index: u16) -> Option<&Plan> {
        self.plans.get(usize::from(index))
    }

    /// The index of the plan named `name` (none: [`DEFAULT_PLAN`]).
    pub fn plan_index(&self, name: Option<&str>) -> Option<u16> {
        match name {
            None => self.default_plan,
            Some(n) => self
                .plans
                .iter()
                .position(|p| &*p.name == n)
                .map(|i| i as u16),
        }
    }

    /// The plan named `name` (none: [`DEFAULT_PLAN`]).
    pub fn plan_named(&self, name: Option<&str>) -> Option<&Plan> {
        self.plan_index(name).and_then(|i| self.plan(i))
    }

    /// Checks that an account in `currency` (none: the catalog's) may use
    /// the plan `plan` (none: the default plan, which need not exist).
    pub fn check_plan(&self, plan: Option<&str>, currency: Option<Currency>) -> Result<()> {
        let currency = currency.unwrap_or(self.currency);
        let p = match (plan, self.plan_named(plan)) {
            (_, Some(p)) => p,
            (None, None) => return Ok(()),
            (Some(n), None) => {
                let mut known: Vec<&str> = self.plans.iter().map(|p| &*p.name).collect();
                known.sort_unstable();
                return Err(Error::Config(format!(
                    "no plan named {n:?} (plans: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        };
        if p.currency != currency {
            return Err(Error::Config(format!(
                "plan {:?} is priced in {}, the account's money is in {}: a plan must be in the account's currency (gyro converts no money)",
                &*p.name, p.currency, currency
            )));
        }
        Ok(())
    }

    /// Whether any rate of any plan serves this Service-Context-Id.
    pub fn knows_context(&self, ctx: &str) -> bool {
        self.plans.iter().any(|p| p.knows_context(ctx))
    }

    /// The index of the rate of the default plan for `key` under `ctx`
    /// with no destination or zone, at any time (the most specific).
    pub fn find(&self, ctx: &str, key: RatingKey) -> Result<usize, RatingError> {
        let p = self
            .default_plan
            .and_then(|i| self.plan(i))
            .ok_or(RatingError::UnknownContext)?;
        p.candidates(ctx, key, Location::default())
            .map(|c| usize::from(c[0]))
    }

    /// The default plan's rate at `index`.
    pub fn tariff(&self, index: usize) -> Option<&Tariff> {
        self.default_plan
            .and_then(|i| self.plan(i))
            .and_then(|p| p.rates.get(index))
    }

    /// Whether any destination prefix is configured.
    pub fn has_destinations(&self) -> bool {
        !self.destinations.is_empty()
    }

    /// Whether any roaming zone is configured.
    pub fn has_zones(&self) -> bool {
        !self.zones.is_empty()
    }

    /// The destination of a called-party address (longest prefix).
    pub fn destination_of(&self, called: &str) -> Option<u32> {
        self.destinations.lookup(called)
    }

    /// The zone of a visited network (MCC and MNC digits).
    pub fn zone_of(&self, plmn: &str) -> Option<u32> {
        self.zones.lookup(plmn)
    }

    /// Where a request with this called party and visited network is.
    pub fn locate(&self, called: &str, visited: &str) -> Location {
        Location {
            destination: if called.is_empty() {
                None
            } else {
                self.destination_of(called)
            },
            zone: if visited.is_empty() {
                None
            } else {
                self.zone_of(visited)
            },
        }
    }

    /// Where a session with this rating context is.
    pub fn locate_context(&self, ctx: &crate::session::RatingContext) -> Location {
        Location {
            destination: ctx
                .called
                .and_then(|d| self.destinations.lookup_digits(d.as_bytes())),
            zone: ctx.visited.and_then(|v| {
                if v.is_empty() {
                    None
                } else {
                    self.zone_of(v.as_str())
                }
            }),
        }
    }

    /// A destination's name.
    pub fn destination_name(&self, index: u32) -> Option<&str> {
        self.destination_names
            .get(index as usize)
            .map(String::as_str)
    }

    /// A zone's name.
    pub fn zone_name(&self, index: u32) -> Option<&str> {
        self.zone_names.get(index as usize).map(String::as_str)
    }

    /// Number of destination prefixes.
    pub fn destination_prefixes(&self) -> usize {
        self.destinations.len_prefixes()
    }
}

/// The clock of one plan: the segment the latest instant rated is in, and
/// the segment starts of the week after it.
#[derive(Clone, Debug)]
struct Clock {
    from: Timestamp,
    until: Timestamp,
    segment: u16,
    upcoming: Vec<(Timestamp, u16)>,
    generation: u32,
}

/// A remembered rating: the candidates of one (context, key, location),
/// and the choice in the clock generation it was made in.
#[derive(Clone, Debug)]
struct Entry {
    key: RatingKey,
    loc: Location,
    candidates: Result<Candidates, RatingError>,
    chosen: Option<(u32, Option<Choice>)>,
}

#[derive(Clone, Debug, Default)]
struct PlanMemo {
    /// Each context's list of entries, by index into `lists`.
    contexts: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    lists: Vec<Vec<Entry>>,
    clock: Option<Clock>,
}

/// Where the entries of the context a request is rated in are, remembered
/// for the request's other units: the plan, the context string (its
/// address and length: the request's own, unchanged while it is answered)
/// and the list.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContextHint {
    plan: u16,
    ptr: usize,
    len: usize,
    list: u32,
}

/// What rating has found before, per plan: the candidate rates per
/// Service-Context-Id, rating key and location, and the plan's clock. The
/// catalog does not change under an engine; at most
/// [`RatingMemo::CONTEXTS`] contexts of [`RatingMemo::KEYS`] keys each are
/// remembered per plan (past that, rating answers without remembering).
#[derive(Clone, Debug, Default)]
pub(crate) struct RatingMemo {
    plans: Vec<PlanMemo>,
}

/// Clock generation meaning "not the remembered clock".
const NO_GENERATION: u32 = u32::MAX;

impl RatingMemo {
    /// Most contexts remembered per plan.
    pub(crate) const CONTEXTS: usize = 256;
    /// Most rating keys and locations remembered per context.
    pub(crate) const KEYS: usize = 64;

    /// When the segment of plan `plan`'s week that holds `at` began, when
    /// the remembered clock knows it (always for a plan without time
    /// windows: the beginning of time). Rating at any instant from then
    /// to `at` chooses as at `at`.
    pub(crate) fn segment_start(
        &self,
        catalog: &Catalog,
        plan: u16,
        at: Timestamp,
    ) -> Option<Timestamp> {
        let p = catalog.plan(plan)?;
        if !p.schedule.is_timed() {
            return Some(Timestamp(0));
        }
        match &self.plans.get(usize::from(plan))?.clock {
            Some(c) if c.from <= at && at < c.until => Some(c.from),
            _ => None,
        }
    }

    /// [`Plan::rate_at`] of plan `plan` of `catalog`, remembered.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rate(
        &mut self,
        catalog: &Catalog,
        plan: u16,
        ctx: &str,
        key: RatingKey,
        loc: Location,
        at: Timestamp,
        hint: &mut Option<ContextHint>,
    ) -> Result<Choice, RatingError> {
        let Some(p) = catalog.plan(plan) else {
            return Err(RatingError::UnknownContext);
        };
        let i = usize::from(plan);
        if self.plans.len() <= i {
            self.plans.resize_with(i + 1, PlanMemo::default);
        }
        let memo = &mut self.plans[i];
        // The segment `at` is in, from the clock when it covers `at`.
        let mut scratch = None;
        let (segment, generation) = if !p.schedule.is_timed() {
            (0, 0)
        } else {
            match &memo.clock {
                Some(c) if c.from <= at && at < c.until => (c.segment, c.generation),
                _ => {
                    let placed = p.schedule.place(at);
                    let upcoming = p.schedule.upcoming(at);
                    let forward = memo.clock.as_ref().is_none_or(|c| at >= c.until);
                    if forward {
                        let generation = memo
                            .clock
                            .as_ref()
                            .map_or(0, |c| c.generation.wrapping_add(1) % NO_GENERATION);
                        memo.clock = Some(Clock {
                            from: placed.from,
                            until: placed.until,
                            segment: placed.segment,
                            upcoming,
                            generation,
                        });
                        (placed.segment, generation)
                    } else {
                        scratch = Some(upcoming);
                        (placed.segment, NO_GENERATION)
                    }
                }
            }
        };
        let PlanMemo {
            contexts,
            lists,
            clock,
        } = memo;
        let upcoming: &[(Timestamp, u16)] = match (&scratch, clock) {
            (Some(u), _) => u,
            (None, Some(c)) if p.schedule.is_timed() => &c.upcoming,
            _ => &[],
        };
        let (ptr, len) = (ctx.as_ptr() as usize, ctx.len());
        let list = match *hint {
            Some(h) if h.plan == plan && h.ptr == ptr && h.len == len => h.list,
            _ => {
                let list = match contexts.get(ctx) {
                    Some(&l) => l,
                    None if contexts.len() >= Self::CONTEXTS => {
                        let c = p.candidates(ctx, key, loc)?;
                        return p.choose(&c, segment, upcoming).ok_or(RatingError::NoTariff);
                    }
                    None => {
                        let l = lists.len() as u32;
                        lists.push(Vec::new());
                        contexts.insert(ctx.into(), l);
                        l
                    }
                };
                *hint = Some(ContextHint {
                    plan,
                    ptr,
                    len,
                    list,
                });
                list
            }
        };
        let entries = &mut lists[list as usize];
        Self::choose_in(entries, p, ctx, key, loc, segment, upcoming, generation)
    }

    /// The choice for `key` at `loc` among a context's remembered entries.
    #[allow(clippy::too_many_arguments)]
    fn choose_in(
        entries: &mut Vec<Entry>,
        p: &Plan,
        ctx: &str,
        key: RatingKey,
        loc: Location,
        segment: u16,
        upcoming: &[(Timestamp, u16)],
        generation: u32,
    ) -> Result<Choice, RatingError> {
        let idx = match entries.iter().position(|e| e.key == key && e.loc == loc) {
            Some(i) => i,
            None => {
                let candidates = p.candidates(ctx, key, loc);
                if entries.len() >= Self::KEYS {
                    let c = candidates?;
                    return p.choose(&c, segment, upcoming).ok_or(RatingError::NoTariff);
                }
                entries.push(Entry {
                    key,
                    loc,
                    candidates,
                    chosen: None,
                });
                entries.len() - 1
            }
        };
        let e = &mut entries[idx];
        let c = match &e.candidates {
            Ok(c) => c,
            Err(err) => return Err(*err),
        };
        if let Some((g, choice)) = e.chosen {
            if g == generation && generation != NO_GENERATION {
                return choice.ok_or(RatingError::NoTariff);
            }
        }
        let choice = p.choose(c, segment, upcoming);
        if generation != NO_GENERATION {
            e.chosen = Some((generation, choice));
        }
        choice.ok_or(RatingError::NoTariff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::UnitKind;
    use proptest::prelude::*;
    use schedule::{HourWindow, Weekday};

    fn rate(name: &str) -> Tariff {
        Tariff {
            name: name.into(),
            service_context: "32251@3gpp.org".into(),
            unit: UnitKind::Octets,
            price: 100,
            per: 1_000_000,
            default_quota: 1_000_000,
            ..Tariff::default()
        }
    }

    fn key(rg: Option<u32>, sid: Option<u32>) -> RatingKey {
        RatingKey {
            rating_group: rg,
            service_id: sid,
        }
    }

    fn catalog(rates: Vec<Tariff>, zone: &str) -> Catalog {
        Catalog::build(
            Currency::default(),
            vec![PlanSpec {
                name: "p".into(),
                currency: Currency::default(),
                time_zone: zone.into(),
                rates,
            }],
            vec![
                ("premium".into(), vec!["4690".into(), "46939".into()]),
                ("sweden".into(), vec!["46".into()]),
            ],
            vec![("eu".into(), vec!["262".into(), "20801".into()])],
        )
        .unwrap()
    }

    fn at(s: &str) -> Timestamp {
        let ts: jiff::Timestamp = s.parse().unwrap();
        Timestamp(ts.as_millisecond() as u64)
    }

    #[test]
    fn each_selection_rule_narrows_and_the_most_specific_wins() {
        let c = catalog(
            vec![
                rate("any"),
                Tariff {
                    rating_group: Some(10),
                    ..rate("rg10")
                },
                Tariff {
                    service_identifier: Some(7),
                    ..rate("sid7")
                },
                Tariff {
                    rating_group: Some(10),
                    service_identifier: Some(7),
                    ..rate("rg10-sid7")
                },
                Tariff {
                    destination: Some("premium".into()),
                    ..rate("premium")
                },
                Tariff {
                    zone: Some("eu".into()),
                    ..rate("eu")
                },
                Tariff {
                    hours: Some(HourWindow::parse("22:00-06:00").unwrap()),
                    ..rate("night")
                },
            ],
            "UTC",
        );
        let p = c.plan(0).unwrap();
        let name = |k, loc, t| {
            p.rate(p.rate_at("1.32251@3gpp.org", k, loc, at(t)).unwrap().rate)
                .unwrap()
                .name
                .clone()
        };
        let home = Location::default();
        let noon = "2026-01-15T12:00:00Z";
        let night = "2026-01-15T23:00:00Z";
        assert_eq!(name(key(None, None), home, noon), "any");
        assert_eq!(name(key(None, None), home, night), "night");
        assert_eq!(name(key(Some(10), None), home, night), "rg10");
        assert_eq!(name(key(None, Some(7)), home, noon), "sid7");
        assert_eq!(name(key(Some(10), Some(7)), home, noon), "rg10-sid7");
        let premium = c.locate("+46901234", "");
        assert_eq!(
            c.destination_name(premium.destination.unwrap()),
            Some("premium")
        );
        assert_eq!(name(key(Some(10), Some(7)), premium, noon), "premium");
        let roaming = c.locate("+46901234", "26203");
        assert_eq!(c.zone_name(roaming.zone.unwrap()), Some("eu"));
        assert_eq!(name(key(None, None), roaming, noon), "eu");
        assert_eq!(
            p.rate_at("32274@3gpp.org", key(None, None), home, at(noon)),
            Err(RatingError::UnknownContext)
        );
    }

    #[test]
    fn the_next_price_change_is_found_across_the_week() {
        let c = catalog(
            vec![
                Tariff {
                    days: vec![Weekday::Sat, Weekday::Sun],
                    ..rate("weekend")
                },
                Tariff {
                    hours: Some(HourWindow::parse("08:00-18:00").unwrap()),
                    ..rate("peak")
                },
                rate("off-peak"),
            ],
            "Europe/Stockholm",
        );
        let p = c.plan(0).unwrap();
        let k = key(None, None);
        // Friday 2026-01-16 17:30 Stockholm (16:30 UTC): peak until 18:00.
        let ch = p
            .rate_at(
                "32251@3gpp.org",
                k,
                Location::default(),
                at("2026-01-16T16:30:00Z"),
            )
            .unwrap();
        assert_eq!(p.rate(ch.rate).unwrap().name, "peak");
        let (when, next) = ch.change.unwrap();
        assert_eq!(when, at("2026-01-16T17:00:00Z"));
        assert_eq!(p.rate(next).unwrap().name, "off-peak");
        // Friday night: off-peak until the weekend starts at midnight.
        let ch = p
            .rate_at(
                "32251@3gpp.org",
                k,
                Location::default(),
                at("2026-01-16T20:00:00Z"),
            )
            .unwrap();
        assert_eq!(ch.change.unwrap().0, at("2026-01-16T23:00:00Z"));
        assert_eq!(p.rate(ch.change.unwrap().1).unwrap().name, "weekend");
        // Saturday noon: the weekend rate beats peak hours (listed first),
        // and the next change is Monday 08:00.
        let ch = p
            .rate_at(
                "32251@3gpp.org",
                k,
                Location::default(),
                at("2026-01-17T11:00:00Z"),
            )
            .unwrap();
        assert_eq!(p.rate(ch.rate).unwrap().name, "weekend");
        assert_eq!(ch.change.unwrap().0, at("2026-01-18T23:00:00Z"));
        assert_eq!(p.rate(ch.change.unwrap().1).unwrap().name, "off-peak");
    }

    #[test]
    fn plans_in_another_currency_are_refused_naming_both() {
        let c = Catalog::build(
            Currency::from_alpha("SEK").unwrap(),
            vec![PlanSpec {
                name: "travel".into(),
                currency: Currency::from_alpha("EUR").unwrap(),
                time_zone: "UTC".into(),
                rates: vec![rate("x")],
            }],
            vec![],
            vec![],
        )
        .unwrap();
        let e = c.check_plan(Some("travel"), None).unwrap_err().to_string();
        assert!(e.contains("EUR (978") && e.contains("SEK (752"), "{e}");
        assert!(c
            .check_plan(Some("travel"), Currency::from_alpha("EUR"))
            .is_ok());
        let e = c.check_plan(Some("nope"), None).unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("travel"), "{e}");
        // No default plan: accounts without a plan are allowed (they get
        // 5031 when they use a service).
        assert!(c.check_plan(None, None).is_ok());
    }

    #[test]
    fn unknown_names_and_time_zones_are_configuration_errors() {
        let spec = |r: Tariff, tz: &str| PlanSpec {
            name: "p".into(),
            currency: Currency::default(),
            time_zone: tz.into(),
            rates: vec![r],
        };
        for (s, what) in [
            (
                spec(
                    Tariff {
                        destination: Some("moon".into()),
                        ..rate("x")
                    },
                    "UTC",
                ),
                "moon",
            ),
            (
                spec(
                    Tariff {
                        zone: Some("mars".into()),
                        ..rate("x")
                    },
                    "UTC",
                ),
                "mars",
            ),
            (spec(rate("x"), "Nowhere/Town"), "Nowhere/Town"),
        ] {
            let e = Catalog::build(Currency::default(), vec![s], vec![], vec![])
                .unwrap_err()
                .to_string();
            assert!(e.contains(what), "{e}");
        }
        let two = vec![spec(rate("x"), "UTC"), spec(rate("y"), "UTC")];
        assert!(Catalog::build(Currency::default(), two, vec![], vec![]).is_err());
    }

    proptest! {
        /// The memo answers what the plan answers, at any instant in any
        /// order (the clock moving forward and back).
        #[test]
        fn remembered_ratings_are_what_the_plan_rates(
            times in proptest::collection::vec(1_767_225_600_000u64..1_767_225_600_000 + 30 * 86_400_000, 1..40),
            keys in proptest::collection::vec((proptest::option::of(9u32..12), proptest::option::of(6u32..8)), 1..6),
            called in proptest::collection::vec(prop_oneof!["4690[0-9]{3}", "46[0-9]{5}", "1[0-9]{4}"], 1..4),
        ) {
            let c = catalog(
                vec![
                    Tariff { hours: Some(HourWindow::parse("22:00-06:00").unwrap()), ..rate("night") },
                    Tariff { days: vec![Weekday::Sun], rating_group: Some(10), ..rate("sun10") },
                    Tariff { destination: Some("premium".into()), hours: Some(HourWindow::parse("08:00-20:00").unwrap()), ..rate("premium-day") },
                    Tariff { destination: Some("premium".into()), ..rate("premium") },
                    Tariff { rating_group: Some(11), ..rate("rg11") },
                    rate("any"),
                ],
                "Europe/Stockholm",
            );
            let p = c.plan(0).unwrap();
            let mut memo = RatingMemo::default();
            for &t in &times {
                for &(rg, sid) in &keys {
                    for n in &called {
                        let loc = c.locate(n, "");
                        let k = key(rg, sid);
                        let want = p.rate_at("32251@3gpp.org", k, loc, Timestamp(t));
                        let got = memo.rate(&c, 0, "32251@3gpp.org", k, loc, Timestamp(t), &mut None);
                        prop_assert_eq!(got, want);
                    }
                }
            }
        }
    }
}
