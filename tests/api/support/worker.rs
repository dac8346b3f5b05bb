//! A worker process killed with SIGKILL while it holds the job it claimed:
//! a crash as the service sees one, with no last word from the worker.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// What a worker process killed by [`claim_in_process_and_kill_answer`]
/// got from its claim.
#[derive(Debug)]
pub(crate) struct KilledClaim {
    /// The claim's HTTP status; 0 when it got no answer.
    pub(crate) status: u16,
    /// The claim's answer (`{"jobs": [...]}` on a 200).
    pub(crate) answer: Value,
    /// The job the process held when it was killed, if it got one.
    pub(crate) job: Option<Value>,
}

/// The worker process the crash tests kill: bash claims one job with curl
/// (`$CLAIM` to `$URL`), prints `ANSWER <status> <body>` (status 0 when
/// there was no answer), and hangs holding whatever it got.
const CRASH_WORKER: &str = r#"
out=$(curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' --data "$CLAIM" "$URL")
status=${out##*$'\n'}
body=${out%$'\n'*}
[ -n "$body" ] && [ "$body" != "$out" ] || body=null
echo "ANSWER $((10#${status:-0})) $body"
exec sleep 3600
"#;

/// Starts a worker process (named `doomed`) that claims one job with a
/// `lease_ms` lease under `request_id`, waits until it holds the job (or
/// has given up on getting one), kills it with SIGKILL and returns what
/// its claim got.
pub(crate) async fn claim_in_process_and_kill_answer(
    claim_url: &str,
    lease_ms: u64,
    request_id: &str,
) -> KilledClaim {
    let claim = json!({
        "worker": "doomed", "request_id": request_id, "lease_ms": lease_ms, "wait_ms": 5000,
    });
    let mut child = tokio::process::Command::from({
        let mut command = Command::new("bash");
        command
            .args(["-c", CRASH_WORKER])
            .env("URL", claim_url)
            .env("CLAIM", claim.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    })
    .kill_on_drop(true)
    .spawn()
    .expect("the worker process starts (bash and curl)");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("worker claims in time")
        .expect("read")
        .expect("worker printed its claim");
    let rest = line.strip_prefix("ANSWER ").expect("the claim's answer");
    let (status, answer) = rest.split_once(' ').expect("status and answer");
    let answer: Value = serde_json::from_str(answer).expect("JSON answer");
    let claimed = KilledClaim {
        status: status.parse().expect("status"),
        job: answer["jobs"].get(0).cloned(),
        answer,
    };
    // Holding a job or not, it dies the same way.
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("reaped");
    claimed
}
