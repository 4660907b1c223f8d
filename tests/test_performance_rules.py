"""Rules of spec/performance.md that the tests can observe (no timing)."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from types import ModuleType
from typing import Any

import pytest

from fastagg import _fastagg, reference
from proc_status import STATUS
from streams import sse_body

MIB = 1024 * 1024


def _streamed_call(megabytes: int) -> bytes:
    """One call whose ``$.content`` streams as ``megabytes`` fragments of 1 MiB."""
    head = {"functionCall": {"id": "c", "name": "write", "willContinue": True}}
    piece = {
        "functionCall": {
            "partialArgs": [{"jsonPath": "$.content", "stringValue": "x" * MIB}],
            "willContinue": True,
        }
    }
    tail = {"functionCall": {}}
    chunks = [head, *[piece] * megabytes, tail]
    return sse_body({"candidates": [{"content": {"parts": [p]}}]} for p in chunks)


def test_r2_delta_values_are_python_objects_only_once_read() -> None:
    # Python strings are allocated by Python's allocator, which tracemalloc sees
    # (the core's own buffers it does not): 4 MiB of argument held as str by
    # the deltas would show as at least 8 MiB (fragments and the finished call).
    body = _streamed_call(4)
    agg = _fastagg.StreamAggregator()
    tracemalloc.start()
    try:
        deltas = agg.feed(body)
        unread = tracemalloc.get_traced_memory()[0]
        call = next(d for d in deltas if isinstance(d, _fastagg.CallEnd)).call
        read = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert unread < MIB
    assert read - unread >= 4 * MIB
    assert len(call["args"]["content"]) == 4 * MIB


def test_r2_a_delta_value_read_twice_is_one_object() -> None:
    deltas = _fastagg.StreamAggregator().feed(_streamed_call(1))
    arg = next(d for d in deltas if isinstance(d, _fastagg.ArgDelta))
    end = next(d for d in deltas if isinstance(d, _fastagg.CallEnd))
    assert arg.value is arg.value
    assert end.call is end.call
    assert (arg.json_path, len(arg.value)) == ("$.content", MIB)
    assert end == _fastagg.CallEnd(
        0, 0, {"id": "c", "name": "write", "args": {"content": "x" * MIB}}
    )


_GIANT_WORKER = (
    """
import json, sys
import fastagg
"""
    + STATUS
    + """
def event(part):
    return b"data: " + json.dumps({"candidates": [{"content": {"parts": [part]}}]}).encode() + b"\\r\\n\\r\\n"

piece = event({"functionCall": {"partialArgs": [{"jsonPath": "$.content", "stringValue": "x" * 16384}],
                                "willContinue": True}})
head = event({"functionCall": {"id": "c", "name": "write", "willContinue": True}})
agg = fastagg.StreamAggregator(deltas=False)
base = status("VmRSS")
agg.feed(head)
for _ in range(2048):  # 32 MiB of argument
    agg.feed(piece)
agg.feed(event({"functionCall": {}}))
result = agg.close()
print(status("VmHWM") - base, len(result.parts[0]["functionCall"]["args"]["content"]))
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_r4_a_giant_argument_peaks_below_three_times_its_size() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _GIANT_WORKER], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak, size = map(int, done.stdout.split())
    assert size == 32 * MIB
    # The argument's string grows by doubling and the allocator keeps the blocks
    # it leaves behind (measured: 2.33x); a regression in how the core grows or
    # copies it shows here.
    assert peak < 3 * size


_R6_STREAM = (
    sse_body(
        [
            {
                "candidates": [{"content": {"parts": [{"text": "Hello", "thought": True}]}}],
                "modelVersion": "gemini-x",
                "responseId": "resp-1",
                "promptFeedback": {"blockReason": "NONE"},
            },
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"text": "Hello there"},
                                {"functionCall": {"name": "f", "args": {"a": 1}}},
                            ]
                        },
                        "finishReason": "STOP",
                        "finishMessage": "done here",
                    }
                ],
                "usageMetadata": {"promptTokenCount": 3},
            },
            {"error": {"code": 500, "message": "late"}},
        ]
    )
    + b"data: {bad json\r\n\r\n"
)

_R6_ACCESSORS = (
    "parts",
    "content",
    "text",
    "thought_text",
    "function_calls",
    "finish_reason",
    "finish_message",
    "usage",
    "model_version",
    "response_id",
    "prompt_feedback",
    "error",
    "warnings",
    "diagnostics",
    "candidates",
)


@pytest.mark.parametrize("name", _R6_ACCESSORS)
def test_r6_every_result_accessor_is_built_once(impl: ModuleType, name: str) -> None:
    agg = impl.StreamAggregator(strict=False)
    agg.feed(_R6_STREAM)
    result = agg.close()
    first = getattr(result, name)
    assert first is getattr(result, name)
    assert first is not None and first != "" and first != [] and first != ()


