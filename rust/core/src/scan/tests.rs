//! R8: the scanner accepts exactly what orjson (and `serde_json`) accept and
//! reads values as orjson does.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::{run, Invalid, Scanner};
use crate::event::MAX_JSON_DEPTH;

fn scan_value(text: &str) -> Result<Value, Invalid> {
    let mut s = Scanner::new(text);
    let value = s.value()?;
    if s.at_end() {
        Ok(value)
    } else {
        Err(Invalid)
    }
}

fn scan_skip(text: &str) -> Result<(), Invalid> {
    let mut s = Scanner::new(text);
    s.skip_value()?;
    if s.at_end() {
        Ok(())
    } else {
        Err(Invalid)
    }
}

#[test]
fn r8_minus_zero_integer_is_the_integer_zero() {
    // orjson reads `-0` as the int 0 (serde_json as the float -0.0).
    assert_eq!(scan_value("-0"), Ok(json!(0)));
    assert!(scan_value("-0").is_ok_and(|v| v.is_u64()));
    assert!(scan_value("-0.0").is_ok_and(|v| v.as_f64().is_some_and(f64::is_sign_negative)));
}

#[test]
fn r8_numbers_read_as_orjson_reads_them() {
    // 18 digits are summed as they are read; 19 and more go to the parser.
    assert_eq!(
        scan_value("999999999999999999"),
        Ok(json!(999_999_999_999_999_999_u64))
    );
    assert_eq!(
        scan_value("-999999999999999999"),
        Ok(json!(-999_999_999_999_999_999_i64))
    );
    assert_eq!(
        scan_value("-1000000000000000000"),
        Ok(json!(-1_000_000_000_000_000_000_i64))
    );
    assert_eq!(scan_value("-0"), Ok(json!(0)));
    for bad in ["01", "-01", "-", "1.", "1e", "--1"] {
        assert_eq!(scan_value(bad), Err(Invalid), "{bad}");
    }
    assert_eq!(scan_value("18446744073709551615"), Ok(json!(u64::MAX)));
    assert_eq!(scan_value("-9223372036854775808"), Ok(json!(i64::MIN)));
    assert_eq!(
        scan_value("18446744073709551616"),
        Ok(json!(18_446_744_073_709_551_616.0_f64))
    );
    assert_eq!(scan_value("1E2"), Ok(json!(100.0)));
    assert_eq!(scan_value("1.5e-400"), Ok(json!(0.0)));
    let long_fraction = format!("{}.5", "9".repeat(310));
    for overflow in ["1e400", "-1e309", &"9".repeat(400), &long_fraction] {
        assert_eq!(scan_value(overflow), Err(Invalid), "{overflow}");
        assert_eq!(scan_skip(overflow), Err(Invalid), "{overflow}");
    }
    // Below 300 characters without an exponent no number overflows, so the
    // skip does not parse it (but it is still read as a double by `value`).
    let wide = format!("-{}.25", "9".repeat(296));
    assert_eq!(scan_skip(&wide), Ok(()));
    assert!(
        matches!(scan_value(&wide), Ok(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite))
    );
}

#[test]
fn r8_strings_are_strict() {
    assert_eq!(
        scan_value(r#""a\u00e9\ud83d\ude00\n""#),
        Ok(json!("aé😀\n"))
    );
    for bad in [
        r#""\ud800""#,
        r#""\ud800\u0041""#,
        r#""\udc00""#,
        r#""\x""#,
        r#""\u12""#,
        "\"a\tb\"",
        "\"open",
    ] {
        assert_eq!(scan_value(bad), Err(Invalid), "{bad}");
        assert_eq!(scan_skip(bad), Err(Invalid), "{bad}");
    }
}

#[test]
fn r8_grammar_is_strict() {
    for bad in [
        "[1,]",
        "{\"a\":1,}",
        "[01]",
        "[1.]",
        "[.5]",
        "[1e]",
        "[+1]",
        "{a:1}",
        "[tru]",
        "[nul]",
        "{\"a\" 1}",
        "[1 2]",
        "{,}",
        "[,1]",
        "",
    ] {
        assert_eq!(scan_value(bad), Err(Invalid), "{bad}");
        assert_eq!(scan_skip(bad), Err(Invalid), "{bad}");
    }
    assert_eq!(
        scan_value(" {\"a\" : [ 1 , {\"b\":null} ] , \"a\":true} "),
        Ok(json!({"a": true}))
    );
}

#[test]
fn r8_duplicate_keys_keep_first_position_last_value() {
    let v = scan_value(r#"{"a":1,"b":2,"a":3}"#).unwrap_or(Value::Null);
    let keys: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["a", "b"]);
    assert_eq!(v, json!({"a": 3, "b": 2}));
}

#[test]
fn r8_nesting_up_to_1024_levels_without_recursion() {
    let ok = format!(
        "{}1{}",
        "[".repeat(MAX_JSON_DEPTH),
        "]".repeat(MAX_JSON_DEPTH)
    );
    let deep = format!(
        "{}1{}",
        "[".repeat(MAX_JSON_DEPTH + 1),
        "]".repeat(MAX_JSON_DEPTH + 1)
    );
    // A 64 KiB stack: a recursive scanner would need far more at 1024 levels.
    let result = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            (
                scan_skip(&ok).is_ok(),
                scan_skip(&deep).is_err(),
                // Dropping the 1024-level tree recurses; keep it alive past the scan.
                std::mem::ManuallyDrop::new(scan_value(&ok)).is_ok(),
                scan_value(&deep).is_err(),
            )
        })
        .and_then(|h| h.join().map_err(|_| std::io::Error::other("panicked")));
    assert_eq!(result.ok(), Some((true, true, true, true)));
}

