"""FakeInteractions over loopback HTTP, read by StreamAggregator(api="interactions"):
a turn with two parallel calls whose arguments stream, the stateful follow-up with
function results, stateless mode, a dropped stream resumed from last_event_id, and the
faults (error event, missing [DONE])."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fastagg import StreamAggregator
from fastagg.client import GeminiClient, InteractionsClient
from fastagg.errors import ProviderError
from fastagg.testing.fake_interactions import (
    FakeInteractions,
    InteractionTurn,
    arguments_step,
    error_event,
    text_step,
    thought_step,
)

HEADERS = {"x-goog-api-key": "k", "Accept": "text/event-stream"}
CALLS_TURN = InteractionTurn(
    [
        *thought_step(0, "EqQBCqEBAY89a1==", "Checking both cities"),
        *arguments_step(1, "fc7k2m9q", "get_weather", '{"ci', 'ty":"Pa', 'ris"}'),
        *arguments_step(2, "q3v8t1xz", "get_weather", '{"city":"Lon\\u0064on"}'),
    ],
    status="requires_action",
    usage={"total_tokens": 241, "total_output_tokens": 24},
)
ANSWER_TURN = InteractionTurn(
    text_step(0, "Paris: 18 C, clear. ", "London: 12 C, rain."),
    usage={"total_tokens": 300, "total_output_tokens": 12},
)
FIRST = {"model": "gemini-3.8-flash", "stream": True, "input": "Weather in Paris and London?"}


async def post(client: httpx.AsyncClient, url: str, body: dict[str, Any], agg: Any) -> list[Any]:
    deltas: list[Any] = []
    async with client.stream("POST", f"{url}/v1beta/interactions", json=body, headers=HEADERS) as r:
        assert r.status_code == 200
        async for chunk in r.aiter_raw():
            deltas += agg.feed(chunk)
    return deltas


async def test_i19_parallel_calls_then_stateful_follow_up_with_function_results() -> None:
    async with FakeInteractions([CALLS_TURN, ANSWER_TURN]) as server, httpx.AsyncClient() as client:
        agg = StreamAggregator(api="interactions")
        deltas = await post(client, server.url, FIRST, agg)
        first = agg.close()
        assert first.status == "requires_action"
        assert first.interaction_id == "v1_fake1"
        assert first.last_event_id == "v1_fake1-e13"
        assert first.function_calls == [
            {"id": "fc7k2m9q", "name": "get_weather", "args": {"city": "Paris"}},
            {"id": "q3v8t1xz", "name": "get_weather", "args": {"city": "London"}},
        ]
        assert first.steps[0] == {
            "type": "thought",
            "summary": [{"type": "text", "text": "Checking both cities"}],
            "signature": "EqQBCqEBAY89a1==",
        }
        assert [(type(d).__name__, d.index) for d in deltas if type(d).__name__ == "ArgDelta"] == [
            ("ArgDelta", 1),
            ("ArgDelta", 1),
            ("ArgDelta", 2),
        ]
        results = [
            {"type": "function_result", "call_id": c["id"], "name": c["name"], "result": r}
            for c, r in zip(first.function_calls, ["18 C, clear", "12 C, rain"], strict=True)
        ]
        follow = {**FIRST, "previous_interaction_id": first.interaction_id, "input": results}
        agg2 = StreamAggregator(api="interactions")
        await post(client, server.url, follow, agg2)
        second = agg2.close()
        assert (second.status, second.text) == (
            "completed",
            "Paris: 18 C, clear. London: 12 C, rain.",
        )
        assert second.usage == {"total_tokens": 300, "total_output_tokens": 12}
        assert server.interactions["v1_fake2"].request["input"] == results


async def test_stateless_history_resends_steps_verbatim_and_cannot_be_resumed() -> None:
    async with FakeInteractions([CALLS_TURN, ANSWER_TURN]) as server, httpx.AsyncClient() as client:
        agg = StreamAggregator(api="interactions")
        await post(client, server.url, {**FIRST, "store": False}, agg)
        first = agg.close()
        history = [
            {"type": "user_input", "content": [{"type": "text", "text": FIRST["input"]}]},
            *first.steps,
            {"type": "function_result", "call_id": "fc7k2m9q", "result": "18 C"},
            {"type": "function_result", "call_id": "q3v8t1xz", "result": "12 C"},
        ]
        r = await client.post(
            f"{server.url}/v1beta/interactions",
            json={**FIRST, "previous_interaction_id": first.interaction_id},
            headers=HEADERS,
        )
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "not_found"
        agg2 = StreamAggregator(api="interactions")
        await post(client, server.url, {**FIRST, "store": False, "input": history}, agg2)
        assert agg2.close().status == "completed"
        sent = server.interactions["v1_fake2"].request["input"]
        assert sent[1:4] == first.steps  # the thought signature travels byte-exact
        resumed = await client.get(
            f"{server.url}/v1beta/interactions/{first.interaction_id}",
            params={"stream": "true", "last_event_id": first.last_event_id},
            headers=HEADERS,
        )
        assert resumed.status_code == 404


async def test_dropped_stream_resumes_from_last_event_id_into_the_same_result() -> None:
    dropped = InteractionTurn(CALLS_TURN.events, CALLS_TURN.status, CALLS_TURN.usage, drop_after=6)
    async with FakeInteractions([dropped]) as server, httpx.AsyncClient() as client:
        agg = StreamAggregator(api="interactions")
        with pytest.raises(httpx.RemoteProtocolError):
            await post(client, server.url, FIRST, agg)
        cut = agg.snapshot()
        assert cut.last_event_id == "v1_fake1-e5"
        assert [c["step"] for c in cut.unfinished_calls] == [1]
        async with client.stream(
            "GET",
            f"{server.url}/v1beta/interactions/{cut.interaction_id}",
            params={"stream": "true", "last_event_id": cut.last_event_id},
            headers=HEADERS,
        ) as r:
            async for chunk in r.aiter_raw():
                agg.feed(chunk)
        result = agg.close()
        whole = StreamAggregator(api="interactions")
        for event in server.interactions["v1_fake1"].events:
            whole.feed_event(json.dumps(event))
        want = whole.close()
        assert result.function_calls == want.function_calls
        assert result.steps == want.steps
        assert (result.status, result.done, result.warnings) == ("requires_action", True, [])


async def test_i20_stream_cut_inside_an_event_resumes_after_reconnect() -> None:
    cut = InteractionTurn(
        CALLS_TURN.events, CALLS_TURN.status, CALLS_TURN.usage, cut_after_bytes=900
    )
    async with FakeInteractions([cut]) as server, httpx.AsyncClient() as client:
        agg = StreamAggregator(api="interactions")
        with pytest.raises(httpx.RemoteProtocolError):
            await post(client, server.url, FIRST, agg)
        last = agg.snapshot().last_event_id
        agg.reconnect()
        async with client.stream(
            "GET",
            f"{server.url}/v1beta/interactions/v1_fake1",
            params={"stream": "true", "last_event_id": last},
            headers=HEADERS,
        ) as r:
            async for chunk in r.aiter_raw():
                agg.feed(chunk)
        result = agg.close()
        assert result.function_calls == [
            {"id": "fc7k2m9q", "name": "get_weather", "args": {"city": "Paris"}},
            {"id": "q3v8t1xz", "name": "get_weather", "args": {"city": "London"}},
        ]
        assert (result.status, result.done, result.warnings) == ("requires_action", True, [])


async def test_error_event_and_missing_done_are_reported() -> None:
    turns = [
        InteractionTurn(
            [
                *text_step(0, "Paris is clear and")[:2],
                error_event("gateway_timeout", "Deadline expired."),
            ],
            status=None,
            send_done=False,
        )
    ]
    async with FakeInteractions(turns) as server, httpx.AsyncClient() as client:
        agg = StreamAggregator(api="interactions")
        deltas = await post(client, server.url, FIRST, agg)
        result = agg.close()
        assert type(deltas[-1]).__name__ == "StreamError"
        assert result.error == {"code": "gateway_timeout", "message": "Deadline expired."}
        assert (result.complete, result.done, result.text) == (False, False, "Paris is clear and")
        assert result.warnings == [
            'step 0 ("model_output") never received step.stop',
            "the stream ended without the [DONE] sentinel",
        ]


async def test_requests_are_checked_like_the_service() -> None:
    async with FakeInteractions([]) as server, httpx.AsyncClient() as client:
        url = f"{server.url}/v1beta/interactions"
        assert (await client.post(url, json=FIRST)).status_code == 401
        assert (await client.post(url, json={"stream": True}, headers=HEADERS)).status_code == 400
        exhausted = await client.post(url, json=FIRST, headers=HEADERS)
        assert exhausted.json()["error"] == {
            "code": "failed_precondition",
            "message": "script exhausted at request 1",
        }


def _gemini_client_on_interactions(model: str, **kwargs: Any) -> GeminiClient:
    return GeminiClient(model, api="interactions", **kwargs)


# One client for both APIs: InteractionsClient is GeminiClient with api="interactions".
@pytest.mark.parametrize(
    "make", [InteractionsClient, _gemini_client_on_interactions], ids=["Interactions", "Gemini"]
)
async def test_i21_client_runs_calls_then_follow_up_and_resumes_drops(make: Any) -> None:
    dropped = InteractionTurn(CALLS_TURN.events, CALLS_TURN.status, CALLS_TURN.usage, drop_after=7)
    cut = InteractionTurn(ANSWER_TURN.events, usage=ANSWER_TURN.usage, cut_after_bytes=300)
    async with FakeInteractions([dropped, cut]) as server:
        async with make("gemini-3.8-flash", api_key="k", base_url=server.url) as model:
            assert model.interactions_url == f"{server.url}/v1beta/interactions"
            seen: list[Any] = []
            first = await model.run({"input": FIRST["input"]}, on_delta=seen.append)
            assert first.function_calls == [
                {"id": "fc7k2m9q", "name": "get_weather", "args": {"city": "Paris"}},
                {"id": "q3v8t1xz", "name": "get_weather", "args": {"city": "London"}},
            ]
            assert (first.status, first.warnings) == ("requires_action", [])
            results = [
                {"type": "function_result", "call_id": c["id"], "result": "ok"}
                for c in first.function_calls
            ]
            follow = {"previous_interaction_id": first.interaction_id, "input": results}
            second = await model.run(follow)
            assert (second.status, second.text) == (
                "completed",
                "Paris: 18 C, clear. London: 12 C, rain.",
            )
    methods = [(m, p, q.get("last_event_id")) for m, p, q, _ in server.records]
    assert methods == [
        ("POST", "/v1beta/interactions", None),
        ("GET", "/v1beta/interactions/v1_fake1", "v1_fake1-e6"),
        ("POST", "/v1beta/interactions", None),
        ("GET", "/v1beta/interactions/v1_fake2", "v1_fake2-e1"),
    ]
    assert server.records[0][3] == {
        "model": "gemini-3.8-flash",
        "input": FIRST["input"],
        "stream": True,
    }
    assert sum(type(d).__name__ == "CallEnd" for d in seen) == 2


async def test_i21_unstored_or_uncreated_interactions_are_not_resumed() -> None:
    dropped = InteractionTurn(CALLS_TURN.events, drop_after=3)
    early = InteractionTurn(CALLS_TURN.events, drop_after=0)
    async with FakeInteractions([dropped, early]) as server:
        async with InteractionsClient("m", api_key="k", base_url=server.url) as model:
            with pytest.raises(ProviderError) as unstored:
                await model.run({"input": "x", "store": False})
            assert unstored.value.kind == "connection"
            with pytest.raises(ProviderError) as uncreated:
                await model.run({"input": "x"})
            assert uncreated.value.kind == "connection"
    assert [m for m, *_ in server.records] == ["POST", "POST"]


@pytest.mark.parametrize(
    ("kwargs", "url"),
    [
        ({"api_key": "k"}, "https://generativelanguage.googleapis.com/v1beta/interactions"),
        (
            {"api_key": "k", "vertex": True},
            "https://aiplatform.googleapis.com/v1beta1/interactions",
        ),
        (
            {"vertex": True, "project": "p", "credentials": object()},
            "https://aiplatform.googleapis.com/v1beta1/projects/p/locations/global/interactions",
        ),
        (
            {"vertex": True, "project": "p", "location": "us-central1", "credentials": object()},
            "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/p/locations/us-central1/interactions",
        ),
    ],
)
def test_i21_interactions_url_per_backend(kwargs: dict[str, Any], url: str) -> None:
    assert InteractionsClient("gemini-3.8-flash", **kwargs).interactions_url == url


async def test_h11_run_pumps_each_body_and_delivers_every_delta_as_iterating_does(
    monkeypatch: pytest.MonkeyPatch, pump_calls: list[int]
) -> None:
    from fastagg.client import gemini as interactions_client

    async def iterated(body: Any, feed: Any) -> None:
        async for chunk in body:
            feed(chunk)

    async def deltas_of_one_run() -> tuple[Any, list[str]]:
        seen: list[Any] = []
        async with (
            FakeInteractions([CALLS_TURN]) as server,
            InteractionsClient("gemini-3.8-flash", api_key="k", base_url=server.url) as model,
        ):
            result = await model.run({"input": FIRST["input"]}, on_delta=seen.append)
        return result.function_calls, [repr(d) for d in seen]

    pushed = await deltas_of_one_run()
    assert pump_calls == [200]
    monkeypatch.setattr(interactions_client, "pump", iterated)
    assert await deltas_of_one_run() == pushed
    assert pump_calls == [200]  # the second run iterated
    assert sum("CallEnd" in d for d in pushed[1]) == 2


def test_i21_interactions_client_is_the_gemini_client_on_the_interactions_api() -> None:
    from fastagg import interactions_client

    assert interactions_client.InteractionsClient is InteractionsClient
    assert issubclass(InteractionsClient, GeminiClient)
    assert [n for n in vars(InteractionsClient) if not n.startswith("__")] == ["api"]
    made = InteractionsClient("gemini-3.8-flash", api_key="k")
    assert (made.api, repr(made)) == (
        "interactions",
        "GeminiClient(model='gemini-3.8-flash', backend='gemini', "
        "url='https://generativelanguage.googleapis.com/v1beta/models/gemini-3.8-flash', "
        "api='interactions')",
    )
