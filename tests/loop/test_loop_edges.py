"""Loop edges found by the issue-37 probes (turn-loop.md, "Loop edges"): one section per rule."""

from __future__ import annotations

import asyncio
import contextvars
import math
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import FASTAGG_PATH
from fastagg import GeminiClient, events
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import FINAL_ANSWER_NOTE, run_turn
from fastagg.request import strip_signatures
from fastagg.signatures import Origin
from fastagg.testing import FakeGemini
from fastagg.testing.chunks import call, chunk, final, signature, text
from fastagg.tools import Tool
from interactions_turns import ANSWER, CALLS, get_weather
from scripted_model import (
    Reply,
    ScriptedModel,
    answer,
    assert_replayable,
    calls,
    turn,
)

TESTS = Path(__file__).resolve().parent.parent


def responses(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for p in request["contents"][-1]["parts"]]


# -- L81: an abort before a tool starts -------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_l81_abort_set_in_a_tool_call_start_handler_runs_no_tool(kind: str) -> None:
    ran = threading.Event()

    def send_sync(to: str) -> str:
        ran.set()
        return "sent"

    async def send_async(to: str) -> str:
        ran.set()
        return "sent"

    abort = asyncio.Event()
    seen: list[Any] = []

    def on_event(event: Any) -> None:
        seen.append(event)
        if isinstance(event, events.ToolCallStart):
            abort.set()  # synchronously: the watcher task has not run yet

    fn = send_sync if kind == "sync" else send_async
    model = ScriptedModel(calls(("send", {"to": "bob"}), seed="a"))
    result = await turn(model, tools=[Tool("send", fn)], abort=abort, on_event=on_event)
    assert result.stop_reason is StopReason.ABORTED
    assert result.tool_call_count == 0
    assert result.contents[-1] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "a-0", "name": "send", "response": {"error": "aborted"}}}
        ],
    }
    ends = [(e.name, e.status) for e in seen if isinstance(e, events.ToolCallEnd)]
    assert ends == [("send", "aborted")]
    # a sync tool would have been handed to a thread: give one every chance to show up
    assert not await asyncio.to_thread(ran.wait, 0.5)
    assert_replayable(result.contents)


async def test_l81_abort_set_in_a_duplicate_call_id_handler_runs_no_tool() -> None:
    ran: list[str] = []

    async def lookup(q: str) -> str:
        ran.append(q)
        return q.upper()

    abort = asyncio.Event()

    def on_event(event: Any) -> None:
        if isinstance(event, events.Lifecycle) and event.phase == "duplicate-call-id":
            abort.set()

    # two calls under one id with different arguments: both would run (L39)
    step = Reply(
        [
            chunk(
                call("lookup", {"q": "a"}, id="same", signature=signature("d")),
                call("lookup", {"q": "b"}, id="same"),
                finish_reason="STOP",
            )
        ]
    )
    model = ScriptedModel(step)
    result = await turn(model, tools=[lookup], abort=abort, on_event=on_event)
    assert result.stop_reason is StopReason.ABORTED
    assert ran == []
    assert [p["functionResponse"]["response"] for p in result.contents[-1]["parts"]] == [
        {"error": "aborted"},
        {"error": "aborted"},
    ]
    assert result.tool_call_count == 0


# -- L82: the final answer after the step cap reports its own finish ------------------


def runaway(n: int) -> list[Reply]:
    return [calls(("lookup", {"q": str(i)}), seed=f"s{i}") for i in range(n)]


async def lookup(q: str) -> dict[str, Any]:
    """Look something up.

    Args:
        q: What to look up.
    """
    return {"found": q.upper()}


async def test_l82_a_final_answer_cut_at_max_tokens_reports_its_own_finish() -> None:
    cut = Reply([chunk(text("The best I have: Paris is")), final(finish_reason="MAX_TOKENS")])
    model = ScriptedModel(*runaway(1), cut)
    seen: list[Any] = []
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1), on_event=seen.append)
    assert result.stop_reason is StopReason.STEP_CAP
    assert (result.raw_finish_reason, result.finish_reason) == ("MAX_TOKENS", "length")
    assert result.text == "The best I have: Paris is"
    assert result.contents[-2] == {"role": "user", "parts": [{"text": FINAL_ANSWER_NOTE}]}
    assert result.contents[-1]["parts"][0] == {"text": "The best I have: Paris is"}
    ends = [(e.step, e.raw_finish_reason, e.outcome) for e in seen if isinstance(e, events.StepEnd)]
    assert ends == [(1, "STOP", "tool-calls"), (2, "MAX_TOKENS", "final-answer")]


