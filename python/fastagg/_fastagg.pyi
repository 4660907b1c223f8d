"""Type stubs of the Rust extension module ``fastagg._fastagg``.

Rules: ``spec/contract/aggregation.md``, ``spec/aggregation.md``; API: ``spec/contract/api.md``.
"""

from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeAlias, TypeVar, final, overload

from google.genai.types import GenerateContentResponse
from typing_extensions import Self

from .diagnostics import Diagnostic

__all__ = [
    "AggregatedResponse",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Finish",
    "InteractionResponse",
    "SseDecoder",
    "SseEvent",
    "StreamAggregator",
    "StreamError",
    "TextDelta",
]

@final
class TextDelta:
    """A text fragment (thought or answer) of candidate ``candidate``, part ``index``."""

    __match_args__ = ("candidate", "index", "text", "thought")
    candidate: int
    index: int
    text: str
    thought: bool
    def __new__(cls, candidate: int, index: int, text: str, thought: bool) -> Self: ...

@final
class CallStart:
    """A function call was first seen at part ``index``."""

    __match_args__ = ("candidate", "index", "id", "name")
    candidate: int
    index: int
    id: str | None
    name: str | None
    def __new__(cls, candidate: int, index: int, id: str | None, name: str | None) -> Self: ...

@final
class ArgDelta:
    """A streamed argument fragment was applied at ``json_path``."""

    __match_args__ = ("candidate", "index", "json_path", "value")
    candidate: int
    index: int
    json_path: str
    value: Any
    def __new__(cls, candidate: int, index: int, json_path: str, value: Any) -> Self: ...

@final
class CallEnd:
    """A function call is complete: ``call`` is ``{"id", "name", "args"}``."""

    __match_args__ = ("candidate", "index", "call")
    candidate: int
    index: int
    call: dict[str, Any]
    def __new__(cls, candidate: int, index: int, call: dict[str, Any]) -> Self: ...

@final
class Finish:
    """A finish reason arrived for candidate ``candidate``."""

    __match_args__ = ("candidate", "reason")
    candidate: int
    reason: str
    def __new__(cls, candidate: int, reason: str) -> Self: ...

@final
class StreamError:
    """An error object arrived inside the stream (kept verbatim)."""

    __match_args__ = ("error",)
    error: Any
    def __new__(cls, error: Any) -> Self: ...

_Delta: TypeAlias = TextDelta | CallStart | ArgDelta | CallEnd | Finish | StreamError

@final
class Candidate:
    """One candidate of an ``AggregatedResponse``."""

    @property
    def index(self) -> int:
        """The candidate's ``index``."""
    @property
    def parts(self) -> list[dict[str, Any]]:
        """Parts of this candidate, REST camelCase, replayable as-is."""
    @property
    def content(self) -> dict[str, Any]:
        """``{"role": "model", "parts": parts}``."""
    @property
    def text(self) -> str:
        """Non-thought text of this candidate."""
    @property
    def thought_text(self) -> str:
        """Thought text of this candidate."""
    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args"}]`` of the calls the model finished, in part order: the
        calls that may be run (C13)."""
    @property
    def unfinished_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args", "part"}]`` of the streamed calls the model did not
        finish, in part order: arguments so far, ``part`` indexes ``parts`` (C13)."""
    @property
    def finish_reason(self) -> str | None:
        """Raw finish reason of this candidate, or None."""
    @property
    def finish_message(self) -> str | None:
        """Finish message of this candidate, or None."""
    @property
    def metadata(self) -> dict[str, Any]:
        """The other candidate keys (E5), last non-null wins."""

