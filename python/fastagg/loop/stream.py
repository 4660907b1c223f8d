"""One model request: send it, aggregate its stream, deliver its deltas (L13, L19, L20, L36),
through its long-decode hops and resumes (L56-L62, I26).

:class:`ModelStream` drives one request of a step: a hop that ends with a
continuation token is followed by the same request with the token, a drop
after a checkpoint token (or of a stored interaction) is resumed, and the
segments read are one result (:class:`~fastagg.continuation.Hops`): a call
one segment left open is continued by the next (:class:`_Carry`, L90, I29).
:func:`_read_body` reads one response body into an aggregator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from .._fastagg import ArgDelta
from .._json import Request
from .._log import LOOP, failure
from ..errors import MalformedStreamError, ProviderError
from ..events import Phase
from ..model import ModelClient
from .clock import TurnClock
from .continuation import (
    MAX_HOPS,
    MAX_RESUMES,
    CallCarry,
    Hops,
    StepCarry,
    checkpoint_token,
    hop_request,
    hop_token,
)
from .emit import DeltaEvents
from .messages import describe
from .usage import UsageMeter
from .wire import InteractionsWire, Wire

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

Body = AbstractAsyncContextManager[AsyncIterator[bytes]]
#: Lifecycle(phase, step, detail=...) of the turn.
Say = Callable[[Phase, int, str], Awaitable[None]]
_DROPS = ("connection", "timeout")


class ModelStream:
    """Sends the requests of a turn's steps; ``hops`` counts the continuation hops (L62)."""

    __slots__ = ("clock", "hops", "model", "say", "usage", "wire")

    def __init__(
        self, model: ModelClient, wire: Wire, clock: TurnClock, usage: UsageMeter, say: Say
    ) -> None:
        self.model = model
        self.wire = wire
        self.clock = clock
        self.usage = usage
        self.say = say
        self.hops = 0

    async def read(
        self,
        events: DeltaEvents,
        request: Request,
        timeout: float | None,
        segments: list[Any],
    ) -> tuple[Any, ProviderError | None, bool]:
        """(aggregated result, transport error, whether visible output streamed).

        A failure of the request or its stream becomes the returned error (the
        result then holds what arrived). ``segments`` gets each hop's result as
        it is read, so that a caller cut off by a cancellation has the partial
        result: :func:`view` of it (L63). Each segment's usage is recorded as
        its own request's (L61), a cut-off one's too (L20).
        """
        wire, step = self.wire, events.step
        carry = _Carry(wire)
        visible = False
        sent, wait = request, timeout
        hop = 1
        resumes = 0
        while True:
            agg = wire.aggregator(events.emit.active)
            feeder, sink = carry.start(agg, events)
            body = self.model.stream(sent, timeout=wait)
            while True:
                try:
                    error, seen = await _read_body(body, feeder, wire, self.clock, sink)
                    clock = self.clock
                    if clock.cause is not None or clock.caller_cancelled:  # L71: no frame
                        # H14: cancelled, and the cancellation swallowed below (a model
                        # client's, an SDK's): the body ran on, the cause still holds.
                        raise asyncio.CancelledError
                    visible = visible or seen
                    dropped = error is not None and error.kind in _DROPS
                    partial: Any = agg.snapshot() if dropped else None
                    if dropped and carry.steps_api and partial.complete:
                        # I31: interaction.completed arrived: nothing more can come, so a
                        # drop after it ends a finished body (no resume, no error).
                        error, dropped = None, False
                    # I26: a stored interaction is resumed where it dropped, into the same
                    # aggregate.
                    if dropped and resumes < MAX_RESUMES and wire.resumable(request, partial):
                        resumes += 1
                        feeder.reconnect()
                        detail = _resuming(step, error, resumes, "the stored interaction")
                        wait = await self._next("stream-resume", step, detail, timeout)
                        body = self.model.resume(  # type: ignore[attr-defined]
                            partial.interaction_id, partial.last_event_id, timeout=wait
                        )
                        continue
                    if carry.steps is not None and error is None:  # I29: the body's last event
                        visible = await sink.deliver(feeder.flush()) or visible
                except asyncio.CancelledError:  # L63: this aggregate's part, cut where it is
                    carry.cut(segments, agg)
                    self.usage.record(segments[-1].usage)
                    raise
                break
            keep = carry.end(segments, agg, error, hop, resumes)
            result = segments[-1]
            self.usage.record(result.usage)  # L61: each hop's usage is its own request's
            if not _follows(result, error, hop, resumes):
                # L64: an error ends the hops, unless L59 resumes from the checkpoint that
                # covers everything received (L80); L61: the last hop is classified as it is.
                return view(segments), error, visible
            carry.hand_on(agg, keep, segments)  # L90, I29: the calls this segment left open
            if error is not None:
                resumes += 1
                sent = hop_request(request, result, checkpoint_token(result) or "")
                detail = _resuming(step, error, resumes, "from the last checkpoint")
                wait = await self._next("continuation-resume", step, detail, timeout)
                continue
            hop += 1
            resumes = 0
            sent = hop_request(request, result, hop_token(result) or "")  # L58: not the output
            LOOP.info("step %d: the answer goes on in hop %d (at most %d)", step, hop, MAX_HOPS)
            wait = await self._next(
                "continuation", step, f"the answer continues in hop {hop} of step {step}", timeout
            )
            self.hops += 1

    async def _next(
        self, phase: Phase, step: int, detail: str, timeout: float | None
    ) -> float | None:
        """Announce the next hop or resume; its timeout.

        L60: the abort and deadline checks run before it, and it gets the time
        the turn has left (within the step's ``timeout``).
        """
        await self.say(phase, step, detail)
        await self.clock.take_pending()
        left = self.clock.call_timeout()
        return left if timeout is None else timeout if left is None else min(timeout, left)


