//! Every scheduled job behind one face, wherever it is kept: runtime jobs whole in the tree
//! `cron_jobs` ([`super::jobs`]), the config file's in [`ConfigJobs`] (definitions in memory,
//! progress in the store). The timer, `steward cron`, the `cron_*` tools and a reload all go
//! through [`JobStore`].

use chrono::{DateTime, Utc};
use steward_protocol::Origin;

use super::file_jobs::ConfigJobs;
use super::jobs::{Job, JobSpec};
use crate::store::StoreError;

/// Every job, wherever it is kept: runtime jobs as full records in the tree `cron_jobs`,
/// the config file's in [`ConfigJobs`] (definitions in memory, progress in the store).
/// Names are unique across both: reconciling gives the file a name a runtime job had.
#[derive(Clone, Debug)]
pub struct JobStore {
    runtime: sled::Tree,
    config: ConfigJobs,
}

impl JobStore {
    /// The store's jobs; the config file's appear once [`JobStore::reconcile`] gave them.
    pub fn open(store: &crate::store::Store) -> Result<Self, StoreError> {
        Ok(Self {
            runtime: store.cron_tree()?,
            config: ConfigJobs::new(store.cron_config_tree()?),
        })
    }

    /// Every job, by name.
    pub fn all(&self) -> Result<Vec<Job>, StoreError> {
        let mut all = self.iter().collect::<Result<Vec<_>, _>>()?;
        all.sort_unstable_by(|a, b| a.spec.name.cmp(&b.spec.name));
        Ok(all)
    }

    /// Every job, one at a time (thousands of jobs need not all be in memory at once): the
    /// config file's, then the runtime ones.
    pub fn iter(&self) -> impl Iterator<Item = Result<Job, StoreError>> + '_ {
        self.config.iter().chain(self.runtime_jobs())
    }

    fn runtime_jobs(&self) -> impl Iterator<Item = Result<Job, StoreError>> + '_ {
        self.runtime.iter().map(|record| {
            let (key, bytes) = record?;
            Job::decode(&key, &bytes)
        })
    }

    pub fn get(&self, name: &str) -> Result<Option<Job>, StoreError> {
        if let Some(job) = self.config.get(name)? {
            return Ok(Some(job));
        }
        match self.runtime.get(name)? {
            Some(bytes) => Ok(Some(Job::decode(name.as_bytes(), &bytes)?)),
            None => Ok(None),
        }
    }

    /// Saves the job: a runtime job whole, a config job's progress (nothing when the file
    /// no longer has it).
    pub fn put(&self, job: &Job) -> Result<(), StoreError> {
        match job.origin {
            Origin::Config => {
                self.config.save(job)?;
            }
            Origin::Runtime => {
                self.runtime
                    .insert(job.spec.name.as_bytes(), job.encode()?)?;
            }
        }
        Ok(())
    }

    /// Removes a runtime job; a config job is the file's to remove.
    pub fn remove(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.runtime.remove(name)?.is_some())
    }

    /// Makes `specs` the config file's jobs (see [`super::file_jobs`]): records in
    /// `cron_jobs` that are the file's — written there by an earlier daemon, or a runtime
    /// job whose name the file now takes — are carried over and then removed.
    pub fn reconcile(&self, specs: Vec<JobSpec>, now: DateTime<Utc>) -> Result<(), StoreError> {
        let earlier = {
            let wanted: std::collections::HashSet<&str> =
                specs.iter().map(|s| s.name.as_str()).collect();
            let mut earlier = std::collections::HashMap::new();
            for job in self.runtime_jobs() {
                let job = job?;
                if job.origin == Origin::Config || wanted.contains(job.spec.name.as_str()) {
                    earlier.insert(job.spec.name.clone(), job);
                }
            }
            earlier
        };
        self.config.reconcile(specs, &earlier, now)?;
        let mut writes = crate::store::BatchedWrites::new(&self.runtime);
        for name in earlier.keys() {
            writes.remove(name.as_bytes())?;
        }
        writes.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::timer::jobs::tests::job;
    use steward_events::Urgency;

    /// What the timer and `steward cron` rely on: a job put, moved and read back through
    /// the tree is the job, cursor and all.
    #[test]
    fn the_store_gives_back_what_was_put() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let jobs = JobStore::open(&store).unwrap();
        let mut made = Job {
            origin: Origin::Runtime,
            ..job(Urgency::Parallel, false, None)
        };
        jobs.put(&made).unwrap();
        assert_eq!(jobs.get("job-1234").unwrap(), Some(made.clone()));
        made.cursor = made.created_at + chrono::Duration::days(1);
        made.last_outcome = Some("ran".into());
        jobs.put(&made).unwrap();
        assert_eq!(jobs.all().unwrap(), vec![made]);
    }
}
