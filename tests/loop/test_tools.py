"""Turn loop tools: execution (turn-loop.md L5) and schemas derived by ``@tool``."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, TypedDict

import pytest

from fastagg import events
from fastagg.limits import StopReason, TurnLimits
from fastagg.tools import Tool, ToolContext, tool
from scripted_model import ScriptedModel, answer, calls, turn


def responses(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in request["contents"][-1]["parts"]]


# -- L5 execution --------------------------------------------------------------


async def test_l5_calls_run_concurrently_and_answer_in_call_order() -> None:
    started: list[str] = []
    both_started = asyncio.Event()

    async def first() -> str:
        started.append("first")
        await asyncio.wait_for(both_started.wait(), 1.0)
        await asyncio.sleep(0.02)
        return "one"

    async def second() -> str:
        started.append("second")
        both_started.set()
        return "two"

    model = ScriptedModel(calls(("first", {}), ("second", {}), seed="c"), answer("Ok."))
    seen: list[Any] = []
    result = await turn(model, tools=[first, second], on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    assert responses(model.requests[1]) == [
        {"id": "c-0", "name": "first", "response": {"output": "one"}},
        {"id": "c-1", "name": "second", "response": {"output": "two"}},
    ]
    ends = [e.name for e in seen if isinstance(e, events.ToolCallEnd)]
    assert ends == ["second", "first"]


async def test_l46_a_single_call_runs_in_the_turn_task_several_in_their_own() -> None:
    tasks: dict[str, list[asyncio.Task[Any] | None]] = {"tool": [], "event": []}

    async def where(label: str) -> str:
        tasks["tool"].append(asyncio.current_task())
        return label

    def on_event(event: Any) -> None:
        if isinstance(event, events.ToolCallStart):
            tasks["event"].append(asyncio.current_task())

    model = ScriptedModel(
        calls(("where", {"label": "alone"}), seed="a"),
        calls(("where", {"label": "x"}), ("where", {"label": "y"}), seed="b"),
        answer("Done."),
    )
    result = await turn(model, tools=[where], on_event=on_event)
    assert result.stop_reason is StopReason.COMPLETED
    assert [r["response"] for r in responses(model.requests[1])] == [{"output": "alone"}]
    turn_task = tasks["event"][0]
    assert tasks["event"] == [turn_task] * 3
    assert tasks["tool"][0] is turn_task
    assert turn_task not in tasks["tool"][1:]
    assert tasks["tool"][1] is not tasks["tool"][2]


async def test_l5_l26_exception_and_unknown_tool_become_error_responses() -> None:
    def broken(x: int) -> int:
        raise ValueError(f"cannot handle {x}")

    model = ScriptedModel(calls(("broken", {"x": 3}), ("missing", {}), seed="e"), answer("Sorry."))
    seen: list[Any] = []
    result = await turn(model, tools=[broken], on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    assert responses(model.requests[1]) == [
        {"id": "e-0", "name": "broken", "response": {"error": "ValueError: cannot handle 3"}},
        {
            "id": "e-1",
            "name": "missing",
            "response": {"error": "Unknown tool 'missing'. Available tools: broken."},
        },
    ]
    assert [e.status for e in seen if isinstance(e, events.ToolCallEnd)] == ["error", "error"]
    assert result.tool_call_count == 2


async def test_l5_tool_timeout_gives_an_error_response_and_the_turn_completes() -> None:
    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    model = ScriptedModel(calls(("slow", {}), seed="t"), answer("It took too long."))
    seen: list[Any] = []
    result = await turn(
        model, tools=[slow], on_event=seen.append, limits=TurnLimits(tool_timeout=0.05)
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert responses(model.requests[1]) == [
        {
            "id": "t-0",
            "name": "slow",
            "response": {"error": "slow timed out after 0.05s and was stopped"},
        }
    ]
    assert [e.status for e in seen if isinstance(e, events.ToolCallEnd)] == ["timeout"]
    lifecycle = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert [(e.phase, e.tool_name) for e in lifecycle] == [("tool-timeout", "slow")]


async def test_l5_l85_sync_tools_run_in_a_worker_thread_and_see_cancellation() -> None:
    threads: list[str] = []
    flags: list[bool] = []
    done = threading.Event()

    def blocking(ctx: ToolContext) -> str:
        threads.append(threading.current_thread().name)
        flags.append(ctx.cancelled.wait(5.0))
        done.set()
        return "stopped early"

    model = ScriptedModel(calls(("blocking", {})), answer("Ok."))
    # 0.3 s: a worker thread a loaded machine starts late still picks the call up before
    # its timeout (a call cancelled while queued never runs, and this test waits for it)
    result = await turn(model, tools=[Tool("blocking", blocking, timeout=0.3)])
    assert result.stop_reason is StopReason.COMPLETED
    # L85: the turn does not wait for the thread, which was still running when it moved on
    assert responses(model.requests[1])[0]["response"] == {
        "error": "blocking timed out after 0.3s and is still running in its thread (a sync "
        "function cannot be stopped); its result will be ignored"
    }
    assert await asyncio.to_thread(done.wait, 5.0)
    assert threads and threads[0] != threading.main_thread().name
    assert flags == [True]


class Unit(Enum):
    C = "celsius"
    F = "fahrenheit"


@dataclass
class Place:
    city: str
    country: str = "FR"


async def test_l5_results_are_made_json_and_arguments_converted() -> None:
    got: list[Any] = []

    @tool
    def weather(place: Place, unit: Unit = Unit.C) -> Any:
        got.append((place, unit))
        return {"temps": (18, 19), "unit": unit}

    model = ScriptedModel(
        calls(("weather", {"place": {"city": "Paris"}, "unit": "fahrenheit"})), answer("Ok.")
    )
    await turn(model, tools=[weather])
    assert got == [(Place("Paris", "FR"), Unit.F)]
    assert responses(model.requests[1])[0]["response"] == {
        "output": {"temps": [18, 19], "unit": "fahrenheit"}
    }


def test_l5_duplicate_and_invalid_tool_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="not a valid Gemini function name"):
        Tool("bad name", lambda: None)
    from fastagg.loop import _tool_map

    def f() -> None: ...

    with pytest.raises(ValueError, match="two tools are named 'f'"):
        _tool_map([f, f])


# -- @tool schemas ---------------------------------------------------------------


class Color(Enum):
    RED = "red"
    GREEN = "green"


@dataclass
class Point:
    """A point.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: float
    y: float = 0.0
    tags: list[str] = field(default_factory=list)


