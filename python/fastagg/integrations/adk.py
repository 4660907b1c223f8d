"""fastagg under Google ADK (extra ``fastagg[adk]``; rules A1-A7 in spec/integrations.md).

One line makes ADK's ``Gemini`` model aggregate its SSE streams with fastagg::

    from fastagg.integrations import adk; adk.install()

:class:`StreamingResponseAggregator` has the interface of
``google.adk.utils.streaming_utils.StreamingResponseAggregator``: each chunk
comes back from :meth:`~StreamingResponseAggregator.process_response` as a
partial ``LlmResponse`` (ADK shows partial events and never runs their
calls), each of its function-call parts carrying the id of the call it belongs
to, and :meth:`~StreamingResponseAggregator.close` gives the final one, built
from fastagg's aggregate: streamed arguments assembled per call id, signed
parts never merged, signatures byte-exact. A stream that ended inside a call
closes as ADK's retryable ``MALFORMED_FUNCTION_CALL`` error, never as a call.
"""

from __future__ import annotations

import re
import uuid
from collections import deque
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from .._fastagg import ArgDelta, CallStart, StreamAggregator
from .._genai_convert import require_genai

types = require_genai("fastagg.integrations.adk")
try:
    from google.adk import __version__ as ADK_VERSION
    from google.adk.flows.llm_flows import functions as _adk_functions
    from google.adk.models import google_llm
    from google.adk.models.llm_response import LlmResponse
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fastagg.integrations.adk needs Google ADK, which is not installed: "
        "pip install 'fastagg[adk]'"
    ) from exc

if TYPE_CHECKING:
    from google.genai.types import FunctionCall, GenerateContentResponse, Part

    from .._fastagg import AggregatedResponse

__all__ = ["TESTED_VERSIONS", "StreamingResponseAggregator", "install", "uninstall"]

# A4: install() replaces a module attribute of ADK (no public hook exists), so
# it refuses ADK releases outside the tested range: from the lowest release to
# the newest release line, each tested in CI (pyproject.toml's `adk` extra).
TESTED_VERSIONS = ("2.7.1", "2.13.0")

# The name google_llm looks up for every streamed request.
_ATTR = "StreamingResponseAggregator"
_ORIGINAL = getattr(google_llm, _ATTR, None)

# A6: the prefix of the ids ADK gives calls the model sent without one; ADK
# strips ids with it before the next request.
_CLIENT_ID_PREFIX = "adk-"
# A5: the error ADK reports for a call the model got wrong, and the one its
# ReflectAndRetryModelPlugin retries by default.
_MALFORMED = types.FinishReason.MALFORMED_FUNCTION_CALL


def _client_call_id() -> str:
    """A new ADK client call id, from ADK's own generator (so its patches apply)."""
    generate = getattr(_adk_functions, "generate_client_function_call_id", None)
    if generate is not None:
        return str(generate())
    return f"{_CLIENT_ID_PREFIX}{uuid.uuid4()}"  # pragma: no cover - older or newer ADK


def _has_value(partial_arg: Any) -> bool:
    """Whether a partial arg carries a value (aggregation C9: else it changes nothing)."""
    return any(
        getattr(partial_arg, key, None) is not None
        for key in ("string_value", "number_value", "bool_value", "null_value")
    )


def _is_streamed(fc: FunctionCall) -> bool:
    """Aggregation C1, on the SDK's view of the part: a fragment of a streamed call."""
    return (
        bool(fc.partial_args) or fc.will_continue is not None or (fc.name, fc.args) == (None, None)
    )


