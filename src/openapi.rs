//! The OpenAPI document: the top-level description (`openapi_description.md`: errors,
//! the naming rule, the status-code rule), the paths and schemas gathered from the
//! routes that declare them (utoipa-axum), then one pass giving each operation's error
//! responses an example, one giving every operation the answers it shares with others
//! (the browser checks' 403, 415 and 421, the token check's 401 and 403), and one
//! giving each operation its security requirement (`security: []` when open). Every
//! error response's body is a `$ref` to the one `Problem` schema, so a generated client
//! has a single error type.

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr, ResponseBuilder};

use crate::auth::{self, Access};
use crate::routes;

/// Document-level metadata; the paths come from [`routes::router`].
#[derive(OpenApi)]
#[openapi(
    info(
        title = "qlessd",
        description = include_str!("openapi_description.md"),
        license(name = "MIT", identifier = "MIT"),
    ),
    // Generated clients default to the first server: qlessd's default address.
    servers((url = "http://127.0.0.1:5858", description = "qlessd on its default address \
        (`--listen`)")),
    components(
        responses(
            crate::model::PayloadTooLarge,
            crate::model::UnsupportedMediaType,
            crate::model::Unavailable,
        ),
        // Referenced by parameters and fields that keep a plain `String` type.
        schemas(crate::model::Name, crate::model::Text),
    ),
    tags(
        (name = "queues", description = "Queues: counts, putting jobs, leasing (pop), \
            peeking, listings by state, pausing, statistics"),
        (name = "jobs", description = "Jobs: inspection and the worker lifecycle \
            (heartbeat, complete, fail, retry), cancellation, priority, dependencies, \
            tags, tracking, history"),
        (name = "recurring", description = "Recurring jobs: templates spawning a job \
            every interval"),
        (name = "batches", description = "Batches: jobs put together, with callbacks \
            put once when they finish"),
        (name = "workflows", description = "Workflows: graphs of jobs that wait for each \
            other, with a policy for a parent's failure"),
        (name = "tags", description = "Tags: the most used tags and the jobs carrying one"),
        (name = "throttles", description = "Throttles: concurrency and rate limits \
            shared by the jobs that name them"),
        (name = "push", description = "Push delivery: a queue worked by an HTTP \
            endpoint that qlessd calls, signed (Standard Webhooks)"),
        (name = "failures", description = "Failure groups and putting failed jobs back"),
        (name = "workers", description = "Workers and the jobs they hold"),
        (name = "config", description = "Server-wide options stored in Redis \
            (heartbeat, grace-period, jobs-history, ...)"),
        (name = "events", description = "Server-Sent Events: job transitions, lost \
            locks and cancellations as they happen"),
        (name = "operations", description = "Health and readiness"),
        (name = "search", description = "Search: finding jobs by queue, state, class, \
            tag, worker, failure group, time, data or text, and acting on every job that \
            matches, a bounded slice per request"),
    )
)]
pub struct ApiDoc;

/// The complete document, as served at `/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = routes::router().split_for_parts();
    let mut base = ApiDoc::openapi();
    base.merge(doc);
    problem_examples(&mut base);
    describe_access(&mut base);
    base.webhooks = Some(push_webhook());
    base
}

