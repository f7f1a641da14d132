//! Script semantics (recurring): templates, spawning children on pop and peek, the
//! backlog rule, updates, tags and removal.

use std::collections::BTreeSet;

use qlessd::core::{Listing, Qless, RecurArgs, RecurUpdate};
use serde_json::{Value, json};

use super::jobs::{assert_error, get, pop, start, strs};

fn template(queue: &str, jid: &str, interval: f64, offset: f64) -> RecurArgs {
    RecurArgs {
        queue: queue.into(),
        jid: jid.into(),
        klass: "Tick".into(),
        data: "{\"n\": 1}".into(),
        interval,
        offset,
        ..Default::default()
    }
}

async fn recur(qless: &Qless, now: f64, args: RecurArgs) {
    let jid = args.jid.clone();
    assert_eq!(qless.recur(now, args).await.unwrap(), jid);
}

#[tokio::test]
async fn a_template_spawns_a_child_when_popped() {
    let (_redis, qless) = start().await;
    let mut args = template("q", "r", 60.0, 0.0);
    args.priority = Some(3.0);
    args.tags = Some(strs(&["t"]));
    recur(&qless, 0.0, args).await;
    let jobs = qless.pop(0.0, "q", "w", 5).await.unwrap();
    assert_eq!(jobs.len(), 1);
    let child = &jobs[0];
    assert_eq!(child.jid, "r-1");
    assert_eq!(child.klass, "Tick");
    assert_eq!(child.queue, "q");
    assert_eq!(child.priority, 3.0);
    assert_eq!(child.tags, strs(&["t"]));
    assert_eq!(child.data, json!({"n": 1}));
    assert_eq!(child.spawned_from_jid.as_deref(), Some("r"));
    assert_eq!((child.retries, child.remaining), (0, 0));
    assert_eq!(child.history[0].what, "put");
    assert_eq!(child.history[0].extra["q"], json!("q"));
    assert_eq!(
        qless.tag_get(1.0, "t", 0, 10).await.unwrap().jids,
        strs(&["r-1"])
    );
    // the next slot is a minute later
    assert!(pop(&qless, 59.0, "q", "w", 5).await.is_empty());
    assert_eq!(pop(&qless, 60.0, "q", "w", 5).await, strs(&["r-2"]));
}

#[tokio::test]
async fn peek_spawns_children_too() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 10.0)).await;
    assert!(qless.peek(9.0, "q", 5).await.unwrap().is_empty());
    let peeked = qless.peek(10.0, "q", 5).await.unwrap();
    assert_eq!(peeked.len(), 1);
    assert_eq!(peeked[0].jid, "r-1");
    assert_eq!(peeked[0].state, "waiting");
    assert_eq!(pop(&qless, 11.0, "q", "w", 5).await, strs(&["r-1"]));
}

#[tokio::test]
async fn missed_slots_each_spawn_a_child_stamped_with_its_slot_time() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    let jobs = qless.pop(130.0, "q", "w", 10).await.unwrap();
    let jids: Vec<_> = jobs.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(jids, ["r-1", "r-2", "r-3"]);
    for (job, slot) in jobs.iter().zip([0.0, 60.0, 120.0]) {
        assert_eq!(job.history[0].what, "put");
        assert_eq!(job.history[0].when, slot, "{}", job.jid);
    }
    assert_eq!(qless.recur_get(130.0, "r").await.unwrap().unwrap().count, 3);
}

#[tokio::test]
async fn the_pop_count_limits_how_many_children_are_spawned() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    assert_eq!(pop(&qless, 130.0, "q", "w", 2).await, strs(&["r-1", "r-2"]));
    assert_eq!(pop(&qless, 130.0, "q", "w", 2).await, strs(&["r-3"]));
}

#[tokio::test]
async fn the_backlog_skips_the_oldest_missed_slots() {
    let (_redis, qless) = start().await;
    let mut args = template("q", "r", 60.0, 0.0);
    args.backlog = Some(1);
    recur(&qless, 0.0, args).await;
    let jobs = qless.pop(600.0, "q", "w", 100).await.unwrap();
    let jids: Vec<_> = jobs.iter().map(|j| j.jid.as_str()).collect();
    assert_eq!(jids, ["r-1", "r-2"]);
    assert_eq!(jobs[0].history[0].when, 540.0);
    assert_eq!(jobs[1].history[0].when, 600.0);
}

