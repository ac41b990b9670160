//! When a job is due: schedules parsed from text, the next occurrence after an instant, and
//! what to do with occurrences missed while the daemon was down. Pure functions, no clock.
//!
//! Schedules (the `schedule` of `[[cron]]` and `steward cron add --schedule`):
//! - a cron expression of 5 fields (minute first) or 6 (seconds first), or a shorthand
//!   (`@daily`, `@hourly`, …), read in the job's time zone ([`super::cron`]);
//! - `every DURATION` (`every 30s`, `every 5m`, `every 2h`, `every 1d`), counted from the
//!   job's creation;
//! - `at TIME`: once, at an RFC 3339 time, or `at +20m` (relative to when the job is made).
//!
//! Daylight saving, for cron expressions: a local time that does not exist (the spring gap)
//! runs at the first valid time after the gap (02:30 → 03:00); a local time that exists
//! twice (the autumn overlap) runs once, at its first instance.

use std::time::Duration;

use crate::zone::Zone;
use chrono::{DateTime, Utc};

use steward_protocol::MissedPolicy;

use super::cron::{CronExpr, looks_like_cron};

#[derive(Clone, Debug)]
pub enum Schedule {
    Cron(Box<CronExpr>),
    Every {
        period: Duration,
        from: DateTime<Utc>,
    },
    At(DateTime<Utc>),
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Schedule::Cron(a), Schedule::Cron(b)) => a.as_str() == b.as_str(),
            (Schedule::Every { period, from }, Schedule::Every { period: p, from: f }) => {
                period == p && from == f
            }
            (Schedule::At(a), Schedule::At(b)) => a == b,
            _ => false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScheduleError {
    #[error(
        "{0:?} is not a schedule: use a cron expression (5 or 6 fields, or @daily, @hourly, …), `every 10m`, `in 20m`, `at 09:00`, `tomorrow 9:00`, `at 2026-12-24 18:00` or `at 2026-12-01T09:00:00+01:00`"
    )]
    Unknown(String),
    #[error("invalid cron expression {expr:?}: {reason}")]
    Cron { expr: String, reason: String },
    #[error("{0:?} is not a duration: use a number and s, m, h or d (e.g. 90s, 20m)")]
    Duration(String),
    #[error(
        "{0:?} is not a time: use HH:MM, YYYY-MM-DD HH:MM (in the job's zone) or RFC 3339 (2026-12-01T09:00:00+01:00)"
    )]
    Time(String),
    #[error("{0:?} is not a time zone (e.g. Europe/Berlin, UTC)")]
    Zone(String),
    /// More distinct zone names than any database has (see `crate::zone`).
    #[error("{0}")]
    TooManyZones(String),
}

/// Parses a schedule; `now` anchors `every` and relative times, `zone` is where a local
/// time a person says (`at 09:00`, `tomorrow 9:00`, `at 2026-12-24 18:00`) is meant.
pub fn parse_schedule(
    text: &str,
    now: DateTime<Utc>,
    zone: Zone,
) -> Result<Schedule, ScheduleError> {
    let text = text.trim();
    if let Some(period) = text.strip_prefix("every ") {
        let period = parse_duration(period.trim())?;
        if period.is_zero() {
            return Err(ScheduleError::Duration(text.to_owned()));
        }
        return Ok(Schedule::Every { period, from: now });
    }
    if let Some(delay) = text.strip_prefix("in ") {
        return Ok(Schedule::At(now + parse_duration(delay.trim())?));
    }
    if let Some(when) = text.strip_prefix("tomorrow") {
        let when = when.trim();
        let clock = when.strip_prefix("at ").unwrap_or(when).trim();
        let tomorrow = now.with_timezone(&zone).date_naive() + chrono::Days::new(1);
        return local_instant(tomorrow, parse_clock(clock)?, zone, text).map(Schedule::At);
    }
    if let Some(when) = text.strip_prefix("at ") {
        return parse_at(when.trim(), now, zone).map(Schedule::At);
    }
    if !looks_like_cron(text) {
        return Err(ScheduleError::Unknown(text.to_owned()));
    }
    CronExpr::parse(text)
        .map(|cron| Schedule::Cron(Box::new(cron)))
        .map_err(|reason| ScheduleError::Cron {
            expr: text.to_owned(),
            reason,
        })
}

