"""Long decode: one step's answer across continuation hops (spec/turn-loop.md L56-L62).

A hop that ends in ``CONTINUATION`` (generateContent) or ``requires_continuation``
(Interactions) is not the end of the answer: the loop sends the identical
request again with the hop's token, and the answers of all hops (and of the
attempts resumed from a checkpoint after a drop) are one model turn. This
module holds the pure parts: which token continues a result, the next hop's
request, :class:`Hops` (the segments seen as one aggregated result), and what
carries a call the stream left open into the segment that continues it (L90,
I29): :class:`CallCarry` on generateContent, :class:`StepCarry` on Interactions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._fastagg import SseDecoder, SseEvent
from .._json import JSONObject, Part
from ..errors import MalformedStreamError

# CallCarry, Continued and StepCarry are the loop's own carriers between segments, not API.
__all__ = [
    "MAX_HOPS",
    "MAX_RESUMES",
    "Hops",
    "checkpoint_token",
    "hop_request",
    "hop_token",
]

#: L61: hops of one step attempt at most (the service's own budget ends a real decode sooner).
MAX_HOPS = 64
#: L59: resumes of one hop after dropped connections.
MAX_RESUMES = 3

_PLAIN = frozenset({"text", "thought"})


def _token(result: Any) -> str | None:
    token = result.continuation_token  # E14 (I6 on Interactions): the latest one
    return token if isinstance(token, str) and token else None


def hop_token(result: Any) -> str | None:
    """L56: the token to continue with, when ``result`` ended its hop with one."""
    if result.finish_reason in ("CONTINUATION", "requires_continuation"):
        return _token(result)
    return None


def checkpoint_token(result: Any) -> str | None:
    """L59: after a drop, the latest checkpoint token (only a result without a finish
    reason has one: a token on a finished chunk is stale).

    L80: only when it covers everything received: output in an event after it
    would be generated again by the resumed stream (E14 judges per event).
    """
    if result.finish_reason or result.output_after_token:
        return None
    return _token(result)


def hop_request(request: Mapping[str, Any], result: Any, token: str) -> JSONObject:
    """L58: the same request with the token; a stored interaction also names the hop that
    issued it (``previous_interaction_id``), as the service checks."""
    out = {**request, "continuationToken": token}
    interaction = getattr(result, "interaction_id", None)
    if interaction is not None and request.get("store") is not False:
        out["previous_interaction_id"] = interaction
    return out


class Hops:
    """Several segments (hops, resumed attempts) of one step read as one result (L57).

    Parts are concatenated in order, adjacent plain text parts with the same
    thought flag merged (as P1 merges them within a stream); text, warnings and
    diagnostics are concatenated; the finish reason, message and error are the last
    segment's. L90: the parts a :class:`Continued` segment carried over take
    the place of the calls the segment before it left open, so a call split
    by a drop or a hop is one call, where it started. ``function_calls`` lists
    the calls in part order; ``unfinished_calls`` the calls no segment
    finished (L91), with their part in the merged ``parts``. Interactions
    segments keep all their steps, in order, under ``content["interaction"]``
    with the last hop's id.
    """

    def __init__(self, segments: Sequence[Any]) -> None:
        last = segments[-1]
        self.finish_reason = last.finish_reason
        self.finish_message = last.finish_message
        self.error = last.error
        self.usage = last.usage
        self.prompt_feedback = next(
            (s.prompt_feedback for s in segments if s.prompt_feedback is not None), None
        )
        statuses = [getattr(s, "model_status", None) for s in segments]  # E15: last non-null
        self.model_status = next((m for m in reversed(statuses) if m is not None), None)
        self.text = "".join(s.text for s in segments)
        self.warnings = [w for s in segments for w in s.warnings]
        self.diagnostics = [d for s in segments for d in s.diagnostics]  # X3: as warnings
        self.parts: list[JSONObject] = []
        calls: dict[int, JSONObject] = {}  # merged part -> its call (a later segment's wins)
        unlisted: list[JSONObject] = []
        unfinished: list[tuple[int, Any]] = []  # merged part, entry (L91)
        for segment in segments:
            carried = getattr(segment, "carried", 0)
            continued = [at for at, _ in unfinished[:carried]]
            unfinished = unfinished[len(continued) :]
            where: list[int] = []  # merged part of each of the segment's parts
            for k, part in enumerate(segment.parts):
                if k < len(continued):
                    self.parts[continued[k]] = part
                    where.append(continued[k])
                else:
                    where.append(self._add(part))
            opened = segment.unfinished_calls
            unfinished.extend((where[entry["part"]], entry) for entry in opened)
            # C13: function_calls holds the finished calls, in part order
            skip = {entry["part"] for entry in opened}
            at = [k for k, p in enumerate(segment.parts) if "functionCall" in p and k not in skip]
            if len(at) == len(segment.function_calls):
                calls.update(zip((where[k] for k in at), segment.function_calls, strict=True))
            else:  # not a shape the core gives; keep the calls, in order
                unlisted.extend(segment.function_calls)
        self.function_calls = [calls[k] for k in sorted(calls)] + unlisted
        self.unfinished_calls = [{**entry, "part": at} for at, entry in unfinished]
        self.steps = [st for s in segments for st in getattr(s, "steps", ())]
        self.interaction_id = getattr(last, "interaction_id", None)
        self._interactions = hasattr(last, "steps")

    def _add(self, part: JSONObject) -> int:
        if self.parts and set(part) <= _PLAIN and set(self.parts[-1]) <= _PLAIN:
            prev = self.parts[-1]
            if bool(prev.get("thought")) == bool(part.get("thought")):
                self.parts[-1] = {**prev, "text": prev["text"] + part["text"]}
                return len(self.parts) - 1
        self.parts.append(part)
        return len(self.parts) - 1

    @property
    def content(self) -> JSONObject:
        content: JSONObject = {"role": "model", "parts": self.parts}
        if self._interactions:
            stored: JSONObject = {"steps": self.steps}
            if self.interaction_id is not None:
                stored = {"id": self.interaction_id, **stored}
            content["interaction"] = stored
        return content


# -- L90: generateContent --------------------------------------------------------------------


class Continued:
    """A segment's result whose first ``carried`` parts continue the calls the segment
    before it left open (L90); every other attribute is the result's."""

    __slots__ = ("_result", "carried")

    def __init__(self, result: Any, carried: int) -> None:
        self._result = result
        self.carried = carried

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


