//! Dead-letter queue.

use super::*;

#[tokio::test]
async fn dlq_lists_most_recent_first_and_pages_with_a_cursor() {
    let app = spawn_app().await;
    // Ids sort the other way round from the order the jobs die in.
    let mut dead = Vec::new();
    for (i, id) in ["dlq-e", "dlq-d", "dlq-c", "dlq-b", "dlq-a"]
        .into_iter()
        .enumerate()
    {
        let job = make_dead(
            &app,
            "q",
            json!({"task": "t", "id": id, "max_attempts": 1}),
            &format!("error {i}"),
        )
        .await;
        dead.push(job);
    }
    // Most recently dead first; the service's own dead_at decides, ties by id.
    let mut expected = dead.clone();
    expected
        .sort_by(|a, b| (ms_of(&b["dead_at"]), id_of(b)).cmp(&(ms_of(&a["dead_at"]), id_of(a))));
    let expected = ids_of(&expected);

    let all = dlq_page(&app, "q", "").await;
    assert_eq!(all.status, StatusCode::OK, "{all:?}");
    assert_eq!(all.body["total"], 5);
    assert!(all.body["next_cursor"].is_null(), "{all:?}");
    let jobs = all.body["jobs"].as_array().expect("jobs");
    assert_eq!(ids_of(jobs), expected);
    for job in jobs {
        let original = dead.iter().find(|d| d["id"] == job["id"]).expect("known");
        assert_eq!(job["last_error"], original["last_error"]);
        assert_eq!(job["dead_at"], original["dead_at"]);
        assert_eq!(job["attempts"], 1);
    }

    let pages = dlq_pages(&app, "q", 2).await;
    let sizes: Vec<_> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(
        pages.concat(),
        expected,
        "pages cover the DLQ in order, once"
    );
    let first = dlq_page(&app, "q", "?limit=2").await;
    assert_eq!(
        first.body["total"], 5,
        "total counts the whole DLQ, not the page"
    );
    assert!(first.body["next_cursor"].is_string());
}

#[tokio::test]
async fn dlq_pages_jobs_that_died_in_the_same_millisecond_without_gaps() {
    let app = spawn_app().await;
    // Ids whose byte order is not their order of arrival, with the
    // characters a cursor must carry: . : - _ and one id a prefix of another.
    let ids = ["same-b", "a", "a-1", "A", "a.b", "a:b", "Z_9", "0", "a.b.c"];
    let jobs: Vec<Value> = ids
        .iter()
        .map(|id| json!({"task": "t", "id": id, "max_attempts": 1}))
        .collect();
    let answer = app
        .post(app.queue_url("q", "/jobs/batch"), json!({"jobs": jobs}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let leased = app
        .claim("q", json!({"lease_ms": 100, "max_jobs": 100}))
        .await;
    assert_eq!(leased.len(), ids.len());
    let mut dead_at = HashSet::new();
    for job in &leased {
        let dead = app
            .wait_for_job("q", id_of(job), Duration::from_secs(5), |j| {
                j["state"] == "dead"
            })
            .await;
        dead_at.insert(dead["dead_at"].as_str().expect("dead_at").to_owned());
    }
    // One sweep took every lease back at once: they all share one dead_at.
    assert_eq!(dead_at.len(), 1, "{dead_at:?}");
    let all: BTreeSet<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let whole = dlq_pages(&app, "q", 1000).await;
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].iter().cloned().collect::<BTreeSet<_>>(), all);

    for limit in [1, 2, 3, 4, 8, 9] {
        let pages = dlq_pages(&app, "q", limit).await;
        let seen = pages.concat();
        assert_eq!(
            seen, whole[0],
            "limit {limit}: pages differ from the whole list: {pages:?}"
        );
        assert!(
            pages[..pages.len() - 1]
                .iter()
                .all(|p| p.len() == limit as usize),
            "limit {limit}: {pages:?}"
        );
        assert!(
            !pages.last().expect("a page").is_empty(),
            "limit {limit}: an empty last page"
        );
    }
}

