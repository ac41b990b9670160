//! The running watches: the config's `[[watch]]` entries and watches made at run time
//! (`watch_create`, kept in the store's `watches` tree and started again after a restart).
//! Each runs as a channel of the supervisor (`watch:NAME`), so one can be added or deleted
//! without touching the others. Config watches cannot be deleted here (they would come back
//! on the next start); edit the file.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::channels::context::Settled;
use crate::status::StatusBoard;
use crate::store::StoreError;
use crate::supervisor::Supervisor;
use steward_config::WatchConfig;
use steward_events::Urgency;
use steward_protocol::WatchRow;
use steward_tools::files::FileAccess;
use steward_tools::glob::Globs;

/// How long start-up waits for the watches to be watching (or to know why not).
const START_WAIT: Duration = Duration::from_secs(5);

/// A config's watch as a row.
fn row_of(config: &WatchConfig) -> WatchRow {
    WatchRow {
        name: config.name.clone(),
        path: config.path.clone(),
        recursive: config.recursive,
        include: config.include.clone(),
        exclude: config.exclude.clone(),
        events: config.events.clone(),
        debounce_ms: Some(config.debounce.as_millis() as u64),
        text: Some(config.text.clone()),
        urgency: Some(config.urgency),
        origin: "config".into(),
        state: String::new(),
    }
}

/// Checks a requested watch and fills in the defaults.
fn config_of(row: &WatchRow) -> Result<WatchConfig, String> {
    if !steward_config::is_plain_name(&row.name) {
        return Err(format!(
            "{:?}: a watch name is 1-64 letters, digits, '-' or '_'",
            row.name
        ));
    }
    if !row.path.is_absolute() {
        return Err(format!("{} is not an absolute path", row.path.display()));
    }
    if let Some(bad) = row
        .events
        .iter()
        .find(|e| !WatchConfig::EVENTS.contains(&e.as_str()))
    {
        return Err(format!(
            "{bad:?}: events are create, modify, remove and rename"
        ));
    }
    if matches!(row.urgency, Some(Urgency::Cancel)) {
        return Err("a watch's urgency is queue or parallel".into());
    }
    Globs::new(&row.include).map_err(|e| format!("include: {e}"))?;
    Globs::new(&row.exclude).map_err(|e| format!("exclude: {e}"))?;
    Ok(WatchConfig {
        // Watches made at run time (by a tool) run on `[model]` without caps.
        run: steward_config::RunSettings::default(),
        name: row.name.clone(),
        path: row.path.clone(),
        recursive: row.recursive,
        include: row.include.clone(),
        exclude: row.exclude.clone(),
        events: if row.events.is_empty() {
            WatchConfig::EVENTS
                .iter()
                .map(|e| (*e).to_owned())
                .collect()
        } else {
            row.events.clone()
        },
        debounce: Duration::from_millis(
            row.debounce_ms
                .unwrap_or(WatchConfig::DEFAULT_DEBOUNCE_MS)
                .clamp(10, 600_000),
        ),
        text: row
            .text
            .clone()
            .unwrap_or_else(|| WatchConfig::default_text(&row.path)),
        urgency: row.urgency.unwrap_or(Urgency::Queue),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("no watch named {0:?}")]
    Unknown(String),
    #[error("a watch named {0:?} exists already")]
    Exists(String),
    #[error("{0:?} is defined in the config file; remove it there")]
    FromConfig(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The status board's (and the supervisor's) name of a watch.
fn channel_name(watch: &str) -> String {
    format!("watch:{watch}")
}

#[derive(Clone)]
pub struct WatchSet {
    inner: Arc<Inner>,
}

struct Inner {
    tree: sled::Tree,
    status: Arc<StatusBoard>,
    /// Told the watched folders whenever they change: files there are others' words, and
    /// reading them taints a step.
    files: Arc<FileAccess>,
    /// Set by [`WatchSet::start`]: watches run as the supervisor's channels.
    supervisor: OnceLock<Supervisor>,
    /// The watches started, by name.
    running: Mutex<BTreeMap<String, WatchRow>>,
}

impl std::fmt::Debug for WatchSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSet").finish_non_exhaustive()
    }
}

