//! What model calls cost, and the caps on it: every call's tokens (in, cached, out, as the
//! provider reported them) and cost, attributed to what caused it, kept in sled (tree
//! `usage`) for `usage.retention_days`; and the day's totals the budget is checked against.
//!
//! Decided here:
//! - A call is attributed to its step's first event (the one the step answers first): its
//!   channel (`cron:NAME`, `webhook:NAME`, `email:inbox`, `user`…), the trajectory or lane,
//!   the model, and the day in the owner's zone. A step that merged events of several
//!   channels counts once, under the first — so every grouping adds up to the provider's
//!   totals.
//! - A record's key is a ULID (time-ordered), so `--since` reads only what it reports and the
//!   purge only what it removes.
//! - `--by job` groups the channels of jobs, watches and webhook routes by themselves and
//!   everything else under `(not a job)`.
//! - The day's totals are kept in memory (read from the store at start, for today), so the
//!   budget check before each call and `steward status` read no records; when the daily
//!   cap is reached, the owner is told once a day, not once per event.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use steward_config::{BudgetConfig, Config, Prices, RunSettings};
use steward_events::TokenUsage;
use steward_protocol::{UsageBy, UsageRow};

use crate::store::{Store, StoreError, decode, encode};

/// One model call, as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    pub at: DateTime<Utc>,
    /// The day in the owner's zone.
    pub day: NaiveDate,
    pub channel: String,
    pub trajectory: String,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_cached: u64,
    pub tokens_out: u64,
    pub cost: f64,
}

/// What a call was for, to attribute it.
#[derive(Clone, Debug)]
pub struct CallOrigin<'a> {
    pub channel: &'a str,
    pub trajectory: &'a str,
    pub model: &'a str,
    pub prices: Option<Prices>,
}

#[derive(Debug)]
pub struct UsageLedger {
    tree: sled::Tree,
    zone: crate::zone::Zone,
    today: Mutex<DayTotals>,
    caps: Mutex<BudgetConfig>,
    /// Each job's, route's and watch's run settings, by channel (`cron:NAME`…).
    runs: Mutex<BTreeMap<String, RunSettings>>,
    /// Since the daemon started, by (channel, model): for `/metrics`.
    counters: Mutex<BTreeMap<(String, String), UsageRow>>,
}

/// The run settings of every job, route and watch of `config`, by channel.
pub fn run_settings(config: &Config) -> BTreeMap<String, RunSettings> {
    // Most of 10,000 jobs set nothing: only those that do are named.
    let jobs = config.cron.iter().map(|j| ("cron", &j.name, &j.run));
    let watches = config.watch.iter().map(|w| ("watch", &w.name, &w.run));
    let routes = config
        .webhook_routes
        .iter()
        .map(|r| ("webhook", &r.name, &r.run));
    let default = RunSettings::default();
    jobs.chain(watches)
        .chain(routes)
        .filter(|(_, _, run)| **run != default)
        .map(|(kind, name, run)| (format!("{kind}:{name}"), run.clone()))
        .collect()
}

#[derive(Clone, Debug, Default)]
struct DayTotals {
    day: Option<NaiveDate>,
    /// The day's calls, counted as `steward usage --by day` would.
    row: UsageRow,
    /// The owner was told today that the budget is reached.
    told: bool,
}

impl DayTotals {
    /// The totals of `day`: these, or fresh ones when the day turned.
    fn on(&mut self, day: NaiveDate) -> &mut Self {
        if self.day != Some(day) {
            *self = DayTotals {
                day: Some(day),
                row: UsageRow {
                    key: day.to_string(),
                    ..UsageRow::default()
                },
                told: false,
            };
        }
        self
    }
}

/// Counts `record` into `row`.
fn count(row: &mut UsageRow, record: &UsageRecord) {
    row.model_calls += 1;
    row.tokens_in += record.tokens_in;
    row.tokens_cached += record.tokens_cached;
    row.tokens_out += record.tokens_out;
    row.cost += record.cost;
}