class _CallIds:
    """The call each function-call part of a chunk belongs to, for the ids ADK shows (A6).

    The core reports where a chunk's calls went (``CallStart`` for a new call,
    ``ArgDelta`` for an applied fragment, each with the call's part slot); a
    fragment that carries no value (an end marker) belongs to the most recently
    updated open call (aggregation C2.4).
    """

    __slots__ = ("_by_id", "_ids", "_named", "_open")

    def __init__(self) -> None:
        self._open: dict[int, None] = {}  # open streamed calls' slots, most recent last
        self._by_id: dict[str, int] = {}  # the model's id -> its open call's slot
        self._ids: dict[int, str] = {}  # slot -> the call's id (the model's, or ADK's)
        self._named: set[int] = set()  # slots of calls that have a name

    def follow(self, parts: list[Part], deltas: list[Any]) -> None:
        """Give each id-less function-call part of ``parts`` its call's id, in place."""
        starts = deque(d.index for d in deltas if type(d) is CallStart)
        applied = deque(d.index for d in deltas if type(d) is ArgDelta)
        for part in parts:
            fc = part.function_call
            if fc is None:
                continue
            if not _is_streamed(fc):
                if isinstance(fc.name, str) and starts:  # C15: a nameless one is left out
                    self._start(starts.popleft(), fc)
                continue
            slot = self._route(fc, starts, applied)
            if slot is None:
                continue
            values = sum(1 for arg in fc.partial_args or () if _has_value(arg))
            while values and applied and applied[0] == slot:
                applied.popleft()
                values -= 1
            if fc.id is None and slot in self._ids:
                fc.id = self._ids[slot]
            if fc.will_continue is not True:  # C6: the model closed the call
                self._open.pop(slot, None)
                call_id = self._ids.get(slot)
                if call_id is not None and self._by_id.get(call_id) == slot:
                    del self._by_id[call_id]

    def _start(self, slot: int, fc: FunctionCall) -> None:
        if fc.id is None:
            fc.id = _client_call_id()
        self._ids[slot] = fc.id
        if fc.name is not None:
            self._named.add(slot)

    def _route(self, fc: FunctionCall, starts: deque[int], applied: deque[int]) -> int | None:
        """Aggregation C2 as the core applied it: the slot of the call ``fc`` belongs to."""
        if fc.id is not None:
            slot = self._by_id.get(fc.id)
            new = slot is None
        elif fc.name is not None:
            slot, new = None, True
        elif not self._open:
            if not fc.partial_args:
                return None  # C2.4: an end marker with no open call is ignored
            slot, new = None, True
        elif applied and any(_has_value(arg) for arg in fc.partial_args or ()):
            slot, new = applied[0], False
        else:
            slot, new = next(reversed(self._open)), False
        if new:
            if not starts:
                return None  # out of step with the core: leave the part as it came
            slot = starts.popleft()
            if fc.id is not None:
                self._by_id[fc.id] = slot
            self._start(slot, fc)
        if slot is None:  # pragma: no cover - every branch above sets it
            return None
        self._open.pop(slot, None)
        self._open[slot] = None
        if fc.name is not None:
            self._named.add(slot)
        return slot

    def final_ids(self) -> list[str | None]:
        """The ids of the calls the final content holds, in part order (nameless ones left out)."""
        return [self._ids.get(slot) for slot in sorted(self._named)]


class StreamingResponseAggregator:
    """Drop-in for ADK's ``StreamingResponseAggregator`` on fastagg's Rust core (A1, A2)."""

    def __init__(self) -> None:
        self._agg = StreamAggregator(deltas="display")
        self._calls = _CallIds()
        self._seen = False

    async def process_response(
        self, response: GenerateContentResponse
    ) -> AsyncGenerator[LlmResponse, None]:
        """Feed one chunk; yield it as a partial ``LlmResponse`` (A1) with call ids (A6)."""
        deltas = self._agg.feed_chunk(response)
        self._seen = True
        partial = LlmResponse.create(response)
        if partial.content is not None and partial.content.parts:
            self._calls.follow(partial.content.parts, deltas)
        partial.partial = True
        yield partial

    def close(self) -> LlmResponse | None:
        """The aggregated, non-partial ``LlmResponse``; None when no chunk came (A2, A5)."""
        if not self._seen:
            return None
        result = self._agg.close()
        response = result.to_genai()
        candidate = response.candidates[0] if response.candidates else None
        finish_reason = candidate.finish_reason if candidate else None
        error_code: Any = None
        error_message = None
        if finish_reason is not None and finish_reason != types.FinishReason.STOP:
            error_code = finish_reason
            error_message = candidate.finish_message if candidate else None
        elif candidate is None and response.prompt_feedback is not None:
            error_code = response.prompt_feedback.block_reason
            error_message = response.prompt_feedback.block_reason_message
        content = candidate.content if candidate is not None else None
        custom_metadata = None
        if result.unfinished_calls:
            content = None
            unfinished = _unfinished(result)
            error_code = finish_reason = _MALFORMED
            error_message = _cut_off_message(unfinished, result.finish_reason)
            custom_metadata = {
                "fastagg_partial_response": result.to_dict(),
                "fastagg_unfinished_calls": unfinished,
            }
        elif content is not None and content.parts:
            content.parts = self._final_parts(content.parts)
        return LlmResponse(
            content=content if content is not None and content.parts else None,
            grounding_metadata=candidate.grounding_metadata if candidate else None,
            citation_metadata=candidate.citation_metadata if candidate else None,
            error_code=error_code,
            error_message=error_message,
            custom_metadata=custom_metadata,
            usage_metadata=response.usage_metadata,
            finish_reason=finish_reason,
            partial=False,
            model_version=response.model_version,
        )

    def _final_parts(self, parts: list[Part]) -> list[Part]:
        """The ids of the partial events on the final calls (A6); a repeated id once (A7)."""
        calls = [part.function_call for part in parts if part.function_call is not None]
        ids = self._calls.final_ids()
        if len(ids) == len(calls):
            for fc, call_id in zip(calls, ids, strict=True):
                if fc.id is None and call_id is not None:
                    fc.id = call_id
        kept: list[Part] = []
        seen: set[str] = set()
        for part in parts:
            call_id = part.function_call.id if part.function_call is not None else None
            if call_id and not call_id.startswith(_CLIENT_ID_PREFIX):
                if call_id in seen:
                    continue
                seen.add(call_id)
            kept.append(part)
        return kept


