//! A Redis Cluster slot moved from one primary to another while clients
//! use it, as an operator's resharding moves it: `CLUSTER SETSLOT`
//! IMPORTING on the target and MIGRATING on the source, `MIGRATE` of a
//! few keys at a time, then `SETSLOT NODE` on every primary. Meanwhile a call
//! whose keys are partly moved is refused with TRYAGAIN and one whose keys
//! are all gone from the source is redirected with ASK.
//!
//! A move that cannot empty the source in time is left open, its keys on
//! both sides, and the same call again goes on with it. It cannot go back:
//! the source, migrating, answers the restore of a key it lacks with ASK,
//! and `SETSLOT NODE` to itself does not close a slot it holds keys of.
//! Nor is a slot handed over or closed while keys of it lie on the side
//! that does not own it: those keys would be lost to every client.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

/// How a slot's keys are moved.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Keys per `MIGRATE` (a queue that keeps histories holds one key per
    /// job in its slot).
    pub keys: u32,
    /// The pause between two `MIGRATE`s: calls meet the half-moved slot
    /// meanwhile.
    pub pause: Duration,
    /// How long the keys may take to move before the move is left open.
    pub timeout: Duration,
}

impl Default for Migration {
    fn default() -> Self {
        Self {
            keys: 50,
            pause: Duration::from_millis(50),
            timeout: Duration::from_secs(60),
        }
    }
}

/// Where a move left the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// On the target, every primary told.
    There,
    /// The source was not emptied in time: the slot is left open (calls
    /// of it meet TRYAGAIN and ASK) with its keys on both sides, none
    /// lost; moving it again goes on.
    Open,
}

/// Moves `slot` from the primary at `source` to the one at `target`
/// (`redis://host:port` URLs), its keys as `how` says, or goes on with a
/// move of it between the two left open. An error is a step that failed:
/// the slot is then open or closed, its keys where they were.
pub async fn move_slot(
    source: &str,
    target: &str,
    slot: u16,
    how: Migration,
) -> anyhow::Result<Moved> {
    let mut from = connect(source).await?;
    let mut to = connect(target).await?;
    let from_id = my_id(&mut from).await?;
    let to_id = my_id(&mut to).await?;
    setslot(&mut to, slot, &["IMPORTING", &from_id]).await?;
    setslot(&mut from, slot, &["MIGRATING", &to_id]).await?;
    if !migrate_all(&mut from, slot, &address(target)?, how).await {
        return Ok(Moved::Open);
    }
    // The target first: once it owns the slot it answers for it, and the
    // source's redirects then point at an owner.
    setslot(&mut to, slot, &["NODE", &to_id]).await?;
    setslot(&mut from, slot, &["NODE", &to_id]).await?;
    // The others learn it from the two anyway (the target's epoch went
    // up); told, they redirect at once.
    for url in primaries(&mut from).await? {
        if url != source
            && url != target
            && let Ok(mut other) = connect(&url).await
        {
            let _ = setslot(&mut other, slot, &["NODE", &to_id]).await;
        }
    }
    Ok(Moved::There)
}

/// Moves every key of `slot` from the node of `from` to `to`, `how.keys`
/// at a time with `how.pause` between, trying a failed `MIGRATE` again;
/// whether none is left in `from` within `how.timeout` (when some are,
/// says which and the last error).
async fn migrate_all(
    from: &mut MultiplexedConnection,
    slot: u16,
    (host, port): &(String, String),
    how: Migration,
) -> bool {
    let deadline = tokio::time::Instant::now() + how.timeout;
    let mut last_error = None;
    loop {
        let keys: Option<Vec<String>> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(how.keys)
            .query_async(from)
            .await
            .ok();
        if keys.as_ref().is_some_and(Vec::is_empty) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            eprintln!(
                "slot {slot}: keys left after {:?}, such as {keys:?}; the last MIGRATE error: {last_error:?}",
                how.timeout
            );
            return false;
        }
        if let Some(keys) = keys {
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg(host)
                .arg(port)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("REPLACE")
                .arg("KEYS")
                .arg(&keys);
            if let Err(error) = migrate.query_async::<redis::Value>(from).await {
                last_error = Some(error.to_string());
            }
        }
        tokio::time::sleep(how.pause).await;
    }
}

/// A connection to the server at `url`, made within two seconds.
pub(crate) async fn connect(url: &str) -> anyhow::Result<MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    Ok(tokio::time::timeout(
        Duration::from_secs(2),
        client.get_multiplexed_async_connection(),
    )
    .await??)
}

async fn my_id(conn: &mut MultiplexedConnection) -> anyhow::Result<String> {
    Ok(redis::cmd("CLUSTER").arg("MYID").query_async(conn).await?)
}

async fn setslot(
    conn: &mut MultiplexedConnection,
    slot: u16,
    words: &[&str],
) -> anyhow::Result<()> {
    redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(words)
        .query_async::<()>(conn)
        .await
        .map_err(|error| anyhow::anyhow!("SETSLOT {slot} {}: {error}", words.join(" ")))
}

/// The URLs of the primaries the node of `conn` knows, failing or not.
async fn primaries(conn: &mut MultiplexedConnection) -> anyhow::Result<Vec<String>> {
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(conn).await?;
    Ok(nodes
        .lines()
        .filter(|line| line.split(' ').nth(2).is_some_and(|f| f.contains("master")))
        .filter_map(|line| {
            let address = line.split(' ').nth(1)?.split('@').next()?;
            Some(format!("redis://{address}"))
        })
        .collect())
}

/// `redis://host:port` as host and port.
fn address(url: &str) -> anyhow::Result<(String, String)> {
    url.trim_start_matches("redis://")
        .rsplit_once(':')
        .map(|(h, p)| (h.to_owned(), p.to_owned()))
        .ok_or_else(|| anyhow::anyhow!("no port in {url}"))
}
