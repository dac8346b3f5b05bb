//! The extractors of request parts whose rejections answer as problems:
//! JSON bodies (malformed JSON 400, a wrong field 422 naming it, not JSON
//! 415, too large 413), path segments and query strings (400); and JSON
//! answers.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::error::{ApiError, Result};

/// A JSON request body; every way it can be wrong answers as a problem.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self> {
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType);
        }
        let body = body_bytes(request, state).await?;
        parse_json(&body).map(Self)
    }
}

/// First room of an answer's buffer: one job's view fits.
const ANSWER_CAPACITY: usize = 1024;

/// A JSON answer, written into a `Vec`: serde_json's many small writes (a
/// job's view is some sixty strings) take less work there than in the
/// `BytesMut` grown from 128 bytes that axum's `Json` writes into (3% of
/// prioq's instructions a job, in batches of 100).
impl<T: Serialize> IntoResponse for JsonBody<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(ANSWER_CAPACITY);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response(),
            Err(error) => {
                tracing::error!(%error, "an answer could not be written as JSON");
                ApiError::Internal.into_response()
            }
        }
    }
}

/// A JSON body that may be left out altogether (no body, no content type),
/// meaning every field takes its default.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self> {
        let json = is_json(request.headers());
        let has_type = request.headers().contains_key(header::CONTENT_TYPE);
        let body = body_bytes(request, state).await?;
        if body.is_empty() && (json || !has_type) {
            return Ok(Self(T::default()));
        }
        if !json {
            return Err(ApiError::UnsupportedMediaType);
        }
        parse_json(&body).map(Self)
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| {
            let essence = essence.trim();
            essence.eq_ignore_ascii_case("application/json")
                || essence
                    .rsplit_once('+')
                    .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
        })
}

async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection: BytesRejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::InvalidRequest(rejection.body_text())
            }
        })
}

/// Parses JSON, telling malformed JSON (400) from well-formed JSON with
/// wrong, missing or unknown fields (422, naming the field). A syntax error
/// anywhere in the body wins over a field error met before it. A body
/// that parses is parsed once; the field's path, which costs allocations
/// per field to follow, is looked for only in one that does not.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    match Object::<T>::deserialize(&mut deserializer).and_then(|Object(value)| {
        deserializer.end()?;
        Ok(value)
    }) {
        Ok(value) => Ok(value),
        Err(_) => Err(located_error::<T>(body)),
    }
}

/// The error of a body that does not parse as a `T`: malformed JSON
/// anywhere in it, else the first wrong field, by its path.
///
/// Whether the body is JSON is judged by reading the whole of it, not by
/// the category of the typed parse's error: serde_json reports a value of
/// the wrong type for an enum (`"on_expiry": 5`) as a syntax error
/// ("expected value") though the body is well-formed, and the typed parse
/// stops at the first field error, before any malformed JSON further on.
fn located_error<T: DeserializeOwned>(body: &[u8]) -> ApiError {
    if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
        return malformed(&syntax);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let Err(error) = serde_path_to_error::deserialize::<_, Object<T>>(&mut deserializer) else {
        // Parsed with its path followed though not without: not seen; the
        // plain parse's reading stands.
        return ApiError::Validation {
            field: "(body)".to_owned(),
            reason: "does not match the request's schema".to_owned(),
        };
    };
    let reason = if error.inner().is_data() {
        without_position(error.inner())
    } else {
        // Well-formed JSON refused by serde_json's own reading of a value:
        // a name (an enum) given as another type, or a number beyond what
        // the field's type holds.
        wrong_value::<T>(body, &error)
    };
    field_error(&error.path().to_string(), &reason)
}

/// The reason for a value of well-formed JSON that serde_json refused
/// while reading it for a field (an error of its syntax category). For a
/// name given as another type ("expected value"), the names the field
/// takes are serde's own list, read by offering the field an empty name.
fn wrong_value<T: DeserializeOwned>(
    body: &[u8],
    error: &serde_path_to_error::Error<serde_json::Error>,
) -> String {
    let text = without_position(error.inner());
    if text != "expected value" {
        return text;
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return text;
    };
    let Some(slot) = error.path().iter().try_fold(&mut value, |value, segment| {
        use serde_path_to_error::Segment;
        match segment {
            Segment::Seq { index } => value.get_mut(*index),
            Segment::Map { key } => value.get_mut(key),
            Segment::Enum { .. } | Segment::Unknown => None,
        }
    }) else {
        return text;
    };
    let found = match slot {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "object",
    };
    *slot = serde_json::Value::String(String::new());
    let names = serde_json::from_value::<Object<T>>(value)
        .err()
        .and_then(|error| {
            let text = error.to_string();
            let (_, names) = text.split_once("unknown variant ``, expected ")?;
            Some(names.to_owned())
        });
    match names {
        Some(names) => format!("invalid type: {found}, expected {names}"),
        None => format!("invalid type: {found}, expected a string"),
    }
}

/// Names the field a data error is about: `path` is where serde stood,
/// and a missing or unknown field is named in `reason`.
fn field_error(path: &str, reason: &str) -> ApiError {
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| reason.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    let field = match (path, named) {
        (".", Some(name)) => name.to_owned(),
        (".", None) => "(body)".to_owned(),
        (_, Some(name)) if reason.starts_with("missing") => format!("{path}.{name}"),
        // An unknown field's path already ends with its name.
        (_, _) => path.to_owned(),
    };
    ApiError::validation(field, reason)
}

