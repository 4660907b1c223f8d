//! `StreamAggregator(api="interactions")`: the Python face of
//! `fastagg_core::interactions` (spec/interactions.md). Conversions only.

use std::sync::Arc;

use fastagg_core::aggregate::{Closed, Delta, Deltas, Options};
use fastagg_core::error::MalformedStream;
use fastagg_core::interactions::{IxAggregator, IxResponse};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::{intern, IntoPyObjectExt};

use crate::convert::{map_to_py, opt_to_py, to_py, with_bytes};
use crate::deltas::deltas_to_py;
use crate::errors::{closed_error, diagnostics_to_py, malformed_error};

/// The interactions state a `StreamAggregator` holds when `api="interactions"` (I1).
pub struct IxStream {
    core: IxAggregator,
    deltas: bool,
    closed: Option<Py<InteractionResponse>>,
}

/// `api` of `StreamAggregator`: `None` for the classic format (I1).
pub fn for_api(py: Python<'_>, api: &str, opts: Options) -> PyResult<Option<IxStream>> {
    match api {
        "generate_content" => Ok(None),
        "interactions" => Ok(Some(IxStream {
            core: IxAggregator::new(opts),
            deltas: opts.deltas != Deltas::Off,
            closed: None,
        })),
        other => Err(PyValueError::new_err(format!(
            "api must be 'generate_content' or 'interactions', got {}",
            PyString::new(py, other).repr()?
        ))),
    }
}

impl IxStream {
    fn finish_feed<'py>(
        &self,
        py: Python<'py>,
        deltas: Vec<Delta>,
        result: Result<Vec<MalformedStream>, Closed>,
    ) -> PyResult<Bound<'py, PyList>> {
        let errors = result.map_err(|_| closed_error(py))?;
        let list = if self.deltas {
            deltas_to_py(py, deltas)?
        } else {
            PyList::empty(py)
        };
        if errors.is_empty() {
            Ok(list)
        } else {
            Err(malformed_error(py, &errors, &list))
        }
    }

    pub fn feed<'py>(
        &mut self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut deltas = Vec::new();
        let result = with_bytes(data, |bytes| self.core.feed(bytes, &mut deltas))?;
        self.finish_feed(py, deltas, result)
    }

    pub fn feed_event<'py>(
        &mut self,
        py: Python<'py>,
        payload: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut deltas = Vec::new();
        let result = if let Ok(s) = payload.cast::<PyString>() {
            if let Ok(text) = crate::encode::str_bytes(s) {
                // R14: no UTF-8 copy is left on the caller's `str`.
                self.core.feed_event(text.as_bytes(), &mut deltas)
            } else {
                let raw = s.call_method1(intern!(py, "encode"), ("utf-8", "surrogatepass"))?;
                with_bytes(&raw, |bytes| self.core.feed_event(bytes, &mut deltas))?
            }
        } else {
            with_bytes(payload, |bytes| self.core.feed_event(bytes, &mut deltas))?
        };
        self.finish_feed(py, deltas, result)
    }

    pub fn reconnect(&mut self, py: Python<'_>) -> PyResult<()> {
        self.core.reconnect().map_err(|_| closed_error(py))
    }

    pub fn feed_chunk() -> PyErr {
        PyTypeError::new_err(
            "feed_chunk() is not supported with api='interactions'; feed the body bytes with \
             feed() or one data payload with feed_event()",
        )
    }

    pub fn snapshot(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.closed {
            Some(done) => Ok(done.clone_ref(py).into_any()),
            None => Ok(InteractionResponse::create(py, Arc::new(self.core.snapshot()))?.into_any()),
        }
    }

    pub fn close(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(done) = &self.closed {
            return Ok(done.clone_ref(py).into_any());
        }
        let done = InteractionResponse::create(py, self.core.close())?;
        self.closed = Some(done.clone_ref(py));
        Ok(done.into_any())
    }

    pub fn events_seen(&self) -> u64 {
        self.core.events_seen()
    }

    pub fn bytes_seen(&self) -> u64 {
        self.core.bytes_seen()
    }
}

/// The aggregated interaction (read-only, spec/interactions.md I18).
/// Values are built once, on first access, and shared.
#[pyclass(frozen, module = "fastagg._fastagg")]
pub struct InteractionResponse {
    inner: Arc<IxResponse>,
    steps: PyOnceLock<Py<PyList>>,
    calls: PyOnceLock<Py<PyList>>,
    unfinished: PyOnceLock<Py<PyList>>,
}