/// The request qlessd sends to a pushed queue's endpoint (`PUT
/// /v1/queues/{queue}/push`), as the document's `webhooks`, so that receivers can be
/// generated from it too.
fn push_webhook() -> utoipa::openapi::Paths {
    use utoipa::openapi::path::OperationBuilder;
    use utoipa::openapi::response::ResponseBuilder;
    use utoipa::openapi::{HttpMethod, ObjectBuilder, PathItem, PathsBuilder, Type};

    let retry_after = utoipa::openapi::header::HeaderBuilder::new()
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(
            "Seconds, or an HTTP date: when to deliver the job again",
        ))
        .build();
    let operation = OperationBuilder::new()
        .operation_id(Some("receive_push_delivery"))
        .summary(Some("A job delivered to a pushed queue's endpoint"))
        .description(Some(
            "qlessd POSTs each job of a pushed queue to the queue's `url`, signed as the \
             Standard Webhooks specification says: verify `webhook-signature` with the \
             queue's secret (`whsec_...`) and any Standard Webhooks library. Delivery is at \
             least once: the same job may come again (the same `webhook-id`, a higher \
             `qlessd-attempt`), so make the work idempotent by `webhook-id`.\n\n\
             The body is the job, as `GET /v1/jobs/{jid}` shows it (the `Job` schema), \
             as `application/json`. It and the headers are described here rather than as \
             a request body and parameters: openapi-generator 7 writes code that does not \
             compile for a webhook's schemas and parameters, which would break every client \
             generated from this document; `openapi/push-receiver.json`, a document of \
             its own for the receiving side, has both, for generating a receiver. The \
             headers:\n\n\
             * `webhook-id`: the job's jid, the same for every attempt of the job;\n\
             * `webhook-timestamp`: when the delivery was signed, in seconds since the \
             epoch;\n\
             * `webhook-signature`: `v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<body>\">` \
             for each active secret (two during a rotation's grace), separated by spaces;\n\
             * `qlessd-attempt`: 1 for the job's first delivery, then 2, 3, ...;\n\
             * `traceparent`: the W3C trace context of the delivery, in the trace of the \
             request that put the job, when the job has one;\n\
             * `content-type: application/json`, `user-agent: qlessd/<version>`, and the \
             queue's own static headers.",
        ))
        .tag("push")
        .response(
            "2XX",
            ResponseBuilder::new().description(
                "The job is completed; a JSON body (up to `--max-job-size`) becomes its \
                 `result`",
            ),
        )
        .response(
            "429",
            ResponseBuilder::new()
                .description(
                    "The job is retried after `Retry-After` (without it, with its backoff); \
                     so is a 503",
                )
                .header("Retry-After", retry_after),
        )
        .response(
            "5XX",
            ResponseBuilder::new().description(
                "The job is retried with its backoff (as on 408, a timeout or a connection \
                 error); with its retries used up it fails into `push-http-<status>`",
            ),
        )
        .response(
            "4XX",
            ResponseBuilder::new().description(
                "Any other 4xx: the job fails at once into `push-http-<status>`, with the \
                 start of the body as its message",
            ),
        );
    PathsBuilder::new()
        .path("pushDelivery", PathItem::new(HttpMethod::Post, operation))
        .build()
}

/// A document of its own for the other side of push delivery: the endpoint a pushed
/// queue's `url` names, as a server that receives one operation. The main document's
/// `webhooks` entry cannot carry the body's schema or the headers as parameters
/// without breaking clients generated from it (see [`push_webhook`]); this one can, so
/// a receiver's types and server stub can be generated from it. Written to
/// `openapi/push-receiver.json` and checked against the code by a test.
pub fn push_receiver_document() -> serde_json::Value {
    use serde_json::{Value, json};

    let main = serde_json::to_value(document()).expect("the document serializes");
    let schemas = &main["components"]["schemas"];
    let mut needed = std::collections::BTreeMap::new();
    collect_refs(
        schemas,
        &json!({"$ref": "#/components/schemas/Job"}),
        &mut needed,
    );

    let header = |name: &str, description: &str, example: Value| {
        json!({
            "name": name,
            "in": "header",
            "required": true,
            "description": description,
            "schema": {"type": "string"},
            "example": example,
        })
    };
    let mut traceparent = header(
        "traceparent",
        "The W3C trace context of the delivery, in the trace of the request that put the \
         job; sent when the job has one.",
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    );
    traceparent["required"] = json!(false);
    let webhook = &main["webhooks"]["pushDelivery"]["post"];
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "qlessd push receiver",
            "version": main["info"]["version"],
            "description": "What qlessd sends to the endpoint of a pushed queue \
                (`PUT /v1/queues/{queue}/push` in qlessd's API) and what each answer does. \
                The server here is yours: generate a receiver's types or a server stub from \
                this document. Verify `webhook-signature` with the queue's secret \
                (`whsec_...`) and any Standard Webhooks library before trusting the body. \
                Delivery is at least once: the same job may come again (the same \
                `webhook-id`, a higher `qlessd-attempt`), so make the work idempotent by \
                `webhook-id`.",
        },
        "servers": [{
            "url": "{endpoint}",
            "description": "The `url` the queue is pushed to",
            "variables": {"endpoint": {"default": "https://example.com/jobs"}},
        }],
        "paths": {
            "/": {
                "post": {
                    "operationId": "receive_push_delivery",
                    "summary": "A job delivered to a pushed queue's endpoint",
                    "parameters": [
                        header(
                            "webhook-id",
                            "The job's jid: the same for every attempt of the job.",
                            json!("0c4f1d3e9f6b4a7d8e2a5b6c7d8e9f01"),
                        ),
                        header(
                            "webhook-timestamp",
                            "When the delivery was signed, in seconds since the epoch.",
                            json!("1795760085"),
                        ),
                        header(
                            "webhook-signature",
                            "`v1,<base64 HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<body>\">` \
                             for each active secret (two during a rotation's grace), separated \
                             by spaces.",
                            json!("v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="),
                        ),
                        header(
                            "qlessd-attempt",
                            "1 for the job's first delivery, then 2, 3, ...",
                            json!("1"),
                        ),
                        traceparent,
                    ],
                    "requestBody": {
                        "required": true,
                        "description": "The job, as `GET /v1/jobs/{jid}` shows it.",
                        "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Job"},
                        }},
                    },
                    "responses": webhook["responses"],
                },
            },
        },
        "components": {"schemas": needed},
    })
}

