//! What model work may cost: prices per model, model profiles (`[models.NAME]`), the caps
//! of one run of a job, route or watch, the daily caps (`[budget]`) and how long usage is
//! kept (`[usage]`).
//!
//! Decided here: a run's caps and model live beside the job, route or watch they govern
//! (`model`, `max_tokens_per_run`, `max_model_calls_per_run`), and a model named there must
//! be a profile of the file — a typo is an error naming the key, never a silent fall-back to
//! the default model. A price not set is 0; `price_cached_per_mtok` defaults to the input
//! price (a provider without a cache discount).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::spanned::{InRange, LineOf, Spanned};

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawBudget {
    /// Tokens (in + out, all models) a day in the owner's zone; unset: no cap.
    pub daily_tokens: Option<Spanned<u64>>,
    /// Cost a day, in the unit of the prices; unset: no cap.
    pub daily_cost: Option<f64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawUsage {
    /// Days a model call's record is kept.
    pub retention_days: Spanned<u64>,
}

impl Default for RawUsage {
    fn default() -> Self {
        Self {
            retention_days: Spanned::new(0..0, 400),
        }
    }
}

/// Prices of a model, per million tokens, in the owner's unit (dollars, euros…).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Prices {
    pub in_per_mtok: f64,
    pub cached_per_mtok: f64,
    pub out_per_mtok: f64,
}

impl Prices {
    /// The cost of one call; `input` counts the cached tokens too.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let fresh = input.saturating_sub(cached) as f64;
        (fresh * self.in_per_mtok
            + cached as f64 * self.cached_per_mtok
            + output as f64 * self.out_per_mtok)
            / 1_000_000.0
    }
}

/// `[budget]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BudgetConfig {
    pub daily_tokens: Option<u64>,
    pub daily_cost: Option<f64>,
}

/// `[usage]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageConfig {
    pub retention: Duration,
}

/// What one run of a job, route or watch may use, and on which model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSettings {
    /// A `[models.NAME]` profile; `None`: `[model]`.
    pub model: Option<String>,
    pub max_tokens_per_run: Option<u64>,
    pub max_model_calls_per_run: Option<u32>,
}

/// The run settings' keys as a job, route or watch has them in the file.
pub(crate) struct RawRunSettings<'a> {
    pub model: &'a Option<Spanned<String>>,
    pub max_tokens_per_run: &'a Option<Spanned<u64>>,
    pub max_model_calls_per_run: &'a Option<Spanned<u64>>,
}

/// `prefix` names the job, route or watch in errors; it is made only for one (10,000 jobs
/// from a file were 10,000 names made for nothing).
pub(crate) fn run_settings(
    prefix: impl Fn() -> String,
    raw: RawRunSettings<'_>,
    profiles: &BTreeMap<String, crate::ModelConfig>,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<RunSettings, ConfigError> {
    let model = match raw.model {
        Some(name) if !profiles.contains_key(name.get_ref()) => {
            let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
            return Err(ConfigError::invalid(
                format!("{}.model", prefix()),
                at(name.span()),
                if known.is_empty() {
                    format!("no [models.{}] profile is configured", name.get_ref())
                } else {
                    format!(
                        "no [models.{}] profile is configured; the profiles are {}",
                        name.get_ref(),
                        known.join(", ")
                    )
                },
            ));
        }
        Some(name) => Some(name.get_ref().clone()),
        None => None,
    };
    Ok(RunSettings {
        model,
        max_tokens_per_run: match raw.max_tokens_per_run {
            Some(tokens) => Some(in_range(
                &format!("{}.max_tokens_per_run", prefix()),
                tokens,
                1,
                u64::from(u32::MAX) * 1000,
            )?),
            None => None,
        },
        max_model_calls_per_run: match raw.max_model_calls_per_run {
            Some(calls) => Some(in_range(
                &format!("{}.max_model_calls_per_run", prefix()),
                calls,
                1,
                10_000,
            )? as u32),
            None => None,
        },
    })
}

pub(crate) fn resolve_prices(
    prefix: &str,
    input: Option<f64>,
    cached: Option<f64>,
    output: Option<f64>,
) -> Result<Option<Prices>, ConfigError> {
    for (name, value) in [
        ("price_in_per_mtok", input),
        ("price_cached_per_mtok", cached),
        ("price_out_per_mtok", output),
    ] {
        if let Some(value) = value
            && !(value.is_finite() && value >= 0.0)
        {
            return Err(ConfigError::invalid(
                format!("{prefix}.{name}"),
                None,
                format!("{value} is not a price; expected a number of at least 0"),
            ));
        }
    }
    if input.is_none() && cached.is_none() && output.is_none() {
        return Ok(None);
    }
    let in_per_mtok = input.unwrap_or(0.0);
    Ok(Some(Prices {
        in_per_mtok,
        cached_per_mtok: cached.unwrap_or(in_per_mtok),
        out_per_mtok: output.unwrap_or(0.0),
    }))
}

pub(crate) fn resolve_budget(
    raw: &RawBudget,
    in_range: InRange<'_>,
) -> Result<BudgetConfig, ConfigError> {
    if let Some(cost) = raw.daily_cost
        && !(cost.is_finite() && cost > 0.0)
    {
        return Err(ConfigError::invalid(
            "budget.daily_cost",
            None,
            format!("{cost} is not a cap; expected a number above 0"),
        ));
    }
    Ok(BudgetConfig {
        daily_tokens: match &raw.daily_tokens {
            Some(tokens) => Some(in_range("budget.daily_tokens", tokens, 1, u64::MAX / 2)?),
            None => None,
        },
        daily_cost: raw.daily_cost,
    })
}

pub(crate) fn resolve_usage(
    raw: &RawUsage,
    in_range: InRange<'_>,
) -> Result<UsageConfig, ConfigError> {
    let days = in_range("usage.retention_days", &raw.retention_days, 1, 3650)?;
    Ok(UsageConfig {
        retention: Duration::from_secs(days * 86_400),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_costs_its_fresh_cached_and_output_tokens_at_their_prices() {
        let prices = Prices {
            in_per_mtok: 3.0,
            cached_per_mtok: 0.3,
            out_per_mtok: 15.0,
        };
        let cost = prices.cost(1_000_000, 400_000, 100_000);
        assert!(
            (cost - (0.6 * 3.0 + 0.4 * 0.3 + 0.1 * 15.0)).abs() < 1e-9,
            "{cost}"
        );
        assert_eq!(Prices::default().cost(5, 1, 5), 0.0);
    }

    #[test]
    fn the_cached_price_defaults_to_the_input_price() {
        let prices = resolve_prices("model", Some(2.0), None, Some(8.0))
            .unwrap()
            .unwrap();
        assert_eq!(prices.cached_per_mtok, 2.0);
        assert_eq!(resolve_prices("model", None, None, None).unwrap(), None);
        let error = resolve_prices("model", Some(-1.0), None, None).unwrap_err();
        assert!(
            error.to_string().contains("model.price_in_per_mtok"),
            "{error}"
        );
    }
}