async def test_l82_a_final_answer_without_a_finish_reason_is_not_appended() -> None:
    cut = Reply([chunk(text("Half an answer"))])  # the stream ends with no finish reason
    model = ScriptedModel(*runaway(1), cut)
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1))
    assert result.stop_reason is StopReason.STEP_CAP
    assert (result.raw_finish_reason, result.finish_reason) == (None, "tool-calls")
    # never a trailing model turn from a cut-off request (L3.4, L20); its text still counts
    assert result.contents == model.requests[1]["contents"][:-1]
    assert result.contents[-1]["role"] == "user"
    message = result.message
    assert message is not None and message.startswith("I gathered information across 1 tool")
    assert result.text == f"Half an answer\n\n{message}"
    assert_replayable(result.contents)


async def test_l82_a_malformed_final_answer_is_a_failed_one() -> None:
    bad = Reply([chunk(text("Let me call")), final(finish_reason="MALFORMED_FUNCTION_CALL")])
    model = ScriptedModel(*runaway(1), bad)
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1))
    assert result.stop_reason is StopReason.STEP_CAP
    assert (result.raw_finish_reason, result.finish_reason) == (
        "MALFORMED_FUNCTION_CALL",
        "tool-calls",
    )
    assert result.contents == model.requests[1]["contents"][:-1]
    assert result.text == f"Let me call\n\n{result.message}"


async def test_l82_an_empty_final_answer_reports_its_own_raw_finish() -> None:
    model = ScriptedModel(*runaway(1), Reply([final(finish_reason="SAFETY")]))
    result = await turn(model, tools=[lookup], limits=TurnLimits(max_steps=1))
    assert result.stop_reason is StopReason.STEP_CAP
    assert (result.raw_finish_reason, result.finish_reason) == ("SAFETY", "tool-calls")


def interactions(server: FakeGemini) -> GeminiClient:
    return GeminiClient("gemini-3.8-flash", api_key="k", base_url=server.url, api="interactions")


async def test_l82_a_completed_final_answer_on_interactions_reports_completed() -> None:
    async with (
        FakeGemini([], interactions=[CALLS, ANSWER]) as server,
        interactions(server) as model,
    ):
        result = await asyncio.wait_for(
            turn_on(model, tools=[get_weather], limits=TurnLimits(max_steps=1)), 30
        )
    assert result.stop_reason is StopReason.STEP_CAP
    assert result.text == "Paris: 18 C, clear. London: 12 C, rain."
    assert (result.raw_finish_reason, result.finish_reason) == ("completed", "stop")


async def turn_on(model: Any, **kwargs: Any) -> Any:
    user = [{"role": "user", "parts": [{"text": "Weather in Paris and London?"}]}]
    return await run_turn(model, user, **kwargs)


# -- L83: a stripped signature is not sent on the Interactions API --------------------

FOREIGN_SIG = "Zm9yZWlnbi1zaWduYXR1cmU="
FOREIGN = {
    "role": "model",
    "parts": [
        {"text": "Greeting the user", "thought": True, "thoughtSignature": FOREIGN_SIG},
        {"text": "Hello."},
    ],
    "interaction": {
        "id": "v1_elsewhere",
        "steps": [
            {
                "type": "thought",
                "summary": [{"type": "text", "text": "Greeting the user"}],
                "signature": FOREIGN_SIG,
            },
            {"type": "model_output", "content": [{"type": "text", "text": "Hello."}]},
        ],
    },
}
HISTORY = [
    {"role": "user", "parts": [{"text": "Hi"}]},
    FOREIGN,
    {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]},
]
ORIGINS = [None, Origin("gemini-2.5-flash"), None]


