//! The shape of the OpenAPI document, as an SDK generator reads it: one error type,
//! integers where values are whole, one number type for times, enums for states.

use serde_json::Value;

fn document() -> Value {
    serde_json::to_value(qlessd::openapi::document()).unwrap()
}

/// Every operation of the document, as `(method, path, operation)`.
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            found.push((method.clone(), path.clone(), operation));
        }
    }
    found
}

/// The content of a problem response is exactly a reference to the one `Problem`
/// schema (so a generator makes no copy of it), with an example that is a problem of
/// that status.
fn assert_problem_content(place: &str, status: u16, response: &Value) {
    let content = response["content"].as_object().unwrap_or_else(|| {
        panic!("{place}: an error response without a body: {response}")
    });
    assert_eq!(
        content.keys().collect::<Vec<_>>(),
        ["application/problem+json"],
        "{place}"
    );
    let media = &content["application/problem+json"];
    assert_eq!(
        media["schema"],
        serde_json::json!({"$ref": "#/components/schemas/Problem"}),
        "{place}: the schema is not exactly the shared Problem"
    );
    let mut examples: Vec<&Value> = media["examples"]
        .as_object()
        .map(|named| named.values().map(|example| &example["value"]).collect())
        .unwrap_or_default();
    if !media["example"].is_null() {
        examples.push(&media["example"]);
    }
    assert!(!examples.is_empty(), "{place}: no example");
    for example in examples {
        assert_eq!(example["status"], status, "{place}: {example}");
        let code = example["code"].as_str().unwrap();
        assert_eq!(
            example["type"],
            format!("urn:qlessd:problem:{code}"),
            "{place}"
        );
        assert!(example["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
}

#[test]
fn every_error_response_is_the_shared_problem_with_an_example_of_its_own() {
    let doc = document();
    let shared = doc["components"]["responses"].as_object().unwrap();
    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        for (status, response) in operation["responses"].as_object().unwrap() {
            let status: u16 = status.parse().unwrap();
            if status < 400 {
                continue;
            }
            let place = format!("{method} {path} {status}");
            if status == 414 {
                // Refused by the HTTP server before any handler runs: no body.
                assert!(response.get("content").is_none(), "{place}");
                continue;
            }
            let response = match response["$ref"].as_str() {
                Some(target) => {
                    let name = target.strip_prefix("#/components/responses/").unwrap();
                    &shared[name]
                }
                None => response,
            };
            assert_problem_content(&place, status, response);
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} error responses");
}

#[test]
fn no_schema_but_problem_describes_a_problem() {
    let doc = document();
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if name == "Problem" {
            continue;
        }
        let properties = schema["properties"].as_object();
        let looks_like_problem = properties.is_some_and(|p| {
            ["type", "title", "status", "detail", "code"]
                .iter()
                .all(|field| p.contains_key(*field))
        });
        assert!(!looks_like_problem, "{name} is a copy of Problem");
    }
}