/// JSON-ish text: mostly valid pieces, with every kind of mistake nearby.
fn jsonish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"a\"",
        "\"\\u00e9\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"x",
        "\\",
        "0",
        "-0",
        "12",
        "-",
        "1.5",
        "1e5",
        "1e400",
        "01",
        ".",
        "e",
        "true",
        "false",
        "null",
        "nul",
        " ",
        "\n",
        "\"\t\"",
        "é",
    ]);
    prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat())
}

/// Values as `serde_json` writes them (it never writes `-0`).
fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-c]{1,2}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// R8: accepted exactly when `serde_json` accepts (the text never
    /// nests deep enough for `serde_json`'s own limit).
    #[test]
    fn r8_accepts_exactly_what_serde_json_accepts(text in jsonish()) {
        let serde = serde_json::from_str::<Value>(&text).is_ok();
        prop_assert_eq!(scan_skip(&text).is_ok(), serde);
        prop_assert_eq!(scan_value(&text).is_ok(), serde);
    }

    /// R8: the block-at-a-time search finds what a byte-at-a-time one finds.
    #[test]
    fn r8_string_ends_found_sixteen_bytes_at_a_time(
        bytes in prop::collection::vec(
            prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x20, 0x20u8..=0xff, Just(b'a')], 0..80),
    ) {
        let naive = bytes
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(bytes.len());
        let ascii = bytes[..naive].is_ascii();
        prop_assert_eq!(run::plain_run(&bytes, 0), (naive, ascii));
    }

    /// R8: long runs (64 bytes a step with AVX2) end where a byte-at-a-time
    /// search ends them, from any start, with rare stops and wide bytes.
    #[test]
    fn r8_long_string_ends_found_as_byte_by_byte(
        bytes in prop::collection::vec(
            prop_oneof![
                50 => Just(b'a'),
                50 => 0x20u8..0x7f,
                4 => 0x80u8..=0xff,
                1 => Just(b'"'),
                1 => Just(b'\\'),
                1 => 0u8..0x20,
            ],
            0..400),
        from in 0usize..80,
    ) {
        let from = from.min(bytes.len());
        let rest = &bytes[from..];
        let naive = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(rest.len());
        let ascii = rest[..naive].is_ascii();
        prop_assert_eq!(run::plain_run(&bytes, from), (from + naive, ascii));
    }

    /// R8: the values read equal `serde_json`'s on text it wrote.
    #[test]
    fn r8_values_equal_serde_json_on_its_own_text(value in values(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&value)
        } else {
            serde_json::to_string(&value)
        }
        .unwrap_or_default();
        prop_assert_eq!(scan_value(&text), Ok(value));
    }
}

