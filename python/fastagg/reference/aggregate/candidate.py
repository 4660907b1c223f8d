"""Candidates (E4, E5): the state of one candidate, folding a candidate object, rendering it."""

from __future__ import annotations

from ..._json import JSONObject, JSONValue, Part
from .calls import _complete_call_info, _function_call, _streamed_call_info
from .merge import _citations, _logprobs
from .parts import _add_part, _is_plain
from .render import _render_json, _same
from .response import Candidate, Delta, Finish
from .state import _CandidateState, _Checkpoint, _KeptPart, _TextRun, _TurnState

_CANDIDATE_OWN_KEYS = frozenset({"content", "finishReason", "finishMessage", "index"})


def _is_output(part: JSONValue) -> bool:
    """E14: a part the candidate keeps or extends a text run with."""
    if not isinstance(part, dict) or not part:
        return False
    return not _is_plain(part) or bool(part["text"])


def _candidate(
    state: _TurnState,
    obj: JSONValue,
    i: int,
    j: int,
    deltas: list[Delta] | None,
    mark: _Checkpoint,
) -> None:
    """Fold ``candidates[j]`` of event ``i`` into the candidate of its index (E4)."""
    if not isinstance(obj, dict):
        state.shape(i, f"candidates[{j}]", "an object")
        return
    index = obj.get("index")
    if index is None:
        index = 0
    elif type(index) is not int or not 0 <= index < 2**31:
        state.shape(i, f"candidates[{j}].index", "a non-negative integer below 2^31")
        return
    # RULE E11: found by index in O(1) whatever the arrival order.
    cand = state.candidates.get(index)
    if cand is None:
        cand = state.candidates[index] = _CandidateState(index)
    content = obj.get("content")
    if isinstance(content, dict):
        parts = content.get("parts")
        if isinstance(parts, list):
            for p, part in enumerate(parts):
                mark.output = mark.output or (index == 0 and _is_output(part))
                if isinstance(part, dict):
                    _part(state, cand, part, i, j, p, deltas)
                else:
                    state.shape(i, f"candidates[{j}].content.parts[{p}]", "an object")
        elif parts is not None:
            state.shape(i, f"candidates[{j}].content.parts", "a list")
    elif content is not None:
        state.shape(i, f"candidates[{j}].content", "an object")
    reason = obj.get("finishReason")
    if isinstance(reason, str) and reason:
        cand.finish_reason = reason
        if deltas is not None:
            deltas.append(Finish(index, reason))
    message = obj.get("finishMessage")
    if isinstance(message, str) and message:
        cand.finish_message = message
    for key, value in obj.items():
        if value is None or key in _CANDIDATE_OWN_KEYS:
            continue
        if index == 0 and key == "continuationToken" and isinstance(value, str) and value:
            mark.token = value
        if key == "citationMetadata":
            _citations(state, cand, value, i, j)
        elif key == "logprobsResult":
            _logprobs(cand, value)  # E16: per-chunk log probabilities add up
        else:
            cand.metadata[key] = value  # E5: last non-null wins


def _part(
    state: _TurnState,
    cand: _CandidateState,
    part: Part,
    i: int,
    j: int,
    p: int,
    deltas: list[Delta] | None,
) -> None:
    """Route one part: dropped (P6), a function call (P7), or any other part (P1-P4)."""
    if not part:
        return  # P6
    call = part.get("functionCall")
    if isinstance(call, dict):  # P7
        _function_call(state, cand, part, call, i, j, p, deltas)
    else:
        _add_part(cand, part, deltas)


def _render_candidate(cand: _CandidateState, *, fresh: bool) -> Candidate:
    """Render one candidate; ``fresh`` copies what the state keeps (for snapshots)."""
    keep = _render_json if fresh else _same
    parts: list[Part] = []
    text: list[str] = []
    thought_text: list[str] = []
    calls: list[JSONObject] = []
    unfinished: list[JSONObject] = []
    for slot in cand.slots:
        if isinstance(slot, _TextRun):
            s = slot.text()
            parts.append({"text": s, "thought": True} if slot.thought else {"text": s})
            (thought_text if slot.thought else text).append(s)
        elif isinstance(slot, _KeptPart):
            parts.append(keep(slot.part))
            if slot.text is not None:
                (thought_text if slot.thought else text).append(slot.text)
            if slot.is_call:
                calls.append(_complete_call_info(slot.part["functionCall"]))
        elif slot.name is not None:  # a nameless call is left out (C6, C12)
            call: JSONObject = {"id": slot.id} if slot.id is not None else {}
            call["name"] = slot.name
            call["args"] = _render_json(slot.args)
            part: Part = {"functionCall": call}
            if slot.signature is not None:
                part["thoughtSignature"] = slot.signature
            if slot.finished:
                calls.append(_streamed_call_info(slot))
            else:  # C13: shown with its arguments so far, never among the calls to run
                info = {"id": slot.id, "name": slot.name, "args": call["args"]}
                unfinished.append({**info, "part": len(parts)})
            parts.append(part)
    return Candidate(
        cand.index,
        parts,
        "".join(text),
        "".join(thought_text),
        calls,
        cand.finish_reason,
        cand.finish_message,
        keep(cand.metadata),
        unfinished,
    )