#[tokio::test]
async fn dlq_rejects_bad_paging_parameters() {
    let app = spawn_app().await;
    make_dead(&app, "q", json!({"task": "t"}), "boom").await;
    for query in [
        "?limit=0",
        "?limit=1001",
        "?limit=-1",
        "?limit=abc",
        "?cursor=garbage",
        "?cursor=abc.def",
        "?cursor=",
    ] {
        let answer = dlq_page(&app, "q", query).await;
        assert_problem(&answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    for query in ["?limit=1", "?limit=1000", ""] {
        let answer = dlq_page(&app, "q", query).await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {answer:?}");
        assert_eq!(answer.body["jobs"].as_array().expect("jobs").len(), 1);
    }
}

#[tokio::test]
async fn dlq_of_a_queue_without_dead_jobs_is_empty() {
    let app = spawn_app().await;
    app.enqueue("q", json!({"task": "t"})).await;
    for queue in ["q", "never-used"] {
        let answer = dlq_page(&app, queue, "").await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.body["jobs"], json!([]));
        assert_eq!(answer.body["total"], 0);
        assert!(answer.body["next_cursor"].is_null());
    }
}

#[tokio::test]
async fn requeue_returns_a_dead_job_to_pending_with_attempts_reset() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "t", "priority": 2}), "boom").await;
    let id = id_of(&dead);

    // No body, no content type.
    let answer = post_empty(&app, app.queue_url("q", &format!("/dlq/{id}/requeue"))).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["state"], "pending");
    assert_eq!(answer.body["attempts"], 0);
    assert_eq!(answer.body["priority"], 2);
    assert!(answer.body["dead_at"].is_null(), "{answer:?}");
    assert_eq!(app.stats("q").await["dead"], 0);
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);
    let leased = app.claim_one("q").await.expect("requeued job is claimable");
    assert_eq!(id_of(&leased), id);

    // A requeued job enters its class behind the jobs already waiting there.
    let dead = nack(&app, "q", &leased, json!({"dead": true})).await.body;
    assert_eq!(dead["state"], "dead");
    let waiting = app
        .enqueue("q", json!({"task": "waiting", "priority": 2}))
        .await;
    let answer = post_empty(&app, app.queue_url("q", &format!("/dlq/{id}/requeue"))).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let order = app.claim("q", json!({"max_jobs": 2})).await;
    assert_eq!(ids_of(&order), [id_of(&waiting), id]);
    let leased = order[1].clone();

    // With a new priority.
    let dead = nack(&app, "q", &leased, json!({"dead": true})).await.body;
    assert_eq!(dead["state"], "dead");
    let answer = app
        .post(
            app.queue_url("q", &format!("/dlq/{id}/requeue")),
            json!({"priority": 3}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        (
            answer.body["state"].clone(),
            answer.body["priority"].clone()
        ),
        (json!("pending"), json!(3))
    );
    assert_eq!(answer.body["attempts"], 0);
    assert_eq!(app.stats("q").await["classes"][0]["priority"], 3);

    // With an empty JSON object.
    let leased = app.claim_one("q").await.expect("claimable");
    nack(&app, "q", &leased, json!({"dead": true})).await;
    let answer = app
        .post(app.queue_url("q", &format!("/dlq/{id}/requeue")), json!({}))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        (
            answer.body["state"].clone(),
            answer.body["priority"].clone()
        ),
        (json!("pending"), json!(3))
    );

    // A bad body is still refused.
    let leased = app.claim_one("q").await.expect("claimable");
    nack(&app, "q", &leased, json!({"dead": true})).await;
    let url = app.queue_url("q", &format!("/dlq/{id}/requeue"));
    assert_invalid_field(
        &app.post(url.clone(), json!({"priority": 256})).await,
        "priority",
    );
    let text = post_raw(&app, url, Some("text/plain"), "priority=3").await;
    assert_problem(
        &text,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    assert_eq!(app.job("q", id).await.body["state"], "dead");
}

#[tokio::test]
async fn requeue_of_a_job_that_is_not_dead_is_conflict_and_unknown_is_not_found() {
    let app = spawn_app().await;
    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let scheduled = app
        .enqueue("q", json!({"task": "s", "delay_ms": 60_000}))
        .await;
    let processing = enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({})).await;
    let before = app.snapshot().await;
    for (queue, job) in [("q", &pending), ("q", &scheduled), ("r", &processing)] {
        let url = app.queue_url(queue, &format!("/dlq/{}/requeue", id_of(job)));
        assert_problem(
            &post_empty(&app, url).await,
            StatusCode::CONFLICT,
            "conflict",
        );
    }
    let unknown = post_empty(&app, app.queue_url("q", "/dlq/ghost/requeue")).await;
    assert_problem(&unknown, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.snapshot().await, before);
}

#[tokio::test]
async fn delete_from_the_dlq_removes_only_dead_jobs() {
    let app = spawn_app().await;
    let dead = make_dead(&app, "q", json!({"task": "d"}), "boom").await;
    let url = app.queue_url("q", &format!("/dlq/{}", id_of(&dead)));
    let answer = delete(&app, url.clone()).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    assert_problem(&delete(&app, url).await, StatusCode::NOT_FOUND, "not_found");
    assert_problem(
        &app.job("q", id_of(&dead)).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(dlq_page(&app, "q", "").await.body["total"], 0);

    let pending = app.enqueue("q", json!({"task": "p"})).await;
    let processing = enqueue_and_claim(&app, "r", json!({"task": "c"}), json!({})).await;
    let before = app.snapshot().await;
    let answer = delete(
        &app,
        app.queue_url("q", &format!("/dlq/{}", id_of(&pending))),
    )
    .await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    let answer = delete(
        &app,
        app.queue_url("r", &format!("/dlq/{}", id_of(&processing))),
    )
    .await;
    assert_problem(&answer, StatusCode::CONFLICT, "conflict");
    let answer = delete(&app, app.queue_url("q", "/dlq/ghost")).await;
    assert_problem(&answer, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.snapshot().await, before);
    assert_eq!(app.job("q", id_of(&pending)).await.body["state"], "pending");
}
