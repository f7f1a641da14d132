//! Workflows (`lua/workflow.lua`): tasks put in one call, each waiting for its
//! parents through the protocol's dependencies; a completion (by any client) releases
//! the tasks after it with their parents' outcomes; a parent's failure decides the
//! tasks waiting for it by their policy.

use qlessd::core::Qless;
use qlessd::core::batches::{NewTask, NewWorkflow};
use qlessd::model::{ParentFailurePolicy, WorkflowView};
use serde_json::{Value, json};

use super::jobs::{assert_error, complete, get, job, pop, start, state, strs};
use super::malformed::snapshot;

/// A task `name` (jid `w-<name>`) in queue `q`, after `after`.
fn task(name: &str, after: &[&str], policy: ParentFailurePolicy) -> NewTask {
    let depends: Vec<String> = after.iter().map(|p| format!("w-{p}")).collect();
    let mut put = job("q", &format!("w-{name}"));
    put.depends = (!depends.is_empty()).then_some(depends);
    NewTask {
        name: name.into(),
        put,
        after: strs(after),
        on_parent_failure: policy,
    }
}

fn workflow(tasks: Vec<NewTask>) -> NewWorkflow {
    NewWorkflow {
        wid: "wf".into(),
        name: "thumbnails".into(),
        tasks,
    }
}

async fn view(qless: &Qless) -> WorkflowView {
    qless.workflow_get(0.0, "wf").await.unwrap().unwrap()
}

async fn task_state(qless: &Qless, name: &str) -> String {
    view(qless)
        .await
        .tasks
        .into_iter()
        .find(|t| t.name == name)
        .unwrap()
        .state
}

/// Pops `jid` (it must be next in `q`).
async fn lease(qless: &Qless, now: f64, jid: &str) {
    assert_eq!(pop(qless, now, "q", "w", 1).await, [jid]);
}

async fn fail(qless: &Qless, now: f64, jid: &str) {
    lease(qless, now, jid).await;
    qless
        .fail(now, jid, "w", "boom", "broke", None)
        .await
        .unwrap();
}

use ParentFailurePolicy::{Cancel, Continue, Fail, Ignore};

