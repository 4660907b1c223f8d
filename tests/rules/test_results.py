"""Results and the API around them (D1-D8): deltas, snapshot, close, feed_event, feed_chunk.

Every test runs against both implementations through the ``impl`` fixture
(the Rust module ``fastagg._fastagg`` and the pure-Python ``fastagg.reference``)
and uses only the public API.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from types import ModuleType
from typing import Any

import pytest

from fastagg.errors import AggregatorClosed, MalformedStreamError
from streams import HELLO, WORLD, as_json, c16, chunk, dumps, fc, pa, run_chunks, sse


def test_deltas_for_a_mixed_stream(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    deltas = agg.feed(
        sse(
            chunk({"text": "hmm", "thought": True}),
            chunk(
                fc(
                    {"thoughtSignature": "cw=="},
                    id="w1",
                    name="write",
                    willContinue=True,
                )
            ),
            chunk(
                fc(
                    id="w1",
                    partialArgs=[
                        pa("$.path", stringValue="a.txt"),
                        pa("$.n", numberValue=2),
                    ],
                    willContinue=True,
                )
            ),
            chunk({"text": "ok"}, fc(id="w1")),
            chunk(fc(name="done", args={}), finish="STOP"),
        )
    )
    assert deltas == [
        impl.TextDelta(0, 0, "hmm", True),
        impl.CallStart(0, 1, "w1", "write"),
        impl.ArgDelta(0, 1, "$.path", "a.txt"),
        impl.ArgDelta(0, 1, "$.n", 2),
        impl.TextDelta(0, 2, "ok", False),
        impl.CallEnd(0, 1, {"id": "w1", "name": "write", "args": {"path": "a.txt", "n": 2}}),
        impl.CallStart(0, 3, None, "done"),
        impl.CallEnd(0, 3, {"id": None, "name": "done", "args": {}}),
        impl.Finish(0, "STOP"),
    ]


def test_d1_deltas_are_frozen_hashable_and_matchable(impl: ModuleType) -> None:
    delta = impl.TextDelta(0, 1, "x", False)
    assert delta == impl.TextDelta(candidate=0, index=1, text="x", thought=False)
    assert hash(delta) == hash(impl.TextDelta(0, 1, "x", False))
    assert delta != impl.TextDelta(0, 1, "x", True)
    with pytest.raises(AttributeError):
        delta.text = "y"  # type: ignore[misc]
    match impl.ArgDelta(0, 2, "$.a", 3):
        case impl.ArgDelta(c, i, path, value):
            assert (c, i, path, value) == (0, 2, "$.a", 3)
    assert impl.CallStart.__match_args__ == ("candidate", "index", "id", "name")
    assert impl.CallEnd.__match_args__ == ("candidate", "index", "call")
    assert impl.Finish.__match_args__ == ("candidate", "reason")
    assert impl.StreamError.__match_args__ == ("error",)


def test_deltas_false_returns_nothing_but_aggregates(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(deltas=False)
    assert agg.feed(sse(HELLO, WORLD)) == []
    assert agg.feed_chunk(chunk({"text": "!"})) == []
    with pytest.raises(MalformedStreamError) as info:
        agg.feed(sse(HELLO) + b"data: x\n\n")
    assert info.value.deltas == []
    assert agg.close().text == "Hello world!Hello"


def test_snapshot_mid_stream_renders_open_calls_in_place(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(
        sse(
            chunk({"text": "a"}),
            chunk(fc({"thoughtSignature": "cw=="}, name="f", willContinue=True)),
            chunk(fc(partialArgs=[pa("$.s", stringValue="pa")], willContinue=True)),
            chunk({"text": "b"}),
        )
    )
    snap = agg.snapshot()
    expected = [
        {"text": "a"},
        {
            "functionCall": {"name": "f", "args": {"s": "pa"}},
            "thoughtSignature": "cw==",
        },
        {"text": "b"},
    ]
    assert as_json(snap.parts) == as_json(expected)
    assert snap.complete is False
    # C13: the open call is not one to run yet; it is shown with its arguments so far.
    assert snap.function_calls == []
    assert snap.unfinished_calls == [{"id": None, "name": "f", "args": {"s": "pa"}, "part": 1}]
    # Mutating a snapshot does not reach the aggregator.
    snap.parts[1]["functionCall"]["args"]["s"] = "changed"
    snap.parts.append({"text": "junk"})
    agg.snapshot().to_dict()["candidates"][0]["content"]["parts"].clear()
    agg.feed(sse(chunk(fc(partialArgs=[pa("$.s", stringValue="rt")]), finish="STOP")))
    result = agg.close()
    assert as_json(result.parts) == as_json(
        [
            {"text": "a"},
            {
                "functionCall": {"name": "f", "args": {"s": "part"}},
                "thoughtSignature": "cw==",
            },
            {"text": "b"},
        ]
    )
    assert result.complete is True


def test_snapshot_copies_kept_parts(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(chunk({"inlineData": {"mimeType": "a/b", "data": "AA=="}})))
    agg.snapshot().parts[0]["inlineData"]["data"] = "changed"
    assert agg.close().parts == [{"inlineData": {"mimeType": "a/b", "data": "AA=="}}]


def test_d3_close_twice_and_feed_after_close(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(HELLO) + b"data: {")
    first = agg.close()
    second = agg.close()
    assert second.to_json() == first.to_json()
    assert (
        second.warnings
        == first.warnings
        == [
            f"the stream ended inside an incomplete event at byte {len(sse(HELLO))}; it was dropped and the result is marked truncated"
        ]
    )
    assert second.truncated is True
    with pytest.raises(AggregatorClosed):
        agg.feed(b"data: {}\n\n")
    with pytest.raises(AggregatorClosed):
        agg.feed_event(b"{}")
    with pytest.raises(AggregatorClosed):
        agg.feed_chunk({})


def test_d3_feed_event_counts_and_offsets(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    first = dumps(HELLO)
    assert agg.feed_event(first) == [impl.TextDelta(0, 0, "Hello", False)]
    assert agg.feed_event(dumps(WORLD).decode()) == [
        impl.TextDelta(0, 0, " world", False),
        impl.Finish(0, "STOP"),
    ]
    assert (agg.events_seen, agg.bytes_seen) == (2, len(first) + len(dumps(WORLD)))
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event("caf\u00e9")
    assert (info.value.kind, info.value.offset, info.value.event_index) == (
        "invalid-json",
        agg.bytes_seen - 5,
        2,
    )
    assert info.value.deltas == []
    assert info.value.errors == [info.value]
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event(b'{"a": "\xc3"}')
    assert info.value.kind == "invalid-utf8"
    assert agg.events_seen == 4
    assert agg.close().text == "Hello world"


def test_d3_feed_event_size_limit(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(max_event_bytes=5)
    with pytest.raises(MalformedStreamError) as info:
        agg.feed_event(b'{"a": 1}')
    assert info.value.kind == "event-too-large"
    assert str(info.value) == (
        "event 0 at byte 0 is larger than max_event_bytes (5); it was skipped "
        "(raise max_event_bytes if such events are expected)"
    )


def test_d3_feed_chunk_with_a_dict(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    part = {"text": "", "thoughtSignature": b"\xfb\xff\x00"}
    given = chunk({"text": "hi"}, part, finish="STOP")
    assert agg.feed_chunk(given) == [
        impl.TextDelta(0, 0, "hi", False),
        impl.Finish(0, "STOP"),
    ]
    given["candidates"][0]["content"]["parts"][0]["text"] = "mutated by the caller"
    result = agg.close()
    assert result.parts == [{"text": "hi"}, {"text": "", "thoughtSignature": "+/8A"}]
    assert agg.events_seen == 1
    assert agg.bytes_seen == 0


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"candidates": [{"x": object()}]}, TypeError),
        ({"usageMetadata": {"n": float("nan")}}, ValueError),
        ({"usageMetadata": {"n": float("inf")}}, ValueError),
        ({1: "x"}, TypeError),
        ({"candidates": {1, 2}}, TypeError),
    ],
)
def test_d3_feed_chunk_rejects_non_json_values(
    impl: ModuleType, bad: Any, error: type[Exception]
) -> None:
    agg = impl.StreamAggregator()
    with pytest.raises(error):
        agg.feed_chunk(bad)
    assert agg.events_seen == 0


def test_d3_feed_chunk_with_a_genai_response(impl: ModuleType) -> None:
    types = pytest.importorskip("google.genai.types")
    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(
                    role="model",
                    parts=[
                        types.Part(text="Hi", thought=True),
                        types.Part(
                            function_call=types.FunctionCall(id="c1", name="f", args={"a": 1}),
                            thought_signature=b"\xfb\xef\xbe",
                        ),
                    ],
                ),
                finish_reason=types.FinishReason.STOP,
                index=0,
            )
        ],
        model_version="gemini-3-flash-preview",
    )
    agg = impl.StreamAggregator()
    deltas = agg.feed_chunk(response)
    call = {"id": "c1", "name": "f", "args": {"a": 1}}
    assert deltas == [
        impl.TextDelta(0, 0, "Hi", True),
        impl.CallStart(0, 1, "c1", "f"),
        impl.CallEnd(0, 1, call),
        impl.Finish(0, "STOP"),
    ]
    result = agg.close()
    assert as_json(result.parts) == as_json(
        [
            {"text": "Hi", "thought": True},
            {
                "functionCall": {"id": "c1", "args": {"a": 1}, "name": "f"},
                "thoughtSignature": "++++",
            },
        ]
    )
    assert result.model_version == "gemini-3-flash-preview"
    assert result.complete is True


def test_d2_to_dict_to_json_and_to_genai(impl: ModuleType) -> None:
    result, _ = run_chunks(
        impl,
        {
            **chunk({"text": "A"}, finish="STOP"),
            "usageMetadata": {"totalTokenCount": 2},
            "modelVersion": "m",
            "responseId": "r",
        },
    )
    expected = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "A"}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"totalTokenCount": 2},
        "modelVersion": "m",
        "responseId": "r",
    }
    assert as_json(result.to_dict()) == as_json(expected)
    assert result.to_json() == dumps(expected)
    result.to_dict()["candidates"].clear()
    assert len(result.candidates) == 1
    pytest.importorskip("google.genai")
    genai = result.to_genai()
    assert genai.text == "A"
    assert genai.candidates[0].finish_reason == "STOP"


def test_d3_options_must_be_non_negative_ints(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"^max_event_bytes must not be negative, got -1$"):
        impl.StreamAggregator(max_event_bytes=-1)
    with pytest.raises(TypeError, match=r"^max_event_bytes must be an int, got bool$"):
        impl.StreamAggregator(max_event_bytes=True)
    with pytest.raises(TypeError, match=r"^max_array_index must be an int, got float$"):
        impl.StreamAggregator(max_array_index=1.5)


@pytest.mark.parametrize(
    ("name", "value", "cap"),
    [
        ("max_array_index", 2**64 - 1, 2**31 - 1),
        ("max_array_index", 10**12, 2**31 - 1),
        ("max_array_index", 2**31, 2**31 - 1),
        ("max_event_bytes", 10**40, 2**63 - 1),
        ("max_event_bytes", 2**63, 2**63 - 1),
    ],
)
def test_d2b_limits_above_their_cap_are_a_value_error(
    impl: ModuleType, name: str, value: int, cap: int
) -> None:
    with pytest.raises(ValueError) as info:
        impl.StreamAggregator(**{name: value})
    assert type(info.value) is ValueError
    assert str(info.value) == f"{name} must be at most {cap}, got {value}"


def test_d2b_largest_max_array_index_keeps_existing_values_on_a_refused_write(
    impl: ModuleType,
) -> None:
    cap = 2**31 - 1
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[
                    pa("$.a[1]", numberValue=7),
                    pa(f"$.a[{cap}]", numberValue=1),
                    pa(f"$.b[{cap}]", numberValue=1),
                ],
            )
        ),
        max_array_index=cap,
        max_event_bytes=2**63 - 1,
    )
    assert result.function_calls[0]["args"] == {"a": [None, 7]}
    assert result.warnings == [
        f'candidate 0, part 0: partial arg at "$.a[{cap}]" skipped: {c16(cap, 2)}',
        f'candidate 0, part 0: partial arg at "$.b[{cap}]" skipped: {c16(cap, 0)}',
    ]


_DEEP_WORKER = """
import sys, threading
from importlib import import_module
impl = import_module(sys.argv[1])
stack = int(sys.argv[2])
depth = 1024 - 3  # the payload's object, candidates list and candidate come first
deep = "[" * depth + "]" * depth
payload = '{"candidates":[{"deep":' + deep + ',"finishReason":"STOP"}]}'
out = []

