//! The OpenAPI document: each route's entry comes with the route itself
//! (`routes`, from each resource's `OpenApiRouter`), and this module adds
//! what the document says once: its info, tags and shared schemas
//! (`ApiDoc`), and what every `/v1` operation shares: the bearer scheme,
//! the problem answers of the contract's error table and the shape of
//! the path segments.

use std::sync::LazyLock;

use serde_json::json;
use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{self, Components, Ref, RefOr, Required};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use super::{AppState, claims, dlq, error, jobs, leases, ops, push, queues, schedules, settings};

#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "prioq",
        description = "A priority job queue over Redis, spoken to in HTTP/JSON. \
            Priority 0 is the most urgent; inside a priority, jobs are served in arrival order.",
        license(name = "MIT")
    ),
    components(schemas(error::Problem, error::ProblemCode)),
    tags(
        (name = "jobs", description = "Enqueue, read and delete jobs"),
        (name = "leases", description = "Claim jobs and end their leases"),
        (name = "dlq", description = "The dead-letter queue"),
        (name = "queues", description = "Queue statistics, groups and settings"),
        (name = "schedules", description = "Recurring schedules: a job at each fire time of a cron pattern"),
        (name = "push", description = "Push delivery: prioq POSTs a queue's jobs to an HTTP endpoint"),
        (name = "operations", description = "Health, metrics and documentation; open without a token"),
    )
)]
pub struct ApiDoc;

/// The routes of the API, each with its entry in the document: those of
/// `/v1`, which need a token when tokens are set, and the operations'.
pub(super) fn routes() -> (OpenApiRouter<AppState>, OpenApiRouter<AppState>) {
    let v1 = OpenApiRouter::new()
        .merge(jobs::routes())
        .merge(claims::routes())
        .merge(leases::routes())
        .merge(dlq::routes())
        .merge(queues::routes())
        .merge(settings::routes())
        .merge(schedules::routes())
        .merge(push::routes());
    (v1, ops::routes())
}

/// The whole document, from the routes' entries and `ApiDoc`.
pub fn document() -> openapi::OpenApi {
    let (v1, ops) = routes();
    complete(v1.split_for_parts().1, ops.split_for_parts().1)
}

/// The document of the routes' entries `v1` and `ops`, with what they
/// share.
fn complete(v1: openapi::OpenApi, ops: openapi::OpenApi) -> openapi::OpenApi {
    let mut document = ApiDoc::openapi().merge_from(v1).merge_from(ops);
    SharedAnswers.modify(&mut document);
    document
}

/// The document `/openapi.json` serves, made once.
pub(super) static DOCUMENT: LazyLock<openapi::OpenApi> = LazyLock::new(document);

/// The problem answers any `/v1` operation can give, by status.
const ALWAYS: [(&str, &str, &str); 3] = [
    (
        "400",
        "invalid_request",
        "Bad path segment, query string or malformed JSON",
    ),
    (
        "401",
        "unauthorized",
        "Tokens are configured and the request has none or a wrong one",
    ),
    (
        "503",
        "backend_unavailable",
        "Redis cannot be reached or did not complete the request; `effect` says whether it may have taken effect (`none`: retrying is always safe)",
    ),
];
/// Those of operations that take a body.
const WITH_BODY: [(&str, &str, &str); 3] = [
    (
        "413",
        "payload_too_large",
        "The body is larger than the configured limit",
    ),
    (
        "415",
        "unsupported_media_type",
        "The body is not sent as `application/json` (a form's or plain text's content type is refused with or without a body)",
    ),
    (
        "422",
        "validation_failed",
        "A value is out of range or missing; `field` names it",
    ),
];

/// Those of operations on one job (and the settings change refused on a
/// queue holding jobs), and of the writes that grow Redis's memory or may
/// make a queue or a schedule, by operation id.
const ON_A_JOB: [(&str, &str, &str, &[&str]); 6] = [
    (
        "404",
        "not_found",
        "No such job or schedule: it never existed, or was acked or deleted",
        &[
            "job",
            "history",
            "delete_job",
            "cancel",
            "ack",
            "extend",
            "nack",
            "requeue",
            "delete_dead",
            "schedule",
            "delete_schedule",
            "pause_schedule",
            "resume_schedule",
        ],
    ),
    (
        "409",
        "lease_lost",
        "The lease token is not the job's current lease: the job was taken back or claimed again",
        &["ack", "extend", "nack"],
    ),
    (
        "409",
        "conflict",
        "The job's state does not allow this (it is processing, or not dead; for a cancel, completed or dead)",
        &["delete_job", "requeue", "delete_dead", "cancel"],
    ),
    (
        "409",
        "conflict",
        "The queue holds jobs: its number of shards can change only while it holds none",
        &["change_settings"],
    ),
    (
        "429",
        "queue_full",
        "The queue's `max_pending` or `max_pending_bytes` would be exceeded by the request's new jobs (`detail` names which); nothing was written. `Retry-After` says when to try again",
        &["enqueue", "enqueue_batch"],
    ),
    (
        "507",
        "backend_full",
        "Redis is out of memory (`backend_full`), or a configured limit on queues or schedules is reached (`limit_reached`, `detail` names it); nothing was written",
        &[
            "enqueue",
            "enqueue_batch",
            "put_schedule",
            "requeue",
            "change_settings",
            "pause",
            "resume",
            "pause_schedule",
            "resume_schedule",
        ],
    ),
];

