"""A real pydantic-ai Agent against FakeGemini over loopback, with and without fastagg.

Runs in CI's framework venvs, one per pydantic-ai pin (the oldest and the
newest supported release, .ci/run; pydantic-ai pins google-genai<3); skipped
where pydantic-ai is not installed.
"""

from __future__ import annotations

import warnings
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
    chunk,
    final,
    interleaved_calls_scenario,
    signature,
    streamed_args_scenario,
    streamed_call,
    text,
    thought,
)
from fastagg.testing.scenarios import get_weather as weather_of

pytest.importorskip("pydantic_ai", reason="needs pydantic-ai (pip install 'fastagg[pydantic-ai]')")
pytest.importorskip("pydantic_ai.models.google", reason="needs pydantic-ai-slim[google]")
from google.genai import Client, types
from pydantic_ai import Agent, exceptions
from pydantic_ai.models import google as pydantic_google
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.providers.google import GoogleProvider

from fastagg.integrations import pydantic_ai as fastagg_pydantic_ai

MODEL = "gemini-3-flash-preview"
SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


def provider(server: FakeGemini) -> GoogleProvider:
    client = Client(
        vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
    )
    return GoogleProvider(client=client)


def make_agent(model: Any, calls: list[tuple[str, dict[str, Any]]], **options: Any) -> Agent[Any]:
    """An Agent with the two demo tools, which record their calls in ``calls``."""
    agent = Agent(model, **options)

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(("get_weather", {"city": city}))
        return weather_of(city)

    @agent.tool_plain
    def save_note(title: str, body: str) -> dict[str, Any]:
        """Save a short note for the user."""
        calls.append(("save_note", {"title": title, "body": body}))
        return {"saved": True, "title": title}

    return agent


async def run_agent(
    server: FakeGemini, model_class: type[Any], calls: list[tuple[str, dict[str, Any]]]
) -> str:
    """One streamed pydantic-ai run; the output text."""
    agent = make_agent(model_class(MODEL, provider=provider(server)), calls)
    async with agent.run_stream(AGENT_PROMPT) as run:
        return await run.get_output()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_y1_agent_with_fastagg_runs_full_calls_and_every_request_is_accepted(
    name: str,
) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        output = await run_agent(server, fastagg_pydantic_ai.GoogleModel, calls)
    assert sorted(calls) == sorted(expected_calls)
    assert output == answer
    assert [(r.status, r.rejection) for r in server.records] == [(200, None), (200, None)]
    sent = server.requests[1]["contents"][1]["parts"]
    assert [p["functionCall"]["args"] for p in sent if "functionCall" in p] == [
        a for _, a in expected_calls
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_y7_agent_run_without_streaming_works_with_the_drop_in(name: str) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini(scenario()) as server:
        model = fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server))
        result = await make_agent(model, calls).run(AGENT_PROMPT)
    assert sorted(calls) == sorted(expected_calls)
    assert result.output == answer
    assert [(r.path.rsplit(":", 1)[1], r.status, r.rejection) for r in server.records] == [
        ("generateContent", 200, None),
        ("generateContent", 200, None),
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_y1_agent_without_fastagg_runs_wrong_arguments(name: str) -> None:
    from pydantic_ai import __version__

    scenario, expected_calls, answer = SCENARIOS[name]
    calls: list[tuple[str, dict[str, Any]]] = []
    failure: Exception | None = None
    async with FakeGemini(scenario()) as server:
        try:
            output = await run_agent(server, pydantic_google.GoogleModel, calls)
        except Exception as exc:  # the framework's own failure, whatever form it takes
            failure, output = exc, ""
    rejected = [r.rejection for r in server.records if r.rejection]
    if sorted(calls) == sorted(expected_calls) and output == answer and not rejected:
        pytest.skip(f"pydantic-ai {__version__} handles the {name} scenario itself")
    assert sorted(calls) != sorted(expected_calls) or rejected or failure is not None


def note_call(sig: str) -> list[dict[str, Any]]:
    """``save_note`` streamed whole as ``partialArgs``: its body in 24-character fragments."""
    args = STREAMED_CALLS[0][1]
    return streamed_call("save_note", args, id="fc_note", signature=signature(sig), piece=24)


def cut_note(sig: str) -> list[dict[str, Any]]:
    """``save_note`` cut off inside its body: no last fragment, no end marker, no finish reason."""
    return note_call(sig)[:-2]


NOTE_ANSWER = Step([chunk(text(STREAMED_ANSWER)), final(signature("answer"))])
CUT_ARGS = {"title": "Picnic packing list", "body": str(STREAMED_CALLS[0][1]["body"])[:120]}
CUT_MESSAGE = (
    "The Gemini stream ended before the model finished the function call save_note "
    "(id 'fc_note'): its arguments are cut off, so it was not run. The request can be sent "
    "again as it was."
)


async def stream_run(agent: Agent[Any]) -> str:
    async with agent.run_stream(AGENT_PROMPT) as run:
        return await run.get_output()


async def test_y4_a_call_cut_off_mid_stream_never_runs_and_is_a_dropped_stream_error() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([Step(cut_note("cut"))]) as server:
        agent = make_agent(fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server)), calls)
        with pytest.raises(exceptions.ModelConnectionError) as caught:
            await stream_run(agent)
    assert calls == []
    assert len(server.requests) == 1
    error = caught.value
    assert (str(error), error.model_name, error.phase) == (CUT_MESSAGE, MODEL, "read")
    # The partial response rides on the error, the cut call with what it got of its arguments.
    assert error.body == {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "functionCall": {
                                "id": "fc_note",
                                "name": "save_note",
                                "args": CUT_ARGS,
                            },
                            "thoughtSignature": signature("cut"),
                        }
                    ],
                },
                "index": 0,
            }
        ],
        "modelVersion": MODEL,
    }


