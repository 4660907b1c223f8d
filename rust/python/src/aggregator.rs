//! `StreamAggregator`: feeds the core and converts what it reports.

use std::sync::Arc;

use fastagg_core::aggregate::{
    Aggregator, Delta, Deltas, Options, MAX_ARRAY_INDEX_CAP, MAX_EVENT_BYTES_CAP,
};
use fastagg_core::error::MalformedStream;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::Value;

use crate::alloc::return_freed_pages;
use crate::convert::{from_py, limit, with_bytes};
use crate::deltas::deltas_to_py;
use crate::detach::{is_detached, key, Detached, DETACH_BYTES};
use crate::errors::{closed_error, malformed_error};
use crate::handover::{self, Handed};
use crate::interactions;
use crate::results::AggregatedResponse;

/// Runs a core operation with enough stack for values nested 1024 levels
/// deep (cloning, comparing and writing them recurse): on a thread with less
/// than this left (a small thread stack), on a stack grown on the heap.
// RULE D6: deep values on small thread stacks.
pub(crate) fn deep_safe<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(CORE_STACK, 4 * CORE_STACK, f)
}

pub(crate) const CORE_STACK: usize = 1024 * 1024;

// RULE D8: one feeding thread.
pub(crate) const SECOND_FEEDER: &str =
    "this StreamAggregator was fed from another thread first; an \
     aggregator is fed from one thread (chunks from two threads would interleave): use one \
     aggregator per stream";

/// Aggregates the raw body of a Gemini `streamGenerateContent` response.
///
/// Feed the body bytes in any split with `feed()` (each call returns the live
/// deltas its bytes completed), then call `close()` for the
/// `AggregatedResponse`, whose `content` is the model turn to append to the
/// history as it is: thought signatures byte-exact on the part they came on.
/// SSE (`?alt=sse`) and JSON-array framing are detected from the first bytes.
///
/// Options (keyword-only):
///
/// - `api="generate_content"`: the body's format; `"interactions"` reads a
///   streamed Interactions API body and `close()` returns an
///   `InteractionResponse` (spec/interactions.md).
/// - `deltas=True`: return deltas from `feed()`; `False` returns `[]` and
///   skips building them (the fastest path when only the result is needed);
///   `"display"` returns only what a live display of the first candidate
///   shows: candidate 0's `TextDelta` (thoughts too), `CallStart` and
///   `ArgDelta`, no `CallEnd`, `Finish` or `StreamError` (R5).
/// - `strict=True`: a malformed event (bad JSON, not an object, bad UTF-8,
///   over `max_event_bytes`) raises `MalformedStreamError` from the `feed()`
///   that completed it, after the good events of that call were applied; its
///   `.deltas` holds their deltas and `.errors` every error of the call.
///   `False` skips such events with a warning on the result instead.
/// - `max_event_bytes=67108864` (64 MiB): the largest single event payload;
///   a bigger one is dropped (an error or a warning, as above) and memory
///   stays bounded by the limit plus one chunk.
/// - `max_array_index=10000`: the largest array index a streamed argument's
///   `jsonPath` may write (`$.items[3]`); a larger one is skipped with a
///   warning, so a hostile path cannot allocate without bound.
///
/// `feed(bytes)` returns a list of `Delta` (`TextDelta`, `CallStart`,
/// `ArgDelta`, `CallEnd`, `Finish`, `StreamError`) and raises
/// `MalformedStreamError` (strict mode) or `AggregatorClosed` (after
/// `close()`). `feed_event()` takes one payload, `feed_chunk()` one parsed
/// chunk (a REST dict or a google-genai response object). `snapshot()` shows
/// the result so far without ending the stream. `visible_output` says whether
/// candidate 0 has produced answer text or a function call, in every mode.
///
/// The rules, by id (F framing, E events, P parts, C calls, D deltas):
/// `spec/contract/aggregation.md` and `spec/aggregation.md` in the source
/// distribution.
#[pyclass(module = "fastagg._fastagg")]
pub struct StreamAggregator {
    core: Aggregator,
    /// Whether `feed()` builds a list (`deltas=True` or `"display"`).
    deltas: bool,
    /// The result of `close()`, returned again by later calls (D3).
    closed: Option<Py<AggregatedResponse>>,
    /// The thread that fed it first; only it may feed (D8).
    feeder: Option<std::thread::ThreadId>,
    /// `api="interactions"`: every method goes there (interactions.md I1).
    ix: Option<interactions::IxStream>,
}

