//! The names requests carry: job ids, queues, workers, tags, failure groups, throttles,
//! config options and idempotency keys. A name becomes part of Redis keys and channel
//! names, and is shown on the dashboard and in logs, so one rule bounds them all
//! (non-empty, at most [`MAX_NAME_LEN`] characters, no `{` or `}`, and only characters
//! that show as what they are): a blank would break the key layout, a brace would make
//! a cluster hash tag, and an invisible or direction-changing character would make a
//! name read as another (`pay\u{202e}cod.exe` shows as `payexe.doc`).
//!
//! Each kind of name is its own type, and the only way to get one is through the rule:
//! they check themselves when deserialized, so a JSON body, a path segment or a query
//! string holding a bad name is refused (a 400 naming the field and the rule) before a
//! handler runs, and nothing is written. The rule, its OpenAPI schema ([`Name`]) and
//! its messages are written here once.
//!
//! Names qlessd accepted before the invisible characters were refused stay in Redis
//! and are listed, but a request can no longer name one that holds such a character.
//!
//! Namespaces and tokens are named by a narrower rule ([`NamespaceName`], [`TokenName`]:
//! 1 to [`MAX_NAMESPACE_LEN`] characters from `[A-Za-z0-9._-]`), checked on the command
//! line, in the auth file and in the `Qless-Namespace` header: a namespace becomes a
//! cluster hash tag (`ql:{NAME}:`), a Prometheus label and a header value, and a token
//! name is written unescaped into the auth file and the logs.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// Longest accepted name, in characters (not bytes: `ж` counts once).
pub const MAX_NAME_LEN: usize = 256;

/// Longest namespace or token name, in characters (all of them ASCII).
pub const MAX_NAMESPACE_LEN: usize = 64;

/// The rule as a JSON Schema pattern, for clients that check before sending. JSON
/// Schema's `\s` includes the byte order mark, which Rust's `is_whitespace` does not;
/// [`is_blank`] adds it, so the two agree on blanks. The pattern also lists the
/// invisible characters of the Basic Multilingual Plane (format, private-use and
/// noncharacters); unassigned characters and a leading combining mark are beyond a
/// portable pattern, so the server's rule refuses a little more than the pattern.
const PATTERN: &str = concat!(
    r"^[^\s{}\x00-\x1f\x7f-\x9f",
    // Format characters: soft hyphen, Arabic and Syriac marks, Mongolian vowel
    // separator, zero-width spaces and joiners, direction marks, embeddings,
    // overrides and isolates, invisible operators, the byte order mark, annotations.
    r"\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f",
    r"\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb",
    // Private use, and the noncharacters.
    r"\ue000-\uf8ff\ufdd0-\ufdef\ufffe\uffff",
    r"]+$"
);

/// Whitespace, control characters and the byte order mark (an invisible character
/// that JSON Schema's `\s` counts as whitespace). Free text must hold something else
/// too (`routes::validate::text`).
pub fn is_blank(c: char) -> bool {
    c.is_whitespace() || c.is_control() || c == '\u{feff}'
}

/// Characters that do not show as themselves, by general category: controls (`Cc`),
/// format characters (`Cf`: zero-width spaces and joiners, direction overrides and
/// isolates, the byte order mark), private-use (`Co`), surrogates (`Cs`) and
/// unassigned code points (`Cn`, which include the noncharacters such as `U+FFFE`),
/// and the line and paragraph separators (`Zl`, `Zp`).
fn is_invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        G::Control
            | G::Format
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
            | G::LineSeparator
            | G::ParagraphSeparator
    )
}

/// A combining mark (`Mn`, `Mc`, `Me`): it draws on the character before it, so a name
/// cannot start with one (it would merge with whatever precedes the name on screen).
fn is_mark(c: char) -> bool {
    use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        G::NonspacingMark | G::SpacingMark | G::EnclosingMark
    )
}

/// Why a string is not a name of some kind; its text is the detail of the 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The kind of name, as messages call it (`queue`, `jid`, ...).
    kind: &'static str,
    broken: Rule,
}

