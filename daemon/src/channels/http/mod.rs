//! The webhook channel and the HTTP server it lives in (webhooks, the owner API, health,
//! the owner's web page).
// Everything here reads outside input (HTTP requests): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod api;
pub mod metrics;
pub mod server;
pub mod template;
pub mod verify;
#[cfg(feature = "web")]
pub mod web;

use steward_config::Config;

use crate::owner::OwnerApi;
use crate::supervisor::Supervisor;

/// The status board's and the supervisor's name of the HTTP server.
pub const CHANNEL: &str = "http";

/// Starts the HTTP server the config asks for (none without `[http]` or routes) as the
/// supervisor's channel `http`: the secrets are read and the address bound first, so a
/// failure is an error here and nothing is left running.
pub async fn start(
    config: &Config,
    supervisor: &Supervisor,
    owner: &OwnerApi,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let Some(http) = &config.http else {
        return Ok(());
    };
    // The page shows times in the owner's zone (checked at start).
    let web = if http.web && cfg!(feature = "web") {
        Some(crate::core::owner_zone(config)?)
    } else {
        if http.web {
            tracing::info!("the web page is not built into this binary (cargo feature `web`)");
        }
        None
    };
    let bound = server::bind(
        http,
        web,
        &config.webhook_routes,
        config.senders.clone(),
        owner.clone(),
        data_dir,
    )
    .await
    .map_err(|e| match e {
        server::HttpError::Secret { index, .. } => {
            anyhow::Error::from(crate::core::ConfigProblem {
                key: format!("webhook.routes[{index}].secret_env"),
                message: e.to_string(),
            })
        }
        other => anyhow::Error::from(other),
    })?;
    supervisor.start(CHANNEL, move |cx| server::run(bound, cx));
    Ok(())
}