@pytest.mark.parametrize("name", ["text", "thought_text", "finish_reason", "finish_message"])
def test_r6_every_candidate_accessor_is_built_once(impl: ModuleType, name: str) -> None:
    agg = impl.StreamAggregator(strict=False)
    agg.feed(_R6_STREAM)
    candidate = agg.close().candidates[0]
    assert getattr(candidate, name) is getattr(candidate, name)
    assert getattr(candidate, name) is getattr(agg.close(), name)


def test_r6_a_text_delta_str_is_built_once(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    (delta,) = agg.feed(
        sse_body([{"candidates": [{"content": {"parts": [{"text": "Hello there"}]}}]}])
    )
    assert delta.text == "Hello there"
    assert delta.text is delta.text


def _display_body() -> bytes:
    return sse_body(
        [
            {"candidates": [{"content": {"parts": [{"text": "hm", "thought": True}]}}]},
            {
                "candidates": [
                    {"index": 1, "content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}
                ]
            },
            {
                "candidates": [
                    {
                        "content": {
                            "parts": [
                                {"functionCall": {"id": "c", "name": "f", "willContinue": True}},
                                {
                                    "functionCall": {
                                        "id": "c",
                                        "partialArgs": [{"jsonPath": "$.x", "stringValue": "v"}],
                                    }
                                },
                            ]
                        },
                        "finishReason": "STOP",
                    }
                ]
            },
            {"error": {"code": 500, "status": "INTERNAL"}},
        ]
    )


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_display_deltas_are_candidate_zero_text_call_starts_and_args(
    module: ModuleType,
) -> None:
    agg = module.StreamAggregator(deltas="display")
    deltas = agg.feed(_display_body())
    assert deltas == [
        module.TextDelta(0, 0, "hm", True),
        module.CallStart(0, 1, "c", "f"),
        module.ArgDelta(0, 1, "$.x", "v"),
    ]


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_display_leaves_the_result_as_it_is(module: ModuleType) -> None:
    shown = module.StreamAggregator(deltas="display")
    every = module.StreamAggregator()
    shown.feed(_display_body())
    every.feed(_display_body())
    assert shown.close().content == every.close().content
    assert shown.close().function_calls == [{"id": "c", "name": "f", "args": {"x": "v"}}]


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_visible_output_without_deltas(module: ModuleType) -> None:
    agg = module.StreamAggregator(deltas=False)
    body = _display_body().split(b"\r\n\r\n")
    seen = []
    for event in body:
        assert agg.feed(event + b"\r\n\r\n") == []
        seen.append(agg.visible_output)
    # a thought, then another candidate's text: not visible; candidate 0's call: visible
    assert seen == [False, False, True, True, True]


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_visible_output_for_answer_text_of_a_kept_part(module: ModuleType) -> None:
    agg = module.StreamAggregator(deltas=False)
    agg.feed(sse_body([{"candidates": [{"content": {"parts": [{"text": "a", "x": 1}]}}]}]))
    assert agg.visible_output is True


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_other_delta_names_are_refused(module: ModuleType) -> None:
    with pytest.raises(ValueError, match="deltas must be True, False or 'display', not 'all'"):
        module.StreamAggregator(deltas="all")


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_display_is_refused_for_interactions(module: ModuleType) -> None:
    with pytest.raises(ValueError, match="deltas='display' is only for api='generate_content'"):
        module.StreamAggregator(api="interactions", deltas="display")


@pytest.mark.parametrize("module", [_fastagg, reference], ids=["rust", "twin"])
def test_r5_visible_output_is_not_for_interactions(module: ModuleType) -> None:
    agg = module.StreamAggregator(api="interactions")
    with pytest.raises(TypeError, match="visible_output is only for api='generate_content'"):
        _ = agg.visible_output


def _wire() -> Any:
    from fastagg.loop.wire import GenerateContentWire
    from fastagg.request import RequestGuard

    return GenerateContentWire([], [], None, None, RequestGuard(require_signatures=False))


def test_r5_the_loop_with_a_sink_asks_for_the_displayed_deltas() -> None:
    wire = _wire()
    agg = wire.aggregator(display=True)
    deltas = agg.feed(_display_body())
    assert deltas == [
        _fastagg.TextDelta(0, 0, "hm", True),
        _fastagg.CallStart(0, 1, "c", "f"),
        _fastagg.ArgDelta(0, 1, "$.x", "v"),
    ]
    assert wire.visible(agg) is True


def test_r5_l70_the_loop_without_a_sink_asks_for_no_deltas_and_reads_the_flag() -> None:
    wire = _wire()
    agg = wire.aggregator(display=False)
    assert agg.feed(_display_body()) == []
    assert wire.visible(agg) is True  # candidate 0's call part (R5's visible_output)
