//! Pagination of listings.

use serde::Deserialize;
use utoipa::IntoParams;

/// `?offset=&count=` of every listing.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Index of the first item (default 0).
    #[serde(default)]
    #[param(value_type = u64, maximum = 4294967295_u64)]
    pub offset: u32,
    /// Items per page (default 25, at most 1000).
    #[serde(default = "default_count")]
    #[param(minimum = 1, maximum = 1000)]
    pub count: u32,
}

fn default_count() -> u32 {
    25
}

impl Default for PageQuery {
    fn default() -> Self {
        PageQuery {
            offset: 0,
            count: default_count(),
        }
    }
}
