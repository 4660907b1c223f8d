//! JSON values and bytes between Rust and Python (D1 value shapes, F10 depth).

use fastagg_core::aggregate::Part;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use pyo3::{intern, IntoPyObjectExt};
use serde_json::{Map, Number, Value};

/// Conversions recurse once per nesting level (values nest up to 1024 levels,
/// F10); before each container they make sure this much stack is left,
/// growing the stack on the heap otherwise, so that a thread with a small
/// stack (musl's 128 KiB) converts the deepest value safely.
pub(crate) const STACK_RED_ZONE: usize = 32 * 1024;
pub(crate) const STACK_GROWTH: usize = 1024 * 1024;

pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number_to_py(py, n)?,
        Value::String(s) => crate::build::new_str(py, s)?.into_any(),
        Value::Array(items) => stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            Ok::<_, PyErr>(list.into_any())
        })?,
        Value::Object(map) => {
            stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || map_to_py(py, map))?.into_any()
        }
    })
}

/// One part of a result (R7): a text run's dict built directly, a part kept
/// as JSON text built from that text, any other part from its tree.
pub(crate) fn part_to_py<'py>(py: Python<'py>, part: &Part) -> PyResult<Bound<'py, PyAny>> {
    match part {
        Part::Text { text, thought } => {
            let dict = PyDict::new(py);
            dict.set_item(intern!(py, "text"), crate::build::new_str(py, text)?)?;
            if *thought {
                dict.set_item(intern!(py, "thought"), true)?;
            }
            Ok(dict.into_any())
        }
        Part::Raw(raw) => crate::build::json_to_py(py, &raw.json),
        Part::Value(value) => to_py(py, value),
    }
}

/// `{"id": id, "name": name, "args": args}` (C11; None for an absent id or name).
pub(crate) fn call_to_py<'py>(
    py: Python<'py>,
    id: Option<&str>,
    name: Option<&str>,
    args: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "id"), id)?;
    dict.set_item(intern!(py, "name"), name)?;
    dict.set_item(intern!(py, "args"), args)?;
    Ok(dict)
}

pub(crate) fn map_to_py<'py>(
    py: Python<'py>,
    map: &Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(key_to_py(py, k), to_py(py, v)?)?;
    }
    Ok(dict)
}

/// Keys that every part and call repeats are interned once (and their hash
/// cached by Python); others are made fresh.
pub(crate) fn key_to_py<'py>(py: Python<'py>, key: &str) -> Bound<'py, PyString> {
    let interned = match key {
        "text" => intern!(py, "text"),
        "thought" => intern!(py, "thought"),
        "thoughtSignature" => intern!(py, "thoughtSignature"),
        "functionCall" => intern!(py, "functionCall"),
        "functionResponse" => intern!(py, "functionResponse"),
        "id" => intern!(py, "id"),
        "name" => intern!(py, "name"),
        "args" => intern!(py, "args"),
        "role" => intern!(py, "role"),
        "parts" => intern!(py, "parts"),
        _ => return PyString::new(py, key),
    };
    interned.clone()
}

pub(crate) fn number_to_py<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(u) = n.as_u64() {
        u.into_bound_py_any(py)
    } else if let Some(i) = n.as_i64() {
        i.into_bound_py_any(py)
    } else {
        Ok(PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any())
    }
}

pub(crate) fn opt_to_py<'py>(
    py: Python<'py>,
    value: Option<&Value>,
) -> PyResult<Bound<'py, PyAny>> {
    value.map_or_else(|| Ok(py.None().into_bound(py)), |v| to_py(py, v))
}