@pytest.mark.parametrize("store", [False, True])
async def test_l83_a_stripped_signature_is_not_sent_in_interaction_steps(store: bool) -> None:
    seen: list[Any] = []
    config = {} if store else {"store": False}
    async with FakeGemini([], interactions=[ANSWER]) as server, interactions(server) as model:
        result = await run_turn(
            model,
            [dict(c) for c in HISTORY],
            history_origin=ORIGINS,
            config=config,
            on_event=seen.append,
        )
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.COMPLETED
    strips = [e.detail for e in seen if isinstance(e, events.Lifecycle)]
    assert strips == [
        "removed 1 thought signature from contents[1]: issued by gemini-2.5-flash (Gemini API), "
        "which gemini-3.8-flash (Gemini API) does not accept"
    ]
    assert result.signatures == {"stripped": 1, "sentinels": 0}
    sent = records[0][3]
    # a stored interaction of the other model would carry its signatures along: not chained
    assert "previous_interaction_id" not in sent
    assert sent["input"] == [
        {"type": "user_input", "content": [{"type": "text", "text": "Hi"}]},
        {"type": "thought", "summary": [{"type": "text", "text": "Greeting the user"}]},
        {"type": "model_output", "content": [{"type": "text", "text": "Hello."}]},
        {
            "type": "user_input",
            "content": [{"type": "text", "text": "Weather in Paris and London?"}],
        },
    ]
    assert FOREIGN_SIG not in str(result.contents)
    assert HISTORY[1] is FOREIGN and FOREIGN["interaction"]["steps"][0]["signature"] == FOREIGN_SIG


def test_l83_strip_signatures_strips_the_interaction_steps_too() -> None:
    out = strip_signatures(HISTORY, sentinel=False)
    assert out[0] is HISTORY[0] and out[2] is HISTORY[2]
    assert out[1] == {
        "role": "model",
        "parts": [{"text": "Greeting the user", "thought": True}, {"text": "Hello."}],
        "interaction": {
            "steps": [
                {"type": "thought", "summary": [{"type": "text", "text": "Greeting the user"}]},
                {"type": "model_output", "content": [{"type": "text", "text": "Hello."}]},
            ]
        },
    }
    assert FOREIGN["interaction"]["steps"][0]["signature"] == FOREIGN_SIG  # not changed


async def test_l83_no_sentinel_is_reported_on_interactions_where_none_is_sent() -> None:
    foreign_calls = {
        "role": "model",
        "parts": [
            {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}},
        ],
        "interaction": {
            "steps": [
                {
                    "type": "function_call",
                    "id": "c1",
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                    "signature": FOREIGN_SIG,
                }
            ]
        },
    }
    history = [
        {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        foreign_calls,
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "c1",
                        "name": "get_weather",
                        "response": {"output": "18 C"},
                    }
                }
            ],
        },
    ]
    seen: list[Any] = []
    async with FakeGemini([], interactions=[ANSWER]) as server, interactions(server) as model:
        result = await run_turn(
            model,
            history,
            history_origin=Origin("gemini-2.5-flash"),
            config={"store": False},
            on_event=seen.append,
        )
        records = server.interactions.records  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.COMPLETED
    details = [(e.phase, e.detail) for e in seen if isinstance(e, events.Lifecycle)]
    assert details == [
        (
            "signature-strip",
            "removed 1 thought signature from contents[1]: issued by gemini-2.5-flash (Gemini "
            "API), which gemini-3.8-flash (Gemini API) does not accept",
        )
    ]
    assert result.signatures == {"stripped": 1, "sentinels": 0}
    assert records[0][3]["input"][1] == {
        "type": "function_call",
        "id": "c1",
        "name": "get_weather",
        "arguments": {"city": "Paris"},
    }


# -- L84: any tool value or exception is answered ------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class Opaque:
    def __str__(self) -> str:
        raise ValueError("not printable")


def bad_values() -> list[tuple[Any, str, str]]:
    return [
        (2**70, "int", "Integer exceeds 64-bit range"),
        ({"total": -(2**70)}, "dict", "Integer exceeds 64-bit range"),
        ("caf\udce9", "str", "str is not valid UTF-8: surrogates not allowed"),
        ([Opaque()], "list", "Type is not JSON serializable: Opaque"),
    ]


