//! W3C trace headers kept with jobs, and the spans exported over OTLP/HTTP
//! to a receiver inside the test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};

use crate::support::clock::within;
use crate::support::redis_server::shared_redis;
use crate::support::{Service, TestApp, send_signal, spawn_app, unique_prefix};

const TRACE_1: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_1: &str = "00f067aa0ba902b7";
const TRACE_2: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT_2: &str = "b7ad6b7169203331";

fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

async fn enqueue_traced(app: &TestApp, queue: &str, headers: &[(&str, &str)]) -> Value {
    let mut request = app
        .http
        .post(app.queue_url(queue, "/jobs"))
        .json(&json!({"task": "t"}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer = app.send(request).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.body
}

#[tokio::test]
async fn a_job_keeps_its_trace_headers_through_its_life() {
    let app = spawn_app().await;
    let parent = traceparent(TRACE_1, PARENT_1);
    let sent = enqueue_traced(
        &app,
        "traced",
        &[("traceparent", &parent), ("tracestate", "vendor=abc")],
    )
    .await;
    let trace = json!({"traceparent": parent, "tracestate": "vendor=abc"});
    assert_eq!(sent["trace"], trace);
    let id = sent["id"].as_str().expect("id");

    let claimed = app.claim_one("traced").await.expect("claimed");
    assert_eq!(claimed["trace"], trace);
    let nacked = app
        .post(
            app.queue_url("traced", &format!("/jobs/{id}/nack")),
            json!({"lease_token": claimed["lease_token"], "error": "again"}),
        )
        .await;
    assert_eq!(nacked.body["trace"], trace, "{nacked:?}");
    let again = app.claim_one("traced").await.expect("claimed again");
    assert_eq!(
        (again["attempts"].as_u64(), &again["trace"]),
        (Some(1), &trace)
    );
    let dead = app
        .post(
            app.queue_url("traced", &format!("/jobs/{id}/nack")),
            json!({"lease_token": again["lease_token"], "dead": true}),
        )
        .await;
    assert_eq!(dead.body["state"], "dead", "{dead:?}");
    let listed = app.get(app.queue_url("traced", "/dlq")).await;
    assert_eq!(listed.body["jobs"][0]["trace"], trace, "{listed:?}");
    assert_eq!(app.job("traced", id).await.body["trace"], trace);
}

#[tokio::test]
async fn a_batch_gives_its_trace_to_every_job_and_jobs_without_one_have_none() {
    let app = spawn_app().await;
    let parent = traceparent(TRACE_2, PARENT_2);
    let answer = app
        .send(
            app.http
                .post(app.queue_url("batch", "/jobs/batch"))
                .header("traceparent", &parent)
                .json(&json!({"jobs": [{"task": "a"}, {"task": "b"}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let trace = json!({"traceparent": parent, "tracestate": null});
    for job in answer.body["jobs"].as_array().expect("jobs") {
        assert_eq!(job["trace"], trace);
        let id = job["id"].as_str().expect("id");
        assert_eq!(app.job("batch", id).await.body["trace"], trace);
    }

    let plain = app.enqueue("batch", json!({"task": "c"})).await;
    assert_eq!(plain["trace"], Value::Null);
    // W3C has a receiver ignore a malformed traceparent, and its
    // tracestate with it.
    let malformed = enqueue_traced(
        &app,
        "batch",
        &[
            ("traceparent", "00-4bf92f3577b34da6-00f067aa0ba902b7-01"),
            ("tracestate", "vendor=abc"),
        ],
    )
    .await;
    assert_eq!(malformed["trace"], Value::Null);
    let id = malformed["id"].as_str().expect("id");
    assert_eq!(app.job("batch", id).await.body["trace"], Value::Null);
}

/// An OTLP/HTTP receiver on a free port, keeping the spans it is sent.
struct Receiver {
    /// Its base URL: spans go to `/v1/traces` under it.
    endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Receiver {
    async fn start() -> Self {
        Self::start_at("/v1/traces").await
    }

    /// A receiver taking spans at `path` only; any other path answers
    /// 404, as a collector does.
    async fn start_at(path: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route(path, post(export))
            .with_state(spans.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { endpoint, spans }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("not poisoned").clone()
    }
}

async fn export(
    State(spans): State<Arc<Mutex<Vec<Span>>>>,
    body: Bytes,
) -> (StatusCode, [(header::HeaderName, &'static str); 1], Vec<u8>) {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
    for resource in request.resource_spans {
        let names = resource.resource.iter().flat_map(|r| &r.attributes);
        let service = names
            .filter(|kv| kv.key == "service.name")
            .find_map(|kv| kv.value.clone()?.value);
        assert_eq!(service, Some(AnyValue::StringValue("prioq".into())));
        let mut kept = spans.lock().expect("not poisoned");
        kept.extend(resource.scope_spans.into_iter().flat_map(|s| s.spans));
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        answer,
    )
}

fn attribute(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone()?.value)
}

fn text(value: &str) -> Option<AnyValue> {
    Some(AnyValue::StringValue(value.to_owned()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans named `name`, each checked for the attributes every span has.
fn named<'a>(spans: &'a [Span], name: &str, operation: &str, kind: SpanKind) -> Vec<&'a Span> {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    for span in &found {
        assert_eq!(span.kind, kind as i32, "{span:?}");
        assert_eq!(attribute(span, "messaging.system"), text("prioq"));
        assert_eq!(attribute(span, "messaging.destination.name"), text("spans"));
        assert_eq!(attribute(span, "messaging.operation.type"), text(operation));
    }
    found
}

/// Enqueues (one job under a trace, a batch of two under another, one
/// job without), claims them all, acks one and nacks one, and stops the
/// service, which sends the spans it still holds.
#[tokio::test]
async fn spans_follow_the_messaging_conventions_and_join_the_producers_traces() {
    let receiver = Receiver::start().await;
    let env = [("PRIOQ_OTLP_ENDPOINT", receiver.endpoint.as_str())];
    let mut service = Service::start_with(&shared_redis().url(), &unique_prefix(), &env).await;
    let http = reqwest::Client::new();
    let url = |rest: &str| service.url(&format!("/v1/queues/spans{rest}"));
    let post = |rest: &str, body: Value| http.post(url(rest)).json(&body);

    let single = post("/jobs", json!({"task": "one"}))
        .header("traceparent", traceparent(TRACE_1, PARENT_1))
        .send()
        .await
        .expect("answered");
    assert_eq!(single.status(), StatusCode::CREATED);
    let single: Value = single.json().await.expect("JSON");
    let batch = post(
        "/jobs/batch",
        json!({"jobs": [{"task": "a"}, {"task": "b"}]}),
    )
    .header("traceparent", traceparent(TRACE_2, PARENT_2))
    .send()
    .await
    .expect("answered");
    assert_eq!(batch.status(), StatusCode::OK);
    let plain = post("/jobs", json!({"task": "plain"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(plain.status(), StatusCode::CREATED);

    let claimed: Value = post("/claim", json!({"max_jobs": 10}))
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("JSON");
    let jobs = claimed["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 4, "{claimed}");
    let (acked, nacked) = (&jobs[0], &jobs[1]);
    let settle = |job: &Value, how: &str, body: Value| {
        let id = job["id"].as_str().expect("id");
        post(&format!("/jobs/{id}/{how}"), body).send()
    };
    let ack = settle(acked, "ack", json!({"lease_token": acked["lease_token"]}));
    assert_eq!(
        ack.await.expect("answered").status(),
        StatusCode::NO_CONTENT
    );
    let nack = settle(
        nacked,
        "nack",
        json!({"lease_token": nacked["lease_token"]}),
    );
    assert_eq!(nack.await.expect("answered").status(), StatusCode::OK);

    send_signal(service.pid(), "TERM");
    assert!(service.exit_within(Duration::from_secs(15)).await.success());
    let spans = receiver.spans();

    let mut sends = named(&spans, "send spans", "send", SpanKind::Producer);
    sends.sort_by_key(|s| hex(&s.parent_span_id));
    let parentage: Vec<(String, String)> = sends
        .iter()
        .map(|s| (hex(&s.trace_id), hex(&s.parent_span_id)))
        .collect();
    assert_eq!(parentage.len(), 3, "{spans:#?}");
    // The enqueue without a traceparent starts a trace of its own.
    assert_eq!(parentage[0].1, "");
    assert_eq!(
        parentage[1..],
        [
            (TRACE_1.to_owned(), PARENT_1.to_owned()),
            (TRACE_2.to_owned(), PARENT_2.to_owned())
        ]
    );
    assert_eq!(
        attribute(sends[1], "messaging.message.id"),
        text(single["id"].as_str().expect("id"))
    );
    assert_eq!(
        attribute(sends[2], "messaging.batch.message_count"),
        Some(AnyValue::IntValue(2))
    );
    assert_eq!(attribute(sends[2], "messaging.message.id"), None);

    let receives = named(&spans, "receive spans", "receive", SpanKind::Client);
    let [receive] = receives[..] else {
        panic!("one receive span: {spans:#?}");
    };
    assert_eq!(receive.parent_span_id, Vec::<u8>::new());
    assert_eq!(
        attribute(receive, "messaging.batch.message_count"),
        Some(AnyValue::IntValue(4))
    );
    let mut links: Vec<(String, String)> = receive
        .links
        .iter()
        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
        .collect();
    links.sort();
    let mut expected = vec![
        (TRACE_1.to_owned(), PARENT_1.to_owned()),
        (TRACE_2.to_owned(), PARENT_2.to_owned()),
        (TRACE_2.to_owned(), PARENT_2.to_owned()),
    ];
    expected.sort();
    assert_eq!(links, expected);

    let settles = named(&spans, "settle spans", "settle", SpanKind::Client);
    let mut settled: Vec<(Option<AnyValue>, Option<AnyValue>)> = settles
        .iter()
        .map(|s| {
            (
                attribute(s, "messaging.operation.name"),
                attribute(s, "messaging.message.id"),
            )
        })
        .collect();
    settled.sort_by_key(|(name, _)| format!("{name:?}"));
    assert_eq!(
        settled,
        [
            (text("ack"), text(acked["id"].as_str().expect("id"))),
            (text("nack"), text(nacked["id"].as_str().expect("id"))),
        ]
    );
}

/// A collector that takes the connection and never answers: requests are
/// answered as quickly as ever, and shutdown waits for it only so long.
#[tokio::test]
async fn a_silent_collector_holds_back_no_request_and_delays_shutdown_briefly() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let endpoint = format!("http://{}", silent.local_addr().expect("address"));
    let env = [("PRIOQ_OTLP_ENDPOINT", endpoint.as_str())];
    let mut service = Service::start_with(&shared_redis().url(), &unique_prefix(), &env).await;
    let http = reqwest::Client::new();
    for _ in 0..20 {
        let answer = within(
            Duration::from_secs(2),
            http.post(service.url("/v1/queues/silent/jobs"))
                .header("traceparent", traceparent(TRACE_1, PARENT_1))
                .json(&json!({"task": "t"}))
                .send(),
        )
        .await
        .expect("answered");
        assert_eq!(answer.status(), StatusCode::CREATED);
    }
    send_signal(service.pid(), "TERM");
    assert!(service.exit_within(Duration::from_secs(10)).await.success());
}

/// Starts prioq with `env`, enqueues one traced job and stops it, which
/// exports what it holds; answers the `send` spans that arrived and the
/// service's log.
async fn one_traced_enqueue(env: &[(&str, &str)], receiver: &Receiver) -> (usize, String) {
    let mut service = Service::start_with(&shared_redis().url(), &unique_prefix(), env).await;
    let answer = reqwest::Client::new()
        .post(service.url("/v1/queues/spans/jobs"))
        .header("traceparent", traceparent(TRACE_1, PARENT_1))
        .json(&json!({"task": "t"}))
        .send()
        .await
        .expect("answered");
    assert_eq!(answer.status(), StatusCode::CREATED);
    send_signal(service.pid(), "TERM");
    assert!(service.exit_within(Duration::from_secs(15)).await.success());
    let spans = receiver.spans();
    (
        named(&spans, "send spans", "send", SpanKind::Producer).len(),
        service.log(),
    )
}

/// `PRIOQ_OTLP_ENDPOINT` given as the traces URL itself is not doubled
/// (`/v1/traces/v1/traces`, where a collector answers 404).
#[tokio::test]
async fn an_endpoint_given_as_the_traces_url_is_used_as_it_is() {
    let receiver = Receiver::start().await;
    let url = format!("{}/v1/traces", receiver.endpoint);
    let (sends, log) =
        one_traced_enqueue(&[("PRIOQ_OTLP_ENDPOINT", url.as_str())], &receiver).await;
    assert_eq!(sends, 1, "{log}");
}

/// Without prioq's own variable, OpenTelemetry's standard ones are read as
/// its SDKs read them: the base URL gets `/v1/traces`, the traces URL is
/// used as it is (here a path no base URL would give), and it wins over
/// the base URL.
#[tokio::test]
async fn opentelemetrys_standard_variables_are_honoured() {
    let receiver = Receiver::start().await;
    let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.as_str())];
    let (sends, log) = one_traced_enqueue(&base, &receiver).await;
    assert_eq!(sends, 1, "{log}");

    let custom = Receiver::start_at("/ingest/spans").await;
    let url = format!("{}/ingest/spans", custom.endpoint);
    let traces = [
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url.as_str()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
    ];
    let (sends, log) = one_traced_enqueue(&traces, &custom).await;
    assert_eq!(sends, 1, "{log}");
}

/// A collector that refuses the export (404 at a wrong path) is named in
/// prioq's log with the answer's status, not lost without a word.
#[tokio::test]
async fn a_refused_export_is_logged_with_its_status() {
    let receiver = Receiver::start_at("/elsewhere").await;
    let env = [("PRIOQ_OTLP_ENDPOINT", receiver.endpoint.as_str())];
    let (sends, log) = one_traced_enqueue(&env, &receiver).await;
    assert_eq!(sends, 0, "{log}");
    let warning = log
        .lines()
        .find(|line| line.contains("WARN") && line.contains("refused an export"))
        .unwrap_or_else(|| panic!("no warning of the refused export in the log:\n{log}"));
    assert!(warning.contains("404"), "{warning}");
}
