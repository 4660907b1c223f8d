"""Function calls (C1-C17): complete calls, streamed calls, their routing, partial args and close."""

from __future__ import annotations

from itertools import islice

from ..._json import JSONObject, JSONValue, Part
from ..diagnostics import _diagnostic
from ..json_path import _MISSING, _SYNTAX, _assign, _holds_value, parse_json_path
from .render import _is_number, _render_json, _same_json
from .response import ArgDelta, CallEnd, CallStart, Delta
from .state import _CandidateState, _KeptPart, _StreamedCall, _TurnState

_PATH_SEARCH = 64  # C17: the open calls the C2.3 path search looks at, most recent first
_VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue")


def _function_call(
    state: _TurnState,
    cand: _CandidateState,
    part: Part,
    fc: JSONObject,
    i: int,
    j: int,
    p: int,
    deltas: list[Delta] | None,
) -> None:
    """Fold the function call ``fc`` of part ``p`` of ``candidates[j]`` of event ``i``."""
    partial_args = fc.get("partialArgs")
    # C1 by key presence. A partialArgs of the wrong type still marks the
    # streaming feature, so such a part is never replayed as it came.
    # RULE C3: a streamed chunk, as opposed to a complete call (C1).
    streamed = (
        (partial_args is not None and partial_args != [])
        or "willContinue" in fc
        or ("name" not in fc and "args" not in fc)
    )
    if not streamed:  # C1: a complete call, kept as received
        _complete_call(state, cand, part, fc, i, j, p, deltas)
        return
    if not isinstance(partial_args, list):
        if partial_args is not None:
            where = f"candidates[{j}].content.parts[{p}].functionCall.partialArgs"
            state.shape(i, where, "a list")
        partial_args = []

    # RULE C7: the id is the model's or absent, never invented.
    call_id = fc.get("id") if isinstance(fc.get("id"), str) else None
    name = fc.get("name") if isinstance(fc.get("name"), str) else None
    call = _route(cand, call_id, name, partial_args, state.max_array_index)
    if call is None:
        return  # C2.4 / C10: an end marker with no open call
    call.touched = next(state.clock)
    if call.slot < 0:
        _open_call(state, cand, call, deltas)
    else:  # C17: the most recently updated open call goes last in the recency order
        del cand.open_calls[call]
        cand.open_calls[call] = None
    _name_and_signature(state, cand, call, name, part.get("thoughtSignature"))
    args = fc.get("args")
    if isinstance(args, dict):
        call.args.update(args)
    where = f"candidates[{j}].content.parts[{p}].functionCall.partialArgs"
    for m, item in enumerate(partial_args):
        if isinstance(item, dict):
            _partial_arg(state, cand, call, item, deltas)
        else:
            state.shape(i, f"{where}[{m}]", "an object")
    if fc.get("willContinue") is not True:  # C6
        call.finished = True  # C13
        _close_call(state, cand, call, deltas)


def _complete_call(
    state: _TurnState,
    cand: _CandidateState,
    part: Part,
    fc: JSONObject,
    i: int,
    j: int,
    p: int,
    deltas: list[Delta] | None,
) -> None:
    """C1: a complete call is kept as received; C15: one without a name is left out."""
    if not isinstance(fc.get("name"), str):  # C15: a call nobody can answer
        info = _complete_call_info(fc)
        state.warnings.append(
            _diagnostic(
                "nameless_call",
                event=i,
                path=f"candidates[{j}].content.parts[{p}]",
                call_id=info["id"],
                args=info["args"],
            )
        )
        return
    cand.slots.append(_KeptPart(part, is_call=True))
    cand.visible = True  # R5
    if deltas is not None:
        k = len(cand.slots) - 1
        info = _complete_call_info(fc)
        deltas.append(CallStart(cand.index, k, info["id"], info["name"]))
        deltas.append(CallEnd(cand.index, k, info))


def _open_call(
    state: _TurnState, cand: _CandidateState, call: _StreamedCall, deltas: list[Delta] | None
) -> None:
    """C8: a new call reserves its slot at the end (ending the text run).

    RULE C14: however many calls are open, none is closed for room.
    """
    call.slot = len(cand.slots)
    cand.slots.append(call)
    cand.open_calls[call] = None
    if call.id is not None:
        cand.open_by_id[call.id] = call
    cand.visible = True  # R5: a call start is visible output
    if deltas is not None:
        deltas.append(CallStart(cand.index, call.slot, call.id, call.name))


def _name_and_signature(
    state: _TurnState,
    cand: _CandidateState,
    call: _StreamedCall,
    name: str | None,
    signature: JSONValue,
) -> None:
    """C2, C6: the first name and the first thoughtSignature of a call are kept."""
    c, k = cand.index, call.slot
    if name is not None:
        if call.name is None:
            call.name = name
        elif call.name != name:
            state.warnings.append(
                _diagnostic("call_renamed", candidate=c, part=k, name=name, kept_name=call.name)
            )
    if signature is not None:
        if call.signature is None:
            # RULE P5: the signature stays exactly as received, on its call.
            call.signature = signature
        elif not _same_json(call.signature, signature):
            state.warnings.append(_diagnostic("signature_changed", candidate=c, part=k))


