//! Time of day and day of week: when a rate applies, in a plan's time
//! zone.
//!
//! A plan's week is cut into segments at every local time where some
//! rate's window opens or closes (minutes of the week, Monday 00:00 = 0).
//! Within a segment every rate either applies throughout or not at all,
//! so choosing a rate at an instant is finding its segment and testing one
//! bit per candidate rate. Local times become instants through the plan's
//! time zone (the IANA database bundled with `jiff`; no calendar
//! arithmetic of our own): a window that opens inside a daylight-saving
//! gap opens at the first instant after it, one inside a repeated hour at
//! its first occurrence.

use crate::error::{Error, Result};
use crate::types::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Minutes in a day.
pub const DAY: u16 = 24 * 60;
/// Minutes in a week.
pub const WEEK: u16 = 7 * DAY;

/// A day of the week, in configuration as `mon` .. `sun`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weekday {
    /// Monday.
    Mon,
    /// Tuesday.
    Tue,
    /// Wednesday.
    Wed,
    /// Thursday.
    Thu,
    /// Friday.
    Fri,
    /// Saturday.
    Sat,
    /// Sunday.
    Sun,
}

impl Weekday {
    /// Days since Monday.
    pub fn index(self) -> u16 {
        self as u16
    }
}

/// A daily window of local time, `"HH:MM-HH:MM"`: from the first time
/// (inclusive) to the second (exclusive); `"22:00-06:00"` runs past
/// midnight into the next day, `"24:00"` ends at midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HourWindow {
    /// Start, minutes after midnight (0..1440).
    pub start: u16,
    /// End, minutes after midnight (1..=1440).
    pub end: u16,
}

impl HourWindow {
    /// Parses `"HH:MM-HH:MM"`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::Config(format!(
                "hours {s:?}: expected \"HH:MM-HH:MM\" (e.g. \"22:00-06:00\")"
            ))
        };
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let minute = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            if h.is_empty() || h.len() > 2 || m.len() != 2 {
                return None;
            }
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (m < 60 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
        };
        let (start, end) = (minute(a).ok_or_else(bad)?, minute(b).ok_or_else(bad)?);
        if start == end || start >= DAY || end == 0 {
            return Err(bad());
        }
        Ok(HourWindow { start, end })
    }
}

impl fmt::Display for HourWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

impl Serialize for HourWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HourWindow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        HourWindow::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The minute-of-week intervals `[from, to)` (`to` may exceed [`WEEK`]:
/// it wraps) of a rate restricted to `days` (empty: every day) and
/// `hours` (none: all day). Empty when the rate has no time condition.
pub fn intervals(days: &[Weekday], hours: Option<HourWindow>) -> Vec<(u16, u16)> {
    if days.is_empty() && hours.is_none() {
        return Vec::new();
    }
    let all = [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
        Weekday::Sat,
        Weekday::Sun,
    ];
    let days = if days.is_empty() { &all[..] } else { days };
    days.iter()
        .map(|d| {
            let base = d.index() * DAY;
            match hours {
                None => (base, base + DAY),
                Some(w) if w.end > w.start => (base + w.start, base + w.end),
                Some(w) => (base + w.start, base + DAY + w.end),
            }
        })
        .collect()
}

/// Whether minute-of-week `m` falls in one of `intervals`.
pub fn covers(intervals: &[(u16, u16)], m: u16) -> bool {
    intervals
        .iter()
        .any(|&(from, to)| (from <= m && m < to) || (to > WEEK && m < to - WEEK))
}

/// A plan's week cut into segments, and its time zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The time zone's IANA name.
    pub zone_name: String,
    tz: TimeZone,
    /// Segment starts, minutes of the week, sorted; empty: one segment,
    /// the whole week (no rate depends on the time).
    bounds: Vec<u16>,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.zone_name == other.zone_name && self.bounds == other.bounds
    }
}

impl Eq for Schedule {}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            zone_name: "UTC".into(),
            tz: TimeZone::UTC,
            bounds: Vec::new(),
        }
    }
}

/// Where an instant falls in a [`Schedule`]: its segment and the instants
/// the segment started and ends (at most a week apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Segment index.
    pub segment: u16,
    /// When the segment began (at or before the instant).
    pub from: Timestamp,
    /// When the next segment begins (after the instant).
    pub until: Timestamp,
}

