//! A queue's settings: read, change by JSON merge patch (RFC 7396), pause
//! and resume. The bodies and their OpenAPI schemas come from the table
//! of settings (`queue::setting_table`): a setting added there is read,
//! checked, shown and documented here with no change to this file.

use std::borrow::Cow;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use axum::extract::State;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::json;
use serde_json::{Map, Value};
use utoipa::openapi::schema::{
    AdditionalProperties, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat,
    SchemaType, Type,
};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use super::AppState;
use super::error::{ApiError, Result};
use super::extract::{ApiPath, JsonBody};
use super::params::QueuePath;
use crate::queue::setting_table::{Kind, OBJECTS, SETTINGS, Setting};
use crate::queue::{Settings, SettingsChange};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(settings, change_settings))
        .routes(routes!(pause))
        .routes(routes!(resume))
}

/// How a queue hands out its jobs: every setting, its default when not
/// set, in the table's order.
#[derive(Debug)]
pub struct SettingsView(Vec<(&'static str, Value)>);

impl Serialize for SettingsView {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl From<Settings> for SettingsView {
    fn from(settings: Settings) -> Self {
        Self(settings.view())
    }
}

impl axum::response::IntoResponse for SettingsView {
    fn into_response(self) -> axum::response::Response {
        JsonBody(self).into_response()
    }
}

/// A JSON merge patch of the settings: a field left out stays as it is,
/// `null` resets it to its default.
#[derive(Debug)]
pub struct SettingsPatch;

/// Which of a schema's two forms: the settings as shown, or a patch of
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    View,
    Patch,
}

impl Form {
    fn suffix(self) -> &'static str {
        match self {
            Self::View => "View",
            Self::Patch => "Patch",
        }
    }
}

/// `kind`, or `null` too.
fn types(kind: Type, or_null: bool) -> SchemaType {
    if or_null {
        SchemaType::from_iter([kind, Type::Null])
    } else {
        kind.into()
    }
}

/// A setting's value: its type, bounds and text. In a patch every value
/// may be `null` (reset); in the view those without a default, unless
/// they belong to an object (shown whole or as `null`).
fn value_schema(setting: &Setting, form: Form) -> RefOr<Schema> {
    let nullable = |kind: Type, default_is_null: bool| {
        let or_null = form == Form::Patch || (default_is_null && setting.member().is_none());
        ObjectBuilder::new()
            .schema_type(types(kind, or_null))
            .description(Some(setting.doc))
    };
    let schema = match setting.kind {
        Kind::Flag => nullable(Type::Boolean, false),
        Kind::Count { min, max, default } => nullable(Type::Integer, default.is_none())
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(min as f64))
            .maximum(Some(max as f64)),
        Kind::Rate { min, max } => nullable(Type::Number, true)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Double)))
            .minimum(Some(min))
            .maximum(Some(max)),
        Kind::Weights { max, groups } => {
            let weight = ObjectBuilder::new()
                .schema_type(types(Type::Integer, form == Form::Patch))
                .minimum(Some(1.0))
                .maximum(Some(max as f64));
            nullable(Type::Object, false)
                .additional_properties(Some(AdditionalProperties::RefOr(weight.into())))
                .max_properties(Some(groups))
                .property_names(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some("^[A-Za-z0-9_.:-]{1,128}$")),
                ))
        }
    };
    schema.into()
}

/// The settings object, or one of its objects (`object`), in a form.
fn object_schema(object: Option<&str>, form: Form) -> Schema {
    let mut builder = ObjectBuilder::new().schema_type(Type::Object);
    if form == Form::Patch {
        builder = builder.additional_properties(Some(AdditionalProperties::FreeForm(false)));
    }
    let mut objects_done = Vec::new();
    for setting in SETTINGS {
        match (setting.member(), object) {
            (None, None) => {
                builder = builder.property(setting.path, value_schema(setting, form));
                if form == Form::View {
                    builder = builder.required(setting.path);
                }
            }
            (Some((name, field)), Some(wanted)) if name == wanted => {
                builder = builder.property(field, value_schema(setting, form));
                if form == Form::View {
                    builder = builder.required(field);
                }
            }
            (Some((name, _)), None) if !objects_done.contains(&name) => {
                objects_done.push(name);
                let object = OBJECTS.iter().find(|o| o.name == name);
                let (schema, doc) = object.map_or((name, ""), |o| (o.schema, o.doc));
                let mut reference = Ref::from_schema_name(format!("{schema}{}", form.suffix()));
                reference.description = doc.to_owned();
                builder = builder.property(
                    name,
                    OneOfBuilder::new()
                        .item(reference)
                        .item(ObjectBuilder::new().schema_type(Type::Null)),
                );
                if form == Form::View {
                    builder = builder.required(name);
                }
            }
            _ => {}
        }
    }
    builder.into()
}

