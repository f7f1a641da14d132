//! The dashboard in a real browser: Chromium driven by chromedriver (WebDriver,
//! through fantoccini) against a qlessd served on a real socket.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`; `.ci/run` installs them). Without them the test says so and
//! passes, unless `QLESSD_REQUIRE_TOOLCHAINS` is set (CI), where it fails.
//! With `QLESSD_UI_SCREENSHOTS=<dir>` it saves the README's screenshots there.

use std::net::TcpListener as StdListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use qlessd::server;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::{pushed, put, put_and_fail};
use crate::support::TestApp;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How long the browser gets to show something.
const PATIENCE: Duration = Duration::from_secs(20);

/// chromedriver on a free port, killed on drop; the browser's profile directory.
struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts chromedriver and a headless Chromium session, or `None` when they are not
/// installed (and not required).
async fn browser() -> Option<(Driver, Client)> {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        assert!(
            std::env::var_os("QLESSD_REQUIRE_TOOLCHAINS").is_none(),
            "chromium and chromedriver are required (apt-get install chromium chromium-driver)"
        );
        eprintln!("skipping the browser test: {CHROMIUM} or {CHROMEDRIVER} is missing");
        return None;
    }
    let port = StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let profile = tempfile::tempdir().expect("profile dir");
    let driver = Driver {
        child,
        port,
        _profile: profile,
    };
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([format!(
        "--user-data-dir={}",
        driver._profile.path().display()
    )])
    .collect::<Vec<_>>();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": CHROMIUM, "args": args }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let url = format!("http://127.0.0.1:{}", driver.port);
    // chromedriver takes a moment to listen: retry until the deadline.
    let deadline = Instant::now() + PATIENCE;
    loop {
        match ClientBuilder::new(connector.clone())
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(client) => return Some((driver, client)),
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("no WebDriver session: {err}"),
        }
    }
}

