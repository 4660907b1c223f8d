"""fastagg.testing.FakeGemini: URL shapes, framing, validation texts, faults (turn-loop.md "Fake server")."""

from __future__ import annotations

import asyncio
import base64
import json
import math
from typing import Any

import httpx
import pytest

from fastagg.testing import (
    FakeGemini,
    Step,
    call,
    chunk,
    demo_scenario,
    error_chunk,
    final,
    load_script,
    malformed_call,
    runaway_scenario,
    signature,
    stalled_scenario,
    streamed_call,
    text,
    thought,
    usage,
)
from fastagg.testing.validate import (
    MSG_CORRUPTED_SIGNATURE,
    MSG_FC_RESPONSE_COUNT,
    MSG_FR_AFTER_FC,
    MSG_MULTI_TURN_END,
    MSG_NO_CONTENTS,
    MSG_ROLE,
    MSG_SINGLE_TURN_END,
    missing_signature_message,
    validate_request,
)

GEMINI_PATH = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent"
KEY = {"x-goog-api-key": "k"}
SIG = signature("step one")
USER = {"role": "user", "parts": [{"text": "Weather in Paris and London?"}]}

TWO_CHUNKS = [
    chunk(text("Hello"), usage=usage(5), response_id="r1"),
    chunk(text(" world."), finish_reason="STOP", usage=usage(5, 3), response_id="r1"),
]


def body(*contents: dict[str, Any]) -> dict[str, Any]:
    return {"contents": list(contents)}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def responses(*items: tuple[str | None, str]) -> dict[str, Any]:
    parts = []
    for id_, name in items:
        fr: dict[str, Any] = {"name": name, "response": {"output": "ok"}}
        if id_ is not None:
            fr["id"] = id_
        parts.append({"functionResponse": fr})
    return {"role": "user", "parts": parts}


async def post(
    server: FakeGemini,
    payload: Any,
    *,
    path: str = GEMINI_PATH,
    query: str = "?alt=sse",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            server.url + path + query, json=payload, headers=KEY if headers is None else headers
        )


def sse_frame(obj: dict[str, Any]) -> bytes:
    return (
        b"data: "
        + json.dumps(obj, ensure_ascii=False, separators=(",", ": ")).encode()
        + b"\r\n\r\n"
    )


# --- URL shapes and framing -------------------------------------------------------------


async def test_sse_framing_is_one_data_line_per_chunk_ending_in_crlf_crlf() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content == sse_frame(TWO_CHUNKS[0]) + sse_frame(TWO_CHUNKS[1])


async def test_sse_keeps_non_ascii_as_raw_utf8_like_the_service() -> None:
    chunks = [chunk(text("18 °C \u2028 ok"), finish_reason="STOP")]
    async with FakeGemini([chunks]) as server:
        response = await post(server, body(USER))
    assert "18 °C \u2028 ok".encode() in response.content


async def test_array_framing_when_alt_sse_is_absent() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER), query="")
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    assert response.content.startswith(b"[{")
    assert b"\n,\r\n" in response.content
    assert response.content.endswith(b"\n]")
    assert json.loads(response.content) == TWO_CHUNKS


async def test_framing_array_forces_array_even_with_alt_sse() -> None:
    async with FakeGemini([TWO_CHUNKS], framing="array") as server:
        response = await post(server, body(USER))
    assert json.loads(response.content) == TWO_CHUNKS


@pytest.mark.parametrize(
    ("path", "backend"),
    [
        ("/v1beta/models/m:streamGenerateContent", "gemini"),
        ("/v1/models/m:streamGenerateContent", "gemini"),
        (
            "/v1beta1/projects/p/locations/us-central1/publishers/google/models/m:streamGenerateContent",
            "vertex",
        ),
        (
            "/v1/projects/p/locations/global/publishers/google/models/m:streamGenerateContent",
            "vertex",
        ),
        ("/v1/publishers/google/models/m:streamGenerateContent", "vertex"),
        ("/v1beta1/publishers/google/models/m:streamGenerateContent", "vertex"),
    ],
)
async def test_gemini_and_vertex_url_shapes_are_answered(path: str, backend: str) -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER), path=path)
    assert response.status_code == 200
    record = server.records[0]
    assert (record.backend, record.model, record.step, record.query) == (
        backend,
        "m",
        0,
        {"alt": "sse"},
    )