#[tokio::test]
async fn the_child_count_survives_a_re_recur() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    assert_eq!(pop(&qless, 60.0, "q", "w", 10).await, strs(&["r-1", "r-2"]));
    let mut again = template("q2", "r", 30.0, 0.0);
    again.klass = "Tock".into();
    recur(&qless, 100.0, again).await;
    let template = qless.recur_get(100.0, "r").await.unwrap().unwrap();
    assert_eq!(template.count, 2);
    assert_eq!(template.klass, "Tock");
    assert_eq!(template.queue, "q2");
    assert!(
        qless
            .jobs(100.0, Listing::Recurring, "q", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(pop(&qless, 100.0, "q", "w", 10).await.is_empty());
    assert_eq!(pop(&qless, 100.0, "q2", "w", 10).await, strs(&["r-3"]));
}

#[tokio::test]
async fn recur_get_reports_the_template() {
    let (_redis, qless) = start().await;
    let mut args = template("q", "r", 60.0, 0.0);
    args.priority = Some(2.0);
    args.retries = Some(4);
    recur(&qless, 0.0, args).await;
    let reply = qless.call("recur.get", 0.0, &strs(&["r"])).await.unwrap();
    let raw: Value =
        serde_json::from_str(&redis::from_redis_value::<String>(reply).unwrap()).unwrap();
    let keys: BTreeSet<&str> = raw
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let expected: BTreeSet<&str> = [
        "jid", "klass", "state", "queue", "priority", "interval", "retries", "count", "data",
        "tags", "backlog",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, expected);
    assert_eq!(
        raw,
        json!({"jid": "r", "klass": "Tick", "state": "recur", "queue": "q", "priority": 2,
               "interval": 60, "retries": 4, "count": 0, "data": "{\"n\": 1}", "tags": {},
               "backlog": 0})
    );
    assert!(qless.recur_get(0.0, "nope").await.unwrap().is_none());
}

#[tokio::test]
async fn a_new_interval_shifts_the_next_run() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 60.0)).await;
    qless
        .recur_update(
            1.0,
            "r",
            RecurUpdate {
                interval: Some(100.0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        qless.recur_get(1.0, "r").await.unwrap().unwrap().interval,
        100.0
    );
    assert!(pop(&qless, 99.0, "q", "w", 5).await.is_empty());
    assert_eq!(pop(&qless, 100.0, "q", "w", 5).await, strs(&["r-1"]));
    assert!(pop(&qless, 199.0, "q", "w", 5).await.is_empty());
    assert_eq!(pop(&qless, 200.0, "q", "w", 5).await, strs(&["r-2"]));
}

#[tokio::test]
async fn updating_the_queue_moves_the_template() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    qless
        .recur_update(
            1.0,
            "r",
            RecurUpdate {
                queue: Some("q2".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        qless
            .jobs(1.0, Listing::Recurring, "q", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        qless
            .jobs(1.0, Listing::Recurring, "q2", 0, 10)
            .await
            .unwrap(),
        strs(&["r"])
    );
    let names: Vec<_> = qless
        .queues(1.0)
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, strs(&["q", "q2"]));
    assert!(pop(&qless, 2.0, "q", "w", 5).await.is_empty());
    let jobs = qless.pop(2.0, "q2", "w", 5).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].queue, "q2");
    // the slot time is kept: the child was due at 0
    assert_eq!(jobs[0].history[0].when, 0.0);
}

