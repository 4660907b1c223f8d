"""google-genai's own client, pointed at FakeGemini with HttpOptions(base_url=...), works unchanged."""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

import pytest

from fastagg.testing import (
    FakeGemini,
    call,
    chunk,
    demo_scenario,
    error_chunk,
    final,
    signature,
    text,
    thought,
    usage,
)

genai = pytest.importorskip("google.genai")
types = pytest.importorskip("google.genai.types")
errors = pytest.importorskip("google.genai.errors")

MODEL = "gemini-3-flash-preview"
SIG = signature("interop call")


def url_safe(chunk_: dict[str, Any]) -> dict[str, Any]:
    """The chunk as the SDK dumps it: same signature bytes, URL-safe base64 text."""
    out = copy.deepcopy(chunk_)
    for candidate in out.get("candidates", []):
        for part in candidate.get("content", {}).get("parts", []):
            if "thoughtSignature" in part:
                raw = base64.b64decode(part["thoughtSignature"])
                part["thoughtSignature"] = base64.urlsafe_b64encode(raw).decode()
    return out


def dump(response: Any) -> dict[str, Any]:
    result: dict[str, Any] = response.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"sdk_http_response"}
    )
    return result


def gemini_client(server: FakeGemini) -> Any:
    return genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=server.url, api_version="v1beta")
    )


async def test_async_client_yields_the_chunks_we_serve() -> None:
    steps = demo_scenario()
    async with FakeGemini([steps[0]]) as server:
        client = gemini_client(server)
        stream = await client.aio.models.generate_content_stream(model=MODEL, contents="hi")
        received = [dump(r) async for r in stream]
    assert received == [url_safe(c) for c in steps[0].chunks]
    assert server.records[0].path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert server.records[0].query == {"alt": "sse"}


async def test_sync_client_yields_the_chunks_we_serve() -> None:
    answer = demo_scenario()[4]
    async with FakeGemini([answer]) as server:
        client = gemini_client(server)

        def consume() -> list[dict[str, Any]]:
            return [
                dump(r) for r in client.models.generate_content_stream(model=MODEL, contents="hi")
            ]

        received = await asyncio.to_thread(consume)
    assert received == [url_safe(c) for c in answer.chunks]
    assert "".join(r["candidates"][0]["content"]["parts"][0]["text"] for r in received[:-1]) == (
        "Paris is the better pick: 24 °C and sunny with a light breeze, while London expects "
        "showers (70 % chance) at 16 °C. I saved your packing note \u201cPicnic packing list\u201d: "
        "sunscreen, a hat, a blanket, water and a plan for the wasps."
    )


async def test_vertex_express_and_project_modes_reach_the_vertex_paths() -> None:
    credentials = pytest.importorskip("google.oauth2.credentials")
    steps = [[chunk(text("hi"), finish_reason="STOP")]] * 2
    async with FakeGemini(steps) as server:
        express = genai.Client(
            vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
        )
        project = genai.Client(
            vertexai=True,
            project="p",
            location="us-central1",
            credentials=credentials.Credentials(token="fake"),
            http_options=types.HttpOptions(base_url=server.url),
        )
        for client in (express, project):
            stream = await client.aio.models.generate_content_stream(model=MODEL, contents="hi")
            assert [r.text async for r in stream] == ["hi"]
    assert [(r.backend, r.path) for r in server.records] == [
        ("vertex", f"/v1beta1/publishers/google/models/{MODEL}:streamGenerateContent"),
        (
            "vertex",
            (
                f"/v1beta1/projects/p/locations/us-central1/publishers/google/models/"
                f"{MODEL}:streamGenerateContent"
            ),
        ),
    ]
    assert server.records[1].headers["authorization"] == "Bearer fake"


async def test_in_stream_error_reaches_the_sdk_as_server_error_after_good_chunks() -> None:
    async with FakeGemini([[chunk(thought("thinking")), error_chunk()]]) as server:
        client = gemini_client(server)
        stream = await client.aio.models.generate_content_stream(model=MODEL, contents="hi")
        seen: list[str] = []
        with pytest.raises(errors.ServerError) as info:
            async for response in stream:
                seen.append(response.candidates[0].content.parts[0].text)
    assert seen == ["thinking"]
    assert (info.value.code, info.value.status) == (500, "INTERNAL")


async def test_sdk_http_error_carries_the_status_and_retry_info() -> None:
    from fastagg.testing import Step

    async with FakeGemini([Step(http_error=429, retry_delay="2s")]) as server:
        client = gemini_client(server)
        with pytest.raises(errors.ClientError) as info:
            stream = await client.aio.models.generate_content_stream(model=MODEL, contents="hi")
            async for _ in stream:
                pass
    assert (info.value.code, info.value.status) == (429, "RESOURCE_EXHAUSTED")


def history(with_signature: bool) -> list[Any]:
    first = types.Part(
        function_call=types.FunctionCall(id="c1", name="get_weather", args={"city": "Paris"}),
        thought_signature=base64.b64decode(SIG) if with_signature else None,
    )
    second = types.Part(
        function_call=types.FunctionCall(id="c2", name="get_weather", args={"city": "London"})
    )
    responses = [
        types.Part(
            function_response=types.FunctionResponse(
                id=id_, name="get_weather", response={"output": {"temp_c": t}}
            )
        )
        for id_, t in (("c1", 24), ("c2", 16))
    ]
    return [
        types.Content(role="user", parts=[types.Part.from_text(text="Paris or London?")]),
        types.Content(role="model", parts=[first, second]),
        types.Content(role="user", parts=responses),
    ]


async def test_validator_refuses_a_dropped_signature_with_the_services_400() -> None:
    calls = [
        chunk(
            call("get_weather", {"city": "Paris"}, id="c1", signature=SIG),
            call("get_weather", {"city": "London"}, id="c2"),
            finish_reason="STOP",
        )
    ]
    answer = [chunk(text("Paris.")), final(signature("interop answer"), usage=usage(20, 2))]
    async with FakeGemini([calls, answer]) as server:
        client = gemini_client(server)
        first = await client.aio.models.generate_content_stream(model=MODEL, contents="Paris?")
        async for _ in first:
            pass
        with pytest.raises(errors.ClientError) as info:
            dropped = await client.aio.models.generate_content_stream(
                model=MODEL, contents=history(with_signature=False)
            )
            async for _ in dropped:
                pass
        kept = await client.aio.models.generate_content_stream(
            model=MODEL, contents=history(with_signature=True)
        )
        texts = [r.text async for r in kept]
    assert (info.value.code, info.value.status) == (400, "INVALID_ARGUMENT")
    assert info.value.message.startswith(
        "Function call is missing a thought_signature in functionCall parts."
    )
    assert "`default_api:get_weather` , position 2." in info.value.message
    assert texts[0] == "Paris."
    sent = server.requests[2]["contents"][1]["parts"][0]["thoughtSignature"]
    assert base64.urlsafe_b64decode(sent + "=" * (-len(sent) % 4)) == base64.b64decode(SIG)
