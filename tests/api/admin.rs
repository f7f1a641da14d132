//! HTTP contract tests of the administrative resources: recurring-job templates, tags,
//! failure groups, workers and configuration options. Jobs and templates are set up
//! through `core`, so these tests depend only on the routes under test.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use qlessd::core::{PutArgs, RecurArgs};
use serde_json::{Value, json};

use crate::support::{START, TestApp, TestResponse};

// ---------------------------------------------------------------------------------
// Helpers

/// Puts a job with these tags into `queue`.
async fn put(app: &TestApp, queue: &str, jid: &str, tags: &[&str]) {
    let tags = (!tags.is_empty()).then(|| tags.iter().map(|t| t.to_string()).collect());
    app.qless
        .put(
            app.clock.now(),
            PutArgs {
                queue: queue.into(),
                jid: jid.into(),
                klass: "Mailer".into(),
                data: "{}".into(),
                tags,
                ..Default::default()
            },
        )
        .await
        .expect("put");
}

/// Puts a job, pops it as `worker` and fails it into `group`.
async fn put_and_fail(app: &TestApp, queue: &str, jid: &str, group: &str) {
    put(app, queue, jid, &[]).await;
    let popped = app
        .qless
        .pop(app.clock.now(), queue, "w1", 1)
        .await
        .expect("pop");
    assert_eq!(popped.len(), 1, "{jid} was not popped");
    app.qless
        .fail(app.clock.now(), jid, "w1", group, "it broke", None)
        .await
        .expect("fail");
}

/// Creates the recurring template `nightly` in `reports`, first spawn in an hour.
async fn recur(app: &TestApp) {
    app.qless
        .recur(
            app.clock.now(),
            RecurArgs {
                queue: "reports".into(),
                jid: "nightly".into(),
                klass: "Report".into(),
                data: r#"{"kind":"sales"}"#.into(),
                interval: 86400.0,
                offset: 3600.0,
                priority: Some(5.0),
                tags: Some(vec!["finance".into()]),
                retries: Some(2),
                backlog: None,
                cron: None,
                ..Default::default()
            },
        )
        .await
        .expect("recur");
}

async fn state_of(app: &TestApp, jid: &str) -> String {
    let job = app.qless.get(app.clock.now(), jid).await.unwrap();
    let job = serde_json::to_value(job.expect("job exists")).unwrap();
    job["state"].as_str().unwrap().to_owned()
}

async fn patch(app: &TestApp, uri: &str, body: Value) -> TestResponse {
    app.request(Method::PATCH, uri, Some(body)).await
}

async fn put_json(app: &TestApp, uri: &str, body: Value) -> TestResponse {
    app.request(Method::PUT, uri, Some(body)).await
}

/// A DELETE: no body (its parameters are in the query), but the JSON content type
/// every state-changing request carries.
async fn delete(app: &TestApp, uri: &str) -> TestResponse {
    let request = Request::builder()
        .method(Method::DELETE)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::empty())
        .unwrap();
    app.send(request).await
}

/// Sends a body that is JSON text but labelled `text/plain`.
async fn send_plain_text(app: &TestApp, method: Method, uri: &str, body: Value) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(request).await
}

/// Path segments that are not valid names (percent-encoded).
const BAD_NAMES: [&str; 3] = ["a%20b", "a%7Bb%7D", "tab%09"];

// ---------------------------------------------------------------------------------
// Recurring jobs

#[tokio::test]
async fn get_recurring_job_returns_the_template() {
    let app = TestApp::start().await;
    recur(&app).await;
    let response = app.get("/v1/recurring/nightly").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let body = &response.body;
    assert_eq!(body["jid"], "nightly");
    assert_eq!(body["klass"], "Report");
    assert_eq!(body["state"], "recur");
    assert_eq!(body["queue"], "reports");
    assert_eq!(body["priority"].as_f64(), Some(5.0));
    assert_eq!(body["interval"].as_f64(), Some(86400.0));
    assert_eq!(body["retries"].as_f64(), Some(2.0));
    assert_eq!(body["count"].as_f64(), Some(0.0));
    assert_eq!(body["backlog"].as_f64(), Some(0.0));
    assert_eq!(
        body["data"],
        json!({"kind": "sales"}),
        "data is a JSON value"
    );
    assert_eq!(body["tags"], json!(["finance"]));
}