impl Schedule {
    /// A schedule in time zone `zone` (an IANA name such as
    /// `"Europe/Stockholm"`, or `"UTC"`) cut at the edges of every
    /// interval in `all`.
    pub fn new(zone: &str, all: &[Vec<(u16, u16)>]) -> Result<Self> {
        let tz =
            TimeZone::get(zone).map_err(|e| Error::Config(format!("time zone {zone:?}: {e}")))?;
        let mut bounds: Vec<u16> = all
            .iter()
            .flatten()
            .flat_map(|&(from, to)| [from % WEEK, to % WEEK])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        Ok(Schedule {
            zone_name: zone.to_string(),
            tz,
            bounds,
        })
    }

    /// Number of segments (1 when nothing depends on the time).
    pub fn segments(&self) -> usize {
        self.bounds.len().max(1)
    }

    /// Whether any rate depends on the time.
    pub fn is_timed(&self) -> bool {
        !self.bounds.is_empty()
    }

    /// The minute of the week segment `s` starts at.
    pub fn start_of(&self, s: u16) -> u16 {
        self.bounds.get(usize::from(s)).copied().unwrap_or(0)
    }

    /// The segment holding minute-of-week `m`.
    pub fn segment_of_minute(&self, m: u16) -> u16 {
        if self.bounds.is_empty() {
            return 0;
        }
        let i = self.bounds.partition_point(|&b| b <= m);
        let n = self.bounds.len();
        ((i + n - 1) % n) as u16
    }

    /// Local minute of the week of `t`.
    fn minute_of_week(&self, t: Timestamp) -> (u16, jiff::civil::DateTime) {
        let ts = jiff::Timestamp::from_millisecond(t.0.min(i64::MAX as u64) as i64)
            .unwrap_or(jiff::Timestamp::MAX);
        let dt = self.tz.to_datetime(ts);
        let m = dt.weekday().to_monday_zero_offset() as u16 * DAY
            + dt.hour() as u16 * 60
            + dt.minute() as u16;
        (m, dt)
    }

    /// The instant of local minute-of-week `target`, at or after the local
    /// time `dt` whose minute of the week is `m`, searching forward up to
    /// one week (`strictly`: after `m`, not at it).
    fn next_instant(
        &self,
        dt: jiff::civil::DateTime,
        m: u16,
        target: u16,
        strictly: bool,
    ) -> Timestamp {
        let mut ahead = (target + WEEK - m) % WEEK;
        if ahead == 0 && strictly {
            ahead = WEEK;
        }
        let start = dt.start_of_day();
        let minutes = i64::from(m % DAY) + i64::from(ahead);
        let local = start
            .checked_add(jiff::Span::new().minutes(minutes))
            .unwrap_or(start);
        to_ts(self.tz.to_ambiguous_timestamp(local).compatible().ok())
    }

    /// The instant of local minute-of-week `target` at or before the local
    /// time `dt` whose minute of the week is `m`.
    fn prev_instant(&self, dt: jiff::civil::DateTime, m: u16, target: u16) -> Timestamp {
        let back = (m + WEEK - target) % WEEK;
        let start = dt.start_of_day();
        let minutes = i64::from(m % DAY) - i64::from(back);
        let local = start
            .checked_add(jiff::Span::new().minutes(minutes))
            .unwrap_or(start);
        to_ts(self.tz.to_ambiguous_timestamp(local).compatible().ok())
    }

    /// Where `t` falls: its segment, when that began and when it ends.
    /// Without time-dependent rates the one segment spans all time.
    pub fn place(&self, t: Timestamp) -> Placed {
        if self.bounds.is_empty() {
            return Placed {
                segment: 0,
                from: Timestamp(0),
                until: Timestamp(u64::MAX),
            };
        }
        let (m, dt) = self.minute_of_week(t);
        let s = self.segment_of_minute(m);
        let n = self.bounds.len();
        let next = self.bounds[(usize::from(s) + 1) % n];
        let mut from = self.prev_instant(dt, m, self.bounds[usize::from(s)]);
        let mut until = self.next_instant(dt, m, next, true);
        // Around a daylight-saving change the local arithmetic can land
        // an instant on the wrong side; keep the segment around `t`.
        if from > t {
            from = t;
        }
        if until <= t {
            until = Timestamp(t.0 + 1);
        }
        Placed {
            segment: s,
            from,
            until,
        }
    }

