//! The `jsonPath` subset of streamed function-call arguments (aggregation.md
//! C5, C9, C10): parsing with strict rejections, lookup, and writing values.

use serde_json::{Map, Value};

/// Paths with more segments than this are rejected (C9): the JSON nesting
/// limit (F10), so an argument streamed is accepted as deep as one sent whole.
pub const MAX_SEGMENTS: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Why a path was rejected; the first problem met scanning left to right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    Syntax,
    IndexAboveMax,
    TooDeep,
}

/// Parses `$` followed by one or more `.name`, `['key']`, `["key"]` or `[N]`.
pub fn parse(path: &str, max_index: usize) -> Result<Vec<Segment>, PathError> {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'$') {
        return Err(PathError::Syntax);
    }
    let mut segments = Vec::new();
    let mut pos = 1;
    while pos < bytes.len() {
        if segments.len() == MAX_SEGMENTS {
            return Err(PathError::TooDeep);
        }
        match bytes[pos] {
            b'.' => {
                let start = pos + 1;
                let len = bytes[start..]
                    .iter()
                    .position(|b| matches!(b, b'.' | b'[' | b']'))
                    .unwrap_or(bytes.len() - start);
                if len == 0 {
                    return Err(PathError::Syntax);
                }
                // The delimiters are ASCII, so `start..start + len` is on char boundaries.
                let name = path.get(start..start + len).ok_or(PathError::Syntax)?;
                segments.push(Segment::Key(name.to_owned()));
                pos = start + len;
            }
            b'[' => match bytes.get(pos + 1) {
                Some(&quote @ (b'\'' | b'"')) => {
                    let (key, end) = parse_quoted(path, pos + 2, quote)?;
                    if bytes.get(end) != Some(&b']') {
                        return Err(PathError::Syntax);
                    }
                    segments.push(Segment::Key(key));
                    pos = end + 1;
                }
                Some(b'0'..=b'9') => {
                    let start = pos + 1;
                    let len = bytes[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .unwrap_or(bytes.len() - start);
                    let end = start + len;
                    if bytes.get(end) != Some(&b']') || (len > 1 && bytes[start] == b'0') {
                        return Err(PathError::Syntax);
                    }
                    let index = path
                        .get(start..end)
                        .and_then(|digits| digits.parse::<usize>().ok())
                        .filter(|&n| n <= max_index)
                        .ok_or(PathError::IndexAboveMax)?;
                    segments.push(Segment::Index(index));
                    pos = end + 1;
                }
                _ => return Err(PathError::Syntax),
            },
            _ => return Err(PathError::Syntax),
        }
    }
    if segments.is_empty() {
        return Err(PathError::Syntax);
    }
    Ok(segments)
}

/// Reads a quoted key starting after the opening quote; returns the key and
/// the position just after the closing quote.
fn parse_quoted(path: &str, start: usize, quote: u8) -> Result<(String, usize), PathError> {
    let rest = path.get(start..).ok_or(PathError::Syntax)?;
    let mut key = String::new();
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, esc) = chars.next().ok_or(PathError::Syntax)?;
                match esc {
                    '\\' => key.push('\\'),
                    '\'' => key.push('\''),
                    '"' => key.push('"'),
                    '/' => key.push('/'),
                    'b' => key.push('\u{8}'),
                    'f' => key.push('\u{c}'),
                    'n' => key.push('\n'),
                    'r' => key.push('\r'),
                    't' => key.push('\t'),
                    'u' => {
                        let first = read_hex4(&mut chars)?;
                        let code = if (0xD800..0xDC00).contains(&first) {
                            // A high surrogate must be followed by an escaped low one.
                            if chars.next().map(|(_, c)| c) != Some('\\')
                                || chars.next().map(|(_, c)| c) != Some('u')
                            {
                                return Err(PathError::Syntax);
                            }
                            let low = read_hex4(&mut chars)?;
                            if !(0xDC00..0xE000).contains(&low) {
                                return Err(PathError::Syntax);
                            }
                            0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            first
                        };
                        key.push(char::from_u32(code).ok_or(PathError::Syntax)?);
                    }
                    _ => return Err(PathError::Syntax),
                }
            }
            c if c as u32 == u32::from(quote) => return Ok((key, start + i + 1)),
            c => key.push(c),
        }
    }
    Err(PathError::Syntax)
}