async def test_y4_a_cut_off_call_after_streamed_output_is_the_same_error_and_runs_nothing() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    script = [Step([chunk(thought("Writing the note.")), *cut_note("cut")]), NOTE_ANSWER]
    async with FakeGemini(script) as server:
        model = fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server))
        agent = make_agent(FallbackModel(model, model), calls)
        # The thought reached the consumer, so pydantic-ai neither retries nor falls back.
        with pytest.raises(exceptions.ModelConnectionError, match="save_note"):
            await stream_run(agent)
    assert calls == []
    assert len(server.requests) == 1


async def test_y4_a_call_cut_off_by_the_token_limit_is_pydantic_ais_incomplete_tool_call() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([Step([*cut_note("cut"), final(finish_reason="MAX_TOKENS")])]) as server:
        agent = make_agent(fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server)), calls)
        with pytest.raises(exceptions.IncompleteToolCall) as caught:
            await stream_run(agent)
    assert calls == []
    assert caught.value.message == (
        "Gemini stopped at its output token limit (finish reason MAX_TOKENS) inside the function "
        "call save_note (id 'fc_note'): its arguments are cut off, so it was not run. Raise the "
        "max_tokens model setting, or ask for a shorter answer."
    )
    assert caught.value.body is not None
    assert '"finishReason": "MAX_TOKENS"' in caught.value.body


async def test_y4_a_call_left_open_by_a_finished_response_is_a_model_error() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with FakeGemini([Step([*cut_note("cut"), final()])]) as server:
        agent = make_agent(fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server)), calls)
        with pytest.raises(exceptions.ModelAPIError) as caught:
            await stream_run(agent)
    assert calls == []
    # pydantic-ai 2.78 has an error for a response it cannot use; 2.68 only its base class.
    invalid = getattr(exceptions, "ModelInvalidResponseError", exceptions.ModelAPIError)
    assert type(caught.value) is invalid
    assert str(caught.value) == (
        "Gemini finished its response (finish reason STOP) without finishing the function call "
        "save_note (id 'fc_note'): its arguments may be cut off, so it was not run. Send the "
        "request again, or to another model."
    )


