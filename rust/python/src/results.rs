//! `AggregatedResponse` and `Candidate`: the result classes and their cached accessors.

use std::sync::Arc;

use fastagg_core::aggregate::{CandidateResult, Response};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::build::new_str;
use crate::convert::{call_to_py, map_to_py, opt_to_py, part_to_py, to_py};
use crate::errors::diagnostics_to_py;
use crate::handover::Handed;

/// R6: the value in `cell`, built by `make` on the first read.
fn once<'py, T>(
    py: Python<'py>,
    cell: &PyOnceLock<Py<T>>,
    make: impl FnOnce() -> PyResult<Bound<'py, T>>,
) -> PyResult<Bound<'py, T>> {
    Ok(cell
        .get_or_try_init(py, || make().map(Bound::unbind))?
        .bind(py)
        .clone())
}

/// V1: `repr(obj)` as `fastagg._repr.<how>(obj)` writes it, the one
/// implementation the twin uses too (Python reads the values, shortened, V2).
pub(crate) fn repr_by(obj: &Bound<'_, PyAny>, how: &str) -> PyResult<String> {
    obj.py()
        .import(intern!(obj.py(), "fastagg._repr"))?
        .getattr(how)?
        .call1((obj,))?
        .extract()
}

/// One candidate of an `AggregatedResponse`. Its Python values are built once,
/// on first access, and shared: `content["parts"]` is `parts`, and each
/// `function_calls[i]["args"]` is the `args` dict inside its part.
#[pyclass(frozen, module = "fastagg._fastagg")]
pub struct Candidate {
    inner: Arc<Response>,
    /// R13: the strings `close()` handed over, shared with the response.
    handed: Arc<Handed>,
    position: usize,
    // RULE D3a: built once, the same objects on every access.
    parts: PyOnceLock<Py<PyList>>,
    content: PyOnceLock<Py<PyDict>>,
    calls: PyOnceLock<Py<PyList>>,
    unfinished: PyOnceLock<Py<PyList>>,
    metadata: PyOnceLock<Py<PyDict>>,
    // R6: so are the strings (a long text's `str` costs a copy per read).
    text: PyOnceLock<Py<PyString>>,
    thought_text: PyOnceLock<Py<PyString>>,
    finish_reason: PyOnceLock<Py<PyAny>>,
    finish_message: PyOnceLock<Py<PyAny>>,
}

impl Candidate {
    fn new(inner: Arc<Response>, handed: Arc<Handed>, position: usize) -> Self {
        Self {
            inner,
            handed,
            position,
            parts: PyOnceLock::new(),
            content: PyOnceLock::new(),
            calls: PyOnceLock::new(),
            unfinished: PyOnceLock::new(),
            metadata: PyOnceLock::new(),
            text: PyOnceLock::new(),
            thought_text: PyOnceLock::new(),
            finish_reason: PyOnceLock::new(),
            finish_message: PyOnceLock::new(),
        }
    }

    fn data(&self) -> Option<&CandidateResult> {
        self.inner.candidates.get(self.position)
    }

    fn parts_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let parts = self.parts.get_or_try_init(py, || {
            let list = PyList::empty(py);
            for (i, part) in self.data().map_or(&[][..], |c| &c.parts).iter().enumerate() {
                let value = part_to_py(py, part)?;
                self.handed.fill_part(py, self.position, i, &value)?; // R13
                list.append(value)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(parts.bind(py).clone())
    }

    fn content_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let content = self.content.get_or_try_init(py, || {
            let d = PyDict::new(py);
            d.set_item(intern!(py, "role"), intern!(py, "model"))?;
            d.set_item(intern!(py, "parts"), self.parts_list(py)?)?;
            Ok::<_, PyErr>(d.unbind())
        })?;
        Ok(content.bind(py).clone())
    }

    fn calls_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let calls = self.calls.get_or_try_init(py, || {
            let parts = self.parts_list(py)?;
            let list = PyList::empty(py);
            let Some(data) = self.data() else {
                return Ok(list.unbind());
            };
            for (&i, call) in data.call_parts.iter().zip(data.function_calls()) {
                let args = part_args(py, &parts, i, call.args.is_some())?;
                list.append(call_to_py(py, call.id, call.name, args)?)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(calls.bind(py).clone())
    }

    /// RULE C13: `[{"id", "name", "args", "part"}]` of the calls the model did
    /// not finish, built once, `args` the dict inside the part (D3a).
    fn unfinished_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let unfinished = self.unfinished.get_or_try_init(py, || {
            let parts = self.parts_list(py)?;
            let list = PyList::empty(py);
            let Some(data) = self.data() else {
                return Ok(list.unbind());
            };
            for (i, call) in data.unfinished() {
                let args = part_args(py, &parts, i, call.args.is_some())?;
                let entry = call_to_py(py, call.id, call.name, args)?;
                entry.set_item(intern!(py, "part"), i)?;
                list.append(entry)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(unfinished.bind(py).clone())
    }

    fn text_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        once(py, &self.text, || new_str(py, self.text_of()))
    }

    fn thought_text_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        once(py, &self.thought_text, || {
            new_str(py, self.thought_text_of())
        })
    }

    fn finish_reason_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.finish_reason, || {
            self.finish_reason_of().into_bound_py_any(py)
        })
    }

    fn finish_message_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.finish_message, || {
            self.finish_message_of().into_bound_py_any(py)
        })
    }

    fn text_of(&self) -> &str {
        self.data().map_or("", |c| c.text.as_str())
    }

    fn thought_text_of(&self) -> &str {
        self.data().map_or("", |c| c.thought_text.as_str())
    }

    fn finish_reason_of(&self) -> Option<&str> {
        self.data().and_then(|c| c.finish_reason.as_deref())
    }

    fn finish_message_of(&self) -> Option<&str> {
        self.data().and_then(|c| c.finish_message.as_deref())
    }
}

