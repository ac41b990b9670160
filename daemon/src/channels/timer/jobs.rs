//! Scheduled jobs: their definition, where they came from, and their cursor — the last
//! occurrence that was claimed (run or recorded missed). Jobs made at run time are kept
//! whole in the tree `cron_jobs`, one record per job name, and never touched by the
//! config's reconciliation; the config file's jobs are the file's, held in memory with only
//! their progress in the store ([`super::file_jobs`]). [`super::job_store::JobStore`] is both
//! behind one face.
//!
//! A record leaves out what it need not repeat: the name (it is the record's key), the
//! cursor while it is still the moment the job was made, the origin when it is the config
//! file (records an earlier daemon wrote for config jobs), and the fields that hold their
//! usual value (urgency `parallel`, missed `once`, an hour of lateness, enabled, not paused,
//! no outcome yet). Records written with every field still read; a daemon from before this
//! format cannot read the shorter records (it finds no name and no cursor).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_config::{CronJobConfig, CronWhat};
use steward_events::{ScheduledAction, Urgency};

use steward_protocol::{MissedPolicy, Origin};

use super::schedule::{Schedule, ScheduleError, parse_schedule, parse_zone};
use crate::store::StoreError;

/// How late an occurrence may still run when neither the config nor the caller says.
pub const DEFAULT_MAX_LATENESS_SECS: u64 = 3600;

/// A job's definition: what the config or a tool said.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The record's key; not written in the record (an older record's copy is ignored).
    #[serde(default, skip_serializing)]
    pub name: String,
    pub schedule: String,
    /// IANA zone name.
    pub zone: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ScheduledAction>,
    #[serde(default = "parallel", skip_serializing_if = "is_parallel")]
    pub urgency: Urgency,
    #[serde(default, skip_serializing_if = "is_default")]
    pub missed: MissedPolicy,
    #[serde(
        default = "default_max_lateness_secs",
        skip_serializing_if = "is_default_max_lateness"
    )]
    pub max_lateness_secs: u64,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub spec: JobSpec,
    pub origin: Origin,
    pub paused: bool,
    /// When the job was made: `every` counts from here, and nothing before it is due.
    pub created_at: DateTime<Utc>,
    /// The last occurrence claimed (run or recorded missed).
    pub cursor: DateTime<Utc>,
    /// What its last occurrence came to, for `steward cron list`.
    pub last_outcome: Option<String>,
}

/// A [`Job`] as its record is written (see the module docs for what is left out).
#[derive(Serialize)]
struct RecordOut<'a> {
    spec: &'a JobSpec,
    #[serde(skip_serializing_if = "is_config")]
    origin: Origin,
    #[serde(skip_serializing_if = "is_default")]
    paused: bool,
    created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_outcome: Option<&'a str>,
}

/// A record as read: what was left out takes its usual value.
#[derive(Deserialize)]
struct RecordIn {
    spec: JobSpec,
    #[serde(default = "config")]
    origin: Origin,
    #[serde(default)]
    paused: bool,
    created_at: DateTime<Utc>,
    #[serde(default)]
    cursor: Option<DateTime<Utc>>,
    #[serde(default)]
    last_outcome: Option<String>,
}

impl Job {
    pub(super) fn encode(&self) -> Result<sled::IVec, StoreError> {
        crate::store::encode(&RecordOut {
            spec: &self.spec,
            origin: self.origin,
            paused: self.paused,
            created_at: self.created_at,
            cursor: (self.cursor != self.created_at).then_some(self.cursor),
            last_outcome: self.last_outcome.as_deref(),
        })
    }

    /// The job of the record under `key`; a key that is not UTF-8 is a corrupt record.
    pub(super) fn decode(key: &[u8], bytes: &[u8]) -> Result<Self, StoreError> {
        let name = std::str::from_utf8(key).map_err(|_| StoreError::Corrupt {
            tree: "cron_jobs",
            reason: format!("a job's key is not text: {key:?}"),
        })?;
        let record: RecordIn = crate::store::decode("cron_jobs", bytes)?;
        Ok(Self {
            spec: JobSpec {
                name: name.to_owned(),
                ..record.spec
            },
            origin: record.origin,
            paused: record.paused,
            created_at: record.created_at,
            cursor: record.cursor.unwrap_or(record.created_at),
            last_outcome: record.last_outcome,
        })
    }
}

