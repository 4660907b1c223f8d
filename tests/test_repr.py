"""How results, deltas, events and turn results print (spec/api.md "Readable objects", V1-V5):
like a dataclass, the same from the compiled core and the twin, short for large payloads."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import orjson

from fastagg.events import AnswerDelta, Lifecycle, StepEnd, ToolCallStart, TurnEnd
from fastagg.limits import StopReason, TurnResult
from fastagg.testing import call, chunk, signature, streamed_call, text, usage

ROOT = Path(__file__).resolve().parent.parent
WEATHER = (ROOT / "examples" / "data" / "weather.sse").read_bytes()
THOUGHT = "'**Checking the forecast**\\n\\nThe user wants the weather in Par...' (89 chars)"
CALL = "{'id': 't8k2m1qz', 'name': 'get_weather', 'args': {'city': 'Paris', 'unit': 'celsius'}}"


def sse(*chunks: object) -> bytes:
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def test_v1_deltas_print_like_dataclasses_the_same_from_both(impl: ModuleType) -> None:
    deltas = impl.StreamAggregator().feed(WEATHER)
    assert [repr(d) for d in deltas] == [
        f"TextDelta(candidate=0, index=0, text={THOUGHT}, thought=True)",
        "TextDelta(candidate=0, index=1, text='Let me check ', thought=False)",
        "TextDelta(candidate=0, index=1, text='the weather in Paris.', thought=False)",
        "CallStart(candidate=0, index=2, id='t8k2m1qz', name='get_weather')",
        f"CallEnd(candidate=0, index=2, call={CALL})",
        "Finish(candidate=0, reason='STOP')",
    ]


def test_v3_a_result_shows_the_answer_first(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed(WEATHER)
    result = agg.close()
    assert repr(result) == (
        "AggregatedResponse(text='Let me check the weather in Paris.', "
        f"thought_text={THOUGHT}, function_calls=[{CALL}], finish_reason='STOP', "
        "complete=True, usage={'promptTokenCount': 61, 'thoughtsTokenCount': 90, "
        "'totalTokenCount': 168, 'candidatesTokenCount': 17}, parts=[...] (3 items))"
    )
    assert repr(result.candidates[0]) == (
        "Candidate(index=0, text='Let me check the weather in Paris.', "
        f"thought_text={THOUGHT}, function_calls=[{CALL}], finish_reason='STOP', "
        "parts=[...] (3 items))"
    )


def test_v3_an_empty_result_prints_its_plain_fields(impl: ModuleType) -> None:
    assert repr(impl.StreamAggregator().close()) == (
        "AggregatedResponse(text='', function_calls=[], finish_reason=None, complete=False, "
        "parts=[])"
    )


def test_v3_a_cut_off_stream_shows_the_unfinished_call_and_the_truncation(
    impl: ModuleType,
) -> None:
    agg = impl.StreamAggregator()
    body = sse(*streamed_call("save_note", {"title": "Picnic"}, id="n1")[:2])
    agg.feed(body + b'data: {"candidates": [')
    result = agg.close()
    (warning,) = result.warnings  # its text is aggregation.md's; shown as V2 cuts it
    assert len(warning) > 60
    assert repr(result) == (
        "AggregatedResponse(text='', function_calls=[], unfinished_calls=[{'id': 'n1', "
        "'name': 'save_note', 'args': {'title': 'Picnic'}, 'part': 0}], finish_reason=None, "
        f"complete=False, truncated=True, warnings=[{warning[:60] + '...'!r} "
        f"({len(warning)} chars)], parts=[...] (1 item))"
    )


def test_v2_a_megabyte_argument_prints_in_a_few_hundred_characters(impl: ModuleType) -> None:
    body = "x" * 1_000_000
    args = {"body": body, "tags": list(range(100)), "deep": {"a": {"b": {"c": {"d": 1}}}}}
    agg = impl.StreamAggregator()
    deltas = agg.feed(
        sse(
            chunk(
                text("Saving."),
                call("save_note", args, id="n1", signature=signature("v2")),
                finish_reason="STOP",
                usage=usage(10, 5),
            )
        )
    )
    shown_args = (
        "{'body': '" + "x" * 60 + "...' (1000000 chars), "
        "'tags': [0, 1, 2, 3, 4, 5, 6, 7, ...] (100 items), 'deep': {'a': %s}}"
    )
    # nested more than 4 deep (the field's own value is depth 0): only the size
    deeper, cut = "{'b': {...} (1 key)}", "{...} (1 key)"
    assert repr(deltas[2]) == (
        "CallEnd(candidate=0, index=1, call={'id': 'n1', 'name': 'save_note', "
        f"'args': {shown_args % deeper}}})"
    )
    result = agg.close()
    assert repr(result) == (
        "AggregatedResponse(text='Saving.', function_calls=[{'id': 'n1', 'name': 'save_note', "
        f"'args': {shown_args % cut}}}], finish_reason='STOP', complete=True, "
        "usage={'promptTokenCount': 10, 'candidatesTokenCount': 5, 'totalTokenCount': 15}, "
        "parts=[...] (2 items))"
    )


def test_v2_one_repr_shows_at_most_50_entries_first_fields_first() -> None:
    args = {f"k{i}": list(range(8)) for i in range(8)}
    shown = repr(ToolCallStart(step=1, index=0, id=None, name="f", args=args))
    # 1 + 8 entries per key: the budget of 50 runs out in the sixth key's list
    assert shown == (
        "ToolCallStart(step=1, index=0, id=None, name='f', args={"
        + ", ".join(f"'k{i}': [0, 1, 2, 3, 4, 5, 6, 7]" for i in range(5))
        + ", 'k5': [0, 1, 2, 3, ...] (8 items), ...} (8 keys))"
    )


def test_v3_an_interaction_shows_its_id_status_and_answer(impl: ModuleType) -> None:
    agg = impl.StreamAggregator(api="interactions")
    assert repr(agg.close()) == (
        "InteractionResponse(id=None, status=None, text='', function_calls=[], "
        "complete=False, steps=[])"
    )


def test_v4_turn_events_print_every_field_shortened() -> None:
    assert repr(AnswerDelta(step=1, text="Hel")) == "AnswerDelta(step=1, text='Hel')"
    assert repr(StepEnd(1, 2, None, {}, "no-finish")) == (
        "StepEnd(step=1, attempt=2, raw_finish_reason=None, usage={}, outcome='no-finish')"
    )
    assert repr(Lifecycle("no-finish-retry", 2, 10, None, 2, 0.5, "gemini", 1.0, "x" * 61)) == (
        "Lifecycle(phase='no-finish-retry', step=2, max_steps=10, tool_name=None, "
        "tool_call_count=2, elapsed=0.5, provider='gemini', timestamp=1.0, "
        "detail='" + "x" * 60 + "...' (61 chars))"
    )


def turn_result(**changes: object) -> TurnResult:
    fields: dict[str, object] = {
        "stop_reason": StopReason.COMPLETED,
        "finish_reason": "stop",
        "raw_finish_reason": "STOP",
        "text": "Paris.",
        "message": None,
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}] * 7,
        "steps_used": 3,
        "tool_call_count": 3,
        "elapsed": 0.25,
        "usage": {"totalTokenCount": 9},
        "retries": {"malformed": 0, "no_finish": 2, "provider": 0},
        "error": None,
        "signatures": {"stripped": 0, "sentinels": 0},
    }
    fields.update(changes)
    return TurnResult(**fields)  # type: ignore[arg-type]


def test_v5_a_turn_result_says_why_the_turn_ended_first() -> None:
    assert repr(turn_result()) == (
        "TurnResult(stop_reason=StopReason.COMPLETED, text='Paris.', finish_reason='stop', "
        "raw_finish_reason='STOP', steps_used=3, tool_call_count=3, elapsed=0.25, "
        "usage={'totalTokenCount': 9}, retries={'no_finish': 2}, contents=[...] (7 items))"
    )
    result = turn_result(
        stop_reason=StopReason.STEP_CAP,
        message="The step limit was reached.",
        signatures={"stripped": 1, "sentinels": 0},
        retries={"malformed": 0},
        hops=2,
    )
    assert repr(TurnEnd(result)) == (
        "TurnEnd(result=TurnResult(stop_reason=StopReason.STEP_CAP, text='Paris.', "
        "message='The step limit was reached.', finish_reason='stop', raw_finish_reason='STOP', "
        "steps_used=3, tool_call_count=3, elapsed=0.25, usage={'totalTokenCount': 9}, "
        "signatures={'stripped': 1, 'sentinels': 0}, hops=2, contents=[...] (7 items)))"
    )
