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
    let content = response["content"]
        .as_object()
        .unwrap_or_else(|| panic!("{place}: an error response without a body: {response}"));
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

/// The JSON type of a schema property: `integer` or `number` (a nullable one too).
fn scalar_type<'a>(doc: &'a Value, schema: &str, field: &str) -> &'a str {
    let schema_value = &doc["components"]["schemas"][schema];
    // A schema with flattened fields is an `allOf` of parts.
    let parts = match schema_value["allOf"].as_array() {
        Some(parts) => parts.iter().collect(),
        None => vec![schema_value],
    };
    let property = parts
        .into_iter()
        .map(|part| &part["properties"][field])
        .find(|property| !property.is_null())
        .unwrap_or(&Value::Null);
    match &property["type"] {
        Value::String(kind) => kind,
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null")
            .unwrap(),
        _ => panic!("{schema}.{field} has no type: {property}"),
    }
}

#[test]
fn whole_numbers_are_integers_and_times_are_numbers_of_seconds() {
    let doc = document();
    let cases = [
        // Whole numbers.
        ("Job", "retries", "integer"),
        ("Job", "remaining", "integer"),
        ("RecurringJob", "retries", "integer"),
        ("RecurringJob", "count", "integer"),
        ("RecurringJob", "backlog", "integer"),
        ("RetryJobResponse", "remaining", "integer"),
        ("WorkerSummary", "running", "integer"),
        ("WorkerSummary", "stalled", "integer"),
        ("JidPage", "total", "integer"),
        ("QueueCounts", "waiting", "integer"),
        ("TimingStats", "count", "integer"),
        ("PutJobRequest", "retries", "integer"),
        ("UnfailResult", "moved", "integer"),
        // Times: seconds since the epoch, one type everywhere.
        ("Job", "expires", "number"),
        ("HeartbeatJobResponse", "expires", "number"),
        ("HeartbeatJobsOutcome", "expires", "number"),
        ("HistoryEntry", "when", "number"),
        ("Failure", "when", "number"),
    ];
    for (schema, field, expected) in cases {
        assert_eq!(
            scalar_type(&doc, schema, field),
            expected,
            "{schema}.{field}"
        );
    }
}

#[test]
fn a_jobs_state_is_one_of_the_states_a_job_can_be_in() {
    let doc = document();
    let state = &doc["components"]["schemas"]["Job"]["properties"]["state"];
    assert_eq!(state["$ref"], "#/components/schemas/JobState", "{state}");
    let mut states: Vec<&str> = doc["components"]["schemas"]["JobState"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|state| state.as_str().unwrap())
        .collect();
    states.sort_unstable();
    assert_eq!(
        states,
        [
            "complete",
            "depends",
            "failed",
            "running",
            "scheduled",
            "stalled",
            "waiting"
        ]
    );
}

#[test]
fn the_event_stream_is_described_as_server_sent_events() {
    let doc = document();
    let ok = &doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        ok.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["text/event-stream"]
    );
}

#[test]
fn jobs_are_lists_of_objects_and_jids_are_lists_of_ids() {
    let doc = document();
    let mut seen = 0;
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        let Some(properties) = schema["properties"].as_object() else {
            continue;
        };
        for (field, property) in properties {
            let items = &property["items"];
            match field.as_str() {
                // The throttle rate's `{"jobs": N, "seconds": S}` is a count, by the
                // interface its issue fixed.
                "jobs" if name == "ThrottleRate" => {}
                "jobs" => {
                    assert!(
                        items["$ref"].is_string(),
                        "{name}.jobs is not a list of objects: {property}"
                    );
                    seen += 1;
                }
                // A workflow's jids are by task name, by the interface its issue fixed.
                "jids" if name == "CreatedWorkflow" => {
                    assert_eq!(property["additionalProperties"]["type"], "string");
                    seen += 1;
                }
                "jids" => {
                    let id =
                        items["type"] == "string" || items["$ref"] == "#/components/schemas/Name";
                    assert!(id, "{name}.jids is not a list of ids: {property}");
                    seen += 1;
                }
                _ => {}
            }
        }
    }
    assert!(seen >= 10, "only {seen} jobs/jids fields");
}

