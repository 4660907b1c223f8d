"""Errors a user can act on (spec/api.md U1-U6): wrong types named before any request, a refused
request in the service's own words, unreadable bodies said so, no rule id in the texts."""

from __future__ import annotations

import gzip
import re
import zlib
from types import ModuleType
from typing import Any

import pytest

import fastagg
import fastagg.reference as reference
from fastagg import (
    GeminiClient,
    MalformedStreamError,
    StopReason,
    TurnLimits,
    run_turn,
    stream_turn,
)
from fastagg.testing import FakeGemini
from fastagg.testing.fake import Step

USER = [{"role": "user", "parts": [{"text": "hi"}]}]
PROMPT = "{'role': 'user', 'parts': [{'text': '...'}]}"
EVENTS = [
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}]}',
    b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},'
    b'"finishReason":"STOP"}]}',
]


@pytest.fixture(params=["rust", "reference"])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return fastagg if request.param == "rust" else reference


# --- U1: GeminiClient -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"model": "m", "api_key": 123},
            "GeminiClient(): api_key must be a str or None, got int 123",
        ),
        (
            {"model": 5, "api_key": "k"},
            "GeminiClient(): model must be the model's name as a str, got int 5",
        ),
        (
            {"model": "m", "api_key": "k", "base_url": b"http://x"},
            "GeminiClient(): base_url must be a str or None, got bytes b'http://x'",
        ),
        (
            {"model": "m", "api_key": "k", "headers": [("a", "b")]},
            "GeminiClient(): headers must be a dict of str to str or None, got list",
        ),
        (
            {"model": "m", "api_key": "k", "headers": {"x-a": 1}},
            "GeminiClient(): header 'x-a' must be a str name with a str value, got int 1",
        ),
    ],
)
def test_u1_gemini_client_names_a_wrong_argument_type(
    kwargs: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[object] = []
    monkeypatch.setattr("fastagg.client.gemini.make_transport", lambda *a: opened.append(a))
    with pytest.raises(TypeError) as caught:
        GeminiClient(**kwargs)
    assert str(caught.value) == message
    assert opened == []  # nothing was opened


# --- U2: run_turn / stream_turn ---------------------------------------------------------------


BAD_TURNS: list[tuple[dict[str, Any], str]] = [
    (
        {"contents": "hello"},
        "contents must be a list of contents, got str 'hello'; wrap a prompt as [" + PROMPT + "]",
    ),
    (
        {"contents": ["hello"]},
        "contents[0] must be a content dict like "
        + PROMPT
        + " (or a google-genai Content), got str 'hello'",
    ),
    (
        {"contents": USER[0]},
        "contents must be a list of contents, got dict; wrap one content in a list",
    ),
    (
        {"limits": {"max_steps": 3}},
        "limits must be a fastagg.TurnLimits or None, got dict; pass TurnLimits(**...) instead",
    ),
    (
        {"tools": len},
        "tools must be a list of fastagg.Tool or functions, got builtin_function_or_method; "
        "wrap one tool in a list",
    ),
    ({"tools": [3]}, "tools[0] must be a fastagg.Tool or a function, got int 3"),
    (
        {"abort": True},
        "abort must be an asyncio.Event (or one like it) or None, got bool True",
    ),
    (
        {"config": "fast"},
        "config must be a dict, a google-genai GenerateContentConfig or None, got str 'fast'",
    ),
    (
        {"system_instruction": 7},
        "system_instruction must be a str, a content dict, a google-genai Content or None, "
        "got int 7",
    ),
    ({"on_event": "print"}, "on_event must be a function or None, got str 'print'"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_TURNS)
async def test_u2_run_turn_names_a_wrong_argument_type_before_any_request(
    kwargs: dict[str, Any], message: str
) -> None:
    async with FakeGemini([Step(chunks=[])]) as server:
        client = GeminiClient("gemini-test", api_key="k", base_url=server.url)
        try:
            args = {"contents": USER, **kwargs}
            contents = args.pop("contents")
            with pytest.raises(TypeError) as caught:
                await run_turn(client, contents, **args)
            assert str(caught.value) == f"run_turn(): {message}"
            with pytest.raises(TypeError) as caught:
                async for _ in stream_turn(client, contents, **args):
                    pass
            assert str(caught.value) == f"stream_turn(): {message}"
        finally:
            await client.aclose()
        assert server.requests == []


async def test_u2_a_model_name_in_place_of_the_client_says_where_it_goes() -> None:
    with pytest.raises(TypeError) as caught:
        await run_turn("gemini-3-flash-preview", USER)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "run_turn(): model must be a model client such as fastagg.GeminiClient, got str "
        "'gemini-3-flash-preview' (the model name goes to the client: "
        "fastagg.GeminiClient('gemini-3-flash-preview'))"
    )


# --- U3: a refused request ends the turn with the service's reason ----------------------------


NOT_FOUND = (
    "models/gemini-nope is not found for API version v1beta, or is not supported for "
    "generateContent. Call ListModels to see the list of available models and their supported "
    "methods."
)
BAD_KEY = "API key not valid. Please pass a valid API key."


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            Step(http_error=404, error_message=NOT_FOUND),
            f"The model service could not find the model 'gemini-nope' (HTTP 404 NOT_FOUND: "
            f"{NOT_FOUND}). Check the model name (models.list shows the models this key can use).",
        ),
        (
            Step(http_error=400, error_message=BAD_KEY),
            f"The model service refused the API key (HTTP 400 INVALID_ARGUMENT: {BAD_KEY}). "
            "Check the key given to GeminiClient(api_key=...) or in GEMINI_API_KEY.",
        ),
        (
            Step(http_error=400, error_message='Unknown name "foo": Cannot find field.'),
            "The model service refused the request (HTTP 400 INVALID_ARGUMENT: Unknown name "
            '"foo": Cannot find field.). Sending it again will not help: the request must '
            "change.",
        ),
        (
            Step(http_error=403),
            "The model service refused the credentials (HTTP 403 PERMISSION_DENIED: The caller "
            "does not have permission.). Check the API key, or the project's access to this "
            "model.",
        ),
    ],
)
async def test_u3_a_refused_request_ends_the_turn_with_the_services_reason(
    step: Step, message: str
) -> None:
    async with FakeGemini([step]) as server:
        client = GeminiClient("gemini-nope", api_key="k", base_url=server.url)
        try:
            result = await run_turn(client, USER, limits=TurnLimits(turn_timeout=60))
        finally:
            await client.aclose()
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.message == message
    assert "try again" not in result.message.lower()
    assert len(server.requests) == 1


