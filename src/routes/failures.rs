//! `/v1/failures` resources.

use utoipa_axum::router::OpenApiRouter;

use crate::server::AppState;

/// Routes of this module.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
}
