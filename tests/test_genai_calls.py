"""The google-genai helpers and function calls: a call cut off mid-stream (G9), an empty
answer (G10), automatic function calling in a chat (G11).

A real google-genai client and chat over loopback against FakeGemini; the functions
are the test's own, recording what they were run with. No ``from __future__ import
annotations`` here: google-genai 1.68 cannot read the string annotations of a function
it calls automatically (it answers the model with an error instead).
"""

import asyncio
import contextlib
import inspect
import math
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
    error_chunk,
    final,
    interleaved_calls_scenario,
    signature,
    streamed_args_scenario,
    text,
)
from fastagg.testing.chunks import call, streamed_call, thought

genai = pytest.importorskip(
    "google.genai", reason="needs google-genai (pip install 'fastagg[genai]')"
)
types = pytest.importorskip("google.genai.types")
fastagg_genai = pytest.importorskip("fastagg.genai")

import fastagg  # noqa: E402  (after the skip: fastagg.genai needs google-genai)

MODEL = "gemini-3-flash-preview"
REFUND = {"title": "Refund", "body": "Your refund of 40 EUR was sent today."}


def client_for(server: FakeGemini) -> Any:
    """Vertex AI express mode: streamed arguments (partialArgs) are a Vertex feature."""
    return genai.Client(
        vertexai=True, api_key="test", http_options=types.HttpOptions(base_url=server.url)
    )


def cut_off_step() -> Step:
    """A ``save_note`` call whose streamed arguments stop mid-body; the stream then ends
    normally (no end marker, no finish reason): the call was never finished."""
    pieces = streamed_call("save_note", REFUND, id="fc_note", signature=signature("cut"))
    return Step([chunk(thought("Writing the note.")), *pieces[:-2]])


def answer_step(words: str) -> Step:
    return Step([chunk(text(words)), final(signature(words))])


# ---------------------------------------------------------------- G9: cut-off calls

CUT_MESSAGE = (
    "the google-genai stream ended inside a call to save_note: its arguments are "
    "incomplete, so it must not be run. Retry the request. The response as received is "
    "on this exception (.partial, .result; the cut-off call in .result.unfinished_calls)."
)
CHAT_CUT_MESSAGE = (
    "the google-genai stream ended inside a call to save_note: its arguments are "
    "incomplete, so it must not be run. Nothing of this message is kept in the chat's "
    "history: send the message again. The response as received is on this exception "
    "(.partial, .result; the cut-off call in .result.unfinished_calls)."
)


