"""H10: the client, its default transport, FakeGemini and the turn loop run on any
asyncio event loop: asyncio's own and uvloop (tests/conftest.py runs this module,
the transport modules, the end-to-end modules and tests/loop/ on each loop installed)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

import fastagg
from conftest import event_loops
from fastagg.client import GeminiClient
from fastagg.testing import FakeGemini, call, chunk, final, signature, text
from fastagg.transport import AiohttpTransport

REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
CHUNKS = [chunk(text("Hello")), chunk(text(" world")), final(signature("s1"))]
BODY = b"".join(
    b"data: " + json.dumps(c, ensure_ascii=False, separators=(",", ": ")).encode() + b"\r\n\r\n"
    for c in CHUNKS
)
SIG = signature("call")


def loop_name() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build")
def test_h10_uvloop_is_among_the_loops_tested() -> None:
    # The test extra installs uvloop: without it the rows below would run on asyncio only.
    eager = ["asyncio-eager"] if sys.version_info >= (3, 12) else []
    assert sorted(event_loops()) == ["asyncio", *eager, "uvloop"]


async def test_h10_the_default_transport_streams_a_body_on_every_event_loop() -> None:
    async with (
        FakeGemini([CHUNKS, CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url) as client,
    ):
        assert isinstance(client.transport, AiohttpTransport)
        received = b""
        async with client.stream(REQUEST, timeout=None) as body:
            async for piece in body:
                received += piece
        async with client.stream(REQUEST, timeout=None) as body:
            again = b"".join([piece async for piece in body])
    assert loop_name() in event_loops()
    assert received == BODY
    assert again == BODY
    # H3: one kept-alive connection carried both requests.
    assert [r.peer for r in server.records] == [server.records[0].peer] * 2


async def test_h10_a_turn_with_a_tool_call_completes_on_every_event_loop() -> None:
    result, events = await a_turn_with_a_call()
    assert (result.stop_reason, result.text, result.tool_call_count) == (
        fastagg.StopReason.COMPLETED,
        "The value is K1.",
        1,
    )
    # L6: the signed call went back on its part, byte-exact.
    assert result.contents[1]["parts"][0]["thoughtSignature"] == SIG
    assert (events[0], events[-1]) == ("StepStart", "TurnEnd")


async def lookup(key: str) -> dict[str, str]:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return {"value": key.upper()}


async def a_turn_with_a_call() -> tuple[Any, list[str]]:
    """A turn of two steps (a signed call, then the answer) with every clock on and a
    sink: its result and the kinds of the events it emitted."""
    steps = [
        [chunk(call("lookup", {"key": "k1"}, id="c1", signature=SIG)), final()],
        [chunk(text("The value is K1.")), final(signature("answer"))],
    ]
    events: list[str] = []
    async with (
        FakeGemini(steps) as server,
        GeminiClient("gemini-3-flash-preview", api_key="k", base_url=server.url) as client,
    ):
        result = await fastagg.run_turn(
            client,
            list(REQUEST["contents"]),
            tools=[lookup],
            abort=asyncio.Event(),
            limits=fastagg.TurnLimits(turn_timeout=60, stall_timeout=30),
            on_event=lambda event: events.append(type(event).__name__),
        )
    return result, events


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory is Python 3.12+")
# uvloop's create_task does not take the factory's eager_start (uvloop 0.23, Python 3.13).
@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_h10_a_turn_runs_under_the_eager_task_factory() -> None:
    # An eager task runs inside create_task() up to its first wait: the turn's task
    # must need nothing that create_task() returns before it runs.
    plain, plain_events = await a_turn_with_a_call()
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined]
    try:
        eager, eager_events = await a_turn_with_a_call()
    finally:
        loop.set_task_factory(None)
    assert (eager.stop_reason, eager.text, eager.tool_call_count) == (
        fastagg.StopReason.COMPLETED,
        "The value is K1.",
        1,
    )
    assert eager.contents == plain.contents
    assert eager_events == plain_events  # the same events, in the same order
    assert (eager_events[0], eager_events[-1]) == ("StepStart", "TurnEnd")