@final
class AggregatedResponse:
    """The aggregated model turn (read-only). Flat accessors describe candidate 0."""

    @property
    def parts(self) -> list[dict[str, Any]]:
        """Parts of candidate 0, REST camelCase, replayable as-is."""
    @property
    def content(self) -> dict[str, Any]:
        """``{"role": "model", "parts": parts}``: append it to the history as it is."""
    @property
    def text(self) -> str:
        """Non-thought text of candidate 0."""
    @property
    def thought_text(self) -> str:
        """Thought text of candidate 0."""
    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args"}]`` of the calls of candidate 0 the model finished, in part
        order: the calls that may be run (C13)."""
    @property
    def unfinished_calls(self) -> list[dict[str, Any]]:
        """Candidate 0's streamed calls the model did not finish, still open (``snapshot()``)
        or flushed by ``close()``: ``[{"id", "name", "args", "part"}]`` with the arguments so
        far and ``part`` the index into ``parts`` (C13). Never run them."""
    @property
    def finish_reason(self) -> str | None:
        """Raw finish reason of candidate 0 (e.g. ``"STOP"``), or None."""
    @property
    def finish_message(self) -> str | None:
        """Finish message of candidate 0, or None."""
    @property
    def usage(self) -> dict[str, Any] | None:
        """Merged ``usageMetadata`` (camelCase), or None."""
    @property
    def model_version(self) -> str | None:
        """``modelVersion`` (last non-null), or None."""
    @property
    def response_id(self) -> str | None:
        """``responseId`` (last non-null), or None."""
    @property
    def prompt_feedback(self) -> dict[str, Any] | None:
        """``promptFeedback`` (last non-null), or None."""
    @property
    def model_status(self) -> dict[str, Any] | None:
        """``modelStatus`` (last non-null: ``modelStage``, ``retirementTime``, ``message``),
        or None (E15)."""
    @property
    def error(self) -> dict[str, Any] | None:
        """The in-stream error object, verbatim, or None."""
    @property
    def continuation_token(self) -> str | None:
        """The latest non-empty ``continuationToken`` of candidate 0 (long decode), or None
        (E14)."""
    @property
    def output_after_token(self) -> bool:
        """Candidate 0 got output in an event after the latest ``continuationToken`` (any
        output, with none): the token does not cover it (E14)."""
    @property
    def complete(self) -> bool:
        """Candidate 0 has a finish reason and no error was recorded (E6)."""
    @property
    def truncated(self) -> bool:
        """An incomplete final event was dropped (F6)."""
    @property
    def candidates(self) -> list[Candidate]:
        """Every candidate, in index order."""
    @property
    def warnings(self) -> list[str]:
        """Non-fatal anomalies, in order (their texts: ``spec/aggregation.md``)."""
    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The warnings as structured diagnostics, in the same order (spec/diagnostics.md X3)."""
    def to_dict(self) -> dict[str, Any]:
        """A GenerateContentResponse-shaped dict of the aggregate (fresh objects)."""
    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""
    def to_genai(self) -> GenerateContentResponse:
        """The aggregate as a ``google.genai.types.GenerateContentResponse`` (needs the
        ``fastagg[genai]`` extra); what the SDK cannot hold is reported by a warning (G1)."""

@final
class InteractionResponse:
    """The aggregated interaction of ``StreamAggregator(api="interactions")`` (read-only).

    Rules: ``spec/interactions.md`` (I18).
    """

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The model's steps in index order, ready to resend in stateless mode."""
    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args"}]`` of the ``function_call`` steps the model finished,
        index order: the calls that may be run (C13)."""
    @property
    def interaction_id(self) -> str | None:
        """The interaction id (from ``interaction.created``), or None."""
    @property
    def status(self) -> str | None:
        """The latest status (``completed``, ``requires_action``, ...), or None."""
    @property
    def last_event_id(self) -> str | None:
        """The latest ``event_id``, to resume the stream from; or None."""
    @property
    def continuation_token(self) -> str | None:
        """The latest ``continuation_token`` (long decode), or None."""
    @property
    def output_after_token(self) -> bool:
        """A step event came after the latest ``continuation_token`` (any step event, with
        none): the token does not cover it (E14)."""
    @property
    def interaction(self) -> dict[str, Any]:
        """The ``interaction`` objects of created/completed, merged key by key."""
    @property
    def usage(self) -> dict[str, Any] | None:
        """The latest usage object (never summed), or None."""
    @property
    def error(self) -> Any:
        """The in-stream error object, verbatim, or None."""
    @property
    def complete(self) -> bool:
        """``interaction.completed`` arrived and no error was recorded."""
    @property
    def done(self) -> bool:
        """The ``[DONE]`` sentinel arrived."""
    @property
    def truncated(self) -> bool:
        """An incomplete final event was dropped."""
    @property
    def warnings(self) -> list[str]:
        """Non-fatal anomalies, in order (texts: spec/interactions.md)."""
    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The warnings as structured diagnostics, in the same order (spec/diagnostics.md X3)."""
    @property
    def unfinished_calls(self) -> list[dict[str, Any]]:
        """``[{"id", "name", "args", "step"}]`` of the call steps the model did not finish or
        whose arguments did not parse (C13, I16, I17), index order. Never run them."""
    @property
    def text(self) -> str:
        """Text of the ``model_output`` steps."""
    @property
    def thought_text(self) -> str:
        """Thought-summary text of the ``thought`` steps."""
    def to_dict(self) -> dict[str, Any]:
        """``{"id"?, "status"?, "steps", "usage"?, "error"?}`` (fresh objects)."""
    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""

_Result = TypeVar("_Result", AggregatedResponse, InteractionResponse)

