//! Cron expressions as cron users write them: 5 fields (minute first) or 6 (seconds
//! first), the `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight` and
//! `@hourly` shorthands, names (`MON`, `JAN`), `L`, `#` and `W`. croner evaluates the
//! fields; this module checks them first and evaluates `W` itself.
//!
//! Decisions:
//! - A number outside its field's range is refused naming the field and the range
//!   (`the hour field has 25; allowed 0–23`), before croner sees it.
//! - `W` follows Quartz: `15W` is the weekday nearest the 15th, within the same month —
//!   `1W` on a Saturday is Monday the 3rd, `31W` on a Sunday is Friday the 29th; `LW` is the
//!   last weekday of the month. A month without that day (`30W` in February) has no
//!   occurrence. `W` takes one day, and cannot be combined with a day of the week (Quartz
//!   refuses both too); croner's own `W` does not cross a month's edge, so it is never used.
//! - Daylight saving is as for every schedule (see `schedule`): the first valid time after a
//!   gap, the first instance of a repeated time.
// Everything here reads outside input (cron expressions): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

use crate::zone::Zone;
use chrono::{DateTime, Datelike, Days, NaiveDate, TimeZone, Utc, Weekday};

/// Longest search, in days skipped, for a `W` day that matches: a century of a
/// February-only schedule, and far beyond anything that can match at all.
const MAX_W_DAYS: usize = 40_000;

/// A parsed cron expression.
#[derive(Clone, Debug)]
pub struct CronExpr {
    /// As written (shorthands too): what is stored and compared.
    text: String,
    /// The fields croner evaluates (a `W` day of month replaced by `*`).
    cron: croner::Cron,
    near_weekday: Option<NearWeekday>,
}

/// The day of month of a `W` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NearWeekday {
    /// `NW`: the weekday nearest day N.
    Day(u32),
    /// `LW`: the last weekday.
    Last,
}

/// Why an expression is not a cron expression.
type CronError = String;

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
};
const FIVE_FIELDS: [Field; 5] = [
    Field {
        name: "minute",
        min: 0,
        max: 59,
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
    },
    Field {
        name: "day-of-month",
        min: 1,
        max: 31,
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
    },
    Field {
        name: "day-of-week",
        min: 0,
        max: 7,
    },
];

/// The 5-field expression a shorthand stands for.
fn shorthand(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

/// Whether `text` looks like a cron expression at all (a shorthand, or 5 or 6 fields).
pub fn looks_like_cron(text: &str) -> bool {
    shorthand(text.trim()).is_some() || (5..=6).contains(&text.split_whitespace().count())
}

impl CronExpr {
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let text = text.trim();
        let expanded = shorthand(text).unwrap_or(text);
        let mut fields: Vec<String> = expanded.split_whitespace().map(str::to_owned).collect();
        let kinds: Vec<&Field> = match fields.len() {
            5 => FIVE_FIELDS.iter().collect(),
            6 => std::iter::once(&SECOND).chain(FIVE_FIELDS.iter()).collect(),
            n => return Err(format!("{n} fields; a cron expression has 5 or 6")),
        };
        for (value, kind) in fields.iter().zip(&kinds) {
            check_field(value, kind)?;
        }
        let day_of_month = fields.len() - 3;
        let near_weekday = near_weekday(&fields, day_of_month)?;
        if near_weekday.is_some()
            && let Some(field) = fields.get_mut(day_of_month)
        {
            *field = "*".into();
        }
        let cron = croner::Cron::new(&fields.join(" "))
            .with_seconds_optional()
            .parse()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            text: text.to_owned(),
            cron,
            near_weekday,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first occurrence in `zone` at or after `from` (`inclusive`) or strictly after.
    fn next_local(
        &self,
        from: &DateTime<Zone>,
        inclusive: bool,
        zone: Zone,
    ) -> Option<DateTime<Zone>> {
        let Some(near) = self.near_weekday else {
            return self.cron.find_next_occurrence(from, inclusive).ok();
        };
        let mut candidate = self.cron.find_next_occurrence(from, inclusive).ok()?;
        for _ in 0..MAX_W_DAYS {
            let date = candidate.date_naive();
            if near.day_in(date.year(), date.month()) == Some(date.day()) {
                return Some(candidate);
            }
            let next_day = date.checked_add_days(Days::new(1))?;
            let midnight = next_day.and_hms_opt(0, 0, 0)?;
            // A zone whose clocks skip midnight: the first instant of that day is later.
            let start = zone.from_local_datetime(&midnight).earliest().or_else(|| {
                zone.from_local_datetime(&(midnight + chrono::Duration::hours(1)))
                    .earliest()
            })?;
            candidate = self.cron.find_next_occurrence(&start, true).ok()?;
        }
        None
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        let mut from = zone.from_utc_datetime(&after.naive_utc());
        // In the autumn overlap the search, which works on local time, can land on the
        // first instance of a local time that is already behind us: go on.
        for _ in 0..4 {
            let next = self.next_local(&from, false, zone)?;
            let next_utc = next.with_timezone(&Utc);
            if next_utc > after {
                return Some(next_utc);
            }
            from = next;
        }
        None
    }
}

/// Checks every number in one field against the field's range. Syntax beyond numbers
/// (names, `L`, `#`, steps) is left to croner, which says what is wrong with it.
fn check_field(value: &str, field: &Field) -> Result<(), CronError> {
    for part in value.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        if let Some(step) = step
            && let Ok(n) = step.parse::<u64>()
            && n == 0
        {
            return Err(format!("the {} field has a step of 0", field.name));
        }
        for end in range.split('-') {
            let number = end.split('#').next().unwrap_or(end);
            let number = number.trim_end_matches(['L', 'l', 'W', 'w']);
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let in_range = number
                .parse::<u32>()
                .is_ok_and(|n| (field.min..=field.max).contains(&n));
            if !in_range {
                return Err(format!(
                    "the {} field has {number}; allowed {}–{}",
                    field.name, field.min, field.max
                ));
            }
        }
    }
    Ok(())
}

