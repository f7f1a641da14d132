//! Input rules shared by every handler that are not about names (names check
//! themselves when parsed: `model::names`): lists, numbers, durations, pages, free text,
//! job data and repeated query parameters. Violations are 400s (413 for data over the
//! size limit) and nothing is written.

use crate::error::ApiError;
use crate::model::is_blank;
use crate::model::wire::RawJson;

/// Largest page a listing returns.
pub const MAX_PAGE: u32 = 1000;

/// Checks free text that must say something (a job class, a log message): at least
/// one character that is not blank (`model::Text`).
pub fn text(kind: &str, value: &str) -> Result<(), ApiError> {
    if value.chars().all(is_blank) {
        return Err(ApiError::BadRequest(format!("{kind} must not be empty")));
    }
    Ok(())
}

/// Most names (jids, tags, queues) one request may list.
pub const MAX_LIST: usize = 1000;

/// Checks that a list holds 1 to [`MAX_LIST`] items (its names checked themselves).
pub fn list<T>(kind: &str, values: &[T]) -> Result<(), ApiError> {
    if values.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "at least one {kind} is required"
        )));
    }
    at_most_list(kind, values)
}

/// A job's data as the JSON text the script stores, within `--max-job-size`: handlers
/// get the text to write only through [`JobData::new`], so no path writes data the
/// limit refuses.
#[derive(Debug)]
pub struct JobData(String);

impl JobData {
    /// The exact text the client sent, unless it is over `max` bytes (a 413 naming the
    /// limit).
    pub fn new(raw: &RawJson, max: u64) -> Result<Self, ApiError> {
        let text = raw.get();
        let size = text.len() as u64;
        if size > max {
            return Err(ApiError::PayloadTooLarge(format!(
                "the job's data is {size} bytes, over the limit of {max} bytes \
                 (--max-job-size)"
            )));
        }
        Ok(JobData(text.to_owned()))
    }

    /// Optional data: `None` stays `None`.
    pub fn optional(raw: Option<&RawJson>, max: u64) -> Result<Option<Self>, ApiError> {
        raw.map(|raw| JobData::new(raw, max)).transpose()
    }

    /// The JSON text.
    pub fn into_text(self) -> String {
        self.0
    }
}

/// A query string whose parameters may repeat (`?tag=a&tag=b`), read with
/// `serde_urlencoded` into `(key, value)` pairs in order. Only the `allowed` keys are
/// accepted, and at most [`MAX_LIST`] + 1 pairs (a list of names plus one flag), so a
/// long query cannot make the server collect an unbounded list.
pub fn query_pairs(
    query: Option<&str>,
    allowed: &[&str],
) -> Result<Vec<(String, String)>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|err| ApiError::BadRequest(format!("malformed query string: {err}")))?;
    if pairs.len() > MAX_LIST + 1 {
        return Err(ApiError::BadRequest(format!(
            "at most {MAX_LIST} values are accepted, not {}",
            pairs.len()
        )));
    }
    if let Some((key, _)) = pairs
        .iter()
        .find(|(key, _)| !allowed.contains(&key.as_str()))
    {
        return Err(ApiError::BadRequest(format!(
            "unknown query parameter {key:?}; accepted: {}",
            allowed.join(", ")
        )));
    }
    Ok(pairs)
}

/// The values of `key` among query `pairs`, each parsed as a `T` (a name type, which
/// checks itself).
pub fn query_values<T>(pairs: &[(String, String)], key: &str) -> Result<Vec<T>, ApiError>
where
    T: TryFrom<String>,
    ApiError: From<T::Error>,
{
    pairs
        .iter()
        .filter(|(name, _)| name == key)
        .map(|(_, value)| T::try_from(value.clone()).map_err(ApiError::from))
        .collect()
}

/// Checks that a list holds at most [`MAX_LIST`] items (possibly none).
pub fn at_most_list<T>(kind: &str, values: &[T]) -> Result<(), ApiError> {
    if values.len() > MAX_LIST {
        return Err(ApiError::BadRequest(format!(
            "at most {MAX_LIST} of {kind} are accepted"
        )));
    }
    Ok(())
}

/// Checks a number that must be finite (JSON allows huge exponents).
pub fn finite(kind: &str, value: f64) -> Result<f64, ApiError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(ApiError::BadRequest(format!(
            "{kind} must be a finite number"
        )))
    }
}

/// Checks a duration in seconds: finite and not negative.
pub fn seconds(kind: &str, value: f64) -> Result<f64, ApiError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ApiError::BadRequest(format!(
            "{kind} must be a non-negative number of seconds"
        )))
    }
}

/// A long-poll `wait` in seconds: finite and not negative, capped at the server's
/// maximum (a client asking for more simply waits the maximum).
pub fn wait(value: f64, max: std::time::Duration) -> Result<std::time::Duration, ApiError> {
    let seconds = seconds("wait", value)?;
    // Any finite wait is accepted and capped, even one too long for a Duration.
    Ok(std::time::Duration::try_from_secs_f64(seconds)
        .unwrap_or(max)
        .min(max))
}

/// Checks a page size.
pub fn page_count(count: u32) -> Result<u32, ApiError> {
    if count == 0 || count > MAX_PAGE {
        return Err(ApiError::BadRequest(format!(
            "count must be between 1 and {MAX_PAGE}"
        )));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_hold_one_to_a_thousand_items() {
        assert!(list("jid", &["a"]).is_ok());
        assert!(list("jid", &vec!["a"; MAX_LIST]).is_ok());
        assert!(list::<&str>("jid", &[]).is_err());
        assert!(list("jid", &vec!["a"; MAX_LIST + 1]).is_err());
        assert!(at_most_list::<&str>("tag", &[]).is_ok());
        assert!(at_most_list("tag", &vec!["a"; MAX_LIST + 1]).is_err());
    }

    #[test]
    fn durations_must_be_finite_and_non_negative() {
        assert!(seconds("delay", 0.0).is_ok());
        assert!(seconds("delay", 1.5).is_ok());
        assert!(seconds("delay", -1.0).is_err());
        assert!(seconds("delay", f64::INFINITY).is_err());
        assert!(finite("priority", -5.0).is_ok());
        assert!(finite("priority", f64::NAN).is_err());
    }
}