@final
class StreamAggregator(Generic[_Result]):
    """Aggregates the raw body of a Gemini ``streamGenerateContent`` response.

    Feed the body bytes in any split with ``feed()``, then ``close()`` for the
    ``AggregatedResponse``. Options (keyword-only): ``deltas`` (return deltas from
    ``feed()``; ``False`` is the fastest path; ``"display"`` only candidate 0's
    ``TextDelta``, ``CallStart`` and ``ArgDelta``, performance R5), ``strict`` (a malformed event raises
    ``MalformedStreamError``; ``False`` skips it with a warning), ``max_event_bytes``
    (the largest event payload, 64 MiB), ``max_array_index`` (the largest array index a
    streamed argument's ``jsonPath`` may write, 10,000). The full text: ``help()`` of the
    class; the rules: ``spec/contract/aggregation.md`` and ``spec/aggregation.md``.
    """

    @overload
    def __new__(
        cls,
        *,
        api: Literal["generate_content"] = "generate_content",
        deltas: bool | Literal["display"] = True,
        strict: bool = True,
        max_event_bytes: int = ...,
        max_array_index: int = 10_000,
    ) -> StreamAggregator[AggregatedResponse]: ...
    @overload
    def __new__(
        cls,
        *,
        api: Literal["interactions"],
        deltas: bool = True,
        strict: bool = True,
        max_event_bytes: int = ...,
        max_array_index: int = 10_000,
    ) -> StreamAggregator[InteractionResponse]: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[_Delta]:
        """Feed raw body bytes (any split); returns the deltas of the events they completed
        (``[]`` with ``deltas=False``). Raises ``MalformedStreamError`` (strict mode; the good
        events of the call are kept, their deltas in ``.deltas``) or ``AggregatorClosed``.
        A chunk of 16 KiB or more is processed with the GIL released, so threads feeding
        their own aggregators run in parallel (performance R3)."""
    def feed_event(self, payload: bytes | str) -> list[_Delta]:
        """Feed one complete GenerateContentResponse JSON payload."""
    def feed_chunk(self, chunk: Mapping[str, Any] | Any) -> list[_Delta]:
        """Feed one parsed chunk: a REST camelCase dict or a google-genai response object."""
    def finish(self) -> list[_Delta]:
        """End the stream and return the deltas of its end (D5): an event completed only by
        the end of input (calls it flushes are unfinished: no ``CallEnd``). Then ``close()``
        returns the result."""
    def hand_over(self) -> None:
        """Release the feeding thread (D8): the next ``feed*()``, from any thread, owns the
        aggregator. For a reader whose feeds hop threads one after another (a sync iterator
        read from a thread pool); ``RuntimeError`` while a feed runs."""
    def snapshot(self) -> _Result:
        """The current state as an ``AggregatedResponse``, without changing it."""
    def close(self) -> _Result:
        """End the stream and return the ``AggregatedResponse``; later calls return the same object."""
    def reconnect(self) -> None:
        """``api="interactions"``: the connection dropped and the resumed stream follows; the
        partial event since the last complete one is discarded. ``TypeError`` otherwise."""
    @property
    def events_seen(self) -> int:
        """Payloads dispatched so far (good and bad)."""
    @property
    def bytes_seen(self) -> int:
        """Bytes fed so far."""
    @property
    def visible_output(self) -> bool:
        """Whether candidate 0 has produced answer text or a function call (thoughts do not
        count), whatever ``deltas`` asks for (R5). ``TypeError`` for ``api="interactions"``."""

@final
class SseEvent:
    """One WHATWG server-sent event."""

    __match_args__ = ("event", "data", "id", "retry")
    event: str
    data: str
    id: str | None
    retry: int | None
    def __new__(cls, event: str, data: str, id: str | None, retry: int | None) -> Self: ...

@final
class SseDecoder:
    """A generic WHATWG server-sent-events decoder (any provider)."""

    def __new__(cls) -> Self: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[SseEvent]:
        """Feed bytes (any split); returns the events completed by them."""
    def close(self) -> list[SseEvent]:
        """End of input: the events a missing final blank line held back."""

# Private (R7 (binding)): for tests and benchmarks only, not part of the API.
def _json_to_py(text: str) -> Any:
    """The Python value of the JSON text ``text`` as ``orjson.loads`` gives it, built
    straight from the text; ``ValueError`` if it is not valid JSON."""

def _json_to_py_via_value(text: str) -> Any:
    """The same through a ``serde_json::Value`` tree and its conversion (the path the
    builder replaces); ``-0`` is ``-0.0`` there, and 128 levels of nesting are too many
    (``serde_json``'s default limit; the core lifts it)."""
