//! Structured diagnostics (spec/diagnostics.md X1-X5): one variant per code of
//! the catalog `python/fastagg/diagnostics.json` (the file the Python package
//! reads too), rendered from the catalog's templates.
//!
//! The enum is written by hand and the templates are read from the catalog at
//! compile time (`include_str!`) and parsed once: the variants stay readable
//! and documented in the source without a build script, and the tests below
//! fail when the enum and the catalog disagree on a code, a rule or a field.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use serde_json::Value;

use crate::aggregate::{cj, q};

/// X1: the catalog, the single source of codes, rules and templates.
const CATALOG: &str = include_str!("../../../python/fastagg/diagnostics.json");

/// One diagnostic: what was skipped, repaired or dropped, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diagnostic {
    ArrayTrailingData {
        offset: u64,
    },
    NoEventFound {
        bytes: u64,
    },
    UnterminatedEventProcessed {
        offset: u64,
    },
    IncompleteEventDropped {
        offset: u64,
    },
    InvalidJson {
        event: u64,
        offset: u64,
    },
    NotAnObject {
        event: u64,
        offset: u64,
    },
    InvalidUtf8 {
        event: u64,
        offset: u64,
    },
    EventTooLarge {
        event: u64,
        offset: u64,
        limit: u64,
    },
    CompressedBody {
        encoding: &'static str,
    },
    LinesWithoutEnds {
        offset: u64,
    },
    WrongShape {
        event: u64,
        path: String,
        expected: String,
    },
    ResponseIdChanged {
        event: u64,
        kept_id: Value,
        new_id: Value,
    },
    CallRenamed {
        candidate: u32,
        part: usize,
        name: String,
        kept_name: String,
    },
    PartialArgSkipped {
        candidate: u32,
        part: usize,
        json_path: String,
        reason: String,
    },
    PartialArgPathMissing {
        candidate: u32,
        part: usize,
        reason: String,
    },
    PartialArgPathNotString {
        candidate: u32,
        part: usize,
        reason: String,
    },
    SignatureChanged {
        candidate: u32,
        part: usize,
    },
    NamelessStreamedCall {
        candidate: u32,
        part: usize,
        call_id: Option<String>,
        args: Value,
    },
    NamelessCall {
        event: u64,
        path: String,
        call_id: Option<String>,
        args: Value,
    },
    WarningsDropped {
        count: u64,
        limit: u64,
    },
    IxMissingDone,
    IxDataAfterDone {
        offset: u64,
    },
    IxInvalidJson {
        event: u64,
        offset: u64,
    },
    IxNotAnObject {
        event: u64,
        offset: u64,
    },
    IxInvalidUtf8 {
        event: u64,
        offset: u64,
    },
    IxEventTooLarge {
        event: u64,
        offset: u64,
        limit: u64,
    },
    IxUnknownEventType {
        event: u64,
        event_type: String,
    },
    IxMissingEventType {
        event: u64,
    },
    IxStepIndexInvalid {
        event: u64,
        event_type: String,
    },
    IxStepRestarted {
        event: u64,
        step: u32,
    },
    IxStepWithoutStart {
        event: u64,
        step: u32,
    },
    IxDeltaWithoutType {
        event: u64,
        step: u32,
    },
    IxDeltaAfterStop {
        event: u64,
        step: u32,
    },
    IxDeltaSkipped {
        event: u64,
        step: u32,
        reason: String,
    },
    IxLongArgPath {
        step: u32,
    },
    IxBadArguments {
        step: u32,
        reason: String,
    },
    IxStepNeverStopped {
        step: u32,
        step_type: Option<String>,
    },
}