def _route(
    cand: _CandidateState,
    call_id: str | None,
    name: str | None,
    partial_args: list[JSONValue],
    max_array_index: int,
) -> _StreamedCall | None:
    """C2: the call a streamed chunk belongs to; a new one has ``slot == -1``.

    RULE C17: by id through a map, by recency through the insertion order of
    ``open_calls`` (most recent last); the path search looks at the 64 most recent.
    """
    if call_id is not None:
        found = cand.open_by_id.get(call_id)
        return found if found is not None else _StreamedCall(-1, call_id, name)
    if name is not None:
        return _StreamedCall(-1, None, name)
    if not cand.open_calls:
        return _StreamedCall(-1, None, None) if partial_args else None
    if partial_args:
        paths = []
        for item in partial_args:
            path = item.get("jsonPath") if isinstance(item, dict) else None
            if isinstance(path, str):
                parsed = parse_json_path(path, max_array_index)
                if isinstance(parsed, tuple):
                    paths.append(parsed)
        if paths:
            for call in islice(reversed(cand.open_calls), _PATH_SEARCH):
                if any(_holds_value(call.args, path) for path in paths):
                    return call
    return next(reversed(cand.open_calls))


def _partial_arg(
    state: _TurnState,
    cand: _CandidateState,
    call: _StreamedCall,
    item: JSONObject,
    deltas: list[Delta] | None,
) -> None:
    """C9: apply one partial arg, or skip it with a C5 warning."""
    key = next((k for k in _VALUE_KEYS if k in item), None)
    if key is None:
        return
    value = item[key]
    path = item.get("jsonPath", _MISSING)
    reason = None
    if key == "stringValue" and not isinstance(value, str):
        reason = "stringValue is not a string"
    elif key == "numberValue" and not _is_number(value):
        reason = "numberValue is not a number"
    elif key == "boolValue" and not isinstance(value, bool):
        reason = "boolValue is not a boolean"
    elif not isinstance(path, str):
        reason = _SYNTAX
    else:
        if key == "nullValue":
            value = None
        parsed = parse_json_path(path, state.max_array_index)
        if isinstance(parsed, str):
            reason = parsed
        else:
            reason = _assign(call.args, parsed, value, append=key == "stringValue")
    if reason is not None:
        c, k = cand.index, call.slot
        if isinstance(path, str):
            diagnostic = _diagnostic(
                "partial_arg_skipped", candidate=c, part=k, json_path=path, reason=reason
            )
        else:
            code = "partial_arg_path_missing" if path is _MISSING else "partial_arg_path_not_string"
            diagnostic = _diagnostic(code, candidate=c, part=k, reason=reason)
        state.warnings.append(diagnostic)
        return
    if deltas is not None:
        deltas.append(ArgDelta(cand.index, call.slot, path, value))


def _close_call(
    state: _TurnState, cand: _CandidateState, call: _StreamedCall, deltas: list[Delta] | None
) -> None:
    """C6: a closed call leaves the open calls; ``deltas`` gets its ``CallEnd``."""
    del cand.open_calls[call]
    if call.id is not None:
        del cand.open_by_id[call.id]
    if call.name is None:  # C6, C12: left out of parts, reported with its args
        state.warnings.append(
            _diagnostic(
                "nameless_streamed_call",
                candidate=cand.index,
                part=call.slot,
                call_id=call.id,
                args=_render_json(call.args),
            )
        )
    elif deltas is not None:
        deltas.append(CallEnd(cand.index, call.slot, _streamed_call_info(call)))


def _close_open_calls(state: _TurnState) -> None:
    """C12: close every open call, in slot order, candidate by candidate.

    RULE C13: the calls flushed here are unfinished: no ``CallEnd`` (D5).
    """
    for index in sorted(state.candidates):
        cand = state.candidates[index]
        for call in sorted(cand.open_calls, key=lambda c: c.slot):
            _close_call(state, cand, call, None)


def _complete_call_info(fc: JSONObject) -> JSONObject:
    """C11: ``{"id", "name", "args"}`` of a complete call part, args copied."""
    call_id, name, args = fc.get("id"), fc.get("name"), fc.get("args")
    return {
        "id": call_id if isinstance(call_id, str) else None,
        "name": name if isinstance(name, str) else None,
        "args": _render_json(args) if isinstance(args, dict) else {},
    }


def _streamed_call_info(call: _StreamedCall) -> JSONObject:
    return {"id": call.id, "name": call.name, "args": _render_json(call.args)}