#[tokio::test]
async fn a_template_without_tags_lists_an_empty_array() {
    let app = TestApp::start().await;
    recur(&app).await;
    delete(&app, "/v1/recurring/nightly/tags?tag=finance").await;
    let response = app.get("/v1/recurring/nightly").await;
    assert_eq!(response.body["tags"], json!([]), "{}", response.text);
}

#[tokio::test]
async fn get_unknown_recurring_job_is_not_found() {
    let app = TestApp::start().await;
    app.get("/v1/recurring/missing")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn recurring_routes_refuse_bad_jids() {
    let app = TestApp::start().await;
    for jid in BAD_NAMES {
        let uri = format!("/v1/recurring/{jid}");
        app.get(&uri).await.assert_problem(400, "bad_request");
        patch(&app, &uri, json!({"priority": 1}))
            .await
            .assert_problem(400, "bad_request");
        delete(&app, &uri).await.assert_problem(400, "bad_request");
        let tags = format!("{uri}/tags");
        app.post(&tags, json!({"tags": ["x"]}))
            .await
            .assert_problem(400, "bad_request");
        delete(&app, &format!("{tags}?tag=x"))
            .await
            .assert_problem(400, "bad_request");
    }
}

#[tokio::test]
async fn patch_changes_the_given_fields_and_keeps_the_rest() {
    let app = TestApp::start().await;
    recur(&app).await;
    let response = patch(
        &app,
        "/v1/recurring/nightly",
        json!({"priority": 9, "interval": 3600, "data": {"kind": "ops", "n": [1, 2]},
               "klass": "OpsReport", "queue": "ops", "retries": 4, "backlog": 3}),
    )
    .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert!(response.text.is_empty());

    let body = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(body["priority"].as_f64(), Some(9.0));
    assert_eq!(body["interval"].as_f64(), Some(3600.0));
    assert_eq!(body["data"], json!({"kind": "ops", "n": [1, 2]}));
    assert_eq!(body["klass"], "OpsReport");
    assert_eq!(body["queue"], "ops");
    assert_eq!(body["retries"].as_f64(), Some(4.0));
    assert_eq!(body["backlog"].as_f64(), Some(3.0));
    assert_eq!(body["tags"], json!(["finance"]), "tags are kept");
    assert_eq!(body["state"], "recur");
}

#[tokio::test]
async fn children_spawned_after_a_patch_and_a_tag_use_the_new_template() {
    let app = TestApp::start().await;
    recur(&app).await;
    patch(
        &app,
        "/v1/recurring/nightly",
        json!({"klass": "OpsReport", "data": [1, "two"], "priority": 7}),
    )
    .await;
    app.post("/v1/recurring/nightly/tags", json!({"tags": ["ops"]}))
        .await;
    app.clock.advance(3600.0);
    let popped = app
        .qless
        .pop(app.clock.now(), "reports", "w1", 5)
        .await
        .unwrap();
    assert_eq!(popped.len(), 1);
    let child = serde_json::to_value(&popped[0]).unwrap();
    assert_eq!(child["jid"], "nightly-1");
    assert_eq!(child["klass"], "OpsReport");
    assert_eq!(child["data"], json!([1, "two"]));
    assert_eq!(child["tags"], json!(["finance", "ops"]));
    assert_eq!(child["priority"].as_f64(), Some(7.0));
    let template = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(template["count"].as_f64(), Some(1.0));
}

#[tokio::test]
async fn patch_of_one_field_leaves_the_others_alone() {
    let app = TestApp::start().await;
    recur(&app).await;
    let before = app.get("/v1/recurring/nightly").await.body;
    let response = patch(&app, "/v1/recurring/nightly", json!({"priority": -3})).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    let mut after = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(after["priority"].as_f64(), Some(-3.0));
    after["priority"] = before["priority"].clone();
    assert_eq!(after, before);
}

#[tokio::test]
async fn patch_of_a_null_payload_stores_null() {
    let app = TestApp::start().await;
    recur(&app).await;
    let response = patch(&app, "/v1/recurring/nightly", json!({"data": null})).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    let body = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(body["data"], Value::Null);
}

#[tokio::test]
async fn patch_of_an_unknown_recurring_job_is_not_found() {
    let app = TestApp::start().await;
    patch(&app, "/v1/recurring/missing", json!({"priority": 1}))
        .await
        .assert_problem(404, "not_found");
    assert!(
        app.qless
            .recur_get(app.clock.now(), "missing")
            .await
            .unwrap()
            .is_none(),
        "a PATCH does not create a template"
    );
}

#[tokio::test]
async fn patch_with_bad_input_is_a_bad_request_and_changes_nothing() {
    let app = TestApp::start().await;
    recur(&app).await;
    let before = app.get("/v1/recurring/nightly").await.body;
    let cases = [
        json!({}),
        json!({"interval": 0}),
        json!({"interval": -60}),
        json!({"priority": "high"}),
        json!({"retries": -1}),
        json!({"retries": 1.5}),
        json!({"backlog": -2}),
        json!({"klass": ""}),
        json!({"queue": "a b"}),
        json!({"queue": ""}),
        json!({"priority": 1, "tags": ["x"]}),
        json!({"priority": 1, "colour": "red"}),
        json!([1, 2]),
        json!("priority"),
    ];
    for body in cases {
        let response = patch(&app, "/v1/recurring/nightly", body.clone()).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        response.assert_problem(400, "bad_request");
    }
    let after = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(after, before);
}

#[tokio::test]
async fn patch_with_malformed_json_is_a_bad_request() {
    let app = TestApp::start().await;
    recur(&app).await;
    let request = Request::builder()
        .method(Method::PATCH)
        .uri("/v1/recurring/nightly")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"priority\": "))
        .unwrap();
    app.send(request).await.assert_problem(400, "bad_request");
}