class CallCarry:
    """L90: the streamed calls a generateContent segment left open, carried into the
    aggregator of the segment that continues it (a hop, or a resume after a drop).

    The continuing stream carries on where the call was: its fragments (``partialArgs``
    without a name, or under the call's id) continue the open call, by the aggregator's
    own routing (C2), when the new aggregator starts with the call as it stood (its
    ``id``, ``name``, arguments and signature, still open). ``shown`` is the part under
    which the caller saw each call start (``ToolCallDelta.part``, L30).
    """

    __slots__ = ("parts", "shown")

    def __init__(self, result: Any, shown: Sequence[int] = ()) -> None:
        opened = [entry["part"] for entry in result.unfinished_calls]  # C13
        self.parts: list[Part] = [result.parts[k] for k in opened]
        self.shown = [shown[k] if k < len(shown) else k for k in opened]

    def prime(self, agg: Any) -> None:
        """Open the carried calls in ``agg`` as they stood; their deltas are not shown again."""
        parts = [
            {**p, "functionCall": {**p["functionCall"], "willContinue": True}} for p in self.parts
        ]
        agg.feed_chunk({"candidates": [{"index": 0, "content": {"role": "model", "parts": parts}}]})

    def result(self, result: Any) -> Continued:
        return Continued(result, len(self.parts))


# -- I29: Interactions -----------------------------------------------------------------------

_STEP_EVENTS = frozenset({"step.start", "step.delta", "step.stop"})


class StepCarry:
    """I29: an Interactions aggregate whose ``function_call`` steps the stream left open,
    kept open (reconnected, I20) for the events of the next segment that continue them.

    The next segment (a resume from a checkpoint, or a hop: a new interaction, its
    steps counted from 0) is read by :meth:`follow`'s :class:`_Redirect`; ``slot`` is
    where this aggregate's result stands among the segments, replaced by the
    finished one once the next segment ended.
    """

    __slots__ = ("agg", "open", "slot")

    def __init__(self, agg: Any, raw: Any, slot: int) -> None:
        self.agg = agg
        self.slot = slot
        # C13, I18: the aggregate's own entries name the call's step
        self.open: list[tuple[int, str | None]] = [
            (e["step"], e["id"]) for e in raw.unfinished_calls
        ]
        agg.reconnect()

    def follow(self, fresh: Any) -> _Redirect:
        return _Redirect(self.agg, fresh, self.open)