async def test_unknown_path_gets_404_and_consumes_no_step() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER), path="/v1beta/models/m:embedContent")
        missing = await post(server, body(USER), path="/v1beta/tunedModels/x")
        assert server.steps_served == 0
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": 404,
        "message": "FakeGemini answers streamGenerateContent, generateContent and countTokens, "
        "not embedContent",
        "status": "NOT_FOUND",
    }
    assert missing.status_code == 404


async def test_s2_request_without_key_or_token_gets_403_permission_denied() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER), headers={})
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    assert response.json()["error"]["message"].startswith(
        "Method doesn't allow unregistered callers"
    )


async def test_key_in_query_or_bearer_token_is_accepted() -> None:
    async with FakeGemini([TWO_CHUNKS, TWO_CHUNKS]) as server:
        by_query = await post(server, body(USER), query="?alt=sse&key=k", headers={})
        by_token = await post(server, body(USER), headers={"Authorization": "Bearer t"})
    assert (by_query.status_code, by_token.status_code) == (200, 200)


async def test_requests_are_recorded_in_order_including_refused_ones() -> None:
    bad = body(USER, model(text("prefill")))
    async with FakeGemini([TWO_CHUNKS]) as server:
        await post(server, bad)
        await post(server, body(USER))
        assert server.requests == [bad, body(USER)]
        assert [(r.status, r.step) for r in server.records] == [(400, None), (200, 0)]


async def test_s1_exhausted_script_answers_a_non_retryable_400_naming_the_script() -> None:
    async with FakeGemini([TWO_CHUNKS], name="weather.json") as server:
        await post(server, body(USER))
        response = await post(server, body(USER))
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": 400,
            "status": "FAILED_PRECONDITION",
            "message": "FakeGemini: the script 'weather.json' is exhausted: request 2 arrived but "
            "it has 1 steps (add steps, or pass repeat=True)",
        }
    }


def test_s1_script_name_defaults_to_the_file_or_responder_name(tmp_path: Any) -> None:
    path = tmp_path / "turn.json"
    path.write_text("[[]]")

    def answer(body: dict[str, Any], index: int) -> list[dict[str, Any]]:
        return []

    assert FakeGemini(path).name == "turn.json"
    assert FakeGemini(answer).name == "answer"
    assert FakeGemini().name == "demo"
    assert FakeGemini([[]]).name == "script"


async def test_repeat_starts_the_script_over() -> None:
    async with FakeGemini([TWO_CHUNKS], repeat=True) as server:
        first = await post(server, body(USER))
        second = await post(server, body(USER))
    assert first.content == second.content


async def test_callable_script_answers_from_the_request() -> None:
    def responder(request: dict[str, Any], index: int) -> list[dict[str, Any]]:
        said = request["contents"][-1]["parts"][0]["text"]
        return [chunk(text(f"#{index}: {said}"), finish_reason="STOP")]

    async with FakeGemini(responder) as server:
        response = await post(server, body(USER))
    assert json.loads(response.content[6:]) == chunk(
        text("#0: Weather in Paris and London?"), finish_reason="STOP"
    )


async def test_raw_step_is_sent_verbatim() -> None:
    raw = b'data: {"candidates": []}\n\n: comment\r\n'
    async with FakeGemini([Step(raw=raw)]) as server:
        response = await post(server, body(USER))
    assert response.content == raw


async def test_none_script_is_the_demo_scenario() -> None:
    async with FakeGemini() as server:
        assert [s.to_dict() for s in server.script] == [s.to_dict() for s in demo_scenario()]