/// The args dict of call part `i` itself (one object, not a copy), or a new
/// `{}` when the part has no args object (C11).
fn part_args<'py>(
    py: Python<'py>,
    parts: &Bound<'py, PyList>,
    i: usize,
    has_args: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if has_args {
        parts
            .get_item(i)?
            .get_item(intern!(py, "functionCall"))?
            .get_item(intern!(py, "args"))
    } else {
        Ok(PyDict::new(py).into_any())
    }
}

#[pymethods]
impl Candidate {
    /// The candidate's `index`.
    #[getter]
    fn index(&self) -> u32 {
        self.data().map_or(0, |c| c.index)
    }
    /// Parts of this candidate, REST camelCase, replayable as-is.
    #[getter]
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.parts_list(py)
    }
    /// `{"role": "model", "parts": parts}`.
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.content_dict(py)
    }
    /// Non-thought text of this candidate.
    #[getter]
    fn text<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.text_py(py)
    }
    /// Thought text of this candidate.
    #[getter]
    fn thought_text<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.thought_text_py(py)
    }
    /// `[{"id", "name", "args"}]` of the calls the model finished, in part
    /// order (C13: the calls that may be run).
    #[getter]
    fn function_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.calls_list(py)
    }
    /// `[{"id", "name", "args", "part"}]` of the streamed calls the model did
    /// not finish, in part order: arguments so far, `part` indexes `parts` (C13).
    #[getter]
    fn unfinished_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.unfinished_list(py)
    }
    /// Raw finish reason of this candidate, or None.
    #[getter]
    fn finish_reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish_reason_py(py)
    }
    /// Finish message of this candidate, or None.
    #[getter]
    fn finish_message<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.finish_message_py(py)
    }
    /// The other candidate keys (E5), last non-null wins.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        once(py, &self.metadata, || match self.data() {
            Some(c) => map_to_py(py, &c.metadata),
            None => Ok(PyDict::new(py)),
        })
    }
    /// V3: Python's reading of the candidate, shared with the twin.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::results::repr_by(slf.as_any(), "candidate")
    }
}

/// The aggregated model turn (read-only). Flat accessors describe candidate 0
/// and return the same objects as `candidates[...]` of index 0.
#[pyclass(frozen, module = "fastagg._fastagg")]
pub struct AggregatedResponse {
    inner: Arc<Response>,
    /// R13: the strings `close()` handed over.
    handed: Arc<Handed>,
    candidates: Vec<Py<Candidate>>,
    /// Candidate 0 (the flat accessors), or an empty stand-in when absent.
    first: Py<Candidate>,
    /// R6: every accessor's value, built on its first read.
    cached: ResponseCache,
}

struct ResponseCache {
    candidates: PyOnceLock<Py<PyList>>,
    usage: PyOnceLock<Py<PyAny>>,
    model_version: PyOnceLock<Py<PyAny>>,
    response_id: PyOnceLock<Py<PyAny>>,
    prompt_feedback: PyOnceLock<Py<PyAny>>,
    model_status: PyOnceLock<Py<PyAny>>,
    error: PyOnceLock<Py<PyAny>>,
    warnings: PyOnceLock<Py<PyList>>,
    diagnostics: PyOnceLock<Py<PyTuple>>,
}

impl AggregatedResponse {
    pub(crate) fn create(
        py: Python<'_>,
        inner: Arc<Response>,
        handed: Handed,
    ) -> PyResult<Py<Self>> {
        let handed = Arc::new(handed);
        let candidate =
            |position| Candidate::new(Arc::clone(&inner), Arc::clone(&handed), position);
        let candidates = (0..inner.candidates.len())
            .map(|position| Py::new(py, candidate(position)))
            .collect::<PyResult<Vec<_>>>()?;
        let first = match inner.candidates.iter().position(|c| c.index == 0) {
            Some(position) => candidates[position].clone_ref(py),
            None => Py::new(py, candidate(usize::MAX))?,
        };
        Py::new(
            py,
            Self {
                inner,
                handed,
                candidates,
                first,
                cached: ResponseCache {
                    candidates: PyOnceLock::new(),
                    usage: PyOnceLock::new(),
                    model_version: PyOnceLock::new(),
                    response_id: PyOnceLock::new(),
                    prompt_feedback: PyOnceLock::new(),
                    model_status: PyOnceLock::new(),
                    error: PyOnceLock::new(),
                    warnings: PyOnceLock::new(),
                    diagnostics: PyOnceLock::new(),
                },
            },
        )
    }