fn malformed(error: &serde_json::Error) -> ApiError {
    ApiError::InvalidRequest(format!("malformed JSON: {}", without_position(error)))
}

fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((reason, _)) => reason.to_owned(),
        None => text,
    }
}

/// Path parameters; a segment that fails to parse answers 400.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Self(value))
            .map_err(|rejection: PathRejection| ApiError::InvalidRequest(rejection.body_text()))
    }
}

/// A query string; one that fails to parse answers 400.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Self(value))
            .map_err(|rejection: QueryRejection| ApiError::InvalidRequest(rejection.body_text()))
    }
}

/// A `T` read from a JSON object only: the structs serde derives also take
/// an array of their fields in order, which no client means.
#[derive(Debug)]
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }

        deserializer
            .deserialize_map(Fields(PhantomData))
            .map(Object)
    }
}

/// `deserialize_with` for a list of objects (see `Object`).
pub fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    let list = Vec::<Object<T>>::deserialize(deserializer)?;
    Ok(list.into_iter().map(|Object(item)| item).collect())
}

/// `deserialize_with` for an optional list of objects.
pub fn optional_objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let list = Option::<Vec<Object<T>>>::deserialize(deserializer)?;
    Ok(list.map(|list| list.into_iter().map(|Object(item)| item).collect()))
}

/// `deserialize_with` for a merge patch's object field: `Some(None)` for
/// `null`, which resets it; `#[serde(default)]` leaves a field not sent
/// `None`.
pub fn present_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    let value = Option::<Object<T>>::deserialize(deserializer)?;
    Ok(Some(value.map(|Object(item)| item)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        #[allow(dead_code)]
        task: String,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Batch {
        #[allow(dead_code)]
        #[serde(deserialize_with = "objects")]
        jobs: Vec<Entry>,
    }

    fn field_of(error: ApiError) -> String {
        match error {
            ApiError::Validation { field, .. } => field,
            other => panic!("not a validation error: {other:?}"),
        }
    }

    #[test]
    fn trailing_characters_are_malformed_even_when_a_field_is_missing() {
        for body in [&b"{}}"[..], b"{} x", b"{\"jobs\": [{}]}]", b"{\"task\": 1,"] {
            let error = parse_json::<Batch>(body).expect_err("refused");
            assert!(matches!(error, ApiError::InvalidRequest(_)), "{error:?}");
        }
    }

    #[test]
    fn unknown_fields_are_named_with_their_path() {
        let top = parse_json::<Entry>(br#"{"task": "x", "priorty": 0}"#).expect_err("refused");
        assert_eq!(field_of(top), "priorty");
        let nested =
            parse_json::<Batch>(br#"{"jobs": [{"task": "x"}, {"task": "y", "delay": 5}]}"#)
                .expect_err("refused");
        assert_eq!(field_of(nested), "jobs[1].delay");
    }

    #[test]
    fn arrays_and_scalars_are_not_objects() {
        for body in [&b"[]"[..], b"[\"x\"]", b"42", b"\"task\"", b"null"] {
            let error = parse_json::<Entry>(body).expect_err("refused");
            assert_eq!(
                field_of(error),
                "(body)",
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let nested =
            parse_json::<Batch>(br#"{"jobs": [{"task": "x"}, ["y"]]}"#).expect_err("refused");
        assert_eq!(field_of(nested), "jobs[1]");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Drop,
        Replace,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Named {
        #[allow(dead_code)]
        mode: Option<Mode>,
        #[allow(dead_code)]
        #[serde(default, deserialize_with = "optional_objects")]
        jobs: Option<Vec<Named>>,
    }

    #[test]
    fn a_name_given_as_another_type_is_a_field_error_listing_the_names() {
        for (value, found) in [
            ("5", "number"),
            ("true", "boolean"),
            ("{}", "object"),
            ("[\"drop\"]", "list"),
        ] {
            for (body, field) in [
                (format!(r#"{{"mode": {value}}}"#), "mode"),
                (
                    format!(r#"{{"jobs": [{{}}, {{"mode": {value}}}]}}"#),
                    "jobs[1].mode",
                ),
            ] {
                match parse_json::<Named>(body.as_bytes()).expect_err("refused") {
                    ApiError::Validation {
                        field: named,
                        reason,
                    } => {
                        assert_eq!(named, field, "{body}");
                        assert_eq!(
                            reason,
                            format!("invalid type: {found}, expected `drop` or `replace`"),
                            "{body}"
                        );
                    }
                    other => panic!("{body}: not a validation error: {other:?}"),
                }
            }
        }
        // Malformed JSON after the wrong value is still malformed.
        let error = parse_json::<Named>(br#"{"mode": 5, "jobs": [}"#).expect_err("refused");
        assert!(matches!(error, ApiError::InvalidRequest(_)), "{error:?}");
    }

    #[test]
    fn missing_fields_are_named_with_their_path() {
        let top = parse_json::<Entry>(b"{}").expect_err("refused");
        assert_eq!(field_of(top), "task");
        let nested = parse_json::<Batch>(br#"{"jobs": [{"task": "x"}, {}]}"#).expect_err("refused");
        assert_eq!(field_of(nested), "jobs[1].task");
    }
}
