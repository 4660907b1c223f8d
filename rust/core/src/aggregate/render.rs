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
    let sci = format!("{f:e}"); // e.g. "-1.2345e-7", shortest round trip
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa
        .strip_prefix('-')
        .map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
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
        ] {
            assert_eq!(py_float_repr(f), want);
        }
        assert_eq!(
            cj(&json!({"a": [1, "é\n", null, true]})),
            r#"{"a":[1,"é\n",null,true]}"#
        );
    }
}