#[test]
fn every_write_can_answer_415_with_its_problem() {
    let doc = document();
    for (method, path, operation) in operations(&doc) {
        let refused = &operation["responses"]["415"];
        if method == "get" {
            assert!(refused.is_null(), "{method} {path}");
            continue;
        }
        // With or without a request body: a body sent anyway must be JSON.
        assert_eq!(
            refused["$ref"], "#/components/responses/UnsupportedMediaType",
            "{method} {path}"
        );
    }
    let shared = &doc["components"]["responses"]["UnsupportedMediaType"];
    assert_problem_content("UnsupportedMediaType", 415, shared);
    let rule = doc["info"]["description"].as_str().unwrap();
    assert!(rule.contains("needs no\n  `Content-Type`"), "{rule}");
}

#[test]
fn no_query_parameter_repeats_a_path_parameters_name() {
    let doc = document();
    for (method, path, operation) in operations(&doc) {
        let parameters = operation["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let named = |place: &str| -> Vec<String> {
            parameters
                .iter()
                .filter(|parameter| parameter["in"] == place)
                .map(|parameter| parameter["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let in_path = named("path");
        for name in named("query").iter().chain(&named("header")) {
            assert!(
                !in_path.contains(name),
                "{method} {path}: `{name}` names a path parameter too"
            );
        }
    }
    let remove = &doc["paths"]["/v1/jobs/{jid}/dependencies"]["delete"]["parameters"];
    let names: Vec<&str> = remove
        .as_array()
        .unwrap()
        .iter()
        .map(|parameter| parameter["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["jid", "dependency", "all"]);
}

/// Generators make one constant per enum value (Go: `RUNNING`, `COMPLETE`), named by
/// the value alone, so two enums sharing a value do not compile.
#[test]
fn no_two_enums_share_a_value() {
    let doc = document();
    let mut seen: std::collections::BTreeMap<String, &str> = Default::default();
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        let Some(values) = schema["enum"].as_array() else {
            continue;
        };
        for value in values {
            let constant = value.as_str().unwrap().to_uppercase().replace('-', "_");
            if let Some(other) = seen.insert(constant.clone(), name) {
                panic!("{name} and {other} both have {constant}");
            }
        }
    }
    let completion = &doc["components"]["schemas"]["CompleteJobResponse"]["properties"]["state"];
    assert_eq!(completion["$ref"], "#/components/schemas/JobState");
}

/// A generated client refuses fields its schema does not declare (Go's decoder does):
/// a history entry declares what the server writes, and lets a log entry's own fields
/// come.
#[test]
fn history_entries_declare_what_the_server_writes_and_allow_more() {
    let doc = document();
    let entry = &doc["components"]["schemas"]["HistoryEntry"];
    for field in ["when", "what", "q", "worker", "group"] {
        assert!(entry["properties"][field].is_object(), "{field}: {entry}");
    }
    assert_eq!(entry["required"], serde_json::json!(["when", "what"]));
    assert_eq!(entry["additionalProperties"], true, "{entry}");
}

#[test]
fn clients_default_to_the_default_address_and_open_routes_need_no_token() {
    let doc = document();
    assert_eq!(doc["servers"][0]["url"], "http://127.0.0.1:5858");
    for path in ["/healthz", "/readyz"] {
        let operation = &doc["paths"][path]["get"];
        assert_eq!(operation["security"], serde_json::json!([]), "{path}");
    }
}

#[test]
fn the_request_qlessd_sends_to_a_pushed_queue_is_described_as_a_webhook() {
    let doc = document();
    let delivery = &doc["webhooks"]["pushDelivery"]["post"];
    let description = delivery["description"].as_str().unwrap();
    for header in [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "qlessd-attempt",
        "traceparent",
    ] {
        assert!(description.contains(header), "{header} is described");
    }
    let responses = delivery["responses"].as_object().unwrap();
    for status in ["2XX", "429", "4XX", "5XX"] {
        assert!(responses.contains_key(status), "{status} is described");
    }
    assert!(
        responses["429"]["headers"]
            .as_object()
            .unwrap()
            .contains_key("Retry-After")
    );
    for path in ["/v1/queues/{queue}/push", "/v1/queues/{queue}/push/rotate"] {
        assert!(doc["paths"][path].is_object(), "{path}");
    }
}