def _check_cut_off(exc: BaseException, message: str) -> None:
    assert type(exc) is fastagg_genai.StreamEndedInsideCall
    assert isinstance(exc, fastagg_genai.StreamInterrupted)  # except clauses users have
    assert isinstance(exc, fastagg.UnfinishedCallError)
    assert str(exc) == message
    assert bool(exc.result.unfinished_calls)
    assert exc.result.text == ""
    # the cut-off call, as received, for display
    (part,) = [p for p in exc.partial.candidates[0].content.parts if p.function_call]
    assert part.function_call.name == "save_note"
    assert part.function_call.args["title"] == "Refund"
    assert REFUND["body"].startswith(part.function_call.args["body"])
    assert part.function_call.args["body"] != REFUND["body"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_g9_aggregate_raises_when_the_stream_ends_inside_a_call(mode: str) -> None:
    async with FakeGemini([cut_off_step()]) as server:
        client = client_for(server)
        with pytest.raises(fastagg_genai.StreamInterrupted) as info:
            if mode == "sync":
                await asyncio.to_thread(
                    fastagg_genai.aggregate,
                    client.models.generate_content_stream(model=MODEL, contents="Refund?"),
                )
            else:
                await fastagg_genai.aggregate_async(
                    client.aio.models.generate_content_stream(model=MODEL, contents="Refund?")
                )
    _check_cut_off(info.value, CUT_MESSAGE)
    assert info.value.__cause__ is None


async def test_g9_a_finish_reason_after_a_cut_off_call_is_still_a_cut_off() -> None:
    step = cut_off_step()
    step.chunks.append(final())
    async with FakeGemini([step]) as server:
        client = client_for(server)
        with pytest.raises(fastagg_genai.StreamEndedInsideCall) as info:
            await fastagg_genai.aggregate_async(
                client.aio.models.generate_content_stream(model=MODEL, contents="Refund?")
            )
    _check_cut_off(info.value, CUT_MESSAGE)


async def test_g9_chat_stream_cut_off_inside_a_call_records_nothing_and_a_retry_is_clean() -> None:
    async with FakeGemini([cut_off_step(), answer_step("Done.")]) as server:

        def conversation() -> tuple[BaseException, list[Any], list[Any], str, list[Any]]:
            client = client_for(server)
            chat = client.chats.create(model=MODEL)
            stream = fastagg_genai.send_message_stream(chat, "Send the refund note.")
            seen = []
            with pytest.raises(fastagg_genai.StreamInterrupted) as info:
                for c in stream:
                    seen.append(c)
            after = (list(chat.get_history()), list(chat.get_history(curated=True)))
            retry = "".join(
                c.text or "" for c in fastagg_genai.send_message_stream(chat, "Send it again.")
            )
            return info.value, after[0], after[1], retry, chat.get_history()

        exc, history, curated, retry, final_history = await asyncio.to_thread(conversation)
    _check_cut_off(exc, CHAT_CUT_MESSAGE)
    assert (history, curated) == ([], [])
    assert retry == "Done."
    assert server.requests[1]["contents"] == [
        {"role": "user", "parts": [{"text": "Send it again."}]}
    ]
    assert [c.role for c in final_history] == ["user", "model"]


async def test_g9_async_chat_stream_cut_off_inside_a_call_records_nothing() -> None:
    async with FakeGemini([cut_off_step(), answer_step("Done.")]) as server:
        client = client_for(server)
        chat = client.aio.chats.create(model=MODEL)
        with pytest.raises(fastagg_genai.StreamEndedInsideCall) as info:
            async for _ in fastagg_genai.send_message_stream_async(chat, "Send the refund note."):
                pass
        assert (chat.get_history(), chat.get_history(curated=True)) == ([], [])
        stream = fastagg_genai.send_message_stream_async(chat, "Send it again.")
        retry = "".join([c.text or "" async for c in stream])
    _check_cut_off(info.value, CHAT_CUT_MESSAGE)
    assert retry == "Done."
    assert server.requests[1]["contents"] == [
        {"role": "user", "parts": [{"text": "Send it again."}]}
    ]


# ---------------------------------------------------------------- G10: an empty answer


def _dump(contents: list[Any]) -> list[Any]:
    return [c.model_dump(exclude_none=True) for c in contents]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_g10_an_empty_text_answer_stays_in_the_curated_history_as_the_sdk_keeps_it(
    mode: str,
) -> None:
    # The model's whole answer: one Part(text='') and STOP. The SDK's chat keeps it as a
    # valid turn (sent with the next message); with fastagg the chat does the same.
    def script() -> list[Step]:
        return [
            Step([chunk(text(""), finish_reason="STOP")]),
            answer_step("Here I am."),
        ]

    async def run(use_fastagg: bool) -> tuple[list[Any], list[Any], Any]:
        async with FakeGemini(script()) as server:
            client = client_for(server)
            if mode == "sync":

                def conversation() -> None:
                    chat = client.chats.create(model=MODEL)
                    for message in ("Say nothing.", "Now say something."):
                        stream = (
                            fastagg_genai.send_message_stream(chat, message)
                            if use_fastagg
                            else chat.send_message_stream(message)
                        )
                        for _ in stream:
                            pass
                    histories.extend([chat.get_history(), chat.get_history(curated=True)])

                histories: list[Any] = []
                await asyncio.to_thread(conversation)
            else:
                chat = client.aio.chats.create(model=MODEL)
                for message in ("Say nothing.", "Now say something."):
                    if use_fastagg:
                        async for _ in fastagg_genai.send_message_stream_async(chat, message):
                            pass
                    else:
                        async for _ in await chat.send_message_stream(message):
                            pass
                histories = [chat.get_history(), chat.get_history(curated=True)]
            return _dump(histories[0]), _dump(histories[1]), server.requests[1]["contents"]

    sdk = await run(use_fastagg=False)
    with_fastagg = await run(use_fastagg=True)
    empty_turn = {"role": "model", "parts": [{"text": ""}]}
    assert sdk[1][:2] == [{"role": "user", "parts": [{"text": "Say nothing."}]}, empty_turn]
    assert with_fastagg[1][:2] == sdk[1][:2]
    assert with_fastagg[0][:2] == sdk[0][:2]
    assert with_fastagg[2] == sdk[2]  # the second request carries the empty turn
    assert [c["role"] for c in with_fastagg[1]] == ["user", "model", "user", "model"]


# ---------------------------------------------------------------- G11: automatic calls


class Recorder:
    """The test's Python functions for automatic function calling, recording each run."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Any]:
        ran = self.ran

        def save_note(title: str, body: str) -> dict[str, Any]:
            """Save a short note for the user.

            Args:
                title: Title of the note.
                body: Text of the note.
            """
            ran.append(("save_note", {"title": title, "body": body}))
            return {"saved": True, "chars": len(body)}

        def get_weather(city: str) -> dict[str, Any]:
            """Current weather for a city.

            Args:
                city: City name.
            """
            ran.append(("get_weather", {"city": city}))
            return {"city": city, "sky": "sunny"}

        return [save_note, get_weather]

    def async_tools(self) -> list[Any]:
        save_note, get_weather = self.tools()

        async def save_note_async(title: str, body: str) -> dict[str, Any]:
            await asyncio.sleep(0)
            return save_note(title, body)  # type: ignore[no-any-return]

        save_note_async.__name__ = "save_note"
        save_note_async.__doc__ = save_note.__doc__
        return [save_note_async, get_weather]


SCENARIOS = {
    "interleaved": (interleaved_calls_scenario, INTERLEAVED_CALLS, INTERLEAVED_ANSWER),
    "streamed-args": (streamed_args_scenario, STREAMED_CALLS, STREAMED_ANSWER),
}


def _check_afc_exchange(
    server: FakeGemini, recorder: Recorder, expected_calls: Any, history: list[Any]
) -> None:
    assert recorder.ran == expected_calls
    assert [r.status for r in server.records] == [200, 200]
    sent = server.requests[1]["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user"]
    assert [p["functionCall"]["args"] for p in sent[1]["parts"] if "functionCall" in p] == [
        a for _, a in expected_calls
    ]
    calls = [p["functionCall"] for p in sent[1]["parts"] if "functionCall" in p]
    responses = [p["functionResponse"] for p in sent[2]["parts"]]
    assert [(r["id"], r["name"]) for r in responses] == [(c["id"], c["name"]) for c in calls]
    assert [c.role for c in history] == ["user", "model", "user", "model"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_g11_a_chat_with_automatic_function_calling_runs_whole_calls(name: str) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    recorder = Recorder()
    async with FakeGemini(scenario()) as server:

        def conversation() -> tuple[str, list[Any], Any]:
            client = client_for(server)
            chat = client.chats.create(
                model=MODEL, config=types.GenerateContentConfig(tools=recorder.tools())
            )
            stream = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            said = "".join(c.text or "" for c in stream if c.candidates)
            return said, chat.get_history(curated=True), stream.result

        said, history, result = await asyncio.to_thread(conversation)
    assert said == answer
    _check_afc_exchange(server, recorder, expected_calls, history)
    assert result.text == answer and result.function_calls == []
    first = server.requests[1]["contents"][2]["parts"][0]["functionResponse"]
    output = {"saved": True, "chars": len(expected_calls[0][1]["body"])}
    assert first["response"] == {"result": output}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_g11_an_async_chat_with_automatic_function_calling_runs_whole_calls(
    name: str,
) -> None:
    scenario, expected_calls, answer = SCENARIOS[name]
    recorder = Recorder()
    async with FakeGemini(scenario()) as server:
        client = client_for(server)
        chat = client.aio.chats.create(
            model=MODEL, config=types.GenerateContentConfig(tools=recorder.async_tools())
        )
        stream = fastagg_genai.send_message_stream_async(chat, AGENT_PROMPT)
        said = "".join([c.text or "" async for c in stream if c.candidates])
        history = chat.get_history(curated=True)
    assert said == answer
    _check_afc_exchange(server, recorder, expected_calls, history)


async def test_g11_the_last_remote_call_leaves_the_calls_to_the_caller() -> None:
    # maximum_remote_calls=1: one request, so no request is left to send a result with:
    # the functions do not run, the turn ends on the model's calls, as the SDK does.
    recorder = Recorder()
    config = types.GenerateContentConfig(
        tools=recorder.tools(),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(maximum_remote_calls=1),
    )
    async with FakeGemini(streamed_args_scenario()) as server:

        def conversation() -> tuple[Any, list[Any]]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(model=MODEL, config=config)
            stream = fastagg_genai.send_message_stream(chat, AGENT_PROMPT)
            for _ in stream:
                pass
            return stream.result, chat.get_history(curated=True)

        result, history = await asyncio.to_thread(conversation)
    assert recorder.ran == []
    assert len(server.requests) == 1
    assert [(c["name"], c["args"]) for c in result.function_calls] == STREAMED_CALLS
    assert [c.role for c in history] == ["user", "model"]


async def test_g11_a_call_to_a_function_the_chat_does_not_have_is_left_to_the_caller() -> None:
    recorder = Recorder()
    step = Step([chunk(call("lookup", {"query": "croissant"}, id="fc_1"), finish_reason="STOP")])
    async with FakeGemini([step]) as server:

        def conversation() -> tuple[Any, list[Any]]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(
                model=MODEL, config=types.GenerateContentConfig(tools=recorder.tools())
            )
            stream = fastagg_genai.send_message_stream(chat, "Look up croissants.")
            for _ in stream:
                pass
            return stream.result, chat.get_history(curated=True)

        result, history = await asyncio.to_thread(conversation)
    assert recorder.ran == []
    assert len(server.requests) == 1
    assert result.function_calls == [
        {"id": "fc_1", "name": "lookup", "args": {"query": "croissant"}}
    ]
    assert [c.role for c in history] == ["user", "model"]


async def test_g11_a_cut_off_call_after_functions_ran_undoes_the_whole_message() -> None:
    recorder = Recorder()
    first = Step(
        [
            chunk(call("get_weather", {"city": "Paris"}, id="fc_w", signature=signature("w"))),
            final(),
        ]
    )
    async with FakeGemini([first, cut_off_step(), answer_step("Sent.")]) as server:

        def conversation() -> tuple[BaseException, list[Any], list[Any]]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(
                model=MODEL, config=types.GenerateContentConfig(tools=recorder.tools())
            )
            with pytest.raises(fastagg_genai.StreamEndedInsideCall) as info:
                for _ in fastagg_genai.send_message_stream(chat, "Weather, then the note."):
                    pass
            return info.value, list(chat.get_history()), list(chat.get_history(curated=True))

        exc, history, curated = await asyncio.to_thread(conversation)
    assert recorder.ran == [("get_weather", {"city": "Paris"})]
    assert (history, curated) == ([], [])
    assert str(exc) == (
        "the google-genai stream ended inside a call to save_note: its arguments are "
        "incomplete, so it must not be run. Nothing of this message is kept in the chat's "
        "history: send the message again (get_weather already ran for it and will run "
        "again). The response as received is on this exception (.partial, .result; the "
        "cut-off call in .result.unfinished_calls)."
    )


def _weather_then(step: Step) -> list[Step]:
    first = Step(
        [
            chunk(call("get_weather", {"city": "Paris"}, id="fc_w", signature=signature("w"))),
            final(),
        ]
    )
    return [first, step]


async def test_g11_an_error_during_a_later_request_undoes_the_whole_message() -> None:
    recorder = Recorder()
    async with FakeGemini(_weather_then(Step([chunk(text("Half")), error_chunk()]))) as server:
        client = client_for(server)
        chat = client.aio.chats.create(
            model=MODEL, config=types.GenerateContentConfig(tools=recorder.tools())
        )
        with pytest.raises(fastagg_genai.StreamInterrupted) as info:
            async for _ in fastagg_genai.send_message_stream_async(chat, "Weather?"):
                pass
        histories = (chat.get_history(), chat.get_history(curated=True))
    assert type(info.value) is fastagg_genai.StreamInterrupted
    assert info.value.result.text == "Half"
    assert recorder.ran == [("get_weather", {"city": "Paris"})]
    assert histories == ([], [])


async def test_g11_closing_the_stream_during_a_later_request_undoes_the_whole_message() -> None:
    recorder = Recorder()
    paused = Step([chunk(text("It is ")), final()], pause_after=1, pause=math.inf)
    async with FakeGemini(_weather_then(paused)) as server:

        def conversation() -> tuple[list[Any], list[Any], Any]:
            client = client_for(server)  # the chat does not keep its client alive
            chat = client.chats.create(
                model=MODEL, config=types.GenerateContentConfig(tools=recorder.tools())
            )
            stream = fastagg_genai.send_message_stream(chat, "Weather?")
            with contextlib.closing(stream):
                for c in stream:
                    if c.text:
                        break  # the second request's first chunk
            return chat.get_history(), chat.get_history(curated=True), next(stream, "ended")

        history, curated, after = await asyncio.to_thread(conversation)
    assert recorder.ran == [("get_weather", {"city": "Paris"})]
    assert (history, curated, after) == ([], [], "ended")
    assert len(server.requests) == 2


async def test_g11_mcp_servers_with_automatic_function_calling_are_refused_before_sending() -> None:
    from google.genai import _extra_utils

    if (
        "is_agent_platform"
        not in inspect.signature(_extra_utils.find_afc_incompatible_tool_indexes).parameters
    ):
        pytest.skip(f"google-genai {genai.__version__} turns automatic function calling off")
    recorder = Recorder()
    mcp = types.Tool(mcp_servers=[types.McpServer(name="projects/p/mcpServers/notes")])
    config = types.GenerateContentConfig(tools=[*recorder.tools(), mcp])
    client = genai.Client(
        vertexai=True, api_key="k", http_options=types.HttpOptions(base_url="http://127.0.0.1:9")
    )
    chat = client.aio.chats.create(model=MODEL, config=config)
    with pytest.raises(ValueError) as info:
        fastagg_genai.send_message_stream_async(chat, "Notes?")
    assert str(info.value) == (
        "send_message_stream: MCP sessions or servers among the tools with automatic "
        "function calling cannot be run on the aggregated turn by fastagg. Turn it off "
        "(automatic_function_calling=AutomaticFunctionCallingConfig(disable=True)) and call "
        "the session's tools with the turn's result.function_calls, or use the chat's "
        "send_message (not streamed)"
    )
    assert chat.get_history() == []
