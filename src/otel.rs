//! Traces: the W3C trace headers a job keeps, and the spans prioq exports
//! over OTLP/HTTP when `PRIOQ_OTLP_ENDPOINT` (or one of OpenTelemetry's
//! `OTEL_EXPORTER_OTLP_*ENDPOINT` variables) is set, named and attributed
//! by the OpenTelemetry messaging conventions.
//!
//! The spans are `tracing` spans under [`TARGET`], made only while an
//! exporter is installed (no span, no header parsing beyond the check of
//! a `traceparent` otherwise); `tracing-opentelemetry` turns them into
//! OpenTelemetry spans, which a batch processor on the runtime sends from
//! a bounded queue: a slow or absent collector drops spans, never holds a
//! request.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::HeaderMap;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of the exported spans; nothing else is exported.
pub const TARGET: &str = "prioq::otel";

/// How long an export may take; bounds how long a down collector delays
/// shutdown.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

/// The installed provider, when spans are exported.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The W3C trace context a job was enqueued under, as its producer sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeaders {
    pub traceparent: String,
    /// Empty when none came, or when it did not parse.
    pub tracestate: String,
}

impl TraceHeaders {
    /// The request's `traceparent` and `tracestate`; `None` without a
    /// well-formed `traceparent` (ignored, as W3C Trace Context has a
    /// receiver do), and a malformed `tracestate` is dropped alone.
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let traceparent = single(headers, "traceparent")?;
        let context = Self::parse(traceparent, &Headers(headers))?;
        Some(Self {
            traceparent: traceparent.to_owned(),
            tracestate: context.trace_state().header(),
        })
    }

    /// The span context the headers name, as a remote parent or a link.
    pub fn span_context(&self) -> Option<SpanContext> {
        let carrier = [
            ("traceparent", self.traceparent.as_str()),
            ("tracestate", self.tracestate.as_str()),
        ];
        Self::parse(&self.traceparent, &Pairs(&carrier))
    }

    /// The propagator parses the fields; the widths (which it does not
    /// check) are checked first: version, 32 and 16 hex digits, flags, and
    /// nothing after them in version 00.
    fn parse(traceparent: &str, carrier: &dyn Extractor) -> Option<SpanContext> {
        let widths: Vec<usize> = traceparent.split('-').map(str::len).collect();
        let version_ok = match traceparent.get(..2) {
            Some("00") => widths.len() == 4,
            Some(version) => version != "ff" && widths.len() >= 4,
            None => false,
        };
        if !version_ok || widths.get(..4) != Some(&[2, 32, 16, 2][..]) {
            return None;
        }
        let context = TraceContextPropagator::new().extract(carrier);
        let span = context.span();
        let span_context = span.span_context();
        span_context.is_valid().then(|| span_context.clone())
    }
}

/// A header's value when it is sent once, as text.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    }
}

/// A request's headers, for the propagator.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        single(self.0, key)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|name| name.as_str()).collect()
    }
}

/// Stored headers, for the propagator.
struct Pairs<'a>(&'a [(&'a str, &'a str)]);

impl Extractor for Pairs<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| *value)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(name, _)| *name).collect()
    }
}

/// The path of the traces signal under an OTLP/HTTP base URL.
const TRACES_PATH: &str = "/v1/traces";