impl InteractionResponse {
    fn create(py: Python<'_>, inner: Arc<IxResponse>) -> PyResult<Py<Self>> {
        Py::new(
            py,
            Self {
                inner,
                steps: PyOnceLock::new(),
                calls: PyOnceLock::new(),
                unfinished: PyOnceLock::new(),
            },
        )
    }

    /// `values` as a list, built once in `cell` (D3a).
    fn values_list<'py>(
        py: Python<'py>,
        cell: &PyOnceLock<Py<PyList>>,
        values: &[serde_json::Value],
    ) -> PyResult<Bound<'py, PyList>> {
        let list = cell.get_or_try_init(py, || {
            let list = PyList::empty(py);
            for value in values {
                list.append(to_py(py, value)?)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(list.bind(py).clone())
    }

    fn opt_str<'py>(py: Python<'py>, s: Option<&String>) -> PyResult<Bound<'py, PyAny>> {
        s.map_or_else(|| Ok(py.None().into_bound(py)), |s| s.into_bound_py_any(py))
    }
}

#[pymethods]
impl InteractionResponse {
    /// The model's steps in index order, ready to resend in stateless mode.
    #[getter]
    fn steps<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let steps = self.steps.get_or_try_init(py, || {
            let list = PyList::empty(py);
            for (_, step) in &self.inner.steps {
                list.append(to_py(py, step)?)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(steps.bind(py).clone())
    }
    /// `[{"id", "name", "args"}]` of the `function_call` steps the model
    /// finished, index order (C13: the calls that may be run).
    #[getter]
    fn function_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Self::values_list(py, &self.calls, &self.inner.function_calls)
    }
    /// The interaction id (from `interaction.created`), or None.
    #[getter]
    fn interaction_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::opt_str(py, self.inner.interaction_id.as_ref())
    }
    /// The latest status (`completed`, `requires_action`, ...), or None.
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::opt_str(py, self.inner.status.as_ref())
    }
    /// The latest `event_id`, to resume the stream from; or None.
    #[getter]
    fn last_event_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::opt_str(py, self.inner.last_event_id.as_ref())
    }
    /// The latest `continuation_token` (long decode), or None.
    #[getter]
    fn continuation_token<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::opt_str(py, self.inner.continuation_token.as_ref())
    }
    /// A step event came after the latest `continuation_token` (any, with none): E14.
    #[getter]
    fn output_after_token(&self) -> bool {
        self.inner.output_after_token
    }
    /// The `interaction` objects of created/completed, merged key by key.
    #[getter]
    fn interaction<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        map_to_py(py, &self.inner.interaction).map(Bound::into_any)
    }
    /// The latest usage object (never summed), or None.
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.usage.as_ref())
    }
    /// The in-stream error object, verbatim, or None.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.error.as_ref())
    }
    /// `interaction.completed` arrived and no error was recorded.
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    /// The `[DONE]` sentinel arrived.
    #[getter]
    fn done(&self) -> bool {
        self.inner.done
    }
    /// An incomplete final event was dropped.
    #[getter]
    fn truncated(&self) -> bool {
        self.inner.truncated
    }
    /// Non-fatal anomalies, in order (texts: spec/interactions.md).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }
    /// The warnings as structured diagnostics, in the same order (spec/diagnostics.md X3).
    #[getter]
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        diagnostics_to_py(py, &self.inner.diagnostics)
    }
    /// `[{"id", "name", "args", "step"}]` of the call steps the model did not
    /// finish or whose arguments did not parse (C13, I16, I17), index order.
    #[getter]
    fn unfinished_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        Self::values_list(py, &self.unfinished, &self.inner.unfinished_calls)
    }
    /// Text of the `model_output` steps.
    #[getter]
    fn text(&self) -> &str {
        &self.inner.text
    }
    /// Thought-summary text of the `thought` steps.
    #[getter]
    fn thought_text(&self) -> &str {
        &self.inner.thought_text
    }
    /// `{"id"?, "status"?, "steps", "usage"?, "error"?}` (fresh objects).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_value())
    }
    /// `to_dict()` as compact UTF-8 JSON.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = serde_json::to_vec(&self.inner.to_value())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes))
    }
    /// V3: Python's reading of the result, shared with the twin.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::results::repr_by(slf.as_any(), "interaction")
    }
}
