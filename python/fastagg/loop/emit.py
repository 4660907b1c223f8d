"""Delivering turn events to the caller's sink (L13, L13a, L30)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from .._fastagg import ArgDelta as _AggArgDelta
from .._fastagg import CallStart as _AggCallStart
from .._fastagg import TextDelta as _AggTextDelta
from ..events import AnswerDelta, Lifecycle, Phase, ThoughtDelta, ToolCallDelta, TurnEvent
from ..signatures import Backend
from .clock import TurnClock

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []


class Emitter:
    """The turn's event sink. ``active`` is False without one: no event is even built."""

    __slots__ = ("active", "clock", "max_steps", "provider", "sink")

    def __init__(
        self,
        sink: Callable[[TurnEvent], object] | None,
        clock: TurnClock,
        max_steps: int,
        provider: Backend,
    ) -> None:
        self.sink = sink
        self.active = sink is not None
        self.clock = clock
        self.max_steps = max_steps
        self.provider = provider

    async def __call__(self, event: TurnEvent) -> None:
        """Deliver ``event``; an awaitable the sink returns is awaited (L30)."""
        if self.sink is not None:
            result = self.sink(event)
            if result is not None and inspect.isawaitable(result):
                await result

    async def lifecycle(
        self,
        phase: Phase,
        step: int,
        tool_calls: int,
        tool_name: str | None = None,
        *,
        detail: str | None = None,
    ) -> None:
        if self.sink is not None:
            await self(
                Lifecycle(
                    phase,
                    step,
                    self.max_steps,
                    tool_name,
                    tool_calls,
                    self.clock.elapsed(),
                    # L13a: every Lifecycle event says where and when
                    provider=self.provider,
                    timestamp=time.time(),
                    detail=detail,
                )
            )


class DeltaEvents:
    """Turns one request's aggregator deltas into events (L13, L30)."""

    __slots__ = ("emit", "names", "step")

    def __init__(self, emit: Emitter, step: int) -> None:
        self.emit = emit
        self.step = step
        self.names: dict[int, str | None] = {}  # call names by part, for argument deltas

    def seen(self, deltas: list[Any]) -> bool:
        """Without a sink: only whether visible output came (L70: no event built, none awaited)."""
        for delta in deltas:
            kind = type(delta)
            if (
                (kind is _AggTextDelta and not delta.thought) or kind is _AggCallStart
            ) and not delta.candidate:
                return True
        return False

    async def deliver(self, deltas: list[Any]) -> bool:
        """Deliver text, thought and call deltas of candidate 0; True when visible output came."""
        if not self.emit.active:
            return self.seen(deltas)
        visible = False
        emit, step = self.emit, self.step
        for delta in deltas:
            kind = type(delta)
            if kind is _AggTextDelta:
                if delta.candidate:
                    continue
                if delta.thought:
                    await emit(ThoughtDelta(step, delta.text))
                else:
                    visible = True
                    await emit(AnswerDelta(step, delta.text))
            # L30: a streamed call is shown when first seen, then per argument fragment
            elif kind is _AggCallStart and not delta.candidate:
                visible = True
                self.names[delta.index] = delta.name
                await emit(ToolCallDelta(step, delta.index, delta.name, None, None))
            elif kind is _AggArgDelta and not delta.candidate:
                name = self.names.get(delta.index)
                await emit(ToolCallDelta(step, delta.index, name, delta.json_path, delta.value))
        return visible
