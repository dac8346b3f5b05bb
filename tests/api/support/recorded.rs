//! Two prioq instances whose clients record what they see (the chaos
//! crate's scenario), as the fault tests under load run them; the history
//! goes to the checker at the end.

use std::sync::Arc;

use prioq::config::Config;
use prioq_chaos::scenario::Scenario;

use super::app::{TestApp, spawn_app_with};
use super::process::TempDir;

/// The two instances, the scenario over both and its history's directory
/// (kept while this lives).
pub(crate) struct Recorded {
    pub(crate) apps: [TestApp; 2],
    pub(crate) scenario: Arc<Scenario>,
    _history: TempDir,
}

/// Two instances of `config`, with the bulk floor off: every claim takes
/// the most urgent job, as the checker's order rules expect (no share for
/// the starvation guard). `name` names the history's directory.
pub(crate) async fn two_instances_recorded(mut config: Config, name: &str) -> Recorded {
    config.bulk_floor = 0.0;
    let apps = [
        spawn_app_with(config.clone()).await,
        spawn_app_with(config).await,
    ];
    let history = TempDir::new(name);
    let scenario = Scenario::new(
        apps.iter().map(|app| app.base.clone()).collect(),
        &history.path,
    )
    .expect("the history file");
    Recorded {
        apps,
        scenario,
        _history: history,
    }
}
