"""E14: which output a long-decode checkpoint token covers, judged per event.

Every test runs against both implementations through the ``impl`` fixture and
reads ``continuation_token`` and ``output_after_token`` after every chunking of
the same body (F7): the answer never depends on how the bytes were split.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from streams import chunkings, sse


def candidate(*parts: Any, index: int | None = None, **keys: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, **keys}
    if index is not None:
        cand["index"] = index
    return cand


def event(*candidates: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": list(candidates)}


def text(s: str) -> dict[str, Any]:
    return {"text": s}


def checkpoint(impl: ModuleType, body: bytes, api: str = "generate_content") -> tuple[Any, bool]:
    """(continuation_token, output_after_token), the same for snapshot() and close() under
    every chunking of ``body``."""
    seen = set()
    for _, pieces in chunkings(body):
        agg = impl.StreamAggregator(api=api)
        for piece in pieces:
            agg.feed(piece)
        snap = agg.snapshot()
        done = agg.close()
        seen.add((snap.continuation_token, snap.output_after_token))
        seen.add((done.continuation_token, done.output_after_token))
    assert len(seen) == 1, seen
    return seen.pop()


def test_e14_a_token_covers_the_output_of_its_own_event(impl: ModuleType) -> None:
    body = sse(event(candidate(text("one"), continuationToken="c1")))
    assert checkpoint(impl, body) == ("c1", False)


def test_e14_output_in_a_later_event_is_not_covered(impl: ModuleType) -> None:
    body = sse(
        event(candidate(text("one "), continuationToken="c1")), event(candidate(text("two")))
    )
    assert checkpoint(impl, body) == ("c1", True)


def test_e14_a_later_token_covers_the_output_before_it(impl: ModuleType) -> None:
    body = sse(
        event(candidate(text("one "), continuationToken="c1")),
        event(candidate(text("two"))),
        event(candidate(continuationToken="c2")),
    )
    assert checkpoint(impl, body) == ("c2", False)


def test_e14_without_a_token_any_output_is_after_it(impl: ModuleType) -> None:
    assert checkpoint(impl, sse(event(candidate(text("one"))))) == (None, True)
    assert checkpoint(impl, sse({"usageMetadata": {"totalTokenCount": 3}})) == (None, False)


def test_e14_every_kind_of_kept_part_is_output(impl: ModuleType) -> None:
    parts = [
        {"text": "t", "thought": True},
        {"functionCall": {"name": "f", "args": {}}},
        {"text": "", "thoughtSignature": "c2ln"},
        {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
    ]
    for part in parts:
        body = sse(event(candidate(continuationToken="c1")), event(candidate(part)))
        assert checkpoint(impl, body) == ("c1", True), part


def test_e14_dropped_parts_and_errors_are_not_output(impl: ModuleType) -> None:
    error = {"error": {"code": 500, "message": "internal", "status": "INTERNAL"}}
    body = sse(
        event(candidate(text("one"), continuationToken="c1")),
        event(candidate(text(""), {})),  # P2, P6
        event(candidate(None)),  # E7: a part that is not an object
        error,  # E8
    )
    assert checkpoint(impl, body) == ("c1", False)


def test_e14_only_candidate_0_counts(impl: ModuleType) -> None:
    body = sse(
        event(candidate(text("one"), continuationToken="c1")),
        event(candidate(text("other"), index=1)),
        event(candidate(index=1, continuationToken="c9")),
    )
    assert checkpoint(impl, body) == ("c1", False)


def test_e14_an_empty_or_non_string_token_is_no_token(impl: ModuleType) -> None:
    body = sse(
        event(candidate(text("one"), continuationToken="c1")),
        event(candidate(text("two"), continuationToken="")),
        event(candidate(continuationToken=7)),
    )
    assert checkpoint(impl, body) == ("c1", True)


def ix(kind: str, **data: Any) -> dict[str, Any]:
    return {"event_type": kind, **data}


def status(token: str) -> dict[str, Any]:
    return ix("interaction.status_update", status="in_progress", continuation_token=token)


START = ix("step.start", index=0, step={"type": "model_output"})


def delta(s: str, index: int = 0) -> dict[str, Any]:
    return ix("step.delta", index=index, delta={"type": "text", "text": s})


def test_e14_interactions_a_checkpoint_covers_the_step_events_before_it(impl: ModuleType) -> None:
    body = sse(START, delta("one "), status("c1"))
    assert checkpoint(impl, body, "interactions") == ("c1", False)


def test_e14_interactions_step_events_after_the_checkpoint_are_not_covered(
    impl: ModuleType,
) -> None:
    for later in (delta("two"), ix("step.stop", index=0), ix("step.start", index=1, step={})):
        body = sse(START, status("c1"), later)
        assert checkpoint(impl, body, "interactions") == ("c1", True), later


def test_e14_interactions_events_that_reach_no_step_are_not_output(impl: ModuleType) -> None:
    body = sse(
        START,
        ix("step.stop", index=0),
        status("c1"),
        START,  # I10: a restart is ignored
        delta("late"),  # I12: a delta after the stop is ignored
        ix("step.stop", index=0),  # already stopped
        ix("step.delta", index=0, delta={"text": "typeless"}),
    )
    assert checkpoint(impl, body, "interactions") == ("c1", False)


def test_e14_interactions_the_completed_token_counts_too(impl: ModuleType) -> None:
    done = ix(
        "interaction.completed",
        interaction={"id": "i1", "status": "requires_continuation", "continuation_token": "h1"},
    )
    body = sse(START, delta("one"), done)
    assert checkpoint(impl, body, "interactions") == ("h1", False)
    assert checkpoint(impl, sse(START, delta("one")), "interactions") == (None, True)