/// The `W` of the day-of-month field, checked; `None` when there is none.
fn near_weekday(fields: &[String], day_of_month: usize) -> Result<Option<NearWeekday>, CronError> {
    let Some(value) = fields.get(day_of_month) else {
        return Ok(None);
    };
    if !value.contains(['W', 'w']) {
        return Ok(None);
    }
    let upper = value.to_ascii_uppercase();
    let near = if upper == "LW" {
        NearWeekday::Last
    } else {
        let day = upper
            .strip_suffix('W')
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u32>().ok())
            .filter(|d| (1..=31).contains(d))
            .ok_or_else(|| {
                format!(
                    "the day-of-month field {value:?}: W takes one day (15W: the weekday nearest the 15th) or LW (the last weekday)"
                )
            })?;
        NearWeekday::Day(day)
    };
    let day_of_week = fields.last().map_or("*", String::as_str);
    if day_of_week != "*" && day_of_week != "?" {
        return Err(format!(
            "a W day of month ({value}) cannot be combined with a day of week ({day_of_week}); use * for the day of week"
        ));
    }
    Ok(Some(near))
}

impl NearWeekday {
    /// The day of `year`-`month` this stands for, or `None` when the month lacks it.
    fn day_in(self, year: i32, month: u32) -> Option<u32> {
        let last = last_day(year, month)?;
        let (day, weekday) = match self {
            NearWeekday::Day(day) if day > last => return None,
            NearWeekday::Day(day) => (day, NaiveDate::from_ymd_opt(year, month, day)?.weekday()),
            NearWeekday::Last => (last, NaiveDate::from_ymd_opt(year, month, last)?.weekday()),
        };
        Some(match weekday {
            // Saturday: Friday before, unless that is in the previous month.
            Weekday::Sat if day == 1 => 3,
            Weekday::Sat => day - 1,
            // Sunday: Monday after, unless that is in the next month.
            Weekday::Sun if day == last => day.checked_sub(2)?,
            Weekday::Sun => day + 1,
            _ => day,
        })
    }
}

