"""What both chaos tests share: their tools and the L13 event checks.

``tests/loop/test_chaos.py`` (generateContent, in process) and
``tests/e2e/test_e2e_interactions_chaos.py`` (Interactions, over loopback HTTP)
run random hostile turns against these tools and check each turn's events the
same way.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from fastagg import events as ev

__all__ = ["ABORT", "broken", "check_events", "halt", "weather"]


def weather(city: str) -> dict[str, Any]:
    """The weather in ``city``."""
    return {"city": city, "sky": "clear"}


def broken(n: int) -> int:
    """Always fails."""
    raise RuntimeError(f"broken tool called with {n}")


ABORT: list[asyncio.Event] = []  # the running turn's abort event: set it before each turn


def halt() -> str:
    """Stops the turn: the caller's abort, set from inside a step (L6)."""
    ABORT[-1].set()
    return "stopping"


def check_events(events: list[Any], result: Any) -> None:
    """L13: the events end with ``TurnEnd`` carrying ``result``; steps and tool calls pair up."""
    assert isinstance(events[-1], ev.TurnEnd) and events[-1].result is result
    open_step = None
    tools: Counter[tuple[int, int]] = Counter()
    for event in events:
        if isinstance(event, ev.StepStart):
            assert open_step is None, events
            open_step = (event.step, event.attempt)
        elif isinstance(event, ev.StepEnd):
            assert open_step == (event.step, event.attempt), events
            open_step = None
        elif isinstance(event, ev.ToolCallStart):
            tools[(event.step, event.index)] += 1
        elif isinstance(event, ev.ToolCallEnd):
            tools[(event.step, event.index)] -= 1
    assert open_step is None
    assert set(tools.values()) <= {0}, tools
