"""Pure-Python twin of the Rust Interactions aggregator (``spec/interactions.md``).

``fastagg.reference.StreamAggregator(api="interactions")`` returns an
``InteractionsAggregator``. It follows the I rules to the letter, warning
texts included, and is the oracle of the differential tests. Modules:
framing (I2-I4), the argument parser ``args`` (I14-I17), ``steps``
(I9-I13); here the aggregator and its result (I5-I8, I18).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import orjson

from ... import _repr
from ..._json import JSONObject, JSONValue
from ...diagnostics import Diagnostic
from ...errors import AggregatorClosed, MalformedStreamError
from ..aggregate import _MAX_ARRAY_INDEX_CAP, _MAX_EVENT_BYTES_CAP, _SECOND_FEEDER, _check_limit
from ..aggregate.response import Delta, Finish, StreamError
from ..diagnostics import _diagnostic
from ..error import Problem, _bad_payload, _malformed
from ..event import _parse_payload
from ..framing.lines import _as_bytes, _payload_bytes
from .framing import _AFTER_DONE, _PAYLOAD, _TOO_LARGE, _UNTERMINATED, _Frame, _Framer
from .steps import _deep_copy, _Steps

__all__ = ["InteractionResponse", "InteractionsAggregator"]


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class InteractionResponse:
    """The aggregated interaction (read-only, I18)."""

    steps: list[JSONObject]
    function_calls: list[JSONObject]
    interaction_id: str | None
    status: str | None
    last_event_id: str | None
    continuation_token: str | None
    output_after_token: bool
    interaction: JSONObject
    usage: JSONValue
    error: JSONValue
    complete: bool
    done: bool
    truncated: bool
    diagnostics: tuple[Diagnostic, ...]
    warnings: list[str]
    unfinished_calls: list[JSONObject]
    text: str
    thought_text: str

    def __repr__(self) -> str:
        return _repr.interaction(self)

    def to_dict(self) -> JSONObject:
        """``{"id"?, "status"?, "steps", "usage"?, "error"?}`` (fresh objects)."""
        out: JSONObject = {}
        if self.interaction_id is not None:
            out["id"] = self.interaction_id
        if self.status is not None:
            out["status"] = self.status
        out["steps"] = _deep_copy(self.steps)
        if self.usage is not None:
            out["usage"] = _deep_copy(self.usage)
        if self.error is not None:
            out["error"] = _deep_copy(self.error)
        return out

    def to_json(self) -> bytes:
        """``to_dict()`` as compact UTF-8 JSON."""
        return orjson.dumps(self.to_dict())


def _str(obj: JSONObject, key: str) -> str | None:
    v = obj.get(key)
    return v if isinstance(v, str) else None


_STATUS_EVENTS = {
    "interaction.status_update": None,
    "interaction.in_progress": "in_progress",
    "interaction.requires_action": "requires_action",
}


class InteractionsAggregator:
    """Aggregates the body of a streamed Interactions API response (I1)."""

    def __init__(
        self,
        *,
        api: str = "interactions",
        deltas: bool = True,
        strict: bool = True,
        max_event_bytes: int = 64 * 1024 * 1024,
        max_array_index: int = 10_000,
    ) -> None:
        if api != "interactions":
            raise ValueError(f"api must be 'generate_content' or 'interactions', got {api!r}")
        self._deltas = bool(deltas)
        self._strict = bool(strict)
        self._max = _check_limit("max_event_bytes", max_event_bytes, _MAX_EVENT_BYTES_CAP)
        _check_limit("max_array_index", max_array_index, _MAX_ARRAY_INDEX_CAP)
        self._framer = _Framer(self._max)
        self._interaction: JSONObject = {}
        self._interaction_id: str | None = None
        self._status: str | None = None
        self._last_event_id: str | None = None
        self._continuation_token: str | None = None
        self._usage: JSONValue = None
        self._error: JSONValue = None
        self._complete = False
        self._truncated = False
        self._warnings: list[Diagnostic] = []
        self._steps = _Steps(self._warnings, self._deltas)
        self._events_seen = 0
        self._bytes_seen = 0
        self._result: InteractionResponse | None = None
        self._feeder: int | None = None  # the thread that fed first (D8)

    @property
    def events_seen(self) -> int:
        """Payloads dispatched so far, good and bad (I2)."""
        return self._events_seen

    @property
    def bytes_seen(self) -> int:
        """Bytes given to ``feed()`` and ``feed_event()`` so far."""
        return self._bytes_seen

    def feed(self, data: bytes | bytearray | memoryview) -> list[Delta]:
        """Process a chunk of the body; return its deltas (I4 errors raised after it)."""
        self._check_open()
        self._check_feeder()
        chunk = _as_bytes(data)
        frames: list[_Frame] = []
        self._framer.feed(chunk, frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        self._bytes_seen += len(chunk)
        return self._finish_call(deltas, errors)

    def feed_event(self, payload: bytes | str) -> list[Delta]:
        """Process one data payload (its SSE event name unknown)."""
        self._check_open()
        self._check_feeder()
        data = _payload_bytes(payload)
        offset = self._bytes_seen
        self._bytes_seen += len(data)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        if len(data) > self._max:
            self._report("event-too-large", offset, errors)
        else:
            self._payload(offset, data, None, deltas, errors)
        return self._finish_call(deltas, errors)

    def reconnect(self) -> None:
        """The connection dropped and the resumed stream follows (I20)."""
        self._check_open()
        self._framer.reconnect()

    def feed_chunk(self, chunk: Any) -> list[Delta]:
        """Not supported for this API (I1)."""
        raise TypeError(
            "feed_chunk() is not supported with api='interactions'; feed the body bytes with "
            "feed() or one data payload with feed_event()"
        )

    def snapshot(self) -> InteractionResponse:
        """The result so far; the state is not changed."""
        if self._result is not None:
            return self._result
        return self._render(closing=False)

    @property
    def visible_output(self) -> bool:
        """Only for ``api="generate_content"`` (R5)."""
        raise TypeError("visible_output is only for api='generate_content'")

    def finish(self) -> list[Any]:
        """Only for ``api="generate_content"`` (D5); here the stream ends with ``[DONE]``."""
        raise TypeError(
            "finish() is only for api='generate_content'; an Interactions stream ends with its [DONE] event: call close()"
        )

    def close(self) -> InteractionResponse:
        """End the stream (I3, I4, I17) and return the result; idempotent."""
        if self._result is not None:
            return self._result
        frames: list[_Frame] = []
        self._framer.close(frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        for err in errors:
            self._warnings.extend(err.diagnostics)
        result = self._render(closing=True)
        self._result = result
        return result

    # --- internals ---

    def hand_over(self) -> None:
        """Release the feeding thread (D8): the next feed, from any thread, owns it."""
        self._feeder = None

    def _check_feeder(self) -> None:
        me = threading.get_ident()
        if self._feeder is None:
            self._feeder = me
        elif self._feeder != me:  # D8: chunks from two threads would interleave
            raise RuntimeError(_SECOND_FEEDER)

    def _check_open(self) -> None:
        if self._result is not None:
            raise AggregatorClosed(
                "feed() after close(): this StreamAggregator is finished; "
                "create a new one for the next stream"
            )

    def _finish_call(self, deltas: list[Delta], errors: list[MalformedStreamError]) -> list[Delta]:
        out = deltas if self._deltas else []
        if errors:
            first = errors[0]
            first.deltas = out
            first.errors = errors
            raise first
        return out

    def _next_index(self) -> int:
        n = self._events_seen
        self._events_seen += 1
        return n

    def _report(self, problem: Problem, offset: int, errors: list[MalformedStreamError]) -> None:
        n = self._next_index()
        diagnostic = _bad_payload(problem, n, offset, self._max, interactions=True)
        if self._strict:
            errors.append(_malformed(problem, n, offset, diagnostic))
        else:
            self._warnings.append(diagnostic)

    def _frame(
        self, frame: _Frame, deltas: list[Delta], errors: list[MalformedStreamError]
    ) -> None:
        kind, offset, data, name = frame
        if kind == _PAYLOAD:
            self._payload(offset, data, name, deltas, errors)
        elif kind == _TOO_LARGE:
            self._report("event-too-large", offset, errors)
        elif kind == _AFTER_DONE:
            self._warnings.append(_diagnostic("ix_data_after_done", offset=offset))
        elif kind == _UNTERMINATED:
            n = self._next_index()
            event = _parse_payload(data, self._max)
            if not isinstance(event, str):
                self._apply(n, event, name, deltas)
            else:
                self._warnings.append(_bad_payload(event, n, offset, self._max, interactions=True))
                self._truncated = True

    def _payload(
        self,
        offset: int,
        data: bytes,
        name: str | None,
        deltas: list[Delta],
        errors: list[MalformedStreamError],
    ) -> None:
        event = _parse_payload(data, self._max)
        if isinstance(event, str):
            self._report(event, offset, errors)
            return
        self._apply(self._next_index(), event, name, deltas)

    def _apply(self, n: int, event: JSONObject, name: str | None, deltas: list[Delta]) -> None:
        """One event (I5-I13): by its ``event_type``, else its SSE event name."""
        event_id = _str(event, "event_id")
        if event_id is not None:
            self._last_event_id = event_id
        kind = _str(event, "event_type")
        if kind is None:
            kind = name
        if kind in ("interaction.created", "interaction.completed"):
            self._on_interaction(event, kind == "interaction.completed", deltas)
        elif kind in _STATUS_EVENTS:
            self._on_status(event, _STATUS_EVENTS[kind])
        elif kind in ("step.start", "step.delta", "step.stop"):
            usage = self._steps.event(n, kind, event, deltas)
            if usage is not None:
                self._usage = usage
        elif kind == "error":
            # RULE I8: the latest error is kept, complete cleared; later events still apply.
            error = event.get("error")
            if error is None:
                error = event
            self._error = error
            self._complete = False
            if self._deltas:
                deltas.append(StreamError(_deep_copy(error)))
        else:
            if kind is None:
                self._warnings.append(_diagnostic("ix_missing_event_type", event=n))
            else:
                self._warnings.append(
                    _diagnostic("ix_unknown_event_type", event=n, event_type=kind)
                )

    def _on_interaction(self, event: JSONObject, completed: bool, deltas: list[Delta]) -> None:
        """RULE I6: `interaction` objects merge key by key; I7: the latest usage."""
        status: str | None = None
        obj = event.get("interaction")
        if isinstance(obj, dict):
            for k, v in obj.items():
                if v is not None:
                    self._interaction[k] = v
            if _str(obj, "id") is not None:
                self._interaction_id = _str(obj, "id")
            status = _str(obj, "status")
            if status is not None:
                self._status = status
            if isinstance(obj.get("usage"), dict):
                self._usage = obj["usage"]
            token = _str(obj, "continuation_token")
            if token is not None:
                self._set_token(token)
        if completed:
            self._complete = self._error is None
            if status and self._deltas:
                deltas.append(Finish(0, status))

    def _on_status(self, event: JSONObject, from_name: str | None) -> None:
        """RULE I7: a status update carries the latest status and usage."""
        if self._interaction_id is None and _str(event, "interaction_id") is not None:
            self._interaction_id = _str(event, "interaction_id")
        obj = event.get("interaction")
        nested = _str(obj, "status") if isinstance(obj, dict) else None
        status = next(
            (s for s in (_str(event, "status"), nested, from_name) if s is not None), None
        )
        if status is not None:
            self._status = status
        if isinstance(event.get("usage"), dict):
            self._usage = event["usage"]
        token = _str(event, "continuation_token")
        if token is not None:
            self._set_token(token)

    def _set_token(self, token: str) -> None:
        """RULE E14: a token covers the steps' output so far, not what comes after it."""
        self._continuation_token = token
        self._steps.output_after_token = False

    def _render(self, closing: bool) -> InteractionResponse:
        diagnostics = list(self._warnings)
        steps, calls, unfinished, text, thought = self._steps.render(closing, diagnostics)
        if closing and self._bytes_seen > 0 and not self._framer.done:
            diagnostics.append(_diagnostic("ix_missing_done"))
        return InteractionResponse(
            steps=steps,
            function_calls=calls,
            interaction_id=self._interaction_id,
            status=self._status,
            last_event_id=self._last_event_id,
            continuation_token=self._continuation_token,
            output_after_token=self._steps.output_after_token,
            interaction=_deep_copy(self._interaction),
            usage=_deep_copy(self._usage),
            error=_deep_copy(self._error),
            complete=self._complete,
            done=self._framer.done,
            truncated=self._truncated,
            diagnostics=tuple(diagnostics),
            warnings=[d.message for d in diagnostics],  # X3
            unfinished_calls=unfinished,
            text=text,
            thought_text=thought,
        )
