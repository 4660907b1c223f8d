"""Merging what later events repeat (E3, E5, E9, E10, E15, E16): usage, top-level fields,
citations, log probabilities."""

from __future__ import annotations

import math

from ..._json import JSONObject, JSONValue
from ..diagnostics import _diagnostic
from .render import _json_identity, _same_json
from .state import _CandidateState, _TurnState

_CITATION_LISTS = ("citations", "citationSources")
# E3: the top-level fields kept last non-null, with the state attribute holding each.
_TOP_LEVEL = (
    ("modelVersion", "model_version"),
    ("responseId", "response_id"),
    ("createTime", "create_time"),
    ("promptFeedback", "prompt_feedback"),
    ("modelStatus", "model_status"),  # E15
)  # E17: every other top-level key is ignored
_LOGPROB_STEPS = ("chosenCandidates", "topCandidates")
_I64 = range(-(2**63), 2**63)


def _merge_usage(state: _TurnState, usage: JSONObject) -> None:
    """E3: running totals, merged key by key."""
    if state.usage is None:
        state.usage = {}
    for key, value in usage.items():
        if value is not None:
            state.usage[key] = value


def _set_top_level(state: _TurnState, event: JSONObject, i: int) -> None:
    """E3: every top-level field is the last non-null one."""
    for key, attr in _TOP_LEVEL:
        value = event.get(key)
        if value is not None:
            if attr == "response_id" and state.response_id is not None:
                _response_id_change(state, i, value)
            setattr(state, attr, value)


def _response_id_change(state: _TurnState, i: int, value: JSONValue) -> None:
    """E10: a body that switches responseId holds several responses; say so."""
    if not _same_json(state.response_id, value):
        state.warnings.append(
            _diagnostic("response_id_changed", event=i, kept_id=state.response_id, new_id=value)
        )


def _citations(state: _TurnState, cand: _CandidateState, value: JSONValue, i: int, j: int) -> None:
    """E9: citation lists concatenated without exact duplicates, other keys replaced."""
    if not isinstance(value, dict):
        state.shape(i, f"candidates[{j}].citationMetadata", "an object")
        return
    kept = cand.metadata.get("citationMetadata")
    if kept is None:
        kept = cand.metadata["citationMetadata"] = {}
    for key, item in value.items():
        if item is None:
            continue
        if key not in _CITATION_LISTS or not isinstance(item, list):
            kept[key] = item
            cand.citation_seen.pop(key, None)
            continue
        entries = kept.get(key)
        seen = cand.citation_seen.get(key)
        if not isinstance(entries, list) or seen is None:
            entries = kept[key] = []
            seen = cand.citation_seen[key] = set()
        for entry in item:
            identity = _json_identity(entry)  # E9a: an exact duplicate is found in O(1)
            if identity not in seen:
                seen.add(identity)
                entries.append(entry)


def _logprobs(cand: _CandidateState, value: JSONValue) -> None:
    """E16: each chunk's logprobsResult covers its own steps: lists joined, sums added."""
    kept = cand.metadata.get("logprobsResult")
    if not isinstance(value, dict) or not isinstance(kept, dict):
        # The lists are extended later: never the caller's own (feed_chunk()).
        cand.metadata["logprobsResult"] = (
            {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
            if isinstance(value, dict)
            else value
        )
        return
    for key, item in value.items():
        if item is None:
            continue
        old = kept.get(key)
        if key in _LOGPROB_STEPS and isinstance(old, list) and isinstance(item, list):
            old.extend(item)
        elif key == "logProbabilitySum" and _is_number(old) and _is_number(item):
            kept[key] = _add(old, item)  # type: ignore[arg-type]
        else:
            kept[key] = item


def _is_number(value: JSONValue) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _add(a: float, b: float) -> float:
    """E16: integers stay integers while the sum fits in 64 bits; otherwise floats."""
    if isinstance(a, int) and isinstance(b, int) and a in _I64 and b in _I64 and a + b in _I64:
        return a + b
    total = float(a) + float(b)
    return total if math.isfinite(total) else a
