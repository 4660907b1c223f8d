//! `fastagg._fastagg`: the Python face of `fastagg-core`. Conversions only;
//! every rule lives in the core crate.

use std::sync::{Arc, Mutex, PoisonError};

use fastagg_core::aggregate::{
    Aggregator, CandidateResult, Delta, Options, Response, MAX_ARRAY_INDEX_CAP, MAX_EVENT_BYTES_CAP,
};
use fastagg_core::error::MalformedStream;
use fastagg_core::sse;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple,
};
use pyo3::{intern, IntoPyObjectExt};
use serde_json::{Map, Number, Value};

mod interactions;

// Events allocate many small maps and strings (parts, args, keys); mimalloc
// serves them several times faster than the system allocator (measured on
// the tool_parallel stream). Only Rust-side allocations use it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's public API (linked in through the `mimalloc` crate).
    fn mi_collect(force: bool);
}

/// F17: mimalloc keeps freed pages mapped for reuse and returns them to the
/// OS only after a delay, on a later allocation. After framing dropped an
/// oversized event's buffer, ask for them now, so that process RSS comes back.
/// Only then: returning pages after every large event (or as an argument
/// grows, R4) is paid again in page faults by the next one (measured: 1.8x
/// the time of a stream of 4 MiB images).
fn return_freed_pages(core: &mut Aggregator) {
    if core.take_released() {
        // SAFETY: mi_collect takes no pointers and may be called at any time.
        unsafe { mi_collect(true) };
    }
}

// ---------------------------------------------------------------- JSON <-> Python

/// Conversions recurse once per nesting level (values nest up to 1024 levels,
/// F10); before each container they make sure this much stack is left,
/// growing the stack on the heap otherwise, so that a thread with a small
/// stack (musl's 128 KiB) converts the deepest value safely.
const STACK_RED_ZONE: usize = 32 * 1024;
const STACK_GROWTH: usize = 1024 * 1024;

/// Runs a core operation with enough stack for values nested 1024 levels
/// deep (cloning, comparing and writing them recurse): on a thread with less
/// than this left (a small thread stack), on a stack grown on the heap.
fn deep_safe<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(CORE_STACK, 4 * CORE_STACK, f)
}

const CORE_STACK: usize = 1024 * 1024;

/// R3: `feed()` releases the GIL for chunks at least this long. Releasing and
/// re-taking it cost up to ~1 µs per call (measured: 40 % of a 1 KiB feed,
/// under 2 % of a 16 KiB one).
const DETACH_BYTES: usize = 16 * 1024;

/// R3: the aggregators (by address) whose `feed()` runs without the GIL now.
/// Entries are added and removed with the GIL held; one per feeding thread.
static DETACHED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn detached<R>(f: impl FnOnce(&mut Vec<usize>) -> R) -> R {
    f(&mut DETACHED.lock().unwrap_or_else(PoisonError::into_inner))
}

fn key(slf: &Bound<'_, StreamAggregator>) -> usize {
    slf.as_ptr() as usize
}

/// An aggregator's entry in `DETACHED`, removed when dropped (also when the
/// feed unwinds, so a stale entry never makes a later caller wait).
struct Detached(usize);

impl Detached {
    fn enter(key: usize) -> Self {
        detached(|list| list.push(key));
        Self(key)
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        detached(|list| {
            if let Some(i) = list.iter().position(|&k| k == self.0) {
                list.swap_remove(i);
            }
        });
    }
}

const SECOND_FEEDER: &str = "this StreamAggregator was fed from another thread first; an \
     aggregator is fed from one thread (chunks from two threads would interleave): use one \
     aggregator per stream";

fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number_to_py(py, n)?,
        Value::String(s) => PyString::new(py, s).into_any(),
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

fn map_to_py<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(key_to_py(py, k), to_py(py, v)?)?;
    }
    Ok(dict)
}

/// Keys that every part and call repeats are interned once (and their hash
/// cached by Python); others are made fresh.
fn key_to_py<'py>(py: Python<'py>, key: &str) -> Bound<'py, PyString> {
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

fn number_to_py<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(u) = n.as_u64() {
        u.into_bound_py_any(py)
    } else if let Some(i) = n.as_i64() {
        i.into_bound_py_any(py)
    } else {
        Ok(PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any())
    }
}

fn opt_to_py<'py>(py: Python<'py>, value: Option<&Value>) -> PyResult<Bound<'py, PyAny>> {
    value.map_or_else(|| Ok(py.None().into_bound(py)), |v| to_py(py, v))
}

