"""What the aggregator hands out (D1, D2): the deltas, ``Candidate`` and ``AggregatedResponse``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from ... import _repr
from ..._genai_convert import to_genai
from ..._json import Content, JSONObject, JSONValue, Part
from .render import _render_json

if TYPE_CHECKING:
    from google.genai import types as genai_types

    from ...diagnostics import Diagnostic


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A non-empty text fragment of part ``index`` of candidate ``candidate``."""

    candidate: int
    index: int
    text: str
    thought: bool

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class CallStart:
    """A function call was first seen; ``name`` is None for a streamed call not yet named."""

    candidate: int
    index: int
    id: str | None
    name: str | None

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class ArgDelta:
    """A streamed argument was applied: a string fragment, a number, a bool or None."""

    candidate: int
    index: int
    json_path: str
    value: JSONValue

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class CallEnd:
    """A function call is complete; ``call`` is ``{"id", "name", "args"}``."""

    candidate: int
    index: int
    call: JSONObject

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class Finish:
    """A finish reason arrived for candidate ``candidate``."""

    candidate: int
    reason: str

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class StreamError:
    """An in-stream error object (E1), verbatim."""

    error: JSONValue

    __repr__ = _repr.record


Delta = TextDelta | CallStart | ArgDelta | CallEnd | Finish | StreamError


class Candidate:
    """One aggregated candidate (E4). Read-only."""

    __slots__ = (
        "_content",
        "_finish_message",
        "_finish_reason",
        "_function_calls",
        "_index",
        "_metadata",
        "_parts",
        "_text",
        "_thought_text",
        "_unfinished_calls",
    )

    def __init__(
        self,
        index: int,
        parts: list[Part],
        text: str,
        thought_text: str,
        function_calls: list[JSONObject],
        finish_reason: str | None,
        finish_message: str | None,
        metadata: JSONObject,
        unfinished_calls: list[JSONObject],
    ) -> None:
        self._index = index
        self._unfinished_calls = unfinished_calls
        self._parts = parts
        self._content: Content = {"role": "model", "parts": parts}
        self._text = text
        self._thought_text = thought_text
        self._function_calls = function_calls
        self._finish_reason = finish_reason
        self._finish_message = finish_message
        self._metadata = metadata

    @property
    def index(self) -> int:
        """The candidate's ``index``."""
        return self._index

    @property
    def parts(self) -> list[Part]:
        """The aggregated parts, REST camelCase, replayable as they are."""
        return self._parts

    @property
    def content(self) -> Content:
        """``{"role": "model", "parts": parts}``."""
        return self._content

    @property
    def text(self) -> str:
        """The non-thought text, joined in part order (P9)."""
        return self._text

    @property
    def thought_text(self) -> str:
        """The thought text, joined in part order (P9)."""
        return self._thought_text

    @property
    def function_calls(self) -> list[JSONObject]:
        """``[{"id", "name", "args"}]`` of the calls the model finished, in part order
        (C11, C13): the calls that may be run."""
        return self._function_calls

    @property
    def unfinished_calls(self) -> list[JSONObject]:
        """``[{"id", "name", "args", "part"}]`` of the streamed calls the model did not
        finish, in part order: arguments so far, ``part`` indexes ``parts`` (C13)."""
        return self._unfinished_calls

    @property
    def finish_reason(self) -> str | None:
        """The last non-empty ``finishReason``, raw."""
        return self._finish_reason

    @property
    def finish_message(self) -> str | None:
        """The last non-empty ``finishMessage``."""
        return self._finish_message

    @property
    def metadata(self) -> JSONObject:
        """Every other candidate key (E5, E9), in first-arrival order."""
        return self._metadata

    def _to_dict(self) -> JSONObject:
        out: JSONObject = {"content": self._content}
        if self._finish_reason is not None:
            out["finishReason"] = self._finish_reason
        if self._finish_message is not None:
            out["finishMessage"] = self._finish_message
        out.update(self._metadata)
        out["index"] = self._index
        return out

    def __repr__(self) -> str:
        return _repr.candidate(self)


