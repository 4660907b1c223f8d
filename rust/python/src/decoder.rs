//! `SseDecoder`: the generic WHATWG decoder of the core (F15) for Python.

use fastagg_core::framing;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::with_bytes;
use crate::deltas::SseEvent;

/// A generic WHATWG server-sent-events decoder (any provider).
#[pyclass(module = "fastagg._fastagg")]
pub struct SseDecoder {
    core: framing::SseDecoder,
}

pub(crate) fn events_to_py(
    py: Python<'_>,
    events: Vec<framing::SseEvent>,
) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for e in events {
        list.append(Bound::new(
            py,
            SseEvent {
                event: e.event,
                data: e.data,
                id: e.id,
                retry: e.retry,
            },
        )?)?;
    }
    Ok(list)
}

#[pymethods]
impl SseDecoder {
    #[new]
    fn new() -> Self {
        Self {
            core: framing::SseDecoder::new(),
        }
    }

    /// Feed bytes (any split); returns the events completed by them.
    fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        with_bytes(data, |bytes| self.core.feed(bytes, &mut out))?;
        events_to_py(py, out)
    }

    /// End of input: the events a missing final blank line held back.
    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.core.close(&mut out);
        events_to_py(py, out)
    }
}
