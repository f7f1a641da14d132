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

/// Deepest nesting of arrays and objects accepted in a job's data (and in its result,
/// progress and log data). The script's JSON decoder (Redis's cjson) refuses more than
/// 1,000 levels, and this gateway reads job objects holding the data with serde_json,
/// which stops at 128 levels; 100 is well within both, so data that passes here is
/// stored and read back by every part.
pub const MAX_JSON_DEPTH: usize = 100;

/// A job's data as the JSON text the script stores, within `--max-job-size` and in the
/// JSON the script accepts: handlers get the text to write only through
/// [`JobData::new`] (or [`JobData::encode`]), so no path writes data the limit refuses,
/// and a batch is refused whole (400 naming the item) before its first write rather
/// than stopped by the script part-way.
#[derive(Debug)]
pub struct JobData(String);

impl JobData {
    /// The exact text the client sent, unless it is over `max` bytes (a 413 naming the
    /// limit) or is JSON the script's decoder refuses (a 400, see [`script_json`]).
    pub fn new(raw: &RawJson, max: u64) -> Result<Self, ApiError> {
        let text = raw.get();
        Self::check(text, max)?;
        Ok(JobData(text.to_owned()))
    }

    /// A value the gateway parsed itself (a log entry's data), as JSON text, checked as
    /// [`new`](Self::new) checks.
    pub fn encode(value: &serde_json::Value, max: u64) -> Result<Self, ApiError> {
        let text = value.to_string();
        Self::check(&text, max)?;
        Ok(JobData(text))
    }

    fn check(text: &str, max: u64) -> Result<(), ApiError> {
        let size = text.len() as u64;
        if size > max {
            return Err(ApiError::PayloadTooLarge(format!(
                "the job's data is {size} bytes, over the limit of {max} bytes \
                 (--max-job-size)"
            )));
        }
        script_json(text).map_err(|what| ApiError::BadRequest(format!("the job's data {what}")))
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

/// Checks that `text`, valid JSON, is also JSON the script decodes: nested at most
/// [`MAX_JSON_DEPTH`] deep, and every `\u` escape of a UTF-16 surrogate in a pair
/// (serde_json keeps a lone one in raw text; cjson refuses it). The error says what is
/// wrong, to follow "the job's data".
pub fn script_json(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    // The usual data opens few arrays and objects and has no `\u` escape: then it can
    // be neither too deep nor hold a lone surrogate, and two vectorized scans say so
    // (a byte-by-byte walk of a 100-byte payload cost 1.4 % of a job's gateway
    // instructions on the worker path, 2026-11-29).
    if memchr::memchr2_iter(b'[', b'{', bytes).count() <= MAX_JSON_DEPTH
        && memchr::memmem::find(bytes, b"\\u").is_none()
    {
        return Ok(());
    }
    let (mut depth, mut in_string, mut i) = (0usize, false, 0usize);
    // Whether the escape just read was a high surrogate, which a low one must follow.
    let mut high = false;
    let lone = || Err("holds a lone UTF-16 surrogate escape (\\uD800-\\uDFFF)".to_owned());
    while i < bytes.len() {
        let byte = bytes[i];
        i += 1;
        if in_string {
            match byte {
                b'\\' => {
                    let escape = bytes.get(i).copied();
                    i += 1;
                    if escape == Some(b'u') {
                        let unit = text
                            .get(i..i + 4)
                            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
                            .unwrap_or(0);
                        i += 4;
                        let is_low = (0xDC00..=0xDFFF).contains(&unit);
                        if is_low != high {
                            return lone();
                        }
                        high = (0xD800..=0xDBFF).contains(&unit);
                        continue;
                    }
                }
                b'"' => in_string = false,
                _ => {}
            }
            if high {
                return lone();
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return Err(format!(
                        "is nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Checks free text stored with a job (a log entry's message, a failure's message):
/// at most `max` bytes, the `--max-job-size` its data is held to (a 413 naming the
/// limit), so no field makes a job larger than its data may be.
pub fn job_text(kind: &str, value: &str, max: u64) -> Result<(), ApiError> {
    let size = value.len() as u64;
    if size > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "{kind} is {size} bytes, over the limit of {max} bytes (--max-job-size)"
        )));
    }
    Ok(())
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
    fn data_is_refused_where_the_scripts_json_decoder_would_refuse_it() {
        let nested = |levels: usize| format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
        let cases: &[(&str, bool)] = &[
            (&nested(MAX_JSON_DEPTH), true),
            (&nested(MAX_JSON_DEPTH + 1), false),
            (&nested(1001), false),
            // Brackets inside strings do not nest.
            (&format!("{{\"a\":\"{}\"}}", "[".repeat(500)), true),
            (r#"{"a":"\"[[["}"#, true),
            (r#""\ud83d\ude00""#, true),
            (r#""\uD800\uDC00 and \u00e9 \\ud800""#, true),
            (r#""\ud800""#, false),
            (r#""\udc00""#, false),
            (r#""\ud800\u0041""#, false),
            (r#""\ud800\n""#, false),
            (r#""a\ud800 b""#, false),
        ];
        for (text, accepted) in cases {
            let raw = serde_json::value::RawValue::from_string((*text).to_owned())
                .unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(
                JobData::new(&raw, u64::MAX).is_ok(),
                *accepted,
                "{}",
                &text[..text.len().min(60)]
            );
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
