//! The models a step may run on: `[model]` and the `[models.NAME]` profiles a job, route or
//! watch names (`model = "NAME"`). A step runs on the profile named by the first of its
//! events that names one (see [`crate::usage::UsageLedger::run_settings`]), else on
//! `[model]`. The context window the trajectory is compacted to is `[model]`'s: a profile
//! serves mostly short side lanes, and one conversation is never cut to two sizes.

use std::collections::BTreeMap;
use std::sync::Arc;

use steward_config::{ModelConfig, ModelProvider, Prices};

use crate::brain::Brain;

/// One model and what its tokens cost.
#[derive(Debug, Clone)]
pub struct Model {
    pub brain: Arc<dyn Brain>,
    /// As usage records name it (`gpt-4o-mini`, `claude-…`, `none`).
    pub name: String,
    pub prices: Option<Prices>,
}

impl Model {
    pub fn new(brain: Arc<dyn Brain>, config: &ModelConfig) -> Self {
        Self {
            brain,
            name: match config.provider {
                ModelProvider::None => "none".to_owned(),
                _ => config.model.clone(),
            },
            prices: config.prices,
        }
    }
}

#[derive(Debug)]
pub struct Models {
    pub default: Model,
    pub profiles: BTreeMap<String, Model>,
}

impl Models {
    /// The profile `name`, or `[model]` (a name the config no longer has falls back).
    pub fn get(&self, name: Option<&str>) -> &Model {
        name.and_then(|name| self.profiles.get(name))
            .unwrap_or(&self.default)
    }
}
