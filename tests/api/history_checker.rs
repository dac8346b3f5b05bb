//! The history checker (`prioq-chaos`'s pure core) on a small history
//! whose every job ends cleanly, and on copies of it with one violation
//! planted each: the checker answers nothing on the first and names the
//! planted rule on each copy, so it is known to fail.
//!
//! Times: the runner's clock and Redis's are the same here (a claim
//! granted at 40 ran from 40 to 50), as on one machine.

use prioq_chaos::checker::{RULES, check};
use prioq_chaos::history::{AckEntry, Backoff, Call, Event, Lease, Op, Outcome};
use serde_json::{Value, json};

fn op(op: u64, queue: &str, (start_ms, end_ms): (i64, i64), outcome: Outcome, call: Call) -> Op {
    Op {
        op,
        process: "p".into(),
        queue: queue.into(),
        start_ms,
        end_ms,
        outcome,
        status: None,
        call,
    }
}

fn enqueue(
    n: u64,
    queue: &str,
    id: &str,
    priority: u8,
    group: &str,
    at: i64,
    outcome: Outcome,
) -> Op {
    let call = Call::plain_enqueue(id, priority, Some(group.into()), &Value::Null, None);
    op(n, queue, (at, at + 5), outcome, call)
}

/// An enqueue of a job that waits for `after`.
fn enqueue_after(n: u64, id: &str, priority: u8, at: i64, after: &str) -> Op {
    let mut op = enqueue(n, "main", id, priority, "g9", at, Outcome::Ok);
    if let Call::Enqueue { after: waits, .. } = &mut op.call {
        waits.push(after.into());
    }
    op
}

/// An enqueue answered ok of a job with dedup key `key`, answered with
/// the job `answered`.
fn enqueue_dedup(n: u64, id: &str, at: i64, key: &str, answered: &str) -> Op {
    let mut op = enqueue(n, "main", id, 3, "g8", at, Outcome::Ok);
    if let Call::Enqueue {
        dedup,
        answered: named,
        ..
    } = &mut op.call
    {
        (*dedup, *named) = (Some(key.into()), Some(answered.into()));
    }
    op
}

/// An enqueue of `id` with key `key` in mode replace, answered
/// `replaced: true` with the job `answered`.
fn enqueue_replacing(n: u64, id: &str, at: i64, key: &str, answered: &str) -> Op {
    let mut op = enqueue_dedup(n, id, at, key, answered);
    if let Call::Enqueue {
        replace, replaced, ..
    } = &mut op.call
    {
        (*replace, *replaced) = (true, true);
    }
    op
}

/// The claim `op` as handing its job out with the args of `by`.
fn handed_by(mut op: Op, by: &str) -> Op {
    if let Call::Claim { jobs, .. } = &mut op.call {
        jobs[0].by = Some(by.into());
    }
    op
}

/// j (key k) handed out by `handed` (op n), acked 20 ms after it was
/// granted (op n + 1) and read back completed (op n + 2); l, whose enqueue
/// with k made nothing, read back as absent (op n + 3).
fn j_ends_and_l_is_absent(history: &mut Vec<Op>, handed: Op) {
    let n = handed.op;
    let acked_at = handed.start_ms + 20;
    history.push(handed);
    history.push(ack(n + 1, "main", "j", "tj", acked_at));
    history.push(read(
        n + 2,
        "main",
        "j",
        Some("completed"),
        407,
        Some(result("tj")),
    ));
    history.push(read(n + 3, "main", "l", None, 0, None));
}

/// A claim answered at once with one job, granted at `at` (its start).
fn claim(
    n: u64,
    queue: &str,
    job: (&str, u8, &str, u32, i64),
    token: &str,
    at: i64,
    lease_ms: u64,
) -> Op {
    let (id, priority, group, attempts, enqueued_at) = job;
    let lease = Lease {
        id: id.into(),
        token: token.into(),
        priority,
        group: Some(group.into()),
        attempts,
        enqueued_at,
        expires_at: at + lease_ms as i64,
        by: None,
        fence: None,
    };
    let call = Call::Claim {
        worker: format!("w{n}"),
        request_id: format!("r{n}"),
        lease_ms,
        max_jobs: 1,
        acks: Vec::new(),
        jobs: vec![lease],
        acked: Vec::new(),
        skipped: Vec::new(),
    };
    op(n, queue, (at, at + 10), Outcome::Ok, call)
}

/// A nack sending `delay_ms` (`None`: none), answered with the job's
/// attempts, state and `run_at`.
fn nack(id: &str, token: &str, delay_ms: Option<u64>, answer: (u32, &str, Option<i64>)) -> Call {
    let (attempts, state, run_at) = answer;
    Call::Nack {
        id: id.into(),
        token: token.into(),
        delay_ms,
        attempts: Some(attempts),
        state: Some(state.into()),
        run_at,
    }
}

fn result(token: &str) -> Value {
    json!({"token": token})
}

fn ack(n: u64, queue: &str, id: &str, token: &str, at: i64) -> Op {
    let entry = AckEntry {
        id: id.into(),
        token: token.into(),
        result: result(token),
    };
    op(n, queue, (at, at + 10), Outcome::Ok, Call::Ack(entry))
}