/// Waits until the text of the first `css` element satisfies `ok`.
async fn wait_text(client: &Client, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if ok(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{css} never matched; last text {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn click(client: &Client, locator: Locator<'_>) {
    client
        .wait()
        .at_most(PATIENCE)
        .for_element(locator)
        .await
        .expect("element")
        .click()
        .await
        .expect("click");
}

async fn screenshot(client: &Client, name: &str) {
    if let Some(dir) = std::env::var_os("QLESSD_UI_SCREENSHOTS") {
        let png = client.screenshot().await.expect("screenshot");
        std::fs::write(Path::new(&dir).join(name), png).expect("save screenshot");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_retries_a_failed_job_unfails_a_group_and_pauses_a_queue() {
    let app = TestApp::start().await;
    put_and_fail(&app, "emails", "broken-1", "smtp-refused").await;
    put(&app, "emails", "welcome-1").await;
    put(&app, "emails", "welcome-2").await;
    put_and_fail(&app, "reports", "report-1", "timeout").await;
    put_and_fail(&app, "reports", "report-2", "timeout").await;
    put(&app, "reports", "report-3").await;

    let Some((_driver, client)) = browser().await else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(listener, app.router.clone(), async {
        let _ = stopped.await;
    }));

    // The overview lists the queues and the failure groups; follow a queue.
    client.goto(&format!("{base}/ui")).await.unwrap();
    wait_text(&client, "#queues", |t| {
        t.contains("emails") && t.contains("reports")
    })
    .await;
    wait_text(&client, "#failure-groups", |t| t.contains("smtp-refused")).await;
    screenshot(&client, "ui-overview.png").await;

    // Live: a job put into a new queue shows up without a reload (the page's event
    // stream tells htmx to fetch the overview again). Each put is a new event, so
    // putting again until it shows covers a stream that was still connecting.
    let deadline = Instant::now() + PATIENCE;
    for n in 0.. {
        put(&app, "live-queue", &format!("live-{n}")).await;
        // The table is replaced as it refreshes: a stale element reads as empty.
        let text = match client.find(Locator::Css("#queues")).await {
            Ok(table) => table.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if text.contains("live-queue") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the overview never updated itself"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    click(&client, Locator::LinkText("emails")).await;
    wait_text(&client, "#queue-name", |t| t == "emails").await;
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/ui/queues/emails")
    );

    // Open the failed job from its group and retry it: it leaves the group.
    client
        .goto(&format!("{base}/ui/failures/smtp-refused"))
        .await
        .unwrap();
    click(&client, Locator::LinkText("broken-1")).await;
    wait_text(&client, "#state", |t| t == "failed").await;
    wait_text(&client, "#failure", |t| t.contains("it broke")).await;
    screenshot(&client, "ui-job.png").await;
    click(&client, Locator::Css("form[action$='/retry'] button")).await;
    wait_text(&client, "#state", |t| t == "waiting").await;
    let groups = app.qless.failed(app.clock.now()).await.unwrap();
    assert!(!groups.contains_key("smtp-refused"), "{groups:?}");
    client.goto(&format!("{base}/ui/failures")).await.unwrap();
    let listed = wait_text(&client, "main", |t| t.contains("timeout")).await;
    assert!(!listed.contains("smtp-refused"));

    // Unfail the whole `timeout` group: both jobs go back to `reports`.
    click(&client, Locator::LinkText("timeout")).await;
    wait_text(&client, "#group-total", |t| t == "2").await;
    click(&client, Locator::XPath("//button[text()='Unfail all']")).await;
    wait_text(&client, "#group-total", |t| t == "0").await;
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());
    let report = app
        .qless
        .get(app.clock.now(), "report-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (report.state.as_str(), report.queue.as_str()),
        ("waiting", "reports")
    );

    // Pause `emails`: pops there return nothing.
    client
        .goto(&format!("{base}/ui/queues/emails"))
        .await
        .unwrap();
    click(&client, Locator::XPath("//button[text()='Pause']")).await;
    wait_text(&client, "#paused", |t| t == "paused").await;
    let popped = app
        .qless
        .pop(app.clock.now(), "emails", "w2", 10)
        .await
        .unwrap();
    assert!(
        popped.is_empty(),
        "a paused queue handed out {}",
        popped.len()
    );
    let reports = app
        .qless
        .pop(app.clock.now(), "reports", "w2", 10)
        .await
        .unwrap();
    assert_eq!(reports.len(), 3, "other queues still pop");
    let live = app
        .qless
        .pop(app.clock.now(), "live-queue", "w2", 1)
        .await
        .unwrap();
    assert_eq!(live.len(), 1, "other queues still pop");

    // A pushed queue is marked in the overview; its badge opens its push page.
    pushed(&app, "hooks", "qlessd-push:gw-1").await;
    client.goto(&format!("{base}/ui")).await.unwrap();
    click(
        &client,
        Locator::Css("a.badge.push[href='/ui/queues/hooks/push']"),
    )
    .await;
    wait_text(&client, "#endpoint", |t| {
        t == "https://hooks.example.com/in/qlessd"
    })
    .await;
    let deliveries = wait_text(&client, "#deliveries", |t| t.contains("no answer")).await;
    assert!(
        deliveries.contains("d1") && deliveries.contains("410"),
        "{deliveries}"
    );
    screenshot(&client, "ui-push.png").await;

    client.close().await.unwrap();
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_follows_a_task_to_its_workflow_graph_and_on_to_another_task() {
    let app = TestApp::start().await;
    let created = app
        .post(
            "/v1/workflows",
            json!({"name": "thumbnails", "tasks": {
                "fetch": {"queue": "io", "jid": "wf-fetch", "klass": "Fetch"},
                "resize": {"queue": "cpu", "jid": "wf-resize", "klass": "Resize",
                           "after": ["fetch"]},
                "notify": {"queue": "io", "jid": "wf-notify", "klass": "Notify",
                           "after": ["resize"]}}}),
        )
        .await;
    assert_eq!(created.status.as_u16(), 201, "{}", created.text);
    let wid = created.body["wid"].as_str().unwrap().to_owned();
    let popped = app.qless.pop(app.clock.now(), "io", "w1", 1).await.unwrap();
    assert_eq!(popped.len(), 1);
    let done = app
        .post(
            "/v1/jobs/wf-fetch/complete",
            json!({"worker": "w1", "queue": "io"}),
        )
        .await;
    assert_eq!(done.status.as_u16(), 200, "{}", done.text);

    let Some((_driver, client)) = browser().await else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(listener, app.router.clone(), async {
        let _ = stopped.await;
    }));

    // The released task's page links its workflow (and its parent).
    client
        .goto(&format!("{base}/ui/jobs/wf-resize"))
        .await
        .unwrap();
    wait_text(&client, "#parents", |t| {
        t.contains("fetch") && t.contains("complete")
    })
    .await;
    click(&client, Locator::Css("#workflow a")).await;
    wait_text(&client, "#wid", |t| t == wid).await;
    wait_text(&client, "#workflow-name", |t| t == "thumbnails").await;
    // The graph is drawn: each task a box, coloured by its state (the stylesheet's
    // fill for a completed task is the charts' green).
    let fetch = client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("a[data-task='fetch'] rect"))
        .await
        .unwrap();
    assert_eq!(
        fetch.css_value("fill").await.unwrap(),
        "rgb(46, 158, 91)",
        "a completed task is drawn green"
    );
    screenshot(&client, "ui-workflow.png").await;
    // A task's box opens its job.
    click(&client, Locator::Css("a[data-task='notify']")).await;
    wait_text(&client, "#jid", |t| t == "wf-notify").await;
    wait_text(&client, "#state", |t| t == "depends").await;
    assert!(
        client
            .current_url()
            .await
            .unwrap()
            .path()
            .ends_with("/ui/jobs/wf-notify")
    );

    client.close().await.unwrap();
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

/// A Chrome DevTools Protocol command, sent through chromedriver's
/// `goog/cdp/execute` (WebDriver itself cannot change what the page's media queries
/// see).
#[derive(Debug)]
struct Cdp {
    cmd: &'static str,
    params: serde_json::Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let session = session_id.unwrap_or_default();
        base_url.join(&format!("session/{session}/goog/cdp/execute"))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        let body = json!({ "cmd": self.cmd, "params": self.params });
        (axum::http::Method::POST, Some(body.to_string()))
    }
}

/// The page's background colour and whether it matches `prefers-color-scheme: dark`.
async fn scheme(client: &Client) -> (String, bool) {
    let seen = client
        .execute(
            "return [getComputedStyle(document.body).backgroundColor, \
             matchMedia('(prefers-color-scheme: dark)').matches];",
            Vec::new(),
        )
        .await
        .expect("the page's colours");
    (
        seen[0].as_str().unwrap_or_default().to_owned(),
        seen[1].as_bool().unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_turns_dark_when_the_browser_prefers_it() {
    let app = TestApp::start().await;
    put_and_fail(&app, "emails", "broken-1", "smtp-refused").await;
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(listener, app.router.clone(), async {
        let _ = stopped.await;
    }));

    client.goto(&format!("{base}/ui")).await.unwrap();
    wait_text(&client, "#queues", |t| t.contains("emails")).await;
    let light = scheme(&client).await;
    assert_eq!(light, ("rgb(247, 248, 250)".to_owned(), false));
    // The system prefers dark: the same page follows without a reload.
    let dark = Cdp {
        cmd: "Emulation.setEmulatedMedia",
        params: json!({ "features": [{ "name": "prefers-color-scheme", "value": "dark" }] }),
    };
    client
        .issue_cmd(dark)
        .await
        .expect("emulate a dark preference");
    assert_eq!(scheme(&client).await, ("rgb(17, 21, 28)".to_owned(), true));
    client
        .goto(&format!("{base}/ui/queues/emails"))
        .await
        .unwrap();
    wait_text(&client, "#queue-name", |t| t == "emails").await;
    assert_eq!(scheme(&client).await.0, "rgb(17, 21, 28)");
    screenshot(&client, "ui-queue-dark.png").await;

    client.close().await.unwrap();
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_failed_jobs_by_data_and_retries_them_all() {
    let app = TestApp::start().await;
    for (jid, user) in [("order-1", 42), ("order-2", 7), ("order-3", 42)] {
        app.qless
            .put(
                app.clock.now(),
                qlessd::core::PutArgs {
                    queue: "orders".into(),
                    jid: jid.into(),
                    klass: "Charge".into(),
                    data: json!({"user": {"id": user}}).to_string(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let popped = app
            .qless
            .pop(app.clock.now(), "orders", "w1", 1)
            .await
            .unwrap();
        assert_eq!(popped.len(), 1);
        app.qless
            .fail(
                app.clock.now(),
                jid,
                "w1",
                "card-declined",
                "declined",
                None,
            )
            .await
            .unwrap();
    }
    // User 7's job stays in the group until the second search retries it.
    let Some((_driver, client)) = browser().await else {
        return;
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(listener, app.router.clone(), async {
        let _ = stopped.await;
    }));

    // Fill in the search form: failed jobs of user 42 in the group.
    client.goto(&format!("{base}/ui/search")).await.unwrap();
    let form = client
        .wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css("#search-form"))
        .await
        .unwrap();
    form.find(Locator::Css("input[name='group']"))
        .await
        .unwrap()
        .send_keys("card-declined")
        .await
        .unwrap();
    form.find(Locator::Css("select[name='state'] option[value='failed']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    form.find(Locator::Css("input[name='data']"))
        .await
        .unwrap()
        .send_keys(r#"{"user.id": 42}"#)
        .await
        .unwrap();
    click(&client, Locator::Css("#search-form button[type='submit']")).await;
    let results = wait_text(&client, "#results", |t| t.contains("order-1")).await;
    assert!(
        results.contains("order-3") && !results.contains("order-2"),
        "{results}"
    );
    // The address is the API's search, without the empty fields.
    let url = client.current_url().await.unwrap();
    let api = app
        .get(&format!("/v1/search?{}", url.query().unwrap_or_default()))
        .await;
    assert_eq!(api.body["jobs"].as_array().map(Vec::len), Some(2), "{url}");
    // A job's data unfolds.
    click(
        &client,
        Locator::Css("[data-jid='order-1'] details.data summary"),
    )
    .await;
    wait_text(&client, "[data-jid='order-1'] details.data pre", |t| {
        t.contains("\"id\": 42")
    })
    .await;
    screenshot(&client, "ui-search.png").await;

    // Retry all matching: the confirmation counts them, then the retry runs.
    click(
        &client,
        Locator::Css("form[action='/ui/search/retry'] button"),
    )
    .await;
    wait_text(&client, "#dry-matched", |t| t == "2").await;
    assert_eq!(
        state(&app, "order-1").await,
        "failed",
        "the dry run changed nothing"
    );
    click(&client, Locator::Css("#confirm")).await;
    wait_text(&client, "#changed", |t| t == "2").await;
    wait_text(&client, "#bulk-done", |t| !t.is_empty()).await;
    assert_eq!(state(&app, "order-1").await, "waiting");
    assert_eq!(state(&app, "order-3").await, "waiting");
    assert_eq!(state(&app, "order-2").await, "failed");

    // Retry the rest of the group the same way: the group is empty.
    client
        .goto(&format!("{base}/ui/search?group=card-declined"))
        .await
        .unwrap();
    wait_text(&client, "#results", |t| t.contains("order-2")).await;
    click(
        &client,
        Locator::Css("form[action='/ui/search/retry'] button"),
    )
    .await;
    wait_text(&client, "#dry-matched", |t| t == "1").await;
    click(&client, Locator::Css("#confirm")).await;
    wait_text(&client, "#changed", |t| t == "1").await;
    client
        .goto(&format!("{base}/ui/failures/card-declined"))
        .await
        .unwrap();
    wait_text(&client, "#group-total", |t| t == "0").await;
    assert!(app.qless.failed(app.clock.now()).await.unwrap().is_empty());

    client.close().await.unwrap();
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

async fn state(app: &TestApp, jid: &str) -> String {
    let job = app.qless.get(app.clock.now(), jid).await.unwrap().unwrap();
    job.state.as_str().to_owned()
}
