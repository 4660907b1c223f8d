"""fastagg under pydantic-ai (extra ``fastagg[pydantic-ai]``; rules Y1-Y7 in spec/integrations.md).

:class:`GoogleModel` is ``pydantic_ai.models.google.GoogleModel`` whose
streamed responses go through fastagg: pydantic-ai maps every chunk's
function-call part to a tool call of its own, so a call whose arguments
stream as ``partialArgs`` (or two calls whose fragments interleave) reaches
the tools as fragments. Here each call reaches pydantic-ai once, whole,
when the model finishes it, with its signature; text and thoughts stream as
before. A stream that ends inside a call raises pydantic-ai's own model
error (Y4), so no tool runs with cut-off arguments::

    from fastagg.integrations.pydantic_ai import GoogleModel
    agent = Agent(GoogleModel("gemini-3-flash-preview", provider=provider), tools=[...])

pydantic-ai has no public hook for the stream, so this overrides the private
``GoogleModel._process_streamed_response``, passing through whatever
parameters the installed release gives it (Y3), and warns on a release
outside the tested range (Y5).
"""

from __future__ import annotations

import inspect
import json
import re
import warnings
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from .._fastagg import AggregatedResponse, CallEnd, CallStart, StreamAggregator
from .._genai_convert import require_genai
from .._json import FunctionCall, Part

types = require_genai("fastagg.integrations.pydantic_ai")
try:
    from pydantic_ai import __version__ as PYDANTIC_AI_VERSION
    from pydantic_ai import exceptions as _exceptions
    from pydantic_ai.models import google as _google
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fastagg.integrations.pydantic_ai needs pydantic-ai with Google support, which is not "
        "installed: pip install 'fastagg[pydantic-ai]'"
    ) from exc

if TYPE_CHECKING:
    from google.genai.types import GenerateContentResponse

__all__ = ["TESTED_VERSIONS", "GoogleModel", "UntestedVersionWarning", "whole_calls"]

TESTED_VERSIONS = ("2.68", "2.78")
"""The oldest and the newest pydantic-ai release (major.minor) CI runs; the ones between are
supported too (Y5)."""
_HOOK = "_process_streamed_response"


class UntestedVersionWarning(UserWarning):
    """The installed pydantic-ai is outside :data:`TESTED_VERSIONS`; its hook is used anyway (Y5)."""


def _minor(version: str) -> tuple[int, int] | None:
    """(major, minor) of a final release or a post-release; None for anything else."""
    found = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?(?:\.post\d+)?", version)
    return (int(found[1]), int(found[2])) if found else None


def _tested(version: str) -> bool:
    minor = _minor(version)
    low, high = (tuple(int(n) for n in v.split(".")) for v in TESTED_VERSIONS)
    return minor is not None and low <= minor <= high


def _tested_range() -> str:
    return " to ".join(TESTED_VERSIONS)


def _check_hook() -> None:
    """Y3: the parent's hook is a coroutine taking the response stream first; the rest passes."""
    hook = getattr(_google.GoogleModel, _HOOK, None)
    if hook is None:
        shape = "is gone"
    else:
        try:
            params = list(inspect.signature(hook).parameters.values())
        except (TypeError, ValueError):  # pragma: no cover - a builtin or odd callable
            params = []
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        if (
            inspect.iscoroutinefunction(hook)
            and len(params) >= 2
            and params[1].name == "response"
            and all(p.kind in positional for p in params[:2])
        ):
            return
        shape = (
            f"is ({', '.join(p.name for p in params)}), not a coroutine taking the response "
            "stream as its first argument"
        )
    raise RuntimeError(
        f"fastagg.integrations.pydantic_ai cannot work with pydantic-ai {PYDANTIC_AI_VERSION}: "
        f"its GoogleModel.{_HOOK} {shape}, so fastagg cannot see the Gemini stream. Install a "
        f"supported release (pip install 'fastagg[pydantic-ai]': pydantic-ai {_tested_range()}) "
        "or use pydantic_ai.models.google.GoogleModel without fastagg."
    )