# --- validation ---------------------------------------------------------------------------


async def test_trailing_model_turn_gets_the_services_400() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, body(USER, model(text("Sure, "))))
        single = await post(server, body(model(text("Sure, "))))
    assert response.status_code == 400
    assert response.json() == {
        "error": {"code": 400, "message": MSG_MULTI_TURN_END, "status": "INVALID_ARGUMENT"}
    }
    assert MSG_MULTI_TURN_END == (
        "Please ensure that multiturn requests ends with a user role or a function response."
    )
    assert single.json()["error"]["message"] == MSG_SINGLE_TURN_END


async def test_missing_signature_on_first_call_of_a_step_gets_the_services_400() -> None:
    history = body(
        USER, model(call("get_weather", {"city": "Paris"}, id="a")), responses(("a", "get_weather"))
    )
    async with FakeGemini([TWO_CHUNKS]) as server:
        response = await post(server, history)
    error = response.json()["error"]
    assert (response.status_code, error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith(
        "Function call is missing a thought_signature in functionCall parts."
    )
    assert error["message"] == missing_signature_message("get_weather", 2)
    assert "function call `default_api:get_weather` , position 2." in error["message"]


def test_signature_is_required_on_every_step_of_the_current_turn() -> None:
    step1 = model(call("a", {}, id="1", signature=SIG))
    step2 = model(thought("more"), call("b", {}, id="2"))
    rejection = validate_request(
        body(USER, step1, responses(("1", "a")), step2, responses(("2", "b")))
    )
    assert rejection is not None
    assert (rejection.message, rejection.where) == (
        missing_signature_message("b", 4),
        "contents[3].parts[1]",
    )


def test_only_the_first_call_of_a_parallel_step_needs_a_signature() -> None:
    step = model(
        call("w", {"city": "Paris"}, id="1", signature=SIG), call("w", {"city": "London"}, id="2")
    )
    assert validate_request(body(USER, step, responses(("1", "w"), ("2", "w")))) is None


def test_s3_consecutive_model_contents_form_one_step_as_google_genai_chat_sends_them() -> None:
    history = body(
        USER,
        model(thought("hm")),
        model(call("w", {}, id="1", signature=SIG)),
        model(call("w", {}, id="2")),
        responses(("1", "w"), ("2", "w")),
    )
    assert validate_request(history) is None


def test_older_turns_are_not_checked_for_signatures() -> None:
    old = [USER, model(call("w", {}, id="1")), responses(("1", "w")), model(text("done"))]
    assert validate_request(body(*old, {"role": "user", "parts": [{"text": "again"}]})) is None


@pytest.mark.parametrize(
    "sentinel", ["skip_thought_signature_validator", "context_engineering_is_the_way_to_go"]
)
def test_sentinel_signatures_pass_validation(sentinel: str) -> None:
    history = body(USER, model(call("w", {}, signature=sentinel)), responses((None, "w")))
    assert validate_request(history, known_signatures=set()) is None


def test_function_response_count_must_equal_call_count() -> None:
    step = model(call("w", {}, id="1", signature=SIG), call("w", {}, id="2"))
    rejection = validate_request(body(USER, step, responses(("1", "w"))))
    assert rejection is not None
    assert (rejection.message, rejection.where) == (MSG_FC_RESPONSE_COUNT, "contents[2]")


def test_interleaved_calls_and_responses_are_refused() -> None:
    history = body(
        USER,
        model(call("w", {}, id="1", signature=SIG)),
        responses(("1", "w")),
        model(call("w", {}, id="2")),
        responses(("2", "w")),
    )
    rejection = validate_request(history)
    assert rejection is not None
    assert rejection.message == missing_signature_message("w", 4)


def test_s5_function_responses_out_of_order_are_a_warning_not_a_400() -> None:
    step = model(call("w", {}, id="1", signature=SIG), call("w", {}, id="2"))
    warnings: list[str] = []
    rejection = validate_request(
        body(USER, step, responses(("2", "w"), ("1", "w"))), warnings=warnings
    )
    assert rejection is None
    assert warnings == [
        "contents[2].parts[0].functionResponse: function response 1 has id '2' but function call "
        "1 (contents[1].parts[0]) has id '1'; served anyway, as the service is not known to "
        "refuse it",
        "contents[2].parts[1].functionResponse: function response 2 has id '1' but function call "
        "2 (contents[1].parts[1]) has id '2'; served anyway, as the service is not known to "
        "refuse it",
    ]


def test_s5_function_response_name_differing_from_its_call_is_a_warning() -> None:
    step = model(call("get_weather", {}, signature=SIG))
    warnings: list[str] = []
    assert (
        validate_request(body(USER, step, responses((None, "get_time"))), warnings=warnings) is None
    )
    assert warnings == [
        "contents[2].parts[0].functionResponse: function response 1 has name 'get_time' but "
        "function call 1 (contents[1].parts[0]) has name 'get_weather'; served anyway, as the "
        "service is not known to refuse it"
    ]


def test_s5_function_response_without_the_calls_id_is_accepted() -> None:
    step = model(call("w", {}, id="fc_1", signature=SIG))
    warnings: list[str] = []
    assert validate_request(body(USER, step, responses((None, "w"))), warnings=warnings) is None
    assert warnings == []


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "gemini-2.0-flash", "gemini-1.5-pro"])
def test_s5_gemini_1_and_2_requests_need_no_signatures(name: str) -> None:
    unsigned = body(USER, model(call("w", {}, id="1")), responses(("1", "w")))
    assert validate_request(unsigned, model=name) is None
    rejection = validate_request(unsigned, model="gemini-3-flash-preview")
    assert rejection is not None
    assert rejection.message == missing_signature_message("w", 2)


