"""fastagg.genai's chat helpers (``send_message_stream``, ``aggregate``): a real google-genai
chat against FakeGemini over loopback, with and without fastagg (G3, G7).

Runs in the main test venv and in CI's venvs of the lowest and newest google-genai.
The tools are run by the test, as an SDK user without automatic function
calling does: from the calls of the model turn (tests/test_genai_calls.py has
automatic function calling).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import math
import threading
import time
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
    demo_tools,
    final,
    interleaved_calls_scenario,
    signature,
    streamed_args_scenario,
    text,
)

genai = pytest.importorskip(
    "google.genai", reason="needs google-genai (pip install 'fastagg[genai]')"
)
types = pytest.importorskip("google.genai.types")
errors = pytest.importorskip("google.genai.errors")
fastagg_genai = pytest.importorskip("fastagg.genai")

MODEL = "gemini-3-flash-preview"
TOOLS = {fn.__name__: fn for fn in demo_tools()}
SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


def client_for(server: FakeGemini) -> Any:
    """Vertex AI express mode: streamed arguments (partialArgs) are a Vertex feature."""
    return genai.Client(
        vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
    )


def run_calls(calls: list[tuple[str | None, str | None, dict[str, Any]]]) -> list[Any]:
    """Run each (id, name, args) with the demo tools; the function response parts."""
    parts = []
    for call_id, name, args in calls:
        try:
            output: Any = TOOLS[name or ""](**args)
        except Exception as exc:  # what a user's loop does: report the failure to the model
            output = {"error": f"{type(exc).__name__}: {exc}"}
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call_id, name=name, response={"output": output}
                )
            )
        )
    return parts


def chat_config() -> Any:
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[_declaration(fn) for fn in demo_tools()])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def _declaration(fn: Any) -> Any:
    from fastagg import Tool

    return types.FunctionDeclaration.model_validate(Tool.from_function(fn).declaration())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_g7_sdk_chat_with_fastagg_runs_full_calls_and_every_request_is_accepted(
    name: str,
) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    async with FakeGemini(scenario()) as server:

        def conversation() -> tuple[list[Any], str, list[Any]]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(model=MODEL, config=chat_config())
            first = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            for _ in first:
                pass
            assert first.result is not None
            calls = [(c["id"], c["name"], c["args"]) for c in first.result.function_calls]
            second = fastagg_genai.send_message_stream(chat, run_calls(calls))
            text = "".join(chunk.text or "" for chunk in second)
            return calls, text, chat.get_history(curated=True)

        calls, text, history = await asyncio.to_thread(conversation)
    assert [(n, a) for _, n, a in calls] == expected_calls
    assert text == answer
    assert [r.status for r in server.records] == [200, 200]
    # One model content per model turn: user, model, user (responses), model.
    assert [c.role for c in history] == ["user", "model", "user", "model"]
    sent = server.requests[1]["contents"][1]["parts"]
    assert [p["functionCall"]["args"] for p in sent if "functionCall" in p] == [
        a for _, a in expected_calls
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_g7_async_chat_with_fastagg_records_one_signed_turn(name: str) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    async with FakeGemini(scenario()) as server:
        client = client_for(server)
        chat = client.aio.chats.create(model=MODEL, config=chat_config())
        first = fastagg_genai.send_message_stream_async(chat, AGENT_PROMPT)
        async for _ in first:
            pass
        assert first.result is not None and first.response is not None
        calls = [(c["id"], c["name"], c["args"]) for c in first.result.function_calls]
        second = fastagg_genai.send_message_stream_async(chat, run_calls(calls))
        text = "".join([chunk.text or "" async for chunk in second])
    assert [(n, a) for _, n, a in calls] == expected_calls
    assert text == answer
    assert [r.status for r in server.records] == [200, 200]
    model_turn = chat.get_history()[1]
    assert (
        model_turn.parts[1].thought_signature
        == first.response.candidates[0].content.parts[1].thought_signature
    )
    assert model_turn.parts[1].thought_signature is not None


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_g7_sdk_chat_without_fastagg_fails(name: str) -> None:
    """The SDK alone: per-chunk calls have no (or mixed) arguments, or the turn is dropped."""
    scenario, expected_calls, _ = SCENARIOS[name]
    async with FakeGemini(scenario()) as server:

        def conversation() -> tuple[list[Any], BaseException | None]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(model=MODEL, config=chat_config())
            calls = []
            for chunk in chat.send_message_stream(AGENT_PROMPT):
                for fc in chunk.function_calls or []:
                    if fc.name:
                        calls.append((fc.id, fc.name, dict(fc.args or {})))
            try:
                for _ in chat.send_message_stream(run_calls(calls)):
                    pass
            except errors.APIError as exc:
                return calls, exc
            return calls, None

        calls, failure = await asyncio.to_thread(conversation)
    if [(n, a) for _, n, a in calls] == expected_calls and failure is None:
        pytest.skip(f"google-genai {genai.__version__} handles the {name} scenario itself")
    assert [(n, a) for _, n, a in calls] != expected_calls or failure is not None
    assert isinstance(failure, errors.ClientError)
    assert failure.code == 400


async def test_g3_aggregate_async_keeps_what_came_before_an_in_stream_error() -> None:
    from fastagg.testing import chunk, error_chunk, text

    async with FakeGemini(
        [[chunk(text("Half an ")), chunk(text("answer")), error_chunk()]]
    ) as server:
        client = client_for(server)
        with pytest.raises(fastagg_genai.StreamInterrupted) as info:
            await fastagg_genai.aggregate_async(
                client.aio.models.generate_content_stream(model=MODEL, contents="hi")
            )
    assert info.value.partial.text == "Half an answer"
    assert info.value.result.text == "Half an answer"
    assert isinstance(info.value.__cause__, errors.ServerError)


async def test_g3_aggregate_gives_one_response_and_calls_back_per_chunk() -> None:
    async with FakeGemini(streamed_args_scenario()[:1]) as server:
        client = client_for(server)
        seen: list[list[str]] = []

        def consume() -> Any:
            return fastagg_genai.aggregate(
                client.models.generate_content_stream(model=MODEL, contents="hi"),
                on_chunk=lambda chunk, deltas: seen.append([type(d).__name__ for d in deltas]),
            )

        response = await asyncio.to_thread(consume)
    (fc,) = response.function_calls
    assert (fc.id, fc.name, fc.args) == ("fc_note", *STREAMED_CALLS[0])
    assert seen[0] == ["TextDelta"]
    assert seen[1] == ["CallStart"]
    # title (20 chars) and body (139 chars) in 24-character fragments: 1 + 6 ArgDeltas
    assert [d for ds in seen[2:-2] for d in ds] == ["ArgDelta"] * 7
    assert seen[-2:] == [["CallEnd"], ["Finish"]]


def test_g11_a_coroutine_function_in_a_sync_chat_is_the_sdks_error_before_sending() -> None:
    # The SDK's sync chat cannot await a coroutine function: its own error, before sending.
    async def save_note(title: str, body: str) -> dict[str, Any]:
        return {"saved": True}

    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url="http://127.0.0.1:9")
    )
    chat = client.chats.create(model=MODEL, config=types.GenerateContentConfig(tools=[save_note]))
    with pytest.raises(errors.UnsupportedFunctionError, match="is a coroutine function"):
        fastagg_genai.send_message_stream(chat, "hi")
    assert chat.get_history() == []


async def test_g7_a_chat_stream_read_one_chunk_per_thread_records_its_turn() -> None:
    # Starlette/FastAPI's StreamingResponse reads a sync iterator on a thread pool, one
    # next() per worker thread: the stream hands its aggregator over at each hop (D8).
    async with FakeGemini(streamed_args_scenario()) as server:

        def one_chunk_per_thread() -> tuple[int, Any, list[Any]]:
            client = client_for(server)
            chat = client.chats.create(model=MODEL, config=chat_config())
            stream = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            read: list[Any] = []
            failures: list[BaseException] = []

            def step() -> None:
                try:
                    read.append(next(stream, None))
                except BaseException as exc:
                    failures.append(exc)
                    read.append(None)

            while not read or read[-1] is not None:
                worker = threading.Thread(target=step)
                worker.start()
                worker.join()
            assert failures == []
            return len(read) - 1, stream.result, chat.get_history()

        chunks, result, history = await asyncio.to_thread(one_chunk_per_thread)
    assert chunks == len(streamed_args_scenario()[0].chunks)
    assert result is not None
    assert [(c["name"], c["args"]) for c in result.function_calls] == STREAMED_CALLS
    assert [c.role for c in history] == ["user", "model"]
    assert history[1] == types.Content.model_validate(result.content)  # signature byte-exact


async def test_g7_two_threads_reading_one_chat_stream_at_once_is_a_clear_error() -> None:
    steps = streamed_args_scenario()
    steps[0] = dataclasses.replace(steps[0], pause_after=1, pause=30.0)
    async with FakeGemini(steps) as server:

        def race() -> tuple[Any, str]:
            client = client_for(server)
            chat = client.chats.create(model=MODEL, config=chat_config())
            stream = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            first = next(stream)

            def read_on() -> None:
                # blocks in next(): the server pauses after the first chunk, and ends the
                # stream when the test leaves it
                with contextlib.suppress(fastagg_genai.StreamInterrupted):
                    next(stream, None)

            waiting = threading.Thread(target=read_on, daemon=True)
            waiting.start()
            while not stream._reading.locked():
                time.sleep(0.001)
            with pytest.raises(RuntimeError) as info:
                next(stream)
            return first, str(info.value)

        first, message = await asyncio.to_thread(race)
    assert first.candidates is not None
    assert message == (
        "ChatStream: next() was called from two threads at once; read one chat message's "
        "stream from one thread at a time"
    )


async def test_g7_a_closed_chat_stream_closes_the_sdk_stream_and_records_nothing() -> None:
    steps = streamed_args_scenario()
    steps[0] = dataclasses.replace(steps[0], pause_after=1, pause=math.inf)
    async with FakeGemini(steps) as server:

        def close_early() -> tuple[str, list[Any], Any]:
            client = client_for(server)
            chat = client.chats.create(model=MODEL, config=chat_config())
            with contextlib.closing(fastagg_genai.send_message_stream(chat, AGENT_PROMPT)) as it:
                next(it)
            state = inspect.getgeneratorstate(it._chunks)
            return state, chat.get_history(), next(it, "ended")

        state, history, after = await asyncio.to_thread(close_early)
    assert (state, history, after) == (inspect.GEN_CLOSED, [], "ended")


async def test_g7_an_async_chat_stream_closed_early_closes_the_sdk_stream() -> None:
    steps = streamed_args_scenario()
    steps[0] = dataclasses.replace(steps[0], pause_after=1, pause=math.inf)
    async with FakeGemini(steps) as server:
        client = client_for(server)  # the chat does not keep its client alive
        chat = client.aio.chats.create(model=MODEL, config=chat_config())
        async with contextlib.aclosing(
            fastagg_genai.send_message_stream_async(chat, AGENT_PROMPT)
        ) as it:
            await anext(it)
        assert it._chunks is not None and it._chunks.ag_frame is None  # type: ignore[attr-defined]
        assert chat.get_history() == []
        with pytest.raises(StopAsyncIteration):
            await anext(it)
        unread = fastagg_genai.send_message_stream_async(chat, AGENT_PROMPT)
        await unread.aclose()  # before its first chunk: nothing was sent for it
    assert len(server.requests) == 1


async def test_g7_two_messages_in_flight_on_one_chat_each_keep_their_own_turn() -> None:
    # The first answer pauses mid-stream while a second message is sent and answered on
    # the same chat: each user message keeps its own (aggregated) answer, as the SDK's
    # own history keeps both exchanges.
    slow = Step(
        [chunk(text("First ")), chunk(text("answer.")), final(signature("1"))],
        pause_after=1,
        pause=1.0,
    )
    quick = Step([chunk(text("Second answer.")), final(signature("2"))])
    async with FakeGemini([slow, quick]) as server:
        client = client_for(server)  # the chat does not keep its client alive
        chat = client.aio.chats.create(model=MODEL)
        first = fastagg_genai.send_message_stream_async(chat, "first question")
        await anext(first)
        second = fastagg_genai.send_message_stream_async(chat, "second question")
        assert "".join([c.text or "" async for c in second]) == "Second answer."
        assert "".join([c.text or "" async for c in first]) == "answer."
        history = chat.get_history()
        curated = chat.get_history(curated=True)
    pairs = [
        (history[i].parts[0].text, "".join(p.text or "" for p in history[i + 1].parts))
        for i in range(0, len(history), 2)
    ]
    assert sorted(pairs) == [
        ("first question", "First answer."),
        ("second question", "Second answer."),
    ]
    assert [c.role for c in history] == ["user", "model"] * 2
    assert curated == history


async def test_g7_a_stream_left_early_records_nothing() -> None:
    async with FakeGemini(streamed_args_scenario()) as server:

        def leave_early() -> list[Any]:
            client = client_for(server)
            chat = client.chats.create(model=MODEL, config=chat_config())
            stream = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            next(stream)  # one chunk, then the caller walks away
            return chat.get_history()

        history = await asyncio.to_thread(leave_early)
    assert history == []


async def test_g3_aggregate_async_awaits_what_on_chunk_returns() -> None:
    async with FakeGemini(streamed_args_scenario()[1:]) as server:
        client = client_for(server)
        seen: list[str] = []

        async def show(chunk: Any, deltas: list[Any]) -> None:
            await asyncio.sleep(0)
            seen.extend(d.text for d in deltas if type(d).__name__ == "TextDelta")

        response = await fastagg_genai.aggregate_async(
            client.aio.models.generate_content_stream(model=MODEL, contents="hi"), on_chunk=show
        )
    assert "".join(seen) == response.text == STREAMED_ANSWER


async def test_g3_an_http_error_before_any_chunk_is_the_sdks_own() -> None:
    from fastagg.testing import Step

    async with FakeGemini([Step(http_error=429)]) as server:
        client = client_for(server)
        with pytest.raises(errors.ClientError) as info:
            await fastagg_genai.aggregate_async(
                client.aio.models.generate_content_stream(model=MODEL, contents="hi")
            )
    assert info.value.code == 429
