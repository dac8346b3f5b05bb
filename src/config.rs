//! Configuration from flags and `PRIOQ_*` environment variables.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// prioq: a priority job queue over Redis, spoken to in HTTP/JSON.
#[derive(Debug, Clone, Parser)]
#[command(version, about)]
pub struct Config {
    /// Address to listen on for HTTP.
    #[arg(long, env = "PRIOQ_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Redis to keep the queues in; with --redis-cluster, the cluster's
    /// seed nodes, comma-separated.
    #[arg(
        long,
        env = "PRIOQ_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,

    /// Treat PRIOQ_REDIS_URL as the seed nodes of a Redis Cluster.
    #[arg(long, env = "PRIOQ_REDIS_CLUSTER", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub redis_cluster: bool,

    /// Bearer tokens accepted on /v1 routes, comma-separated; unset or empty means no auth.
    /// Two tokens at once let clients move from one to the other.
    #[arg(
        long,
        env = "PRIOQ_API_TOKENS",
        value_delimiter = ',',
        hide_env_values = true,
        value_parser = parse_token
    )]
    pub api_tokens: Vec<Token>,

    /// Lease length when a claim does not give `lease_ms`.
    #[arg(long, env = "PRIOQ_DEFAULT_LEASE_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(100..=43_200_000))]
    pub default_lease_ms: u64,

    /// Deliveries a job gets when its enqueue does not give `max_attempts`.
    #[arg(long, env = "PRIOQ_MAX_ATTEMPTS", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_attempts: u32,

    /// Share of claimed jobs taken from the least urgent class (0 to 0.5),
    /// so bulk work keeps draining under urgent load.
    #[arg(long, env = "PRIOQ_BULK_FLOOR", default_value_t = 0.1, value_parser = parse_bulk_floor)]
    pub bulk_floor: f64,

    /// How often this instance's sweeper takes back expired leases and
    /// promotes due scheduled jobs.
    #[arg(long, env = "PRIOQ_SWEEP_INTERVAL_MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub sweep_interval_ms: u64,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "PRIOQ_MAX_BODY_BYTES", default_value_t = 1 << 20)]
    pub max_body_bytes: usize,

    /// Prefix of every Redis key; instances sharing a prefix share queues.
    #[arg(long, env = "PRIOQ_KEY_PREFIX", default_value = "prioq", value_parser = parse_key_prefix)]
    pub key_prefix: String,

    /// Bound on each call to Redis; past it the request answers 503.
    #[arg(long, env = "PRIOQ_REDIS_TIMEOUT_MS", default_value_t = 3000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_timeout_ms: u64,

    /// Redis connections in the pool (each is multiplexed).
    #[arg(long, env = "PRIOQ_REDIS_POOL_SIZE", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub redis_pool_size: u32,

    /// On SIGTERM, keep serving this long before the listener closes, with
    /// /readyz answering 503 and every answer closing its connection, so a
    /// load balancer moves away without a request caught in between.
    #[arg(long, env = "PRIOQ_SHUTDOWN_GRACE_MS", default_value_t = 0)]
    pub shutdown_grace_ms: u64,

    /// Threads serving requests; default one per core this process may
    /// use. One thread spends the least CPU per request: on a machine with
    /// many cores, several instances of one thread each are the cheapest.
    #[arg(long, env = "PRIOQ_WORKER_THREADS",
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,

    /// Log one line per request. Off, only failed (5xx), slow and
    /// abandoned requests are logged.
    #[arg(long, env = "PRIOQ_LOG_REQUESTS", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub log_requests: bool,

    /// A request taking longer than this, beyond the wait a long poll asked
    /// for, is logged as slow.
    #[arg(long, env = "PRIOQ_SLOW_REQUEST_MS", default_value_t = 1000)]
    pub slow_request_ms: u64,

    /// Origins besides the service's own whose browser pages may change
    /// it (POST, PUT, PATCH, DELETE on /v1), comma-separated:
    /// `https://admin.example.com`.
    #[arg(long, env = "PRIOQ_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// Queues that may exist at once; a write that would make one more
    /// answers 507 `limit_reached`.
    #[arg(long, env = "PRIOQ_MAX_QUEUES", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_queues: u64,

    /// Schedules a queue may have; one more answers 507 `limit_reached`.
    #[arg(long, env = "PRIOQ_MAX_SCHEDULES", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_schedules: u64,

    /// A connection that has not sent a whole request head within this
    /// long is closed.
    #[arg(long, env = "PRIOQ_HEADER_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub header_timeout_ms: u64,

    /// A connection that has sent and been answered nothing for this long
    /// is closed. A request being answered (a long poll) is given at least
    /// the longest wait it may ask for (20 s) and the Redis timeout.
    #[arg(long, env = "PRIOQ_IDLE_TIMEOUT_MS", default_value_t = 60_000,
          value_parser = clap::value_parser!(u64).range(1000..))]
    pub idle_timeout_ms: u64,

    /// Connections served at once; more wait to be accepted.
    #[arg(long, env = "PRIOQ_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,

    /// Long polls (claims and waits for a job) waiting at once on this
    /// instance; beyond them a long poll answers at once, as if its wait
    /// had ended.
    #[arg(long, env = "PRIOQ_MAX_WAITERS", default_value_t = 10_000)]
    pub max_waiters: u64,

    /// Log format: `text` (readable lines) or `json` (one object per line).
    #[arg(long, env = "PRIOQ_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// OTLP/HTTP endpoint to export spans to: a base URL (`/v1/traces` is
    /// appended) or the traces URL itself; none are made without it (or
    /// one of OpenTelemetry's standard variables).
    #[arg(long, env = "PRIOQ_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// OpenTelemetry's traces URL, used as it is when
    /// `PRIOQ_OTLP_ENDPOINT` is unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", hide = true)]
    pub otel_exporter_otlp_traces_endpoint: Option<String>,

    /// OpenTelemetry's base URL (`/v1/traces` appended), used when neither
    /// of the above is set.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", hide = true)]
    pub otel_exporter_otlp_endpoint: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the OpenAPI document and exit.
    Openapi,
}

