//! The delta classes `feed()` returns (aggregation.md "Deltas").

use fastagg_core::aggregate::{Args, Delta, EndedCall, RawPart};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use serde_json::Value;

use crate::convert::{call_to_py, to_py};

macro_rules! record_class {
    ($name:ident, $doc:literal, $($field:ident : $ty:ty),+) => {
        #[doc = $doc]
        #[pyclass(frozen, freelist = 128, module = "fastagg._fastagg", get_all)]
        pub struct $name {
            $(pub $field: $ty),+
        }

        #[pymethods]
        impl $name {
            #[new]
            fn new($($field: $ty),+) -> Self {
                Self { $($field),+ }
            }

            #[classattr]
            fn __match_args__(py: Python<'_>) -> PyResult<Py<PyTuple>> {
                Ok(PyTuple::new(py, [$(stringify!($field)),+])?.unbind())
            }

            fn _fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, [$((&self.$field).into_bound_py_any(py)?),+])
            }

            fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
                match other.cast::<Self>() {
                    Ok(o) => self._fields(py)?.eq(o.get()._fields(py)?),
                    Err(_) => Ok(false),
                }
            }

            fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
                self._fields(py)?.hash()
            }

            /// V4: every field, like a dataclass, shortened as the twin's.
            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                crate::results::repr_by(slf.as_any(), "record")
            }
        }
    };
}

record_class!(TextDelta, "A text fragment (thought or answer) of candidate `candidate`, part `index`.",
    candidate: u32, index: usize, text: Py<PyString>, thought: bool);
record_class!(CallStart, "A function call was first seen at part `index`.",
    candidate: u32, index: usize, id: Option<String>, name: Option<String>);
record_class!(ArgDelta, "A streamed argument fragment was applied at `json_path`.",
    candidate: u32, index: usize, json_path: String, value: LazyJson);
record_class!(CallEnd, "A function call is complete: `call` is {\"id\", \"name\", \"args\"}.",
    candidate: u32, index: usize, call: LazyJson);

/// A delta's JSON value, built as a Python object on its first read and then
/// kept (R2): an argument fragment or a finished call can be megabytes of
/// text, whose `str` costs as much as parsing it, and most consumers never
/// read `ArgDelta.value` or `CallEnd.call`.
pub struct LazyJson {
    source: Source,
    object: PyOnceLock<Py<PyAny>>,
}

/// What a [`LazyJson`] builds its object from.
enum Source {
    Value(Value),
    /// R9: a complete call's part text, shared with the kept part.
    Call(RawPart),
}

impl LazyJson {
    fn new(source: Source) -> Self {
        Self {
            source,
            object: PyOnceLock::new(),
        }
    }

    fn build<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.source {
            Source::Value(value) => to_py(py, value),
            Source::Call(part) => raw_call_to_py(py, part),
        }
    }
}

/// R9: the call of a complete call part, its arguments built from the
/// part's text (C11: absent args are `{}`).
fn raw_call_to_py<'py>(py: Python<'py>, part: &RawPart) -> PyResult<Bound<'py, PyAny>> {
    let call = part.call_ref();
    let args = match call.args {
        Some(Args::Json(json)) => crate::build::json_to_py(py, json)?,
        Some(Args::Value(value)) => to_py(py, value)?,
        None => PyDict::new(py).into_any(),
    };
    Ok(call_to_py(py, call.id, call.name, args)?.into_any())
}

impl<'py> FromPyObject<'_, 'py> for LazyJson {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let object = PyOnceLock::new();
        let _ = object.set(obj.py(), obj.to_owned().unbind());
        Ok(Self {
            source: Source::Value(Value::Null),
            object,
        })
    }
}

impl<'py> IntoPyObject<'py> for &LazyJson {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.object
            .get_or_try_init(py, || self.build(py).map(Bound::unbind))
            .map(|o| o.bind(py).clone())
    }
}
record_class!(Finish, "A finish reason arrived for candidate `candidate`.",
    candidate: u32, reason: String);
record_class!(StreamError, "An error object arrived inside the stream (kept verbatim).",
    error: Py<PyAny>);
record_class!(SseEvent, "One WHATWG server-sent event.",
    event: String, data: String, id: Option<String>, retry: Option<u64>);

pub(crate) fn delta_to_py(py: Python<'_>, delta: Delta) -> PyResult<Bound<'_, PyAny>> {
    match delta {
        Delta::Text {
            candidate,
            index,
            text,
            thought,
        } => Bound::new(
            py,
            TextDelta {
                candidate,
                index,
                // R6: built once here, not on each read of `.text`.
                text: crate::build::new_str(py, &text)?.unbind(),
                thought,
            },
        )
        .map(Bound::into_any),
        Delta::CallStart {
            candidate,
            index,
            id,
            name,
        } => Bound::new(
            py,
            CallStart {
                candidate,
                index,
                id,
                name,
            },
        )
        .map(Bound::into_any),
        Delta::Arg {
            candidate,
            index,
            json_path,
            value,
        } => Bound::new(
            py,
            ArgDelta {
                candidate,
                index,
                json_path,
                value: LazyJson::new(Source::Value(value)),
            },
        )
        .map(Bound::into_any),
        Delta::CallEnd {
            candidate,
            index,
            call,
        } => Bound::new(
            py,
            CallEnd {
                candidate,
                index,
                call: LazyJson::new(match call {
                    EndedCall::Raw(part) => Source::Call(part),
                    EndedCall::Value(value) => Source::Value(value),
                }),
            },
        )
        .map(Bound::into_any),
        Delta::Finish { candidate, reason } => {
            Bound::new(py, Finish { candidate, reason }).map(Bound::into_any)
        }
        Delta::StreamError { error } => {
            let error = to_py(py, &error)?.unbind();
            Bound::new(py, StreamError { error }).map(Bound::into_any)
        }
    }
}

/// The list `feed()` returns, made at its length and filled in place: no
/// append and no regrowth per delta (about 60 instructions a text delta).
pub(crate) fn deltas_to_py(py: Python<'_>, deltas: Vec<Delta>) -> PyResult<Bound<'_, PyList>> {
    let len = pyo3::ffi::Py_ssize_t::try_from(deltas.len())?;
    // SAFETY: PyList_New(len) returns a new list of `len` NULL slots, or NULL
    // with an exception set. Each slot is set once, with a new reference
    // (which PyList_SET_ITEM steals), before the list is shared; if making a
    // delta fails, the list is dropped with its remaining slots NULL, which
    // list deallocation skips.
    unsafe {
        let list = Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyList_New(len))?;
        for (i, d) in (0..len).zip(deltas) {
            pyo3::ffi::PyList_SET_ITEM(list.as_ptr(), i, delta_to_py(py, d)?.into_ptr());
        }
        Ok(list.cast_into_unchecked())
    }
}
