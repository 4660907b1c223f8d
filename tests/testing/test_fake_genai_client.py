"""The real google-genai client's non-streaming calls against FakeGemini over loopback:
``generate_content`` (S7, S8) and ``count_tokens`` (S9), on the Gemini API and Vertex paths."""

from __future__ import annotations

import base64
import typing
from typing import Any

import pytest

from fastagg.testing import FakeGemini, Step, call, chunk, error_chunk, final, signature, text
from fastagg.testing.validate import decode_signature

genai = pytest.importorskip(
    "google.genai", reason="needs google-genai (pip install 'fastagg[genai]')"
)
types = pytest.importorskip("google.genai.types")
errors = pytest.importorskip("google.genai.errors")

MODEL = "gemini-3-flash-preview"
SIG = signature("genai gc step one")
PROMPT = "Weather in Paris?"  # 17 characters: 5 tokens (S9)
CALL_STEP = [
    chunk(text("Checking.")),
    chunk(call("get_weather", {"city": "Paris"}, id="fc1", signature=SIG)),
    final(),
]
ANSWER_STEP = [chunk(text("Sunny, ")), chunk(text("24 °C.")), final(signature("genai answer"))]
WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Current weather for a city.",
            parameters_json_schema={
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        )
    ]
)


def client_for(server: FakeGemini, backend: str) -> Any:
    options = types.HttpOptions(base_url=server.url)
    if backend == "vertex":  # Vertex AI express mode: /v1beta1/publishers/google/models/...
        return genai.Client(vertexai=True, api_key="k", http_options=options)
    return genai.Client(api_key="k", http_options=options)


@pytest.mark.parametrize("backend", ["gemini", "vertex"])
async def test_s7_genai_generate_content_two_step_tool_turn_sends_the_signature_back(
    backend: str,
) -> None:
    config = types.GenerateContentConfig(tools=[WEATHER])
    async with FakeGemini([Step(CALL_STEP), Step(ANSWER_STEP)]) as server:
        client = client_for(server, backend)
        first = await client.aio.models.generate_content(
            model=MODEL, contents=PROMPT, config=config
        )
        [fc] = first.function_calls
        history = [
            types.Content(role="user", parts=[types.Part(text=PROMPT)]),
            first.candidates[0].content,
            types.Content(
                role="user",
                parts=[types.Part.from_function_response(name=fc.name, response={"temp_c": 24})],
            ),
        ]
        second = await client.aio.models.generate_content(
            model=MODEL, contents=history, config=config
        )
    assert (fc.id, fc.name, fc.args) == ("fc1", "get_weather", {"city": "Paris"})
    assert [p.thought_signature for p in first.candidates[0].content.parts] == [
        None,
        base64.b64decode(SIG),
    ]
    assert first.candidates[0].finish_reason == types.FinishReason.STOP
    assert second.text == "Sunny, 24 °C."
    sent = server.requests[1]["contents"][1]["parts"][1]
    assert decode_signature(sent["thoughtSignature"]) == base64.b64decode(SIG)
    assert [(r.backend, r.status, r.step, r.rejection) for r in server.records] == [
        (backend, 200, 0, None),
        (backend, 200, 1, None),
    ]
    assert all(r.path.endswith(f"/models/{MODEL}:generateContent") for r in server.records)


async def test_s7_genai_automatic_function_calling_runs_against_the_fake() -> None:
    calls: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(city)
        return {"temp_c": 24}

    # google-genai 1.x reads annotations as written: this module's are strings
    get_weather.__annotations__ = typing.get_type_hints(get_weather)
    config = types.GenerateContentConfig(tools=[get_weather])
    async with FakeGemini([Step(CALL_STEP), Step(ANSWER_STEP)]) as server:
        client = client_for(server, "gemini")
        response = await client.aio.models.generate_content(
            model=MODEL, contents=PROMPT, config=config
        )
    assert calls == ["Paris"]
    assert response.text == "Sunny, 24 °C."
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    echoed = server.requests[1]["contents"][1]["parts"][1]["thoughtSignature"]
    assert decode_signature(echoed) == base64.b64decode(SIG)


async def test_s8_genai_sees_an_in_stream_error_as_its_server_error() -> None:
    overloaded = error_chunk(503, "UNAVAILABLE", "The model is overloaded.")
    async with FakeGemini([Step([chunk(text("Sun")), overloaded])]) as server:
        client = client_for(server, "gemini")
        with pytest.raises(errors.ServerError) as raised:
            await client.aio.models.generate_content(model=MODEL, contents=PROMPT)
    assert (raised.value.code, raised.value.status, raised.value.message) == (
        503,
        "UNAVAILABLE",
        "The model is overloaded.",
    )


@pytest.mark.parametrize("backend", ["gemini", "vertex"])
async def test_s9_genai_count_tokens_gets_the_fakes_count_and_uses_no_step(backend: str) -> None:
    async with FakeGemini([Step(ANSWER_STEP)]) as server:
        client = client_for(server, backend)
        counted = await client.aio.models.count_tokens(model=MODEL, contents=PROMPT)
        answer = await client.aio.models.generate_content(model=MODEL, contents=PROMPT)
    assert counted.total_tokens == 5
    assert answer.text == "Sunny, 24 °C."
    assert [(r.path.rsplit(":", 1)[1], r.status, r.step) for r in server.records] == [
        ("countTokens", 200, None),
        ("generateContent", 200, 0),
    ]