fn read_hex4(chars: &mut std::str::CharIndices<'_>) -> Result<u32, PathError> {
    let mut code = 0;
    for _ in 0..4 {
        let (_, c) = chars.next().ok_or(PathError::Syntax)?;
        code = code * 16 + c.to_digit(16).ok_or(PathError::Syntax)?;
    }
    Ok(code)
}

/// True when `segments` resolve to an existing value (null included) in `args` (C10).
#[must_use]
pub fn holds_value(args: &Map<String, Value>, segments: &[Segment]) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return false;
    };
    let Segment::Key(key) = first else {
        return false;
    };
    let Some(mut current) = lookup(args, key) else {
        return false;
    };
    for segment in rest {
        let next = match (segment, current) {
            (Segment::Key(k), Value::Object(map)) => lookup(map, k),
            (Segment::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(v) => current = v,
            None => return false,
        }
    }
    true
}

/// What to write at the end of a path (C4).
pub enum Write<'a> {
    /// `stringValue`: append to an existing string, otherwise replace.
    AppendString(&'a str),
    /// `numberValue`, `boolValue`, `nullValue`: replace.
    Replace(Value),
}

/// Why a write was refused; nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The path crosses a value of the wrong kind (C5 "type conflict").
    TypeConflict,
    /// An index more than [`PAD_SLACK`] past the end of its array (C16).
    TooFar { index: usize, len: usize },
}

/// How far past the end of an array an index may point (C16): padding costs
/// memory the input did not pay for, so it is bounded per segment.
pub const PAD_SLACK: usize = 8;

/// Writes at `segments` inside `args`, creating missing containers (C4).
/// Nothing is changed when the path is refused: every problem is found by
/// [`check`] before anything is created.
pub fn write(
    args: &mut Map<String, Value>,
    segments: &[Segment],
    value: Write<'_>,
) -> Result<(), WriteError> {
    let Some((Segment::Key(first), rest)) = segments.split_first() else {
        return Err(WriteError::TypeConflict);
    };
    check(lookup(args, first), rest)?;
    let mut slot = entry_of(args, first).ok_or(WriteError::TypeConflict)?;
    for segment in rest {
        slot = match segment {
            Segment::Key(k) => {
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                match slot {
                    Value::Object(map) => entry_of(map, k).ok_or(WriteError::TypeConflict)?,
                    _ => return Err(WriteError::TypeConflict),
                }
            }
            Segment::Index(i) => {
                if !slot.is_array() {
                    *slot = Value::Array(Vec::new());
                }
                match slot {
                    Value::Array(items) => {
                        // `check` bounded the padding; a failed allocation is refused, not fatal.
                        let want = i.checked_add(1).ok_or(WriteError::TooFar {
                            index: *i,
                            len: items.len(),
                        })?;
                        if items.len() < want {
                            items.try_reserve_exact(want - items.len()).map_err(|_| {
                                WriteError::TooFar {
                                    index: *i,
                                    len: items.len(),
                                }
                            })?;
                            items.resize(want, Value::Null);
                        }
                        match items.get_mut(*i) {
                            Some(v) => v,
                            None => return Err(WriteError::TypeConflict),
                        }
                    }
                    _ => return Err(WriteError::TypeConflict),
                }
            }
        };
    }
    match value {
        Write::AppendString(fragment) => match slot {
            Value::String(s) => s.push_str(fragment),
            other => *other = Value::String(fragment.to_owned()),
        },
        Write::Replace(v) => *slot = v,
    }
    Ok(())
}

/// Objects with at most this many keys are searched by comparing keys:
/// arguments have a few, and hashing the key (`SipHash`) was 6 % of
/// `streamed_args`, where every fragment looks its keys up two or three times.
const SMALL: usize = 8;

/// `map[key]`, if there.
fn lookup<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    if map.len() <= SMALL {
        return map.iter().find_map(|(k, v)| (k == key).then_some(v));
    }
    map.get(key)
}