#[tokio::test]
async fn patch_without_a_json_content_type_is_unsupported() {
    let app = TestApp::start().await;
    recur(&app).await;
    send_plain_text(
        &app,
        Method::PATCH,
        "/v1/recurring/nightly",
        json!({"priority": 1}),
    )
    .await
    .assert_problem(415, "unsupported_media_type");
    let body = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(body["priority"].as_f64(), Some(5.0));
}

#[tokio::test]
async fn delete_recurring_job_removes_it_and_is_idempotent() {
    let app = TestApp::start().await;
    recur(&app).await;
    for _ in 0..2 {
        let response = delete(&app, "/v1/recurring/nightly").await;
        assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
        assert!(response.text.is_empty());
    }
    app.get("/v1/recurring/nightly")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn delete_of_an_unknown_recurring_job_is_no_content() {
    let app = TestApp::start().await;
    let response = delete(&app, "/v1/recurring/never-existed").await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
}

#[tokio::test]
async fn recurring_tags_are_added_once_in_order_and_removed() {
    let app = TestApp::start().await;
    recur(&app).await;
    let response = app
        .post(
            "/v1/recurring/nightly/tags",
            json!({"tags": ["eu", "finance", "daily", "eu"]}),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"tags": ["finance", "eu", "daily"]}));

    let response = delete(&app, "/v1/recurring/nightly/tags?tag=finance&tag=never-had").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"tags": ["eu", "daily"]}));

    let response = delete(&app, "/v1/recurring/nightly/tags?tag=eu&tag=daily").await;
    assert_eq!(response.body, json!({"tags": []}), "{}", response.text);
    let template = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(template["tags"], json!([]));
}