impl UsageLedger {
    pub fn open(
        store: &Store,
        zone: crate::zone::Zone,
        config: &Config,
    ) -> Result<Self, StoreError> {
        let ledger = Self {
            tree: store.usage_tree()?,
            zone,
            today: Mutex::default(),
            caps: Mutex::new(config.budget),
            runs: Mutex::new(run_settings(config)),
            counters: Mutex::default(),
        };
        let today = ledger.day_of(Utc::now());
        let mut totals = DayTotals::default();
        totals.on(today);
        for record in ledger.since(today)? {
            if record.day == today {
                count(&mut totals.row, &record);
            }
        }
        *ledger.lock() = totals;
        Ok(ledger)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DayTotals> {
        self.today.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn day_of(&self, at: DateTime<Utc>) -> NaiveDate {
        at.with_timezone(&self.zone).date_naive()
    }

    /// Records one call's usage (see the module docs).
    pub fn record(
        &self,
        origin: &CallOrigin<'_>,
        usage: TokenUsage,
    ) -> Result<UsageRecord, StoreError> {
        let at = Utc::now();
        let record = UsageRecord {
            at,
            day: self.day_of(at),
            channel: origin.channel.to_owned(),
            trajectory: origin.trajectory.to_owned(),
            model: origin.model.to_owned(),
            tokens_in: usage.input,
            tokens_cached: usage.cached_input,
            tokens_out: usage.output,
            cost: origin.prices.map_or(0.0, |p| {
                p.cost(usage.input, usage.cached_input, usage.output)
            }),
        };
        let key = ulid::Ulid::from_datetime(at.into()).to_bytes();
        self.tree.insert(key, encode(&record)?)?;
        count(&mut self.lock().on(record.day).row, &record);
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let row = counters
            .entry((record.channel.clone(), record.model.clone()))
            .or_default();
        count(row, &record);
        Ok(record)
    }

    /// Calls since the daemon started, by (channel, model).
    pub fn counters(&self) -> Vec<((String, String), UsageRow)> {
        let counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        counters
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Today's tokens and cost (in the owner's zone).
    pub fn today(&self) -> (u64, f64) {
        let row = self.today_row();
        (row.tokens_in + row.tokens_out, row.cost)
    }

    pub fn caps(&self) -> BudgetConfig {
        *self.caps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run settings of the first of `channels` that has any.
    pub fn run_settings<'a>(&self, mut channels: impl Iterator<Item = &'a str>) -> RunSettings {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        channels
            .find_map(|channel| runs.get(channel).cloned())
            .unwrap_or_default()
    }

    /// The daily caps and the run settings after a reload.
    pub fn reconfigure(&self, config: &Config) {
        *self.caps.lock().unwrap_or_else(|p| p.into_inner()) = config.budget;
        *self.runs.lock().unwrap_or_else(|p| p.into_inner()) = run_settings(config);
    }

    /// Why model work must wait now (a daily cap is used up), if it must.
    pub fn waiting(&self) -> Option<String> {
        let caps = self.caps();
        let (tokens, cost) = self.today();
        if let Some(cap) = caps.daily_tokens.filter(|cap| tokens >= *cap) {
            return Some(format!(
                "the daily token budget (budget.daily_tokens = {cap}) is used up: {tokens} tokens today"
            ));
        }
        caps.daily_cost.filter(|cap| cost >= *cap).map(|cap| {
            format!("the daily cost budget (budget.daily_cost = {cap}) is used up: {cost:.4} today")
        })
    }

    /// `steward budget status`.
    pub fn report(&self) -> steward_protocol::BudgetReport {
        let caps = self.caps();
        let (tokens_today, cost_today) = self.today();
        steward_protocol::BudgetReport {
            day: self.day_of(Utc::now()).to_string(),
            tokens_today,
            cost_today,
            daily_tokens: caps.daily_tokens,
            daily_cost: caps.daily_cost,
            waiting: self.waiting(),
        }
    }

    /// Today's calls as one row (for `steward status`), kept in memory.
    pub fn today_row(&self) -> UsageRow {
        let today = self.day_of(Utc::now());
        self.lock().on(today).row.clone()
    }

    /// Whether the owner should be told now that the budget is reached: once a day.
    pub fn tell_once_today(&self) -> bool {
        let today = self.day_of(Utc::now());
        !std::mem::replace(&mut self.lock().on(today).told, true)
    }

    /// The records from the start of `day` (UTC midnight before it, to be safe across zones)
    /// on, oldest first.
    fn since(&self, day: NaiveDate) -> Result<Vec<UsageRecord>, StoreError> {
        let from = day
            .pred_opt()
            .unwrap_or(day)
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc())
            .unwrap_or_default();
        let start = ulid::Ulid::from_parts(u64::try_from(from.timestamp_millis()).unwrap_or(0), 0);
        let mut records = Vec::new();
        for entry in self.tree.range(start.to_bytes()..) {
            let (_, value) = entry?;
            let record: UsageRecord = decode("usage", &value)?;
            if record.day >= day {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// `steward usage`: the records since `since` (all kept when `None`) grouped `by`.
    pub fn rows(&self, by: UsageBy, since: Option<NaiveDate>) -> Result<Vec<UsageRow>, StoreError> {
        let records = self.since(since.unwrap_or(NaiveDate::MIN))?;
        Ok(group(&records, by))
    }

    /// Removes the records older than `cutoff`; how many went.
    pub fn purge(&self, cutoff: DateTime<Utc>) -> Result<usize, StoreError> {
        let end = ulid::Ulid::from_parts(u64::try_from(cutoff.timestamp_millis()).unwrap_or(0), 0);
        let mut removed = 0;
        for entry in self.tree.range(..end.to_bytes()) {
            let (key, _) = entry?;
            self.tree.remove(key)?;
            removed += 1;
        }
        Ok(removed)
    }
}

/// The key a record is counted under.
pub fn key_of(record: &UsageRecord, by: UsageBy) -> String {
    match by {
        UsageBy::Day => record.day.to_string(),
        UsageBy::Channel => record.channel.clone(),
        UsageBy::Model => record.model.clone(),
        UsageBy::Job => {
            let is_job = ["cron:", "watch:", "webhook:"]
                .iter()
                .any(|prefix| record.channel.starts_with(prefix));
            if is_job {
                record.channel.clone()
            } else {
                "(not a job)".to_owned()
            }
        }
    }
}

/// Records grouped under their keys, in key order.
pub fn group(records: &[UsageRecord], by: UsageBy) -> Vec<UsageRow> {
    let mut rows: BTreeMap<String, UsageRow> = BTreeMap::new();
    for record in records {
        let key = key_of(record, by);
        let row = rows.entry(key.clone()).or_insert_with(|| UsageRow {
            key,
            ..UsageRow::default()
        });
        count(row, record);
    }
    rows.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(day: u32, channel: &str, model: &str, tokens: u64) -> UsageRecord {
        UsageRecord {
            at: Utc::now(),
            day: NaiveDate::from_ymd_opt(2026, 12, day).unwrap(),
            channel: channel.into(),
            trajectory: "main".into(),
            model: model.into(),
            tokens_in: tokens,
            tokens_cached: tokens / 2,
            tokens_out: 1,
            cost: 0.5,
        }
    }

    #[test]
    fn every_grouping_adds_up_to_the_same_totals() {
        let records = [
            record(1, "cron:brief", "small", 100),
            record(1, "user", "big", 10),
            record(2, "cron:brief", "small", 1000),
            record(2, "webhook:gh", "big", 7),
            record(2, "email:inbox", "big", 3),
        ];
        for by in [UsageBy::Day, UsageBy::Job, UsageBy::Channel, UsageBy::Model] {
            let rows = group(&records, by);
            assert_eq!(
                rows.iter().map(|r| r.tokens_in).sum::<u64>(),
                1120,
                "{by:?}"
            );
            assert_eq!(rows.iter().map(|r| r.model_calls).sum::<u64>(), 5, "{by:?}");
        }
        let jobs: Vec<String> = group(&records, UsageBy::Job)
            .into_iter()
            .map(|r| r.key)
            .collect();
        assert_eq!(jobs, ["(not a job)", "cron:brief", "webhook:gh"]);
        let days = group(&records, UsageBy::Day);
        assert_eq!(days[0].key, "2026-12-01");
        assert_eq!(days[1].tokens_in, 1010);
    }
}
