//! The config file's `[[cron]]` jobs: their definitions held in memory, only their progress
//! in the store.
//!
//! The file is where a config job is defined, so the store need not repeat it. It used to:
//! one sled record per job, and 10,000 jobs from a file cost ~6 MB of resident memory for
//! as long as the daemon ran — the records in sled's cache, its node vectors and log
//! buffers, and the fragments the writing left in glibc's arenas — against a target of
//! +5 MB for the whole file. Now:
//!
//! - The definitions live in one `FileJobs`: every job's name and its spec (encoded as the
//!   store encoded it, without the name) in one buffer, with an index sorted by name — two
//!   allocations for the whole file, read back on demand like a record.
//! - What the file cannot say is in the store's tree `cron_config`: one **baseline** record,
//!   from which moment each job counts (the moment the daemon first saw it with its present
//!   schedule and zone, grouped: a file's jobs mostly share it), written only when a start
//!   or a reload changes that; and one **progress** record per job that has run, been
//!   paused or been triggered (its cursor, whether it is paused, its last outcome). A job
//!   that has done nothing yet has no record of its own, so a new file of 10,000 jobs is
//!   one write, not 10,000.
//! - A job whose schedule or zone changed counts afresh from the reconciliation (its cursor
//!   moves to then; paused and last outcome stay), as before; a change elsewhere keeps its
//!   cursor. A job gone from the file loses its progress record.
//! - Records of config jobs written by an earlier daemon in `cron_jobs` (one full record per
//!   job), and a runtime job whose name the file now takes, are carried over once: their
//!   moment and progress are kept when the schedule and zone are the same, and the old
//!   record is removed after the new ones are written (a crash between the two leaves the
//!   old record, found and dropped by the next start).
//! - A baseline that cannot be read (another version's, say) does not stop the start: the
//!   jobs count from then, as on a first start, and it is written anew.
//! - A config `at` job that has fired stays (with its cursor past the instant) rather than
//!   being removed: removed, it came back on the next start as a new job counting from then.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_protocol::Origin;

use super::jobs::{Job, JobSpec};
use crate::store::{BatchedWrites, StoreError};

/// The tree's name, for errors about its records.
const TREE: &str = "cron_config";
/// The baseline's key; a job's name is 1-64 letters, digits, `-` or `_`, never this.
const BASELINE_KEY: &[u8] = b"\0baseline";

/// What a config job has done: the part of a [`Job`] the file cannot say.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
struct Progress {
    /// The last occurrence claimed, when it is not the job's counting moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_outcome: Option<String>,
}

impl Progress {
    fn of(job: &Job) -> Self {
        Self {
            cursor: (job.cursor != job.created_at).then_some(job.cursor),
            paused: job.paused,
            last_outcome: job.last_outcome.clone(),
        }
    }
}

/// From which moment each config job counts, grouped by (moment, schedule, zone), as read.
#[derive(Debug, Default, Deserialize)]
struct Baseline {
    groups: Vec<BaselineGroup>,
}

#[derive(Debug, Deserialize)]
struct BaselineGroup {
    since: DateTime<Utc>,
    schedule: String,
    zone: String,
    names: Vec<String>,
}

impl Baseline {
    /// Each job's moment, schedule and zone, by name.
    fn by_name(&self) -> HashMap<&str, (DateTime<Utc>, &str, &str)> {
        self.groups
            .iter()
            .flat_map(|group| {
                group.names.iter().map(move |name| {
                    (
                        name.as_str(),
                        (group.since, group.schedule.as_str(), group.zone.as_str()),
                    )
                })
            })
            .collect()
    }
}

/// A [`Baseline`] as it is written, borrowing the specs' names.
#[derive(Serialize)]
struct BaselineOut<'a> {
    groups: Vec<BaselineGroupOut<'a>>,
}

#[derive(Serialize)]
struct BaselineGroupOut<'a> {
    since: DateTime<Utc>,
    schedule: &'a str,
    zone: &'a str,
    names: Vec<&'a str>,
}