/// `map[key]`, made null (last) if it was not there: the key is copied
/// only then. (None never happens: the key is there once inserted.)
fn entry_of<'m>(map: &'m mut Map<String, Value>, key: &str) -> Option<&'m mut Value> {
    let small = map.len() <= SMALL;
    let known = if small {
        map.keys().any(|k| k == key)
    } else {
        map.contains_key(key)
    };
    if !known {
        map.insert(key.to_owned(), Value::Null);
    }
    if map.len() <= SMALL {
        return map.iter_mut().find_map(|(k, v)| (k == key).then_some(v));
    }
    map.get_mut(key)
}

/// Finds the first problem of a write, left to right: along the existing
/// values, every value that is present and not null must be an object before
/// a key segment and an array before an index segment; every index may be at
/// most [`PAD_SLACK`] past the end of its array (a created array is empty).
fn check(start: Option<&Value>, rest: &[Segment]) -> Result<(), WriteError> {
    let mut current = start;
    for segment in rest {
        match (current, segment) {
            (None | Some(Value::Null), Segment::Index(i)) => {
                current = None;
                if *i > PAD_SLACK {
                    return Err(WriteError::TooFar { index: *i, len: 0 });
                }
            }
            (None | Some(Value::Null), Segment::Key(_)) => current = None,
            (Some(Value::Object(map)), Segment::Key(k)) => current = lookup(map, k),
            (Some(Value::Array(items)), Segment::Index(i)) => {
                if *i > items.len().saturating_add(PAD_SLACK) {
                    return Err(WriteError::TooFar {
                        index: *i,
                        len: items.len(),
                    });
                }
                current = items.get(*i);
            }
            _ => return Err(WriteError::TypeConflict),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_owned())
    }

    #[test]
    fn c5_accepts_dot_bracket_and_index_segments() {
        assert_eq!(
            parse("$.items[0]['odd key'][\"q\\\"x\"]", 10),
            Ok(vec![
                key("items"),
                Segment::Index(0),
                key("odd key"),
                key("q\"x")
            ])
        );
        assert_eq!(parse("$['\\u00e9\\n']", 10), Ok(vec![key("é\n")]));
        assert_eq!(parse("$['\\ud83d\\ude00']", 10), Ok(vec![key("😀")]));
    }

    #[test]
    fn c5_rejects_unsupported_forms() {
        for bad in [
            "$",
            "",
            "a",
            "$..a",
            "$.a[]",
            "$.a[*]",
            "$[-1]",
            "$.a.",
            "$['a'",
            "$[01]",
            "$['\\x']",
            "$['\\ud83d']",
            "$.a b[0",
            "$ .a",
        ] {
            assert_eq!(parse(bad, 10), Err(PathError::Syntax), "{bad}");
        }
        assert_eq!(parse("$[11]", 10), Err(PathError::IndexAboveMax));
        assert_eq!(
            parse("$[99999999999999999999999999]", 10),
            Err(PathError::IndexAboveMax)
        );
        let deep = format!("${}", ".a".repeat(1025));
        assert_eq!(parse(&deep, 10), Err(PathError::TooDeep));
        let ok = format!("${}", ".a".repeat(1024));
        assert_eq!(parse(&ok, 10).map(|s| s.len()), Ok(1024));
    }

    #[test]
    fn c4_creates_containers_pads_arrays_and_appends() {
        let mut args = Map::new();
        let p = parse("$.items[2].sku", 10).unwrap_or_default();
        assert_eq!(write(&mut args, &p, Write::AppendString("ab")), Ok(()));
        assert_eq!(write(&mut args, &p, Write::AppendString("c")), Ok(()));
        assert_eq!(
            Value::Object(args),
            json!({"items": [null, null, {"sku": "abc"}]})
        );
    }

    #[test]
    fn c4_null_in_the_way_counts_as_missing() {
        let mut args = Map::new();
        args.insert("a".into(), Value::Null);
        let p = parse("$.a.b", 10).unwrap_or_default();
        assert_eq!(write(&mut args, &p, Write::Replace(json!(1))), Ok(()));
        assert_eq!(Value::Object(args), json!({"a": {"b": 1}}));
    }

    #[test]
    fn c5_type_conflict_changes_nothing() {
        let mut args = Map::new();
        args.insert("s".into(), json!("text"));
        args.insert("o".into(), json!({"k": 1}));
        let before = args.clone();
        for path in ["$.s.x", "$.o[0]", "$.s[0]"] {
            let p = parse(path, 10).unwrap_or_default();
            assert_eq!(
                write(&mut args, &p, Write::Replace(json!(2))),
                Err(WriteError::TypeConflict)
            );
        }
        assert_eq!(args, before);
        let root_index = [Segment::Index(0)];
        assert_eq!(
            write(&mut args, &root_index, Write::Replace(json!(2))),
            Err(WriteError::TypeConflict)
        );
    }

    #[test]
    fn c16_padding_is_bounded_per_segment_and_refused_writes_change_nothing() {
        let mut args = Map::new();
        let ok = parse("$.a[8]", 100).unwrap_or_default();
        assert_eq!(write(&mut args, &ok, Write::Replace(json!(1))), Ok(()));
        let before = args.clone();
        for (path, index, len) in [
            ("$.a[18]", 18, 9),
            ("$.b[9]", 9, 0),
            ("$.c.d[0][9]", 9, 0),
            ("$.a[18][0]", 18, 9),
        ] {
            let p = parse(path, 100).unwrap_or_default();
            assert_eq!(
                write(&mut args, &p, Write::Replace(json!(2))),
                Err(WriteError::TooFar { index, len }),
                "{path}"
            );
        }
        assert_eq!(args, before);
        let next = parse("$.a[17]", 100).unwrap_or_default();
        assert_eq!(write(&mut args, &next, Write::Replace(json!(3))), Ok(()));
        assert_eq!(
            args.get("a").and_then(Value::as_array).map(Vec::len),
            Some(18)
        );
    }

    #[test]
    fn c16_huge_index_with_huge_max_neither_wraps_nor_allocates() {
        let mut args = Map::new();
        args.insert("a".into(), json!([null, 7]));
        let p = parse("$.a[18446744073709551615]", usize::MAX).unwrap_or_default();
        assert_eq!(
            write(&mut args, &p, Write::Replace(json!(1))),
            Err(WriteError::TooFar {
                index: usize::MAX,
                len: 2
            })
        );
        assert_eq!(args.get("a"), Some(&json!([null, 7])));
    }

    #[test]
    fn c10_holds_value_includes_null() {
        let args = json!({"a": {"b": null}, "l": [1]});
        let Value::Object(map) = args else { return };
        assert!(holds_value(&map, &parse("$.a.b", 10).unwrap_or_default()));
        assert!(holds_value(&map, &parse("$.l[0]", 10).unwrap_or_default()));
        assert!(!holds_value(&map, &parse("$.l[1]", 10).unwrap_or_default()));
        assert!(!holds_value(&map, &parse("$.a.c", 10).unwrap_or_default()));
    }

    #[test]
    fn c4_appends_find_their_key_in_small_and_large_objects() {
        // Objects of up to 8 keys are searched by comparing keys, larger
        // ones by hash: fragments go to the same key on both sides of 8,
        // nested and at the top, and keys keep their first order.
        let mut args = Map::new();
        for round in 0..2 {
            for k in 0..12 {
                let name = format!("k{k}");
                let nested = [key("o"), key(&name)];
                write(&mut args, &[key(&name)], Write::AppendString("ab")).unwrap_or(());
                write(&mut args, &nested, Write::AppendString(&round.to_string())).unwrap_or(());
                assert!(holds_value(&args, &nested));
            }
        }
        let mut expected = Map::new();
        let mut inner = Map::new();
        for k in 0..12 {
            expected.insert(format!("k{k}"), json!("abab"));
            inner.insert(format!("k{k}"), json!("01"));
            if k == 0 {
                expected.insert("o".into(), Value::Null);
            }
        }
        expected.insert("o".into(), Value::Object(inner));
        assert_eq!(Value::Object(args.clone()), Value::Object(expected));
        let order: Vec<&str> = args.keys().map(String::as_str).collect();
        assert_eq!(&order[..3], ["k0", "o", "k1"]);
        assert!(!holds_value(&args, &[key("o"), key("k12")]));
    }
}