async def test_s5_warnings_are_in_the_request_log() -> None:
    step = model(call("w", {}, id="1", signature=SIG))
    async with FakeGemini([TWO_CHUNKS], check_signatures=False) as server:
        response = await post(server, body(USER, step, responses(("9", "w"))))
    assert response.status_code == 200
    assert server.records[0].warnings == (
        "contents[2].parts[0].functionResponse: function response 1 has id '9' but function call "
        "1 (contents[1].parts[0]) has id '1'; served anyway, as the service is not known to "
        "refuse it",
    )


def test_function_response_without_a_call_is_refused() -> None:
    rejection = validate_request(body(USER, model(text("hi")), responses(("1", "w"))))
    assert rejection is not None
    assert (rejection.message, rejection.where) == (MSG_FR_AFTER_FC, "contents[2]")


def test_invalid_role_and_empty_contents_get_the_services_texts() -> None:
    bad_role = validate_request(body({"role": "assistant", "parts": [{"text": "x"}]}, USER))
    assert bad_role is not None and bad_role.message == MSG_ROLE
    empty = validate_request({"contents": []})
    assert empty is not None and empty.message == MSG_NO_CONTENTS


def test_signature_that_is_not_base64_is_refused_like_the_proto_parser() -> None:
    rejection = validate_request(body(USER, model(text("x", signature="not base64!")), USER))
    assert rejection is not None
    assert rejection.message == (
        "Invalid value at 'contents[1].parts[0].thought_signature' (TYPE_BYTES), "
        'Base64 decoding failed for "not base64!"'
    )


def test_signature_never_issued_is_corrupted_and_url_safe_reencoding_is_not() -> None:
    issued = base64.b64decode(SIG)
    url_safe = base64.urlsafe_b64encode(issued).decode().rstrip("=")
    assert url_safe != SIG
    ok = body(USER, model(call("w", {}, signature=url_safe)), responses((None, "w")))
    assert validate_request(ok, known_signatures={issued}) is None
    foreign = body(
        USER, model(call("w", {}, signature=signature("other model"))), responses((None, "w"))
    )
    rejection = validate_request(foreign, known_signatures={issued})
    assert rejection is not None and rejection.message == MSG_CORRUPTED_SIGNATURE