#[tokio::test]
async fn recurring_tags_of_an_unknown_template_are_not_found() {
    let app = TestApp::start().await;
    app.post("/v1/recurring/missing/tags", json!({"tags": ["a"]}))
        .await
        .assert_problem(404, "not_found");
    delete(&app, "/v1/recurring/missing/tags?tag=a")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn recurring_tags_with_bad_input_are_bad_requests_and_change_nothing() {
    let app = TestApp::start().await;
    recur(&app).await;
    let cases = [
        json!({}),
        json!({"tags": []}),
        json!({"tags": ["ok", ""]}),
        json!({"tags": ["a b"]}),
        json!({"tags": ["{x}"]}),
        json!({"tags": "finance"}),
        json!({"tags": [1]}),
        json!({"tags": ["a"], "tag": "b"}),
    ];
    for body in &cases {
        let response = app.post("/v1/recurring/nightly/tags", body.clone()).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        response.assert_problem(400, "bad_request");
    }
    send_plain_text(
        &app,
        Method::POST,
        "/v1/recurring/nightly/tags",
        json!({"tags": ["finance"]}),
    )
    .await
    .assert_problem(415, "unsupported_media_type");
    let too_many = vec!["tag=finance"; 1001].join("&");
    let queries = [
        String::new(),
        "?tag=".to_owned(),
        "?tag=ok&tag=".to_owned(),
        "?tag=a%20b".to_owned(),
        "?tag=%7Bx%7D".to_owned(),
        "?tags=finance".to_owned(),
        "?tag=finance&all=true".to_owned(),
        format!("?{too_many}"),
    ];
    for query in queries {
        let response = delete(&app, &format!("/v1/recurring/nightly/tags{query}")).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{query}");
        response.assert_problem(400, "bad_request");
    }
    let template = app.get("/v1/recurring/nightly").await.body;
    assert_eq!(template["tags"], json!(["finance"]));
}

// ---------------------------------------------------------------------------------
// Tags

#[tokio::test]
async fn top_tags_lists_tags_used_at_least_twice_most_used_first() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &["eu", "vip"]).await;
    put(&app, "q", "j2", &["eu", "vip", "once"]).await;
    put(&app, "q", "j3", &["eu"]).await;
    let response = app.get("/v1/tags").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"tags": ["eu", "vip"]}));

    let response = app.get("/v1/tags?offset=1&count=1").await;
    assert_eq!(response.body, json!({"tags": ["vip"]}), "{}", response.text);
}

#[tokio::test]
async fn a_tag_joins_the_top_on_its_second_use() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &["rare"]).await;
    let response = app.get("/v1/tags").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"tags": []}), "empty list, not {{}}");
    put(&app, "q", "j2", &["rare"]).await;
    assert_eq!(app.get("/v1/tags").await.body, json!({"tags": ["rare"]}));
}

#[tokio::test]
async fn tagged_jobs_are_paged_oldest_tagging_first_with_the_total() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &["eu"]).await;
    app.clock.advance(1.0);
    put(&app, "q", "j2", &["eu"]).await;
    app.clock.advance(1.0);
    put(&app, "q", "j3", &["eu", "vip"]).await;

    let response = app.get("/v1/tags/eu/jobs").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"total": 3, "jids": ["j1", "j2", "j3"]})
    );

    let response = app.get("/v1/tags/eu/jobs?offset=1&count=1").await;
    assert_eq!(response.body, json!({"total": 3, "jids": ["j2"]}));
}

#[tokio::test]
async fn an_unknown_tag_has_an_empty_page() {
    let app = TestApp::start().await;
    let response = app.get("/v1/tags/nobody/jobs").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"total": 0, "jids": []}));
}

#[tokio::test]
async fn tag_listings_refuse_bad_pages_and_names() {
    let app = TestApp::start().await;
    for query in [
        "count=0",
        "count=1001",
        "count=abc",
        "offset=-1",
        "offset=x",
        "count=-5",
    ] {
        for path in ["/v1/tags", "/v1/tags/eu/jobs"] {
            app.get(&format!("{path}?{query}"))
                .await
                .assert_problem(400, "bad_request");
        }
    }
    for tag in BAD_NAMES {
        app.get(&format!("/v1/tags/{tag}/jobs"))
            .await
            .assert_problem(400, "bad_request");
    }
}

// ---------------------------------------------------------------------------------
// Failures

#[tokio::test]
async fn failed_jobs_are_listed_by_group_and_unfailed_back_to_waiting() {
    let app = TestApp::start().await;
    put_and_fail(&app, "emails", "j1", "smtp").await;

    let response = app.get("/v1/failures").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"smtp": 1}));

    let response = app.get("/v1/failures/smtp").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"total": 1, "jids": ["j1"], "first": 1_700_000_000.0,
            "last": 1_700_000_000.0, "message": "it broke", "message_count": 1, "sampled": 1})
    );
    assert_eq!(state_of(&app, "j1").await, "failed");

    let response = app
        .post("/v1/failures/smtp/unfail", json!({"queue": "emails"}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"moved": 1}));

    assert_eq!(state_of(&app, "j1").await, "waiting");
    assert_eq!(app.get("/v1/failures").await.body, json!({}));
    assert_eq!(
        app.get("/v1/failures/smtp").await.body,
        json!({"total": 0, "jids": [], "message_count": 0, "sampled": 0})
    );
    let popped = app
        .qless
        .pop(app.clock.now(), "emails", "w2", 5)
        .await
        .unwrap();
    assert_eq!(popped.len(), 1, "the unfailed job can be popped again");
}

