//! The schema of free text that must say something (a job class, a log message), so
//! the OpenAPI document states the rule `routes::validate::text` enforces (a client
//! generated from it can check input before sending). Handlers keep plain `String`s;
//! fields point their schema here. Names have types of their own (`names`).

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// Free text that must say something: a job class, a log message.
pub struct Text;

impl PartialSchema for Text {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "Text with at least one character that is neither whitespace nor a \
                 control character.",
            ))
            .min_length(Some(1))
            .pattern(Some(r"[^\s\x00-\x1f\x7f-\x9f\ufeff]"))
            .examples(["reports.Monthly"])
            .into()
    }
}

impl ToSchema for Text {}
