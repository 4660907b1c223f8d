"""Log records of a turn (spec/observability.md "## Logging", O1-O6): the records of scripted
turns against FakeGemini, by logger, level and message; no secret in any of them, no content
above DEBUG, nothing printed when the application configured no logging."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import fastagg._log
from fastagg import GeminiClient, Origin, StopReason, TurnLimits, run_turn, tool
from fastagg.testing import FakeGemini, Step, call, chunk, final, signature, text

ROOT = Path(__file__).resolve().parent.parent
KEY = "AIzaSy-log-test-key-6d1f0c"
CITY = "Paris-7f3a"  # a tool argument value that must stay at DEBUG
SIG_A, SIG_B = signature("log-a"), signature("log-b")
QUESTION = [{"role": "user", "parts": [{"text": "Weather in Paris?"}]}]
RULE_ID = re.compile(r"\b[A-Z]{1,2}\d+[a-z]?:")
STREAM = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent"


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 24, "sky": "sunny"}


def _tool_turn() -> list[Step]:
    return [
        Step([chunk(call("get_weather", {"city": CITY}, id="c1", signature=SIG_A)), final()]),
        Step([chunk(text("Sunny and 24 °C in Paris.")), final(SIG_B)]),
    ]


async def _run(script: Any, tools: Any = (get_weather,), **kwargs: Any) -> Any:
    async with FakeGemini(script) as server:
        url = server.url
        async with GeminiClient("gemini-3-flash-preview", api_key=KEY, base_url=url) as model:
            result = await run_turn(model, QUESTION, tools=tools, **kwargs)
    return result, url


def _records(
    caplog: pytest.LogCaptureFixture, url: str, level: int = logging.DEBUG
) -> list[tuple[str, int, str]]:
    """(logger, level, message) of fastagg's records, the server's address and seconds
    replaced (they change from run to run)."""
    out = []
    for r in caplog.records:
        if r.name.startswith("fastagg") and r.levelno >= level:
            message = r.getMessage().replace(url, "{url}")
            out.append((r.name, r.levelno, re.sub(r"\b\d+\.\d{3} s\b", "T s", message)))
    return out


def _texts(caplog: pytest.LogCaptureFixture, level: int = logging.DEBUG) -> list[str]:
    """Every fastagg record at ``level`` or above as text: its message and its arguments."""
    return [
        f"{r.getMessage()} {r.args!r} {r.msg!r}"
        for r in caplog.records
        if r.name.startswith("fastagg") and r.levelno >= level
    ]


DBG, INF, WRN = logging.DEBUG, logging.INFO, logging.WARNING


async def test_o2_a_tool_turn_logs_requests_steps_and_the_tool_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    result, url = await _run(_tool_turn())
    assert result.stop_reason is StopReason.COMPLETED
    post = f"POST {{url}}{STREAM}"
    assert _records(caplog, url) == [
        ("fastagg.loop", DBG, "step 1, attempt 1: request started"),
        ("fastagg.client", DBG, f"{post}: sending 274 bytes"),
        ("fastagg.client", DBG, f"{post}: 200 OK, 372 bytes received in T s"),
        ("fastagg.loop", DBG, "step 1, attempt 1 ended: tool calls, finish STOP"),
        (
            "fastagg.tools",
            DBG,
            f"step 1: get_weather (call 0, id 'c1') started with arguments {{'city': '{CITY}'}}",
        ),
        ("fastagg.tools", DBG, "step 1: get_weather (call 0) ended: ok in T s"),
        ("fastagg.loop", DBG, "step 2, attempt 1: request started"),
        ("fastagg.client", DBG, f"{post}: sending 592 bytes"),
        ("fastagg.client", DBG, f"{post}: 200 OK, 380 bytes received in T s"),
        ("fastagg.loop", DBG, "step 2, attempt 1 ended: answer, finish STOP"),
        ("fastagg.loop", DBG, "turn ended: completed after 2 steps and 1 tool call"),
    ]


async def test_o3_no_record_holds_the_key_a_signature_or_a_header(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    await _run(_tool_turn())
    texts = _texts(caplog)
    assert texts
    for secret in (KEY, SIG_A, SIG_B, "x-goog-api-key", "thoughtSignature"):
        assert not [t for t in texts if secret in t], secret


def test_o3_a_url_is_logged_without_user_info_query_and_fragment() -> None:
    safe = fastagg._log.safe_url
    assert safe("https://u:p@host:8443/v1/x:y?key=K&alt=sse#f") == "https://host:8443/v1/x:y"
    assert safe("http://h/a?stream=true&last_event_id=e") == "http://h/a"
    assert safe("https://host") == "https://host"
    assert safe("https://tok@host") == "https://host"


async def test_o2_a_503_then_success_gives_one_info_retry_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    script = [Step(http_error=503, retry_after=0), *_tool_turn()]
    result, url = await _run(script)
    assert result.stop_reason is StopReason.COMPLETED
    assert _records(caplog, url, logging.INFO) == [
        ("fastagg.loop", INF, "step 1: HTTP 503 UNAVAILABLE; retrying in 0 s (retry 1 of 2)"),
    ]
    # the request's own failure, with the service's text, at DEBUG only
    assert _records(caplog, url)[2:5] == [
        (
            "fastagg.client",
            DBG,
            f"POST {{url}}{STREAM} failed after T s, 132 bytes received: HTTP 503 UNAVAILABLE "
            "(retryable): The model is overloaded. Please try again later.",
        ),
        ("fastagg.loop", DBG, "step 1, attempt 1 ended: error, no finish reason"),
        ("fastagg.loop", INF, "step 1: HTTP 503 UNAVAILABLE; retrying in 0 s (retry 1 of 2)"),
    ]


async def test_o2_a_provider_error_ends_the_turn_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fastagg")
    result, url = await _run([Step(http_error=404)])
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert _records(caplog, url) == [
        (
            "fastagg.loop",
            INF,
            "turn ended: provider-error after 1 step and 0 tool calls: HTTP 404 NOT_FOUND",
        ),
    ]


async def test_o4_a_tool_timeout_is_info_without_the_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    import asyncio

    @tool(timeout=0.05)
    async def slow_lookup(city: str) -> str:
        await asyncio.sleep(30)
        return city

    script = [
        Step([chunk(call("slow_lookup", {"city": CITY}, signature=SIG_A)), final()]),
        Step([chunk(text("It took too long.")), final(SIG_B)]),
    ]
    result, url = await _run(script, tools=[slow_lookup])
    assert result.stop_reason is StopReason.COMPLETED
    assert _records(caplog, url, logging.INFO) == [
        ("fastagg.tools", INF, "step 1: slow_lookup timed out after 0.05s and was stopped"),
    ]
    assert [t for t in _texts(caplog) if CITY in t]  # the arguments are at DEBUG ...
    assert not [t for t in _texts(caplog, logging.INFO) if CITY in t]  # ... and only there


async def test_o4_a_diagnostic_is_a_warning_without_the_left_out_calls_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    nameless = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"args": {"city": CITY}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    script = [[nameless], *_tool_turn()]
    result, url = await _run(script)
    assert result.stop_reason is StopReason.COMPLETED
    assert _records(caplog, url, logging.INFO) == [
        (
            "fastagg.stream",
            WRN,
            "step 1: event 0: candidates[0].content.parts[0] is a function call without a "
            "name; it was left out",
        ),
        (
            "fastagg.loop",
            INF,
            "step 1: malformed output (finish STOP); asking again (retry 1 of 1)",
        ),
    ]
    assert not [t for t in _texts(caplog, logging.INFO) if CITY in t]


async def test_o3_a_signature_strip_is_info_and_names_no_signature(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    old = signature("log-old")
    history = [
        {"role": "user", "parts": [{"text": "Weather in Rome?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
                    "thoughtSignature": old,
                }
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp_c": 20}}}],
        },
        {"role": "model", "parts": [{"text": "20 °C in Rome."}]},
        *QUESTION,
    ]
    async with FakeGemini(_tool_turn()) as server:
        url = server.url
        async with GeminiClient("gemini-3-flash-preview", api_key=KEY, base_url=url) as model:
            flash = Origin("gemini-2.5-flash")
            origins = [None, flash, None, flash, None]
            result = await run_turn(model, history, tools=[get_weather], history_origin=origins)
    assert result.signatures["stripped"] == 1
    assert _records(caplog, url, logging.INFO) == [
        (
            "fastagg.loop",
            INF,
            "signatures: removed 1 thought signature from contents[1]: issued by "
            "gemini-2.5-flash (Gemini API), which gemini-3-flash-preview (Gemini API) does not "
            "accept",
        ),
    ]
    assert not [t for t in _texts(caplog) if old in t or SIG_A in t or SIG_B in t]


async def test_o6_messages_have_no_rule_ids(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fastagg")
    nameless = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": {"args": {}}}]},
                "finishReason": "STOP",
            }
        ]
    }
    repeated = Step(
        [
            chunk(
                call("get_weather", {"city": CITY}, id="same", signature=SIG_A),
                call("get_weather", {"city": CITY}, id="same"),
            ),
            final(),
        ]
    )
    script = [
        Step(http_error=503, retry_after=0),
        [nameless],
        repeated,
        Step([chunk(text("Sunny.")), final(SIG_B)]),
    ]
    result, url = await _run(script)
    assert result.stop_reason is StopReason.COMPLETED
    records = _records(caplog, url)
    assert [m for _, level, m in records if level >= logging.INFO] == [
        "step 1: HTTP 503 UNAVAILABLE; retrying in 0 s (retry 1 of 2)",
        "step 1: event 0: candidates[0].content.parts[0] is a function call without a name; "
        "it was left out",
        "step 1: malformed output (finish STOP); asking again (retry 1 of 1)",
        "step 1: call 1 repeats the id 'same' of call 0 of this step with the same name and "
        "arguments; the tool ran once and each part gets its response",
    ]
    assert not [m for _, _, m in records if RULE_ID.search(m)]


async def test_o5_with_debug_off_no_debug_message_is_formatted(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="fastagg")

    def never(*args: object) -> Any:
        raise AssertionError("a debug record was formatted with DEBUG off")

    import fastagg.client.gemini
    import fastagg.loop.batch
    import fastagg.loop.turn

    monkeypatch.setattr(fastagg.client.gemini, "safe_url", never)
    monkeypatch.setattr(fastagg.loop.batch, "shown", never)
    monkeypatch.setattr(fastagg.loop.batch, "_log_call_end", never)
    monkeypatch.setattr(fastagg.loop.turn, "_log_step_end", never)
    result, url = await _run(_tool_turn())
    assert result.stop_reason is StopReason.COMPLETED
    assert _records(caplog, url) == []


def test_o1_the_fastagg_logger_has_a_null_handler_and_no_level() -> None:
    root = logging.getLogger("fastagg")
    assert [type(h) for h in root.handlers] == [logging.NullHandler]
    assert root.level == logging.NOTSET
    assert root.propagate
    for child in ("client", "loop", "tools", "stream"):
        logger = logging.getLogger(f"fastagg.{child}")
        assert (logger.handlers, logger.level, logger.propagate) == ([], logging.NOTSET, True)


def test_o1_nothing_is_printed_when_the_application_configures_no_logging() -> None:
    # A turn with a retry (INFO), a diagnostic (WARNING) and a failed end (INFO), in a fresh
    # interpreter with no logging configured: Python's last-resort handler would print the
    # warning to stderr.
    code = textwrap.dedent(
        """
        import asyncio
        from fastagg import GeminiClient, run_turn
        from fastagg.testing import FakeGemini, Step

        nameless = {"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"args": {}}}]}, "finishReason": "STOP"}]}

        async def main():
            script = [Step(http_error=503, retry_after=0), [nameless], [nameless]]
            async with FakeGemini(script) as server:
                async with GeminiClient("gemini-3-flash-preview", api_key="k",
                                        base_url=server.url) as model:
                    q = [{"role": "user", "parts": [{"text": "Hi"}]}]
                    result = await run_turn(model, q)
            print(result.stop_reason.value, result.retries["provider"])

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "provider-error 1\n", "")


async def test_o2_limits_in_the_messages_follow_the_turns_limits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fastagg")
    script = [Step(http_error=503, retry_after=0), Step(http_error=503, retry_after=0)]
    result, url = await _run(script, limits=TurnLimits(provider_retries=1))
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert _records(caplog, url) == [
        ("fastagg.loop", INF, "step 1: HTTP 503 UNAVAILABLE; retrying in 0 s (retry 1 of 1)"),
        (
            "fastagg.loop",
            INF,
            "turn ended: provider-error after 1 step and 0 tool calls: HTTP 503 UNAVAILABLE",
        ),
    ]
