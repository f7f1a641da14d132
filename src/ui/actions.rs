//! The dashboard's actions: POST forms carrying the form token, each doing what its
//! API twin does (same `core` call, same validation), then redirecting back to a page.

use std::str::FromStr;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use futures_util::future::try_join_all;

use super::{Path, Ui, UiError, UiResult, pages, refused, seg, session};
use crate::auth::LoginCheck;
use crate::core::{PutArgs, RecurUpdate, RequeueKeep};
use crate::model::{ConfigScalar, GroupName, Jid, NameError, OptionName, QueueName, Tag};
use crate::routes::validate;

/// Most jobs one "unfail all" or "cancel all" moves: a group larger than this takes
/// more clicks, so one request never runs unbounded.
const ALL_LIMIT: usize = 10_000;

/// Jobs read and moved per round of "all".
const ROUND: u32 = 500;

/// A form's fields, in order (a name may repeat), after the form token's check.
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    /// Parses `application/x-www-form-urlencoded` and checks the form token.
    pub(super) fn parse(body: &Bytes) -> Result<Form, UiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
            .map_err(|_| refused(StatusCode::BAD_REQUEST, "malformed form"))?;
        let token = pairs.iter().find(|(k, _)| k == "csrf").map(|(_, v)| v);
        if !token.is_some_and(|token| session::is_current(token)) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "missing or stale form token: reload the page and try again",
            ));
        }
        Ok(Form(pairs))
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
    }

    fn require(&self, name: &str) -> Result<&str, UiError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| refused(StatusCode::BAD_REQUEST, &format!("{name} is required")))
    }

    /// A required field holding a name (which checks itself as it is parsed).
    pub(super) fn name<N: FromStr<Err = NameError>>(&self, field: &str) -> Result<N, UiError> {
        Ok(self.require(field)?.parse()?)
    }

    /// Every value of a repeated field, each a name.
    fn names<N: FromStr<Err = NameError>>(&self, field: &str) -> Result<Vec<N>, UiError> {
        self.0
            .iter()
            .filter(|(k, _)| k == field)
            .map(|(_, v)| Ok(v.parse()?))
            .collect()
    }
}

/// `POST /ui/login`: keeps a token this server knows in an HttpOnly, SameSite=Strict
/// cookie for `/ui` (checked by the auth layer on each request, like a bearer header);
/// any other token is answered with the form again and a 401. Without `--auth-file`
/// there is nothing to log in to, and nothing is kept.
pub(super) async fn login(
    State(ui): State<Ui>,
    check: Option<Extension<LoginCheck>>,
    headers: HeaderMap,
    body: Bytes,
) -> UiResult<Response> {
    let form = Form::parse(&body)?;
    let token = form.require("token")?;
    let Some(Extension(check)) = check else {
        return Ok(Redirect::to("/ui").into_response());
    };
    // A cookie value cannot hold separators; no token `qlessd token` makes has them.
    if !token
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b";,\\\"".contains(&b))
        || !check.knows(token)
    {
        let page = pages::login_form(Some("That token is not one this server knows."));
        return Ok((StatusCode::UNAUTHORIZED, page).into_response());
    }
    let cookie = session::cookie(Some(token), ui.app.limits.secure_cookies, &headers);
    Ok(cookie_and_back(cookie, "/ui"))
}

/// `POST /ui/logout`: forgets the cookie.
pub(super) async fn logout(
    State(ui): State<Ui>,
    headers: HeaderMap,
    body: Bytes,
) -> UiResult<Response> {
    Form::parse(&body)?;
    let cookie = session::cookie(None, ui.app.limits.secure_cookies, &headers);
    Ok(cookie_and_back(cookie, "/ui/login"))
}

