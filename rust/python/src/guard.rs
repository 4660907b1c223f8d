//! L2 (binding): the request guard's fast path over plain contents (L71).
//!
//! `RequestGuard.extend` (python/fastagg/request.py) hands the contents it
//! has not seen to [`guard_prefix`] first. This accepts a content exactly
//! when `RequestGuard._one` would, and moves the guard's state the same way,
//! as long as the content is plain: exact `dict`s and `list`s, exact `str`
//! roles, names, ids and signatures. It stops at the first content it is not
//! sure of, an error or a shape only the Python checks read (a `Mapping` that
//! is not a `dict`, a `str` subclass), and the Python checks go on from
//! there. So every error, and its text, comes from one place: the Python
//! guard. `tests/loop/test_request.py` checks that both paths agree on every
//! content of a hostile generator.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// The guard's state as `RequestGuard` keeps it: (contents seen, the pending
/// calls, the index of their content, the last role).
type State<'py> = (
    usize,
    Option<Bound<'py, PyList>>,
    isize,
    Option<Bound<'py, PyAny>>,
);

/// Check `contents[start..]` while they are plain and valid; the state after
/// the last content checked. `unsigned` (the guard's list of unsigned first
/// calls of the current turn) is updated in place, content by content.
#[pyfunction(name = "_guard_prefix")]
#[allow(clippy::too_many_arguments)] // the guard's fields, as RequestGuard keeps them
pub(crate) fn guard_prefix<'py>(
    contents: &Bound<'py, PyList>,
    start: usize,
    pending: Option<Bound<'py, PyList>>,
    pending_at: isize,
    last_role: Option<Bound<'py, PyAny>>,
    unsigned: &Bound<'py, PyList>,
    require_signatures: bool,
) -> PyResult<State<'py>> {
    let mut state = (start, pending, pending_at, last_role);
    while state.0 < contents.len() {
        let content = contents.get_item(state.0)?;
        let Ok(content) = content.cast_exact::<PyDict>() else {
            break;
        };
        let Some(next) = one(
            state.0,
            content,
            state.1.as_ref(),
            unsigned,
            require_signatures,
        )?
        else {
            break;
        };
        state = match next {
            Step::Model(calls, role) => match calls {
                Some(calls) => (state.0 + 1, Some(calls), state.0.cast_signed(), Some(role)),
                None => (state.0 + 1, state.1, state.2, Some(role)),
            },
            Step::User(role) => (state.0 + 1, None, state.2, Some(role)),
        };
    }
    Ok(state)
}

/// What one accepted content does to the state.
enum Step<'py> {
    /// A model content: its calls (None without any) and its role.
    Model(Option<Bound<'py, PyList>>, Bound<'py, PyAny>),
    /// A user content (the pending calls, if any, are answered).
    User(Bound<'py, PyAny>),
}

/// `RequestGuard._one` for a plain content `i`; None to leave it to Python.
fn one<'py>(
    i: usize,
    content: &Bound<'py, PyDict>,
    pending: Option<&Bound<'py, PyList>>,
    unsigned: &Bound<'py, PyList>,
    require_signatures: bool,
) -> PyResult<Option<Step<'py>>> {
    let py = content.py();
    let Some(role) = content.get_item(intern!(py, "role"))? else {
        return Ok(None);
    };
    let model = match role.cast_exact::<PyString>().map(|r| r.to_str()) {
        Ok(Ok("model")) => true,
        Ok(Ok("user")) => false,
        _ => return Ok(None),
    };
    let Some(parts) = content.get_item(intern!(py, "parts"))? else {
        return Ok(None);
    };
    let Ok(parts) = parts.cast_exact::<PyList>() else {
        return Ok(None);
    };
    if parts.is_empty() {
        return Ok(None);
    }
    if model {
        if pending.is_some() {
            return Ok(None);
        }
        return model_step(i, parts, role, unsigned, require_signatures);
    }
    let Some(answered) = user_answers(parts, pending)? else {
        return Ok(None);
    };
    if answered < parts.len() {
        unsigned.call_method0(intern!(py, "clear"))?; // a new turn starts
    }
    Ok(Some(Step::User(role)))
}