impl<'a> BaselineOut<'a> {
    /// The baseline of `specs`, each counting from its moment in `sinces`; the same jobs
    /// give the same bytes (groups and names in order).
    fn of(specs: &'a [JobSpec], sinces: &[DateTime<Utc>]) -> Self {
        let mut groups: std::collections::BTreeMap<(DateTime<Utc>, &str, &str), Vec<&str>> =
            Default::default();
        for (spec, since) in specs.iter().zip(sinces) {
            groups
                .entry((*since, &spec.schedule, &spec.zone))
                .or_default()
                .push(&spec.name);
        }
        Self {
            groups: groups
                .into_iter()
                .map(|((since, schedule, zone), names)| BaselineGroupOut {
                    since,
                    schedule,
                    zone,
                    names,
                })
                .collect(),
        }
    }
}

/// One job's place in [`FileJobs::bytes`].
#[derive(Debug)]
struct Entry {
    start: u32,
    /// Where the name ends and the encoded spec begins.
    name_end: u32,
    end: u32,
    since: DateTime<Utc>,
}

/// The file's jobs in memory, sorted by name (see the module docs).
#[derive(Debug, Default)]
struct FileJobs {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl FileJobs {
    /// `specs` sorted by name, each counting from its moment in `sinces`.
    fn new(specs: &[JobSpec], sinces: &[DateTime<Utc>]) -> Result<Self, StoreError> {
        let mut bytes = Vec::new();
        let mut entries = Vec::with_capacity(specs.len());
        let offset = |bytes: &Vec<u8>| {
            u32::try_from(bytes.len()).map_err(|_| StoreError::Corrupt {
                tree: TREE,
                reason: "the config file's jobs exceed 4 GB".into(),
            })
        };
        for (spec, since) in specs.iter().zip(sinces) {
            let start = offset(&bytes)?;
            bytes.extend_from_slice(spec.name.as_bytes());
            let name_end = offset(&bytes)?;
            serde_json::to_writer(&mut bytes, spec)?;
            entries.push(Entry {
                start,
                name_end,
                end: offset(&bytes)?,
                since: *since,
            });
        }
        bytes.shrink_to_fit();
        Ok(Self { bytes, entries })
    }

    fn name(&self, entry: &Entry) -> &str {
        self.bytes
            .get(entry.start as usize..entry.name_end as usize)
            .and_then(|name| std::str::from_utf8(name).ok())
            .unwrap_or_default()
    }

    fn find(&self, name: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|entry| self.name(entry).cmp(name))
            .ok()
            .and_then(|i| self.entries.get(i))
    }

    /// The job of `entry`, with `progress`.
    fn job(&self, entry: &Entry, progress: Progress) -> Result<Job, StoreError> {
        let encoded = self
            .bytes
            .get(entry.name_end as usize..entry.end as usize)
            .unwrap_or_default();
        let spec: JobSpec = crate::store::decode(TREE, encoded)?;
        Ok(Job {
            spec: JobSpec {
                name: self.name(entry).to_owned(),
                ..spec
            },
            origin: Origin::Config,
            paused: progress.paused,
            created_at: entry.since,
            cursor: progress.cursor.unwrap_or(entry.since),
            last_outcome: progress.last_outcome,
        })
    }
}

/// The config file's jobs: definitions in memory, progress in the tree `cron_config`.
#[derive(Clone, Debug)]
pub struct ConfigJobs {
    tree: sled::Tree,
    /// Replaced whole when the file is reconciled; readers keep the one they started with.
    jobs: Arc<RwLock<Arc<FileJobs>>>,
}

impl ConfigJobs {
    /// No jobs until [`ConfigJobs::reconcile`] gives it the file's.
    pub fn new(tree: sled::Tree) -> Self {
        Self {
            tree,
            jobs: Arc::default(),
        }
    }

