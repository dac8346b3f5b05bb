use clap::Parser;
use prioq::config::{Command, Config};
use prioq::startup::{self, Application};
use utoipa::OpenApi;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    if let Some(Command::Openapi) = config.command {
        let document = prioq::http::ApiDoc::openapi().to_pretty_json()?;
        #[allow(clippy::print_stdout)]
        {
            println!("{document}");
        }
        return Ok(());
    }
    prioq::telemetry::init_logs(config.log_format);
    let app = Application::build(config).await?;
    tracing::info!(address = %app.local_addr(), "prioq listening");
    let shutdown = app.shutdown_token();
    tokio::spawn(async move {
        startup::shutdown_signal().await;
        tracing::info!("shutting down");
        shutdown.cancel();
    });
    app.run_until_stopped().await
}