@pytest.mark.parametrize(
    "value, kind, why", bad_values(), ids=["bigint", "nested", "surrogate", "obj"]
)
async def test_l84_a_result_that_is_not_json_is_an_error_response(
    value: Any, kind: str, why: str
) -> None:
    def count() -> Any:
        return value

    model = ScriptedModel(calls(("count", {}), seed="j"), answer("Sorry."))
    seen: list[Any] = []
    result = await turn(model, tools=[count], on_event=seen.append)
    assert result.stop_reason is StopReason.COMPLETED
    (response,) = responses(model.requests[1])
    assert response["response"] == {
        "error": f"count returned a value of type {kind} that cannot be sent to the model as "
        f"JSON ({why}); a tool must return JSON values: strings, numbers (integers within 64 "
        "bits), booleans, None, and lists and dicts of them"
    }
    assert [e.status for e in seen if isinstance(e, events.ToolCallEnd)] == ["error"]
    assert result.tool_call_count == 1
    assert_replayable(result.contents)


async def test_l84_an_exception_whose_text_cannot_be_read_is_an_error_response() -> None:
    def explode() -> str:
        raise Unprintable()

    def weird() -> str:
        raise ValueError("bad byte \udcff here")

    model = ScriptedModel(calls(("explode", {}), ("weird", {}), seed="x"), answer("Sorry."))
    result = await turn(model, tools=[explode, weird])
    assert result.stop_reason is StopReason.COMPLETED
    assert [r["response"] for r in responses(model.requests[1])] == [
        {"error": "Unprintable (its message cannot be read: str() raised RuntimeError)"},
        {"error": "ValueError: bad byte \\udcff here"},
    ]
    assert result.tool_call_count == 2


# -- L85: a sync tool past its timeout -----------------------------------------------


async def test_l85_a_sync_tool_past_its_timeout_is_reported_running_and_not_waited_for() -> None:
    release = threading.Event()
    finished = threading.Event()

    def send_email(to: str) -> str:
        release.wait(60)  # as long as the test wants: run_turn must not wait for it
        finished.set()
        return "sent"

    model = ScriptedModel(calls(("send_email", {"to": "bob"}), seed="m"), answer("Pending."))
    seen: list[Any] = []
    try:
        result = await turn(
            model,
            tools=[Tool("send_email", send_email, timeout=0.2)],
            on_event=seen.append,
        )
        assert not finished.is_set()
    finally:
        release.set()
    message = (
        "send_email timed out after 0.2s and is still running in its thread (a sync function "
        "cannot be stopped); its result will be ignored"
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert responses(model.requests[1])[0]["response"] == {"error": message}
    (end,) = [e for e in seen if isinstance(e, events.ToolCallEnd)]
    assert (end.status, end.response) == ("timeout", {"error": message})
    (timeout,) = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert (timeout.phase, timeout.tool_name, timeout.detail) == (
        "tool-timeout",
        "send_email",
        message,
    )
    assert await asyncio.to_thread(finished.wait, 30)


async def test_l85_an_async_tool_past_its_timeout_was_stopped() -> None:
    async def slow() -> str:
        await asyncio.sleep(30)
        return "never"

    model = ScriptedModel(calls(("slow", {}), seed="t"), answer("Ok."))
    seen: list[Any] = []
    await turn(model, tools=[slow], on_event=seen.append, limits=TurnLimits(tool_timeout=0.05))
    message = "slow timed out after 0.05s and was stopped"
    assert responses(model.requests[1])[0]["response"] == {"error": message}
    (timeout,) = [e for e in seen if isinstance(e, events.Lifecycle)]
    assert timeout.detail == message


SCRIPT = """
import asyncio, sys, time
from pathlib import Path
from fastagg.loop import run_turn
from fastagg.limits import TurnLimits
from fastagg.tools import Tool
from scripted_model import ScriptedModel, answer, calls

marker = Path(sys.argv[1])

def send_email(to: str) -> str:
    time.sleep(20)
    marker.write_text("sent")
    return "sent"

async def main() -> None:
    model = ScriptedModel(calls(("send_email", {"to": "bob"}), seed="m"), answer("Pending."))
    user = [{"role": "user", "parts": [{"text": "Mail Bob."}]}]
    result = await run_turn(model, user, tools=[Tool("send_email", send_email, timeout=0.2)])
    print(result.stop_reason.value, model.requests[1]["contents"][-1]["parts"][0]
          ["functionResponse"]["response"]["error"], flush=True)

asyncio.run(main())
"""


def test_l85_a_process_exits_without_waiting_for_a_timed_out_sync_tool(tmp_path: Path) -> None:
    marker = tmp_path / "sent"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([FASTAGG_PATH, str(TESTS)])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(marker)],
        env=env,
        capture_output=True,
        timeout=120,  # a guard only: the tool sleeps 20 s, the marker says who finished first
    )
    assert not marker.exists()  # the process ended before the tool could write it
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == (
        "completed send_email timed out after 0.2s and is still running in its thread (a sync "
        "function cannot be stopped); its result will be ignored\n"
    )