/// The part of the rule a string breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Empty,
    TooLong,
    Character(char),
    LeadingMark(char),
    /// A jid ending in a suffix the key layout gives a job's side keys.
    Reserved(&'static str),
    /// Not a namespace or token name ([`check_namespace_rule`]).
    NotNamespaceLike,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind;
        // `{:?}` escapes invisible characters (`'\u{202e}'`), so the message shows
        // which one it was and is not itself reordered by it.
        match self.broken {
            Rule::Empty => write!(f, "{kind} must not be empty"),
            Rule::TooLong => write!(f, "{kind} is longer than {MAX_NAME_LEN} characters"),
            Rule::Character(bad) => write!(
                f,
                "{kind} contains the character {bad:?}, which is not allowed in names"
            ),
            Rule::LeadingMark(mark) => write!(
                f,
                "{kind} starts with the combining mark {mark:?}, which needs a character \
                 before it"
            ),
            Rule::Reserved(suffix) => write!(
                f,
                "{kind} ends in {suffix:?}, which is reserved: a job's history, \
                 dependencies and dependents are kept under its jid with these suffixes"
            ),
            Rule::NotNamespaceLike => write!(
                f,
                "a {kind} is 1-{MAX_NAMESPACE_LEN} characters from [A-Za-z0-9._-]"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks `value` against the rule; `kind` names it in the error.
fn check(kind: &'static str, value: &str) -> Result<(), NameError> {
    let broken = |broken| Err(NameError { kind, broken });
    if value.is_empty() {
        return broken(Rule::Empty);
    }
    // The usual name, short and ASCII, checked byte by byte: in ASCII the refused
    // characters are the bytes up to the space, DEL and the braces. Only a name that
    // fails this is looked at by characters (every request carries several names).
    if value.len() <= MAX_NAME_LEN
        && value
            .bytes()
            .all(|byte| byte > b' ' && byte < 0x7f && byte != b'{' && byte != b'}')
    {
        return Ok(());
    }
    if value.chars().count() > MAX_NAME_LEN {
        return broken(Rule::TooLong);
    }
    if let Some(first) = value.chars().next().filter(|&c| is_mark(c)) {
        return broken(Rule::LeadingMark(first));
    }
    match value
        .chars()
        .find(|&c| is_blank(c) || is_invisible(c) || matches!(c, '{' | '}'))
    {
        Some(bad) => broken(Rule::Character(bad)),
        None => Ok(()),
    }
}

/// A jid's own rule on top of the names' one, as the script applies it: job J's side
/// keys are `j:J-history`, `j:J-dependencies` and `j:J-dependents`, so a jid ending so
/// would share its key with another job's (the script refuses it; refusing it here
/// keeps a batch from being stopped by the script part-way).
fn jid_free(value: &str) -> Result<(), NameError> {
    match ["-history", "-dependencies", "-dependents"]
        .into_iter()
        .find(|suffix| value.ends_with(suffix))
    {
        Some(suffix) => Err(NameError {
            kind: "jid",
            broken: Rule::Reserved(suffix),
        }),
        None => Ok(()),
    }
}

/// The rule of namespaces and token names: 1 to [`MAX_NAMESPACE_LEN`] characters from
/// `[A-Za-z0-9._-]`, so that a namespace makes a plain hash tag (no brace, no
/// separator) and a token name needs no quoting in the auth file or a log line.
fn check_namespace_rule(kind: &'static str, value: &str) -> Result<(), NameError> {
    let valid = !value.is_empty()
        && value.len() <= MAX_NAMESPACE_LEN
        && value
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(NameError {
            kind,
            broken: Rule::NotNamespaceLike,
        })
    }
}

/// The OpenAPI schema of every name: one component, `Name`, which all the name types
/// refer to, since they follow the same rule.
pub struct Name;

impl PartialSchema for Name {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "A name used in Redis keys (queue, worker, job id, tag, failure group, \
                 option): 1 to 256 characters, none of them whitespace, `{`, `}`, or a \
                 character that does not show as itself (general categories Cc, Cf, \
                 Co, Cs, Cn, Zl, Zp: controls, format characters such as zero-width \
                 spaces, direction overrides and the byte order mark, private-use, \
                 unassigned and noncharacters); the first character is not a \
                 combining mark (Mn, Mc, Me).",
            ))
            .min_length(Some(1))
            .max_length(Some(MAX_NAME_LEN))
            .pattern(Some(PATTERN))
            .examples(["worker-1"])
            .into()
    }
}