impl Config {
    /// Defaults for everything, as with no flags and no environment.
    pub fn with_defaults() -> Self {
        Self::parse_from(["prioq"])
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    pub fn sweep_interval(&self) -> Duration {
        Duration::from_millis(self.sweep_interval_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }

    pub fn slow_request(&self) -> Duration {
        Duration::from_millis(self.slow_request_ms)
    }

    pub fn redis_timeout(&self) -> Duration {
        Duration::from_millis(self.redis_timeout_ms)
    }

    /// The URLs of PRIOQ_REDIS_URL, one or a cluster's seeds.
    pub fn redis_urls(&self) -> Vec<String> {
        self.redis_url
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// An API token; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Config {
    /// The tokens that authorize requests; none means auth is off.
    pub fn tokens(&self) -> impl Iterator<Item = &Token> {
        self.api_tokens.iter().filter(|token| !token.0.is_empty())
    }
}

fn parse_token(s: &str) -> Result<Token, String> {
    Ok(Token(s.trim().to_owned()))
}

fn parse_bulk_floor(s: &str) -> Result<f64, String> {
    let value: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=0.5).contains(&value) {
        Ok(value)
    } else {
        Err("must be between 0 and 0.5".into())
    }
}

fn parse_key_prefix(s: &str) -> Result<String, String> {
    let valid = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if valid {
        Ok(s.to_owned())
    } else {
        Err("use 1 to 64 of A-Z a-z 0-9 _ - . :".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_floor_above_half_is_refused() {
        assert!(Config::try_parse_from(["prioq", "--bulk-floor", "0.6"]).is_err());
        assert!(Config::try_parse_from(["prioq", "--bulk-floor", "0.5"]).is_ok());
    }

    #[test]
    fn empty_and_padded_tokens_are_tolerated() {
        let config = Config::try_parse_from(["prioq", "--api-tokens", "a, b,,"]).expect("parses");
        let tokens: Vec<&[u8]> = config.tokens().map(Token::as_bytes).collect();
        assert_eq!(tokens, [b"a".as_slice(), b"b".as_slice()]);
        let config = Config::try_parse_from(["prioq", "--api-tokens", ""]).expect("parses");
        assert_eq!(config.tokens().count(), 0);
        assert!(!format!("{config:?}").contains("\"a\""));
    }

    #[test]
    fn key_prefix_with_glob_characters_is_refused() {
        assert!(Config::try_parse_from(["prioq", "--key-prefix", "a*b"]).is_err());
        assert!(Config::try_parse_from(["prioq", "--key-prefix", "team:a"]).is_ok());
    }
}
