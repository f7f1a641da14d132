//! The dashboard's pages and actions through the router, without a browser: what
//! each page shows, that actions need the form token, and that they change what the
//! API sees.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};

use super::{PUSH_SECRET, pushed, put, put_and_fail};
use crate::support::{TestApp, TestResponse};

/// The CSRF token the dashboard put in a page's forms.
fn token_in(page: &str) -> String {
    let at = page.find(r#"name="csrf" value=""#).expect("a form token") + 19;
    page[at..at + 32].to_owned()
}

async fn post_form(app: &TestApp, uri: &str, form: &str) -> TestResponse {
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .expect("request");
    app.send(request).await
}

#[tokio::test]
async fn every_page_renders_with_jobs_failures_and_a_recurring_job() {
    let app = TestApp::start().await;
    put(&app, "emails", "j1").await;
    put_and_fail(&app, "emails", "j2", "smtp").await;
    let pages = [
        "/ui",
        "/ui/partials/overview",
        "/ui/queues/emails",
        "/ui/queues/emails?state=running",
        "/ui/queues/emails?state=recurring",
        "/ui/jobs/j1",
        "/ui/jobs/j2",
        "/ui/failures",
        "/ui/failures/smtp",
        "/ui/workers",
        "/ui/workers/w1",
        "/ui/tags",
        "/ui/tags?tag=signup",
        "/ui/tracked",
        "/ui/recurring",
        "/ui/throttles",
        "/ui/config",
        "/ui/assets/htmx.min.js",
        "/ui/assets/style.css",
    ];
    for page in pages {
        let response = app.get(page).await;
        assert_eq!(response.status, StatusCode::OK, "{page}: {}", response.text);
    }
    let overview = app.get("/ui").await.text;
    assert!(overview.contains(r#"href="/ui/queues/emails""#));
    assert!(overview.contains(r#"href="/ui/failures/smtp""#));
    let job = app.get("/ui/jobs/j2").await.text;
    assert!(job.contains("it broke") && job.contains("&quot;to&quot;"));
}

#[tokio::test]
async fn an_unknown_job_or_state_is_a_4xx_page() {
    let app = TestApp::start().await;
    let missing = app.get("/ui/jobs/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let bad = app.get("/ui/queues/emails?state=lost").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_action_without_the_form_token_is_refused_and_changes_nothing() {
    let app = TestApp::start().await;
    put(&app, "emails", "j1").await;
    let refused = post_form(&app, "/ui/queues/emails/pause", "csrf=guess").await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST.max(refused.status));
    assert!(refused.status.is_client_error());
    let counts = app.qless.queue(app.clock.now(), "emails").await.unwrap();
    assert!(!counts.paused);
    let token = token_in(&app.get("/ui/queues/emails").await.text);
    let done = post_form(&app, "/ui/queues/emails/pause", &format!("csrf={token}")).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert!(
        app.qless
            .queue(app.clock.now(), "emails")
            .await
            .unwrap()
            .paused
    );
}

#[tokio::test]
async fn job_actions_change_the_job_as_the_api_would() {
    let app = TestApp::start().await;
    put(&app, "emails", "j1").await;
    let token = token_in(&app.get("/ui/jobs/j1").await.text);
    for (action, form) in [
        ("priority", "priority=7"),
        ("tag", "tag=vip"),
        ("untag", "tag=signup"),
        ("track", ""),
        ("move", "queue=later"),
    ] {
        let response = post_form(
            &app,
            &format!("/ui/jobs/j1/{action}"),
            &format!("csrf={token}&{form}"),
        )
        .await;
        assert_eq!(
            response.status,
            StatusCode::SEE_OTHER,
            "{action}: {}",
            response.text
        );
    }
    let job = app.qless.get(app.clock.now(), "j1").await.unwrap().unwrap();
    assert_eq!(job.priority, 7.0);
    assert_eq!(job.tags, ["vip"]);
    assert!(job.tracked);
    assert_eq!(job.queue, "later");
    let bad = post_form(
        &app,
        "/ui/jobs/j1/priority",
        &format!("csrf={token}&priority=high"),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let cancel = post_form(&app, "/ui/jobs/j1/cancel", &format!("csrf={token}")).await;
    assert_eq!(cancel.status, StatusCode::SEE_OTHER);
    assert!(
        app.qless
            .get(app.clock.now(), "j1")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_failure_group_is_unfailed_by_job_and_cancelled_whole() {
    let app = TestApp::start().await;
    for jid in ["a", "b", "c"] {
        put_and_fail(&app, "emails", jid, "smtp").await;
    }
    let token = token_in(&app.get("/ui/failures/smtp").await.text);
    let one = post_form(
        &app,
        "/ui/failures/smtp/unfail",
        &format!("csrf={token}&scope=jobs&jid=a"),
    )
    .await;
    assert_eq!(one.status, StatusCode::SEE_OTHER);
    let a = app.qless.get(app.clock.now(), "a").await.unwrap().unwrap();
    assert_eq!((a.state.as_str(), a.queue.as_str()), ("waiting", "emails"));
    let all = post_form(
        &app,
        "/ui/failures/smtp/cancel",
        &format!("csrf={token}&scope=all"),
    )
    .await;
    assert_eq!(all.status, StatusCode::SEE_OTHER);
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());
    assert!(app.qless.get(app.clock.now(), "b").await.unwrap().is_none());
    assert!(app.qless.get(app.clock.now(), "a").await.unwrap().is_some());
}

#[tokio::test]
async fn recurring_jobs_and_config_are_edited_through_forms() {
    let app = TestApp::start().await;
    app.qless
        .recur(
            app.clock.now(),
            qlessd::core::RecurArgs {
                queue: "reports".into(),
                jid: "nightly".into(),
                klass: "Report".into(),
                data: "{}".into(),
                interval: 86400.0,
                offset: 3600.0,
                priority: None,
                tags: Some(vec!["old".into()]),
                retries: None,
                backlog: None,
                cron: None,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let token = token_in(&app.get("/ui/recurring/nightly").await.text);
    let saved = post_form(
        &app,
        "/ui/recurring/nightly/update",
        &format!("csrf={token}&interval=60&priority=3&tags=new%2C+other"),
    )
    .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text);
    let t = app
        .qless
        .recur_get(app.clock.now(), "nightly")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((t.interval, t.priority), (60.0, 3.0));
    assert_eq!(t.tags, ["new", "other"]);
    let set = post_form(
        &app,
        "/ui/config",
        &format!("csrf={token}&option=heartbeat&value=90"),
    )
    .await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.text);
    let value = app
        .qless
        .config_get(app.clock.now(), "heartbeat")
        .await
        .unwrap();
    assert_eq!(value, Some(serde_json::json!("90")));
    let refused = post_form(
        &app,
        "/ui/config",
        &format!("csrf={token}&option=heartbeat&value=-5"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    let deleted = post_form(
        &app,
        "/ui/recurring/nightly/delete",
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(deleted.status, StatusCode::SEE_OTHER);
    assert!(
        app.qless
            .recur_get(app.clock.now(), "nightly")
            .await
            .unwrap()
            .is_none()
    );
}

/// An app whose event subscription is up: events published from now on reach it.
async fn subscribed_app() -> TestApp {
    let app = TestApp::start().await;
    assert!(
        app.state
            .events
            .wait_subscribed(std::time::Duration::from_secs(5))
            .await
    );
    app
}

#[tokio::test]
async fn the_live_stream_says_changed_when_a_job_moves() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let app = subscribed_app().await;
    let request = Request::builder()
        .uri("/ui/live")
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    put(&app, "emails", "j1").await;
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), body.frame())
        .await
        .expect("a frame in time")
        .expect("a frame")
        .expect("no error");
    let text = String::from_utf8_lossy(frame.data_ref().expect("data")).into_owned();
    assert!(text.contains("event: changed"), "{text}");
}

/// The throughput chart counts every job ended, not only tracked ones (the script's
/// `completed` and `failed` channels carry tracked jobs alone), from any client.
#[tokio::test]
async fn the_throughput_chart_counts_every_job_completed_or_failed() {
    use qlessd::core::CompleteArgs;
    let app = subscribed_app().await;
    for jid in ["c1", "c2"] {
        put(&app, "emails", jid).await;
        let popped = app.qless.pop(app.clock.now(), "emails", "w1", 1).await;
        assert_eq!(popped.expect("pop").len(), 1);
        let args = CompleteArgs {
            jid: jid.into(),
            worker: "w1".into(),
            queue: "emails".into(),
            data: "{}".into(),
            ..Default::default()
        };
        app.qless
            .complete(app.clock.now(), args)
            .await
            .expect("complete");
    }
    put_and_fail(&app, "emails", "f1", "smtp").await;
    // The events reach the gateway through Redis a moment after the calls return;
    // the jobs may straddle a minute, so the chart's minutes are added up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let overview = app.get("/ui").await.text;
        let shown = charted(&overview);
        if shown == (2, 1) {
            break;
        }
        assert!(
            shown < (2, 1) && std::time::Instant::now() < deadline,
            "the chart showed {shown:?} completed and failed: {overview}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `(completed, failed)` over every minute of the overview's throughput chart (each
/// minute's bar is titled `<n> min ago: <c> completed, <f> failed`).
fn charted(page: &str) -> (u64, u64) {
    let mut total = (0, 0);
    for title in page.split("<title>").skip(1) {
        let text = &title[..title.find("</title>").expect("a closed title")];
        let Some((_, counts)) = text.split_once(" min ago: ") else {
            continue;
        };
        let (completed, failed) = counts
            .strip_suffix(" failed")
            .and_then(|counts| counts.split_once(" completed, "))
            .expect("a throughput title");
        total.0 += completed.parse::<u64>().expect("a count");
        total.1 += failed.parse::<u64>().expect("a count");
    }
    total
}

/// An auth file with a `read` and an `admin` token (secrets `secret-<name>`).
fn auth_file() -> String {
    use sha2::{Digest, Sha256};
    let mut file = String::new();
    for (name, scope) in [("reader", "read"), ("ops", "admin")] {
        let digest: String = Sha256::digest(format!("secret-{name}").as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        file.push_str(&format!(
            "[[tokens]]\nname = \"{name}\"\nsha256 = \"{digest}\"\nscopes = [\"{scope}\"]\n"
        ));
    }
    file
}

async fn with_cookie(
    app: &TestApp,
    method: Method,
    uri: &str,
    token: &str,
    form: &str,
) -> TestResponse {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(
            header::COOKIE,
            format!("other=1; qlessd_token=secret-{token}"),
        )
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_owned()))
        .unwrap();
    app.send(request).await
}

#[tokio::test]
async fn with_tokens_the_dashboard_asks_for_one_and_a_read_token_gets_no_actions() {
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    put(&app, "emails", "j1").await;
    // No token: pages go to the login form, which is open.
    let page = app.get("/ui/queues/emails").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers[header::LOCATION], "/ui/login");
    let login = app.get("/ui/login").await;
    assert_eq!(login.status, StatusCode::OK);
    let token = token_in(&login.text);
    // Logging in keeps the token in an HttpOnly, SameSite cookie for /ui.
    let done = post_form(
        &app,
        "/ui/login",
        &format!("csrf={token}&token=secret-reader"),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    let cookie = done.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with("qlessd_token=secret-reader;"),
        "{cookie}"
    );
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    // A read token sees the queue but no action, and cannot act.
    let read = with_cookie(&app, Method::GET, "/ui/queues/emails", "reader", "").await;
    assert_eq!(read.status, StatusCode::OK);
    assert!(
        !read.text.contains("/pause"),
        "a read token was offered an action"
    );
    let job = with_cookie(&app, Method::GET, "/ui/jobs/j1", "reader", "").await;
    assert!(!job.text.contains("/cancel") && !job.text.contains("/retry"));
    let act = with_cookie(
        &app,
        Method::POST,
        "/ui/queues/emails/pause",
        "reader",
        &format!("csrf={token}"),
    )
    .await;
    assert_eq!(act.status, StatusCode::FORBIDDEN);
    assert!(
        !app.qless
            .queue(app.clock.now(), "emails")
            .await
            .unwrap()
            .paused
    );
    // An admin token sees and takes actions.
    let admin = with_cookie(&app, Method::GET, "/ui/queues/emails", "ops", "").await;
    assert!(admin.text.contains("/ui/queues/emails/pause"));
    let act = with_cookie(
        &app,
        Method::POST,
        "/ui/queues/emails/pause",
        "ops",
        &format!("csrf={}", token_in(&admin.text)),
    )
    .await;
    assert_eq!(act.status, StatusCode::SEE_OTHER);
    assert!(
        app.qless
            .queue(app.clock.now(), "emails")
            .await
            .unwrap()
            .paused
    );
    // The cookie opens the dashboard only, never the API.
    let api = with_cookie(&app, Method::GET, "/v1/queues", "ops", "").await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn job_queue_and_throttle_pages_show_the_gateway_features() {
    use serde_json::json;
    let app = TestApp::start().await;
    let set = app
        .request(
            Method::PUT,
            "/v1/throttles/smtp",
            Some(json!({"maximum": 1, "rate": {"jobs": 10, "seconds": 60}})),
        )
        .await;
    assert!(set.status.is_success(), "{}", set.text);
    for jid in ["t1", "t2"] {
        let put = app
            .post(
                "/v1/queues/mail/jobs",
                json!({"jid": jid, "klass": "K", "throttles": ["smtp"],
                       "backoff": {"initial": 5, "factor": 3}}),
            )
            .await;
        assert!(put.status.is_success(), "{}", put.text);
        app.clock.advance(1.0);
    }
    let pop = app
        .post("/v1/queues/mail/pop", json!({"worker": "w", "count": 2}))
        .await;
    assert_eq!(pop.body.as_array().map(Vec::len), Some(1), "{}", pop.text);
    let beat = app
        .post(
            "/v1/jobs/t1/heartbeat",
            json!({"worker": "w", "progress": {"done": 40}}),
        )
        .await;
    assert_eq!(beat.status, StatusCode::OK, "{}", beat.text);

    let running = app.get("/ui/jobs/t1").await.text;
    assert!(running.contains(r#"id="progress""#) && running.contains("&quot;done&quot;: 40"));
    assert!(running.contains(r#"id="throttles""#) && running.contains("smtp"));
    assert!(running.contains(r#"id="backoff""#) && running.contains("&quot;factor&quot;:3"));
    let waiting = app.get("/ui/jobs/t2").await.text;
    assert!(waiting.contains("waiting on <bdi>smtp</bdi>"), "{waiting}");

    let queue = app.get("/ui/queues/mail").await.text;
    assert!(queue.contains("Throttled: 1"), "{queue}");
    let overview = app.get("/ui").await.text;
    assert!(
        overview.contains(r#"<td class="n throttled">1</td>"#),
        "{overview}"
    );

    let throttles = app.get("/ui/throttles").await;
    assert_eq!(throttles.status, StatusCode::OK);
    assert!(
        overview.contains(r#"href="/ui/throttles""#),
        "linked from the nav"
    );
    let row = throttles
        .text
        .split("<td><bdi>smtp</bdi></td>")
        .nth(1)
        .expect("a row for smtp");
    assert!(
        row.starts_with(r#"<td class="n">1</td><td>10 per 60 s (1 recent)</td><td class="n">1</td><td class="n">1</td>"#),
        "{row}"
    );
    assert!(row.contains(r#"href="/ui/jobs/t2""#));

    let complete = app
        .post(
            "/v1/jobs/t1/complete",
            json!({"worker": "w", "queue": "mail", "result": {"sent": true}}),
        )
        .await;
    assert_eq!(complete.status, StatusCode::OK, "{}", complete.text);
    let done = app.get("/ui/jobs/t1").await.text;
    assert!(done.contains(r#"id="result""#) && done.contains("&quot;sent&quot;: true"));
    assert!(
        app.get("/ui/queues/mail")
            .await
            .text
            .contains("Throttled: 0")
    );
}

#[tokio::test]
async fn a_cron_template_page_shows_its_schedule_in_its_zone_and_edits_it() {
    use serde_json::json;
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/queues/reports/recurring",
            json!({"jid": "daily", "klass": "Report", "cron": "0 9 * * *",
                   "timezone": "Europe/Berlin"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let page = app.get("/ui/recurring/daily").await.text;
    assert!(
        page.contains(r#"<dd id="cron"><code>0 9 * * *</code></dd>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<dd id="timezone">Europe/Berlin</dd>"#),
        "{page}"
    );
    // START is 2023-11-14 22:13 UTC: the next runs are 09:00 CET from the 15th.
    assert!(page.contains("<li>2023-11-15 09:00:00 CET</li>"), "{page}");
    assert!(page.contains("<li>2023-11-19 09:00:00 CET</li>"), "{page}");
    let listing = app.get("/ui/queues/reports?state=recurring").await.text;
    assert!(
        listing.contains("<code>0 9 * * *</code> Europe/Berlin"),
        "{listing}"
    );

    let token = token_in(&page);
    let saved = post_form(
        &app,
        "/ui/recurring/daily/update",
        &format!("csrf={token}&cron=30+7+*+*+*&timezone=America%2FNew_York&priority=0&tags="),
    )
    .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.text);
    let template = app.get("/v1/recurring/daily").await.body;
    assert_eq!(template["cron"], "30 7 * * *");
    assert_eq!(template["timezone"], "America/New_York");
    let refused = post_form(
        &app,
        "/ui/recurring/daily/update",
        &format!("csrf={token}&cron=nope&timezone=UTC&priority=0&tags="),
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.text.contains("nope"), "{}", refused.text);
    assert_eq!(
        app.get("/v1/recurring/daily").await.body["cron"],
        "30 7 * * *"
    );
}

/// An app checking the tokens of [`auth_file`], its settings as `configure` makes them.
async fn with_auth(configure: impl FnOnce(&mut qlessd::settings::Settings)) -> TestApp {
    let mut app = TestApp::start_configured(Some("prod"), configure).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, auth_file()).unwrap();
    let auth = qlessd::auth::Auth::load(&file, Some("prod")).unwrap();
    app.router = qlessd::server::authenticated_router(app.state.clone(), &auth);
    app
}

#[tokio::test]
async fn each_session_has_its_own_form_token_and_no_other_opens_its_actions() {
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    put(&app, "emails", "j1").await;
    let anyone = token_in(&app.get("/ui/login").await.text);
    let reader = token_in(
        &with_cookie(&app, Method::GET, "/ui", "reader", "")
            .await
            .text,
    );
    let ops = token_in(&with_cookie(&app, Method::GET, "/ui", "ops", "").await.text);
    assert!(
        anyone != reader && anyone != ops && reader != ops,
        "one form token shared: {anyone} {reader} {ops}"
    );
    // The same session keeps its token from page to page.
    let again = with_cookie(&app, Method::GET, "/ui/jobs/j1", "ops", "").await;
    assert_eq!(token_in(&again.text), ops);
    // The login page's token and another session's do not open the ops session's
    // actions, although its cookie is sent along.
    for other in [&anyone, &reader] {
        let act = with_cookie(
            &app,
            Method::POST,
            "/ui/queues/emails/pause",
            "ops",
            &format!("csrf={other}"),
        )
        .await;
        assert_eq!(act.status, StatusCode::BAD_REQUEST, "{}", act.text);
        assert!(act.text.contains("stale form token"), "{}", act.text);
        let paused = app.qless.queue(app.clock.now(), "emails").await.unwrap();
        assert!(!paused.paused);
    }
    let act = with_cookie(
        &app,
        Method::POST,
        "/ui/queues/emails/pause",
        "ops",
        &format!("csrf={ops}"),
    )
    .await;
    assert_eq!(act.status, StatusCode::SEE_OTHER, "{}", act.text);
    // A session's token is no secret's text.
    assert!(!ops.contains("secret"));
}

#[tokio::test]
async fn login_keeps_only_a_token_the_server_knows() {
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    let csrf = token_in(&app.get("/ui/login").await.text);
    for guess in ["secret-nobody", "anything", "secret-ops;x"] {
        let tried = post_form(&app, "/ui/login", &format!("csrf={csrf}&token={guess}")).await;
        assert_eq!(
            tried.status,
            StatusCode::UNAUTHORIZED,
            "{guess}: {}",
            tried.text
        );
        assert!(
            !tried.headers.contains_key(header::SET_COOKIE),
            "{guess} was kept"
        );
        assert!(tried.text.contains(r#"id="login-error""#), "{}", tried.text);
        assert!(tried.text.contains(r#"action="/ui/login""#));
    }
    // Without the login page's form token, not even a good token is kept.
    let forged = post_form(&app, "/ui/login", "csrf=guess&token=secret-ops").await;
    assert_eq!(forged.status, StatusCode::BAD_REQUEST);
    assert!(!forged.headers.contains_key(header::SET_COOKIE));
    let done = post_form(&app, "/ui/login", &format!("csrf={csrf}&token=secret-ops")).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    let cookie = done.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.starts_with("qlessd_token=secret-ops;"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
}

#[tokio::test]
async fn the_cookie_is_secure_when_the_dashboard_is_reached_over_https() {
    use clap::Parser as _;
    use qlessd::settings::Settings;
    assert!(Settings::parse_from(["qlessd", "--secure-cookies"]).secure_cookies);
    assert!(!Settings::parse_from(["qlessd"]).secure_cookies);
    // Told so by the flag (a proxy ends TLS), on login and on logout.
    let flagged = with_auth(|settings| settings.secure_cookies = true).await;
    let csrf = token_in(&flagged.get("/ui/login").await.text);
    let login = post_form(
        &flagged,
        "/ui/login",
        &format!("csrf={csrf}&token=secret-ops"),
    )
    .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    let cookie = login.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let page = with_cookie(&flagged, Method::GET, "/ui", "ops", "").await;
    let logout = with_cookie(
        &flagged,
        Method::POST,
        "/ui/logout",
        "ops",
        &format!("csrf={}", token_in(&page.text)),
    )
    .await;
    assert_eq!(logout.status, StatusCode::SEE_OTHER);
    let forget = logout.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        forget.contains("Max-Age=0") && forget.ends_with("; Secure"),
        "{forget}"
    );
    // Told so by the proxy's header, without the flag.
    let app = with_auth(|_| {}).await;
    let csrf = token_in(&app.get("/ui/login").await.text);
    let request = Request::builder()
        .method(Method::POST)
        .uri("/ui/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("x-forwarded-proto", "https")
        .body(Body::from(format!("csrf={csrf}&token=secret-reader")))
        .unwrap();
    let login = app.send(request).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    let cookie = login.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
}

#[tokio::test]
async fn names_are_isolated_so_that_none_reorders_the_page_around_it() {
    let app = TestApp::start().await;
    // Stored as a stock qless client could, through the script: the gateway refuses
    // such names, but Redis may hold them from before.
    let queue = "pay\u{202e}cod.exe";
    put_and_fail(&app, queue, "j1", "group\u{202e}x").await;
    app.qless
        .tag_add(app.clock.now(), "j1", &["tag\u{202e}y".to_owned()])
        .await
        .unwrap();
    put(&app, queue, "j2").await;
    let popped = app.qless.pop(app.clock.now(), queue, "w\u{202e}2", 1).await;
    assert_eq!(popped.unwrap().len(), 1);
    batch_and_workflow_of_such_names(&app, queue).await;
    for uri in [
        "/ui",
        "/ui/failures",
        "/ui/jobs/j1",
        "/ui/jobs/j2",
        "/ui/workers",
        "/ui/batches/b1",
        "/ui/workflows/w1",
        "/ui/search?state=failed",
        "/ui/search?queue=other",
    ] {
        assert_isolated(&app, uri).await;
    }
    // (The push page has a test of its own: `the_push_page_isolates_the_names_it_shows`.)
    // Nor can the API or the dashboard be asked for such a name.
    let refused = app.get("/v1/queues/pay%E2%80%AEcod.exe").await;
    refused.assert_problem(400, "bad_request");
    let page = app.get("/ui/queues/pay%E2%80%AEcod.exe").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
}

/// Batch `b1` (a job and a callback) and workflow `w1` (two tasks) whose names hold
/// a right-to-left override (U+202E), with their jobs in `queue`, put through the
/// script as [`names_are_isolated_so_that_none_reorders_the_page_around_it`] puts
/// its jobs. Also a job of queue `other` with such a jid, tag and class.
async fn batch_and_workflow_of_such_names(app: &TestApp, queue: &str) {
    use qlessd::core::PutArgs;
    use qlessd::core::batches::{CallbackKind, NewBatch, NewTask, NewWorkflow};
    use qlessd::model::ParentFailurePolicy;
    let put = |queue: &str, jid: &str| PutArgs {
        queue: queue.into(),
        jid: jid.into(),
        klass: "K".into(),
        data: "{}".into(),
        ..Default::default()
    };
    let batch = NewBatch {
        bid: "b1".into(),
        description: String::new(),
        parent: None,
        jobs: vec![put(queue, "bj\u{202e}1")],
        callbacks: vec![(
            CallbackKind::OnComplete,
            put("report\u{202e}q", "cb\u{202e}1"),
        )],
    };
    app.qless.batch_open(app.clock.now(), &batch).await.unwrap();
    let mut child = put(queue, "wt2");
    child.depends = Some(vec!["wt\u{202e}1".to_owned()]);
    let workflow = NewWorkflow {
        wid: "w1".into(),
        name: "flow\u{202e}x".into(),
        tasks: vec![
            NewTask {
                name: "task\u{202e}1".into(),
                put: put(queue, "wt\u{202e}1"),
                after: Vec::new(),
                on_parent_failure: ParentFailurePolicy::Cancel,
            },
            NewTask {
                name: "next".into(),
                put: child,
                after: vec!["task\u{202e}1".into()],
                on_parent_failure: ParentFailurePolicy::Cancel,
            },
        ],
    };
    app.qless
        .workflow_open(app.clock.now(), &workflow)
        .await
        .unwrap();
    let mut other = put("other", "o\u{202e}1");
    other.klass = "Klass\u{202e}y".into();
    other.tags = Some(vec!["t\u{202e}z".into()]);
    app.qless.put(app.clock.now(), other).await.unwrap();
}

/// Fails unless every right-to-left override (U+202E) `uri` shows is isolated, and it
/// shows at least one: in HTML inside a `<bdi>`; in the SVG of a workflow's graph
/// (which has no `<bdi>`) inside a `<text unicode-bidi="isolate">`, or in hover text
/// between U+2068 FIRST STRONG ISOLATE and U+2069 POP DIRECTIONAL ISOLATE.
async fn assert_isolated(app: &TestApp, uri: &str) {
    let page = app.get(uri).await;
    assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.text);
    let mut shown = 0;
    for (at, _) in page.text.match_indices('\u{202e}') {
        let before = &page.text[..at];
        // An attribute's value (a form's hidden field, a link) is not shown.
        if before.rfind('<') > before.rfind('>') {
            continue;
        }
        let isolated = if before.rfind("<svg") > before.rfind("</svg>") {
            let text = before
                .rfind("<text ")
                .filter(|&t| before.rfind("</text>") < Some(t));
            let in_isolated_text = text.is_some_and(|t| {
                let tag = &before[t..t + before[t..].find('>').unwrap()];
                tag.contains(r#"unicode-bidi="isolate""#)
            });
            let between_isolates = before.rfind('\u{2068}') > before.rfind('\u{2069}');
            in_isolated_text || between_isolates
        } else {
            let opened = before.rfind("<bdi>").or_else(|| before.rfind("<bdi "));
            opened.is_some() && opened > before.rfind("</bdi>")
        };
        assert!(
            isolated,
            "{uri}: a name is not isolated: {}",
            &page.text[at.saturating_sub(80)..at]
        );
        shown += 1;
    }
    assert!(shown > 0, "{uri} shows none of the names");
}

/// The part of `page` from the element with `id` to the end of that element's tag
/// name's first closing (enough for the flat elements these tests look into).
fn element<'a>(page: &'a str, id: &str, tag: &str) -> &'a str {
    let at = page
        .find(&format!(r#"id="{id}""#))
        .unwrap_or_else(|| panic!("no #{id} in {page}"));
    let end = page[at..]
        .find(&format!("</{tag}>"))
        .unwrap_or_else(|| panic!("#{id} is not closed"));
    &page[at..at + end]
}

#[tokio::test]
async fn a_pushed_queue_has_a_page_with_its_settings_counts_deliveries_and_failures() {
    let app = TestApp::start().await;
    pushed(&app, "hooks", "qlessd-push:gw-1").await;
    // A job of another queue in the same failure group is not this queue's.
    put_and_fail(&app, "other", "o1", "push-http-410").await;
    let page = app.get("/ui/queues/hooks/push").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let text = page.text;

    // The settings, with the endpoint cut before its query and headers by name only.
    assert!(
        element(&text, "endpoint", "dd")
            .contains("<code>https://hooks.example.com/in/qlessd</code>"),
        "{text}"
    );
    assert!(element(&text, "timeout", "dd").contains(">45 s"), "{text}");
    assert!(
        element(&text, "concurrency", "dd").contains(">7 "),
        "{text}"
    );
    assert!(
        element(&text, "rate", "dd").contains(">100 per 2 s"),
        "{text}"
    );
    let headers = element(&text, "headers", "dd");
    assert!(
        headers.contains("<bdi>authorization</bdi>") && headers.contains("<bdi>x-team</bdi>"),
        "{headers}"
    );
    let secret = qlessd::core::push::Secret::new(PUSH_SECRET.to_owned());
    let fingerprint = qlessd::push::signature::fingerprint(&secret);
    assert!(
        element(&text, "secrets", "dd").contains(&fingerprint),
        "{text}"
    );
    for hidden in [
        PUSH_SECRET,
        "query-credential",
        "?token",
        "header-credential",
        "billing-team",
    ] {
        assert!(!text.contains(hidden), "the page shows {hidden}: {text}");
    }

    // The counts.
    for (id, count) in [
        ("delivered", 1),
        ("retried", 1),
        ("failed", 1),
        ("in-flight", 0),
    ] {
        assert!(
            element(&text, id, "div").ends_with(&format!(">{count}")),
            "{id}: {text}"
        );
    }

    // The latest deliveries, newest first: jid, status, ms, attempt, outcome, who.
    let table = element(&text, "deliveries", "table");
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows[0].contains(r#"href="/ui/jobs/d3""#) && rows[0].contains(">410<"));
    assert!(
        rows[0].contains(r#"<span class="badge failed">failed</span>"#),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains(r#"href="/ui/jobs/d2""#) && rows[1].contains("no answer"));
    assert!(
        rows[1].contains(">45000<") && rows[1].contains(">retried<"),
        "{}",
        rows[1]
    );
    assert!(rows[2].contains(r#"href="/ui/jobs/d1""#) && rows[2].contains(">200<"));
    assert!(
        rows[2].contains(r#"<td class="n">12</td><td class="n">1</td>"#),
        "{}",
        rows[2]
    );
    assert!(rows[2].contains(">delivered<") && rows[2].contains("<bdi>qlessd-push:gw-1</bdi>"));

    // The failures: the delivery groups, and this queue's failed job only.
    let groups = element(&text, "push-failure-groups", "table");
    assert!(
        groups.contains(r#"href="/ui/failures/push-http-410""#),
        "{groups}"
    );
    assert!(
        groups.contains(r#"<td class="n">2</td>"#),
        "both queues' jobs: {groups}"
    );
    let failed = element(&text, "push-failed-jobs", "table");
    assert!(failed.contains(r#"href="/ui/jobs/d3""#) && failed.contains("the endpoint is gone"));
    assert!(!failed.contains("/ui/jobs/o1"), "{failed}");

    // The queue's page links to it; the overview marks the pushed queue only.
    let queue = app.get("/ui/queues/hooks").await.text;
    assert!(queue.contains(r#"href="/ui/queues/hooks/push""#), "{queue}");
    let other = app.get("/ui/queues/other").await.text;
    assert!(!other.contains("/push\""), "{other}");
    let overview = app.get("/ui").await.text;
    assert!(
        overview.contains(r#"<a class="badge push" href="/ui/queues/hooks/push">push</a>"#),
        "{overview}"
    );
    assert!(!overview.contains("/ui/queues/other/push"), "{overview}");
}

#[tokio::test]
async fn the_push_page_of_a_queue_not_pushed_is_a_404_page() {
    let app = TestApp::start().await;
    put(&app, "plain", "j1").await;
    let page = app.get("/ui/queues/plain/push").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND, "{}", page.text);
    assert!(
        page.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.text.contains("not pushed"), "{}", page.text);
    assert!(!app.get("/ui/queues/plain").await.text.contains("/push"));
    let bad = app.get("/ui/queues/pay%E2%80%AEcod.exe/push").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_push_page_isolates_the_names_it_shows() {
    let app = TestApp::start().await;
    // A worker name and a failure group as another client could leave them.
    pushed(&app, "hooks", "qlessd-push:\u{202e}gw").await;
    put_and_fail(&app, "hooks", "f1", "push-\u{202e}x").await;
    assert_isolated(&app, "/ui/queues/hooks/push").await;
}

#[tokio::test]
async fn the_push_page_needs_a_token_and_a_read_token_sees_it() {
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    pushed(&app, "hooks", "qlessd-push:gw-1").await;
    let anonymous = app.get("/ui/queues/hooks/push").await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert_eq!(anonymous.headers[header::LOCATION], "/ui/login");
    assert!(!anonymous.text.contains("hooks.example.com"));
    let read = with_cookie(&app, Method::GET, "/ui/queues/hooks/push", "reader", "").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert!(read.text.contains("https://hooks.example.com/in/qlessd"));
    let overview = with_cookie(&app, Method::GET, "/ui", "reader", "").await;
    assert!(overview.text.contains(r#"href="/ui/queues/hooks/push""#));
    let access = qlessd::auth::access("GET", "/ui/queues/{queue}/push");
    assert_eq!(
        access,
        Some(qlessd::auth::Access::Needs(qlessd::auth::Scope::Read))
    );
}

/// Pops `jid` from `queue` as `w` (it must be next there), then completes it
/// through the API.
async fn run_and_complete(app: &TestApp, queue: &str, jid: &str) {
    lease(app, queue, jid).await;
    let done = app
        .post(
            &format!("/v1/jobs/{jid}/complete"),
            serde_json::json!({"worker": "w", "queue": queue}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
}

/// Pops `jid` from `queue` as `w` (it must be next there), then fails it for good.
async fn run_and_fail(app: &TestApp, queue: &str, jid: &str) {
    lease(app, queue, jid).await;
    app.qless
        .fail(app.clock.now(), jid, "w", "broken", "it broke", None)
        .await
        .expect("fail");
}

async fn lease(app: &TestApp, queue: &str, jid: &str) {
    let popped = app
        .qless
        .pop(app.clock.now(), queue, "w", 1)
        .await
        .expect("pop");
    let popped: Vec<&str> = popped.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(popped, [jid], "{jid} was not next in {queue}");
}

/// The text of the element with `id` (flat elements only, as [`element`]).
fn text_of<'a>(page: &'a str, id: &str, tag: &str) -> &'a str {
    let part = element(page, id, tag);
    &part[part.find('>').expect("a tag") + 1..]
}

/// A description no page may show as markup, nor let reorder the page.
const HOSTILE: &str = "<script>alert(\"x\")</script> pay\u{202e}cod.exe & more";

#[tokio::test]
async fn a_batch_page_shows_its_counts_progress_callbacks_family_and_jobs() {
    use serde_json::json;
    let app = TestApp::start().await;
    // Priorities so that they pop in this order (they are put at the same time).
    let job = |jid: &str, priority: u32| json!({"queue": "imports", "jid": jid, "klass": "Row", "priority": priority});
    let created = app
        .post(
            "/v1/batches",
            json!({"description": HOSTILE,
                   "jobs": [job("b1", 3), job("b2", 2), job("b3", 1)],
                   "on_success": {"queue": "reports", "jid": "cb-success", "klass": "Report"},
                   "on_death": {"queue": "alerts", "jid": "cb-death", "klass": "Page"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let bid = created.body["bid"].as_str().unwrap().to_owned();
    let child = app
        .post(
            "/v1/batches",
            json!({"description": "the child", "parent": bid,
                   "jobs": [{"queue": "children", "jid": "c1", "klass": "Row"}]}),
        )
        .await;
    assert_eq!(child.status, StatusCode::CREATED, "{}", child.text);
    let child = child.body["bid"].as_str().unwrap().to_owned();
    run_and_complete(&app, "imports", "b1").await;
    run_and_fail(&app, "imports", "b2").await;

    let page = app.get(&format!("/ui/batches/{bid}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let page = page.text;
    for (count, n) in [
        ("total", "3"),
        ("waiting", "1"),
        ("running", "0"),
        ("completed", "1"),
        ("failed", "1"),
        ("canceled", "0"),
    ] {
        assert_eq!(
            text_of(&page, &format!("count-{count}"), "div"),
            n,
            "{count}"
        );
    }
    assert_eq!(text_of(&page, "batch-state", "span"), "open");
    // The bar: one of three completed, one failed, the rest blank; the same in words.
    assert_eq!(
        text_of(&page, "finished-text", "span"),
        "2 of 3 finished (66%)"
    );
    let bar = element(&page, "finished", "svg");
    assert!(
        bar.contains(r#"<rect class="ok" x="0.0" y="0" width="160.0""#),
        "{bar}"
    );
    assert!(
        bar.contains(r#"<rect class="bad" x="160.0" y="0" width="160.0""#),
        "{bar}"
    );
    assert!(bar.contains("<title>1 failed</title>"), "{bar}");
    // on_death has fired (b2 died): its job is linked; on_success waits, unlinked.
    let death = element(&page, "callback-on_death", "tr");
    assert!(
        death.contains(r#"<span class="badge fired">fired</span>"#),
        "{death}"
    );
    assert!(death.contains(r#"href="/ui/jobs/cb-death""#), "{death}");
    assert!(death.contains(r#"href="/ui/queues/alerts""#), "{death}");
    let success = element(&page, "callback-on_success", "tr");
    assert!(success.contains(r#"<span class="badge pending">pending</span>"#));
    assert!(!success.contains("/ui/jobs/"), "{success}");
    assert!(app.get("/ui/jobs/cb-death").await.status == StatusCode::OK);
    // The family, linked both ways.
    let children = element(&page, "children", "dd");
    assert!(children.contains(&format!(r#"href="/ui/batches/{child}""#)));
    assert_eq!(text_of(&page, "parent", "dd"), "—");
    let child_page = app.get(&format!("/ui/batches/{child}")).await.text;
    let parent = element(&child_page, "parent", "dd");
    assert!(
        parent.contains(&format!(r#"href="/ui/batches/{bid}""#)),
        "{parent}"
    );
    // The jobs, each linked with its state.
    let jobs = element(&page, "batch-jobs", "table");
    for (jid, state) in [("b1", "complete"), ("b2", "failed"), ("b3", "waiting")] {
        assert!(
            jobs.contains(&format!(
                r#"<a class="jid" href="/ui/jobs/{jid}"><bdi>{jid}</bdi></a></td><td><span class="badge {state}">{state}</span>"#
            )),
            "{jid}: {jobs}"
        );
    }
    // The description is text, never markup, and isolated.
    let description = element(&page, "description", "dd");
    assert!(
        description.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
        "{description}"
    );
    assert!(!page.contains("<script>alert"));
    assert_isolated(&app, &format!("/ui/batches/{bid}")).await;
    // A job of the batch links to it.
    let job = app.get("/ui/jobs/b3").await.text;
    let link = element(&job, "batch", "dd");
    assert!(
        link.contains(&format!(r#"href="/ui/batches/{bid}""#)),
        "{link}"
    );
    assert!(!job.contains(r#"id="workflow""#));
}

#[tokio::test]
async fn a_batch_page_pages_its_jobs() {
    use serde_json::json;
    let app = TestApp::start().await;
    let jobs: Vec<_> = (0..30)
        .map(|i| json!({"queue": "imports", "jid": format!("p{i:02}"), "klass": "Row"}))
        .collect();
    let created = app.post("/v1/batches", json!({"jobs": jobs})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let bid = created.body["bid"].as_str().unwrap();
    let first = app.get(&format!("/ui/batches/{bid}")).await.text;
    assert_eq!(first.matches(r#"<a class="jid""#).count(), 25);
    assert!(first.contains(r#"href="/ui/jobs/p24""#) && !first.contains("/ui/jobs/p25"));
    assert!(first.contains(&format!(r#"href="/ui/batches/{bid}?offset=25""#)));
    assert!(first.contains("1–25 of 30"));
    assert_eq!(
        text_of(&first, "finished-text", "span"),
        "0 of 30 finished (0%)"
    );
    let second = app.get(&format!("/ui/batches/{bid}?offset=25")).await.text;
    assert_eq!(second.matches(r#"<a class="jid""#).count(), 5);
    assert!(second.contains(r#"href="/ui/jobs/p29""#) && second.contains("26–30 of 30"));
    assert!(second.contains(&format!(r#"href="/ui/batches/{bid}?offset=0""#)));
    assert!(element(&second, "no-callbacks", "p").contains("No callbacks."));
}

#[tokio::test]
async fn an_unknown_batch_or_workflow_is_a_404_page_and_a_bad_id_a_400() {
    let app = TestApp::start().await;
    for uri in ["/ui/batches/nope", "/ui/workflows/nope"] {
        let page = app.get(uri).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(
            page.headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        assert!(page.text.contains("Error 404"), "{}", page.text);
    }
    for uri in ["/ui/batches/a%E2%80%AEb", "/ui/workflows/a%7Bb%7D"] {
        assert_eq!(app.get(uri).await.status, StatusCode::BAD_REQUEST, "{uri}");
    }
}

/// Creates the workflow `fetch -> resize -> <b>notify</b>` with `fetch -> audit`
/// beside it; answers its wid and the tasks' jids by name.
async fn thumbnails(app: &TestApp) -> (String, serde_json::Value) {
    use serde_json::json;
    let created = app
        .post(
            "/v1/workflows",
            json!({"name": "thumb<i>nails\"", "tasks": {
                "fetch": {"queue": "io", "klass": "Fetch"},
                "resize": {"queue": "cpu", "klass": "Resize", "after": ["fetch"]},
                "<b>notify</b>": {"queue": "io", "klass": "Notify", "after": ["resize"]},
                "audit": {"queue": "audit", "klass": "Audit", "after": ["fetch"],
                          "on_parent_failure": "ignore"}}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    (
        created.body["wid"].as_str().unwrap().to_owned(),
        created.body["jids"].clone(),
    )
}

/// The SVG box of task `name` in a workflow page: its link and group.
fn task_box<'a>(page: &'a str, name: &str) -> &'a str {
    let at = page
        .find(&format!(r#"data-task="{name}""#))
        .unwrap_or_else(|| panic!("no box for {name}"));
    let start = page[..at].rfind("<a ").unwrap();
    &page[start..at + page[at..].find("</a>").unwrap()]
}

#[tokio::test]
async fn a_workflow_page_draws_its_graph_coloured_by_state_and_lists_its_tasks() {
    let app = TestApp::start().await;
    let (wid, jids) = thumbnails(&app).await;
    let jid = |name: &str| jids[name].as_str().unwrap().to_owned();
    run_and_complete(&app, "io", &jid("fetch")).await;
    run_and_fail(&app, "cpu", &jid("resize")).await;

    let page = app.get(&format!("/ui/workflows/{wid}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let page = page.text;
    let svg = element(&page, "workflow-graph", "svg");
    // Each task a box linked to its job, coloured by its state, in its layer.
    for (name, state, layer) in [
        ("fetch", "complete", 0),
        ("resize", "failed", 1),
        ("audit", "waiting", 1),
        ("&lt;b&gt;notify&lt;/b&gt;", "canceled", 2),
    ] {
        let task = task_box(svg, name);
        let jid = jid(&name.replace("&lt;", "<").replace("&gt;", ">"));
        assert!(
            task.starts_with(&format!(r#"<a href="/ui/jobs/{jid}" class="task-link""#)),
            "{task}"
        );
        assert!(
            task.contains(&format!(r#"<g class="task {state}" data-layer="{layer}">"#)),
            "{task}"
        );
    }
    // Parents stand left of their children.
    let x = |name: &str| -> f64 {
        let task = task_box(svg, name);
        let at = task.find(r#"<rect x=""#).unwrap() + 9;
        task[at..at + task[at..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    assert!(x("fetch") < x("resize") && x("resize") < x("&lt;b&gt;notify&lt;/b&gt;"));
    assert_eq!(x("resize"), x("audit"));
    // An edge (with its arrow) per `after`, and a legend naming every state.
    assert_eq!(svg.matches(r#"marker-end="url(#arrow)""#).count(), 3);
    assert!(svg.contains("<title>\u{2068}fetch\u{2069} → \u{2068}audit\u{2069}</title>"));
    let legend = &svg[svg.find(r#"<g class="legend">"#).unwrap()..];
    for state in [
        "waiting", "depends", "running", "complete", "failed", "canceled",
    ] {
        assert!(
            legend.contains(&format!(r#"<g class="task {state}"><rect"#)),
            "{state}"
        );
    }
    // The colours are the stylesheet's, the badges' and the charts' own.
    let css = app.get("/ui/assets/style.css").await.text;
    for rule in [
        ".graph .task.complete rect { fill:var(--ok);",
        ".graph .task.failed rect { fill:var(--badge-bad); stroke:var(--bad);",
        ".graph .task.running rect { fill:var(--badge-ok); stroke:var(--ok); }",
        ".badge.failed, .badge.paused { background:var(--badge-bad); color:var(--bad); }",
        ".badge.running { background:var(--badge-ok); color:var(--ok); }",
    ] {
        assert!(css.contains(rule), "{rule}");
    }
    // Counts and progress.
    for (state, n) in [
        ("complete", "1"),
        ("failed", "1"),
        ("canceled", "1"),
        ("waiting", "1"),
    ] {
        assert_eq!(
            text_of(&page, &format!("count-{state}"), "div"),
            n,
            "{state}"
        );
    }
    assert_eq!(
        text_of(&page, "finished-text", "span"),
        "3 of 4 finished (75%)"
    );
    // The table: name linked, state, policy, after, queue.
    let table = element(&page, "tasks", "table");
    assert!(table.contains(&format!(
        r#"<a class="task" href="/ui/jobs/{}"><bdi>audit</bdi></a></td><td><span class="badge waiting">waiting</span></td><td>ignore</td><td><bdi>fetch</bdi></td><td><a href="/ui/queues/audit"><bdi>audit</bdi></a></td>"#,
        jid("audit")
    )), "{table}");
    // Names are text, never markup.
    assert!(!page.contains("<b>notify") && !page.contains("<i>nails"));
    assert!(page.contains("<bdi>&lt;b&gt;notify&lt;/b&gt;</bdi>"));
    assert_eq!(
        text_of(&page, "workflow-name", "dd"),
        "<bdi>thumb&lt;i&gt;nails&quot;</bdi>"
    );
    // No action on the page (and without tokens, no logging out either).
    assert_eq!(page.matches(r#"method="post""#).count(), 0);

    // A task's job page links its workflow and its parents.
    let resize = app.get(&format!("/ui/jobs/{}", jid("resize"))).await.text;
    let link = element(&resize, "workflow", "dd");
    assert!(
        link.contains(&format!(r#"href="/ui/workflows/{wid}""#)),
        "{link}"
    );
    let parents = element(&resize, "parents", "dd");
    assert!(
        parents.contains(&format!(
            r#"<a href="/ui/jobs/{}"><bdi>fetch</bdi></a> <span class="badge complete">complete</span>"#,
            jid("fetch")
        )),
        "{parents}"
    );
    let fetch = app.get(&format!("/ui/jobs/{}", jid("fetch"))).await.text;
    assert!(element(&fetch, "workflow", "dd").contains(&format!("/ui/workflows/{wid}")));
    assert!(!fetch.contains(r#"id="parents""#) && !fetch.contains(r#"id="batch""#));
}

/// `count` tasks named `t0000`...: task i waits for task `parent(i)` (none for the
/// first).
fn tasks(count: usize, parent: impl Fn(usize) -> usize) -> serde_json::Value {
    let mut tasks = serde_json::Map::new();
    for i in 0..count {
        let after: Vec<String> = if i == 0 {
            vec![]
        } else {
            vec![format!("t{:04}", parent(i))]
        };
        tasks.insert(
            format!("t{i:04}"),
            serde_json::json!({"queue": "q", "klass": "K", "after": after}),
        );
    }
    serde_json::Value::Object(tasks)
}

#[tokio::test]
async fn a_workflow_too_large_to_draw_is_a_table_with_a_note() {
    use serde_json::json;
    let app = TestApp::start().await;
    // 200 tasks in 20 chains of 10 under one root: drawn.
    let drawn = app
        .post(
            "/v1/workflows",
            json!({"tasks": tasks(201, |i| i.saturating_sub(20))}),
        )
        .await;
    assert_eq!(drawn.status, StatusCode::CREATED, "{}", drawn.text);
    let page = app
        .get(&format!(
            "/ui/workflows/{}",
            drawn.body["wid"].as_str().unwrap()
        ))
        .await
        .text;
    let svg = element(&page, "workflow-graph", "svg");
    assert_eq!(svg.matches(r#"class="task-link""#).count(), 201);
    assert!(
        svg.contains(r#"aria-label="201 tasks in 11 layers""#),
        "{}",
        &svg[..300]
    );
    assert!(!page.contains(r#"id="graph-note""#));
    // 1,000 tasks as a binary tree (10 layers, 489 in the widest): the table alone.
    let large = app
        .post(
            "/v1/workflows",
            json!({"tasks": tasks(1000, |i| (i - 1) / 2)}),
        )
        .await;
    assert_eq!(large.status, StatusCode::CREATED, "{}", large.text);
    let started = std::time::Instant::now();
    let page = app
        .get(&format!(
            "/ui/workflows/{}",
            large.body["wid"].as_str().unwrap()
        ))
        .await;
    let took = started.elapsed();
    assert_eq!(page.status, StatusCode::OK);
    let page = page.text;
    assert!(!page.contains("<svg class=\"graph\""));
    let note = element(&page, "graph-note", "p");
    assert!(
        note.contains("1000 tasks, 10 layers, up to 489 tasks in a layer, 999 edges"),
        "{note}"
    );
    assert_eq!(page.matches(r#"<a class="task""#).count(), 1000);
    eprintln!(
        "a 1,000-task workflow page: {} bytes in {} ms",
        page.len(),
        took.as_millis()
    );
}

#[tokio::test]
async fn a_read_token_sees_the_batch_and_workflow_pages_without_actions() {
    use qlessd::core::PutArgs;
    use qlessd::core::batches::{NewBatch, NewTask, NewWorkflow};
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    let put = |jid: &str| PutArgs {
        queue: "imports".into(),
        jid: jid.into(),
        klass: "Row".into(),
        data: "{}".into(),
        ..Default::default()
    };
    let now = app.clock.now();
    let batch = NewBatch {
        bid: "nightly".into(),
        description: "nightly import".into(),
        parent: None,
        jobs: vec![put("n1")],
        callbacks: vec![],
    };
    app.qless.batch_open(now, &batch).await.expect("batch.open");
    let workflow = NewWorkflow {
        wid: "thumbs".into(),
        name: "thumbnails".into(),
        tasks: vec![NewTask {
            name: "fetch".into(),
            put: put("f1"),
            after: vec![],
            on_parent_failure: Default::default(),
        }],
    };
    app.qless
        .workflow_open(now, &workflow)
        .await
        .expect("workflow.open");
    for uri in ["/ui/batches/nightly", "/ui/workflows/thumbs"] {
        let anonymous = app.get(uri).await;
        assert_eq!(anonymous.status, StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(anonymous.headers[header::LOCATION], "/ui/login");
        let read = with_cookie(&app, Method::GET, uri, "reader", "").await;
        assert_eq!(read.status, StatusCode::OK, "{uri}: {}", read.text);
        assert!(read.text.contains(r#"href="/ui/jobs/"#), "{uri}");
        // Its only form is the navigation's logout.
        assert_eq!(read.text.matches("<form").count(), 2, "{uri}");
        assert_eq!(read.text.matches(r#"method="post""#).count(), 1, "{uri}");
        assert!(read.text.contains(r#"action="/ui/logout""#));
    }
}

/// The titles of the slots of the chart `class` in `page` (one per minute, oldest
/// first).
fn slot_titles(page: &str, class: &str) -> Vec<String> {
    let start = page
        .find(&format!(r#"<svg class="chart {class}""#))
        .unwrap_or_else(|| panic!("no {class} chart in {page}"));
    let chart = &page[start..start + page[start..].find("</svg>").expect("a closed chart")];
    chart
        .split("<title>")
        .skip(1)
        .map(|title| title[..title.find("</title>").expect("a closed title")].to_owned())
        .collect()
}

#[tokio::test]
async fn a_queue_page_charts_its_last_hour_minute_by_minute() {
    use qlessd::core::CompleteArgs;
    let app = TestApp::start().await;
    // The minute before: three jobs put, popped 5 s later.
    for jid in ["a", "b", "c"] {
        put(&app, "emails", jid).await;
    }
    app.clock.advance(5.0);
    let popped = app.qless.pop(app.clock.now(), "emails", "w1", 3).await;
    assert_eq!(popped.unwrap().len(), 3);
    // This minute: one completed, one failed, one more put.
    app.clock.advance(60.0);
    let args = CompleteArgs {
        jid: "a".into(),
        worker: "w1".into(),
        queue: "emails".into(),
        data: "{}".into(),
        ..Default::default()
    };
    app.qless.complete(app.clock.now(), args).await.unwrap();
    app.qless
        .fail(app.clock.now(), "b", "w1", "smtp", "refused", None)
        .await
        .unwrap();
    put(&app, "emails", "d").await;

    let page = app.get("/ui/queues/emails").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let jobs = slot_titles(&page.text, "jobs-per-minute");
    assert_eq!(jobs.len(), 60, "{jobs:?}");
    assert_eq!(jobs[58], "1 min ago: 3 put, 0 completed, 0 failed");
    assert_eq!(jobs[59], "0 min ago: 1 put, 1 completed, 1 failed");
    assert_eq!(jobs[0], "59 min ago: 0 put, 0 completed, 0 failed");
    let waits = slot_titles(&page.text, "waits-per-minute");
    assert_eq!(waits.len(), 60);
    assert_eq!(
        waits[58],
        "1 min ago: median 5s, 95th percentile 5s (3 popped)"
    );
    assert_eq!(waits[59], "0 min ago: nothing popped");
    let totals = element(&page.text, "hour-totals", "p");
    for shown in ["4 put", "1 completed", "1 failed"] {
        assert!(totals.contains(shown), "{totals}");
    }
    // A queue without activity still shows its (empty) hour.
    let quiet = app.get("/ui/queues/quiet").await;
    assert_eq!(quiet.status, StatusCode::OK);
    let titles = slot_titles(&quiet.text, "waits-per-minute");
    assert!(titles.iter().all(|t| t.ends_with("nothing popped")));
}

#[tokio::test]
async fn failure_groups_show_their_first_and_last_failure_and_commonest_message() {
    let app = TestApp::start().await;
    for (jid, message) in [("a", "refused"), ("b", "timed out"), ("c", "refused")] {
        app.clock.advance(60.0);
        put(&app, "emails", jid).await;
        app.qless
            .pop(app.clock.now(), "emails", "w1", 1)
            .await
            .unwrap();
        app.qless
            .fail(app.clock.now(), jid, "w1", "smtp", message, None)
            .await
            .unwrap();
    }
    // a failed at START + 60, c at START + 180.
    let listing = app.get("/ui/failures").await.text;
    let groups = element(&listing, "failure-groups", "table");
    assert!(groups.contains("2023-11-14 22:14:20Z"), "{groups}");
    assert!(groups.contains("2023-11-14 22:16:20Z"), "{groups}");
    assert!(
        groups.contains("refused <span class=\"muted\">(2 of the latest 3)</span>"),
        "{groups}"
    );
    let page = app.get("/ui/failures/smtp").await.text;
    assert!(
        element(&page, "first-failure", "dd").contains("2023-11-14 22:14:20Z"),
        "{page}"
    );
    assert!(
        element(&page, "last-failure", "dd").contains("2023-11-14 22:16:20Z"),
        "{page}"
    );
    assert!(element(&page, "common-message", "dd").contains("refused"));
    // The API tells the same.
    let api = app.get("/v1/failures/smtp").await;
    assert_eq!(api.status, StatusCode::OK);
    assert_eq!(api.body["total"], 3);
    assert_eq!(api.body["first"], 1_700_000_060.0);
    assert_eq!(api.body["last"], 1_700_000_180.0);
    assert_eq!(api.body["message"], "refused");
    assert_eq!(
        (&api.body["message_count"], &api.body["sampled"]),
        (&2.into(), &3.into())
    );
}

#[tokio::test]
async fn the_failures_page_is_paged() {
    let app = TestApp::start().await;
    for i in 0..27 {
        put_and_fail(&app, "emails", &format!("j{i}"), &format!("group-{i:02}")).await;
    }
    let first = app.get("/ui/failures").await.text;
    let rows = element(&first, "failure-groups", "table")
        .matches("<tr>")
        .count();
    assert_eq!(rows, 1 + 25, "{first}");
    assert!(
        first.contains(r#"href="/ui/failures?offset=25""#),
        "{first}"
    );
    let second = app.get("/ui/failures?offset=25").await.text;
    let table = element(&second, "failure-groups", "table");
    assert_eq!(table.matches("<tr>").count(), 1 + 2, "{second}");
    assert!(table.contains("group-25") && table.contains("group-26"));
}

#[tokio::test]
async fn log_out_is_offered_only_when_tokens_are_in_use() {
    let open = TestApp::start().await;
    let page = open.get("/ui").await.text;
    assert!(!page.contains("/ui/logout"), "{page}");
    assert!(!page.contains("Log out"));
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    let login = app.get("/ui/login").await.text;
    assert!(!login.contains("Log out"), "nobody is logged in: {login}");
    for token in ["reader", "ops"] {
        let page = with_cookie(&app, Method::GET, "/ui", token, "").await.text;
        assert!(page.contains(r#"action="/ui/logout""#), "{token}: {page}");
        assert!(page.contains("Log out"));
    }
}

#[tokio::test]
async fn the_stylesheet_follows_the_browsers_dark_preference() {
    let app = TestApp::start().await;
    let css = app.get("/ui/assets/style.css").await.text;
    assert!(css.contains("color-scheme:light dark"), "{css}");
    let dark = &css[css
        .find("@media (prefers-color-scheme: dark)")
        .expect("a dark scheme")..];
    for variable in ["--bg:", "--fg:", "--card:", "--line:", "--code-bg:"] {
        assert!(
            dark.contains(variable),
            "dark mode leaves {variable} as it is"
        );
    }
}

/// The `action` of every POST form in `page`.
fn post_actions(page: &str) -> Vec<String> {
    page.split("<form")
        .skip(1)
        .map(|rest| &rest[..rest.find('>').expect("a closed form tag")])
        .filter(|tag| tag.contains(r#"method="post""#))
        .map(|tag| {
            let at = tag.find(r#"action=""#).expect("an action") + 8;
            tag[at..at + tag[at..].find('"').expect("a closed action")].to_owned()
        })
        .collect()
}

/// Every key with its `DUMP` serialization.
fn dataset(app: &TestApp) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut conn = app.redis.client().get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(&mut conn).unwrap();
            (key, dump)
        })
        .collect()
}

#[tokio::test]
async fn a_read_token_sees_no_action_anywhere_and_every_action_route_refuses_it() {
    use qlessd::core::RecurArgs;
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    // Something for every form the dashboard has: a waiting job with a tag, a failed
    // job, a paused queue, a recurring template, a stored option, a pushed queue.
    put(&app, "emails", "j1").await;
    put_and_fail(&app, "emails", "j2", "smtp").await;
    put(&app, "held", "h1").await;
    let now = app.clock.now();
    app.qless.pause(now, &["held".to_owned()]).await.unwrap();
    let template = RecurArgs {
        queue: "emails".into(),
        jid: "nightly".into(),
        klass: "Report".into(),
        data: "{}".into(),
        interval: 3600.0,
        offset: 60.0,
        ..Default::default()
    };
    app.qless.recur(now, template).await.unwrap();
    app.qless.config_set(now, "heartbeat", "90").await.unwrap();
    pushed(&app, "hooks", "qlessd-push:gw-1").await;
    let pages = [
        "/ui",
        "/ui/queues/emails",
        "/ui/queues/emails?state=recurring",
        "/ui/queues/held",
        "/ui/queues/hooks/push",
        "/ui/jobs/j1",
        "/ui/jobs/j2",
        "/ui/failures",
        "/ui/failures/smtp",
        "/ui/workers",
        "/ui/workers/w1",
        "/ui/tags",
        "/ui/tags?tag=signup",
        "/ui/tracked",
        "/ui/recurring",
        "/ui/recurring/nightly",
        "/ui/throttles",
        "/ui/config",
        "/ui/search?group=smtp",
    ];
    // What an admin is offered: every action route of the dashboard.
    let mut offered = std::collections::BTreeSet::new();
    for page in pages {
        let admin = with_cookie(&app, Method::GET, page, "ops", "").await;
        assert_eq!(admin.status, StatusCode::OK, "{page}: {}", admin.text);
        offered.extend(post_actions(&admin.text));
    }
    let routes: std::collections::BTreeSet<&str> = offered
        .iter()
        .map(|action| qlessd::auth::route_of(&Method::POST, action).route)
        .collect();
    let actions: std::collections::BTreeSet<&str> = qlessd::auth::ROUTES
        .iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/ui"))
        .filter(|r| r.access == qlessd::auth::Access::Needs(qlessd::auth::Scope::Admin))
        .map(|r| r.path)
        .collect();
    let mut expected = actions.clone();
    expected.insert("/ui/logout");
    assert_eq!(
        routes, expected,
        "the pages offer other routes than the admin ones"
    );

    // A reader is offered nothing but logging out, on every page.
    let mut reader_token = String::new();
    for page in pages {
        let read = with_cookie(&app, Method::GET, page, "reader", "").await;
        assert_eq!(read.status, StatusCode::OK, "{page}: {}", read.text);
        assert_eq!(
            post_actions(&read.text),
            ["/ui/logout"],
            "{page}: {}",
            read.text
        );
        for label in [
            ">Retry<",
            ">Cancel",
            ">Pause<",
            ">Unpause<",
            ">Unfail",
            ">Delete<",
            ">Save<",
            ">Set<",
            ">Move<",
            ">Track<",
            ">×<",
        ] {
            assert!(
                !read.text.contains(label),
                "{page} offers {label} to a reader"
            );
        }
        reader_token = token_in(&read.text);
    }
    // And every action the admin was offered is refused to the reader's session, with
    // its own form token, changing nothing.
    let before = dataset(&app);
    for action in offered.iter().filter(|a| *a != "/ui/logout") {
        let form = format!(
            "csrf={reader_token}&scope=all&queue=other&priority=1&tag=x&option=heartbeat&value=1"
        );
        let refused = with_cookie(&app, Method::POST, action, "reader", &form).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{action}: {}",
            refused.text
        );
    }
    assert_eq!(dataset(&app), before, "a refused action changed something");
    // (The same form from the admin's session does act: the refusal is the scope's.)
    let admin = with_cookie(&app, Method::GET, "/ui/queues/held", "ops", "").await;
    let acted = with_cookie(
        &app,
        Method::POST,
        "/ui/queues/held/unpause",
        "ops",
        &format!("csrf={}", token_in(&admin.text)),
    )
    .await;
    assert_eq!(acted.status, StatusCode::SEE_OTHER, "{}", acted.text);
}

/// Puts a job of class `klass` with `data` into `queue`, pops it as `w1` and fails it
/// into `group` with `message`.
async fn fail_with(app: &TestApp, queue: &str, jid: &str, klass: &str, data: &str, message: &str) {
    app.qless
        .put(
            app.clock.now(),
            qlessd::core::PutArgs {
                queue: queue.into(),
                jid: jid.into(),
                klass: klass.into(),
                data: data.into(),
                ..Default::default()
            },
        )
        .await
        .expect("put");
    let popped = app
        .qless
        .pop(app.clock.now(), queue, "w1", 1)
        .await
        .unwrap();
    assert_eq!(popped.len(), 1, "{jid} was not popped");
    app.qless
        .fail(app.clock.now(), jid, "w1", "smtp", message, None)
        .await
        .expect("fail");
}

/// Three failed jobs in group `smtp`: `u42a` and `u42b` for user 42, `u7` for user 7.
async fn three_failed(app: &TestApp) {
    fail_with(
        app,
        "emails",
        "u42a",
        "Mailer",
        r#"{"user":{"id":42},"n":1}"#,
        "mailbox full",
    )
    .await;
    fail_with(
        app,
        "emails",
        "u7",
        "Mailer",
        r#"{"user":{"id":7},"n":2}"#,
        "mailbox full",
    )
    .await;
    fail_with(
        app,
        "emails",
        "u42b",
        "Mailer",
        r#"{"user":{"id":42},"n":3}"#,
        "refused",
    )
    .await;
}

/// The jids of the results on a search page, in order.
fn result_jids(page: &str) -> Vec<String> {
    page.split(r#"class="card result" data-jid=""#)
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// The `href` of the element with `id` (entities undone).
fn href_of(page: &str, id: &str) -> Option<String> {
    let at = page.find(&format!(r#"id="{id}""#))?;
    let tag = &page[page[..at].rfind('<')?..];
    let start = tag.find(r#"href=""#)? + 6;
    let end = start + tag[start..].find('"')?;
    Some(tag[start..end].replace("&amp;", "&"))
}

#[tokio::test]
async fn the_search_page_fills_its_filters_from_the_url_and_shows_each_match_in_full() {
    let app = TestApp::start().await;
    three_failed(&app).await;
    let data = "%7B%22user.id%22%3A42%7D";
    let page = app
        .get(&format!("/ui/search?group=smtp&state=failed&data={data}"))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let text = &page.text;
    // The form shows the search's parameters.
    assert!(text.contains(r#"name="group" value="smtp""#), "{text}");
    assert!(text.contains(r#"<option value="failed" selected>failed</option>"#));
    assert!(text.contains(
        r#"name="data" placeholder="{&quot;user.id&quot;: 42}" value="{&quot;user.id&quot;:42}""#
    ));
    // The matches, each linked, with state, queue, class, failure, data and history.
    assert_eq!(result_jids(text), ["u42a", "u42b"]);
    assert!(text.contains(r#"href="/ui/jobs/u42a""#));
    let card = &text[text.find(r#"data-jid="u42b""#).unwrap()..];
    let card = &card[..card.find(r#"</details></div>"#).unwrap()];
    assert!(
        card.contains(r#"<span class="badge failed">failed</span>"#),
        "{card}"
    );
    assert!(card.contains(r#"href="/ui/queues/emails""#) && card.contains("Mailer"));
    assert!(
        card.contains(r#"<span class="message">refused</span>"#),
        "{card}"
    );
    assert!(
        card.contains("<details class=\"data\"><summary>Data</summary><pre>{\n  &quot;n&quot;: 3,"),
        "the data is pretty-printed and folded: {card}"
    );
    assert!(card.contains("<details class=\"history\"><summary>History (3)</summary>"));
    assert!(card.contains("<strong>failed</strong>") && card.contains("<strong>put</strong>"));
    // Everything was looked at: no next page. The form's field names are the API's.
    assert!(!text.contains(r#"id="next-page""#));
    for field in [
        "queue", "state", "klass", "tag", "worker", "group", "since", "until", "data", "text",
        "limit",
    ] {
        assert!(
            text.contains(&format!(r#"name="{field}""#)),
            "no {field} field"
        );
    }
    let api = app
        .get(&format!("/v1/search?group=smtp&state=failed&data={data}"))
        .await;
    assert_eq!(api.body["jobs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn the_search_page_pages_by_the_apis_cursor() {
    let app = TestApp::start().await;
    three_failed(&app).await;
    let first = app.get("/ui/search?group=smtp&limit=2").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(result_jids(&first.text), ["u42a", "u7"]);
    assert!(!first.text.contains(r#"id="first-page""#));
    let next = href_of(&first.text, "next-page").expect("a next page");
    assert!(
        next.starts_with("/ui/search?group=smtp&limit=2&cursor="),
        "{next}"
    );
    let second = app.get(&next).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(result_jids(&second.text), ["u42b"]);
    assert!(href_of(&second.text, "next-page").is_none());
    assert_eq!(
        href_of(&second.text, "first-page").as_deref(),
        Some("/ui/search?group=smtp&limit=2")
    );
    // The page's address is the API's: the same query answers the same jobs.
    let api = app.get(&next.replacen("/ui/search", "/v1/search", 1)).await;
    assert_eq!(api.status.as_u16(), 200, "{}", api.text);
    assert_eq!(api.body["jobs"][0]["jid"], "u42b");
}

#[tokio::test]
async fn a_bad_search_shows_the_apis_message_and_the_box_still_jumps() {
    let app = TestApp::start().await;
    put(&app, "emails", "j1").await;
    for (query, message) in [
        ("klass=Mailer", "the filter has no index to search from"),
        ("queue=emails&state=lost", "state must be one of"),
        ("queue=emails&data=%5B1%5D", "data must be a JSON object"),
        ("queue=emails&limit=501", "limit must be between 1 and 500"),
        (
            "queue=emails&cursor=forged",
            "cursor is not a cursor this server gave",
        ),
        ("queue=emails&colour=red", "unknown query parameter"),
    ] {
        let page = app.get(&format!("/ui/search?{query}")).await;
        assert_eq!(
            page.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            page.text
        );
        assert!(page.text.contains(r#"id="search-error""#), "{query}");
        assert!(page.text.contains(message), "{query}: {}", page.text);
        assert!(
            page.text.contains(r#"id="search-form""#),
            "{query}: the form is kept"
        );
    }
    let kept = app.get("/ui/search?klass=Mailer").await.text;
    assert!(kept.contains(r#"name="klass" value="Mailer""#));
    // Empty fields (as the form sends them) leave the address.
    let sent = app.get("/ui/search?queue=emails&state=&klass=&data=").await;
    assert_eq!(sent.status, StatusCode::SEE_OTHER);
    assert_eq!(sent.headers[header::LOCATION], "/ui/search?queue=emails");
    let empty = app.get("/ui/search").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.text.contains(r#"id="search-form""#));
    // The frame's box: a jid opens its job, anything else its tag.
    let jid = app.get("/ui/search?q=j1").await;
    assert_eq!(jid.headers[header::LOCATION], "/ui/jobs/j1");
    let tag = app.get("/ui/search?q=signup").await;
    assert_eq!(tag.headers[header::LOCATION], "/ui/tags?tag=signup");
}

#[tokio::test]
async fn the_search_page_escapes_what_jobs_and_the_url_hold() {
    let app = TestApp::start().await;
    fail_with(
        &app,
        "emails",
        "evil",
        "<script>alert('klass')</script>",
        r#"{"x":"</pre></details><script>alert('data')</script>"}"#,
        "<img src=x onerror=alert('message')>",
    )
    .await;
    let page = app
        .get("/ui/search?group=smtp&text=%22%3E%3Cscript%3Ealert('url')%3C%2Fscript%3E")
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(!page.text.contains("<script>alert") && !page.text.contains("<img"));
    assert!(
        page.text
            .contains(r#"value="&quot;&gt;&lt;script&gt;alert('url')&lt;/script&gt;""#)
    );
    let page = app.get("/ui/search?group=smtp").await.text;
    assert_eq!(result_jids(&page), ["evil"]);
    assert!(
        !page.contains("<script>alert") && !page.contains("<img"),
        "{page}"
    );
    assert!(page.contains("&lt;script&gt;alert('klass')&lt;/script&gt;"));
    assert!(page.contains("&lt;/pre&gt;&lt;/details&gt;&lt;script&gt;alert('data')"));
    assert!(page.contains("&lt;img src=x onerror=alert('message')&gt;"));
}

/// The form body of the POST form to `action` in `page`: its hidden fields, then
/// `extra`.
fn hidden_form(page: &str, action: &str, extra: &[(&str, &str)]) -> String {
    let at = page
        .find(&format!(r#"method="post" action="{action}""#))
        .unwrap_or_else(|| panic!("no form to {action}: {page}"));
    let form = &page[at..at + page[at..].find("</form>").unwrap()];
    let unescape = |v: &str| {
        v.replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    };
    let mut fields: Vec<(String, String)> = form
        .split(r#"<input type="hidden" name=""#)
        .skip(1)
        .map(|rest| {
            let name = &rest[..rest.find('"').unwrap()];
            let at = rest.find(r#"value=""#).unwrap() + 7;
            let value = &rest[at..at + rest[at..].find('"').unwrap()];
            (name.to_owned(), unescape(value))
        })
        .collect();
    fields.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    serde_urlencoded::to_string(&fields).unwrap()
}

async fn state_of(app: &TestApp, jid: &str) -> (String, String) {
    let job = app.qless.get(app.clock.now(), jid).await.unwrap().unwrap();
    (job.state.as_str().to_owned(), job.queue)
}

#[tokio::test]
async fn apply_to_all_matching_confirms_with_a_dry_run_count_then_acts() {
    let app = TestApp::start().await;
    three_failed(&app).await;
    let search = app
        .get("/ui/search?group=smtp&data=%7B%22user.id%22%3A42%7D")
        .await
        .text;
    assert!(
        search.contains(r#"<div id="bulk"><h2>Apply to all 2 matching</h2>"#),
        "{search}"
    );
    // The search's form asks for confirmation, with the dry run's count; nothing moves.
    let confirm = post_form(
        &app,
        "/ui/search/retry",
        &hidden_form(&search, "/ui/search/retry", &[]),
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.text);
    assert!(
        confirm.text.contains(r#"<span id="dry-matched">2</span>"#),
        "{}",
        confirm.text
    );
    assert!(confirm.text.contains(r#"<span id="dry-changed">2</span>"#));
    assert!(!confirm.text.contains("At least"));
    assert!(confirm.text.contains(">Retry all 2 matching</button>"));
    assert_eq!(state_of(&app, "u42a").await.0, "failed");
    // Confirmed, it acts on the matches only.
    let done = post_form(
        &app,
        "/ui/search/retry",
        &hidden_form(&confirm.text, "/ui/search/retry", &[]),
    )
    .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert!(
        done.text.contains(r#"<dd id="matched">2</dd>"#),
        "{}",
        done.text
    );
    assert!(done.text.contains(r#"<dd id="changed">2</dd>"#));
    assert!(done.text.contains(r#"<dd id="skipped">0</dd>"#));
    assert!(done.text.contains(r#"id="bulk-done""#));
    for jid in ["u42a", "u42b"] {
        assert_eq!(
            state_of(&app, jid).await,
            ("waiting".into(), "emails".into())
        );
    }
    assert_eq!(state_of(&app, "u7").await.0, "failed");

    // An action's argument goes with it: move, then tag.
    let token = token_in(&search);
    let moved = post_form(
        &app,
        "/ui/search/move",
        &format!("csrf={token}&filter=group%3Dsmtp&queue=archive&step=run"),
    )
    .await;
    assert!(
        moved.text.contains(r#"<dd id="changed">1</dd>"#),
        "{}",
        moved.text
    );
    assert_eq!(
        state_of(&app, "u7").await,
        ("waiting".into(), "archive".into())
    );
    let tagged = post_form(
        &app,
        "/ui/search/tag",
        &format!("csrf={token}&filter=queue%3Darchive&tags=vip%2C+later&step=run"),
    )
    .await;
    assert!(
        tagged.text.contains(r#"<dd id="changed">1</dd>"#),
        "{}",
        tagged.text
    );
    let job = app.qless.get(app.clock.now(), "u7").await.unwrap().unwrap();
    assert_eq!(job.tags, ["vip", "later"]);
    // A missing argument or a bad filter is the API's 400, and changes nothing.
    let before = dataset(&app);
    for (action, form) in [
        ("move", "filter=group%3Dsmtp&step=run"),
        ("priority", "filter=queue%3Darchive&priority=high&step=run"),
        ("retry", "filter=klass%3DMailer&step=run"),
        ("retry", "filter=queue%3Darchive&queue=other&step=run"),
    ] {
        let refused = post_form(
            &app,
            &format!("/ui/search/{action}"),
            &format!("csrf={token}&{form}"),
        )
        .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{action} {form}: {}",
            refused.text
        );
    }
    let unknown = post_form(
        &app,
        "/ui/search/explode",
        &format!("csrf={token}&filter=queue%3Darchive"),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(dataset(&app), before);
}

#[tokio::test]
async fn a_long_bulk_action_stops_after_its_chunks_and_continues_from_its_cursor() {
    // One job looked at per chunk: 25 failed jobs take three requests of 10 chunks.
    let app = TestApp::start_configured(None, |s| s.search_scan_limit = 1).await;
    for n in 0..25 {
        put_and_fail(&app, "emails", &format!("j{n:02}"), "smtp").await;
    }
    let search = app.get("/ui/search?group=smtp").await.text;
    let confirm = post_form(
        &app,
        "/ui/search/unfail",
        &hidden_form(&search, "/ui/search/unfail", &[]),
    )
    .await;
    assert!(
        confirm
            .text
            .contains(r#"At least <span id="dry-matched">20</span>"#),
        "{}",
        confirm.text
    );
    assert!(
        confirm
            .text
            .contains(">Unfail all (at least) 20 matching</button>")
    );
    let mut page = post_form(
        &app,
        "/ui/search/unfail",
        &hidden_form(&confirm.text, "/ui/search/unfail", &[]),
    )
    .await;
    let mut changed = Vec::new();
    for _ in 0..5 {
        let text = &page.text;
        assert_eq!(page.status, StatusCode::OK, "{text}");
        let at = text.find(r#"<dd id="changed">"#).unwrap() + 17;
        changed.push(
            text[at..at + text[at..].find('<').unwrap()]
                .parse::<u64>()
                .unwrap(),
        );
        if text.contains(r#"id="bulk-done""#) {
            break;
        }
        assert!(text.contains(r#"id="bulk-more""#));
        let body = hidden_form(text, "/ui/search/unfail", &[]);
        page = post_form(&app, "/ui/search/unfail", &body).await;
    }
    assert_eq!(changed, [10, 20, 25], "the counts add up over the requests");
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_bulk_action_without_the_form_token_is_refused_and_changes_nothing() {
    let app = TestApp::start().await;
    three_failed(&app).await;
    let before = dataset(&app);
    for form in [
        "filter=group%3Dsmtp&step=run",
        "csrf=guess&filter=group%3Dsmtp&step=run",
    ] {
        let refused = post_form(&app, "/ui/search/retry", form).await;
        assert!(
            refused.status.is_client_error(),
            "{form}: {}",
            refused.status
        );
        assert!(refused.text.contains("form token"), "{}", refused.text);
    }
    assert_eq!(dataset(&app), before);
}

#[tokio::test]
async fn a_read_token_sees_no_bulk_action_and_its_post_is_refused() {
    let app = TestApp::start_with_auth(Some("prod"), &auth_file()).await;
    put_and_fail(&app, "emails", "j2", "smtp").await;
    let read = with_cookie(&app, Method::GET, "/ui/search?group=smtp", "reader", "").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(result_jids(&read.text), ["j2"]);
    assert!(!read.text.contains("/ui/search/") && !read.text.contains(r#"id="bulk""#));
    let admin = with_cookie(&app, Method::GET, "/ui/search?group=smtp", "ops", "").await;
    assert!(admin.text.contains(r#"action="/ui/search/retry""#));
    let form = format!("csrf={}&filter=group%3Dsmtp&step=run", token_in(&read.text));
    let refused = with_cookie(&app, Method::POST, "/ui/search/retry", "reader", &form).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(state_of(&app, "j2").await.0, "failed");
}

#[tokio::test]
async fn a_bulk_action_matching_nothing_offers_nothing_to_confirm() {
    let app = TestApp::start().await;
    three_failed(&app).await;
    let token = token_in(&app.get("/ui/search?group=smtp").await.text);
    let confirm = post_form(
        &app,
        "/ui/search/cancel",
        &format!("csrf={token}&filter=group%3Dsmtp%26klass%3DReport"),
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.text);
    assert!(confirm.text.contains(r#"<span id="dry-matched">0</span>"#));
    assert!(
        !confirm.text.contains(r#"id="confirm""#),
        "{}",
        confirm.text
    );
}

#[tokio::test]
async fn a_fair_queues_page_lists_its_partitions_and_a_jobs_page_its_partition() {
    let app = TestApp::start().await;
    for (jid, partition) in [("a1", "acme"), ("a2", "acme"), ("b1", "<b>bolt</b>")] {
        let put = app
            .post(
                "/v1/queues/fair/jobs",
                serde_json::json!({"jid": jid, "klass": "K", "partition": partition}),
            )
            .await;
        assert_eq!(put.status, StatusCode::CREATED, "{}", put.text);
    }
    let set = app
        .request(
            Method::PUT,
            "/v1/queues/fair/partitions",
            Some(serde_json::json!({"concurrency": 2})),
        )
        .await;
    assert!(set.status.is_success(), "{}", set.text);
    let page = app.get("/ui/queues/fair").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let table = element(&page.text, "partitions", "table");
    assert!(
        table.contains("<td>acme</td><td class=\"n\">2</td>")
            || table.contains("<td><bdi>acme</bdi></td><td class=\"n\">2</td>"),
        "{table}"
    );
    assert!(table.contains("&lt;b&gt;bolt&lt;/b&gt;"), "{table}");
    assert!(!page.text.contains("<b>bolt"));
    let limits = element(&page.text, "partition-limits", "p");
    assert!(limits.contains("at most 2 running"), "{limits}");
    // A queue without partitions shows no such section.
    put(&app, "plain", "p1").await;
    assert!(
        !app.get("/ui/queues/plain")
            .await
            .text
            .contains("id=\"partitions\"")
    );
    // The job's page names its partition.
    let job = app.get("/ui/jobs/a1").await.text;
    assert!(element(&job, "partition", "dd").contains("acme"), "{job}");
}