#[tokio::test]
async fn updated_attributes_apply_to_later_children() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    qless
        .recur_update(
            1.0,
            "r",
            RecurUpdate {
                priority: Some(9.0),
                retries: Some(2),
                data: Some("[]".into()),
                klass: Some("Other".into()),
                backlog: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let template = qless.recur_get(1.0, "r").await.unwrap().unwrap();
    assert_eq!(
        (
            template.priority,
            template.retries,
            template.backlog,
            template.klass.as_str()
        ),
        (9.0, 2, 3, "Other")
    );
    let child = &qless.pop(1.0, "q", "w", 1).await.unwrap()[0];
    assert_eq!(
        (child.priority, child.retries, child.remaining),
        (9.0, 2, 2)
    );
    assert_eq!(child.klass, "Other");
    assert_eq!(
        super::jobs::raw_job(&qless, "r-1").await["data"],
        json!("[]")
    );
}

#[tokio::test]
async fn recur_update_refuses_unknown_options_and_missing_templates() {
    let (_redis, qless) = start().await;
    assert_error(
        qless
            .recur_update(
                0.0,
                "nope",
                RecurUpdate {
                    priority: Some(1.0),
                    ..Default::default()
                },
            )
            .await,
        "No recurring job nope",
    );
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    assert_error(
        qless
            .call("recur.update", 0.0, &strs(&["r", "tags", "[]"]))
            .await,
        "Unrecognized option \"tags\"",
    );
}

#[tokio::test]
async fn template_tags_apply_to_children_spawned_afterwards() {
    let (_redis, qless) = start().await;
    let mut args = template("q", "r", 60.0, 0.0);
    args.tags = Some(strs(&["a"]));
    recur(&qless, 0.0, args).await;
    assert_eq!(get_first(&qless, 0.0).await, strs(&["a"]));
    assert_eq!(
        qless
            .recur_tag(1.0, "r", &strs(&["b", "a", "c"]))
            .await
            .unwrap(),
        strs(&["a", "b", "c"])
    );
    assert_eq!(get_first(&qless, 60.0).await, strs(&["a", "b", "c"]));
    assert_eq!(
        qless
            .recur_untag(61.0, "r", &strs(&["a", "c"]))
            .await
            .unwrap(),
        strs(&["b"])
    );
    assert_eq!(get_first(&qless, 120.0).await, strs(&["b"]));
    let reply = qless
        .call("recur.untag", 121.0, &strs(&["r", "b"]))
        .await
        .unwrap();
    assert_eq!(redis::from_redis_value::<String>(reply).unwrap(), "{}");
    // the first child keeps the tags it was born with
    assert_eq!(get(&qless, "r-1").await.tags, strs(&["a"]));
    assert_error(
        qless.recur_tag(0.0, "nope", &strs(&["x"])).await,
        "does not exist",
    );
    assert_error(
        qless.recur_untag(0.0, "nope", &strs(&["x"])).await,
        "does not exist",
    );
}

async fn get_first(qless: &Qless, now: f64) -> Vec<String> {
    let jobs = qless.pop(now, "q", "w", 1).await.unwrap();
    assert_eq!(jobs.len(), 1, "a child is due at {now}");
    jobs[0].tags.clone()
}

#[tokio::test]
async fn unrecur_deletes_the_template_but_not_its_children() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    assert_eq!(pop(&qless, 0.0, "q", "w", 5).await, strs(&["r-1"]));
    qless.unrecur(1.0, "r").await.unwrap();
    assert!(qless.recur_get(1.0, "r").await.unwrap().is_none());
    assert!(
        qless
            .jobs(1.0, Listing::Recurring, "q", 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(pop(&qless, 600.0, "q", "w2", 5).await.is_empty());
    assert_eq!(get(&qless, "r-1").await.state, "running");
    // unknown jids are fine too
    qless.unrecur(2.0, "nope").await.unwrap();
    // the count is gone with the template
    recur(&qless, 700.0, template("q", "r", 60.0, 0.0)).await;
    assert_eq!(qless.recur_get(700.0, "r").await.unwrap().unwrap().count, 0);
}

#[tokio::test]
async fn spawning_publishes_nothing_and_does_not_need_a_registered_queue() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    qless.queue_forget(0.0, &strs(&["q"])).await.unwrap();
    assert_eq!(pop(&qless, 0.0, "q", "w", 5).await, strs(&["r-1"]));
    assert!(qless.queues(1.0).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_pop_count_is_shared_by_all_templates_of_the_queue() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    recur(&qless, 0.0, template("q", "s", 60.0, 0.0)).await;
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await.len(), 1);
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await.len(), 1);
    assert!(pop(&qless, 0.0, "q", "w", 1).await.is_empty());
    let mut all: Vec<String> = Vec::new();
    for jid in ["r-1", "s-1"] {
        all.push(get(&qless, jid).await.jid);
    }
    assert_eq!(all, strs(&["r-1", "s-1"]));
}

#[tokio::test]
async fn listings_do_not_spawn_children() {
    let (_redis, qless) = start().await;
    recur(&qless, 0.0, template("q", "r", 60.0, 0.0)).await;
    qless.queues(100.0).await.unwrap();
    qless.length(100.0, "q").await.unwrap();
    qless
        .jobs(100.0, Listing::Scheduled, "q", 0, 10)
        .await
        .unwrap();
    assert!(qless.get(100.0, "r-1").await.unwrap().is_none());
    assert_eq!(qless.queue(100.0, "q").await.unwrap().recurring, 1);
}

#[tokio::test]
async fn within_the_backlog_every_missed_slot_is_spawned() {
    let (_redis, qless) = start().await;
    let mut args = template("q", "r", 60.0, 0.0);
    args.backlog = Some(5);
    recur(&qless, 0.0, args).await;
    // three slots were missed by 120 (0, 60, 120): fewer than the backlog allows
    assert_eq!(
        pop(&qless, 120.0, "q", "w", 100).await,
        strs(&["r-1", "r-2", "r-3"])
    );
}

#[tokio::test]
async fn the_first_run_comes_after_the_offset() {
    let (_redis, qless) = start().await;
    recur(&qless, 1000.0, template("q", "r", 60.0, 30.5)).await;
    assert!(pop(&qless, 1030.0, "q", "w", 5).await.is_empty());
    let jobs = qless.pop(1031.0, "q", "w", 5).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].history[0].when, 1030.0);
}