fn cookie_and_back(cookie: Option<header::HeaderValue>, to: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    if let Some(cookie) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

fn back(path: String) -> UiResult<Redirect> {
    Ok(Redirect::to(&path))
}

/// `POST /ui/queues/{queue}/pause`.
pub(super) async fn pause(
    State(ui): State<Ui>,
    Path(queue): Path<QueueName>,
    body: Bytes,
) -> UiResult<Redirect> {
    Form::parse(&body)?;
    ui.app
        .qless
        .pause(ui.app.clock.now(), &[queue.as_str().to_owned()])
        .await?;
    back(format!("/ui/queues/{}", seg(queue.as_str())))
}

/// `POST /ui/queues/{queue}/unpause`.
pub(super) async fn unpause(
    State(ui): State<Ui>,
    Path(queue): Path<QueueName>,
    body: Bytes,
) -> UiResult<Redirect> {
    Form::parse(&body)?;
    ui.app
        .qless
        .unpause(ui.app.clock.now(), &[queue.as_str().to_owned()])
        .await?;
    back(format!("/ui/queues/{}", seg(queue.as_str())))
}

/// Puts a job back into `queue` keeping everything else (the API's requeue with only
/// `queue` given); the script announces it to long polls there.
async fn requeue(ui: &Ui, jid: &str, queue: &str) -> Result<(), UiError> {
    let args = PutArgs {
        worker: String::new(),
        queue: queue.to_owned(),
        jid: jid.to_owned(),
        klass: String::new(),
        data: "{}".to_owned(),
        delay: 0.0,
        priority: None,
        tags: None,
        retries: None,
        depends: None,
        throttles: None,
        backoff: None,
        traceparent: None,
        start_by: None,
        max_run: None,
        partition: None,
    };
    let keep = RequeueKeep {
        klass: true,
        data: true,
    };
    ui.app
        .qless
        .requeue_keeping(ui.app.clock.now(), args, keep)
        .await?;
    Ok(())
}

/// `POST /ui/jobs/{jid}/{action}`: retry (back into its queue), cancel, move, priority,
/// tag, untag, track, untrack.
pub(super) async fn job(
    State(ui): State<Ui>,
    Path((jid, action)): Path<(Jid, String)>,
    body: Bytes,
) -> UiResult<Redirect> {
    let form = Form::parse(&body)?;
    let now = ui.app.clock.now();
    let qless = &ui.app.qless;
    let page = format!("/ui/jobs/{}", seg(jid.as_str()));
    let jid = String::from(jid);
    match action.as_str() {
        "retry" => {
            let Some(job) = qless.get(now, &jid).await? else {
                return Err(refused(StatusCode::NOT_FOUND, "no such job"));
            };
            if job.queue.is_empty() {
                return Err(refused(StatusCode::BAD_REQUEST, "the job is in no queue"));
            }
            requeue(&ui, &jid, &job.queue).await?;
        }
        "cancel" => {
            qless.cancel(now, std::slice::from_ref(&jid)).await?;
            return back("/ui".to_owned());
        }
        "move" => {
            let queue: QueueName = form.name("queue")?;
            requeue(&ui, &jid, queue.as_str()).await?;
        }
        "priority" => {
            let priority: f64 = form
                .require("priority")?
                .parse()
                .map_err(|_| refused(StatusCode::BAD_REQUEST, "priority must be a number"))?;
            validate::finite("priority", priority)?;
            qless.priority(now, &jid, priority).await?;
        }
        "tag" | "untag" => {
            let tag = String::from(form.name::<Tag>("tag")?);
            if action == "tag" {
                qless.tag_add(now, &jid, &[tag]).await?;
            } else {
                qless.tag_remove(now, &jid, &[tag]).await?;
            }
        }
        "track" => {
            qless.track(now, &jid).await?;
        }
        "untrack" => {
            qless.untrack(now, &jid).await?;
        }
        _ => return Err(refused(StatusCode::NOT_FOUND, "no such action")),
    }
    back(page)
}

/// `POST /ui/failures/{group}/{unfail|cancel}` with `scope=jobs` and the `jid`s (one
/// job, or the page shown), or `scope=all` (the whole group, up to [`ALL_LIMIT`]).
/// Unfailing puts each job back into the queue it failed in.
pub(super) async fn failure_group(
    State(ui): State<Ui>,
    Path((group, action)): Path<(GroupName, String)>,
    body: Bytes,
) -> UiResult<Redirect> {
    let form = Form::parse(&body)?;
    let group = String::from(group);
    let unfail = match action.as_str() {
        "unfail" => true,
        "cancel" => false,
        _ => return Err(refused(StatusCode::NOT_FOUND, "no such action")),
    };
    match form.get("scope") {
        Some("jobs") => {
            let jids = form.names::<Jid>("jid")?;
            validate::list("jid", &jids)?;
            move_or_cancel(&ui, &group, &Jid::into_strings(jids), unfail).await?;
        }
        Some("all") => {
            let mut done = 0;
            while done < ALL_LIMIT {
                let now = ui.app.clock.now();
                let page = ui.app.qless.failed_group(now, &group, 0, ROUND).await?;
                if page.jids.is_empty() {
                    break;
                }
                done += page.jids.len();
                move_or_cancel(&ui, &group, &page.jids, unfail).await?;
            }
        }
        _ => {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "scope must be jobs or all",
            ));
        }
    }
    back(format!("/ui/failures/{}", seg(&group)))
}