/// Adds to `found` every schema of `schemas` that `value` refers to, and those they
/// refer to in turn.
fn collect_refs(
    schemas: &serde_json::Value,
    value: &serde_json::Value,
    found: &mut std::collections::BTreeMap<String, serde_json::Value>,
) {
    match value {
        serde_json::Value::Object(fields) => {
            if let Some(name) = fields
                .get("$ref")
                .and_then(|target| target.as_str())
                .and_then(|target| target.strip_prefix("#/components/schemas/"))
                && !found.contains_key(name)
            {
                let schema = schemas[name].clone();
                found.insert(name.to_owned(), schema.clone());
                collect_refs(schemas, &schema, found);
            }
            for field in fields.values() {
                collect_refs(schemas, field, found);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                collect_refs(schemas, item, found);
            }
        }
        _ => {}
    }
}

/// Gives every operation's own error response (a problem whose description says what
/// went wrong there) an example: its status, its `code`, and the description as the
/// detail. The shared responses (413, 415, 503) carry theirs already. A 409 that names
/// `lock_lost` gets each of its codes (`conflict`, `lock_lost`, and `timed_out` when it
/// names it) as named examples.
fn problem_examples(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::example::ExampleBuilder;

    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in operation.responses.responses.iter_mut() {
                let (RefOr::T(response), Ok(status)) = (response, status.parse::<u16>()) else {
                    continue;
                };
                let Some(RefOr::T(content)) = response.content.get_mut("application/problem+json")
                else {
                    continue;
                };
                let detail = response.description.replace('\n', " ");
                let title = code_of(status).1;
                let example =
                    |code: &str| crate::model::problem_example(status, title, code, &detail);
                if status == 409 && detail.contains("lock_lost") {
                    let codes: &[&str] = if detail.contains("timed_out") {
                        &["conflict", "lock_lost", "timed_out"]
                    } else {
                        &["conflict", "lock_lost"]
                    };
                    for &code in codes {
                        let named = ExampleBuilder::new().value(Some(example(code))).build();
                        content.examples.insert(code.to_owned(), named.into());
                    }
                } else {
                    content.example = Some(example(code_of(status).0));
                }
            }
        }
    }
}

/// The name of the security scheme in the document.
const BEARER: &str = "bearer";