/// A plain model content's step (None: leave it to Python), recording an
/// unsigned first call in `unsigned`.
fn model_step<'py>(
    i: usize,
    parts: &Bound<'py, PyList>,
    role: Bound<'py, PyAny>,
    unsigned: &Bound<'py, PyList>,
    require_signatures: bool,
) -> PyResult<Option<Step<'py>>> {
    let py = parts.py();
    let mut calls: Option<Bound<'py, PyList>> = None;
    let mut first_at = 0;
    let mut signed = false;
    for (j, part) in parts.iter().enumerate() {
        let Ok(part) = part.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        match part.get_item(intern!(py, "functionCall"))? {
            Some(call) if call.is_exact_instance_of::<PyDict>() => {
                if calls.is_none() {
                    first_at = j;
                    signed = match part.get_item(intern!(py, "thoughtSignature"))? {
                        Some(s) if s.is_exact_instance_of::<PyString>() => s.len()? > 0,
                        Some(s) if s.is_instance_of::<PyString>() => return Ok(None),
                        _ => false,
                    };
                }
                calls
                    .get_or_insert_with(|| PyList::empty(py))
                    .append(call)?;
            }
            Some(call) if !call.is_none() => return Ok(None), // a Mapping, or not a call
            _ => {
                if part.contains(intern!(py, "functionResponse"))? {
                    return Ok(None);
                }
            }
        }
    }
    if calls.is_some() && require_signatures && !signed {
        unsigned.append(format!("contents[{i}].parts[{first_at}]"))?;
    }
    Ok(Some(Step::Model(calls, role)))
}

/// How many parts of a plain user content are function responses, once they
/// answer `pending` (None: leave it to Python).
fn user_answers<'py>(
    parts: &Bound<'py, PyList>,
    pending: Option<&Bound<'py, PyList>>,
) -> PyResult<Option<usize>> {
    let py = parts.py();
    let mut answered = 0;
    for part in parts.iter() {
        let Ok(part) = part.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        let Some(response) = part.get_item(intern!(py, "functionResponse"))? else {
            continue;
        };
        if response.is_none() {
            continue;
        }
        let Some(calls) = pending.filter(|calls| answered < calls.len()) else {
            return Ok(None); // a response without its call
        };
        let call = calls.get_item(answered)?;
        let (Ok(response), Ok(call)) =
            (response.cast_exact::<PyDict>(), call.cast_exact::<PyDict>())
        else {
            return Ok(None);
        };
        for (field, lenient) in [(intern!(py, "name"), false), (intern!(py, "id"), true)] {
            let (theirs, ours) = (response.get_item(field)?, call.get_item(field)?);
            if !same(&key(theirs.as_ref()), &key(ours.as_ref()), lenient) {
                return Ok(None);
            }
        }
        answered += 1;
    }
    match pending {
        Some(calls) if calls.len() != answered => Ok(None),
        _ => Ok(Some(answered)),
    }
}

/// A name or id as the fast path reads it.
enum Key<'a> {
    /// Absent or None.
    Absent,
    Str(&'a str),
    /// Anything else: left to Python.
    Other,
}

fn key<'a>(value: Option<&'a Bound<'_, PyAny>>) -> Key<'a> {
    match value {
        None => Key::Absent,
        Some(v) if v.is_none() => Key::Absent,
        Some(v) => match v.cast_exact::<PyString>().map(|s| s.to_str()) {
            Ok(Ok(text)) => Key::Str(text),
            _ => Key::Other,
        },
    }
}

/// Whether a response's name or id certainly matches its call's: both exact
/// `str` and equal, or both absent; with `lenient` (ids), an absent side
/// matches any `str`.
fn same(response: &Key<'_>, call: &Key<'_>, lenient: bool) -> bool {
    match (response, call) {
        (Key::Str(a), Key::Str(b)) => a == b,
        (Key::Absent, Key::Absent) => true,
        (Key::Absent, Key::Str(_)) | (Key::Str(_), Key::Absent) => lenient,
        _ => false,
    }
}