/// Unfails (into each job's own queue) or cancels the jobs of `jids` that are still
/// failed in `group`; jobs that moved on meanwhile are left alone.
async fn move_or_cancel(ui: &Ui, group: &str, jids: &[String], unfail: bool) -> UiResult<()> {
    let now = ui.app.clock.now();
    let jobs = ui.app.qless.multiget(now, jids).await?;
    let still: Vec<_> = jobs
        .into_iter()
        .filter(|j| j.state == "failed" && j.failure.as_ref().is_some_and(|f| f.group == group))
        .collect();
    if unfail {
        // Concurrent calls share invocations (the group commit), so a page moves in a
        // few round trips.
        try_join_all(still.iter().map(|j| requeue(ui, &j.jid, &j.queue))).await?;
    } else {
        let jids: Vec<String> = still.into_iter().map(|j| j.jid).collect();
        if !jids.is_empty() {
            ui.app.qless.cancel(now, &jids).await?;
        }
    }
    Ok(())
}

/// `POST /ui/recurring/{jid}/{update|delete}`.
pub(super) async fn recurring(
    State(ui): State<Ui>,
    Path((jid, action)): Path<(Jid, String)>,
    body: Bytes,
) -> UiResult<Redirect> {
    let form = Form::parse(&body)?;
    let jid = String::from(jid);
    let now = ui.app.clock.now();
    let qless = &ui.app.qless;
    match action.as_str() {
        "delete" => {
            qless.unrecur(now, &jid).await?;
            back("/ui/recurring".to_owned())
        }
        "update" => {
            let number = |name: &str| -> UiResult<Option<f64>> {
                match form.get(name).filter(|v| !v.is_empty()) {
                    None => Ok(None),
                    Some(v) => v.parse::<f64>().map(Some).map_err(|_| {
                        refused(StatusCode::BAD_REQUEST, &format!("{name} must be a number"))
                    }),
                }
            };
            let interval = number("interval")?;
            if interval.is_some_and(|i| !(i > 0.0 && i.is_finite())) {
                return Err(refused(
                    StatusCode::BAD_REQUEST,
                    "interval must be positive",
                ));
            }
            let priority = number("priority")?
                .map(|p| validate::finite("priority", p))
                .transpose()?;
            let wanted = form
                .get("tags")
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::parse::<Tag>)
                .collect::<Result<Vec<_>, _>>()?;
            validate::at_most_list("tag", &wanted)?;
            let wanted = Tag::into_strings(wanted);
            let Some(current) = qless.recur_get(now, &jid).await? else {
                return Err(refused(StatusCode::NOT_FOUND, "no such recurring job"));
            };
            // A cron template's form carries `cron` and `timezone`; changed ones make a
            // new schedule from now.
            let cron = match (form.get("cron"), form.get("timezone")) {
                (Some(cron), zone)
                    if Some(cron) != current.cron.as_deref()
                        || zone.is_some_and(|z| Some(z) != current.timezone.as_deref()) =>
                {
                    let zone = zone.filter(|z| !z.is_empty()).unwrap_or("UTC");
                    Some(
                        crate::cron::spec(cron.trim().to_owned(), zone, now)
                            .map_err(|err| refused(StatusCode::BAD_REQUEST, &err.to_string()))?,
                    )
                }
                _ => None,
            };
            let update = RecurUpdate {
                priority,
                interval,
                cron,
                ..RecurUpdate::default()
            };
            if !update.is_empty() {
                qless.recur_update(now, &jid, update).await?;
            }
            let gone: Vec<String> = current
                .tags
                .iter()
                .filter(|t| !wanted.contains(t))
                .cloned()
                .collect();
            let new: Vec<String> = wanted
                .iter()
                .filter(|t| !current.tags.contains(t))
                .cloned()
                .collect();
            if !gone.is_empty() {
                qless.recur_untag(now, &jid, &gone).await?;
            }
            if !new.is_empty() {
                qless.recur_tag(now, &jid, &new).await?;
            }
            back(format!("/ui/recurring/{}", seg(&jid)))
        }
        _ => Err(refused(StatusCode::NOT_FOUND, "no such action")),
    }
}

/// `POST /ui/config`: sets one option with the API's validation. The text is read as
/// JSON when it is a number or boolean, else as a string.
pub(super) async fn config(State(ui): State<Ui>, body: Bytes) -> UiResult<Redirect> {
    let form = Form::parse(&body)?;
    let option: OptionName = form.name("option")?;
    let option = option.as_str();
    let text = form.get("value").unwrap_or("");
    let value: ConfigScalar = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
            serde_json::from_value(v)
        }
        _ => serde_json::from_value(serde_json::Value::String(text.to_owned())),
    }
    .map_err(|_| refused(StatusCode::BAD_REQUEST, "bad value"))?;
    let now = ui.app.clock.now();
    // An option the server does not know is a custom one (the page lists only
    // options already stored).
    let known = crate::routes::config_text(option, &value, false);
    let stored = match known {
        Ok(text) => text,
        Err(_) if ui.app.qless.config_get(now, option).await?.is_some() => {
            crate::routes::config_text(option, &value, true)?
        }
        Err(err) => return Err(err.into()),
    };
    ui.app.qless.config_set(now, option, &stored).await?;
    back("/ui/config".to_owned())
}
