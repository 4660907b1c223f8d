"""FakeGemini's non-streaming methods over raw HTTP: generateContent and countTokens
(turn-loop.md "Fake server", S7-S9)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fastagg.testing import (
    FakeGemini,
    Step,
    call,
    chunk,
    error_chunk,
    final,
    signature,
    streamed_call,
    text,
    thought,
    usage,
)
from fastagg.testing.validate import MSG_CORRUPTED_SIGNATURE, MSG_MULTI_TURN_END

MODEL = "gemini-3-flash-preview"
GENERATE = f"/v1beta/models/{MODEL}:generateContent"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent"
COUNT = f"/v1beta/models/{MODEL}:countTokens"
KEY = {"x-goog-api-key": "k"}
SIG = signature("fake gc step one")
USER = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}

ANSWER = [
    chunk(thought("Weighing "), usage=usage(5), response_id="r1"),
    chunk(thought("it."), response_id="r1"),
    chunk(text("Sunny, "), response_id="r1"),
    chunk(text("24 °C."), response_id="r1"),
    final(signature("fake gc answer"), usage=usage(5, 3, 2), response_id="r1"),
]
ANSWER_WHOLE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Weighing it.", "thought": True},
                    {"text": "Sunny, 24 °C."},
                    {"text": "", "thoughtSignature": signature("fake gc answer")},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 5,
        "candidatesTokenCount": 3,
        "thoughtsTokenCount": 2,
        "totalTokenCount": 10,
    },
    "modelVersion": MODEL,
    "responseId": "r1",
}
CALL_STEP = [
    chunk(thought("Need the weather."), response_id="c1"),
    chunk(call("get_weather", {"city": "Paris"}, id="fc1", signature=SIG), response_id="c1"),
    chunk(call("get_time", {"zone": "CET"}, id="fc2"), response_id="c1"),
    final(usage=usage(7, 4), response_id="c1"),
]


def body(*contents: dict[str, Any]) -> dict[str, Any]:
    return {"contents": list(contents)}


def answered(*items: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": id_, "name": name, "response": {"output": "ok"}}}
            for id_, name in items
        ],
    }


async def post(
    server: FakeGemini,
    payload: Any,
    *,
    path: str = GENERATE,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            server.url + path, json=payload, headers=KEY if headers is None else headers
        )


# --- S7: generateContent answers the step whole ------------------------------------------


async def test_s7_generate_content_answers_the_step_as_one_aggregated_response() -> None:
    async with FakeGemini([Step(ANSWER)]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    assert response.json() == ANSWER_WHOLE
    # pretty-printed, raw UTF-8, as the service answers
    assert response.content == json.dumps(response.json(), indent=2, ensure_ascii=False).encode()
    assert "Sunny, 24 °C.".encode() in response.content
    assert [(r.status, r.step, r.rejection, r.backend) for r in server.records] == [
        (200, 0, None, "gemini")
    ]


async def test_s7_calls_come_whole_with_the_signature_byte_exact_on_their_part() -> None:
    streamed = streamed_call(
        "save_note", {"title": "Picnic", "body": "Bring water."}, id="n1", signature=SIG, piece=4
    )
    async with FakeGemini([Step(CALL_STEP), Step([*streamed, final()])]) as server:
        parallel = await post(server, body(USER))
        note = await post(server, body(USER))
    assert parallel.json()["candidates"][0] == {
        "content": {
            "role": "model",
            "parts": [
                {"text": "Need the weather.", "thought": True},
                {
                    "functionCall": {"id": "fc1", "name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": SIG,
                },
                {"functionCall": {"id": "fc2", "name": "get_time", "args": {"zone": "CET"}}},
            ],
        },
        "finishReason": "STOP",
        "index": 0,
    }
    assert parallel.json()["usageMetadata"] == usage(7, 4)
    assert note.json()["candidates"][0]["content"]["parts"] == [
        {
            "functionCall": {
                "id": "n1",
                "name": "save_note",
                "args": {"title": "Picnic", "body": "Bring water."},
            },
            "thoughtSignature": SIG,
        }
    ]


async def test_s7_a_two_step_tool_turn_sends_the_issued_signature_back() -> None:
    async with FakeGemini([Step(CALL_STEP), Step(ANSWER)]) as server:
        first = await post(server, body(USER))
        history = body(
            USER,
            first.json()["candidates"][0]["content"],
            answered(("fc1", "get_weather"), ("fc2", "get_time")),
        )
        second = await post(server, history)
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json() == ANSWER_WHOLE
    assert server.requests[1]["contents"][1]["parts"][1]["thoughtSignature"] == SIG
    assert [(r.status, r.step, r.rejection) for r in server.records] == [
        (200, 0, None),
        (200, 1, None),
    ]


async def test_s7_generate_content_is_validated_and_recorded_like_streaming() -> None:
    forged = body(
        USER,
        {"role": "model", "parts": [call("get_weather", {}, id="fc1", signature=signature("x"))]},
        answered(("fc1", "get_weather")),
    )
    trailing = body(USER, {"role": "model", "parts": [text("Sure, ")]})
    async with FakeGemini([Step(ANSWER)]) as server:
        refused = await post(server, trailing)
        corrupted = await post(server, forged)
        unauthenticated = await post(server, body(USER), headers={})
        served = await post(server, body(USER))
        exhausted = await post(server, body(USER))
    assert refused.json() == {
        "error": {"code": 400, "message": MSG_MULTI_TURN_END, "status": "INVALID_ARGUMENT"}
    }
    assert corrupted.json()["error"]["message"] == MSG_CORRUPTED_SIGNATURE
    assert unauthenticated.status_code == 403
    assert served.json() == ANSWER_WHOLE
    assert exhausted.json()["error"] == {
        "code": 400,
        "status": "FAILED_PRECONDITION",
        "message": "FakeGemini: the script 'script' is exhausted: request 2 arrived but it has "
        "1 steps (add steps, or pass repeat=True)",
    }
    assert server.requests == [trailing, forged, body(USER), body(USER), body(USER)]
    assert [(r.status, r.step) for r in server.records] == [
        (400, None),
        (400, None),
        (403, None),
        (200, 0),
        (400, None),
    ]


async def test_s7_generate_and_stream_share_one_script_and_one_signature_ledger() -> None:
    async with FakeGemini([Step(CALL_STEP), Step(ANSWER)]) as server:
        first = await post(server, body(USER), path=STREAM + "?alt=sse")
        step_one = {"role": "model", "parts": [call("get_weather", {"city": "Paris"}, id="fc1")]}
        step_one["parts"][0]["thoughtSignature"] = SIG
        step_one["parts"].append(call("get_time", {"zone": "CET"}, id="fc2"))
        history = body(USER, step_one, answered(("fc1", "get_weather"), ("fc2", "get_time")))
        second = await post(server, history)
    assert first.headers["content-type"] == "text/event-stream"
    assert second.json() == ANSWER_WHOLE
    assert [r.path for r in server.records] == [STREAM, GENERATE]
    assert [r.step for r in server.records] == [0, 1]


@pytest.mark.parametrize(
    ("path", "backend"),
    [
        ("/v1/models/m:generateContent", "gemini"),
        (
            "/v1beta1/projects/p/locations/us-central1/publishers/google/models/m:generateContent",
            "vertex",
        ),
        ("/v1beta1/publishers/google/models/m:generateContent", "vertex"),
    ],
)
async def test_s7_gemini_and_vertex_paths_answer_generate_content(path: str, backend: str) -> None:
    async with FakeGemini([Step(ANSWER)]) as server:
        response = await post(server, body(USER), path=path)
    assert response.json() == ANSWER_WHOLE
    assert (server.records[0].backend, server.records[0].model) == (backend, "m")


async def test_s7_a_raw_recorded_stream_is_answered_aggregated() -> None:
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in ANSWER)
    async with FakeGemini([Step(raw=raw)]) as server:
        response = await post(server, body(USER))
    assert response.json() == ANSWER_WHOLE


async def test_s7_a_blocked_prompt_is_answered_with_its_feedback_and_no_candidates() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4},
        "modelVersion": MODEL,
    }
    async with FakeGemini([Step([blocked])]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 200
    assert response.json() == blocked


async def test_s7_a_step_ending_in_a_long_decode_checkpoint_keeps_its_token() -> None:
    hop = [chunk(text("Part one"), finish_reason="CONTINUATION", continuation_token="t1")]
    async with FakeGemini([Step(hop)]) as server:
        response = await post(server, body(USER))
    assert response.json()["candidates"] == [
        {
            "content": {"role": "model", "parts": [{"text": "Part one"}]},
            "finishReason": "CONTINUATION",
            "continuationToken": "t1",
            "index": 0,
        }
    ]


# --- S8: a failing step answered whole ----------------------------------------------------


async def test_s8_an_http_error_step_is_the_same_error_as_when_streaming() -> None:
    async with FakeGemini([Step(http_error=429, retry_after=2, retry_delay="2s")]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}],
        }
    }
    assert (server.records[0].status, server.records[0].step) == (429, 0)


@pytest.mark.parametrize(
    ("error", "status"),
    [(error_chunk(), 500), (error_chunk(503, "UNAVAILABLE", "The model is overloaded."), 503)],
)
async def test_s8_an_in_stream_error_becomes_its_status_and_error_body(
    error: dict[str, Any], status: int
) -> None:
    async with FakeGemini([Step([chunk(thought("hm")), error])]) as server:
        response = await post(server, body(USER))
    assert response.status_code == status
    assert response.json() == error
    assert (server.records[0].status, server.records[0].step) == (status, 0)


@pytest.mark.parametrize(
    "step",
    [
        Step([chunk(text("Sunny, "))]),  # no finish reason
        Step(streamed_call("save_note", {"body": "Bring water."}, id="n1", signature=SIG)[:2]),
        Step(ANSWER, drop_after=2),
        Step(ANSWER, drop_after=len(ANSWER)),
        Step([]),
    ],
    ids=["no-finish-reason", "unfinished-call", "drop-after-2", "drop-after-last", "empty"],
)
async def test_s8_a_cut_off_step_is_a_dropped_connection_without_a_status(step: Step) -> None:
    async with FakeGemini([step, Step(ANSWER)]) as server:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await post(server, body(USER))
        retried = await post(server, body(USER))
    assert retried.json() == ANSWER_WHOLE
    assert [(r.status, r.step) for r in server.records] == [(0, 0), (200, 1)]


async def test_s8_timing_and_tiny_writes_still_deliver_the_whole_answer() -> None:
    step = Step(ANSWER, delay_first_byte=0.02, chunk_interval=0.01, pause_after=1, pause=0.02)
    async with FakeGemini([step, Step(ANSWER, tiny_writes=7), Step(ANSWER)]) as server:
        timed = await post(server, body(USER))
        tiny = await post(server, body(USER))
        whole = await post(server, body(USER))
    assert timed.json() == ANSWER_WHOLE
    assert tiny.content == whole.content


# --- S9: countTokens ----------------------------------------------------------------------

COUNTED = {
    "contents": [
        USER,  # "Weather in Paris?": 17 characters, 5 tokens
        # {"functionCall":{"id":"fc1","name":"get_weather","args":{"city":"Paris"}}}: 74, 19
        {
            "role": "model",
            "parts": [call("get_weather", {"city": "Paris"}, id="fc1", signature=SIG)],
        },
        # {"functionResponse":{"id":"fc1","name":"get_weather","response":{"temp_c":24}}}: 79, 20
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "fc1",
                        "name": "get_weather",
                        "response": {"temp_c": 24},
                    }
                }
            ],
        },
    ],
    "systemInstruction": {"parts": [{"text": "You answer in one line."}]},  # 23, 6
}


async def test_s9_count_tokens_counts_four_characters_a_token_per_part_and_uses_no_step() -> None:
    async with FakeGemini([Step(ANSWER)]) as server:
        counted = await post(server, COUNTED, path=COUNT)
        wrapped = await post(server, {"generateContentRequest": COUNTED}, path=COUNT)
        answer = await post(server, body(USER))
    expected = {"totalTokens": 50, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 50}]}
    assert (counted.status_code, counted.json()) == (200, expected)
    assert wrapped.json() == expected
    assert answer.json() == ANSWER_WHOLE
    assert server.requests == [COUNTED, {"generateContentRequest": COUNTED}, body(USER)]
    assert [(r.status, r.step) for r in server.records] == [(200, None), (200, None), (200, 0)]


async def test_s9_count_tokens_of_nothing_is_zero() -> None:
    async with FakeGemini([]) as server:
        empty = await post(
            server, {"contents": [{"role": "user", "parts": [{"text": ""}]}]}, path=COUNT
        )
        none = await post(server, {}, path=COUNT)
    assert (empty.json(), none.json()) == ({"totalTokens": 0}, {"totalTokens": 0})


async def test_s9_count_tokens_needs_auth_and_refuses_what_no_request_may_carry() -> None:
    bad_signature = body(USER, {"role": "model", "parts": [text("x", signature="not base64!")]})
    async with FakeGemini([]) as server:
        unauthenticated = await post(server, body(USER), path=COUNT, headers={})
        refused = await post(server, bad_signature, path=COUNT)
        not_a_list = await post(server, {"contents": "hello"}, path=COUNT)
        # S5: a history the turn rules would refuse (ending in a model turn, a signature the
        # fake never issued) is still counted: the service is not known to refuse it here
        foreign = body(USER, {"role": "model", "parts": [text("Sure", signature=SIG)]})
        counted = await post(server, foreign, path=COUNT)
    assert unauthenticated.status_code == 403
    assert refused.json() == {
        "error": {
            "code": 400,
            "message": "Invalid value at 'contents[1].parts[0].thought_signature' (TYPE_BYTES), "
            'Base64 decoding failed for "not base64!"',
            "status": "INVALID_ARGUMENT",
        }
    }
    assert not_a_list.json()["error"] == {
        "code": 400,
        "message": "Invalid JSON payload received. 'contents' must be a list of Content objects.",
        "status": "INVALID_ARGUMENT",
    }
    assert counted.json()["totalTokens"] == 6
    assert [r.status for r in server.records] == [403, 400, 400, 200]
