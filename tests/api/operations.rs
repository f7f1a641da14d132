//! Operational endpoints, the OpenAPI document, and error rendering.

use axum::http::{Method, StatusCode, header};

use crate::support::TestApp;

#[tokio::test]
async fn healthz_answers_ok() {
    let app = TestApp::start().await;
    let response = app.get("/healthz").await;
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.body["status"], "ok");
}

#[tokio::test]
async fn readyz_answers_ready_when_redis_holds_the_script() {
    let app = TestApp::start().await;
    let response = app.get("/readyz").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body["status"], "ready");
}

#[tokio::test]
async fn readyz_reloads_a_script_that_redis_forgot() {
    let app = TestApp::start().await;
    let mut conn = app.redis.client().get_connection().unwrap();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut conn)
        .unwrap();
    assert_eq!(app.get("/readyz").await.status, StatusCode::OK);
    let sha = app.qless.script().sha().to_owned();
    let exists: Vec<i64> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(sha)
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, vec![1]);
}

#[tokio::test]
async fn readyz_is_a_503_problem_with_retry_after_when_redis_is_gone() {
    let mut app = TestApp::start().await;
    app.kill_redis();
    // The router still points at the server that was just dropped.
    let response = app.get("/readyz").await;
    response.assert_problem(503, "unavailable");
    assert_eq!(response.headers.get(header::RETRY_AFTER).unwrap(), "1");
}

#[tokio::test]
async fn unknown_routes_are_404_problems() {
    let app = TestApp::start().await;
    app.get("/v1/nothing-here")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn wrong_methods_are_405_problems() {
    let app = TestApp::start().await;
    app.request(Method::DELETE, "/healthz", None)
        .await
        .assert_problem(405, "method_not_allowed");
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::start().await;
    let response = app.get("/healthz").await;
    let id = response.headers.get("x-request-id").expect("x-request-id");
    assert_eq!(id.len(), 36, "a UUID: {id:?}");
}

#[tokio::test]
async fn documentation_is_compressed_for_clients_that_accept_gzip_and_api_answers_are_not() {
    let app = TestApp::start().await;
    let gzip = |uri: &str| {
        axum::http::Request::get(uri)
            .header("accept-encoding", "gzip")
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let document = app.send(gzip("/openapi.json")).await;
    assert_eq!(document.status, StatusCode::OK);
    assert_eq!(document.headers["content-encoding"], "gzip");
    let plain = app.get("/openapi.json").await;
    assert!(!plain.headers.contains_key("content-encoding"));
    assert!(plain.body["openapi"].is_string(), "{}", plain.text);
    assert!(document.body.is_null(), "gzip bytes are not JSON");
    let health = app.send(gzip("/healthz")).await;
    assert_eq!(health.status, StatusCode::OK);
    assert!(!health.headers.contains_key("content-encoding"));
}

#[tokio::test]
async fn docs_page_is_served_without_external_assets() {
    let app = TestApp::start().await;
    let response = app.get("/docs/").await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.text.contains("swagger"), "{}", response.text);
    assert!(
        !response.text.contains("https://"),
        "loads remote assets: {}",
        response.text
    );
}

/// Every `$ref` in `value`.
fn references(value: &serde_json::Value, found: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                match (key.as_str(), item) {
                    ("$ref", serde_json::Value::String(target)) => found.push(target.clone()),
                    _ => references(item, found),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| references(item, found)),
        _ => {}
    }
}

#[test]
fn every_reference_in_the_openapi_document_resolves() {
    let document = serde_json::to_value(qlessd::openapi::document()).unwrap();
    let mut found = Vec::new();
    references(&document, &mut found);
    assert!(!found.is_empty());
    for target in found {
        let pointer = target.strip_prefix('#').expect("a local reference");
        assert!(
            document.pointer(pointer).is_some(),
            "{target} does not resolve"
        );
    }
}

#[test]
fn operation_ids_are_unique_and_every_operation_documents_its_errors() {
    let document = serde_json::to_value(qlessd::openapi::document()).unwrap();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let id = operation["operationId"].as_str().unwrap_or_default();
            assert!(ids.insert(id.to_owned()), "duplicate operation id {id}");
            assert!(
                operation["summary"].is_string(),
                "{method} {path} has no summary"
            );
            let responses = operation["responses"].as_object().unwrap();
            if path.starts_with("/v1/") && path != "/v1/events" {
                assert!(
                    responses.contains_key("503"),
                    "{method} {path} lacks its 503"
                );
            }
        }
    }
}

