use clap::Parser;
use prioq::config::{Command, Config};
use prioq::startup::{self, Application};

/// glibc's allocator took a sixth of the request path's CPU in a profile.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    if let Some(Command::Openapi) = config.command {
        let document = prioq::http::document().to_pretty_json()?;
        #[allow(clippy::print_stdout)]
        {
            println!("{document}");
        }
        return Ok(());
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = config.worker_threads {
        runtime.worker_threads(usize::from(threads));
    }
    runtime.enable_all().build()?.block_on(run(config))
}

async fn run(config: Config) -> anyhow::Result<()> {
    let traces = prioq::otel::traces_url(
        config.otlp_endpoint.as_deref(),
        config.otel_exporter_otlp_traces_endpoint.as_deref(),
        config.otel_exporter_otlp_endpoint.as_deref(),
    );
    prioq::telemetry::init_logs(config.log_format, traces.as_deref())?;
    let app = Application::build(config).await?;
    tracing::info!(address = %app.local_addr(), "prioq listening");
    let shutdown = app.shutdown_token();
    tokio::spawn(async move {
        startup::shutdown_signal().await;
        tracing::info!("shutting down");
        shutdown.cancel();
    });
    let stopped = app.run_until_stopped().await;
    prioq::otel::shutdown().await;
    stopped
}
