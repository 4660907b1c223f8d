"""End to end over loopback HTTP: run_turn + GeminiClient against FakeGemini, one test per fault.

Each test asserts the stop reason and what the server received: signatures
echoed byte-exact, no trailing model turn, function responses in call order.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from fastagg.client import GeminiClient
from fastagg.client.transport import AiohttpResponse
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import MALFORMED_NOTE, run_turn
from fastagg.testing import (
    DEMO_PROMPT,
    FakeGemini,
    Step,
    call,
    chunk,
    demo_scenario,
    demo_tools,
    error_chunk,
    final,
    malformed_call,
    runaway_scenario,
    signature,
    stalled_scenario,
    text,
    thought,
    usage,
)
from fastagg.testing.scenarios import NOTE_BODY, get_weather, lookup
from fastagg.testing.validate import MSG_MULTI_TURN_END, missing_signature_message

USER = {"role": "user", "parts": [{"text": DEMO_PROMPT}]}
ANSWER_SIG = signature("answer")
ANSWER = [
    chunk(text("Paris is sunny")),
    chunk(text(" at 24 °C.")),
    final(ANSWER_SIG, usage=usage(50, 9)),
]
ANSWER_PARTS = [{"text": "Paris is sunny at 24 °C."}, {"text": "", "thoughtSignature": ANSWER_SIG}]
FAST = TurnLimits(
    max_steps=10, turn_timeout=30, wrapup_lead=0, retry_backoff=0.01, max_retry_backoff=0.05
)


async def turn(
    transport: str,
    script: list[Any],
    *,
    limits: TurnLimits = FAST,
    tools: Any = None,
    **kwargs: Any,
) -> tuple[Any, FakeGemini]:
    async with (
        FakeGemini(script) as server,
        GeminiClient(
            "gemini-3-flash-preview", base_url=server.url, api_key="k", transport=transport
        ) as model,
    ):
        result = await run_turn(
            model, [USER], tools=demo_tools() if tools is None else tools, limits=limits, **kwargs
        )
    return result, server


def assert_wellformed(server: FakeGemini) -> None:
    """Every request the loop sent ended with a user turn and was accepted."""
    for request in server.requests:
        assert request["contents"][-1]["role"] == "user"
    assert [r.status for r in server.records if r.rejection] == []


# --- the demo turn ---------------------------------------------------------------------------


async def test_demo_turn_completes_with_three_tool_calls_and_two_retries(transport: str) -> None:
    result, server = await turn(transport, demo_scenario())
    assert result.stop_reason == StopReason.COMPLETED
    assert (result.finish_reason, result.raw_finish_reason, result.message) == (
        "stop",
        "STOP",
        None,
    )
    assert result.text == (
        "Paris is the better pick: 24 °C and sunny with a light breeze, while London expects "
        "showers (70 % chance) at 16 °C. I saved your packing note \u201cPicnic packing list\u201d: "
        "sunscreen, a hat, a blanket, water and a plan for the wasps."
    )
    assert (result.steps_used, result.tool_call_count) == (3, 3)
    # thought-only + in-stream 500 + no finish: retried (the loop files it as no-finish, L3.4);
    # then the save_note call cut off mid-argument: not run, retried (L32)
    assert result.retries == {"malformed": 0, "no-finish": 2, "provider": 0}
    assert len(server.requests) == 5
    assert server.requests[3] == server.requests[2] == server.requests[1]
    assert_wellformed(server)


async def test_demo_turn_echoes_signatures_byte_exact_and_answers_calls_in_order(
    transport: str,
) -> None:
    _, server = await turn(transport, demo_scenario())
    second = server.requests[1]["contents"]
    calls = [p for p in second[1]["parts"] if "functionCall" in p]
    assert calls == [
        {
            "functionCall": {"id": "fc_paris", "name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": signature("demo step 1"),
        },
        {"functionCall": {"id": "fc_london", "name": "get_weather", "args": {"city": "London"}}},
    ]
    assert second[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "fc_paris",
                    "name": "get_weather",
                    "response": {"output": get_weather("Paris")},
                }
            },
            {
                "functionResponse": {
                    "id": "fc_london",
                    "name": "get_weather",
                    "response": {"output": get_weather("London")},
                }
            },
        ],
    }


async def test_demo_retry_resends_the_same_request_without_the_failed_thoughts(
    transport: str,
) -> None:
    _, server = await turn(transport, demo_scenario())
    assert server.requests[2] == server.requests[1]
    assert "Paris: 24 °C and sunny. " not in str(server.requests[4])


async def test_demo_streamed_call_is_replayed_whole_with_its_signature(transport: str) -> None:
    _, server = await turn(transport, demo_scenario())
    fourth = server.requests[4]["contents"]
    note_call = [p for p in fourth[3]["parts"] if "functionCall" in p]
    assert note_call == [
        {
            "functionCall": {
                "id": "fc_note",
                "name": "save_note",
                "args": {"title": "Picnic packing list", "body": NOTE_BODY},
            },
            "thoughtSignature": signature("demo step 3"),
        }
    ]
    assert fourth[4]["parts"][0]["functionResponse"]["id"] == "fc_note"


async def test_demo_transcript_ends_with_the_signed_empty_part_and_usage_is_summed(
    transport: str,
) -> None:
    result, server = await turn(transport, demo_scenario())
    assert result.contents[-1]["role"] == "model"
    assert result.contents[-1]["parts"][-1] == {
        "text": "",
        "thoughtSignature": signature("demo step 4"),
    }
    assert result.contents[:-1] == server.requests[4]["contents"]
    # 165 + 261 + 261 (the failed attempts count) + 327 + 369
    assert result.usage["totalTokenCount"] == 1383
    assert result.usage["promptTokenCount"] == 96 + 231 + 231 + 231 + 310


# --- faults ------------------------------------------------------------------------------------


async def test_first_byte_delay_within_budget_completes(transport: str) -> None:
    limits = TurnLimits(turn_timeout=30, first_output_timeout=10)
    result, _ = await turn(transport, [Step(ANSWER, delay_first_byte=0.2)], limits=limits)
    assert result.stop_reason == StopReason.COMPLETED
    assert result.contents[-1]["parts"] == ANSWER_PARTS


async def test_first_byte_delay_past_first_output_timeout_is_stalled(transport: str) -> None:
    # 1 s: the window must not end before the server has read the request (a loaded machine)
    limits = TurnLimits(turn_timeout=30, first_output_timeout=1.0, provider_retries=0)
    result, server = await turn(transport, [Step(ANSWER, delay_first_byte=20)], limits=limits)
    assert result.stop_reason == StopReason.STALLED
    assert len(server.requests) == 1


async def test_pause_after_a_chunk_past_stall_timeout_is_stalled(transport: str) -> None:
    # The first-output window holds the stall clock over connect, request and head (L22),
    # which a loaded machine can take longer than 0.3 s over.
    limits = TurnLimits(turn_timeout=30, stall_timeout=0.3, first_output_timeout=10)
    result, _ = await turn(transport, [Step(ANSWER, pause_after=1, pause=20)], limits=limits)
    assert result.stop_reason == StopReason.STALLED
    assert result.text.startswith("Paris is sunny")
    assert "made no progress for 0.3s" in result.text


async def test_short_pause_within_stall_timeout_completes(transport: str) -> None:
    limits = TurnLimits(turn_timeout=30, stall_timeout=10)
    result, _ = await turn(transport, [Step(ANSWER, pause_after=1, pause=0.1)], limits=limits)
    assert result.stop_reason == StopReason.COMPLETED
    assert result.text == "Paris is sunny at 24 °C."


async def test_stalled_scenario_is_stalled(transport: str) -> None:
    limits = TurnLimits(turn_timeout=30, stall_timeout=0.3)
    result, _ = await turn(transport, stalled_scenario(), limits=limits)
    assert result.stop_reason == StopReason.STALLED


async def test_tiny_writes_aggregate_to_the_same_parts(transport: str) -> None:
    script = [Step(chunks=demo_scenario()[0].chunks, tiny_writes=1), Step(ANSWER, tiny_writes=2)]
    result, server = await turn(transport, script)
    assert result.stop_reason == StopReason.COMPLETED
    assert result.contents[-1]["parts"] == ANSWER_PARTS
    calls = [p for p in server.requests[1]["contents"][1]["parts"] if "functionCall" in p]
    assert calls[0]["thoughtSignature"] == signature("demo step 1")
    assert_wellformed(server)


async def test_thought_only_then_in_stream_500_without_finish_is_retried(transport: str) -> None:
    failing = [chunk(thought("Let me think about Paris.")), error_chunk()]
    result, server = await turn(transport, [failing, ANSWER])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["provider"] + result.retries["no-finish"] == 1
    assert server.requests[1] == server.requests[0]
    assert result.contents == [USER, {"role": "model", "parts": ANSWER_PARTS}]


async def test_persisting_in_stream_500_ends_as_provider_error(transport: str) -> None:
    failing = [chunk(thought("hm")), error_chunk()]
    result, server = await turn(transport, [failing] * 3)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert len(server.requests) == 3
    assert isinstance(result.error, ProviderError)
    # an in-stream error without a finish reason: L3.1 or L3.4, both end retryable
    assert result.error.kind in ("in-stream", "no-finish-reason")
    assert result.error.retryable is True
    assert result.contents == [USER]


async def test_thought_only_without_finish_reason_is_a_no_finish_retry(transport: str) -> None:
    result, server = await turn(transport, [[chunk(thought("Thinking..."))], ANSWER])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["no-finish"] == 1
    assert server.requests[1] == server.requests[0]


@pytest.mark.parametrize(
    "fault",
    [
        Step(http_error=429, retry_after=0.1),
        Step(http_error=503, retry_after=0.1),
        Step(http_error=503, retry_delay="0.1s"),
    ],
)
async def test_http_429_and_503_with_retry_after_are_retried(fault: Step, transport: str) -> None:
    result, server = await turn(transport, [fault, ANSWER])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["provider"] == 1
    assert [r.status for r in server.records] == [fault.http_error, 200]
    assert server.requests[1] == server.requests[0]


async def test_http_429_that_persists_ends_as_provider_error_with_the_status(
    transport: str,
) -> None:
    fault = Step(http_error=429, retry_after=0.05)
    result, server = await turn(transport, [fault] * 3)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert (result.error.status, result.error.code, result.error.retryable) == (
        429,
        "RESOURCE_EXHAUSTED",
        True,
    )
    assert len(server.requests) == 3


async def test_malformed_function_call_is_retried_with_a_corrective_note(transport: str) -> None:
    result, server = await turn(transport, [[malformed_call()], ANSWER])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["malformed"] == 1
    resent = server.requests[1]["contents"]
    assert all(c["role"] == "user" for c in resent)
    assert MALFORMED_NOTE in str(resent[-1])
    assert_wellformed(server)


async def test_persisting_malformed_function_call_ends_as_provider_error(transport: str) -> None:
    result, _ = await turn(transport, [[malformed_call()], [malformed_call()]])
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert (result.finish_reason, result.raw_finish_reason) == ("error", "MALFORMED_FUNCTION_CALL")


async def test_connection_dropped_before_visible_output_is_retried(transport: str) -> None:
    dropped = Step(chunks=demo_scenario()[0].chunks, drop_after=1)
    result, server = await turn(transport, [dropped, ANSWER])
    assert result.stop_reason == StopReason.COMPLETED
    assert result.retries["provider"] == 1
    assert server.requests[1] == server.requests[0]


async def test_connection_dropped_after_answer_text_ends_as_provider_error(transport: str) -> None:
    result, server = await turn(transport, [Step(ANSWER, drop_after=1), ANSWER])
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert result.error.kind == "connection"
    assert len(server.requests) == 1


async def test_runaway_tool_loop_hits_the_step_cap_and_synthesizes(transport: str) -> None:
    limits = TurnLimits(max_steps=3, turn_timeout=30)
    result, server = await turn(transport, runaway_scenario(3), limits=limits, tools=[lookup])
    assert result.stop_reason == StopReason.STEP_CAP
    assert (result.steps_used, result.tool_call_count) == (3, 3)
    assert result.text.startswith("From what I gathered: the croissant")
    last = server.requests[-1]
    assert last["toolConfig"]["functionCallingConfig"]["mode"] == "NONE"
    sigs = [
        p["thoughtSignature"] for c in last["contents"] for p in c["parts"] if "functionCall" in p
    ]
    assert sigs == [signature(f"runaway {i}") for i in (1, 2, 3)]
    assert_wellformed(server)


async def test_abort_while_streaming_stops_the_turn(transport: str) -> None:
    abort = asyncio.Event()
    paused = Step(ANSWER, pause_after=1, pause=20)
    async with (
        FakeGemini([paused]) as server,
        GeminiClient("m", base_url=server.url, api_key="k", transport=transport) as model,
    ):
        task = asyncio.create_task(run_turn(model, [USER], limits=FAST, abort=abort))
        while not server.records:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        abort.set()
        result = await task
    assert result.stop_reason == StopReason.ABORTED


# --- the validator would have caught the peer bugs ------------------------------------------------


async def service_answer(server: FakeGemini, request: dict[str, Any]) -> ProviderError:
    async with GeminiClient("m", base_url=server.url, api_key="k") as model:
        with pytest.raises(ProviderError) as info:
            async with model.stream(request, timeout=10) as body:
                async for _ in body:
                    pass
    return info.value


async def test_validator_refuses_the_demo_history_with_a_dropped_signature(transport: str) -> None:
    _, recorded = await turn(transport, demo_scenario())
    request = copy.deepcopy(recorded.requests[1])
    del request["contents"][1]["parts"][-2]["thoughtSignature"]
    async with FakeGemini(demo_scenario(), check_signatures=False) as server:
        error = await service_answer(server, request)
    assert (error.status, error.code, error.retryable) == (400, "INVALID_ARGUMENT", False)
    assert error.message == missing_signature_message("get_weather", 2)


async def test_validator_refuses_a_thought_only_output_appended_as_a_model_turn() -> None:
    request = {
        "contents": [
            USER,
            {"role": "model", "parts": [{"text": "Let me think about Paris.", "thought": True}]},
        ]
    }
    async with FakeGemini([ANSWER]) as server:
        error = await service_answer(server, request)
    assert (error.status, error.message) == (400, MSG_MULTI_TURN_END)


async def test_validator_refuses_parallel_calls_split_into_interleaved_turns() -> None:
    sig = signature("demo step 1")
    request = {
        "contents": [
            USER,
            {
                "role": "model",
                "parts": [call("get_weather", {"city": "Paris"}, id="fc_paris", signature=sig)],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "fc_paris",
                            "name": "get_weather",
                            "response": {"output": {}},
                        }
                    }
                ],
            },
            {"role": "model", "parts": [call("get_weather", {"city": "London"}, id="fc_london")]},
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "fc_london",
                            "name": "get_weather",
                            "response": {"output": {}},
                        }
                    }
                ],
            },
        ]
    }
    async with FakeGemini(demo_scenario(), check_signatures=False) as server:
        error = await service_answer(server, request)
    assert error.status == 400
    assert error.message.startswith("Function call is missing a thought_signature")


# --- H11: without a sink a body that pushes its bytes is pumped ----------------------------


async def test_h11_l70_without_a_sink_a_body_with_its_own_pump_is_pumped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A transport whose body can push its bytes (a third party's) is pumped when the
    # turn has no sink, and iterated when it has one: the same turn either way.
    calls: list[int] = []

    async def pushing(self: AiohttpResponse, feed: Any) -> None:
        calls.append(self.status)
        async for piece in self:
            feed(piece)

    monkeypatch.setattr(AiohttpResponse, "pump", pushing, raising=False)
    quiet, server = await turn("aiohttp", demo_scenario())
    assert calls == [200] * len(server.requests)
    calls.clear()
    events: list[Any] = []
    loud, _ = await turn("aiohttp", demo_scenario(), on_event=events.append)
    assert calls == []  # with a sink the deltas are delivered chunk by chunk
    assert (quiet.stop_reason, quiet.text, quiet.contents) == (
        loud.stop_reason,
        loud.text,
        loud.contents,
    )
    assert quiet.stop_reason == StopReason.COMPLETED


BAD_PAYLOAD = (
    b'data: {"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}\r\n\r\ndata: {oops\r\n\r\n'
)


@pytest.mark.parametrize("sink", [False, True], ids=["pumped", "iterated"])
async def test_h11_l19_a_bad_payload_ends_the_stream_the_same_with_or_without_a_sink(
    sink: bool, transport: str
) -> None:
    events: list[Any] = []
    kwargs = {"on_event": events.append} if sink else {}
    result, server = await turn(transport, [Step(raw=BAD_PAYLOAD), Step(raw=BAD_PAYLOAD)], **kwargs)
    assert result.stop_reason == StopReason.PROVIDER_ERROR
    assert (result.error.kind, result.error.code) == ("malformed", "MALFORMED_STREAM")
    assert result.error.message == (
        "event 1 at byte 68 is not valid JSON; it was skipped "
        "(is this the body of a streamGenerateContent response?)"
    )
    # "Hi" streamed first: visible output, so not retried (L3), and its text counts (L20).
    assert (result.retries["provider"], len(server.requests)) == (0, 1)
    assert result.text == (
        "Hi\n\nThe model service failed (unreadable response stream). Please try again."
    )