#[tokio::test]
async fn openapi_json_is_served_and_matches_the_committed_document() {
    let app = TestApp::start().await;
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status, StatusCode::OK);
    assert!(response.body["openapi"].as_str().unwrap().starts_with("3."));

    let document = qlessd::openapi::document();
    let as_value = serde_json::to_value(&document).unwrap();
    assert_eq!(
        response.body, as_value,
        "/openapi.json differs from openapi::document()"
    );

    let generated = serde_json::to_string_pretty(&document).unwrap() + "\n";

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    if std::env::var_os("QLESSD_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date: run \
         `QLESSD_UPDATE_OPENAPI=1 cargo nextest run openapi` and commit it"
    );
}

#[test]
fn the_push_receiver_document_is_the_committed_one_and_carries_the_job_and_the_headers() {
    let document = qlessd::openapi::push_receiver_document();
    let generated = serde_json::to_string_pretty(&document).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/push-receiver.json");
    if std::env::var_os("QLESSD_UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/push-receiver.json is out of date: run \
         `QLESSD_UPDATE_OPENAPI=1 cargo test openapi` and commit it"
    );

    let operation = &document["paths"]["/"]["post"];
    assert_eq!(
        operation["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Job"
    );
    let headers: Vec<(&str, bool)> = operation["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["in"], "header");
            (
                p["name"].as_str().unwrap(),
                p["required"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        headers,
        [
            ("webhook-id", true),
            ("webhook-timestamp", true),
            ("webhook-signature", true),
            ("qlessd-attempt", true),
            ("traceparent", false),
        ]
    );
    // The job's schema is the API's own, with everything it refers to.
    let main = serde_json::to_value(qlessd::openapi::document()).unwrap();
    let schemas = document["components"]["schemas"].as_object().unwrap();
    assert_eq!(schemas["Job"], main["components"]["schemas"]["Job"]);
    let text = generated.as_str();
    for (at, _) in text.match_indices("\"$ref\": \"#/components/schemas/") {
        let rest = &text[at + "\"$ref\": \"#/components/schemas/".len()..];
        let name = &rest[..rest.find('"').unwrap()];
        assert!(
            schemas.contains_key(name),
            "{name} is referred to but missing"
        );
    }
    assert_eq!(
        operation["responses"],
        main["webhooks"]["pushDelivery"]["post"]["responses"]
    );
}

/// Every schema reachable from `value` that is a name parameter or field.
fn name_uses<'a>(
    value: &'a serde_json::Value,
    path: &str,
    found: &mut Vec<(String, &'a serde_json::Value)>,
) {
    const NAMES: [&str; 13] = [
        "jid", "queue", "worker", "group", "tag", "option", "name", "next", "jids", "tags",
        "depends", "add", "remove",
    ];
    match value {
        serde_json::Value::Object(map) => {
            // A parameter: {"name": "jid", "in": ..., "schema": ...}.
            if let (Some(serde_json::Value::String(name)), Some(schema)) =
                (map.get("name"), map.get("schema"))
                && map.contains_key("in")
                && NAMES.contains(&name.as_str())
            {
                found.push((format!("{path} parameter {name}"), schema));
            }
            for (key, child) in map {
                if key == "properties"
                    && let serde_json::Value::Object(properties) = child
                {
                    for (field, schema) in properties {
                        if NAMES.contains(&field.as_str()) {
                            found.push((format!("{path} field {field}"), schema));
                        }
                    }
                }
                name_uses(child, &format!("{path}/{key}"), found);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                name_uses(item, path, found);
            }
        }
        _ => {}
    }
}

#[test]
fn every_name_a_request_carries_is_described_by_the_name_schema() {
    let doc = serde_json::to_value(qlessd::openapi::document()).unwrap();
    let name = &doc["components"]["schemas"]["Name"];
    assert_eq!(name["minLength"], 1);
    assert_eq!(name["maxLength"], 256);
    assert!(name["pattern"].is_string());
    let mut found = Vec::new();
    name_uses(&doc["paths"], "paths", &mut found);
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for (name, schema) in schemas {
        // Request bodies only: responses show names as stored (a worker may be "").
        if name.ends_with("Request")
            || name.ends_with("Item")
            || name == "PopQueue"
            || name == "RecurringJobUpdate"
            || name == "RecurringTagsChange"
        {
            name_uses(schema, name, &mut found);
        }
    }
    assert!(found.len() > 60, "only {} names found", found.len());
    for (place, schema) in found {
        let text = schema.to_string();
        assert!(
            text.contains("#/components/schemas/Name"),
            "{place} is not described as a Name: {text}"
        );
    }
}
