"""Helpers to turn GenerateContentResponse dicts into wire bytes, to run an aggregator on them,
and to compare results (shared by the rule tests in tests/rules/ and the differential tests)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any


def sse_body(chunks: Iterable[dict[str, Any]]) -> bytes:
    """Frame payloads as the service does: one `data:` line each, CRLF, blank line."""
    return b"".join(
        b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\r\n\r\n" for c in chunks
    )


def splits(body: bytes, seed: int, max_piece: int = 17) -> list[bytes]:
    """A deterministic random split of ``body`` into pieces of 1..max_piece bytes."""
    rng = random.Random(seed)
    pieces, pos = [], 0
    while pos < len(body):
        n = rng.randint(1, max_piece)
        pieces.append(body[pos : pos + n])
        pos += n
    return pieces


def chunkings(body: bytes) -> Iterator[tuple[str, Sequence[bytes]]]:
    """Whole, one byte at a time, and a few random splits (F7)."""
    yield "whole", [body]
    yield "bytewise", [body[i : i + 1] for i in range(len(body))]
    for seed in range(3):
        yield f"random{seed}", splits(body, seed)


def delta_tuple(delta: Any) -> tuple[Any, ...]:
    """A delta as (class name, fields...) so both implementations compare."""
    return (type(delta).__name__, *(getattr(delta, f) for f in delta.__match_args__))


def as_json(value: Any) -> str:
    """JSON text that keeps key order and int/float (how parts are compared)."""
    return json.dumps(value, ensure_ascii=False)


def diagnostics_view(diagnostics: Any) -> str:
    """Diagnostics field by field (X3-X5), as JSON text so that 1 and 1.0 differ."""
    return as_json([d.as_dict() for d in diagnostics])


def error_view(error: Any) -> tuple[Any, ...]:
    """A MalformedStreamError with its diagnostic field by field (X4)."""
    return (
        error.kind,
        error.offset,
        error.event_index,
        str(error),
        diagnostics_view([error.diagnostic]),
    )


def result_view(result: Any) -> dict[str, Any]:
    """Every public field of an AggregatedResponse, as comparable plain data."""
    return {
        "dict": as_json(result.to_dict()),
        "parts": as_json(result.parts),
        "content": as_json(result.content),
        "text": result.text,
        "thought_text": result.thought_text,
        "function_calls": as_json(result.function_calls),
        "unfinished_calls": as_json(result.unfinished_calls),
        "finish_reason": result.finish_reason,
        "finish_message": result.finish_message,
        "usage": as_json(result.usage),
        "model_version": result.model_version,
        "response_id": result.response_id,
        "prompt_feedback": as_json(result.prompt_feedback),
        "error": as_json(result.error),
        "continuation_token": result.continuation_token,  # E14
        "output_after_token": result.output_after_token,
        "complete": result.complete,
        "truncated": result.truncated,
        "warnings": list(result.warnings),
        "diagnostics": diagnostics_view(result.diagnostics),
        "candidates": [
            (
                c.index,
                as_json(c.parts),
                c.text,
                c.thought_text,
                as_json(c.function_calls),
                as_json(c.unfinished_calls),
                c.finish_reason,
                c.finish_message,
                as_json(c.metadata),
            )
            for c in result.candidates
        ],
    }


# --- building and running streams in the rule tests ---


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def sse(*events: Any, eol: bytes = b"\r\n") -> bytes:
    """Frame payloads (dicts or raw bytes) as SSE ``data:`` events."""
    out = b""
    for event in events:
        payload = event if isinstance(event, bytes) else dumps(event)
        out += b"data: " + payload + eol + eol
    return out


def chunk(
    *parts: Any, finish: str | None = None, index: int | None = None, **top: Any
) -> dict[str, Any]:
    """A GenerateContentResponse with one candidate holding ``parts``."""
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        cand["finishReason"] = finish
    if index is not None:
        cand["index"] = index
    return {"candidates": [cand], **top}


def fc(part_extra: dict[str, Any] | None = None, **call: Any) -> dict[str, Any]:
    """A functionCall part."""
    return {"functionCall": call, **(part_extra or {})}


def pa(path: Any, **value: Any) -> dict[str, Any]:
    """A partial arg."""
    return {"jsonPath": path, **value}


def run(impl: ModuleType, data: bytes, **kwargs: Any) -> Any:
    agg = impl.StreamAggregator(**kwargs)
    agg.feed(data)
    return agg.close()


def run_chunks(impl: ModuleType, *chunks: dict[str, Any], **kwargs: Any) -> tuple[Any, list[Any]]:
    """Feed chunks as one SSE body; return the closed result and the deltas."""
    agg = impl.StreamAggregator(**kwargs)
    deltas = agg.feed(sse(*chunks))
    return agg.close(), deltas


def view(result: Any) -> tuple[bytes, list[str], bool, bool]:
    """What two results must agree on."""
    return result.to_json(), result.warnings, result.truncated, result.complete


def feed_in_pieces(impl: ModuleType, data: bytes, size: int, **kwargs: Any) -> Any:
    agg = impl.StreamAggregator(**kwargs)
    for i in range(0, len(data), size):
        agg.feed(data[i : i + size])
    return agg.close()


HELLO = chunk({"text": "Hello"})


WORLD = chunk({"text": " world"}, finish="STOP")


def c16(index: int, length: int) -> str:
    return f"array index {index} is more than 8 past the end of an array of {length} (C16)"