async def test_y4_whole_calls_never_yields_an_unfinished_call() -> None:
    payloads = [chunk(text("Let me save that.")), *cut_note("cut")]

    async def source() -> Any:
        for payload in payloads:
            yield types.GenerateContentResponse.model_validate(payload)

    out: list[types.GenerateContentResponse] = []
    with pytest.raises(exceptions.ModelConnectionError, match="save_note"):
        async for piece in fastagg_pydantic_ai.whole_calls(source(), model_name=MODEL):
            out.append(piece)
    assert len(out) == len(payloads)
    parts = [
        p for c in out for cand in c.candidates or [] if cand.content for p in cand.content.parts
    ]
    assert [p.text for p in parts] == ["Let me save that."]


@pytest.mark.parametrize("retry", ["FallbackModel", "RetryOnModelErrors"])
async def test_y6_a_cut_off_call_is_sent_again_by_pydantic_ais_own_retry_settings(
    retry: str,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    script = [Step(cut_note("cut")), Step([*note_call("whole"), final()]), NOTE_ANSWER]
    async with FakeGemini(script) as server:
        model = fastagg_pydantic_ai.GoogleModel(MODEL, provider=provider(server))
        if retry == "FallbackModel":
            agent = make_agent(FallbackModel(model, model), calls)
        else:
            capabilities = pytest.importorskip("pydantic_ai.capabilities")
            if not hasattr(capabilities, "RetryOnModelErrors"):
                pytest.skip("this pydantic-ai has no RetryOnModelErrors (added after 2.68)")
            retrying = capabilities.RetryOnModelErrors(max_attempts=2, initial_delay=0)
            agent = make_agent(model, calls, capabilities=[retrying])
        output = await stream_run(agent)
    assert calls == STREAMED_CALLS
    assert output == STREAMED_ANSWER
    assert [(r.status, r.rejection) for r in server.records] == [(200, None)] * 3
    assert server.requests[1]["contents"] == server.requests[0]["contents"]


def test_y3_a_hook_of_unknown_shape_is_refused_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic_ai import __version__

    async def renamed(self: Any, stream: Any, model_request_parameters: Any) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(pydantic_google.GoogleModel, "_process_streamed_response", renamed)
    with pytest.raises(RuntimeError) as caught:
        fastagg_pydantic_ai.GoogleModel(
            MODEL, provider=GoogleProvider(api_key="k"), untested_ok=True
        )
    assert str(caught.value) == (
        f"fastagg.integrations.pydantic_ai cannot work with pydantic-ai {__version__}: its "
        "GoogleModel._process_streamed_response is (self, stream, model_request_parameters), "
        "not a coroutine taking the response stream as its first argument, so fastagg cannot "
        "see the Gemini stream. Install a supported release (pip install "
        "'fastagg[pydantic-ai]': pydantic-ai 2.68 to 2.78) or use "
        "pydantic_ai.models.google.GoogleModel without fastagg."
    )
    monkeypatch.delattr(pydantic_google.GoogleModel, "_process_streamed_response")
    with pytest.raises(RuntimeError, match=r"its GoogleModel\._process_streamed_response is gone,"):
        fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))


async def test_y3_extra_hook_parameters_pass_through_by_position_and_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []

    async def later_shape(
        self: Any,
        response: Any,
        model_request_parameters: Any,
        messages: Any = (),
        *,
        later: Any = None,
    ) -> Any:
        seen.extend([[c async for c in response], model_request_parameters, messages, later])
        return "streamed"

    monkeypatch.setattr(pydantic_google.GoogleModel, "_process_streamed_response", later_shape)
    model = fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))

    async def source() -> Any:
        yield types.GenerateContentResponse.model_validate(chunk(text("hi")))

    result = await model._process_streamed_response(source(), "params", ["m"], later=7)
    assert result == "streamed"
    assert [c.text for c in seen[0]] == ["hi"]
    assert seen[1:] == ["params", ["m"], 7]