def _check_version(untested_ok: bool) -> None:
    _check_hook()
    if not untested_ok and not _tested(PYDANTIC_AI_VERSION):
        warnings.warn(
            "fastagg.integrations.pydantic_ai was tested with pydantic-ai "
            f"{_tested_range()}, not {PYDANTIC_AI_VERSION}; its stream hook has a shape fastagg "
            "knows, so fastagg uses it. If tool calls go wrong, install a tested release: pip "
            "install 'fastagg[pydantic-ai]'. GoogleModel(..., untested_ok=True) silences this "
            "warning.",
            UntestedVersionWarning,
            stacklevel=3,
        )


class GoogleModel(_google.GoogleModel):  # type: ignore[misc, unused-ignore]
    """``pydantic_ai.models.google.GoogleModel`` with its streams aggregated by fastagg (Y1).

    Same constructor (plus ``untested_ok``, Y5) and behaviour; only what a
    streamed response yields differs: function calls arrive whole, and a
    stream that ends inside a call raises a model error (Y4). Non-streamed
    requests (``agent.run()``) are pydantic-ai's own: their calls come whole (Y7).
    """

    def __init__(self, *args: Any, untested_ok: bool = False, **kwargs: Any) -> None:
        _check_version(untested_ok)
        super().__init__(*args, **kwargs)

    async def _process_streamed_response(  # type: ignore[override, unused-ignore]
        self, response: AsyncIterator[GenerateContentResponse], *args: Any, **kwargs: Any
    ) -> Any:
        # Y3: 2.68 passes (response, model_request_parameters); 2.78 adds messages.
        return await super()._process_streamed_response(
            whole_calls(response, model_name=self.model_name), *args, **kwargs
        )


async def whole_calls(
    chunks: AsyncIterator[GenerateContentResponse], *, model_name: str = "gemini"
) -> AsyncGenerator[GenerateContentResponse, None]:
    """The SDK's chunks with function-call fragments replaced by whole calls (Y2, Y4).

    Each chunk keeps every other part, its finish reason, usage and metadata;
    its function-call parts are dropped, and the calls released on it are
    appended as whole parts (id, name, full args, signature) in their
    candidate. A call is released once the model finished it and every call
    before it in the turn is released, so the calls keep their order (the
    first one carries the step's signature). A stream that ends inside a
    call raises pydantic-ai's error for it (``model_name`` names the model
    there) after its last chunk, and that call is never yielded.
    """
    agg = StreamAggregator()
    emitted: set[tuple[int, int]] = set()
    open_slots: set[tuple[int, int]] = set()
    pending: list[CallEnd] = []
    try:
        async for chunk in chunks:
            for d in agg.feed_chunk(chunk):
                if isinstance(d, CallStart):
                    open_slots.add((d.candidate, d.index))
                elif isinstance(d, CallEnd):
                    open_slots.discard((d.candidate, d.index))
                    pending.append(d)
            ready = [
                end
                for end in pending
                if not any(c == end.candidate and k < end.index for c, k in open_slots)
            ]
            pending = [end for end in pending if end not in ready]
            ready.sort(key=lambda end: (end.candidate, end.index))
            yield _with_calls(chunk, _parts(agg, ready, emitted))
        # Finished calls still held back here wait behind a call that never got a name
        # (snapshot() leaves it out, close() drops it): release them now.
        pending.sort(key=lambda end: (end.candidate, end.index))
        rest = _parts(agg, pending, emitted)
        result = agg.close()
        if any(c.unfinished_calls for c in result.candidates):
            raise _cut_off_error(result, model_name)
        if rest:
            yield _with_calls(types.GenerateContentResponse(candidates=[]), rest)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


