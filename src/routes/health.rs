//! Operational endpoints: liveness and readiness, and `/`, which leads a visitor to
//! the documentation.

use axum::extract::State;
use axum::response::Redirect;
use axum::routing::get;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::extract::Json;
use crate::error::ApiError;
use crate::model::{Health, Unavailable};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .route("/", get(root))
}

/// A browser pointed at the server lands on the dashboard (which links the API
/// reference). Not part of the API, so not in the OpenAPI document.
async fn root() -> Redirect {
    Redirect::temporary("/ui")
}

/// Liveness: the process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", operation_id = "get_health",
    responses((status = 200, description = "The process is up", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Readiness: Redis answers and holds the qless script.
///
/// Reloads the script when Redis lost it (after a restart), so readiness recovers by
/// itself once Redis is back.
#[utoipa::path(get, path = "/readyz", tag = "operations", operation_id = "get_readiness",
    responses(
        (status = 200, description = "Ready to serve", body = Health),
        (status = 503, response = Unavailable),
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state.qless.ready().await?;
    Ok(Json(Health {
        status: "ready".to_owned(),
    }))
}