class _Redirect:
    """What the next segment's body is fed to (I29): its events go to its own
    aggregator, except those continuing a call step of the previous one.

    A step the new stream never started (a ``step.delta`` with arguments, or a
    ``step.stop``, I11) continues the first call still open; a ``step.start`` of a
    ``function_call`` with an open call's id continues that call (the start is not
    applied again). Those events go to the previous aggregate under the call's
    index; the running usage and ``event_id`` they carry stay with the new
    segment's request (I7, I26).
    """

    __slots__ = ("decoder", "fresh", "open", "prev", "routes", "started")

    def __init__(self, prev: Any, fresh: Any, opened: Sequence[tuple[int, str | None]]) -> None:
        self.prev = prev
        self.fresh = fresh
        self.open = list(opened)
        self.routes: dict[int, int] = {}  # the new stream's step -> the open call's step
        self.started: set[int] = set()
        self.decoder = SseDecoder()

    def feed(self, data: bytes) -> list[Any]:
        return self._apply(self.decoder.feed(data))

    def flush(self) -> list[Any]:
        """The body ended: an event its missing blank line held back is applied, or left
        pending in the new segment's aggregator, whose ``close()`` dispatches it (I4, I28)."""
        return self._apply(self.decoder.close(), pending=True)

    def reconnect(self) -> None:
        """I26: the new interaction's stream resumes; a partial event is dropped (I20)."""
        self.decoder = SseDecoder()
        self.fresh.reconnect()

    def _apply(self, events: list[SseEvent], *, pending: bool = False) -> list[Any]:
        deltas: list[Any] = []
        bad: MalformedStreamError | None = None
        for event in events:
            try:
                deltas.extend(self._event(event, pending))
            except MalformedStreamError as exc:  # strict (I4): raised after the good events
                deltas.extend(exc.deltas)
                bad = bad or exc
        if bad is not None:
            bad.deltas = deltas
            raise bad
        return deltas

    def _event(self, event: SseEvent, pending: bool) -> list[Any]:
        found = _step_event(event)
        if found is not None:
            kind, index, payload = found
            target = self._route(kind, index, payload)
            if target is not None:
                return self._continue(kind, target, payload) if target >= 0 else []
        frame = _frame(event)
        deltas: list[Any] = self.fresh.feed(frame[:-1] if pending else frame)
        return deltas

    def _route(self, kind: str, index: int, payload: JSONObject) -> int | None:
        """The open call's step an event continues; -1: skip it; None: a step of its own."""
        if index in self.routes:
            return self.routes[index]
        if index in self.started or not self.open:
            if kind == "step.start":
                self.started.add(index)
            return None
        if kind == "step.start":
            step = payload.get("step")
            call = step.get("id") if isinstance(step, Mapping) else None
            if call is None or step.get("type") != "function_call":  # type: ignore[union-attr]
                self.started.add(index)
                return None
            for n, (_, open_id) in enumerate(self.open):
                if open_id == call:
                    self.routes[index] = self.open.pop(n)[0]
                    return -1  # the step is known: its start is not applied again (I10)
            self.started.add(index)
            return None
        delta = payload.get("delta")
        if kind == "step.delta" and not (
            isinstance(delta, Mapping) and delta.get("type") == "arguments_delta"
        ):
            return None  # text or thoughts: a step of the new stream (I11), as before
        self.routes[index] = self.open.pop(0)[0]
        return self.routes[index]

    def _continue(self, kind: str, target: int, payload: JSONObject) -> list[Any]:
        moved = {k: v for k, v in payload.items() if k not in _NOT_MOVED}
        deltas: list[Any] = self.prev.feed_event(json.dumps({**moved, "index": target}))
        # I7, I26: the request's running usage and the resume point stay with its own segment.
        kept: JSONObject = {}
        if isinstance(payload.get("event_id"), str):
            kept["event_id"] = payload["event_id"]
        usage = payload.get("usage")
        metadata = payload.get("metadata")
        if kind == "step.delta":
            usage = metadata.get("total_usage") if isinstance(metadata, Mapping) else None
        if kind != "step.start" and isinstance(usage, Mapping):
            kept["usage"] = usage
        if kept:
            update = {"event_type": "interaction.status_update", **kept}
            deltas.extend(self.fresh.feed_event(json.dumps(update)))
        return deltas


# What of a continuing event the previous aggregate does not get: the resume point and the
# running usage (step.delta's metadata, step.stop's usage and step_usage) of the new request.
_NOT_MOVED = frozenset({"event_id", "metadata", "usage", "step_usage"})


def _step_event(event: SseEvent) -> tuple[str, int, JSONObject] | None:
    """(type, index, payload) of a step event with a valid index (I9); None for any other
    event, passed on as it is."""
    data = event.data
    if '"step.' not in data and not event.event.startswith("step."):
        return None
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    kind = payload.get("event_type")
    kind = kind if isinstance(kind, str) else event.event
    index = payload.get("index")
    if kind not in _STEP_EVENTS or type(index) is not int or not 0 <= index < 2**31:
        return None
    return kind, index, payload


def _frame(event: SseEvent) -> bytes:
    """One event framed again for an aggregator (I2): its name and its data lines."""
    lines = [] if event.event == "message" else [f"event: {event.event}"]
    lines.extend(f"data: {line}" for line in event.data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()
