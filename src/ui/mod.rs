//! The dashboard at `/ui`: server-rendered HTML (maud) with server-drawn SVG charts and
//! one vendored script (htmx, `assets/`), compiled into the binary so it works offline.
//!
//! Pages are GETs under `/ui`; every action is a POST form to a route under `/ui`
//! carrying the session's form token (`session`), answered with a redirect back to a page
//! (post/redirect/get), so the dashboard works without scripts and the browser's back
//! button never resends an action (the search page's bulk actions answer with their
//! counts and a "continue" form instead: see `search`). Handlers call the same
//! `core::Qless` methods as the API's handlers, with the server's clock: there is no
//! second path into Redis.
//!
//! Every listing is paged ([`PAGE`] rows), so a page costs the same with a thousand
//! queues or a hundred thousand jobs in one.

mod actions;
mod batches;
mod charts;
mod graph;
mod live;
mod pages;
mod push;
mod search;
mod session;

use std::sync::Arc;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::extract::rejection::PathRejection;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::auth::{Grants, Scope};
use crate::error::ApiError;
use crate::model::NameError;
use crate::state::AppState;

pub use live::Throughput;

/// Rows per page in every listing.
const PAGE: u32 = 25;

/// The vendored htmx (BSD Zero Clause License, `assets/htmx.LICENSE`).
const HTMX: &str = include_str!("assets/htmx.min.js");

/// The dashboard's stylesheet.
const STYLE: &str = include_str!("assets/style.css");

/// What the dashboard's handlers reach: the application state and the throughput
/// counters fed by the event stream.
#[derive(Clone)]
struct Ui {
    app: AppState,
    throughput: Arc<Throughput>,
}

/// The dashboard's routes (already given their state, to merge into the app).
/// Must be called inside a tokio runtime: it starts counting completions and failures
/// from the script's events for the overview's throughput chart.
pub fn router(app: AppState) -> Router {
    let throughput = Throughput::start(&app.events);
    let ui = Ui { app, throughput };
    Router::new()
        .route("/ui", get(pages::overview))
        .route("/ui/", get(pages::overview))
        .route("/ui/partials/overview", get(pages::overview_partial))
        .route("/ui/live", get(live::stream))
        .route("/ui/login", get(pages::login).post(actions::login))
        .route("/ui/logout", post(actions::logout))
        .route("/ui/assets/htmx.min.js", get(htmx))
        .route("/ui/assets/style.css", get(style))
        .route("/ui/search", get(search::page))
        .route("/ui/search/{action}", post(search::act))
        .route("/ui/queues/{queue}", get(pages::queue))
        .route("/ui/queues/{queue}/push", get(push::page))
        .route("/ui/queues/{queue}/pause", post(actions::pause))
        .route("/ui/queues/{queue}/unpause", post(actions::unpause))
        .route("/ui/jobs/{jid}", get(pages::job))
        .route("/ui/jobs/{jid}/{action}", post(actions::job))
        .route("/ui/failures", get(pages::failures))
        .route("/ui/failures/{group}", get(pages::failure_group))
        .route(
            "/ui/failures/{group}/{action}",
            post(actions::failure_group),
        )
        .route("/ui/workers", get(pages::workers))
        .route("/ui/workers/{worker}", get(pages::worker))
        .route("/ui/tags", get(pages::tags))
        .route("/ui/tracked", get(pages::tracked))
        .route("/ui/recurring", get(pages::recurring_list))
        .route("/ui/recurring/{jid}", get(pages::recurring))
        .route("/ui/recurring/{jid}/{action}", post(actions::recurring))
        .route("/ui/throttles", get(pages::throttles))
        .route("/ui/config", get(pages::config).post(actions::config))
        .route("/ui/batches/{bid}", get(batches::batch))
        .route("/ui/workflows/{wid}", get(batches::workflow))
        .layer(axum::middleware::from_fn(session::with_form_token))
        .with_state(ui)
}

async fn htmx() -> Response {
    asset("text/javascript; charset=utf-8", HTMX)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=3600"),
            ),
        ],
        body,
    )
        .into_response()
}

/// What the request's token may do on the dashboard: without `--auth-file` everything;
/// with it, actions only for tokens with `admin` (the scope of the actions' API twins).
#[derive(Debug, Clone, Copy)]
struct Can {
    admin: bool,
}

impl<S: Send + Sync> FromRequestParts<S> for Can {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let grants = parts.extensions.get::<Grants>();
        Ok(Can {
            admin: grants.is_none_or(|g| g.allow(Scope::Admin)),
        })
    }
}

/// The token every action form carries: the session's (see `session`), so another
/// site's page cannot forge a dashboard action.
fn csrf_token() -> String {
    session::current()
}

/// An error shown as an HTML page with the API's status and (sanitized) detail.
struct UiError(ApiError);

impl From<ApiError> for UiError {
    fn from(err: ApiError) -> Self {
        UiError(err)
    }
}

impl From<NameError> for UiError {
    fn from(err: NameError) -> Self {
        UiError(err.into())
    }
}

