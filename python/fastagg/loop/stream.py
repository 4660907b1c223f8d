"""One model request: send it, aggregate its stream, deliver its deltas (L13, L19, L20, L36),
through its long-decode hops and resumes (L56-L62, I26).

:class:`ModelStream` drives one request of a step: a hop that ends with a
continuation token is followed by the same request with the token, a drop
after a checkpoint token (or of a stored interaction) is resumed, and the
segments read are one result (:class:`~fastagg.continuation.Hops`).
:func:`_read_body` reads one response body into an aggregator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from .._json import Request
from ..continuation import MAX_HOPS, MAX_RESUMES, Hops, checkpoint_token, hop_request, hop_token
from ..errors import MalformedStreamError, ProviderError
from ..events import Phase
from ..model import ModelClient
from .clock import TurnClock
from .emit import DeltaEvents
from .messages import describe
from .usage import UsageMeter
from .wire import Wire

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
        visible = False
        sent, wait = request, timeout
        hop = 1
        resumes = 0
        while True:
            agg = wire.aggregator(events.emit.active)
            body = self.model.stream(sent, timeout=wait)
            while True:
                try:
                    error, seen = await _read_body(body, agg, wire, self.clock, events)
                    clock = self.clock
                    if clock.cause is not None or clock.caller_cancelled:  # L71: no frame
                        # H14: cancelled, and the cancellation swallowed below (a model
                        # client's, an SDK's): the body ran on, the cause still holds.
                        raise asyncio.CancelledError
                    visible = visible or seen
                    dropped = error is not None and error.kind in _DROPS
                    partial: Any = agg.snapshot() if dropped else None
                    # I26: a stored interaction is resumed where it dropped, into the same
                    # aggregate.
                    if dropped and resumes < MAX_RESUMES and wire.resumable(request, partial):
                        resumes += 1
                        agg.reconnect()
                        detail = _resumed(error, resumes)
                        wait = await self._next("stream-resume", step, detail, timeout)
                        body = self.model.resume(  # type: ignore[attr-defined]
                            partial.interaction_id, partial.last_event_id, timeout=wait
                        )
                        continue
                except asyncio.CancelledError:  # L63: this aggregate's part, cut where it is
                    segments.append(wire.result(agg.snapshot()))
                    self.usage.record(segments[-1].usage)
                    raise
                break
            result = wire.result(agg.close())
            self.usage.record(result.usage)  # L61: each hop's usage is its own request's
            segments.append(result)
            if error is not None:
                # L64: an error ends the hops, unless L59 resumes from the checkpoint that
                # covers everything received (L80).
                token = checkpoint_token(result) if dropped else None
                if token is None or resumes >= MAX_RESUMES:
                    return view(segments), error, visible
                resumes += 1
                sent = hop_request(request, result, token)
                detail = _resumed(error, resumes)
                wait = await self._next("continuation-resume", step, detail, timeout)
                continue
            token = hop_token(result)
            if token is None or hop >= MAX_HOPS:  # L61: the last hop is classified as it is
                return view(segments), None, visible
            hop += 1
            resumes = 0
            sent = hop_request(request, result, token)  # L58: never the partial output
            wait = await self._next("continuation", step, f"L56: hop {hop} of step {step}", timeout)
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


def view(segments: list[Any]) -> Any:
    """The result of a request read in ``segments`` (L57: the hops as one)."""
    return segments[0] if len(segments) == 1 else Hops(segments)


def _resumed(error: ProviderError | None, n: int) -> str:
    assert error is not None
    return f"L59: resume {n} of {MAX_RESUMES} after {describe(error)}"


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
                finally:
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