/// The value of one field, typed as the catalog types it (X1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'a> {
    Int(u64),
    Str(&'a str),
    /// `str?`: None when absent.
    OptStr(Option<&'a str>),
    Json(&'a Value),
}

impl Field<'_> {
    fn is_null(self) -> bool {
        matches!(self, Field::OptStr(None) | Field::Json(Value::Null))
    }

    /// X2: `{f}` writes the text, `{f!j}` the compact JSON.
    fn write(self, json: bool, out: &mut String) {
        match (self, json) {
            (Field::Int(n), _) => {
                let _ = write!(out, "{n}");
            }
            (Field::Str(s) | Field::OptStr(Some(s)), false) => out.push_str(s),
            (Field::Str(s) | Field::OptStr(Some(s)), true) => out.push_str(&q(s)),
            (Field::OptStr(None), _) => out.push_str("null"),
            (Field::Json(v), _) => out.push_str(&cj(v)),
        }
    }
}

impl Diagnostic {
    /// The catalog code (X1), stable.
    #[must_use]
    pub fn code(&self) -> &'static str {
        self.parts().0
    }

    /// The rule that decided it, from the catalog.
    #[must_use]
    pub fn rule(&self) -> &'static str {
        entry(self.code()).map_or("", |e| e.rule)
    }

    /// The fields in catalog order, with their values.
    #[must_use]
    pub fn fields(&self) -> Vec<(&'static str, Field<'_>)> {
        self.parts().1
    }

    /// X2: the message, as `warnings` lists it and a `MalformedStreamError`
    /// says it (X4): the template rendered, nothing before it (X6: no rule id;
    /// [`Self::rule`] has it).
    #[must_use]
    pub fn message(&self) -> String {
        let fields = self.fields();
        let Some(entry) = entry(self.code()) else {
            debug_assert!(false, "{} is not in the catalog", self.code());
            return String::new();
        };
        debug_assert!(
            fields
                .iter()
                .map(|(n, _)| *n)
                .eq(entry.fields.iter().copied()),
            "{}: the variant's fields are not the catalog's",
            self.code()
        );
        render(entry.template, &fields)
    }

    #[allow(clippy::too_many_lines)] // one arm per catalog code, nothing else
    fn parts(&self) -> (&'static str, Vec<(&'static str, Field<'_>)>) {
        use Field::{Int, Json, OptStr, Str};
        let int = |n: usize| Int(n as u64);
        match self {
            Self::ArrayTrailingData { offset } => {
                ("array_trailing_data", vec![("offset", Int(*offset))])
            }
            Self::NoEventFound { bytes } => ("no_event_found", vec![("bytes", Int(*bytes))]),
            Self::UnterminatedEventProcessed { offset } => (
                "unterminated_event_processed",
                vec![("offset", Int(*offset))],
            ),
            Self::IncompleteEventDropped { offset } => {
                ("incomplete_event_dropped", vec![("offset", Int(*offset))])
            }
            Self::InvalidJson { event, offset } => (
                "invalid_json",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::NotAnObject { event, offset } => (
                "not_an_object",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::InvalidUtf8 { event, offset } => (
                "invalid_utf8",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::EventTooLarge {
                event,
                offset,
                limit,
            } => (
                "event_too_large",
                vec![
                    ("event", Int(*event)),
                    ("offset", Int(*offset)),
                    ("limit", Int(*limit)),
                ],
            ),
            Self::CompressedBody { encoding } => {
                ("compressed_body", vec![("encoding", Str(encoding))])
            }
            Self::LinesWithoutEnds { offset } => {
                ("lines_without_ends", vec![("offset", Int(*offset))])
            }
            Self::WrongShape {
                event,
                path,
                expected,
            } => (
                "wrong_shape",
                vec![
                    ("event", Int(*event)),
                    ("path", Str(path)),
                    ("expected", Str(expected)),
                ],
            ),
            Self::ResponseIdChanged {
                event,
                kept_id,
                new_id,
            } => (
                "response_id_changed",
                vec![
                    ("event", Int(*event)),
                    ("kept_id", Json(kept_id)),
                    ("new_id", Json(new_id)),
                ],
            ),
            Self::CallRenamed {
                candidate,
                part,
                name,
                kept_name,
            } => (
                "call_renamed",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                    ("name", Str(name)),
                    ("kept_name", Str(kept_name)),
                ],
            ),
            Self::PartialArgSkipped {
                candidate,
                part,
                json_path,
                reason,
            } => (
                "partial_arg_skipped",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                    ("json_path", Str(json_path)),
                    ("reason", Str(reason)),
                ],
            ),
            Self::PartialArgPathMissing {
                candidate,
                part,
                reason,
            } => (
                "partial_arg_path_missing",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                    ("reason", Str(reason)),
                ],
            ),
            Self::PartialArgPathNotString {
                candidate,
                part,
                reason,
            } => (
                "partial_arg_path_not_string",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                    ("reason", Str(reason)),
                ],
            ),
            Self::SignatureChanged { candidate, part } => (
                "signature_changed",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                ],
            ),
            Self::NamelessStreamedCall {
                candidate,
                part,
                call_id,
                args,
            } => (
                "nameless_streamed_call",
                vec![
                    ("candidate", Int((*candidate).into())),
                    ("part", int(*part)),
                    ("call_id", OptStr(call_id.as_deref())),
                    ("args", Json(args)),
                ],
            ),
            Self::NamelessCall {
                event,
                path,
                call_id,
                args,
            } => (
                "nameless_call",
                vec![
                    ("event", Int(*event)),
                    ("path", Str(path)),
                    ("call_id", OptStr(call_id.as_deref())),
                    ("args", Json(args)),
                ],
            ),
            Self::WarningsDropped { count, limit } => (
                "warnings_dropped",
                vec![("count", Int(*count)), ("limit", Int(*limit))],
            ),
            Self::IxMissingDone => ("ix_missing_done", vec![]),
            Self::IxDataAfterDone { offset } => {
                ("ix_data_after_done", vec![("offset", Int(*offset))])
            }
            Self::IxInvalidJson { event, offset } => (
                "ix_invalid_json",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::IxNotAnObject { event, offset } => (
                "ix_not_an_object",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::IxInvalidUtf8 { event, offset } => (
                "ix_invalid_utf8",
                vec![("event", Int(*event)), ("offset", Int(*offset))],
            ),
            Self::IxEventTooLarge {
                event,
                offset,
                limit,
            } => (
                "ix_event_too_large",
                vec![
                    ("event", Int(*event)),
                    ("offset", Int(*offset)),
                    ("limit", Int(*limit)),
                ],
            ),
            Self::IxUnknownEventType { event, event_type } => (
                "ix_unknown_event_type",
                vec![("event", Int(*event)), ("event_type", Str(event_type))],
            ),
            Self::IxMissingEventType { event } => {
                ("ix_missing_event_type", vec![("event", Int(*event))])
            }
            Self::IxStepIndexInvalid { event, event_type } => (
                "ix_step_index_invalid",
                vec![("event", Int(*event)), ("event_type", Str(event_type))],
            ),
            Self::IxStepRestarted { event, step } => (
                "ix_step_restarted",
                vec![("event", Int(*event)), ("step", Int((*step).into()))],
            ),
            Self::IxStepWithoutStart { event, step } => (
                "ix_step_without_start",
                vec![("event", Int(*event)), ("step", Int((*step).into()))],
            ),
            Self::IxDeltaWithoutType { event, step } => (
                "ix_delta_without_type",
                vec![("event", Int(*event)), ("step", Int((*step).into()))],
            ),
            Self::IxDeltaAfterStop { event, step } => (
                "ix_delta_after_stop",
                vec![("event", Int(*event)), ("step", Int((*step).into()))],
            ),
            Self::IxDeltaSkipped {
                event,
                step,
                reason,
            } => (
                "ix_delta_skipped",
                vec![
                    ("event", Int(*event)),
                    ("step", Int((*step).into())),
                    ("reason", Str(reason)),
                ],
            ),
            Self::IxLongArgPath { step } => {
                ("ix_long_arg_path", vec![("step", Int((*step).into()))])
            }
            Self::IxBadArguments { step, reason } => (
                "ix_bad_arguments",
                vec![("step", Int((*step).into())), ("reason", Str(reason))],
            ),
            Self::IxStepNeverStopped { step, step_type } => (
                "ix_step_never_stopped",
                vec![
                    ("step", Int((*step).into())),
                    ("step_type", OptStr(step_type.as_deref())),
                ],
            ),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// One catalog entry, borrowed from the parsed catalog.
#[derive(Debug)]
struct Entry {
    rule: &'static str,
    template: &'static str,
    fields: Vec<&'static str>,
}

/// The catalog by code, parsed on first use.
fn entry(code: &str) -> Option<&'static Entry> {
    static TABLE: OnceLock<HashMap<String, Entry>> = OnceLock::new();
    TABLE.get_or_init(parse_catalog).get(code)
}

fn parse_catalog() -> HashMap<String, Entry> {
    // The catalog is a compile-time constant, checked by the tests below and
    // by tests/test_diagnostics_catalog.py: a parse failure cannot depend on input.
    static PARSED: OnceLock<Value> = OnceLock::new();
    let parsed = PARSED.get_or_init(|| serde_json::from_str(CATALOG).unwrap_or(Value::Null));
    let mut table = HashMap::new();
    let Some(Value::Array(items)) = parsed.get("diagnostics") else {
        debug_assert!(false, "diagnostics.json has no diagnostics list");
        return table;
    };
    for item in items {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or("");
        let fields = match item.get("fields") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        table.insert(
            text("code").to_owned(),
            Entry {
                rule: text("rule"),
                template: text("template"),
                fields,
            },
        );
    }
    table
}

/// X2: substitutes `{f}` and `{f!j}`; a `[[...]]` group only when none of its
/// fields is null.
fn render(template: &str, fields: &[(&'static str, Field<'_>)]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(start) = rest.find("[[") {
        substitute(&rest[..start], fields, &mut out);
        let group = &rest[start + 2..];
        let end = group.find("]]").unwrap_or(group.len());
        let inner = &group[..end];
        if placeholders(inner).all(|(name, _)| lookup(fields, name).is_some_and(|f| !f.is_null())) {
            substitute(inner, fields, &mut out);
        }
        rest = group.get(end + 2..).unwrap_or("");
    }
    substitute(rest, fields, &mut out);
    out
}

fn substitute(text: &str, fields: &[(&'static str, Field<'_>)], out: &mut String) {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return;
        };
        let (name, json) = split_spec(&after[..close]);
        if let Some(field) = lookup(fields, name) {
            field.write(json, out);
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
}

/// `name` or `name!j` -> (name, is JSON).
fn split_spec(spec: &str) -> (&str, bool) {
    spec.strip_suffix("!j")
        .map_or((spec, false), |name| (name, true))
}

fn placeholders(text: &str) -> impl Iterator<Item = (&str, bool)> {
    text.split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}'))
        .map(|(spec, _)| split_spec(spec))
}

