//! What push delivery costs Redis per job, next to pulling workers doing
//! the same work in the same run.
//!
//! ```sh
//! cargo bench --bench push
//! ```
//!
//! It starts a `redis-server` on a free port (no persistence), prioq in
//! this process against it, and an HTTP endpoint on loopback that answers
//! every POST at once with 200 `{}`. Each round enqueues 2,000 jobs in
//! batches of 100, twice:
//!
//! - pulled: 16 workers, each claiming one job and acking it in a
//!   request of its own (the shape of a push delivery, one job a
//!   request);
//! - pushed: the queue's target set to the endpoint with concurrency 16,
//!   until every job is acked (the target deleted after).
//!
//! and reads, by Redis's `used_cpu_sys` + `used_cpu_user`, the Redis µs
//! per job of each, and the jobs per second. Figures are medians over the
//! rounds, and pushed against pulled measured in the same round. It
//! writes `bench-results/push.md`. Invoked without `--bench` (as `cargo
//! test --all-targets` does), it does nothing.

#[path = "common/app.rs"]
mod app;
#[path = "common/mod.rs"]
mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use app::{App, get_json};
use common::results_dir;
use common::table::{Align, Table};

const JOBS: usize = 2_000;
const BATCH: usize = 100;
const CONCURRENCY: usize = 16;
const ROUNDS: usize = 5;

fn main() -> Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/push is a benchmark: run it with `cargo bench --bench push`");
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

/// One way's figures in one round.
#[derive(Debug, Clone, Copy, Default)]
struct Way {
    redis_us_per_job: f64,
    jobs_per_s: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Round {
    pulled: Way,
    pushed: Way,
}

async fn run() -> Result<()> {
    let endpoint = endpoint().await?;
    let mut app = App::start("push").await?;
    let mut rounds = Vec::new();
    for round in 0..ROUNDS {
        let pulled = pull(&mut app, &format!("pulled-{round}")).await?;
        let pushed = push(&mut app, &format!("pushed-{round}"), &endpoint).await?;
        let measured = Round { pulled, pushed };
        eprintln!("round {round}: {measured:?}");
        rounds.push(measured);
    }
    app.stop().await?;
    let report = report(&rounds);
    println!("{report}");
    let dir = results_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("push.md"), report)?;
    Ok(())
}

/// An endpoint on loopback answering every POST with 200 `{}`; its URL.
async fn endpoint() -> Result<String> {
    let router = axum::Router::new().route("/jobs", axum::routing::post(|| async { "{}" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/jobs", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(url)
}

fn jobs() -> Vec<Value> {
    (0..JOBS)
        .map(|i| json!({"task": "t", "id": format!("j-{i}"), "args": {"n": i}}))
        .collect()
}

/// Measures `work` (which must end with every job of the queue acked).
async fn measured<F: Future<Output = Result<()>>>(
    app: &mut App,
    work: impl FnOnce() -> F,
) -> Result<Way> {
    let (cpu, started) = (app.cpu().await?, Instant::now());
    work().await?;
    let (used, took) = (app.cpu().await? - cpu, started.elapsed());
    Ok(Way {
        redis_us_per_job: used as f64 / JOBS as f64,
        jobs_per_s: JOBS as f64 / took.as_secs_f64(),
    })
}

async fn pull(app: &mut App, queue: &str) -> Result<Way> {
    app.enqueue(queue, jobs(), BATCH).await?;
    let (http, claim) = (app.http.clone(), app.url(queue, "/claim"));
    let acks = app.url(queue, "/jobs/");
    measured(app, || async {
        let workers = (0..CONCURRENCY).map(|_| async {
            loop {
                let claimed: Value = (http.post(&claim).json(&json!({"max_jobs": 1})))
                    .send()
                    .await?
                    .json()
                    .await?;
                let Some(job) = claimed["jobs"].get(0) else {
                    return Ok::<_, anyhow::Error>(());
                };
                let id = job["id"].as_str().unwrap_or_default();
                let acked = (http.post(format!("{acks}{id}/ack")))
                    .json(&json!({"lease_token": job["lease_token"]}))
                    .send()
                    .await?;
                ensure!(acked.status().is_success(), "ack: {}", acked.status());
            }
        });
        futures_util::future::try_join_all(workers).await.map(drop)
    })
    .await
}

async fn push(app: &mut App, queue: &str, endpoint: &str) -> Result<Way> {
    app.enqueue(queue, jobs(), BATCH).await?;
    let target = json!({"url": endpoint, "concurrency": CONCURRENCY});
    let (http, url) = (app.http.clone(), app.url(queue, "/push"));
    let view = app.url(queue, "");
    let way = measured(app, || async {
        let set = http.put(&url).json(&target).send().await?;
        ensure!(set.status().is_success(), "{}", set.status());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let stats = get_json(&http, &view).await?;
            if stats["pending"] == 0 && stats["processing"] == 0 {
                return Ok(());
            }
            ensure!(Instant::now() < deadline, "not all pushed: {stats}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await?;
    let deleted = app.http.delete(&url).send().await?;
    ensure!(deleted.status().is_success(), "{}", deleted.status());
    Ok(way)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn report(rounds: &[Round]) -> String {
    let pick = |f: fn(&Round) -> f64| median(rounds.iter().map(f).collect());
    let range = |f: fn(&Round) -> f64| {
        let values: Vec<f64> = rounds.iter().map(f).collect();
        let low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{low:.2}–{high:.2}")
    };
    let mut table = Table::new([
        ("", Align::Left),
        ("Pulled", Align::Right),
        ("Pushed", Align::Right),
        ("Pushed ÷ pulled (median)", Align::Right),
        ("Range over rounds", Align::Right),
    ]);
    table.row([
        "Redis µs per job".to_owned(),
        format!("{:.1}", pick(|r| r.pulled.redis_us_per_job)),
        format!("{:.1}", pick(|r| r.pushed.redis_us_per_job)),
        format!(
            "{:.2}",
            pick(|r| r.pushed.redis_us_per_job / r.pulled.redis_us_per_job)
        ),
        range(|r| r.pushed.redis_us_per_job / r.pulled.redis_us_per_job),
    ]);
    table.row([
        "Jobs per second".to_owned(),
        format!("{:.0}", pick(|r| r.pulled.jobs_per_s)),
        format!("{:.0}", pick(|r| r.pushed.jobs_per_s)),
        format!("{:.2}", pick(|r| r.pushed.jobs_per_s / r.pulled.jobs_per_s)),
        range(|r| r.pushed.jobs_per_s / r.pulled.jobs_per_s),
    ]);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Push delivery against pulling workers: {JOBS} jobs a round, {CONCURRENCY} at once \
         (workers claiming one job and acking it apart; the target's concurrency), \
         {ROUNDS} rounds, medians.\n"
    );
    out.push_str(table.text());
    out
}