def test_snake_case_part_keys_are_understood() -> None:
    step = {
        "role": "model",
        "parts": [{"function_call": {"name": "w", "args": {}}, "thought_signature": SIG}],
    }
    fr = {"role": "user", "parts": [{"function_response": {"name": "w", "response": {}}}]}
    assert validate_request(body(USER, step, fr)) is None


async def test_refused_request_does_not_consume_a_step() -> None:
    async with FakeGemini([TWO_CHUNKS]) as server:
        await post(server, body(USER, model(text("x"))))
        response = await post(server, body(USER))
    assert response.status_code == 200
    assert server.steps_served == 1


async def test_s2_server_accepts_signatures_it_issued_and_refuses_others() -> None:
    sig = signature("served")
    step = [chunk(call("w", {"city": "Paris"}, id="1", signature=sig), finish_reason="STOP")]
    history = body(
        USER, model(call("w", {"city": "Paris"}, id="1", signature=sig)), responses(("1", "w"))
    )
    forged = body(
        USER,
        model(call("w", {"city": "Paris"}, id="1", signature=signature("x"))),
        responses(("1", "w")),
    )
    async with FakeGemini([step, TWO_CHUNKS]) as server:
        await post(server, body(USER))
        refused = await post(server, forged)
        accepted = await post(server, history)
    assert refused.json()["error"]["message"] == MSG_CORRUPTED_SIGNATURE
    assert accepted.status_code == 200


async def test_validation_can_be_switched_off() -> None:
    async with FakeGemini([TWO_CHUNKS], validate=False) as server:
        response = await post(server, body(USER, model(text("x"))))
    assert response.status_code == 200


# --- faults --------------------------------------------------------------------------------


async def test_s4_http_error_step_sends_status_retry_after_and_google_rpc_body() -> None:
    async with FakeGemini([Step(http_error=429, retry_after=2)]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "You exceeded your current quota, please check your plan and billing details.",
        }
    }


async def test_http_error_step_with_retry_delay_sends_a_retry_info_detail() -> None:
    async with FakeGemini([Step(http_error=503, retry_after=0.1, retry_delay="1.5s")]) as server:
        response = await post(server, body(USER))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "0.1"
    assert response.json()["error"]["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}
    ]
    assert response.json()["error"]["status"] == "UNAVAILABLE"


