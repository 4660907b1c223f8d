"""The rule vectors of tests/vectors/*.json on the Rust extension and the twin,
under every chunking that ``cargo test`` uses too (format: tests/vectors/README.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fastagg.errors import MalformedStreamError
from streams import as_json, sse

VECTORS = Path(__file__).resolve().parent.parent / "vectors"


def load() -> list[tuple[str, bool, dict[str, Any]]]:
    """``(file: name, interactions?, vector)`` of every vector file."""
    out = []
    for path in sorted(VECTORS.glob("*.json")):
        doc = json.loads(path.read_text("utf-8"))
        interactions = doc.get("api") == "interactions"
        out += [(f"{path.name}: {v['name']}", interactions, v) for v in doc["vectors"]]
    return out


CASES = load()


def body_of(vector: dict[str, Any]) -> bytes:
    """``data: <payload>\r\n\r\n`` per event (strings verbatim), or the exact body."""
    if "events" in vector:
        return sse(*(e.encode() if isinstance(e, str) else e for e in vector["events"]))
    if "body" in vector:
        return str(vector["body"]).encode()
    return bytes.fromhex(vector["body_hex"])


def vector_chunkings(body: bytes) -> Iterator[tuple[str, Sequence[bytes]]]:
    """rust/core/tests/vectors.rs's chunkings: whole; every two-piece split (up to 512
    bytes); byte by byte (up to 4096 bytes); 7-byte pieces."""
    yield "whole", [body]
    if len(body) <= 512:
        for cut in range(1, len(body)):
            yield f"split at {cut}", [body[:cut], body[cut:]]
    if len(body) <= 4096:
        yield "bytewise", [body[i : i + 1] for i in range(len(body))]
    yield "7-byte pieces", [body[i : i + 7] for i in range(0, len(body), 7)]


def diagnostic_keys(result: Any, errors: list[Any]) -> dict[str, Any]:
    return {
        "warnings": list(result.warnings),
        "diagnostics": [d.code for d in result.diagnostics],
        "diagnostic_fields": [d.fields() for d in result.diagnostics],
        "errors": [d.code for err in errors for d in err.diagnostics],
    }


def observe(
    impl: ModuleType, interactions: bool, options: dict[str, Any], pieces: Sequence[bytes]
) -> dict[str, Any]:
    """Every ``expect`` key, as the implementation gives it."""
    api = "interactions" if interactions else "generate_content"
    agg = impl.StreamAggregator(api=api, **options)
    errors = []
    for piece in pieces:
        try:
            agg.feed(piece)
        except MalformedStreamError as err:
            errors.append(err)
    r = agg.close()
    out = {"events_seen": agg.events_seen, "bytes_seen": agg.bytes_seen}
    same = ["function_calls", "usage", "error", "text", "thought_text", "complete"]
    same += ["truncated", "unfinished_calls"]
    if interactions:
        same += ["steps", "interaction", "status", "interaction_id", "last_event_id"]
        same += ["continuation_token", "done"]
    else:
        same += ["parts", "finish_reason", "response_id", "model_version", "model_status"]
        out["candidates"] = [c.index for c in r.candidates]
        out["to_dict"] = r.to_dict()
    out.update({key: getattr(r, key) for key in same})
    out.update(diagnostic_keys(r, errors))
    return out


@pytest.mark.parametrize(("label", "interactions", "vector"), CASES, ids=[c[0] for c in CASES])
def test_vectors_hold_on_both_implementations_under_every_chunking(
    impl: ModuleType, label: str, interactions: bool, vector: dict[str, Any]
) -> None:
    body, options = body_of(vector), vector.get("options", {})
    failures = []
    for how, pieces in vector_chunkings(body):
        seen = observe(impl, interactions, options, pieces)
        for key, want in vector["expect"].items():
            # As JSON text: key order and 1 versus 1.0 matter.
            if key not in seen:
                failures.append(f"[{how}] unknown expect key {key}")
            elif as_json(seen[key]) != as_json(want):
                failures.append(f"[{how}] {key}:\n  got  {seen[key]!r}\n  want {want!r}")
    assert not failures, f"{label}\n" + "\n".join(failures[:20])


def test_vectors_exist_for_every_family_and_name_their_rule() -> None:
    assert {p.stem for p in VECTORS.glob("*.json")} >= {"framing", "events", "parts", "calls"}
    for label, _, vector in CASES:
        first = vector["name"].split("_")[0]
        assert first.upper() in vector["rules"], label
