"""The ADK drop-in's aggregator alone: call ids on partial and final responses, repeated ids,
a stream cut off inside a call (A5-A7). The same behaviours as ADK's own
``test_streaming_utils.py`` cases on ids and repeated calls, written here from the rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from fastagg.testing import call, chunk, signature, streamed_call, text

pytest.importorskip("google.adk", reason="needs Google ADK (pip install 'fastagg[adk]')")
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from fastagg.integrations import adk


async def feed(
    aggregator: adk.StreamingResponseAggregator, chunks: list[dict[str, Any]]
) -> list[LlmResponse]:
    """Every partial response the chunks give, in order."""
    out = []
    for payload in chunks:
        response = types.GenerateContentResponse.model_validate(payload)
        out.extend([r async for r in aggregator.process_response(response)])
    return out


def call_ids(responses: list[LlmResponse]) -> list[str | None]:
    return [
        p.function_call.id
        for r in responses
        if r.content and r.content.parts
        for p in r.content.parts
        if p.function_call
    ]


def final_calls(response: LlmResponse | None) -> list[tuple[str | None, str | None, Any]]:
    assert response is not None and response.content is not None
    return [
        (p.function_call.id, p.function_call.name, p.function_call.args)
        for p in response.content.parts
        if p.function_call
    ]


async def test_a6_an_id_less_complete_call_has_one_client_id_in_its_partial_and_final_response() -> (
    None
):
    aggregator = adk.StreamingResponseAggregator()
    partials = await feed(aggregator, [chunk(call("my_tool", {"x": 1}), finish_reason="STOP")])
    final = aggregator.close()
    (client_id,) = call_ids(partials)
    assert client_id is not None and client_id.startswith("adk-")
    assert final_calls(final) == [(client_id, "my_tool", {"x": 1})]


async def test_a6_the_model_s_id_is_kept_on_a_complete_call() -> None:
    aggregator = adk.StreamingResponseAggregator()
    partials = await feed(
        aggregator, [chunk(call("my_tool", {"x": 1}, id="llm-id"), finish_reason="STOP")]
    )
    assert call_ids(partials) == ["llm-id"]
    assert final_calls(aggregator.close()) == [("llm-id", "my_tool", {"x": 1})]


async def test_a6_every_fragment_of_a_streamed_call_carries_the_id_of_its_first() -> None:
    aggregator = adk.StreamingResponseAggregator()
    chunks = streamed_call("write", {"path": "a.txt", "text": "x" * 30}, id="fc_1", piece=10)
    partials = await feed(aggregator, [*chunks, chunk(finish_reason="STOP")])
    assert call_ids(partials) == ["fc_1"] * len(chunks)
    assert final_calls(aggregator.close()) == [
        ("fc_1", "write", {"path": "a.txt", "text": "x" * 30})
    ]


async def test_a6_id_less_streamed_calls_each_keep_one_client_id_across_their_fragments() -> None:
    aggregator = adk.StreamingResponseAggregator()
    first = streamed_call("tool_a", {"a": "value a"}, piece=3)
    second = streamed_call("tool_b", {"b": "value b", "n": 2}, piece=4)
    partials = await feed(aggregator, [*first, *second, chunk(finish_reason="STOP")])
    ids = call_ids(partials)
    id_a, id_b = ids[0], ids[len(first)]
    assert ids == [id_a] * len(first) + [id_b] * len(second)
    assert id_a is not None and id_b is not None and id_a != id_b
    assert (id_a[:4], id_b[:4]) == ("adk-", "adk-")
    assert final_calls(aggregator.close()) == [
        (id_a, "tool_a", {"a": "value a"}),
        (id_b, "tool_b", {"b": "value b", "n": 2}),
    ]


async def test_a6_interleaved_fragments_without_ids_go_to_the_call_that_holds_their_path() -> None:
    aggregator = adk.StreamingResponseAggregator()

    def fragment(path: str, value: str, *, name: str | None = None) -> dict[str, Any]:
        fc: dict[str, Any] = {"partialArgs": [{"jsonPath": path, "stringValue": value}]}
        if name is not None:
            fc["name"] = name
        fc["willContinue"] = True
        return chunk({"functionCall": fc})

    chunks = [
        fragment("$.title", "Pic", name="save_note"),
        fragment("$.city", "Par", name="get_weather"),
        fragment("$.title", "nic"),
        fragment("$.city", "is"),
        chunk({"functionCall": {}}),  # closes the most recently updated call: get_weather
        chunk({"functionCall": {}}, finish_reason="STOP"),
    ]
    partials = await feed(aggregator, chunks)
    ids = call_ids(partials)
    note, weather = ids[0], ids[1]
    assert note is not None and weather is not None and note != weather
    assert ids == [note, weather, note, weather, weather, note]
    assert final_calls(aggregator.close()) == [
        (note, "save_note", {"title": "Picnic"}),
        (weather, "get_weather", {"city": "Paris"}),
    ]


async def test_a6_final_ids_skip_a_nameless_call_the_aggregate_leaves_out() -> None:
    aggregator = adk.StreamingResponseAggregator()
    nameless = chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.q", "stringValue": "z"}]}})
    chunks = [
        chunk(text("Hi")),
        nameless,
        chunk(call("first", {"x": 1})),
        chunk(call("second", {"y": 2}, id="m-2")),
        chunk(call("third", {"z": 3}), finish_reason="STOP"),
    ]
    partials = await feed(aggregator, chunks)
    nameless_id, first_id, second_id, third_id = call_ids(partials)
    final = aggregator.close()
    assert final_calls(final) == [
        (first_id, "first", {"x": 1}),
        ("m-2", "second", {"y": 2}),
        (third_id, "third", {"z": 3}),
    ]
    assert second_id == "m-2" and len({nameless_id, first_id, third_id}) == 3


async def test_a6_two_id_less_complete_calls_in_one_chunk_get_two_ids() -> None:
    aggregator = adk.StreamingResponseAggregator()
    both = chunk(call("a", {"n": 1}), call("a", {"n": 1}), finish_reason="STOP")
    partials = await feed(aggregator, [both])
    ids = call_ids(partials)
    assert len(set(ids)) == 2
    assert final_calls(aggregator.close()) == [(ids[0], "a", {"n": 1}), (ids[1], "a", {"n": 1})]


async def test_a7_a_call_repeating_an_earlier_model_id_is_left_out_of_the_final_response() -> None:
    aggregator = adk.StreamingResponseAggregator()
    chunks = [
        chunk(call("test_func", {"a": 1}, id="fc_123", signature=signature("a7"))),
        chunk(call("test_func", {"a": 1}, id="fc_123")),
        chunk(call("test_func2", {"b": 2}, id="fc_456")),
        chunk(text("done"), finish_reason="STOP"),
    ]
    partials = await feed(aggregator, chunks)
    assert call_ids(partials) == ["fc_123", "fc_123", "fc_456"]
    final = aggregator.close()
    assert final_calls(final) == [
        ("fc_123", "test_func", {"a": 1}),
        ("fc_456", "test_func2", {"b": 2}),
    ]
    assert final is not None and final.content is not None
    assert final.content.parts[0].thought_signature is not None
    assert final.content.parts[-1].text == "done"


async def test_a7_identical_calls_without_ids_are_two_calls() -> None:
    aggregator = adk.StreamingResponseAggregator()
    await feed(aggregator, [chunk(call("a", {"n": 1})), chunk(call("a", {"n": 1}))])
    calls = final_calls(aggregator.close())
    assert [(name, args) for _, name, args in calls] == [("a", {"n": 1}), ("a", {"n": 1})]
    assert calls[0][0] != calls[1][0]


async def test_a5_close_turns_a_stream_that_ended_inside_a_call_into_the_malformed_error() -> None:
    aggregator = adk.StreamingResponseAggregator()
    done = call("get_weather", {"city": "Paris"}, id="fc_w", signature=signature("a5"))
    cut = streamed_call("save_note", {"title": "Picnic", "body": "Sunscreen"}, id="fc_n", piece=4)
    chunks = [chunk(text("Checking.")), chunk(done), *cut[:-2]]
    partials = await feed(aggregator, chunks)
    assert [p.partial for p in partials] == [True] * len(chunks)
    final = aggregator.close()
    assert final is not None
    assert (final.partial, final.content, final.error_code, final.finish_reason) == (
        False,
        None,
        "MALFORMED_FUNCTION_CALL",
        types.FinishReason.MALFORMED_FUNCTION_CALL,
    )
    assert final.error_message is not None
    assert final.error_message.startswith(
        "The model's response ended inside the function call 'save_note' (id 'fc_n') without a "
        "finish reason: its arguments were cut off, so no tool was run."
    )
    assert final.custom_metadata is not None
    assert final.custom_metadata["fastagg_unfinished_calls"] == [
        {"id": "fc_n", "name": "save_note", "args": {"title": "Picnic", "body": "Sunscree"}}
    ]
    parts = final.custom_metadata["fastagg_partial_response"]["candidates"][0]["content"]["parts"]
    assert parts == [
        {"text": "Checking."},
        done,
        {
            "functionCall": {
                "id": "fc_n",
                "name": "save_note",
                "args": {"title": "Picnic", "body": "Sunscree"},
            }
        },
    ]


async def test_a5_two_cut_off_calls_are_named_in_one_message() -> None:
    aggregator = adk.StreamingResponseAggregator()
    first = streamed_call("a", {"x": "long value"}, piece=4)[:-1]
    second = streamed_call("b", {"y": "other value"}, id="fc_b", piece=4)[:-1]
    await feed(aggregator, [*first, *second, chunk(finish_reason="MAX_TOKENS")])
    final = aggregator.close()
    assert final is not None and final.error_message is not None
    assert final.error_message.startswith(
        "The model's response ended inside the function calls 'a', 'b' (id 'fc_b') with finish "
        "reason MAX_TOKENS: its arguments were cut off, so no tool was run."
    )