/// A plain JSON dict (as `fastagg._chunks.chunk_to_mapping` makes) -> Value.
fn from_py(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
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
        Ok(Value::String(s.to_str()?.to_owned()))
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
                map.insert(key.to_str()?.to_owned(), from_py(&v, depth + 1)?);
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

/// A size option: a plain non-negative `int` (not a bool), else a clear error.
fn limit(
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
fn with_bytes<R>(data: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
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

// ---------------------------------------------------------------- errors

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || py.import("fastagg.errors").map(Bound::unbind))
        .map(|m| m.bind(py))
}

fn closed_error(py: Python<'_>) -> PyErr {
    match errors_module(py).and_then(|m| m.getattr("AggregatorClosed")) {
        Ok(cls) => PyErr::from_type(
            cls.cast_into().unwrap_or_else(|_| py.get_type::<pyo3::exceptions::PyRuntimeError>()),
            "feed() after close(): this StreamAggregator is finished; create a new one for the next stream",
        ),
        Err(e) => e,
    }
}

fn malformed_error(py: Python<'_>, errors: &[MalformedStream], deltas: Bound<'_, PyList>) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = errors_module(py)?.getattr("MalformedStreamError")?;
        let list = PyList::empty(py);
        for e in errors {
            let exc = cls.call1((
                &e.message,
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

// ---------------------------------------------------------------- deltas

macro_rules! record_class {
    ($name:ident, $doc:literal, $($field:ident : $ty:ty),+) => {
        #[doc = $doc]
        #[pyclass(frozen, module = "fastagg._fastagg", get_all)]
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

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let mut parts = Vec::new();
                $(parts.push(format!(
                    "{}={}",
                    stringify!($field),
                    (&self.$field).into_bound_py_any(py)?.repr()?
                ));)+
                Ok(format!("{}({})", stringify!($name), parts.join(", ")))
            }
        }
    };
}

record_class!(TextDelta, "A text fragment (thought or answer) of candidate `candidate`, part `index`.",
    candidate: u32, index: usize, text: String, thought: bool);
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
    value: Value,
    object: PyOnceLock<Py<PyAny>>,
}

impl LazyJson {
    fn new(value: Value) -> Self {
        Self {
            value,
            object: PyOnceLock::new(),
        }
    }
}

impl<'py> FromPyObject<'_, 'py> for LazyJson {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let object = PyOnceLock::new();
        let _ = object.set(obj.py(), obj.to_owned().unbind());
        Ok(Self {
            value: Value::Null,
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
            .get_or_try_init(py, || to_py(py, &self.value).map(Bound::unbind))
            .map(|o| o.bind(py).clone())
    }
}
record_class!(Finish, "A finish reason arrived for candidate `candidate`.",
    candidate: u32, reason: String);
record_class!(StreamError, "An error object arrived inside the stream (kept verbatim).",
    error: Py<PyAny>);
record_class!(SseEvent, "One WHATWG server-sent event.",
    event: String, data: String, id: Option<String>, retry: Option<u64>);

fn delta_to_py(py: Python<'_>, delta: Delta) -> PyResult<Bound<'_, PyAny>> {
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
                text,
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
                value: LazyJson::new(value),
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
                call: LazyJson::new(call),
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

fn deltas_to_py(py: Python<'_>, deltas: Vec<Delta>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for d in deltas {
        list.append(delta_to_py(py, d)?)?;
    }
    Ok(list)
}

// ---------------------------------------------------------------- the aggregator

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
///   skips building them (the fastest path when only the result is needed).
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
/// the result so far without ending the stream.
///
/// The rules, by id (F framing, E events, P parts, C calls, D deltas):
/// `spec/contract/aggregation.md` and `spec/aggregation.md` in the source
/// distribution.
#[pyclass(module = "fastagg._fastagg")]
pub struct StreamAggregator {
    core: Aggregator,
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
                Err(e) if !detached(|list| list.contains(&key(slf))) => return Err(e.into()),
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
            Err(malformed_error(py, &errors, list))
        }
    }
}

