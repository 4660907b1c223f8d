//! Text forms Python writes (aggregation.md notation): `q` (a JSON string
//! literal) and `cj` (compact JSON, floats as Python's `repr`).

use serde_json::{Number, Value};

/// `q(s)`: a JSON string literal without ASCII escaping (Python
/// `json.dumps(s, ensure_ascii=False)`).
#[must_use]
pub fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `cj(v)`: compact JSON as Python writes it (`separators=(",", ":")`,
/// `ensure_ascii=False`, floats as `repr(float)`).
#[must_use]
pub fn cj(v: &Value) -> String {
    let mut out = String::new();
    write_cj(v, &mut out);
    out
}

pub(super) fn write_cj(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&py_number(n)),
        Value::String(s) => out.push_str(&q(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_cj(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&q(k));
                out.push(':');
                write_cj(item, out);
            }
            out.push('}');
        }
    }
}

/// A number as Python's `repr` writes it.
pub(super) fn py_number(n: &Number) -> String {
    if n.is_f64() {
        n.as_f64().map_or_else(|| n.to_string(), py_float_repr)
    } else {
        n.to_string()
    }
}

/// Python's `repr(float)`: shortest round-trip digits, scientific notation
/// when the exponent is below -4 or at least 16.
#[must_use]
pub fn py_float_repr(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let (digits, exp) = shortest_digits(f.abs());
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else {
            let point = point.unsigned_abs() as usize; // > 0 here
            if digits.len() <= point {
                format!("{digits}{}.0", "0".repeat(point - digits.len()))
            } else {
                format!("{}.{}", &digits[..point], &digits[point..])
            }
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.unsigned_abs())
    }
}

/// The shortest digits that read back as finite `f` (no leading or trailing
/// zeros; `"0"` for zero) and the decimal exponent of the first. Where two
/// such strings are equally near `f`, the even last digit, as Python's `repr`
/// chooses (Schubfach, in `zmij`); the standard library's `{:e}` takes the
/// other one (`2**-25` is `2.9802322387695312e-08` in Python, `...313e-8`).
fn shortest_digits(f: f64) -> (String, i32) {
    let mut buffer = zmij::Buffer::new();
    let text = buffer.format_finite(f);
    let (mantissa, exp) = text
        .split_once(['e', 'E'])
        .map_or((text, 0), |(m, e)| (m, e.parse::<i32>().unwrap_or(0)));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = int.chars().chain(frac.chars()).collect();
    let significant = all.trim_start_matches('0');
    let digits = significant.trim_end_matches('0');
    if digits.is_empty() {
        return ("0".into(), 0);
    }
    let count = |s: &str| i32::try_from(s.len()).unwrap_or(i32::MAX);
    let leading_zeros = count(&all) - count(significant);
    (digits.into(), exp + count(int) - 1 - leading_zeros)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cj_writes_floats_like_python_repr() {
        for (f, want) in [
            (0.5, "0.5"),
            (100.0, "100.0"),
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (123_456_789.125, "123456789.125"),
            (1e22, "1e+22"),
            (0.0, "0.0"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            // Exact ties between two shortest forms (written so that they are exact):
            // the even last digit, as Python.
            (2f64.powi(43) + 0.8125, "8796093022208.812"),
            (1_099_006_878_916.0 + 0.781_25, "1099006878916.7812"),
            (2f64.powi(-25), "2.9802322387695312e-08"),
            (1.781_25 * 2f64.powi(-17), "1.3589859008789062e-05"),
        ] {
            assert_eq!(py_float_repr(f), want);
        }
        assert_eq!(
            cj(&json!({"a": [1, "é\n", null, true]})),
            r#"{"a":[1,"é\n",null,true]}"#
        );
    }
}
