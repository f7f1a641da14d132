//! Script semantics (search): `search` and `search.act` called directly, with logical
//! time: which index a filter walks, the bound on what one call looks at, the cursor
//! (its shape, the places it keeps when entries come and go), what each state and
//! time means, that a search and a dry run write nothing, and the error texts.

use qlessd::core::Qless;
use serde_json::{Value, json};

use super::jobs::{assert_error, complete, job, pop, put, start, strs};
use crate::support::{RedisServer, connect};

/// `search filter limit scan [cursor]` at `now`, its JSON answer.
async fn search(
    qless: &Qless,
    now: f64,
    filter: Value,
    limit: u32,
    scan: u32,
    cursor: &Value,
) -> Value {
    let mut args = vec![filter.to_string(), limit.to_string(), scan.to_string()];
    if !cursor.is_null() {
        args.push(cursor.to_string());
    }
    let reply = qless.call("search", now, args).await.unwrap();
    let text: String = redis::from_redis_value(reply).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `search.act action value filter limit scan dry [cursor]` at `now`.
async fn act(
    qless: &Qless,
    now: f64,
    (action, value): (&str, &str),
    filter: Value,
    limit: u32,
    dry: bool,
    cursor: &Value,
) -> Value {
    let mut args = strs(&[action, value]);
    args.extend([filter.to_string(), limit.to_string(), "2000".into()]);
    args.push(if dry { "1" } else { "0" }.into());
    if !cursor.is_null() {
        args.push(cursor.to_string());
    }
    let reply = qless.call("search.act", now, args).await.unwrap();
    let text: String = redis::from_redis_value(reply).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn jids(found: &Value) -> Vec<String> {
    found["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["jid"].as_str().unwrap().to_owned())
        .collect()
}

/// Searches until done: every jid found in order, and the calls it took.
async fn walk(qless: &Qless, now: f64, filter: Value, limit: u32, scan: u32) -> (Vec<String>, u32) {
    let (mut found, mut calls, mut cursor) = (Vec::new(), 0, Value::Null);
    loop {
        let page = search(qless, now, filter.clone(), limit, scan, &cursor).await;
        calls += 1;
        assert!(
            page["examined"].as_u64().unwrap() <= u64::from(scan),
            "{page}"
        );
        found.extend(jids(&page));
        if page["done"] == true {
            assert_eq!(page["cursor"], Value::Null);
            return (found, calls);
        }
        cursor = page["cursor"].clone();
        assert!(calls < 1000, "the walk does not end");
    }
}

/// Puts, leases and fails `jid` into `group` at `now`.
async fn failed(qless: &Qless, now: f64, queue: &str, jid: &str, group: &str) {
    put(qless, now, queue, jid).await;
    assert_eq!(pop(qless, now, queue, "w", 1).await, [jid]);
    qless
        .fail(now, jid, "w", group, "broke", None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_filter_walks_the_smallest_index_it_allows() {
    let (_redis, qless) = start().await;
    for n in 0..40 {
        let mut args = job("q", &format!("j{n:02}"));
        if n % 20 == 0 {
            args.tags = Some(strs(&["rare"]));
        }
        qless.put(1.0, args).await.unwrap();
    }
    // The tag holds 2 jobs, the queue 40: the tag's set is walked.
    let both = search(
        &qless,
        2.0,
        json!({"queue": "q", "tag": "rare"}),
        25,
        5,
        &Value::Null,
    )
    .await;
    assert_eq!(both["examined"], 2, "{both}");
    assert_eq!(both["done"], true);
    assert_eq!(jids(&both), ["j00", "j20"]);
    // Without the tag, the queue: five entries looked at, and where to go on.
    let queue = search(
        &qless,
        2.0,
        json!({"queue": "q", "klass": "Other"}),
        25,
        5,
        &Value::Null,
    )
    .await;
    assert_eq!(
        (&queue["examined"], &queue["done"]),
        (&json!(5), &json!(false)),
        "{queue}"
    );
    assert_eq!(jids(&queue), Vec::<String>::new());
    let cursor = &queue["cursor"];
    assert_eq!(cursor[0], "queue", "{cursor}");
    assert_eq!((&cursor[1], &cursor[2]), (&json!(1), &json!(5)), "{cursor}");
    assert!(cursor[3].is_string(), "the anchor: {cursor}");
    // The smaller index is chosen when a call starts, and kept by its cursor.
    let (found, calls) = walk(&qless, 2.0, json!({"queue": "q", "klass": "K"}), 1000, 7).await;
    assert_eq!(found.len(), 40);
    assert_eq!(calls, 6, "40 entries, 7 a call");
}

#[tokio::test]
async fn one_call_looks_at_no_more_than_scan_entries_however_many_there_are() {
    let (_redis, qless) = start().await;
    let mut calls = Vec::new();
    for n in 0..300 {
        let jid = format!("f{n:03}");
        calls.push(("put", strs(&["", "q", &jid, "K", "{}", "0"])));
    }
    for result in qless.call_many(1.0, &calls).await.unwrap() {
        result.unwrap();
    }
    assert_eq!(pop(&qless, 2.0, "q", "w", 300).await.len(), 300);
    let fails: Vec<(&'static str, Vec<String>)> = (0..300)
        .map(|n| ("fail", strs(&[&format!("f{n:03}"), "w", "boom", "broke"])))
        .collect();
    for result in qless.call_many(3.0, &fails).await.unwrap() {
        result.unwrap();
    }
    // Nothing matches: each call looks at 50 entries, until the group's end.
    let (found, calls) = walk(&qless, 4.0, json!({"group": "boom", "klass": "No"}), 25, 50).await;
    assert!(found.is_empty());
    assert_eq!(calls, 6);
    // Everything matches: a call stops at `limit`; the oldest failure comes first.
    let first = search(&qless, 4.0, json!({"group": "boom"}), 3, 50, &Value::Null).await;
    assert_eq!(jids(&first), ["f000", "f001", "f002"]);
    assert_eq!(first["examined"], 3);
    let (found, _) = walk(&qless, 4.0, json!({"group": "boom"}), 40, 50).await;
    let expected: Vec<String> = (0..300).map(|n| format!("f{n:03}")).collect();
    assert_eq!(found, expected);
}

#[tokio::test]
async fn stalled_is_an_expired_lock_or_a_timeout_and_running_a_live_lock() {
    let (_redis, qless) = start().await;
    qless.config_set(0.0, "heartbeat", "10").await.unwrap();
    // (Put one after another: pop takes them in that order.)
    for (n, jid) in ["early", "late", "out", "waits"].into_iter().enumerate() {
        put(&qless, n as f64 / 10.0, "q", jid).await;
    }
    assert_eq!(pop(&qless, 0.0, "q", "w", 1).await, ["early"]);
    assert_eq!(pop(&qless, 5.0, "q", "w", 1).await, ["late"]);
    assert_eq!(pop(&qless, 5.0, "q", "w", 1).await, ["out"]);
    qless.timeout(6.0, &strs(&["out"])).await.unwrap();
    let at = |now: f64, state: &'static str| {
        let qless = qless.clone();
        async move {
            let found = search(
                &qless,
                now,
                json!({"queue": "q", "state": state}),
                25,
                100,
                &Value::Null,
            )
            .await;
            let mut found = jids(&found);
            found.sort();
            found
        }
    };
    assert_eq!(at(12.0, "stalled").await, ["early", "out"]);
    assert_eq!(at(12.0, "running").await, ["late"]);
    assert_eq!(at(12.0, "waiting").await, ["waits"]);
    assert_eq!(at(20.0, "stalled").await, ["early", "late", "out"]);
    assert_eq!(at(20.0, "running").await, Vec::<String>::new());
    // A worker's jobs: those it holds, its timed-out one included.
    let held = search(
        &qless,
        12.0,
        json!({"worker": "w", "state": "stalled"}),
        25,
        100,
        &Value::Null,
    )
    .await;
    let mut held = jids(&held);
    held.sort();
    assert_eq!(held, ["early", "out"]);
}

#[tokio::test]
async fn the_last_history_time_is_read_from_the_list_and_from_the_compact_field() {
    let redis = RedisServer::start();
    for namespace in [None, Some("tenant")] {
        let qless = connect(&redis, namespace).await;
        put(&qless, 100.0, "q", "a").await;
        put(&qless, 100.0, "q", "b").await;
        put(&qless, 100.0, "q", "c").await;
        assert_eq!(pop(&qless, 200.5, "q", "w", 1).await, ["c"]);
        complete(&qless, 300.0, "c", "w", "q").await;
        qless.log(310.0, "b", "looked at", None).await.unwrap();
        let times = |since: f64, until: f64| {
            let qless = qless.clone();
            async move {
                let mut found = Vec::new();
                for filter in [
                    json!({"queue": "q", "since": since, "until": until}),
                    json!({"state": "complete", "since": since, "until": until}),
                ] {
                    found.extend(jids(
                        &search(&qless, 400.0, filter, 25, 100, &Value::Null).await,
                    ));
                }
                found.sort();
                found
            }
        };
        assert_eq!(times(100.0, 100.0).await, ["a"], "{namespace:?}");
        assert_eq!(times(0.0, 299.0).await, ["a"], "{namespace:?}");
        assert_eq!(times(300.0, 300.0).await, ["c"], "{namespace:?}");
        assert_eq!(times(301.0, 1000.0).await, ["b"], "{namespace:?}");
    }
}

#[tokio::test]
async fn a_search_and_a_dry_run_write_nothing() {
    let (redis, qless) = start().await;
    failed(&qless, 1.0, "q", "x", "boom").await;
    qless.tag_add(1.0, "x", &strs(&["t"])).await.unwrap();
    put(&qless, 1.0, "q", "y").await;
    let mut conn = redis.client().get_connection().unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(qlessd::core::script::READ_ONLY_SOURCE)
        .query(&mut conn)
        .unwrap();
    // Redis refuses any write of a `no-writes` script.
    let run = |conn: &mut redis::Connection, args: &[&str]| {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .arg(args)
            .query::<String>(conn)
    };
    let found = run(&mut conn, &["search", "2", r#"{"queue":"q"}"#, "25", "100"]).unwrap();
    assert!(found.contains(r#""jid":"y""#), "{found}");
    for action in [
        ["retry", ""],
        ["cancel", ""],
        ["move", "z"],
        ["unfail", ""],
        ["priority", "3"],
        ["tag", r#"["new"]"#],
        ["untag", r#"["t"]"#],
    ] {
        let mut args = vec![
            "search.act",
            "2",
            action[0],
            action[1],
            r#"{"group":"boom"}"#,
            "25",
            "100",
            "1",
        ];
        let dry = run(&mut conn, &args).unwrap();
        assert!(dry.contains(r#""matched":1"#), "{action:?}: {dry}");
        args[7] = "0";
        let refused = run(&mut conn, &args).unwrap_err().to_string();
        assert!(
            refused.contains("Write commands are not allowed"),
            "{action:?}: {refused}"
        );
    }
}

#[tokio::test]
async fn an_action_keeps_its_place_in_the_list_it_empties() {
    let (_redis, qless) = start().await;
    for n in 0..10 {
        failed(&qless, f64::from(n), "q", &format!("f{n}"), "boom").await;
    }
    // Each call retries the three oldest left: the list loses them, and the cursor
    // stays at the tail.
    let mut cursor = Value::Null;
    let mut retried = Vec::new();
    loop {
        let before = search(&qless, 20.0, json!({"group": "boom"}), 3, 100, &Value::Null).await;
        let answer = act(
            &qless,
            20.0,
            ("retry", ""),
            json!({"group": "boom"}),
            3,
            false,
            &cursor,
        )
        .await;
        if answer["done"] == true {
            retried.extend(jids(&before));
            break;
        }
        assert_eq!(answer["changed"], 3, "{answer}");
        assert_eq!(
            answer["cursor"][2], 0,
            "the position after taking 3 out: {answer}"
        );
        retried.extend(jids(&before));
        cursor = answer["cursor"].clone();
    }
    assert_eq!(
        retried,
        (0..10).map(|n| format!("f{n}")).collect::<Vec<_>>()
    );
    // A dry run leaves the list as it is and walks on.
    for n in 0..4 {
        failed(&qless, 30.0, "q2", &format!("g{n}"), "again").await;
    }
    let dry = act(
        &qless,
        40.0,
        ("unfail", ""),
        json!({"group": "again"}),
        3,
        true,
        &Value::Null,
    )
    .await;
    assert_eq!(
        (&dry["changed"], &dry["cursor"][2]),
        (&json!(3), &json!(3)),
        "{dry}"
    );
    let rest = act(
        &qless,
        40.0,
        ("unfail", ""),
        json!({"group": "again"}),
        3,
        true,
        &dry["cursor"],
    )
    .await;
    assert_eq!(
        (&rest["changed"], &rest["done"]),
        (&json!(1), &json!(true)),
        "{rest}"
    );
}

#[tokio::test]
async fn the_failed_index_walks_every_group_in_turn_and_goes_on_when_one_empties() {
    let (_redis, qless) = start().await;
    for (group, jids) in [
        ("a", ["a1", "a2"]),
        ("b", ["b1", "b2"]),
        ("c", ["c1", "c2"]),
    ] {
        for jid in jids {
            failed(&qless, 1.0, "q", jid, group).await;
        }
    }
    let filter = json!({"state": "failed"});
    let first = search(&qless, 2.0, filter.clone(), 3, 100, &Value::Null).await;
    assert_eq!(jids(&first), ["a1", "a2", "b1"]);
    assert_eq!(
        (&first["cursor"][0], &first["cursor"][1]),
        (&json!("failed"), &json!("b"))
    );
    // Group b empties meanwhile: the walk goes on with c.
    qless.cancel(2.0, &strs(&["b2"])).await.unwrap();
    qless.cancel(2.0, &strs(&["b1"])).await.unwrap();
    let rest = search(&qless, 2.0, filter, 3, 100, &first["cursor"]).await;
    assert_eq!(jids(&rest), ["c1", "c2"]);
    assert_eq!(rest["done"], true);
}

#[tokio::test]
async fn malformed_arguments_are_refused_naming_them() {
    let (_redis, qless) = start().await;
    put(&qless, 1.0, "q", "a").await;
    let search = |args: Vec<String>| {
        let qless = qless.clone();
        async move { qless.call("search", 1.0, args).await }
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["nope"],
            r#"Search(): Arg "filter" is not a JSON object"#,
        ),
        (
            vec![r#"{"queue":1}"#],
            r#"field "queue" must be a non-empty string"#,
        ),
        (
            vec![r#"{"queue":""}"#],
            r#"field "queue" must be a non-empty string"#,
        ),
        (
            vec![r#"{"queue":"q","colour":"red"}"#],
            r#"unknown field "colour""#,
        ),
        (
            vec![r#"{"queue":"q","state":"sleeping"}"#],
            r#"field "state" is not a state"#,
        ),
        (
            vec![r#"{"queue":"q","since":"x"}"#],
            r#"field "since" must be a finite number"#,
        ),
        (
            vec![r#"{"queue":"q","data":3}"#],
            r#"field "data" must be an object"#,
        ),
        (
            vec![r#"{"queue":"q","data":{"a..b":1}}"#],
            "empty path segment",
        ),
        (
            vec![r#"{"klass":"K"}"#],
            "The filter has no index to search",
        ),
        (
            vec![r#"{"queue":"q"}"#, "0"],
            r#"Arg "limit" must be a positive integer"#,
        ),
        (
            vec![r#"{"queue":"q"}"#, "5", "-1"],
            r#"Arg "scan" must be a positive integer"#,
        ),
        (
            vec![r#"{"queue":"q"}"#, "5", "5", "junk"],
            r#"Arg "cursor" is not a cursor of this filter"#,
        ),
        (
            vec![r#"{"queue":"q"}"#, "5", "5", r#"["tag",1,0,false,false]"#],
            r#"Arg "cursor""#,
        ),
        (
            vec![r#"{"queue":"q"}"#, "5", "5", r#"["queue",5,0,false,false]"#],
            r#"Arg "cursor""#,
        ),
        (
            vec![
                r#"{"queue":"q"}"#,
                "5",
                "5",
                r#"["queue",1,-1,false,false]"#,
            ],
            r#"Arg "cursor""#,
        ),
        (
            vec![
                r#"{"queue":"q"}"#,
                "5",
                "5",
                r#"["queue",1,1e300,false,false]"#,
            ],
            r#"Arg "cursor""#,
        ),
        (
            vec![r#"{"queue":"q"}"#, "5", "5", r#"["queue",1,0,false,"nan"]"#],
            r#"Arg "cursor""#,
        ),
    ];
    for (args, needle) in cases {
        assert_error(search(strs(&args)).await, needle);
    }
    let act = |args: &[&str]| {
        let qless = qless.clone();
        let args = strs(args);
        async move { qless.call("search.act", 1.0, args).await }
    };
    let filter = r#"{"queue":"q"}"#;
    assert_error(
        act(&["explode", "", filter, "5", "5", "0"]).await,
        r#"Arg "action" must be retry"#,
    );
    assert_error(
        act(&["move", "", filter, "5", "5", "0"]).await,
        "Queue(): no queue name provided",
    );
    assert_error(
        act(&["priority", "inf", filter, "5", "5", "0"]).await,
        r#"Arg "priority" not a number"#,
    );
    assert_error(
        act(&["tag", "[]", filter, "5", "5", "0"]).await,
        r#"Arg "tags" must be a non-empty JSON list"#,
    );
    assert_error(
        act(&["tag", "x", filter, "5", "5", "0"]).await,
        r#"Arg "tags""#,
    );
    assert_error(
        act(&["retry", "", filter, "5", "5", "2"]).await,
        r#"Arg "dry" must be 0 or 1"#,
    );
    // Nothing was changed by any of them.
    let found = search_found(&qless).await;
    assert_eq!(found["jobs"][0]["state"], "waiting");
}

async fn search_found(qless: &Qless) -> Value {
    search(qless, 1.0, json!({"queue": "q"}), 25, 100, &Value::Null).await
}

#[tokio::test]
async fn jobs_leaving_a_failure_list_deep_inside_leave_the_rest_in_order() {
    let (redis, qless) = start().await;
    for n in 0..20 {
        let jid = format!("f{n:02}");
        let mut args = job("q", &jid);
        if n % 5 == 3 {
            args.klass = "Deep".into();
        }
        qless.put(f64::from(n), args).await.unwrap();
        assert_eq!(pop(&qless, f64::from(n), "q", "w", 1).await, [jid.as_str()]);
        qless
            .fail(f64::from(n), &jid, "w", "boom", "broke", None)
            .await
            .unwrap();
    }
    let list = |redis: &RedisServer| -> Vec<String> {
        let mut conn = redis.client().get_connection().unwrap();
        redis::cmd("LRANGE")
            .arg("ql:f:boom")
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap()
    };
    let before = list(&redis);
    // The matching jobs (f03, f08, f13, f18) are spread through the list: each call
    // takes two, and the others stay where they were.
    let filter = json!({"group": "boom", "klass": "Deep"});
    let first = act(
        &qless,
        30.0,
        ("unfail", ""),
        filter.clone(),
        2,
        false,
        &Value::Null,
    )
    .await;
    assert_eq!(
        (&first["changed"], &first["done"]),
        (&json!(2), &json!(false)),
        "{first}"
    );
    let rest = act(
        &qless,
        30.0,
        ("unfail", ""),
        filter.clone(),
        2,
        false,
        &first["cursor"],
    );
    let rest = rest.await;
    assert_eq!(
        (&rest["changed"], &rest["done"]),
        (&json!(2), &json!(false)),
        "{rest}"
    );
    let end = act(
        &qless,
        30.0,
        ("unfail", ""),
        filter,
        2,
        false,
        &rest["cursor"],
    )
    .await;
    assert_eq!(
        (&end["examined"], &end["done"]),
        (&json!(1), &json!(true)),
        "{end}"
    );
    let kept: Vec<String> = before
        .into_iter()
        .filter(|jid| !["f03", "f08", "f13", "f18"].contains(&jid.as_str()))
        .collect();
    assert_eq!(list(&redis), kept);
    for jid in ["f03", "f08", "f13", "f18"] {
        assert_eq!(super::jobs::state(&qless, jid).await, "waiting", "{jid}");
    }
    let groups = qless
        .call("failed", 31.0, Vec::<String>::new())
        .await
        .unwrap();
    let groups: String = redis::from_redis_value(groups).unwrap();
    assert_eq!(groups, r#"{"boom":16}"#);
    // The whole group, in one call: the group is gone from the failures.
    let all = act(
        &qless,
        32.0,
        ("cancel", ""),
        json!({"group": "boom"}),
        100,
        false,
        &Value::Null,
    )
    .await;
    assert_eq!(all["changed"], 16, "{all}");
    assert!(list(&redis).is_empty());
    let groups = qless
        .call("failed", 33.0, Vec::<String>::new())
        .await
        .unwrap();
    let groups: String = redis::from_redis_value(groups).unwrap();
    assert_eq!(groups, "{}");
}