impl ToSchema for Name {}

/// Defines a name type: a `String` that passed [`check`] for its kind.
macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal $(, also $extra:path)?) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        impl $name {
            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Names as the plain strings `core` takes (no copy of the text).
            pub fn into_strings(names: Vec<Self>) -> Vec<String> {
                names.into_iter().map(String::from).collect()
            }
        }

        /// Looked up by its text in maps keyed by the name.
        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;

            fn try_from(value: String) -> Result<Self, NameError> {
                check($kind, &value)?;
                $($extra(&value)?;)?
                Ok($name(value))
            }
        }

        impl FromStr for $name {
            type Err = NameError;

            fn from_str(value: &str) -> Result<Self, NameError> {
                check($kind, value)?;
                $($extra(value)?;)?
                Ok($name(value.to_owned()))
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        // As the string it is, so a name in a message reads as before.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                Name::schema()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Name::name()
            }
        }
    };
}

name_type!(
    /// A job id, or a recurring job template's id (its children are `<jid>-1`, ...).
    /// Also refused: a jid ending in `-history`, `-dependencies` or `-dependents`.
    Jid,
    "jid",
    also jid_free
);

name_type!(
    /// A queue's name.
    QueueName,
    "queue"
);

name_type!(
    /// A worker's name, as it pops, heartbeats and completes.
    WorkerName,
    "worker"
);

name_type!(
    /// A failure group: the kind of failure a job failed with.
    GroupName,
    "group"
);

name_type!(
    /// A tag of a job or a recurring template.
    Tag,
    "tag"
);

name_type!(
    /// A throttle's name.
    ThrottleName,
    "throttle"
);

name_type!(
    /// A partition's name (fair queues): a customer, a tenant.
    PartitionName,
    "partition"
);

name_type!(
    /// A configuration option's name (`heartbeat`, `<queue>-max-concurrency`, ...).
    OptionName,
    "option"
);

name_type!(
    /// A put's idempotency key, from the `Idempotency-Key` header or a batch item.
    IdempotencyKey,
    "idempotency key"
);

name_type!(
    /// A batch's id (made by qlessd when the batch is created).
    BatchId,
    "bid"
);

name_type!(
    /// A workflow's id (made by qlessd when the workflow is created).
    WorkflowId,
    "wid"
);

name_type!(
    /// A task's name within its workflow.
    TaskName,
    "task name"
);

name_type!(
    /// A workflow's name (what it is, shown with it; not unique).
    WorkflowName,
    "workflow name"
);

