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