impl StreamAggregator {
    /// D8, R3: the aggregator for a `feed*()`. Only a `feed()` running
    /// without the GIL holds it across other threads' calls, and that feed
    /// runs in the thread that fed first: a feeder finding it taken is a
    /// second one. (`check_feeder` is the caller's.)
    fn held<'py>(slf: &Bound<'py, Self>) -> PyResult<PyRefMut<'py, Self>> {
        slf.try_borrow_mut()
            .map_err(|_| pyo3::exceptions::PyRuntimeError::new_err(SECOND_FEEDER))
    }

    /// R3: the aggregator for a method any thread may call (D8): while a
    /// `feed()` of it runs without the GIL, wait for it (without the GIL).
    fn waited<'py>(slf: &Bound<'py, Self>) -> PyResult<PyRefMut<'py, Self>> {
        loop {
            match slf.try_borrow_mut() {
                Ok(this) => return Ok(this),
                Err(e) if !is_detached(key(slf)) => return Err(e.into()),
                Err(_) => slf
                    .py()
                    .detach(|| std::thread::sleep(std::time::Duration::from_micros(20))),
            }
        }
    }

    /// D8: chunks fed from two threads would interleave in an arbitrary order.
    fn check_feeder(&mut self) -> PyResult<()> {
        let me = std::thread::current().id();
        match self.feeder {
            None => self.feeder = Some(me),
            Some(owner) if owner != me => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(SECOND_FEEDER));
            }
            Some(_) => {}
        }
        Ok(())
    }

    fn finish_feed<'py>(
        &self,
        py: Python<'py>,
        deltas: Vec<Delta>,
        result: Result<Vec<MalformedStream>, fastagg_core::aggregate::Closed>,
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
}

/// The `deltas=` argument: a bool, or the name of a subset (R5). Read by
/// type, not by trying each: a failed extraction builds a Python exception,
/// which costs more than the rest of a small stream's constructor.
#[derive(Clone, Copy)]
pub(crate) struct DeltasArg(Deltas);

impl<'py> FromPyObject<'_, 'py> for DeltasArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let Ok(name) = obj.cast::<PyString>() else {
            return Ok(Self(if obj.extract::<bool>()? {
                Deltas::All
            } else {
                Deltas::Off
            }));
        };
        let name = name.to_cow()?;
        if name == "display" {
            Ok(Self(Deltas::Display))
        } else {
            Err(PyValueError::new_err(format!(
                "deltas must be True, False or 'display', not '{name}'"
            )))
        }
    }
}