impl From<PathRejection> for UiError {
    fn from(rejection: PathRejection) -> Self {
        UiError(rejection.into())
    }
}

/// Path parameters (names check themselves as they are read), refused with the
/// dashboard's error page rather than axum's plain text.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(UiError))]
struct Path<T>(T);

impl From<crate::core::Error> for UiError {
    fn from(err: crate::core::Error) -> Self {
        UiError(err.into())
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let detail = self.0.problem().detail;
        if status.is_server_error() {
            tracing::warn!(%status, error = %self.0, "dashboard request failed");
        }
        let body = layout(
            "Error",
            html! {
                h1 { "Error " (status.as_u16()) }
                p.error { (detail) }
                p { a href="/ui" { "Back to the overview" } }
            },
        );
        (status, body).into_response()
    }
}

type UiResult<T = Markup> = Result<T, UiError>;

/// Answers a refused action (bad CSRF token, bad input) with a 4xx page.
fn refused(status: StatusCode, message: &str) -> UiError {
    UiError(match status {
        StatusCode::NOT_FOUND => ApiError::NotFound(message.to_owned()),
        _ => ApiError::BadRequest(message.to_owned()),
    })
}

/// The page frame: navigation, search box, "Log out" when the request came with a
/// token, and the content.
fn layout(title: &str, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // A title holds no markup: the title, which may be a name, is isolated
                // with the first-strong isolate and its closing mark instead.
                title { "\u{2068}" (title) "\u{2069} · qlessd" }
                link rel="stylesheet" href="/ui/assets/style.css";
                script src="/ui/assets/htmx.min.js" defer {}
            }
            body {
                nav {
                    a.brand href="/ui" { "qlessd" }
                    a href="/ui" { "Overview" }
                    a href="/ui/failures" { "Failures" }
                    a href="/ui/workers" { "Workers" }
                    a href="/ui/tags" { "Tags" }
                    a href="/ui/tracked" { "Tracked" }
                    a href="/ui/recurring" { "Recurring" }
                    a href="/ui/throttles" { "Throttles" }
                    a href="/ui/config" { "Config" }
                    a href="/ui/search" { "Search" }
                    a href="/docs" { "API" }
                    form.search action="/ui/search" method="get" {
                        input type="search" name="q" placeholder="jid or tag" aria-label="Search by jid or tag";
                    }
                    @if session::signed_in() {
                        form.inline method="post" action="/ui/logout" {
                            (csrf_field())
                            button.logout type="submit" { "Log out" }
                        }
                    }
                }
                main { (content) }
            }
        }
    }
}

/// A POST form with the CSRF token and one submit button.
fn action_button(action: &str, label: &str, class: &str, fields: &[(&str, &str)]) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf_token());
            @for (name, value) in fields {
                input type="hidden" name=(name) value=(value);
            }
            button class=(class) type="submit" { (label) }
        }
    }
}

/// Hidden CSRF field for hand-built forms.
fn csrf_field() -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf_token()); }
}

/// "Previous / next" links for a listing at `offset` of `total` (when known).
fn pager(base: &str, offset: u32, shown: usize, total: Option<i64>) -> Markup {
    let sep = if base.contains('?') { '&' } else { '?' };
    let has_next = match total {
        Some(total) => i64::from(offset) + (shown as i64) < total,
        None => shown as u32 == PAGE,
    };
    html! {
        div.pager {
            @if offset > 0 {
                a rel="prev" href=(format!("{base}{sep}offset={}", offset.saturating_sub(PAGE))) { "← previous" }
            }
            span {
                @if shown == 0 { "none" } @else { (offset + 1) "–" (offset as usize + shown) }
                @if let Some(total) = total { " of " (total) }
            }
            @if has_next {
                a rel="next" href=(format!("{base}{sep}offset={}", offset + PAGE)) { "next →" }
            }
        }
    }
}

/// Percent-encodes one path segment (queue, jid, group, tag names in links).
fn seg(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A time in seconds since the epoch as UTC text.
fn when(seconds: f64) -> String {
    if seconds <= 0.0 {
        return "—".to_owned();
    }
    let secs = seconds as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) in the proleptic Gregorian calendar.
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A name (queue, job, worker, tag, ...) isolated from the text around it (`<bdi>`):
/// whatever direction its characters take, they cannot reorder the page around it.
fn name(text: &str) -> Markup {
    html! { bdi { (text) } }
}

/// Names separated by commas, each isolated ([`name`]).
fn names(list: &[String]) -> Markup {
    html! {
        @for (i, text) in list.iter().enumerate() {
            @if i > 0 { ", " }
            (name(text))
        }
    }
}

/// Raw markup for trusted, server-made text (SVG built by `charts`).
fn trusted(text: String) -> PreEscaped<String> {
    PreEscaped(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_render_as_utc_dates() {
        assert_eq!(when(1_700_000_000.0), "2023-11-14 22:13:20Z");
        assert_eq!(when(0.0), "—");
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(seg("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(seg("emails-1.x"), "emails-1.x");
    }
}