#[tokio::test]
async fn tasks_run_in_graph_order_and_see_their_parents_results() {
    let (_redis, qless) = start().await;
    let jids = qless
        .workflow_open(
            1.0,
            &workflow(vec![
                task("fetch", &[], Cancel),
                task("resize", &["fetch"], Cancel),
                task("notify", &["resize"], Cancel),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(jids, ["w-fetch", "w-resize", "w-notify"]);
    assert_eq!(state(&qless, "w-resize").await, "depends");
    assert_eq!(get(&qless, "w-fetch").await.workflow.as_deref(), Some("wf"));

    lease(&qless, 2.0, "w-fetch").await;
    let done = qlessd::core::CompleteArgs {
        result: Some(r#"{"bytes": 512}"#.into()),
        ..super::jobs::finish("w-fetch", "w", "q")
    };
    qless.complete(3.0, done).await.unwrap();
    let leased = qless.pop(4.0, "q", "w", 1).await.unwrap();
    assert_eq!(leased[0].jid, "w-resize");
    let parents: Value = serde_json::from_str(leased[0].parents.as_ref().unwrap().get()).unwrap();
    assert_eq!(
        parents,
        json!({"fetch": {"jid": "w-fetch", "state": "complete", "result": {"bytes": 512}}})
    );
    // A stock client's plain complete releases the next task too.
    let plain = strs(&["w-resize", "w", "q", "{}"]);
    qless.call("complete", 5.0, &plain).await.unwrap();
    assert_eq!(state(&qless, "w-notify").await, "waiting");
    let shown = view(&qless).await;
    assert_eq!(shown.name, "thumbnails");
    let states: Vec<(String, String)> = shown
        .tasks
        .iter()
        .map(|t| (t.name.clone(), t.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            ("fetch".into(), "complete".into()),
            ("resize".into(), "complete".into()),
            ("notify".into(), "waiting".into())
        ]
    );
    assert_eq!(shown.tasks[2].after, ["resize"]);
}

#[tokio::test]
async fn a_task_waiting_for_a_task_not_before_it_writes_nothing() {
    let (redis, qless) = start().await;
    let before = snapshot(&redis);
    assert_error(
        qless
            .workflow_open(
                1.0,
                &workflow(vec![task("b", &["a"], Cancel), task("a", &[], Cancel)]),
            )
            .await,
        "not a task before it",
    );
    let mut wrong = workflow(vec![task("a", &[], Cancel), task("b", &[], Cancel)]);
    wrong.tasks[1].after = strs(&["a"]);
    assert_error(
        qless.workflow_open(1.0, &wrong).await,
        "must depend on its parents",
    );
    assert_eq!(snapshot(&redis), before);
}

#[tokio::test]
async fn cancel_cancels_the_task_and_everything_after_it() {
    let (_redis, qless) = start().await;
    qless
        .workflow_open(
            1.0,
            &workflow(vec![
                task("a", &[], Cancel),
                task("b", &["a"], Cancel),
                task("c", &["b"], Cancel),
            ]),
        )
        .await
        .unwrap();
    fail(&qless, 2.0, "w-a").await;
    assert!(qless.get(0.0, "w-b").await.unwrap().is_none());
    assert!(qless.get(0.0, "w-c").await.unwrap().is_none());
    assert_eq!(task_state(&qless, "a").await, "failed");
    assert_eq!(task_state(&qless, "b").await, "canceled");
    assert_eq!(task_state(&qless, "c").await, "canceled");
}

#[tokio::test]
async fn fail_fails_the_task_into_its_group_and_its_children_follow_their_own_policy() {
    let (_redis, qless) = start().await;
    qless
        .workflow_open(
            1.0,
            &workflow(vec![
                task("a", &[], Cancel),
                task("b", &["a"], Fail),
                task("c", &["b"], Continue),
            ]),
        )
        .await
        .unwrap();
    fail(&qless, 2.0, "w-a").await;
    let b = get(&qless, "w-b").await;
    assert_eq!(b.state.as_str(), "failed");
    let failure = b.failure.unwrap();
    assert_eq!(failure.group, "workflow-parent-failed");
    assert!(
        failure.message.contains("a (w-a) failed"),
        "{}",
        failure.message
    );
    assert_eq!(
        state(&qless, "w-c").await,
        "waiting",
        "continue: runs at once"
    );
    let c = qless.pop(3.0, "q", "w", 1).await.unwrap();
    let parents: Value = serde_json::from_str(c[0].parents.as_ref().unwrap().get()).unwrap();
    assert_eq!(parents["b"]["state"], "failed");
}

#[tokio::test]
async fn ignore_runs_once_the_other_parents_are_done_and_an_unfail_first_restores_the_wait() {
    let (_redis, qless) = start().await;
    one_parent_failed(&qless).await;
    // The failed parent is unfailed before c was decided: c waits for it as normal.
    assert_eq!(qless.unfail(3.0, "q", "boom", 10).await.unwrap(), 1);
    complete_next(&qless, 4.0).await;
    assert_eq!(state(&qless, "w-c").await, "depends", "one parent is left");
    complete_next(&qless, 5.0).await;
    assert_eq!(state(&qless, "w-c").await, "waiting");
}

#[tokio::test]
async fn ignore_treats_a_failed_parent_as_completed_once_the_others_are_done() {
    let (_redis, qless) = start().await;
    let first = one_parent_failed(&qless).await;
    complete_next(&qless, 3.0).await;
    assert_eq!(state(&qless, "w-c").await, "waiting");
    let c = qless.pop(4.0, "q", "w", 1).await.unwrap();
    let parents: Value = serde_json::from_str(c[0].parents.as_ref().unwrap().get()).unwrap();
    let failed_name = if first == "w-a" { "a" } else { "b" };
    assert_eq!(parents[failed_name]["state"], "failed");
    // A later unfail and completion of the failed parent changes nothing for c.
    assert_eq!(qless.unfail(5.0, "q", "boom", 10).await.unwrap(), 1);
    complete_next(&qless, 6.0).await;
    assert_eq!(state(&qless, "w-c").await, "running");
}

/// Opens a, b and c after both (policy `ignore`), then fails whichever of a and b a
/// pop hands out first, while the other has not run: c keeps waiting. Returns the
/// failed parent's jid.
async fn one_parent_failed(qless: &Qless) -> String {
    qless
        .workflow_open(
            1.0,
            &workflow(vec![
                task("a", &[], Cancel),
                task("b", &[], Cancel),
                task("c", &["a", "b"], Ignore),
            ]),
        )
        .await
        .unwrap();
    let first = pop(qless, 2.0, "q", "w", 1).await.remove(0);
    qless
        .fail(2.0, &first, "w", "boom", "broke", None)
        .await
        .unwrap();
    assert_eq!(state(qless, "w-c").await, "depends");
    first
}

/// Pops the next job of `q` and completes it.
async fn complete_next(qless: &Qless, now: f64) {
    let jid = pop(qless, now, "q", "w", 1).await.remove(0);
    complete(qless, now, &jid, "w", "q").await;
}

#[tokio::test]
async fn canceling_a_workflow_cancels_what_has_not_started() {
    let (_redis, qless) = start().await;
    qless
        .workflow_open(
            1.0,
            &workflow(vec![
                task("a", &[], Cancel),
                task("b", &["a"], Cancel),
                task("z", &[], Cancel),
            ]),
        )
        .await
        .unwrap();
    let running = pop(&qless, 2.0, "q", "w", 1).await.remove(0);
    let canceled = qless.workflow_cancel(3.0, "wf").await.unwrap();
    assert_eq!(canceled, Some(2));
    assert_eq!(state(&qless, &running).await, "running");
    let shown = view(&qless).await;
    let canceled: Vec<&str> = shown
        .tasks
        .iter()
        .filter(|t| t.state == "canceled")
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(canceled.len(), 2, "{canceled:?}");
    assert_eq!(qless.workflow_cancel(3.0, "nope").await.unwrap(), None);
    assert!(qless.workflow_get(0.0, "nope").await.unwrap().is_none());
}