#[tokio::test]
async fn failure_groups_are_an_empty_object_without_failures() {
    let app = TestApp::start().await;
    let response = app.get("/v1/failures").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({}));
}

#[tokio::test]
async fn failed_jobs_are_paged_newest_failure_first() {
    let app = TestApp::start().await;
    for jid in ["j1", "j2", "j3"] {
        put_and_fail(&app, "q", jid, "boom").await;
        app.clock.advance(1.0);
    }
    put_and_fail(&app, "q", "other", "timeout").await;

    assert_eq!(
        app.get("/v1/failures").await.body,
        json!({"boom": 3, "timeout": 1})
    );
    // The page, and the group described: its oldest and newest failure, its most
    // common message.
    let described = json!({"first": 1_700_000_000.0, "last": 1_700_000_002.0,
        "message": "it broke", "message_count": 3, "sampled": 3});
    let page = |total: i64, jids: &[&str]| {
        let mut page = json!({"total": total, "jids": jids});
        page.as_object_mut()
            .unwrap()
            .extend(described.as_object().unwrap().clone());
        page
    };
    let response = app.get("/v1/failures/boom").await;
    assert_eq!(response.body, page(3, &["j3", "j2", "j1"]));
    let response = app.get("/v1/failures/boom?offset=1&count=1").await;
    assert_eq!(response.body, page(3, &["j2"]));
}

#[tokio::test]
async fn unfail_moves_only_the_oldest_count_jobs() {
    let app = TestApp::start().await;
    for jid in ["j1", "j2", "j3"] {
        put_and_fail(&app, "q", jid, "boom").await;
        app.clock.advance(1.0);
    }
    let response = app
        .post(
            "/v1/failures/boom/unfail",
            json!({"queue": "retry", "count": 2}),
        )
        .await;
    assert_eq!(response.body, json!({"moved": 2}), "{}", response.text);
    assert_eq!(state_of(&app, "j1").await, "waiting");
    assert_eq!(state_of(&app, "j2").await, "waiting");
    assert_eq!(state_of(&app, "j3").await, "failed");
    let left = app.get("/v1/failures/boom").await.body;
    assert_eq!((&left["total"], &left["jids"]), (&json!(1), &json!(["j3"])));
    assert_eq!(
        (&left["first"], &left["last"]),
        (&json!(1_700_000_002.0), &json!(1_700_000_002.0))
    );
}

#[tokio::test]
async fn unfail_of_an_unknown_group_moves_nothing() {
    let app = TestApp::start().await;
    let response = app
        .post("/v1/failures/nothing/unfail", json!({"queue": "q"}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"moved": 0}));
}

#[tokio::test]
async fn unfail_with_bad_input_is_a_bad_request_and_moves_nothing() {
    let app = TestApp::start().await;
    put_and_fail(&app, "q", "j1", "boom").await;
    let cases = [
        json!({}),
        json!({"count": 1}),
        json!({"queue": ""}),
        json!({"queue": "a b"}),
        json!({"queue": "q", "count": 0}),
        json!({"queue": "q", "count": -1}),
        json!({"queue": "q", "count": 1001}),
        json!({"queue": "q", "count": "all"}),
        json!({"queue": "q", "group": "boom"}),
        json!({"queue": 7}),
    ];
    for body in cases {
        let response = app.post("/v1/failures/boom/unfail", body.clone()).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        response.assert_problem(400, "bad_request");
    }
    for group in BAD_NAMES {
        app.post(
            &format!("/v1/failures/{group}/unfail"),
            json!({"queue": "q"}),
        )
        .await
        .assert_problem(400, "bad_request");
    }
    send_plain_text(
        &app,
        Method::POST,
        "/v1/failures/boom/unfail",
        json!({"queue": "q"}),
    )
    .await
    .assert_problem(415, "unsupported_media_type");

    assert_eq!(state_of(&app, "j1").await, "failed");
    assert_eq!(app.get("/v1/failures").await.body, json!({"boom": 1}));
}

