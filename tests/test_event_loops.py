"""H10: the client, its default transport, FakeGemini and the turn loop run on any
asyncio event loop: asyncio's own and uvloop (tests/conftest.py runs this module,
the transport modules, the end-to-end modules and tests/loop/ on each loop installed)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

import fastagg
from conftest import event_loops
from fastagg.client import GeminiClient
from fastagg.testing import FakeGemini, call, chunk, final, signature, text
from fastagg.transport import AsyncioTransport

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
    assert sorted(event_loops()) == ["asyncio", "uvloop"]


async def test_h10_the_default_transport_streams_a_body_on_every_event_loop() -> None:
    async with (
        FakeGemini([CHUNKS, CHUNKS]) as server,
        GeminiClient("m", api_key="k", base_url=server.url) as client,
    ):
        assert isinstance(client.transport, AsyncioTransport)
        received = b""
        async with client.stream(REQUEST, timeout=None) as body:
            async for piece in body:
                received += piece
        async with client.stream(REQUEST, timeout=None) as body:
            again = b"".join([piece async for piece in body])
    assert loop_name() in event_loops()
    assert received == BODY
    assert again == BODY
    # H8: one kept-alive connection carried both requests.
    assert [r.peer for r in server.records] == [server.records[0].peer] * 2


async def test_h10_a_turn_with_a_tool_call_completes_on_every_event_loop() -> None:
    steps = [
        [chunk(call("lookup", {"key": "k1"}, id="c1", signature=SIG)), final()],
        [chunk(text("The value is K1.")), final(signature("answer"))],
    ]

    async def lookup(key: str) -> dict[str, str]:
        """Look a key up.

        Args:
            key: what to look up.
        """
        return {"value": key.upper()}

    async with (
        FakeGemini(steps) as server,
        GeminiClient("gemini-3-flash-preview", api_key="k", base_url=server.url) as client,
    ):
        result = await fastagg.run_turn(client, list(REQUEST["contents"]), tools=[lookup])
    assert (result.stop_reason, result.text, result.tool_call_count) == (
        fastagg.StopReason.COMPLETED,
        "The value is K1.",
        1,
    )
    # L6: the signed call went back on its part, byte-exact.
    sent = server.records[1].body["contents"][1]["parts"][0]
    assert sent["thoughtSignature"] == SIG