#[test]
fn r8_eight_digits_at_once_read_as_the_digits_one_by_one() {
    use super::leading_digits;
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let stops = [
        b'"', b',', b'}', b'.', b'e', b'-', b'/', b':', b' ', 0, 0xFF, 0x80,
    ];
    for _ in 0..20_000 {
        let mut word = [0u8; 8];
        for b in &mut word {
            *b = b'0' + u8::try_from(next() % 10).unwrap_or(0);
        }
        let len = usize::try_from(next() % 9).unwrap_or(0);
        if len < 8 {
            word[len] = stops[usize::try_from(next()).unwrap_or(0) % stops.len()];
            for b in &mut word[len + 1..] {
                *b = u8::try_from(next() & 0xFF).unwrap_or(0);
            }
        }
        let expected = word[..len]
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        assert_eq!(leading_digits(&word), (len, expected), "{word:?}");
    }
    for (text, expected) in [
        ("0", 0),
        ("7,", 7),
        ("1834}", 1834),
        ("12345678", 12_345_678),
    ] {
        assert_eq!(
            leading_digits(text.as_bytes()),
            (text.trim_end_matches([',', '}']).len(), expected)
        );
    }
    // Numbers cut at every length around the eight-byte read, at the
    // payload's end and inside it.
    for len in 1..=20 {
        let digits: String = (0..len).map(|k: u8| char::from(b'1' + k % 9)).collect();
        for text in [
            digits.clone(),
            format!("[{digits}]"),
            format!("-{digits}"),
            format!("{digits}.5"),
        ] {
            let expected: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            assert_eq!(scan_value(&text).unwrap_or(Value::Null), expected, "{text}");
        }
    }
}

#[test]
fn r8_keys_of_every_length_read_as_serde_reads_them() {
    // The one- and two-block key path (up to 32 bytes, `:` right after the
    // quote) and the general one meet around 16 and 32 bytes, at the end of
    // the text and with whitespace, escapes or a control character.
    for len in 0..=40 {
        let key: String = (0..len).map(|k: u8| char::from(b'a' + k % 26)).collect();
        let wide: String = key.replacen('a', "\u{e9}", 1);
        let texts = [
            format!("{{\"{key}\":1}}"),
            format!("{{\"{key}\" :1}}"),
            format!("{{\"{key}\":1,\"{wide}\":[2]}}"),
            format!("{{\"x{key}\\n\":1}}"),
            format!("{{\"{key}\\\"\":1}}"),
            format!("{{\"{key}\u{1}\":1}}"),
            format!("{{\"{key}\u{1}:1}}"),
            format!("{{\"{key}\\:1}}"),
            format!("{{\"{key}\""),
            format!("{{\"{key}\":"),
            format!("{{\"{key}\"}}"),
            format!("[{{\"{key}\":{{\"{key}\":null}}}}]"),
        ];
        for text in texts {
            let expected = serde_json::from_str::<Value>(&text).map_err(|_| Invalid);
            assert_eq!(scan_value(&text), expected, "{text:?}");
            assert_eq!(scan_skip(&text), expected.map(|_| ()), "{text:?}");
        }
    }
}

/// Strings as code makes them: plain runs of every length around the
/// 16-byte block, one-letter escapes, `\u` escapes (surrogate pairs too)
/// and wide characters, in any order.
fn escaped_strings() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z ]{0,40}",
        3 => prop::sample::select(vec!["\n", "\"", "\\", "\t", "/", "\u{8}", "\u{c}", "\r"])
            .prop_map(str::to_owned),
        1 => prop::sample::select(vec!["\u{1}", "\u{1f}", "é", "日本", "😀", "\u{7f}"])
            .prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// R8: a string dense with escapes decodes (and skips) as `serde_json`
    /// reads it, written with its escapes as `serde_json` writes them, with
    /// `\u` escapes for every non-ASCII character, or with `\/` for `/`;
    /// cut anywhere, it is rejected as `serde_json` rejects it.
    #[test]
    fn r8_escaped_strings_decode_as_serde_json_reads_them(
        text in escaped_strings(),
        style in 0u8..3,
        cut in any::<prop::sample::Index>(),
    ) {
        let written = serde_json::to_string(&text).unwrap_or_default();
        let json = match style {
            0 => written,
            1 => {
                let mut ascii = String::new();
                for c in written.chars() {
                    if c.is_ascii() {
                        ascii.push(c);
                    } else {
                        for unit in c.encode_utf16(&mut [0u16; 2]) {
                            let _ = std::fmt::Write::write_fmt(&mut ascii, format_args!("\\u{unit:04x}"));
                        }
                    }
                }
                ascii
            }
            _ => written.replace('/', "\\/"),
        };
        let doc = format!("[{json},1]");
        let expected = Value::Array(vec![Value::String(text), Value::from(1)]);
        prop_assert_eq!(scan_value(&doc), Ok(expected));
        prop_assert_eq!(scan_skip(&doc), Ok(()));
        let at = cut.index(doc.len());
        if doc.is_char_boundary(at) {
            let short = &doc[..at];
            let serde = serde_json::from_str::<Value>(short).map_err(|_| Invalid);
            prop_assert_eq!(scan_value(short), serde.clone());
            prop_assert_eq!(scan_skip(short), serde.map(|_| ()));
        }
    }
}