    fn current(&self) -> Arc<FileJobs> {
        match self.jobs.read() {
            Ok(jobs) => jobs.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn progress(&self, name: &str) -> Result<Progress, StoreError> {
        match self.tree.get(name)? {
            Some(bytes) => crate::store::decode(TREE, &bytes),
            None => Ok(Progress::default()),
        }
    }

    pub fn get(&self, name: &str) -> Result<Option<Job>, StoreError> {
        let jobs = self.current();
        let Some(entry) = jobs.find(name) else {
            return Ok(None);
        };
        jobs.job(entry, self.progress(name)?).map(Some)
    }

    /// Every job, by name, read one at a time.
    pub fn iter(&self) -> impl Iterator<Item = Result<Job, StoreError>> + '_ {
        let jobs = self.current();
        (0..jobs.entries.len()).filter_map(move |i| {
            let entry = jobs.entries.get(i)?;
            Some(
                self.progress(jobs.name(entry))
                    .and_then(|progress| jobs.job(entry, progress)),
            )
        })
    }

    /// Saves what `job` has done; `false` when the file no longer has it (a reload took it
    /// away meanwhile), and nothing is written.
    pub fn save(&self, job: &Job) -> Result<bool, StoreError> {
        // Held while writing: a reconciliation that drops the job waits for this write and
        // then removes its record, rather than this write coming after its removal.
        let jobs = self
            .jobs
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if jobs.find(&job.spec.name).is_none() {
            return Ok(false);
        }
        let mut writes = BatchedWrites::new(&self.tree);
        write_progress(&mut writes, &job.spec.name, &Progress::of(job))?;
        writes.finish()?;
        Ok(true)
    }

    /// Makes `specs` the file's jobs (see the module docs). `earlier` are the records in
    /// `cron_jobs` under the names of `specs` and of earlier config jobs: their moment and
    /// progress are carried over where nothing here says otherwise; the caller removes them
    /// once this returns. The baseline is written last, after every progress record.
    pub fn reconcile(
        &self,
        mut specs: Vec<JobSpec>,
        earlier: &HashMap<String, Job>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        // Held throughout, so that no job's progress is saved between its record's removal
        // here and the new jobs taking the old ones' place.
        let mut jobs = self
            .jobs
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let stored_baseline = self.tree.get(BASELINE_KEY)?;
        // Unreadable (written by another version, say), it is not worth refusing to start
        // over: the jobs count from now, and what fell while the daemon was down is lost once.
        let old: Baseline = match &stored_baseline {
            Some(bytes) => crate::store::decode(TREE, bytes).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the config jobs' baseline cannot be read; every config job counts from now");
                Baseline::default()
            }),
            None => Baseline::default(),
        };
        let counted = old.by_name();
        specs.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut writes = BatchedWrites::new(&self.tree);
        let mut sinces = Vec::with_capacity(specs.len());
        for spec in &specs {
            let same = |schedule: &str, zone: &str| schedule == spec.schedule && zone == spec.zone;
            sinces.push(
                match (counted.get(spec.name.as_str()), earlier.get(&spec.name)) {
                    (Some((since, schedule, zone)), _) if same(schedule, zone) => *since,
                    (None, Some(job)) if same(&job.spec.schedule, &job.spec.zone) => {
                        write_progress(&mut writes, &spec.name, &Progress::of(job))?;
                        job.created_at
                    }
                    (_, earlier) => {
                        // Counting afresh: a cursor of the old schedule means nothing now; being
                        // paused and the last outcome stay.
                        let stored = self.tree.get(spec.name.as_bytes())?;
                        let mut progress = match (&stored, earlier) {
                            (Some(bytes), _) => crate::store::decode(TREE, bytes)?,
                            (None, Some(job)) => Progress::of(job),
                            (None, None) => Progress::default(),
                        };
                        progress.cursor = None;
                        if stored.is_some() || progress != Progress::default() {
                            write_progress(&mut writes, &spec.name, &progress)?;
                        }
                        now
                    }
                },
            );
        }
        drop(counted);
        drop(old);
        let kept = FileJobs::new(&specs, &sinces)?;
        for key in self.tree.iter().keys() {
            let key = key?;
            if &*key != BASELINE_KEY
                && std::str::from_utf8(&key).map_or(true, |name| kept.find(name).is_none())
            {
                writes.remove(&key)?;
            }
        }
        let baseline = crate::store::encode(&BaselineOut::of(&specs, &sinces))?;
        if stored_baseline.as_ref() != Some(&baseline) {
            writes.insert(BASELINE_KEY, baseline)?;
        }
        writes.finish()?;
        *jobs = Arc::new(kept);
        Ok(())
    }
}