#[pymethods]
impl StreamAggregator {
    #[new]
    #[pyo3(
        signature = (*, api = "generate_content", deltas = true, strict = true, max_event_bytes = None, max_array_index = None),
        text_signature = "(*, api='generate_content', deltas=True, strict=True, max_event_bytes=67108864, max_array_index=10000)"
    )]
    fn new(
        py: Python<'_>,
        api: &str,
        deltas: bool,
        strict: bool,
        max_event_bytes: Option<&Bound<'_, PyAny>>,
        max_array_index: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let defaults = Options::default();
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
            deltas,
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

    /// Feed one complete GenerateContentResponse JSON payload.
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
            match s.to_str() {
                Ok(text) => deep_safe(|| this.core.feed_event(text.as_bytes(), &mut deltas)),
                // Lone surrogates: not UTF-8, reported as such (F8), like bytes would be.
                Err(_) => {
                    let raw = s.call_method1(intern!(py, "encode"), ("utf-8", "surrogatepass"))?;
                    with_bytes(&raw, |bytes| {
                        deep_safe(|| this.core.feed_event(bytes, &mut deltas))
                    })?
                }
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
            if let Some(ix) = &this.ix {
                return Err(ix.feed_chunk());
            }
            if this.core.is_closed() {
                return Err(closed_error(py));
            }
            this.check_feeder()?;
        }
        // R3: the conversion runs Python code, so no borrow is held over it
        // (another thread's `snapshot()` then proceeds).
        let mapping = py
            .import("fastagg._chunks")?
            .call_method1("chunk_to_mapping", (chunk,))?;
        let Value::Object(map) = from_py(&mapping, 0)? else {
            return Err(PyTypeError::new_err("feed_chunk() needs a dict"));
        };
        let mut this = Self::held(slf)?;
        let mut deltas = Vec::new();
        let result = deep_safe(|| this.core.feed_value(map, &mut deltas)).map(|()| Vec::new());
        this.finish_feed(py, deltas, result)
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
        let response = deep_safe(|| this.core.close());
        return_freed_pages(&mut this.core);
        let done = AggregatedResponse::create(py, response)?;
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

// ---------------------------------------------------------------- results

/// One candidate of an `AggregatedResponse`. Its Python values are built once,
/// on first access, and shared: `content["parts"]` is `parts`, and each
/// `function_calls[i]["args"]` is the `args` dict inside its part.
#[pyclass(frozen, module = "fastagg._fastagg")]
pub struct Candidate {
    inner: Arc<Response>,
    position: usize,
    parts: PyOnceLock<Py<PyList>>,
    content: PyOnceLock<Py<PyDict>>,
    calls: PyOnceLock<Py<PyList>>,
    metadata: PyOnceLock<Py<PyDict>>,
}

impl Candidate {
    fn new(inner: Arc<Response>, position: usize) -> Self {
        Self {
            inner,
            position,
            parts: PyOnceLock::new(),
            content: PyOnceLock::new(),
            calls: PyOnceLock::new(),
            metadata: PyOnceLock::new(),
        }
    }

    fn data(&self) -> Option<&CandidateResult> {
        self.inner.candidates.get(self.position)
    }

    fn parts_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let parts = self.parts.get_or_try_init(py, || {
            let list = PyList::empty(py);
            for part in self.data().map_or(&[][..], |c| &c.parts) {
                list.append(to_py(py, part)?)?;
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
                let d = PyDict::new(py);
                d.set_item(intern!(py, "id"), call.id)?;
                d.set_item(intern!(py, "name"), call.name)?;
                // The args dict of the part itself: one object, not a copy.
                let args = match call.args {
                    Some(_) => parts
                        .get_item(i)?
                        .get_item(intern!(py, "functionCall"))?
                        .get_item(intern!(py, "args"))?,
                    None => PyDict::new(py).into_any(),
                };
                d.set_item(intern!(py, "args"), args)?;
                list.append(d)?;
            }
            Ok::<_, PyErr>(list.unbind())
        })?;
        Ok(calls.bind(py).clone())
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

    fn unfinished_of(&self) -> Vec<usize> {
        self.data()
            .map_or_else(Vec::new, |c| c.unfinished_calls.clone())
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
    fn text(&self) -> &str {
        self.text_of()
    }
    /// Thought text of this candidate.
    #[getter]
    fn thought_text(&self) -> &str {
        self.thought_text_of()
    }
    /// `[{"id", "name", "args"}]` of this candidate, in part order.
    #[getter]
    fn function_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.calls_list(py)
    }
    /// Part indices of the streamed calls the model did not finish (C13).
    #[getter]
    fn unfinished_calls(&self) -> Vec<usize> {
        self.unfinished_of()
    }
    /// Raw finish reason of this candidate, or None.
    #[getter]
    fn finish_reason(&self) -> Option<&str> {
        self.finish_reason_of()
    }
    /// Finish message of this candidate, or None.
    #[getter]
    fn finish_message(&self) -> Option<&str> {
        self.finish_message_of()
    }
    /// The other candidate keys (E5), last non-null wins.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let metadata = self.metadata.get_or_try_init(py, || match self.data() {
            Some(c) => map_to_py(py, &c.metadata).map(Bound::unbind),
            None => Ok(PyDict::new(py).unbind()),
        })?;
        Ok(metadata.bind(py).clone())
    }
    fn __repr__(&self) -> String {
        format!(
            "Candidate(index={}, finish_reason={:?})",
            self.index(),
            self.finish_reason_of()
        )
    }
}

