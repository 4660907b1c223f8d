"""A real Google ADK Runner (SSE streaming) against FakeGemini over loopback, with and without fastagg.

Runs in CI's framework venvs, one per ADK pin (the oldest and the newest
supported release, .ci/run; ADK pins google-genai<3); skipped where ADK is not
installed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from fastagg.testing import (
    AGENT_PROMPT,
    INTERLEAVED_ANSWER,
    INTERLEAVED_CALLS,
    STREAMED_ANSWER,
    STREAMED_CALLS,
    FakeGemini,
    Step,
    call,
    chunk,
    demo_tools,
    final,
    interleaved_calls_scenario,
    signature,
    streamed_args_scenario,
    streamed_call,
    text,
    usage,
)

pytest.importorskip("google.adk", reason="needs Google ADK (pip install 'fastagg[adk]')")
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.events import Event
from google.adk.models.google_llm import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import Client, types

from fastagg.integrations import adk

MODEL = "gemini-3-flash-preview"
SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


def send_email(to: str, body: str) -> dict[str, Any]:
    """Send an email to a customer."""
    return {"sent": True}


def recording(
    calls: list[tuple[str, dict[str, Any]]], tools: list[Callable[..., Any]] | None = None
) -> list[Callable[..., Any]]:
    """``tools`` (the demo tools by default), each recording the arguments it was called with."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def tool(**kwargs: Any) -> Any:
            calls.append((fn.__name__, kwargs))
            return fn(**kwargs)

        return tool

    return [wrap(fn) for fn in (demo_tools() if tools is None else tools)]


def gemini(server: FakeGemini) -> Gemini:
    """ADK's Gemini model talking to ``server`` (``client=`` from ADK 2.8 on, before it
    ``base_url`` and ``client_kwargs``)."""
    if "client" in Gemini.model_fields:
        client = Client(
            vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
        )
        return Gemini(model=MODEL, client=client)
    return Gemini(
        model=MODEL, base_url=server.url, client_kwargs={"vertexai": True, "api_key": "test"}
    )


async def run_events(
    server: FakeGemini,
    tools: list[Callable[..., Any]],
    *,
    streaming: bool = True,
    plugins: list[Any] | None = None,
) -> list[Event]:
    """One ADK run (SSE streaming unless ``streaming`` is False); every event it yields."""
    agent = LlmAgent(
        name="picnic", model=gemini(server), instruction="Help with picnics.", tools=tools
    )
    runner = InMemoryRunner(agent=agent, app_name="fastagg-test", plugins=plugins)
    session = await runner.session_service.create_session(app_name="fastagg-test", user_id="u")
    mode = StreamingMode.SSE if streaming else StreamingMode.NONE
    events = runner.run_async(
        user_id="u",
        session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(text=AGENT_PROMPT)]),
        run_config=RunConfig(streaming_mode=mode),
    )
    return [event async for event in events]


def final_text(events: list[Event]) -> str:
    """The answer text of the final (non-partial) events."""
    texts: list[str] = []
    for event in events:
        if not event.partial and event.content and event.content.parts:
            texts.extend(p.text for p in event.content.parts if p.text and not p.thought)
    return "".join(texts)


async def run_agent(
    server: FakeGemini, calls: list[tuple[str, dict[str, Any]]], *, streaming: bool = True
) -> str:
    """One ADK run; the text of the final (non-partial) events."""
    return final_text(await run_events(server, recording(calls), streaming=streaming))


@pytest.fixture
def with_fastagg() -> AsyncIterator[None]:
    adk.install()
    yield None
    adk.uninstall()