#[tokio::test]
async fn failed_job_listings_refuse_bad_pages_and_names() {
    let app = TestApp::start().await;
    for query in ["count=0", "count=1001", "offset=-1", "count=many"] {
        app.get(&format!("/v1/failures/boom?{query}"))
            .await
            .assert_problem(400, "bad_request");
    }
    for group in BAD_NAMES {
        app.get(&format!("/v1/failures/{group}"))
            .await
            .assert_problem(400, "bad_request");
    }
}

// ---------------------------------------------------------------------------------
// Workers

#[tokio::test]
async fn workers_are_listed_after_a_pop_most_recent_first() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &[]).await;
    put(&app, "q", "j2", &[]).await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    app.clock.advance(1.0);
    app.qless.pop(app.clock.now(), "q", "w2", 1).await.unwrap();

    let response = app.get("/v1/workers").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!([
            {"name": "w2", "running": 1, "stalled": 0},
            {"name": "w1", "running": 1, "stalled": 0},
        ])
    );
}

#[tokio::test]
async fn workers_are_an_empty_list_when_none_was_seen() {
    let app = TestApp::start().await;
    let response = app.get("/v1/workers").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!([]));
}

#[tokio::test]
async fn a_worker_shows_its_running_and_stalled_jobs() {
    let app = TestApp::start().await;
    put(&app, "q", "early", &[]).await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    app.clock.advance(30.0);
    put(&app, "q", "late", &[]).await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();

    let response = app.get("/v1/workers/w1").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(
        response.body,
        json!({"jids": ["late", "early"], "stalled": []})
    );

    // The first lock (60 s) has expired, the second has not.
    app.clock.set(START + 70.0);
    let response = app.get("/v1/workers/w1").await;
    assert_eq!(
        response.body,
        json!({"jids": ["late"], "stalled": ["early"]})
    );
    assert_eq!(
        app.get("/v1/workers").await.body,
        json!([{"name": "w1", "running": 1, "stalled": 1}])
    );
}

#[tokio::test]
async fn an_unknown_worker_has_empty_lists() {
    let app = TestApp::start().await;
    let response = app.get("/v1/workers/nobody").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"jids": [], "stalled": []}));
}

#[tokio::test]
async fn deregistering_a_worker_removes_it_from_the_list() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &[]).await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    for _ in 0..2 {
        let response = delete(&app, "/v1/workers/w1").await;
        assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
        assert!(response.text.is_empty());
    }
    assert_eq!(app.get("/v1/workers").await.body, json!([]));
    assert_eq!(
        state_of(&app, "j1").await,
        "running",
        "the job keeps its lock"
    );
}

#[tokio::test]
async fn worker_routes_refuse_bad_names() {
    let app = TestApp::start().await;
    put(&app, "q", "j1", &[]).await;
    app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    for worker in BAD_NAMES {
        let uri = format!("/v1/workers/{worker}");
        app.get(&uri).await.assert_problem(400, "bad_request");
        delete(&app, &uri).await.assert_problem(400, "bad_request");
    }
    let long = "w".repeat(300);
    app.get(&format!("/v1/workers/{long}"))
        .await
        .assert_problem(400, "bad_request");
    assert_eq!(
        app.get("/v1/workers").await.body.as_array().unwrap().len(),
        1
    );
}

// ---------------------------------------------------------------------------------
// Config

fn defaults() -> Value {
    json!({
        "application": "qless",
        "heartbeat": 60,
        "grace-period": 10,
        "stats-history": 30,
        "histogram-history": 7,
        "jobs-history-count": 50000,
        "jobs-history": 604800,
    })
}

#[tokio::test]
async fn config_lists_exactly_the_defaults_when_nothing_is_set() {
    let app = TestApp::start().await;
    let response = app.get("/v1/config").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, defaults());
}