impl PartialSchema for SettingsView {
    fn schema() -> RefOr<Schema> {
        let mut schema = object_schema(None, Form::View);
        if let Schema::Object(object) = &mut schema {
            object.description = Some("How a queue hands out its jobs.".into());
            object.example = Some(json!({"paused": false, "max_in_flight": 200,
                "rate_limit": {"per_second": 50.0, "burst": 50}, "group_weights": {"tenant-42": 5},
                "group_max_in_flight": 10, "retain_ms": 86400000, "shards": 1}));
        }
        schema.into()
    }
}

impl PartialSchema for SettingsPatch {
    fn schema() -> RefOr<Schema> {
        let mut schema = object_schema(None, Form::Patch);
        if let Schema::Object(object) = &mut schema {
            object.description = Some(
                "A JSON merge patch of the settings: a field left out stays as it is, `null` resets it to its default."
                    .into(),
            );
            object.example = Some(json!({"max_in_flight": 200,
                "rate_limit": {"per_second": 50.0, "burst": 50},
                "group_weights": {"tenant-42": 5, "tenant-7": null}}));
        }
        schema.into()
    }
}

/// The schemas of the settings' objects, one per shape and form.
fn object_schemas(form: Form, schemas: &mut Vec<(String, RefOr<Schema>)>) {
    for object in OBJECTS {
        let name = format!("{}{}", object.schema, form.suffix());
        if !schemas.iter().any(|(known, _)| *known == name) {
            schemas.push((name, object_schema(Some(object.name), form).into()));
        }
    }
}

impl ToSchema for SettingsView {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SettingsView")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        object_schemas(Form::View, schemas);
    }
}

impl ToSchema for SettingsPatch {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("SettingsPatch")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        object_schemas(Form::Patch, schemas);
    }
}

/// Read a queue's settings.
///
/// A queue never configured answers the defaults.
#[utoipa::path(
    get, path = "/v1/queues/{queue}/settings", tag = "queues",
    params(QueuePath),
    responses((status = 200, description = "The settings", body = SettingsView))
)]
pub async fn settings(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<SettingsView> {
    let settings = state.broker.settings(path.queue.as_str()).await?;
    Ok(settings.into())
}

/// Change a queue's settings.
///
/// A JSON merge patch (RFC 7396), sent as `application/merge-patch+json`
/// or `application/json`: fields left out stay, `null` resets a field to
/// its default. Every instance applies the change to its next claim. An
/// unknown field or a value out of range answers 422 naming it, and
/// nothing changes. `shards` changes only while the queue holds no job in
/// any state; otherwise 409 `conflict`, and nothing changes.
#[utoipa::path(
    patch, path = "/v1/queues/{queue}/settings", tag = "queues",
    params(QueuePath),
    request_body(content = SettingsPatch, content_type = "application/merge-patch+json"),
    responses((status = 200, description = "The settings after the change", body = SettingsView))
)]
pub async fn change_settings(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
    JsonBody(patch): JsonBody<Map<String, Value>>,
) -> Result<SettingsView> {
    let change = SettingsChange::from_patch(&patch)
        .map_err(|refusal| ApiError::validation(refusal.field, refusal.reason))?;
    let settings = state.broker.configure(path.queue.as_str(), &change).await?;
    Ok(settings.into())
}

async fn set_paused(state: &AppState, queue: &str, paused: bool) -> Result<SettingsView> {
    let patch = Map::from_iter([("paused".to_owned(), Value::Bool(paused))]);
    let change = SettingsChange::from_patch(&patch)
        .map_err(|refusal| ApiError::validation(refusal.field, refusal.reason))?;
    Ok(state.broker.configure(queue, &change).await?.into())
}

/// Pause a queue.
///
/// Claims hand out nothing until the queue is resumed (long polls keep
/// waiting); enqueue, ack, extend, nack and the sweeper go on.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/pause", tag = "queues",
    params(QueuePath),
    responses((status = 200, description = "The settings, paused", body = SettingsView))
)]
pub async fn pause(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<SettingsView> {
    set_paused(&state, path.queue.as_str(), true).await
}

/// Resume a paused queue.
///
/// Waiting long polls on every instance are woken.
#[utoipa::path(
    post, path = "/v1/queues/{queue}/resume", tag = "queues",
    params(QueuePath),
    responses((status = 200, description = "The settings, not paused", body = SettingsView))
)]
pub async fn resume(
    State(state): State<AppState>,
    ApiPath(path): ApiPath<QueuePath>,
) -> Result<SettingsView> {
    set_paused(&state, path.queue.as_str(), false).await
}