async def test_s4_drop_after_closes_the_connection_mid_body() -> None:
    step = Step(chunks=TWO_CHUNKS, drop_after=1)
    received = b""
    async with (
        FakeGemini([step]) as server,
        httpx.AsyncClient() as http,
        http.stream(
            "POST", server.url + GEMINI_PATH + "?alt=sse", json=body(USER), headers=KEY
        ) as response,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            async for piece in response.aiter_raw():
                received += piece
    assert received == sse_frame(TWO_CHUNKS[0])


async def test_pause_and_first_byte_delay_still_deliver_the_whole_stream() -> None:
    step = Step(chunks=TWO_CHUNKS, delay_first_byte=0.05, pause_after=1, pause=0.05)
    async with FakeGemini([step]) as server:
        response = await post(server, body(USER))
    assert response.content == sse_frame(TWO_CHUNKS[0]) + sse_frame(TWO_CHUNKS[1])


async def test_tiny_writes_deliver_the_same_bytes() -> None:
    step = Step(chunks=TWO_CHUNKS, tiny_writes=3)
    async with FakeGemini([step]) as server:
        response = await post(server, body(USER))
    assert response.content == sse_frame(TWO_CHUNKS[0]) + sse_frame(TWO_CHUNKS[1])


async def test_infinite_pause_ends_when_the_client_leaves_and_the_server_stops() -> None:
    async with (
        FakeGemini(stalled_scenario()) as server,
        httpx.AsyncClient() as http,
        http.stream(
            "POST", server.url + GEMINI_PATH + "?alt=sse", json=body(USER), headers=KEY
        ) as response,
    ):
        first = await response.aiter_raw().__anext__()
    assert first.startswith(b'data: {"candidates": [{"content": {"parts": [{"text": "**Reading')


async def test_in_stream_error_and_malformed_call_are_ordinary_chunks() -> None:
    chunks = [chunk(thought("hm")), error_chunk()]
    async with FakeGemini([chunks, [malformed_call()]]) as server:
        first = await post(server, body(USER))
        second = await post(server, body(USER))
    assert first.content.endswith(
        b'data: {"error": {"code": 500,"message": "An internal error has occurred. Please retry '
        b'or report in https://developers.generativeai.google/guide/troubleshooting",'
        b'"status": "INTERNAL"}}\r\n\r\n'
    )
    assert json.loads(second.content[6:])["candidates"][0] == {
        "finishReason": "MALFORMED_FUNCTION_CALL",
        "index": 0,
        "finishMessage": "Malformed function call: print(default_api.get_weather(city=Paris",
    }


# --- scripts and scenarios -----------------------------------------------------------------


def test_step_round_trips_through_its_json_form() -> None:
    step = Step(
        chunks=TWO_CHUNKS,
        pause_after=1,
        pause=math.inf,
        tiny_writes=2,
        http_error=None,
        drop_after=None,
    )
    assert step.to_dict() == {
        "chunks": TWO_CHUNKS,
        "pause_after": 1,
        "pause": "inf",
        "tiny_writes": 2,
    }
    assert Step.from_dict(step.to_dict()) == step


def test_load_script_accepts_lists_objects_and_rejects_unknown_keys(tmp_path: Any) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"steps": [TWO_CHUNKS, {"http_error": 503, "retry_after": 1}]}))
    assert load_script(path) == [Step(chunks=TWO_CHUNKS), Step(http_error=503, retry_after=1)]
    with pytest.raises(ValueError, match=r"unknown step keys \['delay'\]"):
        load_script([{"delay": 1}])


def test_streamed_call_sends_name_then_fragments_then_end_marker() -> None:
    chunks = streamed_call(
        "save_note",
        {"title": "Picnic", "n": 3, "ok": True, "x": None},
        id="c1",
        signature=SIG,
        piece=4,
    )
    parts = [c["candidates"][0]["content"]["parts"][0] for c in chunks]
    assert parts == [
        {
            "functionCall": {"id": "c1", "name": "save_note", "willContinue": True},
            "thoughtSignature": SIG,
        },
        {
            "functionCall": {
                "partialArgs": [
                    {"jsonPath": "$.title", "stringValue": "Picn", "willContinue": True}
                ],
                "willContinue": True,
            }
        },
        {
            "functionCall": {
                "partialArgs": [{"jsonPath": "$.title", "stringValue": "ic"}],
                "willContinue": True,
            }
        },
        {
            "functionCall": {
                "partialArgs": [{"jsonPath": "$.n", "numberValue": 3}],
                "willContinue": True,
            }
        },
        {
            "functionCall": {
                "partialArgs": [{"jsonPath": "$.ok", "boolValue": True}],
                "willContinue": True,
            }
        },
        {
            "functionCall": {
                "partialArgs": [{"jsonPath": "$.x", "nullValue": None}],
                "willContinue": True,
            }
        },
        {"functionCall": {}},
    ]


def test_signature_helper_gives_valid_standard_base64_with_url_unsafe_characters() -> None:
    sig = signature("anything")
    assert base64.b64encode(base64.b64decode(sig, validate=True)).decode() == sig
    assert sig.startswith("+/+/") and sig.endswith("=")