/// Where spans go, from `PRIOQ_OTLP_ENDPOINT` (`prioq`) or, when it is
/// unset, OpenTelemetry's standard variables as its SDKs read them:
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (`traces`, the traces URL as it
/// is), then `OTEL_EXPORTER_OTLP_ENDPOINT` (`base`, a base URL). prioq's
/// own and the base URL get `/v1/traces` appended unless they already
/// end with it. `None`: nothing is exported.
pub fn traces_url(prioq: Option<&str>, traces: Option<&str>, base: Option<&str>) -> Option<String> {
    fn set(value: Option<&str>) -> Option<&str> {
        value.map(str::trim).filter(|value| !value.is_empty())
    }
    let under_base = |url: &str| {
        let url = url.trim_end_matches('/');
        if url.ends_with(TRACES_PATH) {
            url.to_owned()
        } else {
            format!("{url}{TRACES_PATH}")
        }
    };
    match (set(prioq), set(traces), set(base)) {
        (Some(prioq), _, _) => Some(under_base(prioq)),
        (None, Some(traces), _) => Some(traces.to_owned()),
        (None, None, Some(base)) => Some(under_base(base)),
        (None, None, None) => None,
    }
}

/// The exporter to `url` (the traces URL) and the `tracing` layer that
/// feeds it; must be called on the runtime, which runs its batch
/// processor.
pub fn layer<S>(
    url: &str,
) -> anyhow::Result<tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let exporter = Reported {
        exporter,
        url: url.to_owned(),
        failing: AtomicBool::new(false),
    };
    tracing::info!(url, "exporting spans over OTLP/HTTP");
    let provider = SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build(),
        )
        .with_resource(Resource::builder().with_service_name("prioq").build())
        .build();
    let tracer = provider.tracer("prioq");
    if PROVIDER.set(provider).is_err() {
        anyhow::bail!("the span exporter is already installed");
    }
    Ok(tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_tracked_inactivity(false))
}

/// The exporter, whose failures reach prioq's log: the SDK's own report
/// of them goes to its internal logs, which prioq does not build. A
/// collector that refuses exports (a wrong path answering 404, say) is
/// logged once as a warning with the answer's status, and again once it
/// takes them.
#[derive(Debug)]
struct Reported<E> {
    exporter: E,
    url: String,
    failing: AtomicBool,
}

impl<E: SpanExporter> SpanExporter for Reported<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.exporter.export(batch).await;
        match &result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(url = %self.url, "the collector takes spans again");
                }
            }
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        url = %self.url,
                        %error,
                        spans,
                        "the collector refused an export of spans; they are lost (logged once until an export succeeds)"
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.exporter.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.exporter.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.exporter.set_resource(resource);
    }
}

/// Sends the spans still queued; at most about [`EXPORT_TIMEOUT`].
pub async fn shutdown() {
    let Some(provider) = PROVIDER.get().cloned() else {
        return;
    };
    // The processor's shutdown blocks its thread until the runtime has
    // run the last export.
    let error = match tokio::task::spawn_blocking(move || provider.shutdown()).await {
        Ok(Ok(())) => return,
        Ok(Err(error)) => error.to_string(),
        Err(error) => error.to_string(),
    };
    tracing::warn!(%error, "the last spans may not have been exported");
}

fn exporting() -> bool {
    PROVIDER.get().is_some()
}

/// What a span is about: its operation (`send`, `receive`, `settle`),
/// its kind, and the queue.
macro_rules! messaging_span {
    ($operation:literal, $name:expr, $kind:literal, $queue:expr, $count:expr) => {
        tracing::info_span!(
            target: TARGET,
            "messaging",
            otel.name = format!("{} {}", $operation, $queue),
            otel.kind = $kind,
            messaging.system = "prioq",
            messaging.destination.name = $queue,
            messaging.operation.type = $operation,
            messaging.operation.name = $name,
            messaging.batch.message_count = $count,
            messaging.message.id = tracing::field::Empty,
        )
    };
}

