//! Builds the application (Redis pool, HTTP listener, sweeper, pusher,
//! wake-up listener) and runs it until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::http::{self, AppContext, AppState};
use crate::queue::{Broker, BrokerConfig, RedisPool, RedisSettings, wake};
use crate::{pusher, serve, sweeper};

/// How to reach Redis, from the configuration.
pub fn redis_settings(config: &Config) -> RedisSettings {
    RedisSettings {
        urls: config.redis_urls(),
        cluster: config.redis_cluster,
        pool_size: config.redis_pool_size as usize,
        timeout: config.redis_timeout(),
    }
}

/// The queue layer's settings, from the configuration.
pub fn broker_config(config: &Config) -> BrokerConfig {
    BrokerConfig {
        key_prefix: config.key_prefix.clone(),
        redis_timeout: config.redis_timeout(),
        bulk_floor: config.bulk_floor,
        max_waiters: config.max_waiters,
        max_queues: config.max_queues,
        max_schedules: config.max_schedules,
    }
}

/// A built, not yet running, prioq.
#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    state: AppState,
    /// Where the wake-up subscription may connect; any cluster node will do.
    seeds: Vec<redis::Client>,
}

impl Application {
    /// Binds the listener (port 0 picks a free one) and prepares the pool;
    /// Redis need not be up yet.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        crate::telemetry::metrics_handle();
        let pool = RedisPool::new(&redis_settings(&config))?;
        let seeds = config
            .redis_urls()
            .iter()
            .map(|url| redis::Client::open(url.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .context("invalid Redis URL")?;
        let broker = Broker::new(pool, broker_config(&config));
        let listener =
            listen(config.listen).with_context(|| format!("cannot listen on {}", config.listen))?;
        if config.tokens().next().is_none() && !config.listen.ip().is_loopback() {
            tracing::warn!(
                listen = %config.listen,
                "no API token is set and the address is not a loopback one: anyone who reaches it can change the queues (set PRIOQ_API_TOKENS)"
            );
        }
        Ok(Self {
            listener,
            state: AppState::new(AppContext {
                broker: Arc::new(broker),
                config: Arc::new(config),
                shutdown: CancellationToken::new(),
            }),
            seeds,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| self.state.config.listen)
    }

    /// Cancelling it stops the application as a signal would.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.state.shutdown.clone()
    }

    /// Serves until the shutdown token is cancelled. Then waiting long polls
    /// answer with what they have, `/readyz` answers 503 and answers close
    /// their connections; after the configured grace period the listener
    /// closes, in-flight requests finish, and the sweeper stops between
    /// batches.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let Self {
            listener,
            state,
            seeds,
        } = self;
        let shutdown = state.shutdown.clone();
        let grace = state.config.shutdown_grace();
        let stopped = CancellationToken::new();
        let sweeper = tokio::spawn(sweeper::run(
            Arc::clone(&state.broker),
            state.config.sweep_interval(),
            stopped.clone(),
        ));
        let pusher = tokio::spawn(pusher::run(
            Arc::clone(&state.broker),
            grace,
            stopped.clone(),
        ));
        tokio::spawn(warn_of_eviction(Arc::clone(&state.broker), stopped.clone()));
        let courier = {
            let (broker, stopped) = (Arc::clone(&state.broker), stopped.clone());
            tokio::spawn(async move { broker.deliver_outboxes(stopped).await })
        };
        let listener_task = tokio::spawn(wake::listen(
            seeds,
            state.config.key_prefix.clone(),
            state.broker.waiters(),
            stopped.clone(),
        ));
        let limits = serve::Limits {
            max_connections: usize::try_from(state.config.max_connections).unwrap_or(usize::MAX),
            header_timeout: state.config.header_timeout(),
            idle_timeout: state.config.idle_timeout(),
            answer_timeout: state
                .config
                .idle_timeout()
                .max(Duration::from_millis(http::MAX_WAIT_MS) + state.config.redis_timeout()),
        };
        let served = serve::serve(listener, http::router(state), limits, async move {
            shutdown.cancelled().await;
            tokio::time::sleep(grace).await;
        })
        .await
        .context("HTTP server failed");
        stopped.cancel();
        let _ = tokio::join!(sweeper, listener_task, courier, pusher);
        served
    }
}

/// Warns once, when Redis first answers, if it evicts keys when full.
async fn warn_of_eviction(broker: Arc<Broker>, stopped: CancellationToken) {
    while !stopped.is_cancelled() {
        if broker.ping().await.is_ok() {
            if let Some(warning) = broker.memory_warning().await {
                tracing::warn!("{warning}");
            }
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            () = stopped.cancelled() => {}
        }
    }
}

/// Binds with a deep accept queue, so a burst of connections (a thousand
/// workers starting their long polls) waits instead of being reset.
fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    const BACKLOG: u32 = 4096;
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(error) => {
                    tracing::error!(%error, "cannot listen for SIGTERM");
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