class AggregatedResponse:
    """The aggregate of a stream (``snapshot()`` / ``close()``). Read-only.

    The flat accessors (``parts``, ``text`` …) refer to candidate 0.
    """

    __slots__ = (
        "_candidates",
        "_continuation_token",
        "_create_time",
        "_diagnostics",
        "_error",
        "_first",
        "_model_status",
        "_model_version",
        "_output_after_token",
        "_prompt_feedback",
        "_response_id",
        "_truncated",
        "_usage",
        "_warnings",
    )

    def __init__(
        self,
        candidates: list[Candidate],
        usage: JSONObject | None,
        model_version: JSONValue,
        response_id: JSONValue,
        create_time: JSONValue,
        prompt_feedback: JSONValue,
        model_status: JSONValue,
        error: JSONValue,
        continuation_token: str | None,
        output_after_token: bool,
        truncated: bool,
        diagnostics: tuple[Diagnostic, ...],
    ) -> None:
        self._candidates = candidates
        self._first = next((c for c in candidates if c.index == 0), None)
        self._usage = usage
        self._model_version = model_version
        self._response_id = response_id
        self._create_time = create_time
        self._prompt_feedback = prompt_feedback
        self._model_status = model_status
        self._error = error
        self._continuation_token = continuation_token
        self._output_after_token = output_after_token
        self._truncated = truncated
        self._diagnostics = diagnostics
        self._warnings = [d.message for d in diagnostics]  # X3

    @property
    def parts(self) -> list[Part]:
        """Parts of candidate 0, REST camelCase, replayable as they are."""
        return self._first.parts if self._first is not None else []

    @property
    def content(self) -> Content:
        """``{"role": "model", "parts": parts}`` of candidate 0."""
        return self._first.content if self._first is not None else {"role": "model", "parts": []}

    @property
    def text(self) -> str:
        """Non-thought text of candidate 0."""
        return self._first.text if self._first is not None else ""

    @property
    def thought_text(self) -> str:
        """Thought text of candidate 0."""
        return self._first.thought_text if self._first is not None else ""

    @property
    def function_calls(self) -> list[JSONObject]:
        """The calls of candidate 0 the model finished, in part order: ``{"id", "name",
        "args"}`` (C13: the calls that may be run)."""
        return self._first.function_calls if self._first is not None else []

    @property
    def unfinished_calls(self) -> list[JSONObject]:
        """Candidate 0's streamed calls the model did not finish, still open
        (``snapshot()``) or flushed by ``close()``: ``{"id", "name", "args", "part"}``
        with the arguments so far and ``part`` the index into ``parts`` (C13)."""
        return self._first.unfinished_calls if self._first is not None else []

    @property
    def finish_reason(self) -> str | None:
        """Raw finish reason of candidate 0."""
        return self._first.finish_reason if self._first is not None else None

    @property
    def finish_message(self) -> str | None:
        """Finish message of candidate 0."""
        return self._first.finish_message if self._first is not None else None

    @property
    def usage(self) -> JSONObject | None:
        """Merged ``usageMetadata`` (E3)."""
        return self._usage

    @property
    def model_version(self) -> JSONValue:
        """Last non-null ``modelVersion``."""
        return self._model_version

    @property
    def response_id(self) -> JSONValue:
        """Last non-null ``responseId``."""
        return self._response_id

    @property
    def prompt_feedback(self) -> JSONValue:
        """Last non-null ``promptFeedback``."""
        return self._prompt_feedback

    @property
    def model_status(self) -> JSONValue:
        """Last non-null ``modelStatus`` (E15): ``modelStage``, ``retirementTime``, ``message``."""
        return self._model_status

    @property
    def error(self) -> JSONValue:
        """The last in-stream error object, verbatim (E1, E8)."""
        return self._error

    @property
    def continuation_token(self) -> str | None:
        """The latest non-empty ``continuationToken`` of candidate 0 (long decode), or None
        (E14)."""
        return self._continuation_token

    @property
    def output_after_token(self) -> bool:
        """Candidate 0 got output in an event after the latest ``continuationToken`` (any
        output, with none): the token does not cover it (E14)."""
        return self._output_after_token

    @property
    def complete(self) -> bool:
        """Candidate 0 has a finish reason and no error was recorded (E6)."""
        # RULE E6: candidate 0 finished and no error was recorded.
        return self._error is None and self.finish_reason is not None

    @property
    def truncated(self) -> bool:
        """The stream ended inside an incomplete event (F6)."""
        return self._truncated

    @property
    def candidates(self) -> list[Candidate]:
        """Every candidate, in index order."""
        return self._candidates

    @property
    def warnings(self) -> list[str]:
        """Non-fatal anomalies, in the order they were found: the diagnostics' messages."""
        return self._warnings

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The warnings, structured (spec/diagnostics.md X3), in the same order."""
        return self._diagnostics

    def to_dict(self) -> JSONObject:
        """A ``GenerateContentResponse``-shaped dict of the aggregate (D2), fresh."""
        out: JSONObject = _render_json(self._dict())
        return out

    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""
        return orjson.dumps(self._dict())

    def _dict(self) -> JSONObject:
        """The D2 dict, sharing this result's containers."""
        out: JSONObject = {"candidates": [c._to_dict() for c in self._candidates]}
        for key, value in (
            ("usageMetadata", self._usage),
            ("modelVersion", self._model_version),
            ("responseId", self._response_id),
            ("createTime", self._create_time),
            ("promptFeedback", self._prompt_feedback),
            ("modelStatus", self._model_status),
            ("error", self._error),
        ):
            if value is not None:
                out[key] = value
        return out

    def to_genai(self) -> genai_types.GenerateContentResponse:
        """The aggregate as a google-genai ``GenerateContentResponse`` (needs google-genai).

        What the installed SDK cannot hold (the in-stream ``error``, keys it
        does not know) is left out and named in a ``GenaiConversionWarning``
        (integrations G1).
        """
        return to_genai(self.to_dict(), stacklevel=3)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AggregatedResponse):
            return NotImplemented
        return (self.to_json(), self._warnings, self._truncated) == (
            other.to_json(),
            other._warnings,
            other._truncated,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return _repr.response(self)
