//! Schemas of the constrained strings requests carry, so the OpenAPI document states
//! the rules `routes::validate` enforces (a client generated from it can check input
//! before sending). Handlers keep plain `String`s; fields point their schema here.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// A name that becomes part of Redis keys and channels: a queue, worker, job id, tag,
/// failure group or option.
pub struct Name;

/// Free text that must say something: a job class, a log message.
pub struct Text;

impl PartialSchema for Name {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A name used in Redis keys (queue, worker, job id, tag, failure group, \
                 option): 1 to 256 characters, none of them whitespace, a control \
                 character, a byte order mark, `{` or `}`.",
            ))
            .min_length(Some(1))
            .max_length(Some(crate::routes::validate::MAX_NAME_LEN))
            .pattern(Some(r"^[^\s{}\x00-\x1f\x7f-\x9f\ufeff]+$"))
            .examples(["worker-1"])
            .into()
    }
}

impl ToSchema for Name {}

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
