"""The aggregator (E1-E3, E7, D3-D8): the feed/close pipeline.

Framing (``..framing``) turns bytes into frames, ``..event`` validates a
payload, and each event is folded (``_apply``) into the records of ``state``: candidates in
``candidate``, parts in ``parts``, calls in ``calls``, repeated fields in
``merge``; ``response`` holds what is handed out, ``render`` the JSON helpers.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..._chunks import chunk_to_mapping
from ..._json import JSONObject
from ...diagnostics import Diagnostic
from ...errors import AggregatorClosed, MalformedStreamError
from ..diagnostics import _diagnostic, _text
from ..error import EVENT_TOO_LARGE, Problem, _bad_payload, _malformed
from ..event import _parse_payload
from ..framing import PAYLOAD, TOO_LARGE, UNREADABLE, UNTERMINATED, WARNING, Frame, _BodyFramer
from ..framing.lines import _as_bytes, _payload_bytes
from .calls import _close_open_calls
from .candidate import _candidate, _render_candidate
from .merge import _merge_usage, _set_top_level
from .render import _render_json, _same
from .response import AggregatedResponse, ArgDelta, CallStart, Delta, StreamError, TextDelta
from .state import _Checkpoint, _TurnState, _Warnings

_MAX_ARRAY_INDEX_CAP = 2**31 - 1  # D2b: the largest max_array_index accepted
_MAX_EVENT_BYTES_CAP = 2**63 - 1  # D2b: the largest max_event_bytes accepted (sys.maxsize)


#: R5: the delta types ``deltas="display"`` keeps, of candidate 0 only.
_DISPLAYED = (TextDelta, CallStart, ArgDelta)


def _delta_mode(deltas: object) -> tuple[bool, bool]:
    """``deltas=``: (whether deltas are built, whether only the displayed ones are kept)."""
    if isinstance(deltas, str):
        if deltas != "display":
            raise ValueError(f"deltas must be True, False or 'display', not '{deltas}'")
        return True, True
    return bool(deltas), False


def _displayed(deltas: list[Delta]) -> list[Delta]:
    """R5: candidate 0's text, call-start and argument deltas, in order."""
    return [d for d in deltas if isinstance(d, _DISPLAYED) and d.candidate == 0]


def _check_limit(name: str, value: object, cap: int) -> int:
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative, got {value}")
    if value > cap:
        raise ValueError(f"{name} must be at most {cap}, got {value}")
    return value


_SECOND_FEEDER = (
    "this StreamAggregator was fed from another thread first; an aggregator is fed from one "
    "thread (chunks from two threads would interleave): use one aggregator per stream"
)


def _apply(state: _TurnState, event: JSONObject, i: int, deltas: list[Delta] | None) -> None:
    """Fold event payload number ``i`` into the state (E1-E3, E7, E8).

    RULE E0: one payload in order: error, candidates, usage, then the top-level fields.
    """
    error = event.get("error")
    if error is not None:  # E1, E8
        state.error = error
        if deltas is not None:
            deltas.append(StreamError(_render_json(error)))
        return
    # RULE E2: a payload without candidates is normal (metadata-only chunks).
    candidates = event.get("candidates")
    if isinstance(candidates, list):
        mark = _Checkpoint()
        for j, candidate in enumerate(candidates):
            _candidate(state, candidate, i, j, deltas, mark)
        # RULE E14: a token covers the output of its own event, not of later ones.
        state.output_after_token |= mark.output
        if mark.token is not None:
            state.continuation_token = mark.token
            state.output_after_token = False
    elif candidates is not None:
        state.shape(i, "candidates", "a list")
    usage = event.get("usageMetadata")
    if isinstance(usage, dict):
        _merge_usage(state, usage)
    elif usage is not None:
        state.shape(i, "usageMetadata", "an object")
    _set_top_level(state, event, i)


def _render(state: _TurnState, *, truncated: bool, fresh: bool) -> AggregatedResponse:
    keep = _render_json if fresh else _same
    return AggregatedResponse(
        [_render_candidate(state.candidates[i], fresh=fresh) for i in sorted(state.candidates)],
        keep(state.usage),
        keep(state.model_version),
        keep(state.response_id),
        keep(state.create_time),
        keep(state.prompt_feedback),
        keep(state.model_status),
        keep(state.error),
        state.continuation_token,
        state.output_after_token,
        truncated,
        state.warnings.render(),
    )