impl WatchSet {
    pub fn new(tree: sled::Tree, status: Arc<StatusBoard>, files: Arc<FileAccess>) -> Self {
        Self {
            inner: Arc::new(Inner {
                tree,
                status,
                files,
                supervisor: OnceLock::new(),
                running: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WatchRow>> {
        self.inner.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the config's watches and the stored runtime ones as channels of `supervisor`;
    /// returns once each is watching or knows why not (5 s at most), so a change made after
    /// READY=1 is seen.
    pub async fn start(
        &self,
        supervisor: &Supervisor,
        configs: &[WatchConfig],
    ) -> Result<(), StoreError> {
        let _ = self.inner.supervisor.set(supervisor.clone());
        let mut rows: Vec<(WatchRow, WatchConfig)> =
            configs.iter().map(|c| (row_of(c), c.clone())).collect();
        for bytes in self.inner.tree.iter().values() {
            let mut row: WatchRow = crate::store::decode("watches", &bytes?)?;
            row.origin = "runtime".into();
            if rows.iter().any(|(r, _)| r.name == row.name) {
                continue; // The config's watch of the same name wins.
            }
            if let Ok(config) = config_of(&row) {
                rows.push((row, config));
            }
        }
        let settled: Vec<Settled> = rows
            .into_iter()
            .filter_map(|(row, config)| self.launch(row, config))
            .collect();
        futures_util::future::join_all(settled.into_iter().map(|s| s.wait(START_WAIT))).await;
        Ok(())
    }

    /// Starts one watch; `None` before [`Self::start`] gave the supervisor.
    fn launch(&self, row: WatchRow, config: WatchConfig) -> Option<Settled> {
        let supervisor = self.inner.supervisor.get()?;
        let settled = supervisor.start(&channel_name(&row.name), move |cx| super::run(config, cx));
        self.running().insert(row.name.clone(), row);
        self.tell_files();
        Some(settled)
    }

    /// Stops one watch (not waiting for it) and forgets it.
    fn halt(&self, name: &str) {
        self.running().remove(name);
        self.tell_files();
        match self.inner.supervisor.get() {
            Some(supervisor) => supervisor.cancel(&channel_name(name)),
            None => self.inner.status.remove_channel(&channel_name(name)),
        }
    }

    fn tell_files(&self) {
        let folders: Vec<std::path::PathBuf> = self
            .running()
            .values()
            .map(|row| row.path.clone())
            .collect();
        self.inner.files.set_watched(&folders);
    }

    /// Brings the config's watches in line with a reloaded file: removed or changed ones
    /// stop, new or changed ones start; runtime watches are not touched.
    pub fn reload(&self, configs: &[WatchConfig]) {
        let wanted: Vec<WatchRow> = configs.iter().map(row_of).collect();
        let stale: Vec<String> = self
            .running()
            .iter()
            .filter(|(_, row)| row.origin == "config" && !wanted.contains(row))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &stale {
            self.halt(name);
        }
        for (row, config) in wanted.into_iter().zip(configs) {
            let known = self.running().get(&row.name).map(|r| r.origin.clone());
            match known.as_deref() {
                Some("config") => {} // unchanged
                Some(_) => {
                    // A runtime watch of that name: the config's wins, as at start.
                    self.halt(&row.name);
                    self.launch(row, config.clone());
                }
                None => {
                    self.launch(row, config.clone());
                }
            }
        }
    }

    pub fn list(&self) -> Vec<WatchRow> {
        self.running()
            .values()
            .map(|row| {
                let mut row = row.clone();
                row.state = self
                    .inner
                    .status
                    .channel(&channel_name(&row.name))
                    .unwrap_or_default();
                row
            })
            .collect()
    }

    pub fn create(&self, mut row: WatchRow) -> Result<WatchRow, WatchError> {
        let config = config_of(&row).map_err(WatchError::Invalid)?;
        if self.running().contains_key(&row.name) {
            return Err(WatchError::Exists(row.name));
        }
        if self.inner.supervisor.get().is_none() {
            return Err(WatchError::Invalid(
                "watches can be made only while the daemon runs".into(),
            ));
        }
        row.origin = "runtime".into();
        row.state = String::new();
        self.inner
            .tree
            .insert(row.name.as_bytes(), crate::store::encode(&row)?)
            .map_err(StoreError::from)?;
        self.launch(row.clone(), config);
        Ok(row)
    }

    pub fn delete(&self, name: &str) -> Result<(), WatchError> {
        let origin = self.running().get(name).map(|row| row.origin.clone());
        match origin.as_deref() {
            None => return Err(WatchError::Unknown(name.to_owned())),
            Some("config") => return Err(WatchError::FromConfig(name.to_owned())),
            Some(_) => {}
        }
        self.halt(name);
        self.inner
            .tree
            .remove(name.as_bytes())
            .map_err(StoreError::from)?;
        Ok(())
    }
}