class Filter(TypedDict, total=False):
    field: str
    values: list[int]


def test_l47_derivation_runs_once_per_function_and_each_tool_owns_its_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fastagg.tools as tools_module

    derived: list[Any] = []
    real = tools_module._derive

    def counting(fn: Any) -> Any:
        derived.append(fn)
        return real(fn)

    monkeypatch.setattr(tools_module, "_derive", counting)

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up.
        """
        return key

    first, second = Tool.from_function(lookup), Tool.from_function(lookup)
    assert derived == [lookup]
    assert (
        first.parameters
        == second.parameters
        == {
            "type": "object",
            "properties": {"key": {"type": "string", "description": "what to look up."}},
            "required": ["key"],
        }
    )
    first.parameters["properties"]["key"]["description"] = "changed"
    assert second.parameters["properties"]["key"]["description"] == "what to look up."
    assert Tool.from_function(lookup).parameters["properties"]["key"]["description"] == (
        "what to look up."
    )


def test_l29_tool_schema_of_scalars_with_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False, boost: float = 1.0) -> list[str]:
        """Search the catalogue.

        Longer explanation.

        Args:
            query: Words to look for.
            limit: At most this many results,
                counted after filtering.
            exact (bool): Match whole words only.

        Returns:
            The matching titles.
        """
        return []

    assert search.declaration() == {
        "name": "search",
        "description": "Search the catalogue.\n\nLonger explanation.",
        "parametersJsonSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": {
                    "type": "integer",
                    "description": "At most this many results, counted after filtering.",
                },
                "exact": {"type": "boolean", "description": "Match whole words only."},
                "boost": {"type": "number"},
            },
            "required": ["query"],
        },
    }


def test_l29_tool_schema_of_containers_optional_literal_enum() -> None:
    def f(
        names: list[str],
        scores: dict[str, float],
        anything: dict,
        maybe: int | None,
        also: str | None,
        mode: Literal["fast", "slow"],
        color: Color,
        colors: list[Color] | None = None,
        maybe_color: Color | None = None,
        ctx: ToolContext | None = None,
    ) -> None: ...

    schema = Tool("f", f).parameters
    assert schema == {
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"type": "string"}},
            "scores": {"type": "object", "additionalProperties": {"type": "number"}},
            "anything": {"type": "object"},
            "maybe": {"type": ["integer", "null"]},
            "also": {"type": ["string", "null"]},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "color": {"type": "string", "enum": ["red", "green"]},
            "colors": {
                "type": ["array", "null"],
                "items": {"type": "string", "enum": ["red", "green"]},
            },
            "maybe_color": {
                "anyOf": [{"type": "string", "enum": ["red", "green"]}, {"type": "null"}]
            },
        },
        "required": ["names", "scores", "anything", "maybe", "also", "mode", "color"],
    }


def test_l29_tool_schema_of_nested_dataclass_and_typeddict() -> None:
    def draw(at: Point, where: Filter, path: list[Point]) -> None:
        """Draw.

        Args:
            at: Where to draw.
        """

    point = {
        "type": "object",
        "properties": {
            "x": {"type": "number", "description": "Horizontal position."},
            "y": {"type": "number", "description": "Vertical position."},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["x"],
    }
    assert Tool("draw", draw).parameters == {
        "type": "object",
        "properties": {
            "at": {**point, "description": "Where to draw."},
            "where": {
                "type": "object",
                "properties": {
                    "field": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "integer"}},
                },
            },
            "path": {"type": "array", "items": point},
        },
        "required": ["at", "where", "path"],
    }


def test_l29_tool_schema_context_parameter_is_hidden() -> None:
    async def fetch(url: str, ctx: ToolContext) -> str:
        return url

    t = Tool("fetch", fetch)
    assert t.wants_context
    assert t.parameters == {
        "type": "object",
        "properties": {"url": {"type": "string"}},
        "required": ["url"],
    }


def test_l29_tool_without_parameters_declares_none() -> None:
    def now() -> str:
        """The current time."""
        return "noon"

    assert Tool("now", now).declaration() == {"name": "now", "description": "The current time."}


@dataclass
class Node:
    child: Node | None = None


def test_l29_tool_schema_rejects_unsupported_and_recursive_types() -> None:
    def f(node: Node) -> None: ...

    with pytest.raises(TypeError, match="recursive type Node"):
        Tool("f", f)

    def g(pair: tuple[int, str]) -> None: ...

    with pytest.raises(TypeError, match="fixed-length tuples"):
        Tool("g", g)


def test_l29_tool_decorator_with_options_and_explicit_schema() -> None:
    @tool(name="lookup_v2", timeout=5.0)
    async def lookup(q: str) -> str:
        return q

    assert (lookup.name, lookup.timeout) == ("lookup_v2", 5.0)
    explicit = Tool(
        "raw", lambda **kw: kw, "Raw.", {"type": "object", "properties": {"a": {"type": "string"}}}
    )
    assert explicit.declaration() == {
        "name": "raw",
        "description": "Raw.",
        "parametersJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
