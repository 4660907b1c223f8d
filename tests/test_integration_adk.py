"""A real Google ADK Runner (SSE streaming) against FakeGemini over loopback, with and without fastagg.

Runs in CI's google-genai 2.x venv (ADK pins google-genai<3); skipped where ADK
is not installed.
"""

from __future__ import annotations

import functools
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
    demo_tools,
    interleaved_calls_scenario,
    streamed_args_scenario,
)

pytest.importorskip("google.adk", reason="needs Google ADK (pip install 'fastagg[adk]')")
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.models.google_llm import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import Client, types

from fastagg.integrations import adk

MODEL = "gemini-3-flash-preview"
SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


def recording(calls: list[tuple[str, dict[str, Any]]]) -> list[Callable[..., Any]]:
    """The demo tools, each recording the arguments it was called with."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def tool(**kwargs: Any) -> Any:
            calls.append((fn.__name__, kwargs))
            return fn(**kwargs)

        return tool

    return [wrap(fn) for fn in demo_tools()]


async def run_agent(server: FakeGemini, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """One ADK run in SSE mode; the text of the final (non-partial) events."""
    client = Client(
        vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
    )
    agent = LlmAgent(
        name="picnic",
        model=Gemini(model=MODEL, client=client),
        instruction="Help with picnics.",
        tools=recording(calls),
    )
    runner = InMemoryRunner(agent=agent, app_name="fastagg-test")
    session = await runner.session_service.create_session(app_name="fastagg-test", user_id="u")
    texts: list[str] = []
    events = runner.run_async(
        user_id="u",
        session_id=session.id,
        new_message=types.Content(role="user", parts=[types.Part(text=AGENT_PROMPT)]),
        run_config=RunConfig(streaming_mode=StreamingMode.SSE),
    )
    async for event in events:
        if not event.partial and event.content and event.content.parts:
            texts.extend(p.text for p in event.content.parts if p.text and not p.thought)
    return "".join(texts)


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


def test_a4_install_refuses_an_untested_adk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adk, "ADK_VERSION", "9.0.0")
    with pytest.raises(RuntimeError, match=r"tested with google-adk 2\.13\.x, not 9\.0\.0"):
        adk.install()
    from google.adk.models import google_llm

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