fn read(
    n: u64,
    queue: &str,
    id: &str,
    state: Option<&str>,
    enqueued_at: i64,
    result: Option<Value>,
) -> Op {
    let call = Call::Read {
        id: id.into(),
        state: state.map(Into::into),
        enqueued_at: state.map(|_| enqueued_at),
        result,
        events: None,
    };
    op(n, queue, (9000, 9001), Outcome::Ok, call)
}

/// Queue `main` uncapped, `capped` with one job per group in flight.
/// Jobs: a (acked), b (nacked, claimed again, acked inside a claim), c
/// (its enqueue failed), a schedule's job, x and y on the capped queue one
/// after the other, d still processing (its lease extended).
fn clean() -> Vec<Op> {
    let configure = Call::Configure {
        max_in_flight: Some(2),
        group_max_in_flight: Some(1),
        shards: None,
        max_pending: None,
        max_pending_bytes: None,
        history_ms: None,
    };
    let schedule = Call::Schedule {
        name: "tick".into(),
        cron: "* * * * *".into(),
    };
    let claim_acking_b = Call::Claim {
        worker: "w11".into(),
        request_id: "r11".into(),
        lease_ms: 1000,
        max_jobs: 1,
        acks: vec![AckEntry {
            id: "b".into(),
            token: "tc".into(),
            result: result("tc"),
        }],
        jobs: Vec::new(),
        acked: vec![204],
        skipped: Vec::new(),
    };
    vec![
        op(1, "capped", (0, 1), Outcome::Ok, configure),
        op(2, "main", (0, 1), Outcome::Ok, schedule),
        enqueue(3, "main", "a", 1, "g1", 0, Outcome::Ok),
        enqueue(4, "main", "b", 1, "g1", 20, Outcome::Ok),
        enqueue(5, "main", "c", 0, "g1", 35, Outcome::Failed),
        claim(6, "main", ("a", 1, "g1", 0, 5), "ta", 40, 1000),
        ack(7, "main", "a", "ta", 60),
        claim(8, "main", ("b", 1, "g1", 0, 25), "tb", 80, 1000),
        op(
            9,
            "main",
            (100, 110),
            Outcome::Ok,
            nack("b", "tb", Some(0), (1, "pending", None)),
        ),
        claim(10, "main", ("b", 1, "g1", 1, 25), "tc", 120, 1000),
        op(11, "main", (140, 150), Outcome::Ok, claim_acking_b),
        claim(12, "main", ("tick:60000", 1, "g1", 0, 155), "ts", 160, 1000),
        ack(13, "main", "tick:60000", "ts", 180),
        enqueue(14, "capped", "x", 1, "g1", 190, Outcome::Ok),
        enqueue(15, "capped", "y", 1, "g1", 195, Outcome::Ok),
        claim(16, "capped", ("x", 1, "g1", 0, 192), "tx", 200, 1000),
        ack(17, "capped", "x", "tx", 300),
        claim(18, "capped", ("y", 1, "g1", 0, 197), "ty", 320, 1000),
        enqueue(19, "main", "d", 2, "g2", 400, Outcome::Ok),
        claim(20, "main", ("d", 2, "g2", 0, 402), "td", 420, 5000),
        op(
            21,
            "main",
            (500, 505),
            Outcome::Ok,
            Call::Extend {
                id: "d".into(),
                token: "td".into(),
                lease_ms: 5000,
                expires_at: Some(5502),
            },
        ),
        read(22, "main", "a", Some("completed"), 5, Some(result("ta"))),
        read(23, "main", "b", Some("completed"), 25, Some(result("tc"))),
        read(24, "main", "c", None, 0, None),
        read(
            25,
            "main",
            "tick:60000",
            Some("completed"),
            155,
            Some(result("ts")),
        ),
        read(
            26,
            "capped",
            "x",
            Some("completed"),
            192,
            Some(result("tx")),
        ),
        read(27, "capped", "y", Some("processing"), 197, None),
        read(28, "main", "d", Some("processing"), 402, None),
    ]
}

/// The rules `history` breaks, by name, sorted.
fn broken(history: &[Op]) -> Vec<&'static str> {
    let mut rules: Vec<_> = check(history).into_iter().map(|v| v.rule).collect();
    rules.sort_unstable();
    rules.dedup();
    rules
}

fn replace(history: &mut [Op], new: Op) {
    let at = history
        .iter()
        .position(|o| o.op == new.op)
        .expect("op to replace");
    history[at] = new;
}

#[test]
fn a_clean_history_breaks_no_rule() {
    assert_eq!(broken(&clean()), Vec::<&str>::new());
}

#[test]
fn a_job_leased_again_after_its_ack_is_reported() {
    let mut history = clean();
    history.push(claim(50, "main", ("a", 1, "g1", 0, 5), "tz", 500, 1000));
    assert_eq!(broken(&history), ["acked_delivered_again"]);
}

#[test]
fn a_job_gone_without_an_ack_is_reported() {
    let mut history = clean();
    replace(&mut history, read(27, "capped", "y", None, 0, None));
    assert_eq!(broken(&history), ["lost_job"]);
}

#[test]
fn a_failed_enqueue_that_created_its_job_is_reported() {
    let mut history = clean();
    replace(
        &mut history,
        read(24, "main", "c", Some("pending"), 37, None),
    );
    assert_eq!(broken(&history), ["failed_enqueue_applied"]);
}