def _unfinished(result: AggregatedResponse) -> list[dict[str, Any]]:
    """``[{"id", "name", "args"}]`` of the calls the model did not finish (C13)."""
    return [{key: call[key] for key in ("id", "name", "args")} for call in result.unfinished_calls]


def _cut_off_message(calls: list[dict[str, Any]], finish_reason: str | None) -> str:
    """A5: what happened, and what to do."""
    names = ", ".join(
        repr(call["name"]) + (f" (id {call['id']!r})" if call["id"] is not None else "")
        for call in calls
    )
    which = "the function call" if len(calls) == 1 else "the function calls"
    ended = (
        "without a finish reason"
        if finish_reason is None
        else f"with finish reason {finish_reason}"
    )
    return (
        f"The model's response ended inside {which} {names} {ended}: its arguments were cut "
        "off, so no tool was run. This is reported as MALFORMED_FUNCTION_CALL, a retryable "
        "model error: send the request again (google.adk.plugins.ReflectAndRetryModelPlugin "
        "retries it automatically). The partial response is in "
        "custom_metadata['fastagg_partial_response']."
    )


def _release(version: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` of a release string such as ``2.13.0`` or ``2.14.0rc1``."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return (int(match[1]), int(match[2]), int(match[3] or 0)) if match else None


def _supported(version: str) -> bool:
    """A4: from the lowest tested release to the newest tested release line, both included."""
    found = _release(version)
    low, high = _release(TESTED_VERSIONS[0]), _release(TESTED_VERSIONS[-1])
    if found is None or low is None or high is None:
        return False
    return low <= found and found[:2] <= high[:2]


def install(*, untested_ok: bool = False) -> None:
    """Make ADK's ``Gemini`` model aggregate its streams with fastagg (A3).

    Call it once, before running agents. Raises ``RuntimeError`` on an ADK
    release outside :data:`TESTED_VERSIONS` (lowest to newest) unless
    ``untested_ok``, and when ADK no longer has the attribute it replaces.
    """
    newest = ".".join(TESTED_VERSIONS[-1].split(".")[:2])
    tested = f"{TESTED_VERSIONS[0]} to {newest}.x"
    if _ORIGINAL is None:
        raise RuntimeError(
            f"google-adk {ADK_VERSION} has no google.adk.models.google_llm."
            "StreamingResponseAggregator; fastagg.integrations.adk cannot install itself "
            f"(tested with google-adk {tested})"
        )
    if not untested_ok and not _supported(ADK_VERSION):
        raise RuntimeError(
            f"fastagg.integrations.adk was tested with google-adk {tested}, not "
            f"{ADK_VERSION}; pin a tested release or call install(untested_ok=True)"
        )
    setattr(google_llm, _ATTR, StreamingResponseAggregator)


def uninstall() -> None:
    """Give ADK its own aggregator back."""
    if _ORIGINAL is not None:
        setattr(google_llm, _ATTR, _ORIGINAL)
