//! Several namespaces in one gateway. Each served namespace has its own application
//! state: its own script connection (so calls of different namespaces never share a
//! grouped invocation), event subscription, long-poll waiters and sweeper. A request
//! names its namespace with the `Qless-Namespace` header; without one it goes to the
//! namespace its token decided ([`Addressed`], set by `auth`), else to the default
//! (`--namespace`). Only namespaces the operator named are served (`--namespace`,
//! `--namespaces`, and those the tokens grant, including tokens added by a reload of
//! the auth file), so header values cannot create state.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use arc_swap::ArcSwap;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready, ready};
use tower::Service;

use crate::error::ApiError;
use crate::model::NamespaceName;

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
    let refused =
        |why: &dyn std::fmt::Display| ApiError::BadRequest(format!("Qless-Namespace: {why}"));
    let name = value.to_str().map_err(|_| refused(&"not visible ASCII"))?;
    NamespaceName::check(name)
        .map(Some)
        .map_err(|why| refused(&why))
}

/// Sends each request to the service of its namespace. The services are axum routers
/// (with their body limit), which are always ready, so `poll_ready` has nothing to
/// wait for.
#[derive(Debug, Clone)]
pub struct Tenants<S> {
    /// The default namespace (`None`: the unnamed `ql:` one) and its service.
    default: (Option<String>, S),
    /// The other served namespaces.
    others: Others<S>,
}

/// The namespaces served besides the default one, shared by every clone of their
/// [`Tenants`]: a reload of the auth file can add one while connections are open.
#[derive(Debug)]
pub struct Others<S>(Arc<ArcSwap<Vec<(String, S)>>>);

impl<S> Clone for Others<S> {
    fn clone(&self) -> Self {
        Others(self.0.clone())
    }
}

impl<S: Clone> Others<S> {
    /// Serves `name` with `service` from the next request on; a namespace already
    /// served keeps its service.
    pub fn add(&self, name: String, service: S) {
        self.0.rcu(|served| {
            let mut served = Vec::clone(served);
            if !served.iter().any(|(known, _)| *known == name) {
                served.push((name.clone(), service.clone()));
            }
            served
        });
    }

    /// Whether `name` is served.
    pub fn serves(&self, name: &str) -> bool {
        self.0.load().iter().any(|(served, _)| served == name)
    }
}

impl<S: Clone> Tenants<S> {
    /// Serves `default` and `others`.
    pub fn new(default: (Option<String>, S), others: Vec<(String, S)>) -> Self {
        Tenants {
            default,
            others: Others(Arc::new(ArcSwap::from_pointee(others))),
        }
    }

    /// The handle that adds namespaces to these tenants.
    pub fn others(&self) -> Others<S> {
        self.others.clone()
    }

    /// The service of the request's namespace: the default one by reference (the
    /// common case pays no clone), another one as a clone of its router.
    fn pick(&mut self, request: &Request) -> Result<Picked<'_, S>, ApiError> {
        let name = match request.extensions().get::<Addressed>() {
            Some(Addressed(name)) => Some(name.as_str()),
            None => named(request.headers())?,
        };
        let Some(name) = name else {
            return Ok(Picked::Default(&mut self.default.1));
        };
        if self.default.0.as_deref() == Some(name) {
            return Ok(Picked::Default(&mut self.default.1));
        }
        self.others
            .0
            .load()
            .iter()
            .find(|(served, _)| served == name)
            .map(|(_, service)| Picked::Other(service.clone()))
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "this gateway does not serve the namespace `{name}`"
                ))
            })
    }
}

/// Where [`Tenants::pick`] sent a request.
enum Picked<'a, S> {
    Default(&'a mut S),
    Other(S),
}

impl<S> Service<Request> for Tenants<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.pick(&request) {
            Ok(Picked::Default(service)) => Either::Right(service.call(request)),
            Ok(Picked::Other(mut service)) => Either::Right(service.call(request)),
            Err(refused) => Either::Left(ready(Ok(refused.into_response()))),
        }
    }
}