fn last_day(year: i32, month: u32) -> Option<u32> {
    let first_of_next = if month == 12 {
        NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    Some(first_of_next.pred_opt()?.day())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn next(expr: &str, after: &str) -> Option<DateTime<Utc>> {
        CronExpr::parse(expr)
            .unwrap()
            .next_after(utc(after), crate::zone::Zone::UTC)
    }

    #[test]
    fn w_is_the_nearest_weekday_within_the_month() {
        let table = [
            // May 1 2027 is a Saturday: Monday the 3rd, not Friday April 30.
            ("0 0 1W 5 *", "2027-01-01T00:00:00Z", "2027-05-03T00:00:00Z"),
            // October 31 2027 is a Sunday: Friday the 29th, not Monday November 1.
            (
                "0 0 31W 10 *",
                "2027-01-01T00:00:00Z",
                "2027-10-29T00:00:00Z",
            ),
            // A Saturday mid-month: the Friday before; a Sunday: the Monday after.
            (
                "30 9 15W * *",
                "2027-05-01T00:00:00Z",
                "2027-05-14T09:30:00Z",
            ),
            (
                "30 9 15W * *",
                "2027-08-01T00:00:00Z",
                "2027-08-16T09:30:00Z",
            ),
            // A weekday is itself.
            (
                "0 12 3W * *",
                "2027-05-01T00:00:00Z",
                "2027-05-03T12:00:00Z",
            ),
            // Last weekday: July 31 2027 is a Saturday.
            (
                "0 18 LW * *",
                "2027-07-01T00:00:00Z",
                "2027-07-30T18:00:00Z",
            ),
            // February has no 30th: the next month that has one.
            (
                "0 0 30W * *",
                "2027-02-01T00:00:00Z",
                "2027-03-30T00:00:00Z",
            ),
            // With seconds.
            (
                "15 0 0 1W 5 *",
                "2027-01-01T00:00:00Z",
                "2027-05-03T00:00:15Z",
            ),
        ];
        for (expr, after, expected) in table {
            assert_eq!(
                next(expr, after),
                Some(utc(expected)),
                "{expr} after {after}"
            );
        }
        // Several times on the matching day, then the next month.
        let every_hour = CronExpr::parse("0 * 1W 5 *").unwrap();
        let first = every_hour
            .next_after(utc("2027-05-03T05:30:00Z"), crate::zone::Zone::UTC)
            .unwrap();
        assert_eq!(first, utc("2027-05-03T06:00:00Z"));
        let after_day = every_hour
            .next_after(utc("2027-05-03T23:30:00Z"), crate::zone::Zone::UTC)
            .unwrap();
        assert_eq!(
            after_day,
            utc("2028-05-01T00:00:00Z"),
            "May 1 2028 is a Monday"
        );
        // Never: February 30th.
        assert_eq!(next("0 0 30W 2 *", "2027-01-01T00:00:00Z"), None);
    }

    #[test]
    fn w_follows_the_jobs_zone() {
        let berlin: Zone = "Europe/Berlin".parse().unwrap();
        let expr = CronExpr::parse("0 0 1W 5 *").unwrap();
        // Midnight of Monday May 3 in Berlin (summer time) is 22:00 UTC on the 2nd.
        assert_eq!(
            expr.next_after(utc("2027-01-01T00:00:00Z"), berlin),
            Some(utc("2027-05-02T22:00:00Z"))
        );
    }

    #[test]
    fn shorthands_are_what_cron_users_type() {
        let table = [
            ("@hourly", "2027-03-10T10:20:00Z", "2027-03-10T11:00:00Z"),
            ("@daily", "2027-03-10T10:20:00Z", "2027-03-11T00:00:00Z"),
            ("@midnight", "2027-03-10T10:20:00Z", "2027-03-11T00:00:00Z"),
            // March 10 2027 is a Wednesday: Sunday the 14th.
            ("@weekly", "2027-03-10T10:20:00Z", "2027-03-14T00:00:00Z"),
            ("@monthly", "2027-03-10T10:20:00Z", "2027-04-01T00:00:00Z"),
            ("@yearly", "2027-03-10T10:20:00Z", "2028-01-01T00:00:00Z"),
            ("@ANNUALLY", "2027-03-10T10:20:00Z", "2028-01-01T00:00:00Z"),
        ];
        for (expr, after, expected) in table {
            assert_eq!(next(expr, after), Some(utc(expected)), "{expr}");
            assert_eq!(CronExpr::parse(expr).unwrap().as_str(), expr);
        }
    }

    #[test]
    fn a_bad_field_is_named_with_its_range() {
        let table = [
            ("0 25 * * *", "the hour field has 25; allowed 0–23"),
            ("60 * * * *", "the minute field has 60; allowed 0–59"),
            ("0 0 32 * *", "the day-of-month field has 32; allowed 1–31"),
            ("0 0 0 * *", "the day-of-month field has 0; allowed 1–31"),
            ("0 0 1 13 *", "the month field has 13; allowed 1–12"),
            ("0 0 * * 8", "the day-of-week field has 8; allowed 0–7"),
            ("0 0 * * 1-9", "the day-of-week field has 9; allowed 0–7"),
            ("0 0 * * 5#9", ""),
            ("61 0 0 * * *", "the second field has 61; allowed 0–59"),
            ("*/0 * * * *", "the minute field has a step of 0"),
            ("0 0 1,2W * *", "W takes one day"),
            ("0 0 W * *", "W takes one day"),
            ("0 0 15W * MON", "cannot be combined with a day of week"),
            ("@often", "1 fields"),
        ];
        for (expr, message) in table {
            let error = CronExpr::parse(expr).unwrap_err();
            assert!(error.contains(message), "{expr}: {error}");
        }
        for good in [
            "0 0 * * 7",
            "0 0 L * *",
            "0 0 * * 5#3",
            "0 9 * JAN-MAR MON-FRI",
            "*/15 * * * *",
        ] {
            assert!(CronExpr::parse(good).is_ok(), "{good}");
        }
    }
}
