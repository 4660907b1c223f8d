//! Exceptions raised into Python, and diagnostics as Python objects (X3, X4).

use fastagg_core::error::MalformedStream;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;

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
    deltas: Bound<'_, PyList>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = errors_module(py)?.getattr("MalformedStreamError")?;
        let list = PyList::empty(py);
        for e in errors {
            let exc = cls.call1((
                e.message(),
                e.kind.as_str(),
                e.offset,
                e.event_index,
                &deltas,
            ))?;
            list.append(exc)?;
        }
        let first = list.get_item(0)?;
        first.setattr("errors", &list)?;
        Ok(PyErr::from_value(first))
    };
    build().unwrap_or_else(|e| e)
}