def test_y5_a_release_outside_the_tested_range_works_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fastagg_pydantic_ai, "PYDANTIC_AI_VERSION", "2.80.0")
    with pytest.warns(fastagg_pydantic_ai.UntestedVersionWarning) as caught:
        fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))
    assert [str(w.message) for w in caught] == [
        "fastagg.integrations.pydantic_ai was tested with pydantic-ai 2.68 to 2.78, not 2.80.0; "
        "its stream hook has a shape fastagg knows, so fastagg uses it. If tool calls go wrong, "
        "install a tested release: pip install 'fastagg[pydantic-ai]'. "
        "GoogleModel(..., untested_ok=True) silences this warning."
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fastagg_pydantic_ai.GoogleModel(
            MODEL, provider=GoogleProvider(api_key="k"), untested_ok=True
        )


@pytest.mark.parametrize("version", ["2.68.0", "2.73.2", "2.78.0", "2.78.1", "2.78.0.post1"])
def test_y5_the_supported_releases_need_no_flag_and_give_no_warning(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    monkeypatch.setattr(fastagg_pydantic_ai, "PYDANTIC_AI_VERSION", version)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))


@pytest.mark.parametrize(
    "version", ["2.67.3", "2.79.0", "3.0.0", "2.79.0b1", "2.78.0rc1", "unknown"]
)
def test_y5_releases_outside_the_range_warn(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    monkeypatch.setattr(fastagg_pydantic_ai, "PYDANTIC_AI_VERSION", version)
    with pytest.warns(fastagg_pydantic_ai.UntestedVersionWarning, match=f"not {version};"):
        fastagg_pydantic_ai.GoogleModel(MODEL, provider=GoogleProvider(api_key="k"))


async def test_y2_whole_calls_keeps_other_parts_and_releases_calls_in_turn_order() -> None:
    payloads = [
        chunk(thought("hm")),
        *interleaved_calls_scenario()[0].chunks[1:],
        chunk(text("after")),
    ]

    async def source() -> Any:
        for payload in payloads:
            yield types.GenerateContentResponse.model_validate(payload)

    out = [c async for c in fastagg_pydantic_ai.whole_calls(source())]
    parts = [
        p for c in out for cand in c.candidates or [] if cand.content for p in cand.content.parts
    ]
    assert [p.thought for p in parts if p.text] == [True, None]
    calls = [(p.function_call.id, p.function_call.args) for p in parts if p.function_call]
    assert calls == [
        ("fc_note", INTERLEAVED_CALLS[0][1]),
        ("fc_weather", INTERLEAVED_CALLS[1][1]),
    ]
    assert parts[1].thought_signature is not None  # the first call keeps the step's signature
    assert len(out) == len(payloads)


async def test_y2_a_finished_call_held_behind_a_nameless_one_comes_on_a_last_chunk() -> None:
    from fastagg.testing import call

    nameless = {
        "functionCall": {
            "id": "fc_x",
            "partialArgs": [{"jsonPath": "$.q", "stringValue": "a"}],
            "willContinue": True,
        }
    }
    payloads = [
        chunk(nameless),
        chunk(call("get_weather", {"city": "Paris"}, id="fc_w")),
        final(),
    ]

    async def source() -> Any:
        for payload in payloads:
            yield types.GenerateContentResponse.model_validate(payload)

    out = [c async for c in fastagg_pydantic_ai.whole_calls(source())]
    assert len(out) == len(payloads) + 1
    parts = [
        p for c in out for cand in c.candidates or [] if cand.content for p in cand.content.parts
    ]
    assert [(p.function_call.id, p.function_call.args) for p in parts] == [
        ("fc_w", {"city": "Paris"})
    ]
    assert out[-1].candidates[0].content.parts == parts