/// What follows `at`: `+20m`, an RFC 3339 instant, `YYYY-MM-DD HH:MM` or `HH:MM` (the next
/// time the clock shows it) in `zone`.
fn parse_at(when: &str, now: DateTime<Utc>, zone: Zone) -> Result<DateTime<Utc>, ScheduleError> {
    if let Some(relative) = when.strip_prefix('+') {
        return Ok(now + parse_duration(relative)?);
    }
    if let Ok(instant) = DateTime::parse_from_rfc3339(when) {
        return Ok(instant.with_timezone(&Utc));
    }
    if let Ok(local) = chrono::NaiveDateTime::parse_from_str(when, "%Y-%m-%d %H:%M") {
        return local_instant(local.date(), local.time(), zone, when);
    }
    let clock = parse_clock(when)?;
    let today = now.with_timezone(&zone).date_naive();
    let at = local_instant(today, clock, zone, when)?;
    if at > now {
        Ok(at)
    } else {
        local_instant(today + chrono::Days::new(1), clock, zone, when)
    }
}

/// `9:00`, `09:00`, `18:30`.
fn parse_clock(text: &str) -> Result<chrono::NaiveTime, ScheduleError> {
    chrono::NaiveTime::parse_from_str(text, "%H:%M")
        .map_err(|_| ScheduleError::Time(text.to_owned()))
}

/// The instant a local date and time mean in `zone`; the earlier one when the clock shows
/// it twice, an error when it never shows it (a DST gap).
fn local_instant(
    date: chrono::NaiveDate,
    time: chrono::NaiveTime,
    zone: Zone,
    said: &str,
) -> Result<DateTime<Utc>, ScheduleError> {
    use chrono::TimeZone;
    zone.from_local_datetime(&date.and_time(time))
        .earliest()
        .map(|local| local.with_timezone(&Utc))
        .ok_or_else(|| ScheduleError::Time(said.to_owned()))
}

/// `90s`, `20m`, `2h`, `1d`.
fn parse_duration(text: &str) -> Result<Duration, ScheduleError> {
    let bad = || ScheduleError::Duration(text.to_owned());
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_secs = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    number
        .checked_mul(unit_secs)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

pub fn parse_zone(name: &str) -> Result<Zone, ScheduleError> {
    Zone::named(name).map_err(|e| match e {
        crate::zone::UnknownZone::Unknown(_) => ScheduleError::Zone(name.to_owned()),
        crate::zone::UnknownZone::TooMany(_) => ScheduleError::TooManyZones(e.to_string()),
    })
}

impl Schedule {
    /// The first occurrence strictly after `after`; `None` when there is none (a one-shot
    /// that is past, a cron expression that never matches again).
    pub fn next_after(&self, after: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        match self {
            Schedule::At(at) => (*at > after).then_some(*at),
            Schedule::Every { period, from } => {
                let period = chrono::Duration::from_std(*period).ok()?;
                if after < *from {
                    return Some(*from + period);
                }
                let elapsed = (after - *from).num_milliseconds();
                let step = period.num_milliseconds().max(1);
                let n = elapsed / step + 1;
                Some(*from + chrono::Duration::milliseconds(n * step))
            }
            Schedule::Cron(cron) => cron.next_after(after, zone),
        }
    }

    /// Every occurrence in `(after, until]`, oldest first, at most `limit`.
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        zone: Zone,
        limit: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut cursor = after;
        while out.len() < limit {
            match self.next_after(cursor, zone) {
                Some(next) if next <= until => {
                    out.push(next);
                    cursor = next;
                }
                _ => break,
            }
        }
        out
    }
}

