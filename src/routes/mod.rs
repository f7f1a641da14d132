//! HTTP handlers, one module per resource. Handlers are thin: extract and validate,
//! make one `core` call with the server's clock, map the result.

pub mod extract;
mod health;

use utoipa_axum::router::OpenApiRouter;

use crate::server::AppState;

/// Every route with its OpenAPI description.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().merge(health::router())
}