async def test_u3_only_retryable_failures_say_to_retry() -> None:
    async with FakeGemini([Step(http_error=503)]) as server:
        client = GeminiClient("gemini-test", api_key="k", base_url=server.url)
        try:
            limits = TurnLimits(turn_timeout=60, provider_retries=0)
            result = await run_turn(client, USER, limits=limits)
        finally:
            await client.aclose()
    assert result.message == "The model service failed (HTTP 503 UNAVAILABLE). Please try again."


# --- U4, U5: bodies that cannot be read as fed ------------------------------------------------


def _feed_all(impl: ModuleType, pieces: list[bytes], **options: Any) -> list[Any]:
    agg = impl.StreamAggregator(**options)
    raised = []
    for piece in pieces:
        try:
            agg.feed(piece)
        except MalformedStreamError as exc:
            raised.append(exc)
    agg.close()
    return raised


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("compress", [gzip.compress, zlib.compress], ids=["gzip", "zlib"])
def test_u4_a_compressed_body_raises_and_says_how_to_feed_it(
    impl: ModuleType, strict: bool, compress: Any
) -> None:
    body = compress(b"\r\n\r\n".join(EVENTS) + b"\r\n\r\n")
    name = "gzip" if compress is gzip.compress else "zlib"
    raised = _feed_all(impl, [body[:1], body[1:7], body[7:]], strict=strict)
    assert len(raised) == 1
    err = raised[0]
    assert (err.kind, err.offset, err.event_index) == ("compressed-body", 0, 0)
    assert str(err) == (
        f"the body is {name}-compressed (its first bytes are the {name} header), so nothing of "
        "it can be read: feed the decompressed bytes (httpx: aiter_bytes() instead of "
        "aiter_raw(); aiohttp: response.content with auto_decompress, the default)"
    )
    assert err.diagnostic.code == "compressed_body"
    assert err.diagnostic.encoding == name


@pytest.mark.parametrize("strict", [True, False])
def test_u5_lines_without_their_line_ends_raise_and_say_how_to_feed_them(
    impl: ModuleType, strict: bool
) -> None:
    # What httpx's aiter_lines() yields, encoded: the lines without their line ends.
    lines = [EVENTS[0], b"", EVENTS[1], b""]
    raised = _feed_all(impl, lines, strict=strict)
    assert len(raised) == 1
    err = raised[0]
    assert (err.kind, err.offset, err.event_index) == ("lines-without-ends", 0, 0)
    assert str(err) == (
        "the body's lines were fed without their line ends: the line at byte 0 holds a whole "
        "JSON event followed directly by another 'data:' field, so nothing of it can be read: "
        "feed the body's bytes as they came (httpx: aiter_bytes(), not aiter_lines(), which "
        "removes the line ends)"
    )
    assert err.diagnostic.code == "lines_without_ends"


def test_u5_the_same_events_with_their_line_ends_are_read(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    for line in EVENTS:
        agg.feed(line + b"\n\n")
    assert agg.close().text == "Hello"


# --- U6: no rule id in the texts a user reads -------------------------------------------------

RULE_ID = re.compile(r"\b[A-Z]{1,2}\d{1,3}[a-z]?:")


def test_u6_exception_texts_carry_no_rule_id(impl: ModuleType) -> None:
    gz = _feed_all(impl, [gzip.compress(EVENTS[0])])
    lines = _feed_all(impl, [EVENTS[0], EVENTS[1]])
    for err in gz + lines:
        assert not RULE_ID.search(str(err)), str(err)
