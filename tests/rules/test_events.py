"""Events (E1-E10): errors, top-level fields, candidates, metadata, citations, shapes.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

import json
from types import ModuleType

from streams import HELLO, WORLD, as_json, chunk, pa, run_chunks, sse


def test_e1_error_event_recorded_with_stream_error_delta(impl: ModuleType) -> None:
    error = {
        "code": 500,
        "message": "An internal error has occurred.",
        "status": "INTERNAL",
        "details": [{"@type": "x"}],
    }
    agg = impl.StreamAggregator()
    deltas = agg.feed(sse(HELLO, {"usageMetadata": {"totalTokenCount": 3}, "error": error}, WORLD))
    assert deltas == [
        impl.TextDelta(0, 0, "Hello", False),
        impl.StreamError(error),
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    result = agg.close()
    assert as_json(result.error) == as_json(error)
    assert result.usage is None  # E8: an error payload contributes nothing else
    assert result.parts == [{"text": "Hello world"}]
    assert result.complete is False


def test_e8_null_error_is_no_error(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, {**WORLD, "error": None})
    assert result.error is None
    assert result.complete is True
    assert deltas == [impl.TextDelta(0, 0, " world", False), impl.Finish(0, "STOP")]


def test_e8_last_error_kept_each_yields_a_delta(impl: ModuleType) -> None:
    result, deltas = run_chunks(impl, {"error": {"code": 1}}, {"error": {"code": 2}})
    assert deltas == [impl.StreamError({"code": 1}), impl.StreamError({"code": 2})]
    assert result.error == {"code": 2}


def test_e2_payload_without_candidates(impl: ModuleType) -> None:
    feedback = {"blockReason": "SAFETY", "safetyRatings": []}
    result, deltas = run_chunks(
        impl, {"promptFeedback": feedback, "usageMetadata": {"promptTokenCount": 3}}
    )
    assert deltas == []
    assert result.prompt_feedback == feedback
    assert result.candidates == []
    assert result.parts == []
    assert result.complete is False
    assert result.to_dict() == {
        "candidates": [],
        "usageMetadata": {"promptTokenCount": 3},
        "promptFeedback": feedback,
    }


def test_e3_top_level_fields_last_non_null_usage_merged(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        {
            "modelVersion": "m1",
            "responseId": "r1",
            "createTime": "t1",
            "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5},
            "nonce": 1,
        },
        {
            "modelVersion": None,
            "responseId": "r2",
            "usageMetadata": {"totalTokenCount": None, "candidatesTokenCount": 2},
        },
        {"usageMetadata": {"totalTokenCount": 7}},
    )
    assert result.model_version == "m1"
    assert result.response_id == "r2"
    assert as_json(result.usage) == as_json(
        {"promptTokenCount": 5, "totalTokenCount": 7, "candidatesTokenCount": 2}
    )
    assert as_json(result.to_dict()) == as_json(
        {
            "candidates": [],
            "usageMetadata": {
                "promptTokenCount": 5,
                "totalTokenCount": 7,
                "candidatesTokenCount": 2,
            },
            "modelVersion": "m1",
            "responseId": "r2",
            "createTime": "t1",
        }
    )


def test_e3_usage_merge_reads_a_repeated_key_as_json_does(impl: ModuleType) -> None:
    # A key twice in one object: its first place, its last value; a last value
    # of null replaces nothing; any value replaces a number, and a number any value.
    body = (
        b'data: {"usageMetadata": {"a": 1, "b": 2}}\r\n\r\n'
        b'data: {"usageMetadata": {"b": 5, "c": [1], "b": 6, "a": {"x": 1}}}\r\n\r\n'
        b'data: {"usageMetadata": {"c": 3, "b": 7, "b": null, "d": 4}}\r\n\r\n'
    )
    agg = impl.StreamAggregator(deltas=False)
    agg.feed(body)
    result = agg.close()
    assert json.dumps(result.usage) == '{"a": {"x": 1}, "b": 6, "c": 3, "d": 4}'


def test_e4_candidates_aggregated_independently_by_index(impl: ModuleType) -> None:
    both = {
        "candidates": [
            {"content": {"parts": [{"text": "B1"}]}, "index": 1},
            {"content": {"parts": [{"text": "A1"}]}},
        ]
    }
    later = {
        "candidates": [
            {
                "content": {"parts": [{"text": "A2"}]},
                "index": 0,
                "finishReason": "STOP",
            },
            {
                "content": {"parts": [{"text": "B2"}]},
                "index": 1,
                "finishReason": "MAX_TOKENS",
            },
        ]
    }
    result, deltas = run_chunks(impl, both, later)
    assert deltas == [
        impl.TextDelta(1, 0, "B1", False),
        impl.TextDelta(0, 0, "A1", False),
        impl.TextDelta(0, 0, "A2", False),
        impl.Finish(0, "STOP"),
        impl.TextDelta(1, 0, "B2", False),
        impl.Finish(1, "MAX_TOKENS"),
    ]
    assert [c.index for c in result.candidates] == [0, 1]
    assert [c.parts for c in result.candidates] == [
        [{"text": "A1A2"}],
        [{"text": "B1B2"}],
    ]
    assert result.candidates[1].finish_reason == "MAX_TOKENS"
    assert result.text == "A1A2"
    assert result.finish_reason == "STOP"


def test_e5_finish_reason_and_message_last_non_empty(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        chunk({"text": "a"}, finish="MAX_TOKENS"),
        {"candidates": [{"finishReason": "", "finishMessage": "done"}]},
        {"candidates": [{"finishReason": 3, "finishMessage": ""}]},
    )
    assert deltas == [impl.TextDelta(0, 0, "a", False), impl.Finish(0, "MAX_TOKENS")]
    assert result.finish_reason == "MAX_TOKENS"
    assert result.finish_message == "done"


def test_e5_other_candidate_keys_last_non_null_in_first_arrival_order(
    impl: ModuleType,
) -> None:
    first = {
        "candidates": [{"safetyRatings": [{"category": "A"}], "avgLogprobs": -0.5, "tokenCount": 3}]
    }
    second = {
        "candidates": [
            {
                "tokenCount": 4,
                "safetyRatings": None,
                "groundingMetadata": {"webSearchQueries": ["q"]},
                "avgLogprobs": -1.0,
            }
        ]
    }
    result, _ = run_chunks(impl, first, second)
    assert as_json(result.candidates[0].metadata) == as_json(
        {
            "safetyRatings": [{"category": "A"}],
            "avgLogprobs": -1.0,
            "tokenCount": 4,
            "groundingMetadata": {"webSearchQueries": ["q"]},
        }
    )
    assert as_json(result.to_dict()["candidates"][0]) == as_json(
        {
            "content": {"role": "model", "parts": []},
            "safetyRatings": [{"category": "A"}],
            "avgLogprobs": -1.0,
            "tokenCount": 4,
            "groundingMetadata": {"webSearchQueries": ["q"]},
            "index": 0,
        }
    )


def test_e9_citations_concatenated_without_exact_duplicates(impl: ModuleType) -> None:
    c1 = {"startIndex": 0, "uri": "a"}
    c2 = {"startIndex": 1.0, "uri": "a"}  # 1.0 is not 1
    c3 = {"startIndex": 1, "uri": "a"}
    result, _ = run_chunks(
        impl,
        {"candidates": [{"finishReason": "STOP", "citationMetadata": {"citations": [c1, c2]}}]},
        {
            "candidates": [
                {
                    "citationMetadata": {
                        "citations": [{"uri": "a", "startIndex": 0}, c3],
                        "citationSources": [c1],
                        "note": "x",
                    }
                }
            ]
        },
    )
    assert as_json(result.candidates[0].metadata) == as_json(
        {
            "citationMetadata": {
                "citations": [c1, c2, c3],
                "citationSources": [c1],
                "note": "x",
            }
        }
    )
    assert as_json(result.to_dict()["candidates"][0]) == as_json(
        {
            "content": {"role": "model", "parts": []},
            "finishReason": "STOP",
            "citationMetadata": {
                "citations": [c1, c2, c3],
                "citationSources": [c1],
                "note": "x",
            },
            "index": 0,
        }
    )


def test_e6_complete_needs_a_finish_reason_on_candidate_0(impl: ModuleType) -> None:
    result, _ = run_chunks(impl, chunk({"text": "a"}), chunk({"text": "b"}, index=1, finish="STOP"))
    assert result.complete is False
    assert result.finish_reason is None
    result, _ = run_chunks(impl, chunk({"text": "a"}, finish="STOP"))
    assert result.complete is True


def test_e7_wrong_shapes_warned_and_ignored(impl: ModuleType) -> None:
    result, deltas = run_chunks(
        impl,
        {"candidates": {"0": 1}, "usageMetadata": [1]},
        {
            "candidates": [
                "x",
                {"index": -1, "content": {"parts": [{"text": "lost"}]}},
                {"index": True},
                {"index": 2**31},
                {"index": 1.0},
                {"content": [1]},
                {"content": {"parts": {"text": "x"}}},
                {
                    "content": {"parts": [7, {"text": "kept"}, None]},
                    "citationMetadata": [],
                },
                {
                    "content": {
                        "parts": [
                            {
                                "functionCall": {
                                    "name": "f",
                                    "willContinue": True,
                                    "partialArgs": "p",
                                }
                            }
                        ]
                    }
                },
                {
                    "content": {
                        "parts": [
                            {"functionCall": {"partialArgs": [1, pa("$.a", stringValue="v")]}}
                        ]
                    }
                },
                {"content": None, "finishReason": None},
            ]
        },
    )
    assert result.warnings == [
        "event 0: candidates is not a list; ignored",
        "event 0: usageMetadata is not an object; ignored",
        "event 1: candidates[0] is not an object; ignored",
        "event 1: candidates[1].index is not a non-negative integer below 2^31; ignored",
        "event 1: candidates[2].index is not a non-negative integer below 2^31; ignored",
        "event 1: candidates[3].index is not a non-negative integer below 2^31; ignored",
        "event 1: candidates[4].index is not a non-negative integer below 2^31; ignored",
        "event 1: candidates[5].content is not an object; ignored",
        "event 1: candidates[6].content.parts is not a list; ignored",
        "event 1: candidates[7].content.parts[0] is not an object; ignored",
        "event 1: candidates[7].content.parts[2] is not an object; ignored",
        "event 1: candidates[7].citationMetadata is not an object; ignored",
        "event 1: candidates[8].content.parts[0].functionCall.partialArgs is not a list; ignored",
        "event 1: candidates[9].content.parts[0].functionCall.partialArgs[0] is not an object; ignored",
    ]
    assert as_json(result.parts) == as_json(
        [{"text": "kept"}, {"functionCall": {"name": "f", "args": {"a": "v"}}}]
    )
    assert [c.index for c in result.candidates] == [0]
    assert impl.TextDelta(0, 0, "kept", False) in deltas


def test_e10_changed_response_id_is_warned_about(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        chunk({"text": "a"}, responseId="r1"),
        chunk({"text": "b"}, responseId="r1"),
        chunk({"text": "c"}, responseId="r2"),
        chunk({"text": "d"}, responseId=None),
        chunk({"text": "e"}, responseId=7),
    )
    assert result.response_id == 7
    assert result.text == "abcde"
    assert result.warnings == [
        'event 2: responseId changed from "r1" to "r2"; the body holds more than one '
        "response and they were aggregated as one model turn",
        'event 4: responseId changed from "r2" to 7; the body holds more than one '
        "response and they were aggregated as one model turn",
    ]


def test_e10_one_response_id_gives_no_warning(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl, chunk({"text": "a"}, responseId="r1"), chunk({"text": "b"}, responseId="r1")
    )
    assert result.warnings == []


def test_e4_candidates_arriving_in_descending_order_are_listed_in_index_order(
    impl: ModuleType,
) -> None:
    events = [
        {"candidates": [{"index": i, "content": {"parts": [{"text": f"t{i}"}]}}]}
        for i in range(40, -1, -1)
    ]
    result, _ = run_chunks(impl, *events, *events[:3])
    assert [c.index for c in result.candidates] == list(range(41))
    assert [c.text for c in result.candidates][:3] == ["t0", "t1", "t2"]
    assert result.candidates[40].text == "t40t40"
    assert result.text == "t0"


def test_e3_usage_with_many_keys_merges_like_a_json_object(impl: ModuleType) -> None:
    keys = ",".join(f'"k{i}":{i}' for i in range(40))
    first = b'{"usageMetadata":{' + keys.encode() + b',"dup":1,"k3":30,"dup":null}}'
    second = b'{"usageMetadata":{"k0":null,"dup":2,"z":1,"k1":10,"z":null}}'
    agg = impl.StreamAggregator()
    agg.feed(sse(first, second))
    usage = agg.close().usage
    expected = {f"k{i}": i for i in range(40)}
    expected.update(k3=30, k1=10, dup=2)
    assert list(usage) == [*(f"k{i}" for i in range(40)), "dup"]
    assert usage == expected


def test_e9a_citations_deduplicated_by_identity(impl: ModuleType) -> None:
    def cited(*entries: object) -> dict[str, object]:
        return {"candidates": [{"citationMetadata": {"citations": list(entries)}}]}

    result, _ = run_chunks(
        impl,
        cited({"a": 1, "b": 2}, {"n": 1}),
        cited({"b": 2, "a": 1}, {"n": 1.0}, {"n": True}, {"n": 0.0}, {"n": -0.0}),
        cited({"n": 1}, *({"i": i} for i in range(300))),
        cited(*({"i": i} for i in range(300))),
    )
    kept = result.candidates[0].metadata["citationMetadata"]["citations"]
    assert json.dumps(kept[:6]) == json.dumps(
        [{"a": 1, "b": 2}, {"n": 1}, {"n": 1.0}, {"n": True}, {"n": 0.0}, {"n": -0.0}]
    )
    assert kept[6:] == [{"i": i} for i in range(300)]


def test_e0_candidates_in_list_order_finish_after_parts_then_usage(impl: ModuleType) -> None:
    payload = {
        "usageMetadata": [1],
        "candidates": [
            {"finishReason": "STOP", "content": {"parts": [{"text": "a"}]}, "index": 0},
            {"index": 1, "content": {"parts": [{"text": "b"}]}},
            7,
        ],
    }
    agg = impl.StreamAggregator()
    assert agg.feed(sse(payload)) == [
        impl.TextDelta(0, 0, "a", False),
        impl.Finish(0, "STOP"),
        impl.TextDelta(1, 0, "b", False),
    ]
    assert agg.close().warnings == [
        "event 0: candidates[2] is not an object; ignored",
        "event 0: usageMetadata is not an object; ignored",
    ]