/// The shape of each path segment, as the contract gives it: its
/// pattern and longest length.
const PATH_SEGMENTS: [(&str, &str, usize); 3] = [
    ("queue", "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", 128),
    ("id", "^[A-Za-z0-9_.:-]{1,128}$", 128),
    ("name", "^[A-Za-z0-9_.-]{1,100}$", 100),
];
/// The answer of any change (POST, PUT, PATCH, DELETE) that a browser page
/// of another site sends.
const CHANGES: (&str, &str, &str) = (
    "403",
    "forbidden_origin",
    "A browser request from another site (`Sec-Fetch-Site`, `Origin`): it had no effect",
);
/// Operations whose body may be left out altogether.
const OPTIONAL_BODY: [&str; 2] = ["claim", "requeue"];

struct SharedAnswers;

impl Modify for SharedAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Components::new);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        let all = ALWAYS
            .iter()
            .chain(&WITH_BODY)
            .chain([&CHANGES])
            .copied()
            .chain(
                ON_A_JOB
                    .iter()
                    .map(|(status, code, description, _)| (*status, *code, *description)),
            );
        for (status, code, description) in all {
            let content = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .example(Some(json!({
                    "type": format!("urn:prioq:problem:{code}"),
                    "title": description,
                    "status": status.parse::<u16>().unwrap_or_default(),
                    "detail": description,
                    "code": code,
                })))
                .build();
            let response = ResponseBuilder::new()
                .description(description)
                .content("application/problem+json", content)
                .build();
            components
                .responses
                .insert(code.to_owned(), RefOr::T(response));
        }
        for (path, item) in &mut openapi.paths.paths {
            if !path.starts_with("/v1/") {
                continue;
            }
            let operations = [
                (&mut item.get, false),
                (&mut item.post, true),
                (&mut item.put, true),
                (&mut item.patch, true),
                (&mut item.delete, true),
            ];
            for (operation, changes) in operations {
                let Some(operation) = operation else { continue };
                operation.security = Some(vec![SecurityRequirement::new(
                    "bearer",
                    Vec::<String>::new(),
                )]);
                let id = operation.operation_id.clone().unwrap_or_default();
                for parameter in operation.parameters.iter_mut().flatten() {
                    let RefOr::T(parameter) = parameter else {
                        continue;
                    };
                    let shape = PATH_SEGMENTS
                        .iter()
                        .find(|(name, _, _)| *name == parameter.name);
                    if let (ParameterIn::Path, Some((_, pattern, longest))) =
                        (&parameter.parameter_in, shape)
                    {
                        let schema = ObjectBuilder::new()
                            .schema_type(Type::String)
                            .min_length(Some(1))
                            .max_length(Some(*longest))
                            .pattern(Some(*pattern));
                        parameter.schema = Some(RefOr::T(schema.into()));
                    }
                }
                if OPTIONAL_BODY.contains(&id.as_str())
                    && let Some(RefOr::T(body)) = &mut operation.request_body
                {
                    body.required = Some(Required::False);
                }
                let body = operation.request_body.is_some();
                let shared = ALWAYS
                    .iter()
                    .chain(WITH_BODY.iter().filter(|_| body))
                    .chain([&CHANGES].into_iter().filter(|_| changes))
                    .map(|(status, code, _)| (*status, *code))
                    .chain(
                        ON_A_JOB
                            .iter()
                            .filter(|(.., ids)| ids.contains(&id.as_str()))
                            .map(|(status, code, ..)| (*status, *code)),
                    );
                for (status, code) in shared {
                    operation
                        .responses
                        .responses
                        .entry((*status).to_owned())
                        .or_insert_with(|| {
                            RefOr::Ref(Ref::new(format!("#/components/responses/{code}")))
                        });
                }
            }
        }
    }
}