#[test]
fn a_job_seen_with_two_enqueue_times_is_reported() {
    let mut history = clean();
    replace(
        &mut history,
        read(22, "main", "a", Some("completed"), 6, Some(result("ta"))),
    );
    assert_eq!(broken(&history), ["enqueued_twice"]);
}

#[test]
fn a_schedule_time_fired_twice_is_reported() {
    let mut history = clean();
    replace(
        &mut history,
        read(
            25,
            "main",
            "tick:60000",
            Some("completed"),
            900,
            Some(result("ts")),
        ),
    );
    assert_eq!(broken(&history), ["schedule_fired_twice"]);
}

#[test]
fn a_lease_granted_while_another_held_is_reported() {
    let mut history = clean();
    history.push(claim(50, "main", ("d", 2, "g2", 0, 402), "td2", 600, 5000));
    assert_eq!(broken(&history), ["two_valid_leases"]);
}

#[test]
fn an_ack_from_a_replaced_lease_accepted_is_reported() {
    let mut history = clean();
    // ta's lease ran out at 1040; a new lease at 1100; ta's ack at 1200.
    history.push(claim(50, "main", ("a", 1, "g1", 1, 5), "tz", 1100, 1000));
    replace(&mut history, ack(7, "main", "a", "ta", 1200));
    assert_eq!(broken(&history), ["stale_ack_accepted"]);
}

#[test]
fn a_less_urgent_job_claimed_over_a_pending_urgent_one_is_reported() {
    let mut history = clean();
    history.push(enqueue(50, "main", "e", 0, "g9", 405, Outcome::Ok));
    history.push(read(51, "main", "e", Some("pending"), 407, None));
    assert_eq!(broken(&history), ["priority_order"]);
}

/// The same claim, answered from a first send under its request id that
/// began before the urgent job existed (its answer lost): it took what
/// was there then, and breaks nothing.
#[test]
fn a_claim_answered_from_an_earlier_send_is_judged_from_that_send() {
    let mut history = clean();
    history.push(enqueue(50, "main", "e", 0, "g9", 405, Outcome::Ok));
    history.push(read(51, "main", "e", Some("pending"), 407, None));
    let first_send = Call::Claim {
        worker: "w20".into(),
        request_id: "r20".into(),
        lease_ms: 5000,
        max_jobs: 1,
        acks: Vec::new(),
        jobs: Vec::new(),
        acked: Vec::new(),
        skipped: Vec::new(),
    };
    history.push(op(52, "main", (401, 404), Outcome::Unknown, first_send));
    assert_eq!(broken(&history), Vec::<&str>::new());
}

#[test]
fn a_job_claimed_before_an_older_one_of_its_group_is_reported() {
    let mut history = clean();
    history.push(enqueue(50, "main", "f", 2, "g2", 390, Outcome::Ok));
    history.push(read(51, "main", "f", Some("pending"), 392, None));
    assert_eq!(broken(&history), ["fifo_order"]);
}

/// The main queue split over `shards` shards.
fn sharded(shards: u32) -> Op {
    let call = Call::Configure {
        max_in_flight: None,
        group_max_in_flight: None,
        shards: Some(shards),
        max_pending: None,
        max_pending_bytes: None,
        history_ms: None,
    };
    op(52, "main", (0, 1), Outcome::Ok, call)
}

/// The jobs of `ops` (enqueues and claims) without a group.
fn without_group(history: &mut [Op], ops: &[u64]) {
    for op in history.iter_mut().filter(|op| ops.contains(&op.op)) {
        match &mut op.call {
            Call::Enqueue { group, .. } => *group = None,
            Call::Claim { jobs, .. } => jobs.iter_mut().for_each(|lease| lease.group = None),
            _ => {}
        }
    }
}