def _cut_off_error(result: AggregatedResponse, model_name: str) -> Exception:
    """Y4: pydantic-ai's own error for a response whose stream ended inside a call.

    Raised inside the stream, so pydantic-ai's FallbackModel and RetryOnModelErrors send the
    request again when no event reached the consumer yet (Y6).
    """
    candidate = next(c for c in result.candidates if c.unfinished_calls)
    entry: Any = candidate.unfinished_calls[0]
    # A part index, or (newer core) a dict that names it.
    fc = candidate.parts[entry["part"] if isinstance(entry, dict) else entry]["functionCall"]
    what = f"the function call {fc.get('name')} (id {fc.get('id')!r})"
    reason = candidate.finish_reason
    body = result.to_dict()
    error: Exception
    if reason is None:
        error = _exceptions.ModelConnectionError(
            model_name,
            f"The Gemini stream ended before the model finished {what}: its arguments are cut "
            "off, so it was not run. The request can be sent again as it was.",
            phase="read",
            body=body,
        )
    elif reason == "MAX_TOKENS":
        error = _exceptions.IncompleteToolCall(
            f"Gemini stopped at its output token limit (finish reason MAX_TOKENS) inside {what}: "
            "its arguments are cut off, so it was not run. Raise the max_tokens model setting, "
            "or ask for a shorter answer.",
            body=json.dumps(body, ensure_ascii=False),
        )
    else:
        # pydantic-ai 2.78 has an error for a response it cannot use; 2.68 only its base class.
        invalid = getattr(_exceptions, "ModelInvalidResponseError", _exceptions.ModelAPIError)
        error = invalid(
            model_name,
            f"Gemini finished its response (finish reason {reason}) without finishing {what}: "
            "its arguments may be cut off, so it was not run. Send the request again, or to "
            "another model.",
            body=body,
        )
    return error


def _parts(
    agg: StreamAggregator[AggregatedResponse], closed: list[CallEnd], emitted: set[tuple[int, int]]
) -> list[tuple[int, int, FunctionCall]]:
    if not closed:
        return []
    snapshot = agg.snapshot()
    by_index = {c.index: c for c in snapshot.candidates}
    out = []
    for end in closed:
        parts = by_index[end.candidate].parts
        # The slot index of the call; snapshot() leaves nameless open calls
        # out, so look the call up by its dict when the slot moved.
        part = parts[end.index] if end.index < len(parts) else None
        if part is None or not _is_call(part, end.call):
            part = next(p for p in parts if _is_call(p, end.call))
        emitted.add((end.candidate, end.index))
        out.append((end.candidate, end.index, part))
    return out


def _is_call(part: Part, call: FunctionCall) -> bool:
    fc = part.get("functionCall")
    return isinstance(fc, dict) and (fc.get("id"), fc.get("name"), fc.get("args", {})) == (
        call["id"],
        call["name"],
        call["args"],
    )


def _with_calls(
    chunk: GenerateContentResponse, calls: list[tuple[int, int, FunctionCall]]
) -> GenerateContentResponse:
    candidates = list(chunk.candidates or [])
    changed = False
    for n, candidate in enumerate(candidates):
        index = candidate.index or 0
        parts = list(candidate.content.parts or []) if candidate.content else []
        kept = [p for p in parts if p.function_call is None]
        added = [types.Part.model_validate(p) for c, _, p in calls if c == index]
        if len(kept) == len(parts) and not added:
            continue
        changed = True
        content = (
            candidate.content.model_copy(update={"parts": kept + added})
            if candidate.content is not None
            else types.Content(role="model", parts=added)
        )
        candidates[n] = candidate.model_copy(update={"content": content if content.parts else None})
    known = {c.index or 0 for c in candidates}
    for index in sorted({c for c, _, _ in calls} - known):
        changed = True
        added = [types.Part.model_validate(p) for c, _, p in calls if c == index]
        candidates.append(
            types.Candidate(index=index, content=types.Content(role="model", parts=added))
        )
    return chunk.model_copy(update={"candidates": candidates}) if changed else chunk