// The usual values a record leaves out (see the module docs).
fn parallel() -> Urgency {
    Urgency::Parallel
}
fn is_parallel(urgency: &Urgency) -> bool {
    *urgency == Urgency::Parallel
}
fn default_max_lateness_secs() -> u64 {
    DEFAULT_MAX_LATENESS_SECS
}
fn is_default_max_lateness(secs: &u64) -> bool {
    *secs == DEFAULT_MAX_LATENESS_SECS
}
fn yes() -> bool {
    true
}
fn is_true(value: &bool) -> bool {
    *value
}
fn config() -> Origin {
    Origin::Config
}
fn is_config(origin: &Origin) -> bool {
    *origin == Origin::Config
}
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Job {
    pub fn schedule(&self) -> Result<Schedule, ScheduleError> {
        parse_schedule(&self.spec.schedule, self.created_at, self.zone())
    }

    pub fn zone(&self) -> crate::zone::Zone {
        parse_zone(&self.spec.zone).unwrap_or(crate::zone::Zone::UTC)
    }

    pub fn active(&self) -> bool {
        self.spec.enabled && !self.paused
    }
}

/// Distinct (schedule, zone) pairs from which the check uses a second thread: below it the
/// parses take less than starting one.
const CHECK_ON_TWO_THREADS_FROM: usize = 256;

