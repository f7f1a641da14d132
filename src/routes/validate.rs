//! Input rules shared by every handler. Names become parts of Redis keys and channel
//! names, so they are bounded and may not contain characters that would break the key
//! layout or a cluster hash tag. Violations are 400s and nothing is written.

use crate::error::ApiError;
use crate::model::wire::RawJson;
use crate::model::{MAX_NAME_LEN, is_blank};

/// Largest page a listing returns.
pub const MAX_PAGE: u32 = 1000;

/// Checks a name used in keys: non-empty, at most [`MAX_NAME_LEN`] characters, no
/// control characters, whitespace or byte order marks, no `{` `}` (hash tags). The
/// OpenAPI document states the same rule (`model::Name`).
pub fn name(kind: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() {
        return Err(ApiError::BadRequest(format!("{kind} must not be empty")));
    }
    // The usual name, short and ASCII, checked byte by byte: in ASCII the blanks are
    // the bytes up to the space and DEL.
    if value.len() <= MAX_NAME_LEN
        && value
            .bytes()
            .all(|byte| byte > b' ' && byte < 0x7f && byte != b'{' && byte != b'}')
    {
        return Ok(());
    }
    if value.chars().count() > MAX_NAME_LEN {
        return Err(ApiError::BadRequest(format!(
            "{kind} is longer than {MAX_NAME_LEN} characters"
        )));
    }
    if let Some(bad) = value
        .chars()
        .find(|&c| is_blank(c) || matches!(c, '{' | '}'))
    {
        return Err(ApiError::BadRequest(format!(
            "{kind} contains the character {bad:?}, which is not allowed in names"
        )));
    }
    Ok(())
}

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

/// Checks a list of 1 to [`MAX_LIST`] valid names.
pub fn names(kind: &str, values: &[String]) -> Result<(), ApiError> {
    if values.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "at least one {kind} is required"
        )));
    }
    names_or_none(kind, values)
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

/// The values of `key` among query `pairs`.
pub fn query_values(pairs: &[(String, String)], key: &str) -> Vec<String> {
    pairs
        .iter()
        .filter(|(name, _)| name == key)
        .map(|(_, value)| value.clone())
        .collect()
}

/// Checks a list of at most [`MAX_LIST`] valid names (possibly empty).
pub fn names_or_none(kind: &str, values: &[String]) -> Result<(), ApiError> {
    if values.len() > MAX_LIST {
        return Err(ApiError::BadRequest(format!(
            "at most {MAX_LIST} of {kind} are accepted"
        )));
    }
    values.iter().try_for_each(|value| name(kind, value))
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
    fn names_that_would_break_keys_are_refused() {
        assert!(name("queue", "emails.high-priority_1").is_ok());
        assert!(name("queue", "café").is_ok());
        assert!(name("queue", &"q".repeat(256)).is_ok());
        assert!(name("queue", &"é".repeat(256)).is_ok());
        // Every ASCII byte: the quick check agrees with the rule by characters.
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            let allowed = !(is_blank(c) || matches!(c, '{' | '}'));
            assert_eq!(name("queue", &format!("a{c}b")).is_ok(), allowed, "{c:?}");
        }
        for bad in ["a\u{85}b", "a\u{a0}b", "\u{feff}q", "a\u{2028}"] {
            assert!(name("queue", bad).is_err(), "{bad:?} accepted");
        }
        for bad in ["", "a b", "a\nb", "a{b}", "tab\t", &"q".repeat(257)] {
            assert!(name("queue", bad).is_err(), "{bad:?} accepted");
        }
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
