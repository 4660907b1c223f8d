"""The loop's requests and results on the Interactions API, without a server
(spec/interactions.md I22-I25, I27; spec/turn-loop.md L58, L61, L62)."""

from __future__ import annotations

import httpx
import orjson
import pytest

from fastagg import GeminiClient, StreamAggregator
from fastagg.client.interactions_wire import InteractionsTurn, request_body
from fastagg.limits import TurnResult
from fastagg.loop import run_turn
from fastagg.testing import FakeGemini, InteractionTurn
from fastagg.testing.chunks import chunk, text
from fastagg.testing.fake_interactions import FakeInteractions, error_event, text_step


def test_i22_api_must_be_known() -> None:
    with pytest.raises(
        ValueError, match="api must be 'generate_content' or 'interactions', got 'x'"
    ):
        GeminiClient("m", api_key="k", api="x")


def test_i23_request_fields_converted() -> None:
    request = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be "}, {"text": "terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "description": "d", "parametersJsonSchema": {"type": "object"}}
                ]
            },
            {"googleSearch": {}},
        ],
        "generationConfig": {"maxOutputTokens": 9, "thinkingConfig": {"thinkingLevel": "HIGH"}},
        "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
        "background": False,
    }
    assert request_body(request) == {
        "background": False,
        "system_instruction": "Be terse.",
        "tools": [
            {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}},
            {"type": "google_search"},
        ],
        "generation_config": {
            "max_output_tokens": 9,
            "thinking_level": "high",
            "tool_choice": "none",
        },
        "input": [{"type": "user_input", "content": [{"type": "text", "text": "hi"}]}],
    }


def test_i24_error_result_marked() -> None:
    contents = [
        {"role": "model", "parts": [], "interaction": {"id": "v1_a", "steps": []}},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "f", "response": {"error": "boom"}}},
                {"text": "Time check"},
            ],
        },
    ]
    assert request_body({"contents": contents}) == {
        "previous_interaction_id": "v1_a",
        "input": [
            {
                "type": "function_result",
                "call_id": "c1",
                "name": "f",
                "result": "boom",
                "is_error": True,
            },
            {"type": "user_input", "content": [{"type": "text", "text": "Time check"}]},
        ],
    }


def test_l58_stored_hop_names_its_issuer_and_sends_no_input() -> None:
    request = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "continuationToken": "t",
        "previous_interaction_id": "v1_h",
    }
    assert request_body(request) == {"previous_interaction_id": "v1_h", "continuation_token": "t"}


def turn(*events: dict) -> InteractionsTurn:
    agg = StreamAggregator(api="interactions")
    for event in events:
        agg.feed_event(orjson.dumps(event))
    return InteractionsTurn(agg.close())


def test_i25_error_event_as_google_rpc() -> None:
    result = turn(error_event("gateway_timeout", "Deadline expired."))
    assert result.error == {
        "code": 504,
        "status": "GATEWAY_TIMEOUT",
        "message": "Deadline expired.",
    }
    assert result.finish_reason is None


def test_i25_in_progress_is_no_finish() -> None:
    result = turn(
        {"event_type": "interaction.created", "interaction": {"id": "v1", "status": "in_progress"}}
    )
    assert (result.finish_reason, result.interaction_id) == (None, "v1")


def test_i25_failed_without_error_event_is_an_error() -> None:
    result = turn(
        {"event_type": "interaction.completed", "interaction": {"id": "v1", "status": "failed"}}
    )
    assert result.error == {"status": "FAILED", "message": "the interaction failed"}


async def test_i27_context_guard_reads_total_input_tokens() -> None:
    from fastagg.limits import StopReason, TurnLimits
    from fastagg.testing.fake_interactions import arguments_step

    calls = InteractionTurn(
        arguments_step(0, "c1", "f", "{}"),
        status="requires_action",
        usage={"total_input_tokens": 500},
    )

    def f() -> str:
        """F."""
        return "x"

    async with (
        FakeGemini([], interactions=[calls]) as server,
        GeminiClient(
            "gemini-3.8-flash", api_key="k", base_url=server.url, api="interactions"
        ) as model,
    ):
        result = await run_turn(
            model,
            [{"role": "user", "parts": [{"text": "hi"}]}],
            tools=[f],
            limits=TurnLimits(max_context_tokens=400),
        )
    assert result.stop_reason is StopReason.CONTEXT_CAP


async def test_l58_fake_refuses_a_changed_hop_request() -> None:
    script = [[chunk(text("a"), finish_reason="CONTINUATION", continuation_token="t1")]]
    async with FakeGemini(script) as server, httpx.AsyncClient() as client:
        url = f"{server.url}/v1beta/models/m:streamGenerateContent?alt=sse"
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        assert (
            await client.post(url, json=body, headers={"x-goog-api-key": "k"})
        ).status_code == 200
        changed = {
            "contents": [{"role": "user", "parts": [{"text": "hi!"}]}],
            "continuationToken": "t1",
        }
        refused = await client.post(url, json=changed, headers={"x-goog-api-key": "k"})
        unknown = await client.post(
            url, json={**body, "continuationToken": "zz"}, headers={"x-goog-api-key": "k"}
        )
    assert refused.status_code == 400
    assert "unchanged" in refused.json()["error"]["message"]
    assert unknown.json()["error"]["message"] == "Invalid continuation token."


async def test_l58_fake_interactions_refuses_a_foreign_token() -> None:
    hop = InteractionTurn(
        text_step(0, "a"), status="requires_continuation", continuation_token="t1"
    )
    async with FakeInteractions([hop, hop]) as server, httpx.AsyncClient() as client:
        url, headers = f"{server.url}/v1beta/interactions", {"x-goog-api-key": "k"}
        first = {"model": "m", "stream": True, "input": "hi"}
        assert (await client.post(url, json=first, headers=headers)).status_code == 200
        wrong = {
            "model": "m",
            "stream": True,
            "continuation_token": "t9",
            "previous_interaction_id": "v1_fake1",
        }
        answer = await client.post(url, json=wrong, headers=headers)
    assert answer.json() == {
        "error": {
            "code": "invalid_request",
            "message": "continuation_token does not belong to previous_interaction_id.",
        }
    }


def test_l62_hops_default_zero() -> None:
    assert TurnResult.__dataclass_fields__["hops"].default == 0  # type: ignore[attr-defined]
