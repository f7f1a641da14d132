//! Several namespaces in one gateway. Each served namespace has its own application
//! state: its own script connection (so calls of different namespaces never share a
//! grouped invocation), event subscription, long-poll waiters and sweeper. A request
//! names its namespace with the `Qless-Namespace` header; without one it goes to the
//! namespace its token decided ([`Addressed`], set by `auth`), else to the default
//! (`--namespace`). Only namespaces fixed at start-up are served (`--namespace`,
//! `--namespaces`, and those the tokens grant), so header values cannot create state.

use std::convert::Infallible;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready, ready};
use tower::Service;

use crate::error::ApiError;
use crate::settings::parse_namespace;

/// The header naming a request's namespace.
pub static NAMESPACE_HEADER: HeaderName = HeaderName::from_static("qless-namespace");

/// The namespace a request was addressed to by its token (the token's only
/// namespace), when it sent no header; `auth` puts it in the request's extensions.
#[derive(Debug, Clone)]
pub struct Addressed(pub String);

/// The namespace named by the request's `Qless-Namespace` header: `Ok(None)` without
/// one, a 400 for a value that is no namespace.
pub fn named(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(&NAMESPACE_HEADER) else {
        return Ok(None);
    };
    let refused = |why: String| ApiError::BadRequest(format!("Qless-Namespace: {why}"));
    let name = value
        .to_str()
        .map_err(|_| refused("not visible ASCII".to_owned()))?;
    parse_namespace(name).map_err(refused)?;
    Ok(Some(name))
}

/// Sends each request to the service of its namespace. The services are axum routers
/// (with their body limit), which are always ready, so `poll_ready` has nothing to
/// wait for.
#[derive(Debug, Clone)]
pub struct Tenants<S> {
    /// The default namespace (`None`: the unnamed `ql:` one) and its service.
    default: (Option<String>, S),
    /// The other served namespaces.
    others: Vec<(String, S)>,
}

impl<S> Tenants<S> {
    /// Serves `default` and `others`.
    pub fn new(default: (Option<String>, S), others: Vec<(String, S)>) -> Self {
        Tenants { default, others }
    }

    fn pick(&mut self, request: &Request) -> Result<&mut S, ApiError> {
        let name = match request.extensions().get::<Addressed>() {
            Some(Addressed(name)) => Some(name.as_str()),
            None => named(request.headers())?,
        };
        let Some(name) = name else {
            return Ok(&mut self.default.1);
        };
        if self.default.0.as_deref() == Some(name) {
            return Ok(&mut self.default.1);
        }
        self.others
            .iter_mut()
            .find(|(served, _)| served == name)
            .map(|(_, service)| service)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "this gateway does not serve the namespace `{name}`"
                ))
            })
    }
}

impl<S> Service<Request> for Tenants<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.pick(&request) {
            Ok(service) => Either::Right(service.call(request)),
            Err(refused) => Either::Left(ready(Ok(refused.into_response()))),
        }
    }
}