def _follows(result: Any, error: ProviderError | None, hop: int, resumes: int) -> bool:
    """Whether another request of this step follows ``result``: L59's resume after a drop
    from the checkpoint that covers everything received (L80), or L56's next hop (L61)."""
    if error is not None:
        dropped = error.kind in _DROPS
        return dropped and resumes < MAX_RESUMES and checkpoint_token(result) is not None
    return hop < MAX_HOPS and hop_token(result) is not None


def view(segments: list[Any]) -> Any:
    """The result of a request read in ``segments`` (L57: the hops as one)."""
    return segments[0] if len(segments) == 1 else Hops(segments)


def _resuming(step: int, error: ProviderError | None, n: int, how: str) -> str:
    """Log a resume (O2) and give its lifecycle detail."""
    LOOP.info(
        "step %d: %s; resuming %s (resume %d of %d)", step, failure(error), how, n, MAX_RESUMES
    )
    return _resumed(error, n)


def _resumed(error: ProviderError | None, n: int) -> str:
    assert error is not None
    return f"resume {n} of {MAX_RESUMES} after {describe(error)}"


async def _read_body(
    body: Body, agg: Any, wire: Wire, clock: TurnClock, events: DeltaEvents
) -> tuple[ProviderError | None, bool]:
    """Feed one response body into ``agg``: (transport error, whether visible output came)."""
    watching = clock.watching
    if watching:
        clock.progress()  # L60: a hop or a resume is progress
    visible = False
    error: ProviderError | None = None
    active = events.emit.active
    waiting = clock.open_first_output()
    try:
        async with body as chunks:
            # H11, L70: without a sink nothing is awaited per chunk, so a transport that
            # pushes (the default) feeds the aggregator inside its read callback.
            pump = None if active else getattr(chunks, "pump", None)
            if pump is not None:
                sink = _Sink(agg.feed, clock, events, waiting)
                try:
                    await pump(sink)
                except MalformedStreamError as exc:  # L19: a bad payload ends the stream
                    visible = await events.deliver(exc.deltas)
                    error = _malformed(exc)
                finally:  # also when the body fails: what it showed was shown (L64)
                    waiting = sink.waiting
                    visible = sink.seen or visible
            else:
                # The same per-chunk work as _Sink, inline (L71: a body that is only
                # iterable, a canned or adapted one, pays no call per chunk for it).
                async for chunk in chunks:
                    if waiting:
                        waiting = False
                        clock.close_first_output()
                    if watching:
                        clock.progress()
                    try:
                        deltas = agg.feed(chunk)
                    except MalformedStreamError as exc:  # L19: a bad payload ends the stream
                        visible = await events.deliver(exc.deltas) or visible
                        error = _malformed(exc)
                        break
                    if deltas:
                        if active:
                            visible = await events.deliver(deltas) or visible
                        else:  # L70: no sink, nothing to await
                            visible = visible or events.seen(deltas)
        if error is None:
            deltas = wire.drain(agg)
            if deltas:
                visible = await events.deliver(deltas) or visible
    except ProviderError as exc:
        error = exc
    except (ConnectionError, EOFError) as exc:  # L19
        error = ProviderError(
            None, "CONNECTION", f"{type(exc).__name__}: {exc}", True, kind="connection"
        )
    except TimeoutError as exc:  # L19, L36
        error = ProviderError(
            None, "DEADLINE_EXCEEDED", f"the request timed out: {exc}", True, kind="timeout"
        )
    finally:
        if waiting:
            clock.close_first_output()
    if not active:  # L70: the aggregator's own flag, where it keeps one (R5)
        visible = wire.visible(agg) or visible
    return error, visible