def work():
    agg = impl.StreamAggregator()
    agg.feed(b"data: " + payload.encode() + b"\\n\\n")
    snap = agg.snapshot()
    result = agg.close()
    for response in (snap, result):
        node, n = response.candidates[0].metadata["deep"], 1
        while node:
            node, n = node[0], n + 1
        out.append(n)

threading.stack_size(stack)
t = threading.Thread(target=work)
t.start()
t.join()
print(out)
"""


@pytest.mark.parametrize("stack_kib", [128, 256])
def test_d6_deepest_value_converts_in_a_thread_with_a_small_stack(
    impl: ModuleType, stack_kib: int
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _DEEP_WORKER, impl.__name__, str(stack_kib * 1024)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[1021, 1021]"), done.stderr[-2000:]


def test_d2c_very_deep_chunk_is_a_value_error(impl: ModuleType) -> None:
    deep: list[object] = []
    for _ in range(10**5):
        deep = [deep]
    agg = impl.StreamAggregator()
    with pytest.raises(
        ValueError, match=r"^feed_chunk\(\): the chunk is nested deeper than"
    ) as info:
        agg.feed_chunk({"x": deep})
    assert type(info.value) is ValueError
    assert agg.feed_chunk(chunk({"text": "still usable"})) == [
        impl.TextDelta(0, 0, "still usable", False)
    ]


def test_d2c_chunk_deeper_than_1024_levels_is_refused_by_both(impl: ModuleType) -> None:
    deep: dict[str, object] = {}
    for _ in range(1023):
        deep = {"a": deep}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        with pytest.raises(ValueError, match=r"is nested deeper than 1024 levels$"):
            impl.StreamAggregator().feed_chunk({"x": deep})
        ok = impl.StreamAggregator()
        ok.feed_chunk({"x": deep["a"]})
        assert ok.events_seen == 1
    finally:
        sys.setrecursionlimit(limit)


def test_d5_finish_returns_the_deltas_of_the_end_of_the_stream(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    body = sse(
        chunk(fc(id="c", name="f", willContinue=True, partialArgs=[pa("$.a", numberValue=1)]))
    )
    tail = b'data: {"candidates":[{"content":{"parts":[{"text":"last words"}]},"finishReason":"STOP"}]}'
    assert agg.feed(body + tail) == [
        impl.CallStart(0, 0, "c", "f"),
        impl.ArgDelta(0, 0, "$.a", 1),
    ]
    # The open call it flushes gives no CallEnd: the model never finished it (C13).
    assert agg.finish() == [
        impl.TextDelta(0, 1, "last words", False),
        impl.Finish(0, "STOP"),
    ]
    assert agg.finish() == []
    with pytest.raises(AggregatorClosed):
        agg.feed(b"data: {}\n\n")
    result = agg.close()
    assert result.text == "last words"
    assert result.warnings == [
        f"the stream ended inside an unterminated event at byte {len(body)}; it was complete JSON and was processed"
    ]
    assert agg.close() is result


def test_d5_finish_without_deltas_and_close_without_finish(impl: ModuleType) -> None:
    tail = b'data: {"candidates":[{"content":{"parts":[{"text":"x"}]}}]}'
    quiet = impl.StreamAggregator(deltas=False)
    quiet.feed(tail)
    assert quiet.finish() == []
    plain = impl.StreamAggregator()
    plain.feed(tail)
    assert plain.close().text == quiet.close().text == "x"


def test_d7_at_most_1000_warnings_are_kept_and_the_others_counted(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(strict=False)
    first = sse(chunk({"text": "a"}))
    agg.feed(first + b"data: x\n\n" * 1500 + sse(chunk({"text": "b"})))
    result = agg.close()
    assert len(result.warnings) == 1001
    assert result.warnings[999] == (
        f"event 1000 at byte {len(first) + 9 * 999} is not valid JSON; it was skipped "
        "(is this the body of a streamGenerateContent response?)"
    )
    assert result.warnings[1000] == "500 more warnings were not kept (at most 1000 are)"
    assert result.text == "ab"
    assert agg.events_seen == 1502


def test_d8_feeding_from_a_second_thread_is_a_clear_error(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(chunk({"text": "a"})))
    errors: list[BaseException] = []

    def other() -> None:
        for call in (
            lambda: agg.feed(sse(chunk({"text": "b"}))),
            lambda: agg.feed_event(b'{"candidates":[]}'),
            lambda: agg.feed_chunk({"candidates": []}),
        ):
            try:
                call()
            except RuntimeError as exc:
                errors.append(exc)
        errors.append(AssertionError(agg.snapshot().text))  # reading is fine

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert [str(e) for e in errors[:3]] == [
        "this StreamAggregator was fed from another thread first; an aggregator is fed from "
        "one thread (chunks from two threads would interleave): use one aggregator per stream"
    ] * 3
    assert str(errors[3]) == "a"
    agg.feed(sse(chunk({"text": "c"})))
    assert agg.close().text == "ac"


def test_d2a_feed_chunk_reads_big_ints_as_floats_and_enums_as_their_value(
    impl: ModuleType,
) -> None:
    import enum

    class Reason(enum.Enum):
        STOP = "STOP"

    agg = impl.StreamAggregator()
    agg.feed_chunk(
        {
            "candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": Reason.STOP}],
            "usageMetadata": {"big": 2**70, "small": 2**63 - 1},
        }
    )
    result = agg.close()
    assert result.finish_reason == "STOP"
    assert result.usage == {"big": float(2**70), "small": 2**63 - 1}
    assert type(result.usage["big"]) is float


def test_d3a_results_are_built_once_and_to_dict_is_fresh(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(sse(chunk(fc(id="c1", name="f", args={"a": [1, 2]}), finish="STOP")))
    result = agg.close()
    assert agg.close() is result
    assert result.parts is result.parts
    assert result.content["parts"] is result.parts
    assert result.usage is result.usage
    assert result.function_calls is result.function_calls
    assert result.function_calls[0]["args"] == {"a": [1, 2]}
    first, second = result.to_dict(), result.to_dict()
    assert first == second
    assert first is not second
    assert first["candidates"][0]["content"]["parts"] is not result.parts


@pytest.mark.parametrize("api", ["generate_content", "interactions"])
def test_d8_hand_over_lets_the_next_feed_come_from_another_thread(
    impl: ModuleType, api: str
) -> None:
    # A reader whose feeds hop threads one after another (a sync iterator read from a
    # thread pool, as Starlette serves one) hands the aggregator over before each hop.
    agg = impl.StreamAggregator(api=api)
    if api == "generate_content":
        first, second, third = (sse(chunk({"text": t})) for t in "abc")
    else:
        first = b'data: {"event_type":"interaction.created","interaction":{"id":"i1"}}\n\n'
        first += b'data: {"event_type":"step.start","index":0,"step":{"type":"model_output"}}\n\n'
        second, third = (
            b'data: {"event_type":"step.delta","index":0,"delta":{"type":"text","text":"%s"}}\n\n'
            % t
            for t in (b"b", b"c")
        )
    agg.feed(first)
    outcome: list[str] = []

    def other() -> None:
        try:
            agg.feed(second)
        except RuntimeError as exc:
            outcome.append(f"refused: {exc}")
        agg.hand_over()
        agg.feed(second)  # this thread owns it now
        outcome.append("fed")

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert outcome == [f"refused: {SECOND_FEEDER}", "fed"]
    with pytest.raises(RuntimeError, match="fed from another thread first"):
        agg.feed(third)  # the worker owns it: the first thread is the second feeder now
    agg.hand_over()
    agg.feed(third)
    assert agg.close().text == ("abc" if api == "generate_content" else "bc")


SECOND_FEEDER = (
    "this StreamAggregator was fed from another thread first; an aggregator is fed from "
    "one thread (chunks from two threads would interleave): use one aggregator per stream"
)