@pytest.mark.usefixtures("with_fastagg")
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_a3_adk_runner_with_fastagg_runs_full_calls_and_every_request_is_accepted(
    name: str,
) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        text = await run_agent(server, calls)
    assert sorted(calls) == sorted(expected_calls)
    assert text == answer
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    sent = server.requests[1]["contents"][1]["parts"]
    assert [p["functionCall"]["args"] for p in sent if "functionCall" in p] == [
        a for _, a in expected_calls
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_a3_adk_runner_without_fastagg_runs_wrong_arguments(name: str) -> None:
    from google.adk import __version__

    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        text = await run_agent(server, calls)
    rejected = [r.rejection for r in server.records if r.rejection]
    if sorted(calls) == sorted(expected_calls) and text == answer and not rejected:
        pytest.skip(f"google-adk {__version__} handles the {name} scenario itself")
    assert sorted(calls) != sorted(expected_calls) or rejected


@pytest.mark.parametrize("version", ["9.0.0", "2.14.0", "2.7.0", "2.6.3", "1.39.1", "3.7.0"])
def test_a4_install_refuses_an_untested_adk(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.setattr(adk, "ADK_VERSION", version)
    with pytest.raises(
        RuntimeError,
        match=rf"tested with google-adk 2\.7\.1 to 2\.13\.x, not {re.escape(version)};",
    ):
        adk.install()
    from google.adk.models import google_llm

    assert google_llm.StreamingResponseAggregator is not adk.StreamingResponseAggregator


@pytest.mark.parametrize("version", ["2.7.1", "2.7.2", "2.8.0", "2.10.0", "2.13.0", "2.13.5"])
def test_a4_install_accepts_every_release_from_the_lowest_to_the_newest_tested(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    from google.adk.models import google_llm

    monkeypatch.setattr(adk, "ADK_VERSION", version)
    adk.install()
    try:
        assert google_llm.StreamingResponseAggregator is adk.StreamingResponseAggregator
    finally:
        adk.uninstall()
    assert google_llm.StreamingResponseAggregator is not adk.StreamingResponseAggregator


@pytest.mark.usefixtures("with_fastagg")
async def test_a2_calls_without_ids_run_and_go_back_without_invented_ids() -> None:
    from fastagg.testing import Step, chunk, final, signature, streamed_call, text

    (name, args) = STREAMED_CALLS[0]
    steps = [
        Step([*streamed_call(name, args, signature=signature("no id"), piece=24), final()]),
        Step([chunk(text("Saved.")), final(signature("no id answer"))]),
    ]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(steps) as server:
        text_out = await run_agent(server, calls)
    assert (calls, text_out) == ([(name, args)], "Saved.")
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    sent = server.requests[1]["contents"]
    assert sent[1]["parts"][0]["functionCall"] == {"args": args, "name": name}
    assert sent[2]["parts"][0]["functionResponse"]["name"] == name
    assert "id" not in sent[2]["parts"][0]["functionResponse"]


async def test_a1_each_chunk_yields_exactly_one_partial_response() -> None:
    from fastagg.testing import chunk, text

    aggregator = adk.StreamingResponseAggregator()
    per_chunk = []
    for piece in ("Hel", "lo"):
        response = types.GenerateContentResponse.model_validate(chunk(text(piece)))
        per_chunk.append([r async for r in aggregator.process_response(response)])
    assert [len(out) for out in per_chunk] == [1, 1]
    assert [(out[0].partial, out[0].content.parts[0].text) for out in per_chunk] == [
        (True, "Hel"),
        (True, "lo"),
    ]
    final = aggregator.close()
    assert final is not None and [p.text for p in final.content.parts] == ["Hello"]


async def test_a2_close_fills_what_adk_fills() -> None:
    from fastagg.testing import chunk, signature, text, usage

    grounding = {"groundingChunks": [{"web": {"uri": "https://example.com", "title": "Ex"}}]}
    first = chunk(text("Blocked half"), usage=usage(10, candidates=2), model_version="m-1")
    last = chunk(
        text(" way", signature=signature("a2")),
        finish_reason="SAFETY",
        finish_message="unsafe",
        usage=usage(10, candidates=4),
        model_version="m-1",
    )
    last["candidates"][0]["groundingMetadata"] = grounding
    aggregator = adk.StreamingResponseAggregator()
    partials = []
    for payload in (first, last):
        response = types.GenerateContentResponse.model_validate(payload)
        partials.extend([r async for r in aggregator.process_response(response)])
    final = aggregator.close()
    assert [p.partial for p in partials] == [True, True]
    assert [p.content.parts[0].text for p in partials] == ["Blocked half", " way"]
    assert final is not None and final.partial is False
    assert [p.text for p in final.content.parts] == ["Blocked half", " way"]  # signed: not merged
    assert (final.finish_reason, final.error_code, final.error_message) == (
        types.FinishReason.SAFETY,
        types.FinishReason.SAFETY,
        "unsafe",
    )
    assert final.usage_metadata.candidates_token_count == 4
    assert final.grounding_metadata.grounding_chunks[0].web.uri == "https://example.com"
    assert final.model_version == "m-1"
    assert adk.StreamingResponseAggregator().close() is None


# ---------------------------------------------------------------------------
# Issue 37: a cut-off call, partial events' call ids, a repeated id, the versions.

EMAIL = {"to": "ana@example.com", "body": "Your refund of 40 EUR was approved."}
CUT_BODY = "Your refund of 40 EUR was "


def cut_off_email(finish_reason: str | None) -> Step:
    """``send_email`` streamed, the stream ending inside its body (no end marker)."""
    chunks = streamed_call(
        "send_email", EMAIL, id="fc_mail", signature=signature("cut off email"), piece=13
    )
    # ... 'Your refund o', 'f 40 EUR was ', ' approved.', the end marker: the last two never come
    kept = chunks[:-2]
    if finish_reason is not None:
        kept.append(chunk(finish_reason=finish_reason, usage=usage(40, candidates=20)))
    return Step(kept)


def email_then_answer() -> list[Step]:
    """A full ``send_email`` call, then the answer."""
    return [
        Step(
            [
                *streamed_call(
                    "send_email",
                    EMAIL,
                    id="fc_mail2",
                    signature=signature("email again"),
                    piece=13,
                ),
                final(),
            ]
        ),
        Step([chunk(text("Sent.")), final(signature("sent answer"))]),
    ]


@pytest.mark.usefixtures("with_fastagg")
@pytest.mark.parametrize("finish_reason", [None, "STOP", "MAX_TOKENS"])
async def test_a5_a_call_cut_off_mid_stream_runs_no_tool_and_ends_in_a_retryable_error(
    finish_reason: str | None,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([cut_off_email(finish_reason)]) as server:
        events = await run_events(server, recording(calls, [send_email]))
    assert calls == []
    assert len(server.requests) == 1
    final_events = [e for e in events if not e.partial]
    assert len(final_events) == 1
    error = final_events[0]
    ended = (
        "without a finish reason"
        if finish_reason is None
        else f"with finish reason {finish_reason}"
    )
    assert (error.content, error.error_code, error.finish_reason) == (
        None,
        "MALFORMED_FUNCTION_CALL",
        types.FinishReason.MALFORMED_FUNCTION_CALL,
    )
    assert error.error_message == (
        "The model's response ended inside the function call 'send_email' (id 'fc_mail') "
        f"{ended}: its arguments were cut off, so no tool was run. This is reported as "
        "MALFORMED_FUNCTION_CALL, a retryable model error: send the request again "
        "(google.adk.plugins.ReflectAndRetryModelPlugin retries it automatically). "
        "The partial response is in custom_metadata['fastagg_partial_response']."
    )
    partial = types.GenerateContentResponse.model_validate(
        error.custom_metadata["fastagg_partial_response"]
    )
    (part,) = partial.candidates[0].content.parts
    assert (part.function_call.id, part.function_call.name, part.function_call.args) == (
        "fc_mail",
        "send_email",
        {"to": "ana@example.com", "body": CUT_BODY},
    )
    assert error.custom_metadata["fastagg_unfinished_calls"] == [
        {"id": "fc_mail", "name": "send_email", "args": {"to": "ana@example.com", "body": CUT_BODY}}
    ]
    expected_finish = None if finish_reason is None else getattr(types.FinishReason, finish_reason)
    assert partial.candidates[0].finish_reason == expected_finish


@pytest.mark.usefixtures("with_fastagg")
async def test_a5_reflect_and_retry_retries_a_cut_off_call_and_the_full_call_runs_once() -> None:
    from google.adk.plugins import ReflectAndRetryModelPlugin

    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([cut_off_email("STOP"), *email_then_answer()]) as server:
        events = await run_events(
            server, recording(calls, [send_email]), plugins=[ReflectAndRetryModelPlugin()]
        )
    assert calls == [("send_email", EMAIL)]
    assert final_text(events) == "Sent."
    assert [(r.status, r.rejection) for r in server.records] == [(200, None)] * 3
    history = server.requests[1]["contents"]
    assert [p["functionCall"]["name"] for p in history[1]["parts"] if "functionCall" in p] == [
        "adk_handle_model_error"
    ]


async def test_a5_stock_adk_runs_the_cut_off_call() -> None:
    from google.adk import __version__

    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([cut_off_email("STOP"), *email_then_answer()[1:]]) as server:
        await run_events(server, recording(calls, [send_email]))
    if calls != [("send_email", {"to": "ana@example.com", "body": CUT_BODY})]:
        pytest.skip(f"google-adk {__version__} does not run the cut-off call itself")


def partial_call_ids(events: list[Event]) -> list[str | None]:
    """The call id of every function-call part of the partial events, in order."""
    return [
        p.function_call.id
        for e in events
        if e.partial and e.content and e.content.parts
        for p in e.content.parts
        if p.function_call
    ]


def final_call_ids(events: list[Event]) -> list[str | None]:
    return [
        p.function_call.id
        for e in events
        if not e.partial and e.content and e.content.parts
        for p in e.content.parts
        if p.function_call
    ]


@pytest.mark.usefixtures("with_fastagg")
async def test_a6_partial_events_keep_the_model_call_id() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(streamed_args_scenario()) as server:
        events = await run_events(server, recording(calls))
    # the call's name, each argument fragment, the end marker: all with the model's id
    ids = partial_call_ids(events)
    assert len(ids) == len(streamed_call(*STREAMED_CALLS[0], piece=24))
    assert set(ids) == {"fc_note"}
    assert final_call_ids(events) == ["fc_note"]
    assert calls == list(STREAMED_CALLS)


@pytest.mark.usefixtures("with_fastagg")
async def test_a6_interleaved_calls_keep_their_own_ids_on_every_fragment() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(interleaved_calls_scenario()) as server:
        events = await run_events(server, recording(calls))
    assert partial_call_ids(events) == [
        "fc_note",
        "fc_note",
        "fc_weather",
        "fc_note",
        "fc_weather",
        "fc_note",
        "fc_weather",
        "fc_note",
    ]
    assert final_call_ids(events) == ["fc_note", "fc_weather"]


@pytest.mark.usefixtures("with_fastagg")
async def test_a6_an_id_less_call_has_one_client_id_in_its_partial_and_final_events() -> None:
    from fastagg.testing import Step

    (name, args) = STREAMED_CALLS[0]
    steps = [
        Step([*streamed_call(name, args, signature=signature("no id"), piece=24), final()]),
        Step([chunk(text("Saved.")), final(signature("no id answer"))]),
    ]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(steps) as server:
        events = await run_events(server, recording(calls))
    ids = set(partial_call_ids(events))
    assert len(ids) == 1
    (client_id,) = ids
    assert client_id is not None and client_id.startswith("adk-")
    assert final_call_ids(events) == [client_id]
    assert calls == [(name, args)]
    sent = server.requests[1]["contents"]
    assert sent[1]["parts"][0]["functionCall"] == {"args": args, "name": name}


def repeated_call() -> list[Step]:
    weather = {"city": "Paris"}
    return [
        Step(
            [
                chunk(call("get_weather", weather, id="fc_w", signature=signature("twice"))),
                chunk(call("get_weather", weather, id="fc_w")),
                final(),
            ]
        ),
        Step([chunk(text("Sunny.")), final(signature("twice answer"))]),
    ]


@pytest.mark.usefixtures("with_fastagg")
async def test_a7_a_call_repeated_with_the_same_id_runs_once() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(repeated_call()) as server:
        text_out = await run_agent(server, calls)
    assert (calls, text_out) == ([("get_weather", {"city": "Paris"})], "Sunny.")
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    sent = server.requests[1]["contents"]
    assert [p["functionCall"]["id"] for p in sent[1]["parts"]] == ["fc_w"]
    assert [p["functionResponse"]["id"] for p in sent[2]["parts"]] == ["fc_w"]


@pytest.mark.usefixtures("with_fastagg")
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_a3_the_default_non_streaming_mode_works_with_fastagg_installed(name: str) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        text_out = await run_agent(server, calls, streaming=False)
    assert sorted(calls) == sorted(expected_calls)
    assert text_out == answer
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    assert ["generateContent" in r.path for r in server.records] == [True, True]