/// On a queue split over shards, a claim's parts are bounded by the other
/// shards' next jobs: priority order is judged as on one shard, and FIFO
/// for the jobs without a group (a named group's jobs are tagged by each
/// shard's fair order).
#[test]
fn a_sharded_queue_is_judged_for_priority_and_for_fifo_without_groups() {
    let mut history = clean();
    history.push(sharded(3));
    history.push(enqueue(50, "main", "e", 0, "g9", 405, Outcome::Ok));
    history.push(read(51, "main", "e", Some("pending"), 407, None));
    assert_eq!(broken(&history), ["priority_order"]);

    let mut history = clean();
    history.push(sharded(3));
    history.push(enqueue(50, "main", "f", 2, "g2", 390, Outcome::Ok));
    history.push(read(51, "main", "f", Some("pending"), 392, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
    without_group(&mut history, &[19, 20, 50]);
    assert_eq!(broken(&history), ["fifo_order"]);
}

/// The same urgent job passed over by a claim that ran while another
/// claim of the queue said it could not reach a shard: not judged.
#[test]
fn a_claim_beside_one_that_skipped_a_shard_is_not_judged() {
    let mut history = clean();
    history.push(sharded(3));
    history.push(enqueue(50, "main", "e", 0, "g9", 405, Outcome::Ok));
    history.push(read(51, "main", "e", Some("pending"), 407, None));
    let skipping = Call::Claim {
        worker: "w60".into(),
        request_id: "r60".into(),
        lease_ms: 1000,
        max_jobs: 1,
        acks: Vec::new(),
        jobs: Vec::new(),
        acked: Vec::new(),
        skipped: vec![1],
    };
    history.push(op(60, "main", (425, 440), Outcome::Ok, skipping.clone()));
    assert_eq!(broken(&history), Vec::<&str>::new());

    // A queue split before the history began: the claim naming a shard
    // it skipped tells the checker so.
    let mut history = clean();
    history.push(enqueue(50, "main", "e", 0, "g9", 405, Outcome::Ok));
    history.push(read(51, "main", "e", Some("pending"), 407, None));
    assert_eq!(broken(&history), ["priority_order"]);
    history.push(op(60, "main", (425, 440), Outcome::Ok, skipping));
    assert_eq!(broken(&history), Vec::<&str>::new());
}

#[test]
fn a_group_over_its_cap_is_reported() {
    let mut history = clean();
    // y leased at 250 while x's lease held until its ack at 300.
    replace(
        &mut history,
        claim(18, "capped", ("y", 1, "g1", 0, 197), "ty", 250, 1000),
    );
    assert_eq!(broken(&history), ["cap_exceeded"]);
}

#[test]
fn a_result_other_than_the_acked_one_is_reported() {
    let mut history = clean();
    replace(
        &mut history,
        read(22, "main", "a", Some("completed"), 5, Some(result("tb"))),
    );
    assert_eq!(broken(&history), ["result_mismatch"]);
}

/// e waits for d, which is still processing: a claim that hands out a
/// less urgent job meanwhile breaks nothing, but e handed out is
/// reported.
#[test]
fn a_dependant_handed_out_before_its_dependency_was_acked_is_reported() {
    let mut history = clean();
    history.push(enqueue_after(50, "e", 0, 405, "d"));
    history.push(read(51, "main", "e", Some("waiting"), 407, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
    history.push(claim(52, "main", ("e", 0, "g9", 0, 407), "te", 600, 1000));
    history.push(ack(53, "main", "e", "te", 620));
    replace(
        &mut history,
        read(51, "main", "e", Some("completed"), 407, Some(result("te"))),
    );
    assert_eq!(broken(&history), ["released_early"]);
}

/// r, on a queue of its own, backs off 100 ms doubling: nacked without a
/// delay after its grant at 1040 it is due at 1170 (at least 1140), and
/// after its grant at 1200 at 1420 (at least 1400); claimed at 1450.
fn backing_off() -> Vec<Op> {
    let mut history = clean();
    let mut enqueue = enqueue(50, "retry", "r", 0, "g1", 1000, Outcome::Ok);
    if let Call::Enqueue { backoff, .. } = &mut enqueue.call {
        *backoff = Some(Backoff {
            delay_ms: 100,
            exponential: true,
        });
    }
    history.push(enqueue);
    history.push(claim(
        51,
        "retry",
        ("r", 0, "g1", 0, 1002),
        "tr1",
        1040,
        1000,
    ));
    let first = nack("r", "tr1", None, (1, "scheduled", Some(1170)));
    history.push(op(52, "retry", (1060, 1065), Outcome::Ok, first));
    history.push(claim(
        53,
        "retry",
        ("r", 0, "g1", 1, 1002),
        "tr2",
        1200,
        1000,
    ));
    let second = nack("r", "tr2", None, (2, "scheduled", Some(1420)));
    history.push(op(54, "retry", (1210, 1215), Outcome::Ok, second));
    history.push(claim(
        55,
        "retry",
        ("r", 0, "g1", 2, 1002),
        "tr3",
        1450,
        1000,
    ));
    history.push(ack(56, "retry", "r", "tr3", 1470));
    history.push(read(
        57,
        "retry",
        "r",
        Some("completed"),
        1002,
        Some(result("tr3")),
    ));
    history
}

#[test]
fn a_job_handed_out_before_its_backoff_passed_is_reported() {
    assert_eq!(broken(&backing_off()), Vec::<&str>::new());
    // Handed out before the due time its nack answered.
    let mut history = backing_off();
    replace(
        &mut history,
        claim(55, "retry", ("r", 0, "g1", 2, 1002), "tr3", 1410, 1000),
    );
    assert_eq!(broken(&history), ["retried_early"]);
    // Due after a wait that did not double (100 ms, not 200).
    let mut history = backing_off();
    let undoubled = nack("r", "tr2", None, (2, "scheduled", Some(1320)));
    replace(
        &mut history,
        op(54, "retry", (1210, 1215), Outcome::Ok, undoubled),
    );
    assert_eq!(broken(&history), ["retried_early"]);
    // Back to pending at once, owing its backoff.
    let mut history = backing_off();
    let at_once = nack("r", "tr1", None, (1, "pending", None));
    replace(
        &mut history,
        op(52, "retry", (1060, 1065), Outcome::Ok, at_once),
    );
    assert_eq!(broken(&history), ["retried_early"]);
    // A nack's own delay wins: 0 sends it back to pending.
    let mut history = backing_off();
    let own = nack("r", "tr1", Some(0), (1, "pending", None));
    replace(
        &mut history,
        op(52, "retry", (1060, 1065), Outcome::Ok, own),
    );
    assert_eq!(broken(&history), Vec::<&str>::new());
}

/// h expires at 450 (by Redis's clock, here the runner's): pending
/// meanwhile, it is no witness for the order rules; handed out at 440 it
/// breaks nothing, at 460 it is reported.
#[test]
fn a_job_handed_out_after_its_expiry_is_reported() {
    let mut history = clean();
    let mut expiring = enqueue(50, "main", "h", 0, "g9", 405, Outcome::Ok);
    if let Call::Enqueue {
        expires_in_ms,
        expires_at,
        ..
    } = &mut expiring.call
    {
        (*expires_in_ms, *expires_at) = (Some(45), Some(450));
    }
    history.push(expiring);
    history.push(claim(51, "main", ("h", 0, "g9", 0, 407), "th", 440, 1000));
    history.push(ack(52, "main", "h", "th", 470));
    history.push(read(
        53,
        "main",
        "h",
        Some("completed"),
        407,
        Some(result("th")),
    ));
    assert_eq!(broken(&history), Vec::<&str>::new());
    replace(
        &mut history,
        claim(51, "main", ("h", 0, "g9", 0, 407), "th", 460, 1000),
    );
    assert_eq!(broken(&history), ["expired_delivered"]);
}

/// s is enqueued at 405 to run at 450 (by Redis's clock, here the
/// runner's): scheduled meanwhile, it is no witness for the order rules;
/// handed out at 460 it breaks nothing, at 440 it is reported.
#[test]
fn a_job_handed_out_before_its_run_at_is_reported() {
    let mut history = clean();
    let mut starting = enqueue(50, "main", "s", 0, "g9", 405, Outcome::Ok);
    if let Call::Enqueue { run_at, .. } = &mut starting.call {
        *run_at = Some(450);
    }
    history.push(starting);
    history.push(claim(
        51,
        "main",
        ("s", 0, "g9", 0, 407),
        "t_run",
        460,
        1000,
    ));
    history.push(ack(52, "main", "s", "t_run", 470));
    history.push(read(
        53,
        "main",
        "s",
        Some("completed"),
        407,
        Some(result("t_run")),
    ));
    assert_eq!(broken(&history), Vec::<&str>::new());
    replace(
        &mut history,
        claim(51, "main", ("s", 0, "g9", 0, 407), "t_run", 440, 1000),
    );
    assert_eq!(broken(&history), ["delivered_before_run_at"]);
}

/// A cancel answered ok for g, pending: g is no longer pending for the
/// order rules (a claim then hands out a less urgent job), and a claim
/// that hands g out afterwards is reported.
#[test]
fn a_job_handed_out_after_its_cancel_is_reported() {
    let mut history = clean();
    history.push(enqueue(50, "main", "g", 0, "g9", 405, Outcome::Ok));
    let cancel = Call::Cancel {
        id: "g".into(),
        state: Some("cancelled".into()),
    };
    history.push(op(51, "main", (411, 415), Outcome::Ok, cancel));
    history.push(read(52, "main", "g", Some("cancelled"), 407, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
    history.push(claim(53, "main", ("g", 0, "g9", 0, 407), "tg", 800, 1000));
    history.push(ack(54, "main", "g", "tg", 820));
    replace(
        &mut history,
        read(52, "main", "g", Some("completed"), 407, Some(result("tg"))),
    );
    assert_eq!(broken(&history), ["cancelled_delivered_again"]);
}

/// f waits for a, acked at 60: handed out after that, it breaks nothing.
#[test]
fn a_dependant_handed_out_after_its_dependency_was_acked_breaks_nothing() {
    let mut history = clean();
    history.push(enqueue_after(50, "f", 3, 30, "a"));
    history.push(claim(52, "main", ("f", 3, "g9", 0, 32), "tf", 600, 1000));
    history.push(ack(53, "main", "f", "tf", 620));
    history.push(read(
        51,
        "main",
        "f",
        Some("completed"),
        32,
        Some(result("tf")),
    ));
    assert_eq!(broken(&history), Vec::<&str>::new());
}

/// j holds key k from 405 until a claim takes it at 700: an enqueue of
/// l with k answered with j made nothing (l gone at the end is no lost
/// job); one answered with l itself at 600 is reported, at 800 (after j
/// was taken, and may have ended) it breaks nothing.
#[test]
fn a_job_made_with_a_dedup_key_held_by_another_is_reported() {
    let mut history = clean();
    history.push(enqueue_dedup(50, "j", 405, "k", "j"));
    history.push(enqueue_dedup(51, "l", 600, "k", "j"));
    j_ends_and_l_is_absent(
        &mut history,
        claim(52, "main", ("j", 3, "g8", 0, 407), "tj", 700, 1000),
    );
    assert_eq!(broken(&history), Vec::<&str>::new());
    replace(&mut history, enqueue_dedup(51, "l", 800, "k", "l"));
    replace(
        &mut history,
        read(55, "main", "l", Some("pending"), 802, None),
    );
    assert_eq!(broken(&history), Vec::<&str>::new());
    replace(&mut history, enqueue_dedup(51, "l", 600, "k", "l"));
    replace(
        &mut history,
        read(55, "main", "l", Some("pending"), 602, None),
    );
    assert_eq!(broken(&history), ["dedup_key_held_twice"]);
}

/// On a queue of 2 shards, a key may have a holder per shard: a job made
/// while one other held it breaks nothing, one made while two others did
/// is reported.
#[test]
fn a_key_held_in_more_shards_than_the_queue_has_is_reported() {
    let mut history = clean();
    history.push(sharded(2));
    history.push(enqueue_dedup(50, "j", 405, "k", "j"));
    history.push(enqueue_dedup(51, "l", 600, "k", "l"));
    history.push(read(54, "main", "j", Some("pending"), 407, None));
    history.push(read(55, "main", "l", Some("pending"), 602, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
    history.push(enqueue_dedup(56, "m", 700, "k", "m"));
    history.push(read(57, "main", "m", Some("pending"), 702, None));
    assert_eq!(broken(&history), ["dedup_key_held_twice"]);
}

/// j holds key k; l's enqueue with k (mode replace) is answered
/// `replaced: true` with j. A claim that began after that hands out j with
/// l's args; with j's own, it is reported.
#[test]
fn a_replaced_job_handed_out_as_it_was_before_is_reported() {
    let mut history = clean();
    history.push(enqueue_dedup(50, "j", 405, "k", "j"));
    history.push(enqueue_replacing(51, "l", 600, "k", "j"));
    let handed = claim(52, "main", ("j", 3, "g8", 0, 407), "tj", 700, 1000);
    j_ends_and_l_is_absent(&mut history, handed_by(handed.clone(), "l"));
    assert_eq!(broken(&history), Vec::<&str>::new());
    replace(&mut history, handed_by(handed, "j"));
    assert_eq!(broken(&history), ["replaced_delivered"]);
}

/// On a sharded queue, f (no group) waits from 390; j (no group) is
/// enqueued after it with key k, and a replace with k gives j priority 2.
/// A replace with a delay makes j a delayed job, which takes its place
/// when due by its shard's line: handed out before f, it breaks nothing.
/// The same replace without a delay leaves j's place an enqueue's, and j
/// handed out before f is reported.
#[test]
fn a_job_a_replace_delayed_is_placed_by_its_shard_when_due() {
    let history_with = |delay_ms: u64| {
        let mut history = clean();
        history.push(sharded(3));
        history.push(enqueue(50, "main", "f", 2, "g2", 390, Outcome::Ok));
        history.push(read(51, "main", "f", Some("pending"), 392, None));
        history.push(enqueue_dedup(56, "j", 405, "k", "j"));
        let mut replacing = enqueue_replacing(57, "l", 600, "k", "j");
        if let Call::Enqueue {
            priority,
            delay_ms: delay,
            ..
        } = &mut replacing.call
        {
            (*priority, *delay) = (2, delay_ms);
        }
        history.push(replacing);
        let handed = claim(58, "main", ("j", 2, "g8", 0, 407), "tj", 900, 1000);
        j_ends_and_l_is_absent(&mut history, handed_by(handed, "l"));
        without_group(&mut history, &[50, 56, 57, 58]);
        history
    };
    assert_eq!(broken(&history_with(250)), Vec::<&str>::new());
    assert_eq!(broken(&history_with(0)), ["fifo_order"]);
}

/// `history` with each named token ending in `-<fence>` wherever the
/// history names it (claims, acks, nacks, results).
fn with_fences(history: &[Op], fences: &[(&str, u64)]) -> Vec<Op> {
    history
        .iter()
        .map(|op| {
            let mut text = serde_json::to_string(op).expect("an op as JSON");
            for (token, fence) in fences {
                text = text.replace(&format!("\"{token}\""), &format!("\"{token}-{fence}\""));
            }
            serde_json::from_str(&text).expect("an op from JSON")
        })
        .collect()
}

/// Fences in grant order break nothing. b granted again (at 120) with a
/// fence below its first grant's (answered at 90) is reported; so is d
/// (granted at 420) with a fence below that of the tick's job, answered
/// at 170, on the unsharded queue, but not on a sharded one, where the
/// two may be in different shards.
#[test]
fn a_fence_below_an_earlier_grants_is_reported() {
    let in_order = [
        ("ta", 100),
        ("tb", 200),
        ("tc", 300),
        ("ts", 400),
        ("td", 500),
    ];
    assert_eq!(
        broken(&with_fences(&clean(), &in_order)),
        Vec::<&str>::new()
    );
    let b_again_lower = [
        ("ta", 100),
        ("tb", 200),
        ("tc", 150),
        ("ts", 400),
        ("td", 500),
    ];
    assert_eq!(
        broken(&with_fences(&clean(), &b_again_lower)),
        ["fence_not_growing"]
    );
    let d_lower = [
        ("ta", 100),
        ("tb", 200),
        ("tc", 300),
        ("ts", 400),
        ("td", 350),
    ];
    assert_eq!(
        broken(&with_fences(&clean(), &d_lower)),
        ["fence_not_growing"]
    );
    let mut sharded_queue = clean();
    sharded_queue.push(sharded(3));
    assert_eq!(
        broken(&with_fences(&sharded_queue, &d_lower)),
        Vec::<&str>::new()
    );
}

/// `history` with the lease of each named token answered with `fence`
/// (the claim's `fence` field, as the runner records it).
fn with_answered_fences(history: &[Op], fences: &[(&str, u64)]) -> Vec<Op> {
    let mut history = history.to_vec();
    for op in &mut history {
        if let Call::Claim { jobs, .. } = &mut op.call {
            for lease in jobs {
                if let Some(&(_, fence)) = fences.iter().find(|(t, _)| *t == lease.token) {
                    lease.fence = Some(fence);
                }
            }
        }
    }
    history
}

/// The fence a claim answered is the one judged, not the number its
/// token ends with: tokens in grant order with b's second grant answered
/// below its first is reported; tokens out of order with the answered
/// fences in order is not.
#[test]
fn the_fence_judged_is_the_one_the_claim_answered() {
    let tokens_in_order = with_fences(
        &clean(),
        &[
            ("ta", 100),
            ("tb", 200),
            ("tc", 300),
            ("ts", 400),
            ("td", 500),
        ],
    );
    let answered_lower = [
        ("ta-100", 100),
        ("tb-200", 200),
        ("tc-300", 150),
        ("ts-400", 400),
        ("td-500", 500),
    ];
    assert_eq!(
        broken(&with_answered_fences(&tokens_in_order, &answered_lower)),
        ["fence_not_growing"]
    );
    let tokens_out_of_order = with_fences(
        &clean(),
        &[
            ("ta", 100),
            ("tb", 200),
            ("tc", 150),
            ("ts", 400),
            ("td", 500),
        ],
    );
    let answered_in_order = [
        ("ta-100", 100),
        ("tb-200", 200),
        ("tc-150", 300),
        ("ts-400", 400),
        ("td-500", 500),
    ];
    assert_eq!(
        broken(&with_answered_fences(
            &tokens_out_of_order,
            &answered_in_order
        )),
        Vec::<&str>::new()
    );
}

/// e (on the capped queue) waits for main's d, still processing: handed
/// out, it is reported.
#[test]
fn a_dependant_handed_out_before_its_dependency_in_another_queue_is_reported() {
    let mut history = clean();
    let mut waiting = enqueue(50, "capped", "e", 1, "g9", 405, Outcome::Ok);
    if let Call::Enqueue { after, .. } = &mut waiting.call {
        after.push("main/d".into());
    }
    history.push(waiting);
    history.push(read(51, "capped", "e", Some("waiting"), 407, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
    history.push(claim(52, "capped", ("e", 1, "g9", 0, 407), "te", 600, 1000));
    history.push(ack(53, "capped", "e", "te", 620));
    replace(
        &mut history,
        read(
            51,
            "capped",
            "e",
            Some("completed"),
            407,
            Some(result("te")),
        ),
    );
    assert_eq!(broken(&history), ["released_early"]);
}

/// A claim that carries the ack of d and hands out its dependant e, all
/// within one millisecond, breaks nothing.
#[test]
fn a_dependant_handed_out_by_the_claim_acking_its_dependency_breaks_nothing() {
    let mut history = clean();
    history.push(enqueue_after(50, "e", 0, 405, "d"));
    let mut claim_acking_d = claim(51, "main", ("e", 0, "g9", 0, 407), "te", 600, 1000);
    claim_acking_d.end_ms = claim_acking_d.start_ms;
    if let Call::Claim { acks, acked, .. } = &mut claim_acking_d.call {
        acks.push(AckEntry {
            id: "d".into(),
            token: "td".into(),
            result: result("td"),
        });
        acked.push(204);
    }
    history.push(claim_acking_d);
    replace(
        &mut history,
        read(28, "main", "d", Some("completed"), 402, Some(result("td"))),
    );
    history.push(read(52, "main", "e", Some("processing"), 407, None));
    assert_eq!(broken(&history), Vec::<&str>::new());
}

#[test]
fn every_rule_has_a_planted_violation() {
    // The tests above plant one violation per rule; a rule added to the
    // checker without its planted test fails here.
    let planted = [
        "acked_delivered_again",
        "lost_job",
        "failed_enqueue_applied",
        "enqueued_twice",
        "schedule_fired_twice",
        "two_valid_leases",
        "stale_ack_accepted",
        "priority_order",
        "fifo_order",
        "cap_exceeded",
        "expired_delivered",
        "delivered_before_run_at",
        "retried_early",
        "cancelled_delivered_again",
        "released_early",
        "dedup_key_held_twice",
        "replaced_delivered",
        "queue_overfilled",
        "queue_overfilled_bytes",
        "history_missing_claim",
        "result_mismatch",
        "fence_not_growing",
    ];
    let rules: Vec<&str> = RULES.iter().map(|r| r.name).collect();
    assert_eq!(rules, planted);
}

#[test]
fn an_unknown_enqueue_may_or_may_not_exist() {
    // The same history with c's enqueue unknown instead of failed: c
    // present, or gone, is allowed either way.
    for state in [Some("pending"), None] {
        let mut history = clean();
        replace(
            &mut history,
            enqueue(5, "main", "c", 0, "g1", 35, Outcome::Unknown),
        );
        replace(&mut history, read(24, "main", "c", state, 37, None));
        assert_eq!(broken(&history), Vec::<&str>::new(), "c {state:?}");
    }
}

/// Queue `bounded` with `max_pending` 2, holding x and y, and z enqueued
/// after them; with x claimed before z's enqueue began when `claimed`.
fn bounded(claimed: bool) -> Vec<Op> {
    let call = Call::Configure {
        max_in_flight: None,
        group_max_in_flight: None,
        shards: None,
        max_pending: Some(2),
        max_pending_bytes: None,
        history_ms: None,
    };
    let mut history = clean();
    history.push(op(60, "bounded", (600, 601), Outcome::Ok, call));
    history.push(enqueue(61, "bounded", "x", 1, "g1", 610, Outcome::Ok));
    history.push(enqueue(62, "bounded", "y", 1, "g1", 620, Outcome::Ok));
    if claimed {
        history.push(claim(
            63,
            "bounded",
            ("x", 1, "g1", 0, 611),
            "t-bounded-x",
            630,
            60_000,
        ));
    }
    history.push(enqueue(64, "bounded", "z", 1, "g1", 650, Outcome::Ok));
    history
}

#[test]
fn a_job_made_while_a_bounded_queue_was_full_is_reported() {
    assert_eq!(broken(&bounded(false)), ["queue_overfilled"]);
    assert_eq!(broken(&bounded(true)), Vec::<&str>::new());
}

/// Queue `sized` with `max_pending_bytes` 100, holding x and y of 40
/// bytes each, and z of `z_bytes` enqueued after them (a keyed w of 40
/// too, left out: a replace may have changed its bytes); with x claimed
/// before z's enqueue began when `claimed`.
fn bounded_bytes(claimed: bool, z_bytes: u64) -> Vec<Op> {
    let call = Call::Configure {
        max_in_flight: None,
        group_max_in_flight: None,
        shards: None,
        max_pending: None,
        max_pending_bytes: Some(100),
        history_ms: None,
    };
    let sized = |n, id: &str, at, bytes, key: Option<&str>| {
        let mut op = enqueue(n, "sized", id, 1, "g1", at, Outcome::Ok);
        if let Call::Enqueue {
            bytes: weight,
            dedup,
            ..
        } = &mut op.call
        {
            *weight = Some(bytes);
            *dedup = key.map(str::to_owned);
        }
        op
    };
    let mut history = clean();
    history.push(op(80, "sized", (800, 801), Outcome::Ok, call));
    history.push(sized(81, "x", 810, 40, None));
    history.push(sized(82, "y", 820, 40, None));
    history.push(sized(83, "w", 825, 40, Some("k")));
    if claimed {
        history.push(claim(
            84,
            "sized",
            ("x", 1, "g1", 0, 811),
            "t-sized-x",
            830,
            60_000,
        ));
    }
    history.push(sized(85, "z", 850, z_bytes, None));
    history
}

#[test]
fn a_job_made_past_a_queues_bytes_is_reported() {
    assert_eq!(
        broken(&bounded_bytes(false, 30)),
        ["queue_overfilled_bytes"]
    );
    // 40 + 40 + 20 is the bound, not past it.
    assert_eq!(broken(&bounded_bytes(false, 20)), Vec::<&str>::new());
    assert_eq!(broken(&bounded_bytes(true, 30)), Vec::<&str>::new());
}

/// Queue `kept` keeping histories, its job h claimed twice (the first
/// lease nacked); h's history read back with `claimed` its claim events
/// (fence and worker each).
fn kept(claimed: &[(u64, &str)]) -> Vec<Op> {
    let configure = Call::Configure {
        max_in_flight: None,
        group_max_in_flight: None,
        shards: None,
        max_pending: None,
        max_pending_bytes: None,
        history_ms: Some(3_600_000),
    };
    let mut history = clean();
    history.push(op(70, "kept", (700, 701), Outcome::Ok, configure));
    history.push(enqueue(71, "kept", "h", 1, "g1", 710, Outcome::Ok));
    history.push(claim(
        72,
        "kept",
        ("h", 1, "g1", 0, 711),
        "t-h-5",
        720,
        60_000,
    ));
    let nack = nack("h", "t-h-5", Some(0), (1, "pending", None));
    history.push(op(73, "kept", (740, 741), Outcome::Ok, nack));
    history.push(claim(
        74,
        "kept",
        ("h", 1, "g1", 1, 711),
        "t-h-9",
        760,
        60_000,
    ));
    history.push(ack(75, "kept", "h", "t-h-9", 780));
    let events = std::iter::once(Event {
        event: "enqueued".into(),
        fence: None,
        worker: None,
    })
    .chain(claimed.iter().map(|&(fence, worker)| Event {
        event: "claimed".into(),
        fence: Some(fence),
        worker: Some(worker.into()),
    }))
    .collect();
    let read = Call::Read {
        id: "h".into(),
        state: None,
        enqueued_at: None,
        result: None,
        events: Some(events),
    };
    history.push(op(76, "kept", (9000, 9001), Outcome::Ok, read));
    history
}

#[test]
fn a_lease_missing_from_a_jobs_history_is_reported() {
    assert_eq!(broken(&kept(&[(5, "w72"), (9, "w74")])), Vec::<&str>::new());
    assert_eq!(broken(&kept(&[(5, "w72")])), ["history_missing_claim"]);
    assert_eq!(
        broken(&kept(&[(5, "w72"), (9, "w72")])),
        ["history_missing_claim"]
    );
    assert_eq!(
        broken(&kept(&[(9, "w74"), (5, "w72")])),
        ["history_missing_claim"]
    );
}