    /// The instants of the next segment starts after `t`, in order, with
    /// the segment each starts: one full week of them.
    pub fn upcoming(&self, t: Timestamp) -> Vec<(Timestamp, u16)> {
        if self.bounds.is_empty() {
            return Vec::new();
        }
        let (m, dt) = self.minute_of_week(t);
        let s = self.segment_of_minute(m);
        let n = self.bounds.len();
        let mut out = Vec::with_capacity(n);
        let mut last = t;
        for k in 1..=n {
            let seg = (usize::from(s) + k) % n;
            let mut at = self.next_instant(dt, m, self.bounds[seg], true);
            if at <= last {
                at = Timestamp(last.0 + 1);
            }
            last = at;
            out.push((at, seg as u16));
        }
        out
    }
}

fn to_ts(t: Option<jiff::Timestamp>) -> Timestamp {
    match t {
        Some(t) => Timestamp(u64::try_from(t.as_millisecond()).unwrap_or(0)),
        None => Timestamp(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str, zone: &str) -> Timestamp {
        let tz = TimeZone::get(zone).unwrap();
        let dt: jiff::civil::DateTime = s.parse().unwrap();
        to_ts(tz.to_ambiguous_timestamp(dt).compatible().ok())
    }

    #[test]
    fn hour_windows_parse_and_refuse_nonsense() {
        assert_eq!(
            HourWindow::parse("22:00-06:00").unwrap(),
            HourWindow {
                start: 1320,
                end: 360
            }
        );
        assert_eq!(HourWindow::parse("00:00-24:00").unwrap().end, 1440);
        for bad in ["", "22-06", "25:00-01:00", "10:00-10:00", "1:5-2:00", "x"] {
            assert!(HourWindow::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_night_window_belongs_to_the_day_it_starts() {
        let night = intervals(&[Weekday::Sun], HourWindow::parse("22:00-06:00").ok());
        // Sunday 22:00 to Monday 06:00: wraps the end of the week.
        assert!(covers(&night, 6 * DAY + 23 * 60));
        assert!(covers(&night, 5 * 60));
        assert!(!covers(&night, 6 * 60));
        assert!(!covers(&night, 5 * DAY + 23 * 60));
    }

    #[test]
    fn segments_are_placed_in_the_plans_time_zone() {
        let night = intervals(&[], HourWindow::parse("22:00-06:00").ok());
        let s = Schedule::new("Europe/Stockholm", std::slice::from_ref(&night)).unwrap();
        // Two edges a day, seven days.
        assert_eq!(s.segments(), 14);
        // 2026-01-15 is a Thursday; Stockholm is UTC+1 in winter.
        let t = at("2026-01-15T21:30", "Europe/Stockholm");
        let p = s.place(t);
        assert!(!covers(&night, s.start_of(p.segment)));
        assert_eq!(p.until, at("2026-01-15T22:00", "Europe/Stockholm"));
        assert_eq!(p.from, at("2026-01-15T06:00", "Europe/Stockholm"));
        let p2 = s.place(p.until);
        assert!(covers(&night, s.start_of(p2.segment)));
        assert_eq!(p2.until, at("2026-01-16T06:00", "Europe/Stockholm"));
        let up = s.upcoming(t);
        assert_eq!(up.len(), 14);
        assert_eq!(up[0], (p.until, p2.segment));
        assert_eq!(up[1].0, p2.until);
    }

    #[test]
    fn daylight_saving_days_keep_local_boundaries() {
        // Europe/Stockholm springs forward on 2026-03-29 at 02:00.
        let w = intervals(&[], HourWindow::parse("08:00-18:00").ok());
        let s = Schedule::new("Europe/Stockholm", &[w]).unwrap();
        let t = at("2026-03-28T20:00", "Europe/Stockholm");
        let up = s.upcoming(t);
        assert_eq!(up[0].0, at("2026-03-29T08:00", "Europe/Stockholm"));
        assert_eq!(up[1].0, at("2026-03-29T18:00", "Europe/Stockholm"));
        // 08:00 local on the 29th is 06:00 UTC (UTC+2 from then on).
        assert_eq!(up[0].0, at("2026-03-29T06:00", "UTC"));
    }

    #[test]
    fn an_unknown_time_zone_is_refused() {
        assert!(Schedule::new("Mars/Olympus", &[]).is_err());
    }
}
