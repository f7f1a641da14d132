//! How the text log writes an event's fields: `name=value`, separated by spaces, the
//! message bare, as tracing-subscriber's default does, for a fraction of its cost.
//!
//! Every request writes an access-log line of seven fields, and the default field
//! formatter cost about 1.3k instructions a field (each name and `=` goes through
//! an ANSI painter even with colours off, each value through `Debug` and a
//! character-by-character escaping writer): about 12.8k of a heartbeat's 50k in the
//! gateway (callgrind, `cargo bench --bench lifecycle -- gateway-instructions`).
//! Here a plain string value (visible ASCII without quotes or backslashes, the usual
//! case: routes, ids, names) is written as it is, numbers directly, and anything else
//! quoted and escaped by `Debug`. Control characters never reach the log raw, so a
//! field cannot forge a line or a terminal sequence.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// The text log's field formatter (see the module's documentation).
#[derive(Debug, Default, Clone, Copy)]
pub struct TextFields;

impl<'writer> FormatFields<'writer> for TextFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let ansi = writer.has_ansi_escapes();
        let mut visitor = Visitor {
            writer,
            ansi,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Visitor<'writer> {
    writer: Writer<'writer>,
    /// Whether field names are styled (a terminal), as the default formatter does.
    ansi: bool,
    first: bool,
    result: fmt::Result,
}

impl Visitor<'_> {
    /// Writes the separator and `name=` (nothing but the separator for the message).
    fn start(&mut self, field: &Field) -> fmt::Result {
        if !self.first {
            self.writer.write_char(' ')?;
        }
        self.first = false;
        let name = field.name();
        if name == "message" {
            return Ok(());
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        if self.ansi {
            write!(self.writer, "\x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m")
        } else {
            self.writer.write_str(name)?;
            self.writer.write_char('=')
        }
    }

    fn record(&mut self, field: &Field, write: impl FnOnce(&mut Self) -> fmt::Result) {
        if self.result.is_ok() {
            self.result = self.start(field).and_then(|()| write(self));
        }
    }
}

/// `value` as a whole number of thousandths, if it is the double nearest to one (below
/// 10^12): the access log's latency, milliseconds in whole microseconds.
fn thousandths(value: f64) -> Option<u64> {
    let scaled = (value * 1000.0).round();
    if value.is_sign_negative() || !(0.0..1e15).contains(&scaled) {
        return None;
    }
    let thousandths = scaled as u64;
    (thousandths as f64 / 1000.0 == value).then_some(thousandths)
}

/// Writes `thousandths / 1000` as `Debug` writes that double (`0.51`, `2.0`), without
/// the shortest-digits search: the decimal of a number of thousandths is already the
/// shortest text that reads back as the double nearest to it. The digits are laid out
/// by hand and written at once. (Formatting the float cost ~2k instructions a line, and
/// `write!` with a padded fraction still 0.8k.)
fn write_thousandths(writer: &mut impl fmt::Write, thousandths: u64) -> fmt::Result {
    let (mut whole, mut fraction) = (thousandths / 1000, thousandths % 1000);
    // At most 20 digits and a point, laid out from the end.
    let mut text = [0u8; 24];
    let mut start = text.len();
    let mut push = |byte: u8| {
        start -= 1;
        text[start] = byte;
    };
    if fraction == 0 {
        push(b'0');
    } else {
        let mut digits = 3;
        while fraction % 10 == 0 {
            fraction /= 10;
            digits -= 1;
        }
        for _ in 0..digits {
            push(b'0' + (fraction % 10) as u8);
            fraction /= 10;
        }
    }
    push(b'.');
    loop {
        push(b'0' + (whole % 10) as u8);
        whole /= 10;
        if whole == 0 {
            break;
        }
    }
    // (Only ASCII digits and a point were written.)
    writer.write_str(std::str::from_utf8(&text[start..]).unwrap_or("?"))
}

/// Whether `value` can be written unquoted and still be read back as one value.
fn is_plain(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && byte != b'"' && byte != b'\\')
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let message = field.name() == "message";
        self.record(field, |this| {
            if is_plain(value) || (message && !value.contains(char::is_control)) {
                this.writer.write_str(value)
            } else {
                write!(this.writer, "{value:?}")
            }
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.record(field, |this| match thousandths(value) {
            Some(thousandths) => write_thousandths(&mut this.writer, thousandths),
            None => write!(this.writer, "{value:?}"),
        });
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.record(field, |this| write!(this.writer, "{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record(field, |this| write!(this.writer, "{value}"));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.record(field, |this| {
            this.writer.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record(field, |this| {
            write!(
                Escaped {
                    inner: &mut this.writer
                },
                "{value:?}"
            )
        });
    }
}

/// Passes text through, writing control characters as `\u{..}` escapes: a `Display`
/// value (an error's text, say) may hold a newline or a terminal sequence.
struct Escaped<'a, W: fmt::Write> {
    inner: &'a mut W,
}

impl<W: fmt::Write> fmt::Write for Escaped<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(|c: char| c.is_control()) {
            self.inner.write_str(&rest[..at])?;
            let control = rest[at..].chars().next().expect("a character at `at`");
            write!(self.inner, "{}", control.escape_unicode())?;
            rest = &rest[at + control.len_utf8()..];
        }
        self.inner.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        write!(Escaped { inner: &mut out }, "{text}").unwrap();
        out
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escaped("plain text"), "plain text");
        assert_eq!(escaped("a\nb"), "a\\u{a}b");
        assert_eq!(escaped("\x1b[31mred"), "\\u{1b}[31mred");
        assert_eq!(escaped("é\r"), "é\\u{d}");
    }

    #[test]
    fn whole_thousandths_are_written_as_debug_writes_them() {
        let write = |value: f64| {
            let mut out = String::new();
            match thousandths(value) {
                Some(thousandths) => write_thousandths(&mut out, thousandths).unwrap(),
                None => write!(out, "{value:?}").unwrap(),
            }
            out
        };
        let micros = (0..20_000u64).chain([
            999_999,
            1_000_000,
            1_234_567,
            86_400_000_000,
            999_999_999_999,
        ]);
        for micros in micros {
            let value = micros as f64 / 1000.0;
            assert_eq!(thousandths(value), Some(micros), "{value:?}");
            assert_eq!(write(value), format!("{value:?}"));
        }
        for other in [
            0.0001,
            0.1234,
            1.0 / 3.0,
            -0.0,
            -1.0,
            1e16,
            f64::NAN,
            f64::INFINITY,
        ] {
            assert_eq!(thousandths(other), None, "{other:?}");
            assert_eq!(write(other), format!("{other:?}"));
        }
    }

    #[test]
    fn only_visible_ascii_without_quotes_is_written_unquoted() {
        assert!(is_plain("/v1/jobs/{jid}/heartbeat"));
        assert!(is_plain("billing-producer"));
        for quoted in [
            "",
            "two words",
            "say \"hi\"",
            "back\\slash",
            "line\nbreak",
            "é",
        ] {
            assert!(!is_plain(quoted), "{quoted:?}");
        }
    }
}