fn lookup<'a>(fields: &[(&'static str, Field<'a>)], name: &str) -> Option<Field<'a>> {
    fields.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One diagnostic of every code.
    #[allow(clippy::too_many_lines)] // one line per catalog code
    fn one_of_each() -> Vec<Diagnostic> {
        use Diagnostic as D;
        let s = |t: &str| t.to_owned();
        vec![
            D::ArrayTrailingData { offset: 1 },
            D::NoEventFound { bytes: 2 },
            D::UnterminatedEventProcessed { offset: 3 },
            D::IncompleteEventDropped { offset: 4 },
            D::InvalidJson {
                event: 1,
                offset: 2,
            },
            D::NotAnObject {
                event: 1,
                offset: 2,
            },
            D::InvalidUtf8 {
                event: 1,
                offset: 2,
            },
            D::EventTooLarge {
                event: 1,
                offset: 2,
                limit: 3,
            },
            D::CompressedBody { encoding: "gzip" },
            D::LinesWithoutEnds { offset: 5 },
            D::WrongShape {
                event: 1,
                path: s("candidates"),
                expected: s("a list"),
            },
            D::ResponseIdChanged {
                event: 1,
                kept_id: json!("a"),
                new_id: json!(2),
            },
            D::CallRenamed {
                candidate: 0,
                part: 1,
                name: s("b"),
                kept_name: s("a"),
            },
            D::PartialArgSkipped {
                candidate: 0,
                part: 1,
                json_path: s("$.a"),
                reason: s("r"),
            },
            D::PartialArgPathMissing {
                candidate: 0,
                part: 1,
                reason: s("r"),
            },
            D::PartialArgPathNotString {
                candidate: 0,
                part: 1,
                reason: s("r"),
            },
            D::SignatureChanged {
                candidate: 0,
                part: 1,
            },
            D::NamelessStreamedCall {
                candidate: 0,
                part: 1,
                call_id: None,
                args: json!({}),
            },
            D::NamelessCall {
                event: 1,
                path: s("p"),
                call_id: Some(s("i")),
                args: json!({}),
            },
            D::WarningsDropped {
                count: 1,
                limit: 1000,
            },
            D::IxMissingDone,
            D::IxDataAfterDone { offset: 1 },
            D::IxInvalidJson {
                event: 1,
                offset: 2,
            },
            D::IxNotAnObject {
                event: 1,
                offset: 2,
            },
            D::IxInvalidUtf8 {
                event: 1,
                offset: 2,
            },
            D::IxEventTooLarge {
                event: 1,
                offset: 2,
                limit: 3,
            },
            D::IxUnknownEventType {
                event: 1,
                event_type: s("x"),
            },
            D::IxMissingEventType { event: 1 },
            D::IxStepIndexInvalid {
                event: 1,
                event_type: s("step.start"),
            },
            D::IxStepRestarted { event: 1, step: 2 },
            D::IxStepWithoutStart { event: 1, step: 2 },
            D::IxDeltaWithoutType { event: 1, step: 2 },
            D::IxDeltaAfterStop { event: 1, step: 2 },
            D::IxDeltaSkipped {
                event: 1,
                step: 2,
                reason: s("r"),
            },
            D::IxLongArgPath { step: 2 },
            D::IxBadArguments {
                step: 2,
                reason: s("r"),
            },
            D::IxStepNeverStopped {
                step: 2,
                step_type: None,
            },
        ]
    }

    #[test]
    fn x1_every_catalog_code_has_one_variant_with_its_fields() {
        let table = parse_catalog();
        let mut codes: Vec<&str> = one_of_each().iter().map(Diagnostic::code).collect();
        codes.sort_unstable();
        let mut catalog: Vec<&str> = table.keys().map(String::as_str).collect();
        catalog.sort_unstable();
        assert_eq!(codes, catalog);
        for d in one_of_each() {
            let names: Vec<&str> = d.fields().iter().map(|(n, _)| *n).collect();
            assert_eq!(names, table[d.code()].fields, "{}", d.code());
        }
    }

    #[test]
    fn x1_field_types_match_the_catalog() {
        let catalog: Value = serde_json::from_str(CATALOG).unwrap_or_default();
        for d in one_of_each() {
            for (name, field) in d.fields() {
                let want = catalog["fields"][name].as_str().unwrap_or_default();
                let got = match field {
                    Field::Int(_) => "int",
                    Field::Str(_) => "str",
                    Field::OptStr(_) => "str?",
                    Field::Json(_) => "json",
                };
                assert_eq!(got, want, "{}.{name}", d.code());
            }
        }
    }

    #[test]
    fn x2_message_is_the_rendered_template() {
        let d = Diagnostic::CallRenamed {
            candidate: 0,
            part: 1,
            name: "b".into(),
            kept_name: "é".into(),
        };
        assert_eq!(
            d.message(),
            r#"candidate 0, part 1: a later chunk named the call "b" but it is named "é"; the first name was kept"#
        );
    }

    #[test]
    fn x2_optional_group_only_with_its_field() {
        let with = Diagnostic::NamelessCall {
            event: 3,
            path: "candidates[0].content.parts[1]".into(),
            call_id: Some("c1".into()),
            args: json!({"a": 1.5}),
        };
        assert_eq!(
            with.message(),
            r#"event 3: candidates[0].content.parts[1] is a function call with id "c1" without a name; it was left out (its args: {"a":1.5})"#
        );
        let without = Diagnostic::NamelessStreamedCall {
            candidate: 0,
            part: 2,
            call_id: None,
            args: json!({}),
        };
        assert_eq!(
            without.message(),
            "candidate 0, part 2: a streamed function call never received a name and was left out; its args: {}"
        );
    }

    #[test]
    fn x2_absent_optional_string_renders_as_json_null() {
        let d = Diagnostic::IxStepNeverStopped {
            step: 4,
            step_type: None,
        };
        assert_eq!(d.message(), "step 4 (null) never received step.stop");
    }

    #[test]
    fn x4_error_text_is_the_message() {
        let e = crate::error::MalformedStream::invalid_utf8(10, 2);
        assert_eq!(
            e.message(),
            "event 2 at byte 10 is not valid UTF-8; it was skipped"
        );
        assert_eq!(e.message(), e.diagnostic.message());
        assert_eq!(e.diagnostic.rule(), "F8");
    }

    /// X6: no message carries a rule id (one at its start was how they read
    /// before); the rule stays reachable as `rule()`.
    #[test]
    fn x6_warning_texts_carry_no_rule_id() {
        let is_rule_id = |w: &str| {
            let b = w.as_bytes();
            let letters = b.iter().take_while(|c| c.is_ascii_uppercase()).count();
            let digits = b[letters..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let tail = b.len() - letters - digits;
            (1..=2).contains(&letters)
                && digits > 0
                && (tail == 0 || (tail == 1 && b[b.len() - 1].is_ascii_lowercase()))
        };
        for d in one_of_each() {
            let message = d.message();
            assert!(!d.rule().is_empty(), "{}", d.code());
            let words = message.split(|c: char| !c.is_ascii_alphanumeric());
            for word in words {
                assert!(!is_rule_id(word), "{}: {message}", d.code());
            }
        }
    }
}