#[tokio::test]
async fn config_options_round_trip_through_set_get_and_unset() {
    let app = TestApp::start().await;
    let response = put_json(&app, "/v1/config/heartbeat", json!({"value": 30})).await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert!(response.text.is_empty());

    let response = app.get("/v1/config/heartbeat").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.body, json!({"option": "heartbeat", "value": 30}));

    let mut expected = defaults();
    expected["heartbeat"] = json!(30);
    assert_eq!(app.get("/v1/config").await.body, expected);

    let response = delete(&app, "/v1/config/heartbeat").await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert_eq!(
        app.get("/v1/config/heartbeat").await.body,
        json!({"option": "heartbeat", "value": 60}),
        "back to the default"
    );
    assert_eq!(app.get("/v1/config").await.body, defaults());
}

#[tokio::test]
async fn a_set_heartbeat_shortens_the_locks_of_popped_jobs() {
    let app = TestApp::start().await;
    put_json(&app, "/v1/config/heartbeat", json!({"value": 5})).await;
    put(&app, "q", "j1", &[]).await;
    let popped = app.qless.pop(app.clock.now(), "q", "w1", 1).await.unwrap();
    let job = serde_json::to_value(&popped[0]).unwrap();
    assert_eq!(job["expires"].as_f64(), Some(START + 5.0), "{job}");
}

#[tokio::test]
async fn config_values_are_stored_as_their_text() {
    let app = TestApp::start().await;
    let cases = [
        ("application", json!("billing"), json!("billing")),
        ("dashboard-enabled?custom=true", json!(true), json!("true")),
        ("note?custom=true", json!(""), json!("")),
        ("grace-period", json!(2.5), json!(2.5)),
        ("emails-max-concurrency", json!(4), json!(4)),
        ("emails-heartbeat", json!(120), json!(120)),
        ("max-job-history", json!(-1), json!(-1)),
        ("jobs-history-count", json!(10.0), json!(10)),
        ("ratio?custom=true", json!(0.25), json!("0.25")),
    ];
    for (option, value, _) in &cases {
        let response = put_json(
            &app,
            &format!("/v1/config/{option}"),
            json!({ "value": value }),
        )
        .await;
        assert_eq!(
            response.status,
            StatusCode::NO_CONTENT,
            "{option}: {}",
            response.text
        );
    }
    let all = app.get("/v1/config").await.body;
    for (option, _, read_back) in &cases {
        let option = option.trim_end_matches("?custom=true");
        let response = app.get(&format!("/v1/config/{option}")).await;
        assert_eq!(
            response.status,
            StatusCode::OK,
            "{option}: {}",
            response.text
        );
        assert_eq!(response.body, json!({"option": option, "value": read_back}));
        assert_eq!(&all[option], read_back, "{option} in the full map");
    }
    // Unset, a custom option too (saying so).
    for option in ["ratio?custom=true", "heartbeat"] {
        let response = delete(&app, &format!("/v1/config/{option}")).await;
        assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    }
}

#[tokio::test]
async fn an_option_neither_set_nor_defaulted_is_not_found() {
    let app = TestApp::start().await;
    for option in ["max-worker-age", "emails-heartbeat", "no-such-option"] {
        app.get(&format!("/v1/config/{option}"))
            .await
            .assert_problem(404, "not_found");
    }
}

#[tokio::test]
async fn unsetting_an_option_that_is_not_stored_is_no_content() {
    let app = TestApp::start().await;
    let response = delete(&app, "/v1/config/no-such-option?custom=true").await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    let response = delete(&app, "/v1/config/max-worker-age").await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert_eq!(app.get("/v1/config").await.body, defaults());
}

#[tokio::test]
async fn an_option_qlessd_does_not_know_needs_custom_and_a_known_one_refuses_it() {
    let app = TestApp::start().await;
    let cases = [
        // (option and query, what the detail names)
        ("heartbeet", "heartbeet"),
        ("grace_period", "grace_period"),
        ("jobs-history-counts", "jobs-history-counts"),
        ("heartbeat?custom=true", "heartbeat"),
        ("emails-heartbeat?custom=true", "emails-heartbeat"),
        ("my-option?custom=yes", "custom"),
        ("my-option?customs=true", "customs"),
    ];
    for (option, named) in cases {
        let uri = format!("/v1/config/{option}");
        for response in [
            put_json(&app, &uri, json!({"value": 5})).await,
            delete(&app, &uri).await,
        ] {
            response.assert_problem(400, "bad_request");
            let detail = response.body["detail"].as_str().unwrap();
            assert!(detail.contains(named), "{option}: {detail}");
        }
    }
    assert_eq!(app.get("/v1/config").await.body, defaults());
}

