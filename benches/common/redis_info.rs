//! What Redis says about itself, over connections that wait for it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use redis::aio::MultiplexedConnection;

/// A connection to `client`'s Redis, once it answers PING (within 10 s).
pub async fn connect(client: &redis::Client) -> Result<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(60)))
        .set_connection_timeout(Some(Duration::from_secs(2)));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut con) => {
                if redis::cmd("PING")
                    .query_async::<String>(&mut con)
                    .await
                    .is_ok()
                {
                    return Ok(con);
                }
            }
            Err(error) if Instant::now() > deadline => {
                return Err(error).context("cannot connect to Redis");
            }
            Err(_) => {}
        }
        if Instant::now() > deadline {
            bail!("Redis does not answer PING");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The fields of `INFO` `sections`, by name.
pub async fn info(
    con: &mut MultiplexedConnection,
    sections: &[&str],
) -> Result<BTreeMap<String, String>> {
    let mut cmd = redis::cmd("INFO");
    for section in sections {
        cmd.arg(*section);
    }
    let text: String = cmd.query_async(con).await?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect())
}

/// `used_cpu_sys` + `used_cpu_user` of an `INFO` that holds the `cpu`
/// section: the whole redis-server process's CPU so far, in µs.
pub fn cpu_us(info: &BTreeMap<String, String>) -> Result<u64> {
    let seconds = |key: &str| info.get(key).and_then(|v| v.parse::<f64>().ok());
    let cpu = seconds("used_cpu_sys")
        .zip(seconds("used_cpu_user"))
        .map(|(sys, user)| sys + user)
        .ok_or_else(|| anyhow!("no used_cpu_sys / used_cpu_user in INFO cpu"))?;
    Ok((cpu * 1e6).round() as u64)
}
