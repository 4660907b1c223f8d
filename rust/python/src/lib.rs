//! `fastagg._fastagg`: the Python face of `fastagg-core`. Conversions only;
//! every rule lives in the core crate.

mod aggregator;
mod alloc;
mod build;
mod convert;
mod decoder;
mod deltas;
mod detach;
mod encode;
mod errors;
mod handover;
mod interactions;
mod results;

use pyo3::prelude::*;

use crate::aggregator::StreamAggregator;
use crate::decoder::SseDecoder;
use crate::deltas::{ArgDelta, CallEnd, CallStart, Finish, SseEvent, StreamError, TextDelta};
use crate::results::{AggregatedResponse, Candidate};

/// R7 (binding): the JSON text builder, for tests and benchmarks (private).
#[pyfunction(name = "_json_to_py")]
fn json_to_py_hook<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    build::json_to_py(py, text)
}

/// The path the builder replaces (a `serde_json::Value`, then `to_py`), so
/// that tests and benchmarks compare the two (private).
#[pyfunction(name = "_json_to_py_via_value")]
fn json_to_py_via_value<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::from_str(text)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("invalid JSON: {e}")))?;
    convert::to_py(py, &value)
}

#[pymodule]
fn _fastagg(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StreamAggregator>()?;
    m.add_class::<AggregatedResponse>()?;
    m.add_class::<Candidate>()?;
    m.add_class::<TextDelta>()?;
    m.add_class::<CallStart>()?;
    m.add_class::<ArgDelta>()?;
    m.add_class::<CallEnd>()?;
    m.add_class::<Finish>()?;
    m.add_class::<StreamError>()?;
    m.add_class::<SseDecoder>()?;
    m.add_class::<SseEvent>()?;
    m.add_class::<interactions::InteractionResponse>()?;
    // Private: set as attributes, so that they stay out of `__all__`.
    m.setattr("_json_to_py", wrap_pyfunction!(json_to_py_hook, m)?)?;
    m.setattr(
        "_json_to_py_via_value",
        wrap_pyfunction!(json_to_py_via_value, m)?,
    )?;
    Ok(())
}