/// `send {queue}` for an enqueue of `count` jobs, a child of the
/// producer's trace when it sent one; no span when nothing is exported.
pub fn send_span(queue: &str, trace: Option<&TraceHeaders>, count: usize) -> Span {
    if !exporting() {
        return Span::none();
    }
    let span = messaging_span!("send", "send", "producer", queue, integer(count));
    if let Some(parent) = trace.and_then(TraceHeaders::span_context) {
        // Fails only when the span is not recorded: then nothing matters.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    span
}

/// `receive {queue}` for a claim; [`link_jobs`] adds its jobs' traces.
pub fn receive_span(queue: &str) -> Span {
    if !exporting() {
        return Span::none();
    }
    messaging_span!("receive", "receive", "client", queue, tracing::field::Empty)
}

/// `settle {queue}` for the acks (`name` `ack`) or the nack of the jobs
/// `ids`.
pub fn settle_span(queue: &str, name: &'static str, ids: &[impl AsRef<str>]) -> Span {
    if !exporting() {
        return Span::none();
    }
    let span = messaging_span!("settle", name, "client", queue, integer(ids.len()));
    if let [id] = ids {
        record_id(&span, id.as_ref());
    }
    span
}

/// Links `span` to the trace of each job it received (`(id, trace)`)
/// that has one, and records how many it received (and the id of one).
pub fn link_jobs<'a>(
    span: &Span,
    jobs: impl ExactSizeIterator<Item = (&'a str, Option<&'a TraceHeaders>)>,
) {
    if span.is_none() {
        return;
    }
    let count = jobs.len();
    span.record("messaging.batch.message_count", integer(count));
    for (id, trace) in jobs {
        if count == 1 {
            record_id(span, id);
        }
        if let Some(context) = trace.and_then(TraceHeaders::span_context) {
            span.add_link(context);
        }
    }
}

/// A count as an OpenTelemetry integer: `tracing-opentelemetry` turns
/// unsigned fields into text.
fn integer(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Records the job's id on a span about one job.
pub fn record_id(span: &Span, id: &str) {
    span.record("messaging.message.id", id);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("header value"));
        }
        map
    }

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_well_formed_traceparent_is_kept_as_sent_with_its_tracestate() {
        let trace = TraceHeaders::from_headers(&headers(&[
            ("traceparent", PARENT),
            ("tracestate", "a=1,b=2"),
        ]))
        .expect("kept");
        assert_eq!(trace.traceparent, PARENT);
        assert_eq!(trace.tracestate, "a=1,b=2");
        let context = trace.span_context().expect("parses back");
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "00-1-1-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "",
        ] {
            let sent = headers(&[("traceparent", bad), ("tracestate", "a=1")]);
            assert_eq!(TraceHeaders::from_headers(&sent), None, "{bad}");
        }
        let twice = headers(&[("traceparent", PARENT), ("traceparent", PARENT)]);
        assert_eq!(TraceHeaders::from_headers(&twice), None);
    }

    #[test]
    fn the_traces_url_comes_from_prioqs_variable_then_opentelemetrys() {
        let url = |prioq, traces, base| traces_url(prioq, traces, base);
        let base = "http://collector:4318";
        let full = "http://collector:4318/v1/traces";
        assert_eq!(url(Some(base), None, None).as_deref(), Some(full));
        assert_eq!(
            url(Some("http://collector:4318/"), None, None).as_deref(),
            Some(full)
        );
        assert_eq!(url(Some(full), None, None).as_deref(), Some(full));
        assert_eq!(
            url(Some("http://collector:4318/v1/traces/"), None, None).as_deref(),
            Some(full)
        );
        assert_eq!(
            url(Some("http://gw/otlp"), None, None).as_deref(),
            Some("http://gw/otlp/v1/traces")
        );
        // The standard per-signal variable is the URL itself.
        assert_eq!(
            url(None, Some("http://gw/ingest/spans"), Some(base)).as_deref(),
            Some("http://gw/ingest/spans")
        );
        assert_eq!(url(None, None, Some(base)).as_deref(), Some(full));
        assert_eq!(
            url(Some(base), Some("http://other/x"), None).as_deref(),
            Some(full)
        );
        assert_eq!(url(Some(" "), None, None), None);
        assert_eq!(url(None, None, None), None);
    }

    #[test]
    fn a_later_version_may_carry_more_fields_and_a_bad_tracestate_is_dropped() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        let trace = TraceHeaders::from_headers(&headers(&[
            ("traceparent", later),
            ("tracestate", "no-value"),
        ]))
        .expect("kept");
        assert_eq!(trace.traceparent, later);
        assert_eq!(trace.tracestate, "");
    }
}