/// Defines a type of the namespace rule: a `String` that passed
/// [`check_namespace_rule`] for its kind.
macro_rules! namespace_rule_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = NameError;

            fn from_str(value: &str) -> Result<Self, NameError> {
                check_namespace_rule($kind, value)?;
                Ok($name(value.to_owned()))
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        // As the string it is, as the other names.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

namespace_rule_type!(
    /// A namespace: the tenant whose keys live under `ql:{NAME}:`.
    NamespaceName,
    "namespace"
);

impl NamespaceName {
    /// Checks `value` without copying it: the `Qless-Namespace` header of a request
    /// is compared with the served namespaces, never kept.
    pub fn check(value: &str) -> Result<&str, NameError> {
        check_namespace_rule("namespace", value).map(|()| value)
    }
}

namespace_rule_type!(
    /// A bearer token's name, shown in logs and on the dashboard instead of its secret.
    TokenName,
    "token name"
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `value` is a name (any kind: they share the rule).
    fn accepted(value: &str) -> bool {
        value.parse::<QueueName>().is_ok()
    }

    #[test]
    fn names_that_fit_the_key_layout_are_accepted() {
        let longest_ascii = "q".repeat(MAX_NAME_LEN);
        let longest_wide = "é".repeat(MAX_NAME_LEN);
        let longest_cyrillic = "ж".repeat(MAX_NAME_LEN);
        for good in [
            "q",
            "emails.high-priority_1",
            "8a4c1f0e6d3b4b5c9f2e7a1d0c3b5e6f",
            "failed-retries-emails",
            "emails-max-concurrency",
            "a:b/c|d,e;f'g\"h\\i",
            "café",
            "日本語のキュー",
            "emoji-📦",
            "~!@#$%^&*()[]<>?",
            // Combining marks after a base character, as many scripts write.
            "cafe\u{301}",
            "क्षत्रिय",
            "ไทย",
            "emoji-\u{2764}\u{fe0f}",
            longest_ascii.as_str(),
            longest_wide.as_str(),
            longest_cyrillic.as_str(),
        ] {
            assert!(accepted(good), "{good:?} refused");
        }
    }

    #[test]
    fn names_that_would_break_keys_are_refused() {
        let too_long_ascii = "q".repeat(MAX_NAME_LEN + 1);
        let too_long_wide = "ж".repeat(MAX_NAME_LEN + 1);
        for bad in [
            "",
            " ",
            "a b",
            " leading",
            "trailing ",
            "a\tb",
            "a\nb",
            "a\rb",
            "nul\0",
            "bell\u{7}",
            "del\u{7f}",
            "a{b",
            "a}b",
            "{tag}",
            "next\u{85}line",
            "no\u{a0}break",
            "\u{feff}bom",
            "line\u{2028}separator",
            "ideographic\u{3000}space",
            "c1\u{9f}",
            // Invisible and direction-changing characters: a name must read as itself.
            "pay\u{202e}cod.exe",
            "zero\u{200b}width",
            "joiner\u{200d}",
            "\u{2066}isolate\u{2069}",
            "mark\u{200f}",
            "soft\u{ad}hyphen",
            "tag\u{e0041}",
            "private\u{e000}",
            "private\u{10fffd}",
            "nonchar\u{fffe}",
            "nonchar\u{fdd0}",
            "unassigned\u{378}",
            "unassigned\u{e0080}",
            "para\u{2029}graph",
            "\u{301}lone-mark",
            "\u{20dd}enclosing",
            "\u{903}spacing-mark",
            too_long_ascii.as_str(),
            too_long_wide.as_str(),
        ] {
            assert!(!accepted(bad), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_quick_ascii_check_agrees_with_the_rule_by_characters() {
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            let allowed = !(is_blank(c) || matches!(c, '{' | '}'));
            assert_eq!(accepted(&format!("a{c}b")), allowed, "{c:?}");
        }
    }

    /// The characters the pattern's class lists one by one or as ranges (`\s` aside).
    fn pattern_ranges() -> Vec<(char, char)> {
        let mut rest = PATTERN
            .strip_prefix(r"^[^\s{}")
            .and_then(|class| class.strip_suffix("]+$"))
            .expect("the pattern is one negated class");
        let escape = |rest: &mut &str| -> char {
            let digits = if rest.starts_with(r"\x") {
                2
            } else {
                assert!(rest.starts_with(r"\u"), "unexpected {rest}");
                4
            };
            let code = u32::from_str_radix(&rest[2..2 + digits], 16).expect("hex");
            *rest = &rest[2 + digits..];
            char::from_u32(code).expect("a character")
        };
        let mut ranges = vec![('{', '{'), ('}', '}')];
        while !rest.is_empty() {
            let from = escape(&mut rest);
            let to = match rest.strip_prefix('-') {
                Some(after) => {
                    rest = after;
                    escape(&mut rest)
                }
                None => from,
            };
            ranges.push((from, to));
        }
        ranges
    }

    #[test]
    fn the_pattern_lists_the_invisible_characters_of_the_basic_plane() {
        use unicode_properties::{GeneralCategory as G, UnicodeGeneralCategory};
        let ranges = pattern_ranges();
        for c in '\0'..='\u{ffff}' {
            let listed =
                c.is_whitespace() || ranges.iter().any(|(from, to)| (*from..=*to).contains(&c));
            // What the pattern refuses, the server refuses.
            if listed {
                assert!(
                    !accepted(&format!("a{c}b")),
                    "{c:?} refused by the pattern only"
                );
            }
            // Every control, format and private-use character, and every noncharacter,
            // of the plane is in the pattern.
            let noncharacter = ('\u{fdd0}'..='\u{fdef}').contains(&c) || c >= '\u{fffe}';
            let invisible = matches!(c.general_category(), G::Control | G::Format | G::PrivateUse);
            assert!(
                listed || !(invisible || noncharacter),
                "{c:?} missing from the pattern"
            );
        }
    }

    /// The workflow graph (`ui::graph`) draws task names in SVG, which has no
    /// `<bdi>`: it closes each name's isolate with U+2069 itself, which holds only if
    /// no name carries a direction control or an isolate of its own.
    #[test]
    fn task_and_workflow_names_refuse_format_characters_as_every_name_does() {
        for bad in [
            "pay\u{202e}cod.exe",
            "open\u{2068}",
            "close\u{2069}",
            "\u{2066}left",
            "embed\u{202b}",
            "mark\u{200f}",
            "zero\u{200b}width",
            "\u{feff}bom",
        ] {
            assert!(bad.parse::<TaskName>().is_err(), "task name {bad:?}");
            assert!(
                bad.parse::<WorkflowName>().is_err(),
                "workflow name {bad:?}"
            );
            assert!(bad.parse::<Jid>().is_err(), "jid {bad:?}");
        }
        // Letters that run right to left are names like any other: the graph isolates
        // them.
        assert!("שלום".parse::<TaskName>().is_ok());
        assert!("سير-العمل".parse::<WorkflowName>().is_ok());
    }

    #[test]
    fn the_length_is_counted_in_characters_not_bytes() {
        // 256 three-byte characters are 768 bytes but a name of 256 characters; the
        // ASCII name one character longer is refused although it has fewer bytes.
        assert!(accepted(&"ж".repeat(256)));
        assert!(!accepted(&"q".repeat(257)));
        assert!(accepted(&format!("{}é", "q".repeat(255))));
        assert!(!accepted(&format!("{}é", "q".repeat(256))));
    }

    #[test]
    fn errors_name_the_kind_and_the_rule() {
        let cases: [(Result<(), NameError>, &str); 7] = [
            ("".parse::<Jid>().map(drop), "jid must not be empty"),
            (
                "q".repeat(257).parse::<QueueName>().map(drop),
                "queue is longer than 256 characters",
            ),
            (
                "a b".parse::<Tag>().map(drop),
                "tag contains the character ' ', which is not allowed in names",
            ),
            (
                "a{b}".parse::<ThrottleName>().map(drop),
                "throttle contains the character '{', which is not allowed in names",
            ),
            (
                "k\u{feff}".parse::<IdempotencyKey>().map(drop),
                "idempotency key contains the character '\\u{feff}', which is not \
                 allowed in names",
            ),
            (
                "pay\u{202e}cod.exe".parse::<QueueName>().map(drop),
                "queue contains the character '\\u{202e}', which is not allowed in names",
            ),
            (
                "\u{301}e".parse::<WorkerName>().map(drop),
                "worker starts with the combining mark '\\u{301}', which needs a \
                 character before it",
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn names_deserialize_only_when_valid() {
        let worker: WorkerName = serde_json::from_str(r#""worker-1""#).unwrap();
        assert_eq!(worker.as_str(), "worker-1");
        assert_eq!(serde_json::to_string(&worker).unwrap(), r#""worker-1""#);
        let refused = serde_json::from_str::<WorkerName>(r#""a b""#).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("worker contains the character ' '"),
            "{refused}"
        );
        assert!(serde_json::from_str::<Vec<Tag>>(r#"["a", ""]"#).is_err());
        assert!(
            serde_json::from_str::<Option<GroupName>>("null")
                .unwrap()
                .is_none()
        );
        // Not a string at all: serde's own message.
        assert!(serde_json::from_str::<OptionName>("5").is_err());
    }

    #[test]
    fn names_read_and_print_as_the_strings_they_are() {
        let jid: Jid = "j-1".parse().unwrap();
        assert_eq!(format!("{jid} {jid:?}"), r#"j-1 "j-1""#);
        assert_eq!(String::from(jid.clone()), "j-1");
        assert_eq!(Jid::into_strings(vec![jid]), ["j-1"]);
        assert_eq!(Jid::try_from("j-1".to_owned()).unwrap().as_ref(), "j-1");
    }

    #[test]
    fn every_name_type_shares_the_one_name_schema() {
        assert_eq!(Jid::name(), "Name");
        assert_eq!(IdempotencyKey::name(), "Name");
        let schema = serde_json::to_value(Tag::schema()).unwrap();
        assert_eq!(schema, serde_json::to_value(Name::schema()).unwrap());
        assert_eq!(schema["maxLength"], MAX_NAME_LEN);
        assert_eq!(schema["pattern"], PATTERN);
    }
    #[test]
    fn jids_ending_in_a_side_key_suffix_are_refused_as_the_script_refuses_them() {
        for bad in ["j-history", "j-dependencies", "j-dependents", "-history"] {
            let err = bad.parse::<Jid>().unwrap_err().to_string();
            assert!(err.contains("reserved"), "{bad}: {err}");
            assert!(Jid::try_from(bad.to_owned()).is_err(), "{bad}");
        }
        // Case matters, and only the end: the script's rule exactly.
        for good in ["j-History", "j-history-1", "history", "j-dependency"] {
            assert!(good.parse::<Jid>().is_ok(), "{good}");
        }
        // Other kinds of name keep the plain rule.
        assert!("q-history".parse::<QueueName>().is_ok());
    }

    #[test]
    fn namespaces_and_token_names_follow_the_narrower_rule() {
        let longest = "n".repeat(MAX_NAMESPACE_LEN);
        for good in ["prod", "tenant-1.eu_west", "A.b-C_9", longest.as_str()] {
            assert_eq!(good.parse::<NamespaceName>().unwrap().as_str(), good);
            assert_eq!(NamespaceName::check(good), Ok(good));
            assert_eq!(good.parse::<TokenName>().unwrap().as_str(), good);
        }
        let too_long = "n".repeat(MAX_NAMESPACE_LEN + 1);
        // Each is a name (`{`, `}` and blanks aside) but would break a hash tag, need
        // quoting, or is longer than the rule allows.
        for bad in [
            "",
            "a:b",
            "a{b",
            "{a}",
            "a b",
            "a/b",
            "a\"b",
            "café",
            "a\n",
            too_long.as_str(),
        ] {
            assert!(bad.parse::<NamespaceName>().is_err(), "{bad:?} accepted");
            assert!(NamespaceName::check(bad).is_err(), "{bad:?} accepted");
            assert!(bad.parse::<TokenName>().is_err(), "{bad:?} accepted");
        }
        // The messages the command line, the auth file and the header's 400 show.
        assert_eq!(
            "a:b".parse::<NamespaceName>().unwrap_err().to_string(),
            "a namespace is 1-64 characters from [A-Za-z0-9._-]"
        );
        assert_eq!(
            "".parse::<TokenName>().unwrap_err().to_string(),
            "a token name is 1-64 characters from [A-Za-z0-9._-]"
        );
    }
}