/// A config job that fails the check: its index, the key's last part (`schedule` or `tz`)
/// and why.
pub type JobProblem = (usize, &'static str, String);

/// Checks every config job's schedule and zone (a job that names no zone is in
/// `system_zone`); `Err` is the first job in the file that fails, as a check of one job
/// after another would find it. A file of thousands of jobs names far fewer distinct
/// pairs (10,000 daily jobs at most 1,440), and each is parsed once — with croner ~5 µs
/// each, the most of the start such a file has besides reading it — on two threads when
/// there are many (the start has nothing else for the second core meanwhile).
pub fn check_config_jobs(
    jobs: &[CronJobConfig],
    system_zone: &str,
    now: DateTime<Utc>,
) -> Result<(), JobProblem> {
    let mut first_use: std::collections::HashMap<(&str, &str), usize> = Default::default();
    for (i, job) in jobs.iter().enumerate() {
        let zone = job.tz.as_deref().unwrap_or(system_zone);
        first_use.entry((job.schedule.as_str(), zone)).or_insert(i);
    }
    let pairs: Vec<((&str, &str), usize)> = first_use.into_iter().collect();
    let check = |pairs: &[((&str, &str), usize)]| {
        pairs
            .iter()
            .filter_map(|&((schedule, zone), i)| {
                let tz = match parse_zone(zone) {
                    Ok(tz) => tz,
                    Err(e) => return Some((i, "tz", e.to_string())),
                };
                let parsed = parse_schedule(schedule, now, tz);
                parsed.err().map(|e| (i, "schedule", e.to_string()))
            })
            .min_by_key(|(i, _, _)| *i)
    };
    let first_problem = if pairs.len() < CHECK_ON_TWO_THREADS_FROM {
        check(&pairs)
    } else {
        let (mine, theirs) = pairs.split_at(pairs.len() / 2);
        std::thread::scope(|scope| {
            let other = std::thread::Builder::new()
                .name("config-check".into())
                .spawn_scoped(scope, || check(theirs));
            let found = check(mine);
            // A thread that cannot be started leaves its part to this one.
            let other = match other {
                Ok(thread) => thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => check(theirs),
            };
            found.into_iter().chain(other).min_by_key(|(i, _, _)| *i)
        })
    };
    first_problem.map_or(Ok(()), Err)
}

/// The spec of a checked `[[cron]]` entry (see [`check_config_jobs`]); a job that names no
/// zone is in `system_zone`.
pub fn spec_from_config(job: CronJobConfig, system_zone: &str) -> JobSpec {
    let (text, action) = match job.what {
        CronWhat::Text(text) => (text, None),
        CronWhat::Action { tool, args } => {
            let action = ScheduledAction { tool, args };
            (action_text(&job.name, &action), Some(action))
        }
    };
    JobSpec {
        name: job.name,
        schedule: job.schedule,
        zone: job.tz.unwrap_or_else(|| system_zone.to_owned()),
        text,
        action,
        urgency: job.urgency,
        missed: MissedPolicy::parse(&job.missed).unwrap_or_default(),
        max_lateness_secs: job.max_lateness.as_secs(),
        enabled: job.enabled,
    }
}

/// How an action job's occurrence reads in the trajectory.
pub fn action_text(job: &str, action: &ScheduledAction) -> String {
    format!("scheduled job {job}: {} {}", action.tool, action.args)
}

/// The system's time zone: `TZ`, `/etc/timezone`, the `/etc/localtime` link, else UTC.
pub fn system_zone() -> String {
    let valid = |name: &str| parse_zone(name.trim()).ok().map(|_| name.trim().to_owned());
    if let Some(zone) = std::env::var("TZ")
        .ok()
        .and_then(|tz| valid(tz.trim_start_matches(':')))
    {
        return zone;
    }
    if let Some(zone) = std::fs::read_to_string("/etc/timezone")
        .ok()
        .and_then(|z| valid(&z))
    {
        return zone;
    }
    std::fs::read_link("/etc/localtime")
        .ok()
        .and_then(|target| {
            let target = target.to_string_lossy().into_owned();
            let (_, name) = target.split_once("zoneinfo/")?;
            valid(name)
        })
        .unwrap_or_else(|| "UTC".to_owned())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A config job of the usual kind, for tests here and in the modules beside this one.
    pub(in crate::channels::timer) fn job(
        urgency: Urgency,
        paused: bool,
        last_outcome: Option<&str>,
    ) -> Job {
        let at = "2026-12-05T07:10:12.123456789Z".parse().unwrap();
        Job {
            spec: JobSpec {
                name: "job-1234".into(),
                schedule: "12 9 * * *".into(),
                zone: "UTC".into(),
                text: "job 1234".into(),
                action: None,
                urgency,
                missed: MissedPolicy::Once,
                max_lateness_secs: DEFAULT_MAX_LATENESS_SECS,
                enabled: true,
            },
            origin: Origin::Config,
            paused,
            created_at: at,
            cursor: at,
            last_outcome: last_outcome.map(str::to_owned),
        }
    }

    #[test]
    fn records_leave_out_usual_values_and_read_back_the_same() {
        let usual = job(Urgency::Parallel, false, None);
        let bytes = usual.encode().unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        for left_out in [
            "job-1234\"",
            "origin",
            "cursor",
            "urgency",
            "missed",
            "max_lateness_secs",
            "enabled",
            "paused",
            "last_outcome",
        ] {
            assert!(!text.contains(left_out), "{left_out} in {text}");
        }
        // 263 bytes with every field written, 189 with the usual values left out.
        assert!(bytes.len() < 120, "{} bytes: {text}", bytes.len());
        assert_eq!(Job::decode(b"job-1234", &bytes).unwrap(), usual);

        let base = job(Urgency::Queue, true, Some("ran"));
        let unusual = Job {
            spec: JobSpec {
                missed: MissedPolicy::All,
                max_lateness_secs: 60,
                enabled: false,
                ..base.spec.clone()
            },
            origin: Origin::Runtime,
            cursor: base.created_at + chrono::Duration::hours(25),
            ..base
        };
        let bytes = unusual.encode().unwrap();
        assert_eq!(Job::decode(b"job-1234", &bytes).unwrap(), unusual);
    }

    #[test]
    fn records_written_with_every_field_still_read() {
        let before = br#"{"spec":{"name":"job-1234","schedule":"12 9 * * *","zone":"UTC","text":"job 1234","urgency":"queue","missed":"skip","max_lateness_secs":3600,"enabled":true},"origin":"config","paused":false,"created_at":"2026-12-05T07:10:12.123456789Z","cursor":"2026-12-05T07:10:12.123456789Z","last_outcome":null}"#;
        let read = Job::decode(b"job-1234", before).unwrap();
        assert_eq!(
            read,
            Job {
                spec: JobSpec {
                    missed: MissedPolicy::Skip,
                    ..job(Urgency::Queue, false, None).spec
                },
                ..job(Urgency::Queue, false, None)
            }
        );
        let runtime = br#"{"spec":{"name":"job-1234","schedule":"12 9 * * *","zone":"UTC","text":"job 1234"},"origin":"runtime","created_at":"2026-12-05T07:10:12.123456789Z","cursor":"2026-12-06T09:12:00Z"}"#;
        let read = Job::decode(b"job-1234", runtime).unwrap();
        assert_eq!(read.origin, Origin::Runtime);
        assert_eq!(
            read.cursor,
            "2026-12-06T09:12:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }

    #[test]
    fn a_record_takes_its_name_from_its_key() {
        let stored = job(Urgency::Parallel, false, None).encode().unwrap();
        assert_eq!(
            Job::decode(b"renamed", &stored).unwrap().spec.name,
            "renamed"
        );
        assert!(matches!(
            Job::decode(&[0xff, 0xfe], &stored),
            Err(StoreError::Corrupt { .. })
        ));
    }

    fn config_job(name: &str, schedule: &str, tz: Option<&str>) -> CronJobConfig {
        CronJobConfig {
            name: name.into(),
            schedule: schedule.into(),
            tz: tz.map(str::to_owned),
            what: CronWhat::Text(format!("{name} runs")),
            urgency: Urgency::Parallel,
            missed: "once".into(),
            max_lateness: std::time::Duration::from_secs(DEFAULT_MAX_LATENESS_SECS),
            enabled: true,
            run: Default::default(),
        }
    }

    /// The check names the first job in the file that fails, whichever thread parsed it,
    /// for a file of few distinct schedules (one thread) and for one of many (two).
    #[test]
    fn the_check_names_the_first_job_that_fails() {
        let now = Utc::now();
        for count in [40, 1_000] {
            let mut jobs: Vec<CronJobConfig> = (0..count)
                .map(|i| {
                    config_job(
                        &format!("job-{i}"),
                        &format!("{} {} {} * *", i % 60, i % 24, i % 28 + 1),
                        None,
                    )
                })
                .collect();
            assert_eq!(check_config_jobs(&jobs, "UTC", now), Ok(()));
            let distinct: std::collections::HashSet<&str> =
                jobs.iter().map(|j| j.schedule.as_str()).collect();
            assert_eq!(
                distinct.len() >= CHECK_ON_TWO_THREADS_FROM,
                count > 100,
                "{count} jobs"
            );
            let late = count - 3;
            let early = count / 4;
            jobs[late].schedule = "61 * * * *".into();
            jobs[early].tz = Some("Mars/Olympus".into());
            // A job that uses the failing pair again, later, is not the one named.
            jobs[count - 1] = config_job("again", "61 * * * *", None);
            let (i, field, why) = check_config_jobs(&jobs, "UTC", now).unwrap_err();
            assert_eq!((i, field), (early, "tz"), "{why}");
            jobs[early].tz = None;
            let (i, field, why) = check_config_jobs(&jobs, "UTC", now).unwrap_err();
            assert_eq!((i, field), (late, "schedule"), "{why}");
            assert_eq!(
                check_config_jobs(&jobs[..late], "Nowhere/Nothing", now)
                    .unwrap_err()
                    .1,
                "tz"
            );
        }
    }
}