def _malformed(exc: MalformedStreamError) -> ProviderError:
    return ProviderError(None, "MALFORMED_STREAM", str(exc), True, kind="malformed")


class _Sink:
    """What a pushing transport calls with each chunk (H11): the per-chunk work of
    :func:`_read_body`'s loop without a sink (L70), inside the read callback."""

    __slots__ = ("clock", "events", "feed", "seen", "waiting")

    def __init__(
        self, feed: Callable[[bytes], Any], clock: TurnClock, events: DeltaEvents, waiting: bool
    ) -> None:
        self.feed = feed
        self.clock = clock
        self.events = events
        self.waiting = waiting  # the first-output window is open (L22)
        self.seen = False  # visible output in the deltas (an aggregator without the flag)

    def __call__(self, chunk: bytes) -> None:
        clock = self.clock
        if self.waiting:
            self.waiting = False
            clock.close_first_output()
        if clock.watching:
            clock.progress()
        deltas = self.feed(chunk)
        if deltas and not self.seen:
            self.seen = self.events.seen(deltas)


class _Carry:
    """What a segment of a step hands the next one (L90, I29): the calls it left open.

    On generateContent a :class:`CallCarry` (the next aggregator starts with them);
    on Interactions a :class:`StepCarry` (the aggregate stays open for the events
    that continue them).
    """

    __slots__ = ("calls", "steps", "steps_api", "wire")

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.steps_api = isinstance(wire, InteractionsWire)
        self.calls: CallCarry | None = None
        self.steps: StepCarry | None = None

    def start(self, agg: Any, events: DeltaEvents) -> tuple[Any, Any]:
        """What the segment's body is fed to, and where its deltas go."""
        if self.calls is not None:
            self.calls.prime(agg)
            return agg, _Shown(events, self.calls.shown)
        if self.steps is not None:
            return self.steps.follow(agg), events
        return agg, events

    def cut(self, segments: list[Any], agg: Any) -> None:
        """L63: the segment cut off where it is (and the calls it was continuing)."""
        wire = self.wire
        if self.steps is not None:
            segments[self.steps.slot] = wire.result(self.steps.agg.snapshot())
        result = wire.result(agg.snapshot())
        segments.append(result if self.calls is None else self.calls.result(result))

    def end(
        self, segments: list[Any], agg: Any, error: ProviderError | None, hop: int, resumes: int
    ) -> Any:
        """Append the segment's result; the aggregate kept open for the next one (I29: a
        segment follows and a call step is open), as it stands, or None."""
        wire = self.wire
        if self.steps is not None:
            # I29, I30: the continued calls as far as this segment took them (unfinished else)
            segments[self.steps.slot] = wire.result(self.steps.agg.close())
            self.steps = None
        result = keep = None
        if self.steps_api and (error is None or error.kind in _DROPS):
            raw = agg.snapshot()
            if raw.unfinished_calls:
                shown = wire.result(raw)
                if _follows(shown, error, hop, resumes):
                    result, keep = shown, raw
        if result is None:
            result = wire.result(agg.close())
        segments.append(result if self.calls is None else self.calls.result(result))
        return keep

    def hand_on(self, agg: Any, keep: Any, segments: list[Any]) -> None:
        """A segment follows the last one: carry the calls that one left open."""
        calls, self.calls = self.calls, None
        if keep is not None:
            self.steps = StepCarry(agg, keep, len(segments) - 1)
        elif not self.steps_api and segments[-1].unfinished_calls:
            self.calls = CallCarry(segments[-1], () if calls is None else calls.shown)


class _Shown:
    """The deltas of a segment that continues carried calls (L90), each carried call's
    under the part where the caller saw it start (``ToolCallDelta.part``, L30)."""

    __slots__ = ("emit", "events", "shown", "step")

    def __init__(self, events: DeltaEvents, shown: list[int]) -> None:
        self.events = events
        self.emit = events.emit
        self.step = events.step
        self.shown = shown

    def seen(self, deltas: list[Any]) -> bool:
        return self.events.seen(deltas)

    async def deliver(self, deltas: list[Any]) -> bool:
        shown = self.shown
        moved = [
            ArgDelta(d.candidate, shown[d.index], d.json_path, d.value)
            if type(d) is ArgDelta and not d.candidate and d.index < len(shown)
            else d
            for d in deltas
        ]
        return await self.events.deliver(moved)
