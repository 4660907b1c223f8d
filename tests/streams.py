"""Helpers to turn GenerateContentResponse dicts into wire bytes and to compare results."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Sequence
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


def result_view(result: Any) -> dict[str, Any]:
    """Every public field of an AggregatedResponse, as comparable plain data."""
    return {
        "dict": as_json(result.to_dict()),
        "parts": as_json(result.parts),
        "content": as_json(result.content),
        "text": result.text,
        "thought_text": result.thought_text,
        "function_calls": as_json(result.function_calls),
        "unfinished_calls": list(result.unfinished_calls),
        "finish_reason": result.finish_reason,
        "finish_message": result.finish_message,
        "usage": as_json(result.usage),
        "model_version": result.model_version,
        "response_id": result.response_id,
        "prompt_feedback": as_json(result.prompt_feedback),
        "error": as_json(result.error),
        "complete": result.complete,
        "truncated": result.truncated,
        "warnings": list(result.warnings),
        "candidates": [
            (
                c.index,
                as_json(c.parts),
                c.text,
                c.thought_text,
                as_json(c.function_calls),
                list(c.unfinished_calls),
                c.finish_reason,
                c.finish_message,
                as_json(c.metadata),
            )
            for c in result.candidates
        ],
    }
