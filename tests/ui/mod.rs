//! The dashboard (`/ui`): its pages and actions in process (`pages`), and the real
//! thing driven in Chromium over WebDriver (`browser`).

mod browser;
mod pages;

use qlessd::core::PutArgs;

use crate::support::TestApp;

/// Puts a job into `queue`.
pub async fn put(app: &TestApp, queue: &str, jid: &str) {
    app.qless
        .put(
            app.clock.now(),
            PutArgs {
                queue: queue.into(),
                jid: jid.into(),
                klass: "Mailer".into(),
                data: r#"{"to":"a@example.com","n":1}"#.into(),
                tags: Some(vec!["signup".into()]),
                ..Default::default()
            },
        )
        .await
        .expect("put");
}

/// Puts a job, pops it as `w1` and fails it into `group`.
pub async fn put_and_fail(app: &TestApp, queue: &str, jid: &str, group: &str) {
    put(app, queue, jid).await;
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

/// The signing secret [`pushed`] subscribes with: no page may show it.
pub const PUSH_SECRET: &str = "whsec_dGhpcyBpcyB0aGUgZGFzaGJvYXJkIHRlc3Q=";

/// Subscribes `queue` (through the script, as a PUT would) to an endpoint whose query
/// string and `authorization` header carry credentials, puts `d1`, `d2`, `d3` and
/// delivers them as `worker`: `d1` answered 200 in 12 ms, `d2` no answer (a timeout,
/// retried later), `d3` answered 410 (failed into `push-http-410`).
pub async fn pushed(app: &TestApp, queue: &str, worker: &str) {
    use std::collections::BTreeMap;

    use qlessd::core::push::{Attempted, Outcome, PushConfig, PushRate, RetryDelay, Secret};

    for jid in ["d1", "d2", "d3"] {
        put(app, queue, jid).await;
    }
    let config = PushConfig {
        url: "https://hooks.example.com/in/qlessd?token=query-credential".into(),
        timeout: 45,
        concurrency: 7,
        rate: Some(PushRate {
            jobs: 100,
            seconds: 2.0,
        }),
        headers: BTreeMap::from([
            (
                "authorization".to_owned(),
                "Bearer header-credential".to_owned(),
            ),
            ("x-team".to_owned(), "billing-team".to_owned()),
        ]),
    };
    let now = app.clock.now();
    let secret = Secret::new(PUSH_SECRET.to_owned());
    assert!(
        app.qless
            .push_set(now, queue, &config, &secret)
            .await
            .expect("push.set")
    );
    let leased = app
        .qless
        .push_pop(now, queue, worker, 3)
        .await
        .expect("push.pop");
    assert_eq!(leased.len(), 3);
    let ends = [
        ("d1", Some(200), 12, Outcome::Complete { result: None }),
        (
            "d2",
            None,
            45_000,
            Outcome::Retry {
                delay: RetryDelay::Postponed(600.0),
                group: "push-timeout",
                message: "no answer within 45 s",
            },
        ),
        (
            "d3",
            Some(410),
            7,
            Outcome::Fail {
                group: "push-http-410",
                message: "the endpoint is gone",
            },
        ),
    ];
    for (jid, status, ms, outcome) in ends {
        let attempted = Attempted {
            status,
            ms,
            attempt: 1,
        };
        app.qless
            .push_finish(app.clock.now(), queue, jid, worker, attempted, outcome)
            .await
            .expect("push.finish");
    }
}