def _check_utf8(value: Any) -> None:
    """R14: the core reads every string of a chunk as UTF-8, each key before its value,
    depth first: a lone surrogate is the encoder's ``UnicodeEncodeError`` and nothing is
    dispatched. A loop, not a recursion: the chunk may nest 1024 levels (D2c)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            item.encode("utf-8")
        elif type(item) is dict:
            for key, inner in reversed(list(item.items())):
                stack.append(inner)
                stack.append(key)
        elif type(item) is list:
            stack.extend(reversed(item))


class StreamAggregator:
    """Aggregates the body of a Gemini ``streamGenerateContent`` response.

    Feed raw body bytes (any split) with ``feed()``, one event payload with
    ``feed_event()``, or one parsed chunk with ``feed_chunk()``; each returns
    the deltas it produced (empty with ``deltas=False``; with
    ``deltas="display"`` only candidate 0's text, call-start and argument
    deltas, R5). ``visible_output`` says whether candidate 0 produced answer
    text or a function call. ``snapshot()``
    renders the aggregate so far, ``close()`` finishes the stream.
    ``api="interactions"`` returns the Interactions twin instead
    (``fastagg.reference.interactions``, spec/interactions.md I1).
    """

    def __new__(cls, *, api: str = "generate_content", **options: Any) -> Any:
        """The classic aggregator, or the Interactions twin for ``api="interactions"``."""
        if api == "generate_content":
            return super().__new__(cls)
        if options.get("deltas") == "display":
            raise ValueError("deltas='display' is only for api='generate_content'")
        from ..interactions import InteractionsAggregator  # it imports this package

        return InteractionsAggregator(api=api, **options)

    def __init__(
        self,
        *,
        api: str = "generate_content",
        deltas: bool | str = True,
        strict: bool = True,
        max_event_bytes: int = 64 * 1024 * 1024,
        max_array_index: int = 10_000,
    ) -> None:
        self._deltas, self._display = _delta_mode(deltas)
        self._strict = bool(strict)
        self._max_event_bytes = _check_limit(
            "max_event_bytes", max_event_bytes, _MAX_EVENT_BYTES_CAP
        )
        self._warnings = _Warnings()
        self._framer = _BodyFramer(self._max_event_bytes)
        self._state = _TurnState(
            _check_limit("max_array_index", max_array_index, _MAX_ARRAY_INDEX_CAP), self._warnings
        )
        self._events_seen = 0
        self._bytes_seen = 0
        self._truncated = False
        self._result: AggregatedResponse | None = None  # set by close()
        self._ended = False  # set by finish() (D5)
        self._feeder: int | None = None  # the thread that fed it first (D8)

    @property
    def events_seen(self) -> int:
        """Payloads dispatched so far, good and bad (F9)."""
        return self._events_seen

    @property
    def bytes_seen(self) -> int:
        """Bytes given to ``feed()`` and ``feed_event()`` so far."""
        return self._bytes_seen

    @property
    def visible_output(self) -> bool:
        """Whether candidate 0 produced answer text or a function call (R5; thoughts do not count)."""
        first = self._state.candidates.get(0)
        return first is not None and first.visible

    def feed(self, data: bytes | bytearray | memoryview) -> list[Delta]:
        """Process a chunk of the raw body; return its deltas.

        Raises ``MalformedStreamError`` after the whole chunk was processed when
        one of its payloads was bad (F8, F10; ``strict=True`` only).
        """
        self._check_open()
        chunk = _as_bytes(data)
        self._bytes_seen += len(chunk)
        frames: list[Frame] = []
        self._framer.feed(chunk, frames)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        for frame in frames:
            self._frame(frame, deltas, errors)
        return self._finish_call(deltas, errors)

    def feed_event(self, payload: bytes | str) -> list[Delta]:
        """Process one complete event payload (a ``GenerateContentResponse`` JSON)."""
        self._check_open()
        data = _payload_bytes(payload)
        offset = self._bytes_seen
        self._bytes_seen += len(data)
        deltas: list[Delta] = []
        errors: list[MalformedStreamError] = []
        self._dispatch(data, offset, deltas, errors)
        return self._finish_call(deltas, errors)

    def feed_chunk(self, chunk: Mapping[str, Any] | Any) -> list[Delta]:
        """Process one parsed chunk: a REST camelCase dict or a google-genai response."""
        self._check_open()
        event = chunk_to_mapping(chunk)
        _check_utf8(event)
        deltas: list[Delta] = []
        index = self._events_seen
        self._events_seen += 1
        _apply(self._state, event, index, deltas if self._deltas else None)
        return _displayed(deltas) if self._display else deltas

    def reconnect(self) -> None:
        """Only for ``api="interactions"`` (spec/interactions.md I20)."""
        raise TypeError(
            "reconnect() is only for api='interactions' "
            "(a generateContent stream cannot be resumed)"
        )

    def snapshot(self) -> AggregatedResponse:
        """The aggregate so far, open calls in place; the state is not changed."""
        if self._result is not None:
            return self._result
        return _render(self._state, truncated=self._truncated, fresh=True)

    def finish(self) -> list[Delta]:
        """End the input and return the deltas that produced (D5).

        A final event without a trailing blank line is processed (F14) and the
        open calls are closed (C12); ``close()`` then returns the result and
        ``feed*`` raises ``AggregatorClosed``. Later calls return ``[]``.
        """
        if self._ended:
            return []
        self._ended = True
        deltas: list[Delta] = []
        frames: list[Frame] = []
        self._framer.close(frames)
        for frame in frames:
            self._frame(frame, deltas if self._deltas else None, None)
        if self._bytes_seen > 0 and self._events_seen == 0:
            self._warnings.append(_diagnostic("no_event_found", bytes=self._bytes_seen))
        _close_open_calls(self._state)
        return _displayed(deltas) if self._display else deltas

    def hand_over(self) -> None:
        """Release the feeding thread (D8): the next feed, from any thread, owns it."""
        self._feeder = None

    def close(self) -> AggregatedResponse:
        """Finish the stream (F14, C12) and return the aggregate; idempotent."""
        if self._result is not None:
            return self._result
        self.finish()
        self._result = _render(self._state, truncated=self._truncated, fresh=False)
        return self._result

    # --- internals ---

    def _check_open(self) -> None:
        if self._ended:
            raise AggregatorClosed("the aggregator was closed; create a new one for another stream")
        me = threading.get_ident()
        if self._feeder is None:
            self._feeder = me
        elif self._feeder != me:  # D8: chunks from two threads would interleave
            raise RuntimeError(_SECOND_FEEDER)

    def _frame(
        self,
        frame: Frame,
        deltas: list[Delta] | None,
        errors: list[MalformedStreamError] | None,
    ) -> None:
        """Handle one frame; ``errors`` is None during ``close()``, which never raises."""
        if frame.kind == PAYLOAD:
            assert isinstance(frame.data, bytes)
            self._dispatch(frame.data, frame.offset, deltas, errors)
        elif frame.kind == TOO_LARGE:
            self._reject(EVENT_TOO_LARGE, frame.offset, errors)
        elif frame.kind == WARNING:
            assert isinstance(frame.data, Diagnostic)
            self._warnings.append(frame.data)
        elif frame.kind == UNREADABLE:
            # U4, U5: raised whatever `strict` says: not one bad event to skip,
            # nothing of the body can be read as it was fed.
            assert isinstance(frame.data, Diagnostic) and errors is not None
            kind = (
                "compressed-body" if frame.data.code == "compressed_body" else "lines-without-ends"
            )
            errors.append(
                MalformedStreamError(
                    _text(frame.data),
                    kind,
                    frame.offset,
                    self._events_seen,
                    diagnostic=frame.data,
                )
            )
        elif frame.kind == UNTERMINATED:
            assert isinstance(frame.data, bytes)
            event = _parse_payload(frame.data, self._max_event_bytes)
            if not isinstance(event, str):
                self._warnings.append(
                    _diagnostic("unterminated_event_processed", offset=frame.offset)
                )
                index = self._events_seen
                self._events_seen += 1
                _apply(self._state, event, index, deltas)
            else:
                self._drop_incomplete(frame.offset)
        else:
            self._drop_incomplete(frame.offset)

    def _drop_incomplete(self, offset: int) -> None:
        self._truncated = True
        self._warnings.append(_diagnostic("incomplete_event_dropped", offset=offset))

    def _dispatch(
        self,
        payload: bytes,
        offset: int,
        deltas: list[Delta] | None,
        errors: list[MalformedStreamError] | None,
    ) -> None:
        event = _parse_payload(payload, self._max_event_bytes)
        if isinstance(event, str):
            self._reject(event, offset, errors)
            return
        index = self._events_seen
        self._events_seen += 1
        _apply(self._state, event, index, deltas if self._deltas else None)

    def _reject(
        self, problem: Problem, offset: int, errors: list[MalformedStreamError] | None
    ) -> None:
        """A bad payload still counts as an event (F9); strict mode raises later (F10)."""
        index = self._events_seen
        self._events_seen += 1
        diagnostic = _bad_payload(problem, index, offset, self._max_event_bytes)
        if self._strict and errors is not None:
            errors.append(_malformed(problem, index, offset, diagnostic))
        else:
            self._warnings.append(diagnostic)

    def _finish_call(self, deltas: list[Delta], errors: list[MalformedStreamError]) -> list[Delta]:
        if self._display:
            deltas = _displayed(deltas)
        if errors:
            first = errors[0]
            first.deltas = deltas
            first.errors = errors
            raise first
        return deltas
