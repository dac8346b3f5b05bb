//! Fields whose value is one of a list of names (an enum of strings in the
//! OpenAPI document), given a value of another type: each answers 422
//! naming the field, in every request body that has one, and changes
//! nothing.
//!
//! The fields are found by walking the served OpenAPI document, so a name
//! field added later is tried here with no edit; an operation whose body
//! has one but is not a fuzz target fails the test until it is one.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fuzzer::{Fuzzer, TARGETS, Target, quiet_config};
use super::probe::Probe;

/// A field of names, where a request body holds it: its path as the 422's
/// `field` names it (`jobs[0].dedup.mode`), and whether `null` stands for
/// leaving it out (an optional field).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NameField {
    path: String,
    nullable: bool,
}

/// The fuzz target that sends the operation `method path` of the
/// document, by the path template its request goes to.
fn target_of(method: &str, template: &str) -> Option<Target> {
    let target = match (method, template) {
        ("post", "/v1/queues/{queue}/jobs") => Target::Enqueue,
        ("post", "/v1/queues/{queue}/jobs/batch") => Target::Batch,
        ("post", "/v1/queues/{queue}/claim") => Target::Claim,
        ("post", "/v1/queues/{queue}/jobs/{id}/ack") => Target::Ack,
        ("post", "/v1/queues/{queue}/ack") => Target::AckMany,
        ("post", "/v1/queues/{queue}/jobs/{id}/extend") => Target::Extend,
        ("post", "/v1/queues/{queue}/jobs/{id}/nack") => Target::Nack,
        ("post", "/v1/queues/{queue}/dlq/{id}/requeue") => Target::Requeue,
        ("patch", "/v1/queues/{queue}/settings") => Target::Settings,
        ("put", "/v1/queues/{queue}/schedules/{name}") => Target::Schedule,
        _ => return None,
    };
    Some(target)
}

/// The schema `schema` stands for, its `$ref` followed.
fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            resolve(document, &document["components"]["schemas"][name])
        }
        None => schema,
    }
}

/// Every field of names under `schema`, at `path`.
fn name_fields(
    document: &Value,
    schema: &Value,
    path: &str,
    nullable: bool,
    out: &mut Vec<NameField>,
) {
    let schema = resolve(document, schema);
    if let Some(alternatives) = schema["oneOf"].as_array() {
        let nullable = nullable || alternatives.iter().any(|a| a["type"] == "null");
        for alternative in alternatives.iter().filter(|a| a["type"] != "null") {
            name_fields(document, alternative, path, nullable, out);
        }
        return;
    }
    let names = schema["enum"]
        .as_array()
        .is_some_and(|names| names.iter().all(Value::is_string));
    if names && !path.is_empty() {
        out.push(NameField {
            path: path.to_owned(),
            nullable,
        });
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            name_fields(document, property, &path, false, out);
        }
    }
    if schema["type"] == "array" {
        name_fields(
            document,
            &schema["items"],
            &format!("{path}[0]"),
            false,
            out,
        );
    }
}

/// Puts `value` at `path` in `body`, making the objects on the way.
fn set_at(body: &mut Value, path: &str, value: Value) {
    let mut slot = body;
    for part in path.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, index)) => (name, index.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        if !slot.is_object() {
            *slot = json!({});
        }
        slot = &mut slot[name];
        if let Some(index) = index {
            slot = &mut slot[index];
        }
    }
    *slot = value;
}

#[tokio::test]
async fn a_name_field_given_another_type_answers_422_naming_it() {
    let mut fuzzer = Fuzzer::start(quiet_config(), 1).await;
    let document = fuzzer.app.get(fuzzer.app.url("/openapi.json")).await.body;

    let mut fields: BTreeMap<Target, Vec<NameField>> = BTreeMap::new();
    let mut uncovered = Vec::new();
    for (template, operations) in document["paths"].as_object().expect("paths") {
        for (method, operation) in operations.as_object().expect("operations") {
            let Some(content) = operation["requestBody"]["content"].as_object() else {
                continue;
            };
            let mut found = Vec::new();
            for media in content.values() {
                name_fields(&document, &media["schema"], "", false, &mut found);
            }
            if found.is_empty() {
                continue;
            }
            match target_of(method, template) {
                Some(target) => fields.entry(target).or_default().extend(found),
                None => uncovered.push(format!("{method} {template}")),
            }
        }
    }
    assert!(
        uncovered.is_empty(),
        "operations with name fields that no fuzz target sends: {uncovered:?}"
    );
    // The three of the third release at least, single and in a batch.
    let enqueue: Vec<&str> = fields[&Target::Enqueue]
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    for path in ["on_expiry", "on_dependency_failure", "dedup.mode"] {
        assert!(enqueue.contains(&path), "{path} not found in {enqueue:?}");
    }
    assert!(fields.contains_key(&Target::Batch), "{fields:?}");

    let wrong = [
        json!(5),
        json!(true),
        json!(null),
        json!({}),
        json!(["drop"]),
    ];
    let mut tried = 0;
    for target in TARGETS {
        for field in fields.get(&target).into_iter().flatten() {
            for value in &wrong {
                let mut body = fuzzer.valid_body(target);
                set_at(&mut body, &field.path, value.clone());
                let mut probe = Probe::post(
                    fuzzer.path(target),
                    serde_json::to_vec(&body).expect("JSON"),
                );
                probe.method = match target {
                    Target::Settings => reqwest::Method::PATCH,
                    Target::Schedule => reqwest::Method::PUT,
                    _ => reqwest::Method::POST,
                };
                // Checks the contract, and that a refusal changed nothing.
                let raw = fuzzer.run("names", probe.clone()).await;
                let problem: Value = serde_json::from_slice(&raw.body).unwrap_or(Value::Null);
                let named = raw.status == StatusCode::UNPROCESSABLE_ENTITY
                    && problem["code"] == "validation_failed"
                    && problem["field"] == field.path.as_str();
                if value.is_null() && field.nullable {
                    // null leaves an optional field out: accepted like it.
                    if !raw.status.is_success() {
                        fuzzer.fail(&probe, &raw, "null in an optional field was refused");
                    }
                } else if !named {
                    fuzzer.fail(
                        &probe,
                        &raw,
                        &format!("{value} as `{}`: not a 422 naming it", field.path),
                    );
                }
                tried += 1;
            }
        }
    }
    assert!(tried >= 30, "only {tried} requests tried");
    fuzzer.finish("name fields of the wrong type");
}