/// What to do with the occurrences found due at start.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    pub run: Vec<DateTime<Utc>>,
    pub missed: Vec<DateTime<Utc>>,
}

/// Splits `due` (oldest first, all `<= now`) into occurrences to run now and occurrences to
/// record as missed. An occurrence later than `max_lateness` is never run.
pub fn catch_up(
    due: &[DateTime<Utc>],
    now: DateTime<Utc>,
    policy: MissedPolicy,
    max_lateness: Duration,
) -> CatchUp {
    let lateness = chrono::Duration::from_std(max_lateness).unwrap_or(chrono::Duration::MAX);
    let in_time = |at: &DateTime<Utc>| now - *at <= lateness;
    let mut plan = CatchUp::default();
    match policy {
        MissedPolicy::Skip => plan.missed = due.to_vec(),
        MissedPolicy::All => {
            for at in due {
                if in_time(at) {
                    plan.run.push(*at);
                } else {
                    plan.missed.push(*at);
                }
            }
        }
        MissedPolicy::Once => {
            let latest = due.last().filter(|at| in_time(at));
            for at in due {
                if Some(at) == latest {
                    plan.run.push(*at);
                } else {
                    plan.missed.push(*at);
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn schedules_parse_or_say_why() {
        let now = utc("2026-11-30T10:00:00Z");
        assert!(matches!(
            parse_schedule("0 7 * * *", now, Zone::UTC),
            Ok(Schedule::Cron(_))
        ));
        assert!(matches!(
            parse_schedule("*/2 * * * * *", now, Zone::UTC),
            Ok(Schedule::Cron(_))
        ));
        assert_eq!(
            parse_schedule("every 90s", now, Zone::UTC),
            Ok(Schedule::Every {
                period: Duration::from_secs(90),
                from: now
            })
        );
        assert_eq!(
            parse_schedule("at +20m", now, Zone::UTC),
            Ok(Schedule::At(utc("2026-11-30T10:20:00Z")))
        );
        assert_eq!(
            parse_schedule("at 2026-12-01T09:00:00+01:00", now, Zone::UTC),
            Ok(Schedule::At(utc("2026-12-01T08:00:00Z")))
        );
        // What people say, in the job's zone (Berlin is UTC+1 in winter).
        let berlin = parse_zone("Europe/Berlin").unwrap();
        let said = [
            ("in 20m", "2026-11-30T10:20:00Z"),
            ("at 09:00", "2026-12-01T08:00:00Z"),
            ("at 12:30", "2026-11-30T11:30:00Z"),
            ("tomorrow 9:00", "2026-12-01T08:00:00Z"),
            ("tomorrow at 18:15", "2026-12-01T17:15:00Z"),
            ("at 2026-12-24 18:00", "2026-12-24T17:00:00Z"),
        ];
        for (text, instant) in said {
            assert_eq!(
                parse_schedule(text, now, berlin),
                Ok(Schedule::At(utc(instant))),
                "{text}"
            );
        }
        // A time the clock skips (the spring DST gap) is refused, not guessed.
        assert!(parse_schedule("at 2027-03-28 02:30", now, berlin).is_err());
        let errors = [
            ("tomorrow", "is not a time"),
            ("at 25:00", "is not a time"),
            ("whenever", "is not a schedule"),
            ("61 * * * *", "invalid cron expression"),
            ("0 25 * * *", "the hour field has 25; allowed 0–23"),
            ("every 5 minutes", "is not a duration"),
            ("every 0s", "is not a duration"),
            ("at noon", "RFC 3339"),
        ];
        for (text, message) in errors {
            let error = parse_schedule(text, now, Zone::UTC)
                .unwrap_err()
                .to_string();
            assert!(error.contains(message), "{text}: {error}");
        }
        assert!(parse_zone("Europe/Berlin").is_ok());
        assert!(parse_zone("Mars/Olympus").is_err());
    }

    #[test]
    fn next_occurrences_follow_the_zone() {
        let berlin = parse_zone("Europe/Berlin").unwrap();
        let daily = parse_schedule("0 7 * * *", Utc::now(), Zone::UTC).unwrap();
        // 07:00 in Berlin in winter is 06:00 UTC.
        assert_eq!(
            daily.next_after(utc("2026-11-30T06:30:00Z"), berlin),
            Some(utc("2026-12-01T06:00:00Z"))
        );
        let every = parse_schedule("every 10m", utc("2026-11-30T10:00:00Z"), Zone::UTC).unwrap();
        assert_eq!(
            every.next_after(utc("2026-11-30T10:25:00Z"), berlin),
            Some(utc("2026-11-30T10:30:00Z"))
        );
        let once = parse_schedule("at 2026-11-30T12:00:00Z", Utc::now(), Zone::UTC).unwrap();
        assert_eq!(
            once.next_after(utc("2026-11-30T11:00:00Z"), berlin),
            Some(utc("2026-11-30T12:00:00Z"))
        );
        assert_eq!(once.next_after(utc("2026-11-30T12:00:00Z"), berlin), None);
    }

    #[test]
    fn a_daily_0230_job_runs_once_on_both_transition_days() {
        let berlin = parse_zone("Europe/Berlin").unwrap();
        let job = parse_schedule("30 2 * * *", Utc::now(), Zone::UTC).unwrap();
        // Spring: 2026-03-29, 02:00 → 03:00 local. 02:30 does not exist: it runs at 03:00
        // CEST (01:00 UTC), once.
        let spring = job.between(
            utc("2026-03-28T12:00:00Z"),
            utc("2026-03-30T12:00:00Z"),
            berlin,
            10,
        );
        assert_eq!(
            spring,
            [utc("2026-03-29T01:00:00Z"), utc("2026-03-30T00:30:00Z")],
        );
        // Autumn: 2026-10-25, 03:00 → 02:00 local. 02:30 happens twice: it runs at the
        // first, 02:30 CEST (00:30 UTC), once.
        let autumn = job.between(
            utc("2026-10-24T12:00:00Z"),
            utc("2026-10-26T12:00:00Z"),
            berlin,
            10,
        );
        assert_eq!(
            autumn,
            [utc("2026-10-25T00:30:00Z"), utc("2026-10-26T01:30:00Z")],
        );
        // Searching from inside the repeated hour does not go back to its first 02:30.
        assert_eq!(
            job.next_after(utc("2026-10-25T01:10:00Z"), berlin),
            Some(utc("2026-10-26T01:30:00Z"))
        );
    }

    #[test]
    fn missed_runs_follow_the_policy_and_the_lateness_bound() {
        let now = utc("2026-11-30T10:00:00Z");
        let due = [
            utc("2026-11-30T07:00:00Z"),
            utc("2026-11-30T08:00:00Z"),
            utc("2026-11-30T09:30:00Z"),
        ];
        let hour = Duration::from_secs(3600);
        let table = [
            (MissedPolicy::Skip, hour, vec![], due.to_vec()),
            (MissedPolicy::Once, hour, vec![due[2]], vec![due[0], due[1]]),
            (MissedPolicy::All, hour, vec![due[2]], vec![due[0], due[1]]),
            (MissedPolicy::All, hour * 4, due.to_vec(), vec![]),
            (
                MissedPolicy::Once,
                Duration::from_secs(60),
                vec![],
                due.to_vec(),
            ),
        ];
        for (policy, lateness, run, missed) in table {
            assert_eq!(
                catch_up(&due, now, policy, lateness),
                CatchUp { run, missed },
                "{policy:?} {lateness:?}"
            );
        }
        assert_eq!(
            catch_up(&[], now, MissedPolicy::All, hour),
            CatchUp::default()
        );
    }
}
