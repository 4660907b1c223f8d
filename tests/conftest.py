"""Shared fixtures: both aggregator implementations and the conformance file."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from random_budget import examples

ROOT = Path(__file__).resolve().parent.parent
# Vendored from the project's shared folder; tests/test_vendored.py notices drift.
SCENARIOS = ROOT / "tests" / "conformance" / "scenarios.json"

try:  # the framework venvs of .ci/run have no hypothesis: none of their tests needs it
    from hypothesis import settings
except ImportError:  # pragma: no cover - depends on the venv
    pass
else:  # random tests without a count of their own run examples(20) (hypothesis's is 100)
    settings.register_profile("fastagg", max_examples=examples(20))
    settings.load_profile("fastagg")

IMPLS = {"rust": "fastagg._fastagg", "reference": "fastagg.reference"}
# The sys.path entry this process imports fastagg from, for the subprocesses tests start:
# the checkout's python/ in the dev venv, site-packages where a wheel is installed (a
# venv of another Python version: the checkout holds this version's extension only).
FASTAGG_PATH = str(Path(importlib.import_module("fastagg").__file__ or "").resolve().parent.parent)


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module of one aggregator implementation (Rust core or pure-Python twin)."""
    return importlib.import_module(IMPLS[request.param])


def load_scenarios() -> list[dict[str, Any]]:
    with SCENARIOS.open("rb") as fh:
        return json.load(fh)


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    """The name of one built-in HTTP transport of GeminiClient (H3: tests run on each)."""
    return str(request.param)


# H10: what talks HTTP or runs the turn loop on a real event loop runs on each
# event loop installed: asyncio's own, and uvloop (the loop of uvicorn and most ASGI
# servers: its transports are not asyncio's classes, its clock counts milliseconds).
EVENT_LOOP_MODULES = frozenset(
    {
        "test_transport.py",
        "test_http_client.py",
        "test_fake_server.py",
        "test_event_loops.py",
        "test_pump.py",
        "test_genai_chats.py",
    }
)
EVENT_LOOP_DIRS = frozenset({ROOT / "tests" / d for d in ("loop", "e2e", "integrations")})


def event_loops() -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The event loops installed here, by name: asyncio's; from Python 3.12 asyncio's
    with the eager task factory, whose tasks run inside create_task(); uvloop where
    present."""
    loops: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
    if sys.version_info >= (3, 12):
        loops["asyncio-eager"] = _eager_loop
    try:
        import uvloop
    except ImportError:
        return loops
    loops["uvloop"] = uvloop.new_event_loop
    return loops


def _eager_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    return loop


@pytest.hookimpl(optionalhook=True)
def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's hook (1.4+): the loops an async test runs on (H10)."""
    if item.path.name in EVENT_LOOP_MODULES or item.path.parent in EVENT_LOOP_DIRS:
        return event_loops()
    return {"asyncio": asyncio.new_event_loop}


class LoopThread:
    """An event loop running in a thread of its own: a server started on it outlives
    the loops of the code under test (one ``asyncio.run()`` after another)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """``coro``'s result, run on this loop (10 s at most)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture
def pump_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The status of every response ``GeminiClient.run`` pumped (H11), in order."""
    from fastagg.client import gemini as interactions_client

    calls: list[int] = []
    pump = interactions_client.pump

    async def counted(body: Any, feed: Callable[[bytes], object]) -> None:
        calls.append(body.status)
        await pump(body, feed)

    monkeypatch.setattr(interactions_client, "pump", counted)
    return calls
