"""Turn loop: a cancellation swallowed below the loop does not carry the turn
past its abort, deadline or stall (turn-loop.md H14)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fastagg import events
from fastagg.limits import StopReason, TurnLimits
from fastagg.testing.chunks import signature
from scripted_model import USER, Reply, ScriptedModel, answer, sse, turn

TAIL = "I completed 0 tool calls before stopping; ask me to continue and I'll pick up from there."
MESSAGES = {
    "aborted": "This turn was stopped before I could finish. I completed 0 tool calls before stopping.",
    "time-limit": f"I had to stop after 0.1s — this turn hit its processing time limit. {TAIL}",
    "stalled": (
        "I had to stop because this turn made no progress for 0.05s — a tool or model call appears "
        f"to be stuck. {TAIL}"
    ),
}
LIMITS = {
    "aborted": TurnLimits(),
    "time-limit": TurnLimits(turn_timeout=0.1),
    "stalled": TurnLimits(stall_timeout=0.05),
}


class SwallowingModel(ScriptedModel):
    """A model client whose body, like a buggy SDK or an ``asyncio.wait_for`` on
    Python 3.10/3.11, swallows the cancellation that lands while it waits after
    the first chunk, then sends the rest of a complete answer."""

    def __init__(self, abort: asyncio.Event | None) -> None:
        super().__init__(answer("Half done.", sig=signature("a")))
        self.abort = abort
        self.swallowed = 0

    def stream(self, request: dict[str, Any], *, timeout: float | None) -> Any:
        super().stream(request, timeout=timeout)
        return _Swallowing(self)


class _Swallowing:
    def __init__(self, owner: SwallowingModel) -> None:
        self.owner = owner

    async def __aenter__(self) -> AsyncIterator[bytes]:
        self.owner.opened += 1
        return self._body()

    async def __aexit__(self, *exc: object) -> None:
        self.owner.closed += 1

    async def _body(self) -> AsyncIterator[bytes]:
        owner = self.owner
        first, *rest = owner.replies[0].events
        yield sse(first)
        if owner.abort is not None:
            owner.abort.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            owner.swallowed += 1  # and goes on as if nothing happened
        yield sse(*rest)


@pytest.mark.parametrize("sink", [False, True], ids=["no-sink", "sink"])
@pytest.mark.parametrize("cause", ["aborted", "time-limit", "stalled"])
async def test_h14_a_swallowed_cancellation_still_ends_the_turn_with_its_cause(
    cause: str, sink: bool
) -> None:
    abort = asyncio.Event() if cause == "aborted" else None
    model = SwallowingModel(abort)
    seen: list[type] = []
    result = await turn(
        model,
        abort=abort,
        limits=LIMITS[cause],
        on_event=(lambda e: seen.append(type(e))) if sink else None,
    )
    assert model.swallowed == 1
    assert result.stop_reason is StopReason(cause)
    assert result.message == MESSAGES[cause]
    # L20: the cut-off request's output is not appended; its text still counts.
    assert result.text == f"Half done.\n\n{MESSAGES[cause]}"
    assert result.finish_reason is None
    assert result.contents == USER
    assert len(model.requests) == 1
    if sink:
        assert events.StepEnd in seen and events.TurnEnd in seen


async def test_h14_an_answer_that_completes_untouched_is_not_affected() -> None:
    model = ScriptedModel(Reply(answer("Half done.", sig=signature("a")).events))
    result = await turn(model)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.text == "Half done."