def test_demo_scenario_has_parallel_calls_a_fault_a_streamed_call_and_a_signed_answer() -> None:
    steps = demo_scenario()
    assert len(steps) == 5
    first_parts = [c["candidates"][0]["content"]["parts"][0] for c in steps[0].chunks]
    assert [p.get("functionCall", {}).get("name") for p in first_parts] == [
        None,
        None,
        "get_weather",
        "get_weather",
    ]
    assert "thoughtSignature" in first_parts[2] and "thoughtSignature" not in first_parts[3]
    assert steps[1].chunks[-1] == error_chunk()
    assert all("finishReason" not in c.get("candidates", [{}])[0] for c in steps[1].chunks)
    # L32: a streamed call cut off (no end marker, no finish reason), then streamed whole
    cut = [c["candidates"][0] for c in steps[2].chunks]
    assert any("partialArgs" in str(c) for c in cut)
    assert cut[-1]["content"]["parts"][0]["functionCall"]["willContinue"] is True
    assert all("finishReason" not in c for c in cut)
    end_marker = {"parts": [{"functionCall": {}}], "role": "model"}
    assert end_marker in [c["candidates"][0].get("content") for c in steps[3].chunks]
    last = steps[4].chunks[-1]["candidates"][0]
    assert last["finishReason"] == "STOP"
    assert last["content"]["parts"] == [{"text": "", "thoughtSignature": signature("demo step 4")}]


def test_runaway_scenario_has_n_signed_call_steps_then_an_answer() -> None:
    steps = runaway_scenario(3)
    assert len(steps) == 4
    for i, step in enumerate(steps[:3]):
        part = step.chunks[-1]["candidates"][0]["content"]["parts"][0]
        assert part["functionCall"]["name"] == "lookup"
        assert part["thoughtSignature"] == signature(f"runaway {i + 1}")
    assert "functionCall" not in str(steps[3].chunks)


async def test_server_binds_loopback_and_stops_with_a_stream_in_progress() -> None:
    server = FakeGemini(stalled_scenario())
    await server.start()
    assert server.url.startswith("http://127.0.0.1:")
    async with httpx.AsyncClient() as http:
        request = asyncio.ensure_future(
            http.post(server.url + GEMINI_PATH + "?alt=sse", json=body(USER), headers=KEY)
        )
        while server.steps_served == 0:
            await asyncio.sleep(0.01)
        await server.stop()
        with pytest.raises(httpx.HTTPError):
            await request


def test_final_helper_without_signature_is_a_bare_finish() -> None:
    assert final(usage=usage(1, 2)) == {
        "candidates": [{"finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2, "totalTokenCount": 3},
        "modelVersion": "gemini-3-flash-preview",
    }


async def test_port_in_use_raises_and_leaves_nothing_running() -> None:
    async with FakeGemini([TWO_CHUNKS]) as first:
        second = FakeGemini([TWO_CHUNKS], port=first.port)
        with pytest.raises(OSError):
            await second.start()
        with pytest.raises(RuntimeError, match="FakeGemini is not running"):
            _ = second.url


# --- L58: a continuation hop resends its request ------------------------------------------

HOP_STEPS = [
    Step([chunk(text("Hello "), finish_reason="CONTINUATION", continuation_token="h1")]),
    Step([chunk(text("world")), final(signature("end"))]),
]
FIRST = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


async def test_l58_a_hop_with_an_empty_generation_config_is_the_same_request() -> None:
    # google-genai's own continuation hop adds "generationConfig": {} to a request that
    # had none; the API reads an empty message as an absent one.
    async with FakeGemini(HOP_STEPS) as server:
        first = await post(server, FIRST)
        hop = await post(server, {**FIRST, "generationConfig": {}, "continuationToken": "h1"})
    assert (first.status_code, hop.status_code) == (200, 200)
    assert b"world" in hop.content


async def test_l58_a_hop_that_changes_the_request_is_refused() -> None:
    async with FakeGemini(HOP_STEPS) as server:
        await post(server, FIRST)
        changed = {**FIRST, "generationConfig": {"temperature": 0.5}, "continuationToken": "h1"}
        hop = await post(server, changed)
    assert hop.status_code == 400
    assert hop.json()["error"]["message"] == (
        "The request with a continuation token must be the request that produced it, "
        "unchanged (same contents and config)."
    )