/// A plain JSON dict (as `fastagg._chunks.chunk_to_mapping` makes) -> Value.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > 1024 {
        return Err(PyValueError::new_err(
            "feed_chunk(): the chunk is nested deeper than 1024 levels",
        ));
    }
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::String(crate::encode::owned_utf8(s)?)) // R14
    } else if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            Ok(Value::from(i))
        } else {
            Ok(Value::from(obj.extract::<u64>()?))
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err("feed_chunk(): a float is not finite"))
    } else if let Ok(d) = obj.cast::<PyDict>() {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            let mut map = Map::new();
            for (k, v) in d.iter() {
                let key = k.cast::<PyString>().map_err(|_| {
                    PyTypeError::new_err("feed_chunk(): a dict key is not a string")
                })?;
                map.insert(crate::encode::owned_utf8(key)?, from_py(&v, depth + 1)?);
            }
            Ok(Value::Object(map))
        })
    } else if let Ok(l) = obj.cast::<PyList>() {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            l.iter()
                .map(|item| from_py(&item, depth + 1))
                .collect::<PyResult<Vec<_>>>()
                .map(Value::Array)
        })
    } else {
        Err(PyTypeError::new_err(format!(
            "feed_chunk(): a {} is not a JSON type",
            obj.get_type().name()?
        )))
    }
}

/// How deep [`plain_json`] walks: real chunks nest about ten levels; deeper
/// ones take the Python conversion, whose depth and recursion errors (D2c)
/// are the reference's.
const PLAIN_DEPTH: usize = 64;

/// D2a's conversion of a chunk made of plain JSON types only (an exact
/// `dict` with exact `str` keys, `list`, `str`, `bool`, `None`, an `int` of 64
/// bits, a finite `float`), at most [`PLAIN_DEPTH`] deep: the value
/// `fastagg._chunks.chunk_to_mapping` would return, built without its Python
/// walk (about 20x the cost of the bytes for a small chunk). `None` for
/// anything else (bytes, tuples, subclasses, enums, big ints, non-finite
/// floats, a string that does not encode), which takes that walk, so every
/// conversion and every error stays the reference's.
pub(crate) fn plain_json(obj: &Bound<'_, PyAny>, depth: usize) -> Option<Value> {
    if obj.is_none() {
        Some(Value::Null)
    } else if let Ok(s) = obj.cast_exact::<PyString>() {
        crate::encode::owned_utf8(s).ok().map(Value::String) // R14
    } else if let Ok(b) = obj.cast_exact::<PyBool>() {
        Some(Value::Bool(b.is_true()))
    } else if obj.is_exact_instance_of::<PyInt>() {
        match obj.extract::<i64>() {
            Ok(i) => Some(Value::from(i)),
            Err(_) => obj.extract::<u64>().ok().map(Value::from),
        }
    } else if let Ok(f) = obj.cast_exact::<PyFloat>() {
        Number::from_f64(f.value()).map(Value::Number)
    } else if depth > PLAIN_DEPTH {
        None
    } else if let Ok(d) = obj.cast_exact::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let key = crate::encode::owned_utf8(k.cast_exact::<PyString>().ok()?).ok()?;
            map.insert(key, plain_json(&v, depth + 1)?);
        }
        Some(Value::Object(map))
    } else if let Ok(l) = obj.cast_exact::<PyList>() {
        l.iter()
            .map(|item| plain_json(&item, depth + 1))
            .collect::<Option<Vec<_>>>()
            .map(Value::Array)
    } else {
        None
    }
}

/// A size option: a plain non-negative `int` (not a bool), else a clear error.
pub(crate) fn limit(
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
    default: usize,
    cap: usize,
) -> PyResult<usize> {
    let Some(value) = value else {
        return Ok(default);
    };
    if !value.is_exact_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an int, got {}",
            value.get_type().name()?
        )));
    }
    // Compared as Python ints first: a huge value is a ValueError, not an OverflowError (D2b).
    if value.lt(0)? {
        return Err(PyValueError::new_err(format!(
            "{name} must not be negative, got {value}"
        )));
    }
    if value.gt(cap)? {
        return Err(PyValueError::new_err(format!(
            "{name} must be at most {cap}, got {value}"
        )));
    }
    value.extract()
}

/// The bytes of `bytes`, `bytearray` or any buffer (memoryview).
pub(crate) fn with_bytes<R>(data: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(f(&b.to_vec()));
    }
    let buffer = pyo3::buffer::PyBuffer::<u8>::get(data).map_err(|_| {
        PyTypeError::new_err(format!(
            "expected bytes, bytearray or memoryview, got {}",
            data.get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    })?;
    let copy = buffer.to_vec(data.py())?;
    Ok(f(&copy))
}