async def test_l85_a_call_that_times_out_while_every_thread_is_busy_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fastagg.tools

    monkeypatch.setattr(fastagg.tools, "_THREADS", fastagg.tools._ToolThreads(2))
    release = threading.Event()
    ran: list[str] = []

    def hold(n: int) -> str:
        release.wait(30)
        return f"held {n}"

    def later() -> str:
        ran.append("later")
        return "ran"

    def on_event(event: Any) -> None:
        if isinstance(event, events.ToolCallEnd) and event.name == "later":
            release.set()  # the holds return once the queued call has been given up

    model = ScriptedModel(
        calls(("hold", {"n": 1}), ("hold", {"n": 2}), ("later", {}), seed="q"), answer("Ok.")
    )
    tools = [Tool("hold", hold, timeout=60), Tool("later", later, timeout=0.2)]
    try:
        result = await turn(model, tools=tools, on_event=on_event)
    finally:
        release.set()
    assert result.stop_reason is StopReason.COMPLETED
    assert [r["response"] for r in responses(model.requests[1])] == [
        {"output": "held 1"},
        {"output": "held 2"},
        {
            "error": "later timed out after 0.2s before it could start (all 2 tool threads "
            "were busy); it was not run"
        },
    ]
    # a call queued after it on the same threads runs: the given-up one was skipped
    assert await Tool("probe", lambda: "after").invoke({}) == "after"
    assert ran == []


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="none")


async def test_l85_invoke_of_a_sync_tool_is_a_coroutine_run_on_a_tool_thread() -> None:
    seen: list[tuple[str, str]] = []

    def where() -> str:
        seen.append((threading.current_thread().name, REQUEST_ID.get()))
        return "here"

    REQUEST_ID.set("r-1")
    coro = Tool("where", where).invoke({})
    assert asyncio.iscoroutine(coro)
    assert await asyncio.create_task(coro) == "here"
    ((name, request_id),) = seen
    assert name.startswith("fastagg-tool-")
    assert request_id == "r-1"  # the caller's context is copied into the thread


# -- L86: retry waits always end -----------------------------------------------------


@pytest.mark.parametrize("field", ["retry_backoff", "max_retry_backoff"])
@pytest.mark.parametrize("value", [math.inf, math.nan, -1.0])
def test_l86_a_backoff_that_is_not_a_finite_wait_is_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError) as info:
        TurnLimits(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == (
        f"TurnLimits.{field} must be a finite number of seconds, zero or more, not {value}"
    )


def test_l86_max_retry_backoff_is_at_most_300_seconds() -> None:
    TurnLimits(max_retry_backoff=300.0, retry_backoff=1e6)
    with pytest.raises(ValueError) as info:
        TurnLimits(max_retry_backoff=301.0)
    assert str(info.value) == (
        "TurnLimits.max_retry_backoff must be at most 300 seconds (the longest wait a turn "
        "makes between two attempts), not 301.0"
    )


async def test_l86_many_retries_double_the_wait_up_to_the_cap_without_overflow() -> None:
    busy = ProviderError(503, "UNAVAILABLE", "try later", True)
    replies = [Reply(error=busy) for _ in range(1100)]
    model = ScriptedModel(*replies, answer("Finally."))
    limits = TurnLimits(provider_retries=1100, retry_backoff=1e-300, max_retry_backoff=1e-6)
    result = await turn(model, limits=limits)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.retries["provider"] == 1100