#[pymethods]
impl StreamAggregator {
    #[new]
    #[pyo3(
        signature = (*, api = "generate_content", deltas = DeltasArg(Deltas::All), strict = true, max_event_bytes = None, max_array_index = None),
        text_signature = "(*, api='generate_content', deltas=True, strict=True, max_event_bytes=67108864, max_array_index=10000)"
    )]
    fn new(
        py: Python<'_>,
        api: &str,
        deltas: DeltasArg,
        strict: bool,
        max_event_bytes: Option<&Bound<'_, PyAny>>,
        max_array_index: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let defaults = Options::default();
        let DeltasArg(deltas) = deltas;
        if deltas == Deltas::Display && api == "interactions" {
            return Err(PyValueError::new_err(
                "deltas='display' is only for api='generate_content'",
            ));
        }
        let opts = Options {
            deltas,
            strict,
            max_event_bytes: limit(
                "max_event_bytes",
                max_event_bytes,
                defaults.max_event_bytes,
                MAX_EVENT_BYTES_CAP,
            )?,
            max_array_index: limit(
                "max_array_index",
                max_array_index,
                defaults.max_array_index,
                MAX_ARRAY_INDEX_CAP,
            )?,
        };
        Ok(Self {
            core: Aggregator::new(opts),
            deltas: deltas != Deltas::Off,
            closed: None,
            feeder: None,
            ix: interactions::for_api(py, api, opts)?,
        })
    }

    /// Feed raw body bytes (any split); returns the deltas of the events they
    /// completed (`[]` with `deltas=False`). Raises `MalformedStreamError`
    /// (strict mode; good events of the call are kept, their deltas in
    /// `.deltas`) or `AggregatorClosed`. A chunk of 16 KiB or more is
    /// processed with the GIL released (R3).
    fn feed<'py>(slf: &Bound<'py, Self>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let mut this = Self::held(slf)?;
        this.check_feeder()?;
        if let Some(ix) = &mut this.ix {
            return ix.feed(py, data);
        }
        let mut deltas = Vec::new();
        let core = &mut this.core;
        let result = with_bytes(data, |bytes| {
            let mut run = || {
                let result = deep_safe(|| core.feed(bytes, &mut deltas));
                return_freed_pages(core);
                result
            };
            // R3: a large chunk is framed and aggregated with the GIL released
            // (the bytes are immutable or a private copy; deltas are made after).
            if bytes.len() >= DETACH_BYTES {
                let _entry = Detached::enter(key(slf));
                py.detach(run)
            } else {
                run()
            }
        })?;
        this.finish_feed(py, deltas, result)
    }

    /// Feed one complete `GenerateContentResponse` JSON payload.
    fn feed_event<'py>(
        slf: &Bound<'py, Self>,
        payload: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let mut this = Self::held(slf)?;
        this.check_feeder()?;
        if let Some(ix) = &mut this.ix {
            return ix.feed_event(py, payload);
        }
        let mut deltas = Vec::new();
        let result = if let Ok(s) = payload.cast::<PyString>() {
            if let Ok(text) = crate::encode::str_bytes(s) {
                // R14: no UTF-8 copy is left on the caller's `str`.
                deep_safe(|| this.core.feed_event(text.as_bytes(), &mut deltas))
            } else {
                // Lone surrogates: not UTF-8, reported as such (F8), like bytes would be.
                let raw = s.call_method1(intern!(py, "encode"), ("utf-8", "surrogatepass"))?;
                with_bytes(&raw, |bytes| {
                    deep_safe(|| this.core.feed_event(bytes, &mut deltas))
                })?
            }
        } else {
            with_bytes(payload, |bytes| {
                deep_safe(|| this.core.feed_event(bytes, &mut deltas))
            })?
        };
        this.finish_feed(py, deltas, result)
    }

    /// Feed one parsed chunk: a REST camelCase dict or a google-genai response object.
    fn feed_chunk<'py>(
        slf: &Bound<'py, Self>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        {
            let mut this = Self::held(slf)?;
            if this.ix.is_some() {
                return Err(interactions::IxStream::feed_chunk());
            }
            if this.core.is_closed() {
                return Err(closed_error(py));
            }
            this.check_feeder()?;
        }
        // D2a: a dict of plain JSON types is read here; anything else takes the
        // Python conversion. R3: that runs Python code, so no borrow is held over
        // it (another thread's `snapshot()` then proceeds).
        let plain = if chunk.is_exact_instance_of::<PyDict>() {
            crate::convert::plain_json(chunk, 1)
        } else {
            None
        };
        let map = if let Some(Value::Object(map)) = plain {
            map
        } else {
            let mapping = py
                .import("fastagg._chunks")?
                .call_method1("chunk_to_mapping", (chunk,))?;
            let Value::Object(map) = from_py(&mapping, 0)? else {
                return Err(PyTypeError::new_err("feed_chunk() needs a dict"));
            };
            map
        };
        let mut this = Self::held(slf)?;
        let mut deltas = Vec::new();
        let result = deep_safe(|| this.core.feed_value(map, &mut deltas)).map(|()| Vec::new());
        this.finish_feed(py, deltas, result)
    }

    /// D8: release the feeding thread; the next `feed*()`, from any thread,
    /// owns the aggregator (a reader whose feeds hop threads one after
    /// another: a sync iterator read from a thread pool). While a feed runs
    /// without the GIL it is the D8 error.
    fn hand_over(slf: &Bound<'_, Self>) -> PyResult<()> {
        Self::held(slf)?.feeder = None;
        Ok(())
    }

    /// The current state as an `AggregatedResponse`, without changing it
    /// (after `close()`: the closed result).
    fn snapshot(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let (py, this) = (slf.py(), Self::waited(slf)?);
        if let Some(ix) = &this.ix {
            return ix.snapshot(py);
        }
        match &this.closed {
            Some(done) => Ok(done.clone_ref(py).into_any()),
            None => Ok(AggregatedResponse::create(
                py,
                Arc::new(deep_safe(|| this.core.snapshot())),
                Handed::new(Vec::new()),
            )?
            .into_any()),
        }
    }

    /// End the input and return the deltas that produced: a final event
    /// without a trailing blank line, the calls closed at the end (D5).
    /// `close()` then returns the result; `feed*` raises `AggregatorClosed`.
    fn finish<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let (py, mut this) = (slf.py(), Self::waited(slf)?);
        if this.ix.is_some() {
            return Err(PyTypeError::new_err(
                "finish() is only for api='generate_content'; an Interactions stream ends with its [DONE] event: call close()",
            ));
        }
        let mut deltas = Vec::new();
        deep_safe(|| this.core.finish(&mut deltas));
        return_freed_pages(&mut this.core);
        this.finish_feed(py, deltas, Ok(Vec::new()))
    }

    /// End the stream and return the `AggregatedResponse`; later calls return
    /// the same object.
    fn close(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let (py, mut this) = (slf.py(), Self::waited(slf)?);
        if let Some(ix) = &mut this.ix {
            return ix.close(py);
        }
        if let Some(done) = &this.closed {
            return Ok(done.clone_ref(py).into_any());
        }
        // R13: the long strings of streamed arguments are handed over.
        let (response, taken) = deep_safe(|| this.core.close_taking(handover::MIN));
        // F17, and R13: 8 MiB or more handed over returns the pages freed
        // during the feed before its `str` is made (one collection for both).
        let handed: usize = taken.iter().map(|t| t.text.len()).sum();
        if this.core.take_released() || handed >= handover::COLLECT {
            crate::alloc::return_freed_pages_now();
        }
        let done = AggregatedResponse::create(py, response, Handed::new(taken))?;
        this.closed = Some(done.clone_ref(py));
        Ok(done.into_any())
    }

    /// `api="interactions"`: the connection dropped and the resumed stream
    /// (`GET .../interactions/{id}?stream=true&last_event_id=...`) follows; the
    /// partial event since the last complete one is discarded (I20).
    fn reconnect(slf: &Bound<'_, Self>) -> PyResult<()> {
        let (py, mut this) = (slf.py(), Self::waited(slf)?);
        match &mut this.ix {
            Some(ix) => ix.reconnect(py),
            None => Err(PyTypeError::new_err(
                "reconnect() is only for api='interactions' (a generateContent stream cannot be resumed)",
            )),
        }
    }

    /// Whether candidate 0 has produced answer text or a function call
    /// (thoughts do not count), whatever `deltas` asks for (R5).
    #[getter]
    fn visible_output(slf: &Bound<'_, Self>) -> PyResult<bool> {
        let this = Self::waited(slf)?;
        if this.ix.is_some() {
            return Err(PyTypeError::new_err(
                "visible_output is only for api='generate_content'",
            ));
        }
        Ok(this.core.visible_output())
    }

    /// Payloads dispatched so far (good and bad).
    #[getter]
    fn events_seen(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let this = Self::waited(slf)?;
        if let Some(ix) = &this.ix {
            return Ok(ix.events_seen());
        }
        Ok(this.core.events_seen())
    }

    /// Bytes fed so far.
    #[getter]
    fn bytes_seen(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let this = Self::waited(slf)?;
        if let Some(ix) = &this.ix {
            return Ok(ix.bytes_seen());
        }
        Ok(this.core.bytes_seen())
    }
}
