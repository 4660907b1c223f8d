//! Exceptions raised into Python, and diagnostics as Python objects (X3, X4).

use fastagg_core::diagnostics::{Diagnostic, Field};
use fastagg_core::error::MalformedStream;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::convert::to_py;

pub(crate) static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

pub(crate) fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || py.import("fastagg.errors").map(Bound::unbind))
        .map(|m| m.bind(py))
}

pub(crate) fn closed_error(py: Python<'_>) -> PyErr {
    match errors_module(py).and_then(|m| m.getattr("AggregatorClosed")) {
        Ok(cls) => PyErr::from_type(
            cls.cast_into().unwrap_or_else(|_| py.get_type::<pyo3::exceptions::PyRuntimeError>()),
            "feed() after close(): this StreamAggregator is finished; create a new one for the next stream",
        ),
        Err(e) => e,
    }
}

pub(crate) fn malformed_error(
    py: Python<'_>,
    errors: &[MalformedStream],
    deltas: &Bound<'_, PyList>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = errors_module(py)?.getattr("MalformedStreamError")?;
        let list = PyList::empty(py);
        for e in errors {
            let kwargs = PyDict::new(py);
            kwargs.set_item("diagnostic", diagnostic_to_py(py, &e.diagnostic)?)?;
            let args = (
                e.message(),
                e.kind.as_str(),
                e.offset,
                e.event_index,
                deltas,
            );
            let exc = cls.call(args, Some(&kwargs))?;
            list.append(exc)?;
        }
        let first = list.get_item(0)?;
        first.setattr("errors", &list)?;
        Ok(PyErr::from_value(first))
    };
    build().unwrap_or_else(|e| e)
}

static DIAGNOSTIC: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// X5: a core diagnostic as a `fastagg.Diagnostic`, its message rendered here.
pub(crate) fn diagnostic_to_py<'py>(
    py: Python<'py>,
    diagnostic: &Diagnostic,
) -> PyResult<Bound<'py, PyAny>> {
    let cls = DIAGNOSTIC.get_or_try_init(py, || {
        py.import("fastagg.diagnostics")?
            .getattr("Diagnostic")
            .map(Bound::unbind)
    })?;
    let fields = PyDict::new(py);
    for (name, field) in diagnostic.fields() {
        let value = match field {
            Field::Int(n) => n.into_bound_py_any(py)?,
            Field::Str(s) => s.into_bound_py_any(py)?,
            Field::OptStr(s) => s.into_bound_py_any(py)?,
            Field::Json(v) => to_py(py, v)?,
        };
        fields.set_item(name, value)?;
    }
    cls.bind(py)
        .call((diagnostic.code(), diagnostic.message()), Some(&fields))
}

/// X3: `result.diagnostics`.
pub(crate) fn diagnostics_to_py<'py>(
    py: Python<'py>,
    diagnostics: &[Diagnostic],
) -> PyResult<Bound<'py, PyTuple>> {
    let items = diagnostics
        .iter()
        .map(|d| diagnostic_to_py(py, d))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}