#[tokio::test]
async fn known_options_refuse_values_of_the_wrong_type_or_range() {
    let app = TestApp::start().await;
    let cases = [
        ("heartbeat", json!(-5)),
        ("heartbeat", json!(0)),
        ("heartbeat", json!(1e308)),
        ("heartbeat", json!(315_360_001)),
        ("max-worker-age", json!(0)),
        ("emails-heartbeat", json!(-1)),
        ("grace-period", json!(-0.5)),
        ("jobs-history", json!(1e12)),
        ("jobs-history-count", json!(-1)),
        ("jobs-history-count", json!(2.5)),
        ("jobs-history-count", json!(1e10)),
        ("stats-history", json!(1.5)),
        ("emails-max-concurrency", json!(-2)),
        ("emails-max-concurrency", json!(0.5)),
        ("max-job-history", json!(0.5)),
        ("application", json!(5)),
        ("application", json!(true)),
    ];
    for (option, value) in cases {
        let response = put_json(
            &app,
            &format!("/v1/config/{option}"),
            json!({ "value": value }),
        )
        .await;
        response.assert_problem(400, "bad_request");
        let detail = response.body["detail"].as_str().unwrap();
        assert!(detail.contains(option), "{option} {value}: {detail}");
    }
    assert_eq!(app.get("/v1/config").await.body, defaults());
}

#[tokio::test]
async fn numeric_options_refuse_anything_but_numbers_and_store_nothing() {
    let app = TestApp::start().await;
    let cases = [
        ("heartbeat", json!("sixty")),
        ("heartbeat", json!("60")),
        ("grace-period", json!(true)),
        ("jobs-history", json!("1w")),
        ("jobs-history-count", json!("")),
        ("max-job-history", json!("none")),
        ("max-worker-age", json!(false)),
        ("emails-heartbeat", json!("30s")),
        ("emails-max-concurrency", json!("four")),
    ];
    for (option, value) in cases {
        let uri = format!("/v1/config/{option}");
        let response = put_json(&app, &uri, json!({ "value": value })).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{option} {value}");
        response.assert_problem(400, "bad_request");
    }
    assert_eq!(app.get("/v1/config").await.body, defaults());
    app.get("/v1/config/emails-heartbeat")
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn set_config_option_with_bad_input_is_a_bad_request_and_stores_nothing() {
    let app = TestApp::start().await;
    let cases = [
        json!({}),
        json!({"value": null}),
        json!({"value": [1]}),
        json!({"value": {"a": 1}}),
        json!({"value": "x", "option": "application"}),
        json!("x"),
    ];
    for body in cases {
        let response = put_json(&app, "/v1/config/application", body.clone()).await;
        assert_eq!(response.status, StatusCode::BAD_REQUEST, "{body}");
        response.assert_problem(400, "bad_request");
    }
    for option in BAD_NAMES {
        let uri = format!("/v1/config/{option}");
        put_json(&app, &uri, json!({"value": "x"}))
            .await
            .assert_problem(400, "bad_request");
        app.get(&uri).await.assert_problem(400, "bad_request");
        delete(&app, &uri).await.assert_problem(400, "bad_request");
    }
    send_plain_text(
        &app,
        Method::PUT,
        "/v1/config/application",
        json!({"value": "x"}),
    )
    .await
    .assert_problem(415, "unsupported_media_type");
    assert_eq!(app.get("/v1/config").await.body, defaults());
}

#[tokio::test]
async fn recurring_tag_lists_are_bounded_and_refused_whole() {
    let app = TestApp::start().await;
    recur(&app).await;
    let before = app
        .qless
        .recur_get(app.clock.now(), "nightly")
        .await
        .unwrap()
        .unwrap();
    let tags: Vec<String> = (0..1001).map(|i| format!("t{i}")).collect();
    app.post("/v1/recurring/nightly/tags", json!({"tags": tags}))
        .await
        .assert_problem(400, "bad_request");
    let template = app
        .qless
        .recur_get(app.clock.now(), "nightly")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(template.tags, before.tags);
}