    fn first(&self) -> &Candidate {
        self.first.get()
    }
}

#[pymethods]
impl AggregatedResponse {
    /// Parts of candidate 0, REST camelCase, replayable as-is.
    #[getter]
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.first().parts_list(py)
    }
    /// `{"role": "model", "parts": parts}`.
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.first().content_dict(py)
    }
    /// Non-thought text of candidate 0.
    #[getter]
    fn text<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.first().text_py(py)
    }
    /// Thought text of candidate 0.
    #[getter]
    fn thought_text<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.first().thought_text_py(py)
    }
    /// `[{"id", "name", "args"}]` of the calls of candidate 0 the model
    /// finished, in part order (C13: the calls that may be run).
    #[getter]
    fn function_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.first().calls_list(py)
    }
    /// Candidate 0's streamed calls the model did not finish, still open
    /// (`snapshot()`) or flushed by `close()`: `[{"id", "name", "args", "part"}]`
    /// with the arguments so far and `part` the index into `parts` (C13).
    #[getter]
    fn unfinished_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.first().unfinished_list(py)
    }
    /// Raw finish reason of candidate 0 (e.g. "STOP"), or None.
    #[getter]
    fn finish_reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.first().finish_reason_py(py)
    }
    /// Finish message of candidate 0, or None.
    #[getter]
    fn finish_message<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.first().finish_message_py(py)
    }
    /// Merged `usageMetadata` (camelCase), or None.
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.usage, || {
            opt_to_py(py, self.inner.usage.as_ref())
        })
    }
    /// `modelVersion` (last non-null), or None.
    #[getter]
    fn model_version<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.model_version, || {
            opt_to_py(py, self.inner.model_version.as_ref())
        })
    }
    /// `responseId` (last non-null), or None.
    #[getter]
    fn response_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.response_id, || {
            opt_to_py(py, self.inner.response_id.as_ref())
        })
    }
    /// `promptFeedback` (last non-null), or None.
    #[getter]
    fn prompt_feedback<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.prompt_feedback, || {
            opt_to_py(py, self.inner.prompt_feedback.as_ref())
        })
    }
    /// `modelStatus` (last non-null: `modelStage`, `retirementTime`, `message`), or None (E15).
    #[getter]
    fn model_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.model_status, || {
            opt_to_py(py, self.inner.model_status.as_ref())
        })
    }
    /// The in-stream error object, verbatim, or None.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        once(py, &self.cached.error, || {
            opt_to_py(py, self.inner.error.as_ref())
        })
    }
    /// The latest non-empty `continuationToken` of candidate 0 (long decode), or None (E14).
    #[getter]
    fn continuation_token(&self) -> Option<&str> {
        self.inner.continuation_token.as_deref()
    }
    /// Candidate 0 got output in an event after the latest `continuationToken`
    /// (any output, with none): the token does not cover it (E14).
    #[getter]
    fn output_after_token(&self) -> bool {
        self.inner.output_after_token
    }
    /// Candidate 0 has a finish reason and no error was recorded (E6).
    #[getter]
    fn complete(&self) -> bool {
        self.inner.complete
    }
    /// An incomplete final event was dropped (F6).
    #[getter]
    fn truncated(&self) -> bool {
        self.inner.truncated
    }
    /// Non-fatal anomalies, in order (their texts: spec/aggregation.md).
    #[getter]
    fn warnings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        once(py, &self.cached.warnings, || {
            PyList::new(py, self.inner.warnings())
        })
    }
    /// The warnings as structured diagnostics, in the same order (spec/diagnostics.md X3).
    #[getter]
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        once(py, &self.cached.diagnostics, || {
            diagnostics_to_py(py, &self.inner.diagnostics)
        })
    }
    /// Every candidate, in index order.
    #[getter]
    fn candidates<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        once(py, &self.cached.candidates, || {
            PyList::new(py, self.candidates.iter().map(|c| c.clone_ref(py)))
        })
    }
    /// A GenerateContentResponse-shaped dict of the aggregate (fresh objects).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let response = to_py(py, &self.inner.to_value())?;
        self.handed.fill_response(py, &response)?; // R13
        Ok(response)
    }
    /// `to_dict()` as compact UTF-8 JSON.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut value = self.inner.to_value();
        self.handed.fill_value(py, &mut value)?; // R13
        let bytes = serde_json::to_vec(&value).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes))
    }
    /// The aggregate as a `google.genai.types.GenerateContentResponse` (needs google-genai).
    ///
    /// What the installed SDK cannot hold is reported, not raised (G1): the
    /// conversion is shared with the reference in `fastagg._genai_convert`.
    fn to_genai<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("fastagg._genai_convert")?
            .call_method1("to_genai", (self.to_dict(py)?,))
    }
    /// V3: Python's reading of the result, shared with the twin.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::results::repr_by(slf.as_any(), "response")
    }
}