/// The aggregated model turn (read-only). Flat accessors describe candidate 0
/// and return the same objects as `candidates[...]` of index 0.
#[pyclass(frozen, module = "fastagg._fastagg")]
pub struct AggregatedResponse {
    inner: Arc<Response>,
    candidates: Vec<Py<Candidate>>,
    /// Candidate 0 (the flat accessors), or an empty stand-in when absent.
    first: Py<Candidate>,
}

impl AggregatedResponse {
    fn create(py: Python<'_>, inner: Arc<Response>) -> PyResult<Py<Self>> {
        let candidates = (0..inner.candidates.len())
            .map(|position| Py::new(py, Candidate::new(Arc::clone(&inner), position)))
            .collect::<PyResult<Vec<_>>>()?;
        let first = match inner.candidates.iter().position(|c| c.index == 0) {
            Some(position) => candidates[position].clone_ref(py),
            None => Py::new(py, Candidate::new(Arc::clone(&inner), usize::MAX))?,
        };
        Py::new(
            py,
            Self {
                inner,
                candidates,
                first,
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
    fn text(&self) -> &str {
        self.first().text_of()
    }
    /// Thought text of candidate 0.
    #[getter]
    fn thought_text(&self) -> &str {
        self.first().thought_text_of()
    }
    /// `[{"id", "name", "args"}]` of candidate 0, in part order.
    #[getter]
    fn function_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.first().calls_list(py)
    }
    /// Part indices (into `parts`) of candidate 0's streamed calls that the
    /// model did not finish: still open (`snapshot()`) or flushed by `close()` (C13).
    #[getter]
    fn unfinished_calls(&self) -> Vec<usize> {
        self.first().unfinished_of()
    }
    /// Raw finish reason of candidate 0 (e.g. "STOP"), or None.
    #[getter]
    fn finish_reason(&self) -> Option<&str> {
        self.first().finish_reason_of()
    }
    /// Finish message of candidate 0, or None.
    #[getter]
    fn finish_message(&self) -> Option<&str> {
        self.first().finish_message_of()
    }
    /// Merged `usageMetadata` (camelCase), or None.
    #[getter]
    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.usage.as_ref())
    }
    /// `modelVersion` (last non-null), or None.
    #[getter]
    fn model_version<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.model_version.as_ref())
    }
    /// `responseId` (last non-null), or None.
    #[getter]
    fn response_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.response_id.as_ref())
    }
    /// `promptFeedback` (last non-null), or None.
    #[getter]
    fn prompt_feedback<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.prompt_feedback.as_ref())
    }
    /// The in-stream error object, verbatim, or None.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        opt_to_py(py, self.inner.error.as_ref())
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
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }
    /// Every candidate, in index order.
    #[getter]
    fn candidates<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.candidates.iter().map(|c| c.clone_ref(py)))
    }
    /// A GenerateContentResponse-shaped dict of the aggregate (fresh objects).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_value())
    }
    /// `to_dict()` as compact UTF-8 JSON.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = serde_json::to_vec(&self.inner.to_value())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
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
    fn __repr__(&self) -> String {
        let first = self.first();
        format!(
            "AggregatedResponse(finish_reason={:?}, complete={}, parts={}, text={:?})",
            first.finish_reason_of(),
            self.inner.complete,
            first.data().map_or(0, |c| c.parts.len()),
            first.text_of().chars().take(60).collect::<String>()
        )
    }
}

// ---------------------------------------------------------------- SSE decoder

/// A generic WHATWG server-sent-events decoder (any provider).
#[pyclass(module = "fastagg._fastagg")]
pub struct SseDecoder {
    core: sse::SseDecoder,
}

fn events_to_py(py: Python<'_>, events: Vec<sse::SseEvent>) -> PyResult<Bound<'_, PyList>> {
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
            core: sse::SseDecoder::new(),
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
    Ok(())
}
