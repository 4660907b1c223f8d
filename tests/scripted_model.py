"""A ``ModelClient`` test double for the turn loop: replays scripted raw SSE bytes per request.

Each request gets the next :class:`Reply` of the script. A reply is a list of
``GenerateContentResponse`` dicts (built with ``fastagg.testing.chunks``),
framed as the service frames them (``data: …\\r\\n\\r\\n``), one chunk per event,
split into small pieces or all in one chunk; and it can fail on command: raise a
``ProviderError`` on connect (HTTP status, Retry-After), hang before the first
byte, stall forever after chunk N, pause after chunk N, drop the connection
after chunk N. The double records every request (a deep copy, as sent), the
timeout it was given and when it came, and counts opened and closed responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from fastagg.errors import ProviderError
from fastagg.loop import run_turn
from fastagg.request import check_request
from fastagg.testing.chunks import call, chunk, final, signature, text, thought, usage

__all__ = [
    "USER",
    "Reply",
    "ScriptedModel",
    "answer",
    "assert_replayable",
    "calls",
    "pending_tasks",
    "sse",
    "turn",
]


def sse(*events: dict[str, Any]) -> bytes:
    """The raw ``alt=sse`` body of ``events``, CRLF framed as the service sends it."""
    return b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in events)


@dataclass
class Reply:
    """What the model sends back for one request."""

    events: list[dict[str, Any]] = field(default_factory=list)
    error: ProviderError | None = None  # raised when the response is opened (an HTTP error)
    delay: float = 0.0  # before the first byte
    hang: bool = False  # never sends a byte
    stall_after: int | None = None  # hang forever after this many events
    pause_after: dict[int, float] = field(default_factory=dict)  # seconds to wait after event N
    drop_after: int | None = None  # connection drops after this many events
    piece: int | None = None  # split the body into writes of this many bytes
    together: bool = False  # the events (up to a drop) as ONE body chunk, as a fast server sends
    raw: bytes = b""  # extra bytes sent after the events (e.g. a bad payload)


class ScriptedModel:
    """Replays one :class:`Reply` per request; fails the test on an unexpected request."""

    def __init__(self, *replies: Reply, model: str = "gemini-3-flash-preview") -> None:
        self.model = model
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.timeouts: list[float | None] = []
        self.times: list[float] = []
        self.opened = 0
        self.closed = 0
        self.on_request: Callable[[int], None] | None = None

    def stream(self, request: dict[str, Any], *, timeout: float | None) -> _Response:
        n = len(self.requests)
        self.requests.append(orjson.loads(orjson.dumps(request)))
        self.timeouts.append(timeout)
        self.times.append(asyncio.get_running_loop().time())
        if n >= len(self.replies):
            raise AssertionError(f"unexpected request #{n + 1}: the script has {len(self.replies)}")
        if self.on_request is not None:
            self.on_request(n)
        return _Response(self, self.replies[n])


class _Response:
    def __init__(self, owner: ScriptedModel, reply: Reply) -> None:
        self.owner = owner
        self.reply = reply
        self.body: AsyncIterator[bytes] | None = None

    async def __aenter__(self) -> AsyncIterator[bytes]:
        if self.reply.error is not None:
            raise self.reply.error
        self.owner.opened += 1
        self.body = self._body()
        return self.body

    async def __aexit__(self, *exc: object) -> None:
        assert self.body is not None
        await self.body.aclose()  # type: ignore[attr-defined]
        self.owner.closed += 1

    async def _body(self) -> AsyncIterator[bytes]:
        reply = self.reply
        if reply.hang:
            await asyncio.Event().wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.together:
            yield sse(*reply.events[: reply.drop_after])
            if reply.drop_after is not None:
                raise _dropped()
        for n, event in enumerate(() if reply.together else reply.events):
            if reply.stall_after is not None and n == reply.stall_after:
                await asyncio.Event().wait()
            if reply.drop_after is not None and n == reply.drop_after:
                raise _dropped()
            data = sse(event)
            step = reply.piece or len(data)
            for i in range(0, len(data), step):
                yield data[i : i + step]
            if n + 1 in reply.pause_after:
                await asyncio.sleep(reply.pause_after[n + 1])
        if reply.stall_after is not None and reply.stall_after >= len(reply.events):
            await asyncio.Event().wait()
        if reply.drop_after is not None and reply.drop_after >= len(reply.events):
            raise _dropped()
        if reply.raw:
            yield reply.raw


def _dropped() -> ProviderError:
    return ProviderError(None, "CONNECTION", "connection reset by peer", True, kind="connection")


def answer(words: str, *, sig: str | None = None, prompt: int = 10, out: int = 5) -> Reply:
    """A text answer in two chunks, ending with the signed empty part and STOP."""
    head, _, tail = words.partition(" ")
    events = [chunk(text(head + (" " if tail else "")))]
    if tail:
        events.append(chunk(text(tail)))
    events.append(final(sig or signature(words), usage=usage(prompt, out)))
    return Reply(events)


def calls(
    *specs: tuple[str, dict[str, Any]], seed: str = "s", prompt: int = 10, out: int = 5
) -> Reply:
    """One step of parallel calls ``(name, args)``; the first one signed; ids ``{seed}-{i}``."""
    parts = [
        call(name, args, id=f"{seed}-{i}", signature=signature(seed) if i == 0 else None)
        for i, (name, args) in enumerate(specs)
    ]
    return Reply(
        [chunk(thought("Planning.")), chunk(*parts, finish_reason="STOP", usage=usage(prompt, out))]
    )


def pending_tasks() -> list[asyncio.Task[Any]]:
    """Tasks other than the current one that are not done (L14)."""
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and not t.done()]


USER: list[dict[str, Any]] = [
    {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]}
]


async def turn(
    model: ScriptedModel, contents: list[dict[str, Any]] | None = None, **kwargs: Any
) -> Any:
    """``run_turn`` plus the L14 checks made the moment it returns."""
    result = await run_turn(model, list(USER) if contents is None else contents, **kwargs)
    assert pending_tasks() == []
    assert model.closed == model.opened
    return result


def assert_replayable(contents: list[dict[str, Any]]) -> None:
    """The transcript plus a new user message passes the request guard (L2)."""
    check_request({"contents": [*contents, {"role": "user", "parts": [{"text": "continue"}]}]})
