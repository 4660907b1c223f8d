"""Type stubs of the Rust extension module ``fastagg._fastagg`` (aggregation.md, api.md)."""

from collections.abc import Mapping
from typing import Any, TypeAlias, final

from typing_extensions import Self

__all__ = [
    "AggregatedResponse",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Finish",
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
    def index(self) -> int: ...
    @property
    def parts(self) -> list[dict[str, Any]]: ...
    @property
    def content(self) -> dict[str, Any]: ...
    @property
    def text(self) -> str: ...
    @property
    def thought_text(self) -> str: ...
    @property
    def function_calls(self) -> list[dict[str, Any]]: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def finish_message(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...

@final
class AggregatedResponse:
    """The aggregated model turn (read-only). Flat accessors describe candidate 0."""

    @property
    def parts(self) -> list[dict[str, Any]]: ...
    @property
    def content(self) -> dict[str, Any]: ...
    @property
    def text(self) -> str: ...
    @property
    def thought_text(self) -> str: ...
    @property
    def function_calls(self) -> list[dict[str, Any]]: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def finish_message(self) -> str | None: ...
    @property
    def usage(self) -> dict[str, Any] | None: ...
    @property
    def model_version(self) -> str | None: ...
    @property
    def response_id(self) -> str | None: ...
    @property
    def prompt_feedback(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...
    @property
    def complete(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def candidates(self) -> list[Candidate]: ...
    @property
    def warnings(self) -> list[str]: ...
    def to_dict(self) -> dict[str, Any]: ...
    def to_json(self) -> bytes: ...
    def to_genai(self) -> Any: ...

@final
class StreamAggregator:
    """Aggregates the raw body of a Gemini ``streamGenerateContent`` response."""

    def __new__(
        cls,
        *,
        deltas: bool = True,
        strict: bool = True,
        max_event_bytes: int = ...,
        max_array_index: int = 10_000,
    ) -> Self: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[_Delta]: ...
    def feed_event(self, payload: bytes | str) -> list[_Delta]: ...
    def feed_chunk(self, chunk: Mapping[str, Any] | Any) -> list[_Delta]: ...
    def finish(self) -> list[_Delta]: ...
    def snapshot(self) -> AggregatedResponse: ...
    def close(self) -> AggregatedResponse: ...
    @property
    def events_seen(self) -> int: ...
    @property
    def bytes_seen(self) -> int: ...

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
    def feed(self, data: bytes | bytearray | memoryview) -> list[SseEvent]: ...
    def close(self) -> list[SseEvent]: ...