/// Writes a job's progress record, or removes it when there is nothing to keep.
fn write_progress(
    writes: &mut BatchedWrites<'_>,
    name: &str,
    progress: &Progress,
) -> Result<(), StoreError> {
    if *progress == Progress::default() {
        writes.remove(name.as_bytes())
    } else {
        writes.insert(name.as_bytes(), crate::store::encode(progress)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::timer::job_store::JobStore;
    use crate::channels::timer::jobs::DEFAULT_MAX_LATENESS_SECS;
    use crate::store::Store;

    fn spec(name: &str, schedule: &str) -> JobSpec {
        JobSpec {
            name: name.into(),
            schedule: schedule.into(),
            zone: "UTC".into(),
            text: format!("{name} runs"),
            action: None,
            urgency: steward_events::Urgency::Parallel,
            missed: Default::default(),
            max_lateness_secs: DEFAULT_MAX_LATENESS_SECS,
            enabled: true,
        }
    }

    fn at(hour: u32) -> DateTime<Utc> {
        format!("2026-12-06T{hour:02}:00:00Z").parse().unwrap()
    }

    fn job(jobs: &JobStore, name: &str) -> Job {
        jobs.get(name).unwrap().unwrap()
    }

    /// A new file of many jobs is one record in the store, and every job reads back whole,
    /// counting from the reconciliation.
    #[test]
    fn a_new_file_of_jobs_is_one_record_and_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        let specs: Vec<JobSpec> = (0..500)
            .map(|i| spec(&format!("job-{i}"), &format!("{} 8 * * *", i % 60)))
            .collect();
        jobs.reconcile(specs.clone(), at(7)).unwrap();
        assert_eq!(store.cron_config_tree().unwrap().len(), 1);
        assert_eq!(store.cron_tree().unwrap().len(), 0);
        let all = jobs.all().unwrap();
        assert_eq!(all.len(), 500);
        let mut expected = specs;
        expected.sort_by(|a, b| a.name.cmp(&b.name));
        for (job, spec) in all.iter().zip(&expected) {
            assert_eq!(&job.spec, spec);
            assert_eq!(job.origin, Origin::Config);
            assert_eq!((job.created_at, job.cursor), (at(7), at(7)));
            assert!(!job.paused && job.last_outcome.is_none());
        }
        assert!(jobs.get("job-500").unwrap().is_none());
    }

    /// What a job did survives a restart; a changed schedule counts afresh (cursor reset,
    /// paused and outcome kept); a change elsewhere keeps the cursor; a job gone from the
    /// file loses its record, and comes back new.
    #[test]
    fn progress_follows_the_file_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        let file = || vec![spec("daily", "0 9 * * *"), spec("other", "0 10 * * *")];
        jobs.reconcile(file(), at(7)).unwrap();
        let mut daily = job(&jobs, "daily");
        daily.cursor = at(9);
        daily.paused = true;
        daily.last_outcome = Some("ran".into());
        jobs.put(&daily).unwrap();
        let mut other = job(&jobs, "other");
        other.cursor = at(10);
        jobs.put(&other).unwrap();

        let restarted = JobStore::open(&store).unwrap();
        restarted.reconcile(file(), at(12)).unwrap();
        assert_eq!(job(&restarted, "daily"), daily);
        assert_eq!(job(&restarted, "other"), other);

        let changed = vec![
            spec("daily", "30 9 * * *"),
            JobSpec {
                text: "new words".into(),
                ..spec("other", "0 10 * * *")
            },
        ];
        restarted.reconcile(changed, at(13)).unwrap();
        let daily = job(&restarted, "daily");
        assert_eq!((daily.created_at, daily.cursor), (at(13), at(13)));
        assert!(daily.paused);
        assert_eq!(daily.last_outcome.as_deref(), Some("ran"));
        let other = job(&restarted, "other");
        assert_eq!((other.created_at, other.cursor), (at(7), at(10)));
        assert_eq!(other.spec.text, "new words");

        restarted
            .reconcile(vec![spec("daily", "30 9 * * *")], at(14))
            .unwrap();
        assert!(restarted.get("other").unwrap().is_none());
        assert!(
            store
                .cron_config_tree()
                .unwrap()
                .get("other")
                .unwrap()
                .is_none()
        );
        restarted
            .reconcile(
                vec![spec("daily", "30 9 * * *"), spec("other", "0 10 * * *")],
                at(15),
            )
            .unwrap();
        let other = job(&restarted, "other");
        assert_eq!((other.created_at, other.cursor), (at(15), at(15)));
    }

    /// Records of config jobs an earlier daemon wrote whole into `cron_jobs`, and a runtime
    /// job whose name the file takes, are carried over (moment, cursor, paused) and removed;
    /// one the file no longer names is just removed.
    #[test]
    fn records_of_an_earlier_daemon_are_carried_over_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        let earlier = |name: &str, origin| Job {
            spec: spec(name, "0 9 * * *"),
            origin,
            paused: true,
            created_at: at(1),
            cursor: at(9),
            last_outcome: Some("ran".into()),
        };
        // An earlier daemon wrote config jobs whole, as runtime jobs are written now.
        let legacy = earlier("legacy", Origin::Config);
        let gone = earlier("gone", Origin::Config);
        let taken = earlier("taken", Origin::Runtime);
        let runtime = earlier("runtime", Origin::Runtime);
        let tree = store.cron_tree().unwrap();
        for job in [&legacy, &gone] {
            tree.insert(job.spec.name.as_bytes(), job.encode().unwrap())
                .unwrap();
        }
        jobs.put(&taken).unwrap();
        jobs.put(&runtime).unwrap();

        let file = vec![spec("legacy", "0 9 * * *"), spec("taken", "0 9 * * *")];
        jobs.reconcile(file.clone(), at(12)).unwrap();
        assert_eq!(job(&jobs, "legacy"), legacy);
        assert_eq!(
            job(&jobs, "taken"),
            Job {
                origin: Origin::Config,
                ..taken
            }
        );
        assert!(jobs.get("gone").unwrap().is_none());
        assert_eq!(job(&jobs, "runtime"), runtime);
        let left: Vec<_> = tree.iter().keys().map(Result::unwrap).collect();
        assert_eq!(left, vec![sled::IVec::from("runtime")]);

        let restarted = JobStore::open(&store).unwrap();
        restarted.reconcile(file, at(13)).unwrap();
        assert_eq!(job(&restarted, "legacy"), legacy);
        assert_eq!(
            restarted
                .all()
                .unwrap()
                .iter()
                .map(|j| j.spec.name.as_str())
                .collect::<Vec<_>>(),
            ["legacy", "runtime", "taken"]
        );
    }

    /// A baseline that cannot be read does not stop the start: the jobs count from then,
    /// and the baseline is written anew.
    #[test]
    fn an_unreadable_baseline_makes_the_jobs_count_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        jobs.reconcile(vec![spec("daily", "0 9 * * *")], at(7))
            .unwrap();
        let tree = store.cron_config_tree().unwrap();
        tree.insert(BASELINE_KEY, &b"{\"groups\": 42}"[..]).unwrap();
        let restarted = JobStore::open(&store).unwrap();
        restarted
            .reconcile(vec![spec("daily", "0 9 * * *")], at(8))
            .unwrap();
        assert_eq!(job(&restarted, "daily").created_at, at(8));
        let again = JobStore::open(&store).unwrap();
        again
            .reconcile(vec![spec("daily", "0 9 * * *")], at(9))
            .unwrap();
        assert_eq!(job(&again, "daily").created_at, at(8));
    }

    /// A job a reload took away while the timer ran it is not written back.
    #[test]
    fn progress_of_a_job_the_file_no_longer_has_is_not_saved() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        jobs.reconcile(vec![spec("daily", "0 9 * * *")], at(7))
            .unwrap();
        let mut daily = job(&jobs, "daily");
        jobs.reconcile(Vec::new(), at(8)).unwrap();
        daily.cursor = at(9);
        jobs.put(&daily).unwrap();
        assert!(jobs.get("daily").unwrap().is_none());
        assert_eq!(
            store.cron_config_tree().unwrap().len(),
            1,
            "the baseline only"
        );
    }
}