/// Declares the bearer scheme and gives every operation the scope [`auth::ROUTES`]
/// says it needs: in its description, as its security requirement (the scope as the
/// role name), and with its 401 and 403 answers. Open operations say so.
fn describe_access(doc: &mut utoipa::openapi::OpenApi) {
    if let Some(info) = doc.info.description.as_mut() {
        info.push_str(
            "\n\nWhen the server runs with `--auth-file`, requests carry \
             `Authorization: Bearer <secret>`; each operation names the scope it needs \
             (`admin` implies every scope). Without a known token the answer is a 401, with \
             a token lacking the scope or the namespace a 403. A gateway serving several \
             namespaces takes a request's from its `Qless-Namespace` header; without one, \
             the token's when it is granted exactly one, else the server's default.",
        );
    }
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    let problem = |status: u16, description: &str| {
        let (code, title) = code_of(status);
        let mut content = Content::new(Some(Ref::from_schema_name("Problem")));
        content.example = Some(crate::model::problem_example(
            status,
            title,
            code,
            description,
        ));
        ResponseBuilder::new()
            .description(description)
            .content("application/problem+json", content)
            .build()
    };
    components.responses.insert(
        "Unauthorized".to_owned(),
        RefOr::T(problem(
            401,
            "No bearer token, a malformed `Authorization` header, or an unknown token \
             (with `WWW-Authenticate: Bearer`)",
        )),
    );
    components.responses.insert(
        "Forbidden".to_owned(),
        RefOr::T(problem(
            403,
            "The token lacks the scope this needs, or is not granted the namespace",
        )),
    );
    components.responses.insert(
        "Misdirected".to_owned(),
        RefOr::T(problem(
            421,
            "On a loopback address, a `Host` header naming another host (DNS \
             rebinding): only `localhost`, `127.0.0.1` and `[::1]` are answered",
        )),
    );
    components.responses.insert(
        "ForbiddenOrigin".to_owned(),
        RefOr::T(problem(
            403,
            "The token lacks the scope this needs or is not granted the namespace; or \
             the request comes from a web page of another origin (its `Origin` header \
             is neither this server nor a `--cors-origin`)",
        )),
    );
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            ("GET", &mut item.get),
            ("PUT", &mut item.put),
            ("POST", &mut item.post),
            ("PATCH", &mut item.patch),
            ("DELETE", &mut item.delete),
        ];
        for (method, operation) in operations {
            if let (Some(operation), Some(access)) = (operation, auth::access(method, path)) {
                describe_operation(operation, access);
                describe_browser_checks(operation, method);
            }
        }
    }
}

/// The answers of the browser checks every request meets before routing
/// (`browser.rs`): the `Host` check (421) on loopback addresses, and for a
/// state-changing method the `Origin` check (403) and the `Content-Type` check (415:
/// any body must be JSON, also where the operation takes none).
fn describe_browser_checks(operation: &mut Operation, method: &str) {
    let responses = &mut operation.responses.responses;
    responses.insert(
        "421".to_owned(),
        RefOr::Ref(Ref::from_response_name("Misdirected")),
    );
    if method != "GET" {
        responses.insert(
            "403".to_owned(),
            RefOr::Ref(Ref::from_response_name("ForbiddenOrigin")),
        );
        responses.insert(
            "415".to_owned(),
            RefOr::Ref(Ref::from_response_name("UnsupportedMediaType")),
        );
    }
}

/// The `code` and title a status carries when only one code is possible (see
/// `ApiError::code`).
fn code_of(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("bad_request", "Bad Request"),
        401 => ("unauthorized", "Unauthorized"),
        403 => ("forbidden", "Forbidden"),
        404 => ("not_found", "Not Found"),
        405 => ("method_not_allowed", "Method Not Allowed"),
        408 => ("request_timeout", "Request Timeout"),
        409 => ("conflict", "Conflict"),
        413 => ("payload_too_large", "Payload Too Large"),
        414 => ("uri_too_long", "URI Too Long"),
        415 => ("unsupported_media_type", "Unsupported Media Type"),
        421 => ("misdirected_request", "Misdirected Request"),
        429 => ("too_many_requests", "Too Many Requests"),
        500 => ("internal", "Internal Server Error"),
        503 => ("unavailable", "Service Unavailable"),
        _ => ("error", "Error"),
    }
}

fn describe_operation(operation: &mut Operation, access: Access) {
    let note = match access {
        Access::Open => "No token needed.".to_owned(),
        Access::Needs(scope) => format!("Scope: `{}`.", scope.word()),
    };
    operation.description = Some(match operation.description.take() {
        Some(description) => format!("{description}\n\n{note}"),
        None => note,
    });
    match access {
        // No requirement at all: a generated client sends no token.
        Access::Open => operation.security = Some(Vec::new()),
        Access::Needs(scope) => {
            operation.security = Some(vec![SecurityRequirement::new(BEARER, [scope.word()])]);
            let responses = &mut operation.responses.responses;
            for (status, name) in [("401", "Unauthorized"), ("403", "Forbidden")] {
                responses.insert(status.to_owned(), RefOr::Ref(Ref::from_response_name(name)));
            }
        }
    }
}
