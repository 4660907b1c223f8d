"""fastagg under pydantic-ai (extra ``fastagg[pydantic-ai]``; rules Y1-Y3 in spec/integrations.md).

:class:`GoogleModel` is ``pydantic_ai.models.google.GoogleModel`` whose
streamed responses go through fastagg: pydantic-ai maps every chunk's
function-call part to a tool call of its own, so a call whose arguments
stream as ``partialArgs`` (or two calls whose fragments interleave) reaches
the tools as fragments. Here each call reaches pydantic-ai once, whole,
when it closes, with its signature; text and thoughts stream as before::

    from fastagg.integrations.pydantic_ai import GoogleModel
    agent = Agent(GoogleModel("gemini-3-flash-preview", provider=provider), tools=[...])

pydantic-ai has no public hook for the stream, so this overrides the private
``GoogleModel._process_streamed_response`` and refuses pydantic-ai releases
outside :data:`TESTED_VERSIONS` (Y3).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from .._fastagg import AggregatedResponse, CallEnd, CallStart, StreamAggregator
from .._genai_convert import require_genai
from .._json import FunctionCall, Part

types = require_genai("fastagg.integrations.pydantic_ai")
try:
    from pydantic_ai import __version__ as PYDANTIC_AI_VERSION
    from pydantic_ai.models import google as _google
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fastagg.integrations.pydantic_ai needs pydantic-ai with Google support, which is not "
        "installed: pip install 'fastagg[pydantic-ai]'"
    ) from exc

if TYPE_CHECKING:
    from google.genai.types import GenerateContentResponse

__all__ = ["TESTED_VERSIONS", "GoogleModel"]

TESTED_VERSIONS = ("2.68",)
_HOOK = "_process_streamed_response"


def _check_version(untested_ok: bool) -> None:
    hook = getattr(_google.GoogleModel, _HOOK, None)
    if hook is None or list(inspect.signature(hook).parameters) != [
        "self",
        "response",
        "model_request_parameters",
    ]:
        raise RuntimeError(
            f"pydantic-ai {PYDANTIC_AI_VERSION}: GoogleModel.{_HOOK}(response, "
            "model_request_parameters) is gone or changed, so fastagg cannot see the stream "
            f"(tested with pydantic-ai {', '.join(v + '.x' for v in TESTED_VERSIONS)})"
        )
    if not untested_ok and not PYDANTIC_AI_VERSION.startswith(
        tuple(v + "." for v in TESTED_VERSIONS)
    ):
        raise RuntimeError(
            "fastagg.integrations.pydantic_ai was tested with pydantic-ai "
            f"{', '.join(v + '.x' for v in TESTED_VERSIONS)}, not {PYDANTIC_AI_VERSION}; pin a "
            "tested release or pass GoogleModel(..., untested_ok=True)"
        )


class GoogleModel(_google.GoogleModel):  # type: ignore[misc, unused-ignore]
    """``pydantic_ai.models.google.GoogleModel`` with its streams aggregated by fastagg (Y1).

    Same constructor (plus ``untested_ok``, Y3) and behaviour; only what a
    streamed response yields differs: function calls arrive whole.
    """

    def __init__(self, *args: Any, untested_ok: bool = False, **kwargs: Any) -> None:
        _check_version(untested_ok)
        super().__init__(*args, **kwargs)

    async def _process_streamed_response(  # type: ignore[override, unused-ignore]
        self, response: AsyncIterator[GenerateContentResponse], model_request_parameters: Any
    ) -> Any:
        return await super()._process_streamed_response(
            whole_calls(response), model_request_parameters
        )


async def whole_calls(
    chunks: AsyncIterator[GenerateContentResponse],
) -> AsyncGenerator[GenerateContentResponse, None]:
    """The SDK's chunks with function-call fragments replaced by whole calls (Y2).

    Each chunk keeps every other part, its finish reason, usage and metadata;
    its function-call parts are dropped, and the calls released on it are
    appended as whole parts (id, name, full args, signature) in their
    candidate. A closed call is released once every call before it in the
    turn is, so the calls keep their order (the first one carries the
    step's signature). Calls still open when the stream ends come on one
    last chunk.
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
        result = agg.close()
        rest = [
            (c.index, k, part)
            for c in result.candidates
            for k, part in enumerate(c.parts)
            if "functionCall" in part and (c.index, k) not in emitted
        ]
        if rest:
            yield _with_calls(types.GenerateContentResponse(candidates=[]), rest)
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


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
