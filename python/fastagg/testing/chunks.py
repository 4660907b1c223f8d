"""Builders of ``GenerateContentResponse`` chunks and parts, shaped as the Gemini API sends them.

Parts: :func:`text`, :func:`thought`, :func:`call`, :func:`signature_part`.
Chunks: :func:`chunk` (any parts plus finish reason / usage), :func:`final`
(the signed empty last part), :func:`streamed_call` (a call whose arguments
arrive as Vertex ``partialArgs`` fragments), :func:`error_chunk` (an error
inside a 200 stream), :func:`malformed_call`. Signatures come from
:func:`signature`, which gives valid base64 (google-genai rejects anything else).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from .._json import JSONObject, Part

__all__ = [
    "MODEL_VERSION",
    "call",
    "chunk",
    "error_chunk",
    "final",
    "malformed_call",
    "signature",
    "signature_part",
    "streamed_call",
    "text",
    "thought",
    "usage",
]

MODEL_VERSION = "gemini-3-flash-preview"

Chunk = JSONObject  # one streamed GenerateContentResponse


def signature(seed: str) -> str:
    """A deterministic thought signature for ``seed``: standard base64 with ``+``, ``/`` and ``=``.

    The characters that a careless URL-safe re-encoding would change are always
    present, so a test comparing echoed signatures catches such a round trip.
    """
    digest = hashlib.sha256(seed.encode()).digest()
    return base64.b64encode(b"\xfb\xff\xbf" + digest[:26]).decode("ascii")


def text(value: str, *, signature: str | None = None) -> Part:
    """An answer text part (a delta: the client concatenates consecutive ones)."""
    part: Part = {"text": value}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def thought(value: str, *, signature: str | None = None) -> Part:
    """A thought summary part (``thought: true``)."""
    part: Part = {"text": value, "thought": True}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def signature_part(sig: str) -> Part:
    """The empty signed text part that ends a Gemini 3 answer: ``{"text": "", "thoughtSignature": sig}``."""
    return {"text": "", "thoughtSignature": sig}


def call(
    name: str,
    args: JSONObject | None,
    *,
    id: str | None = None,
    signature: str | None = None,
    will_continue: bool = False,
) -> Part:
    """A ``functionCall`` part (only the first call of a step carries a signature).

    ``args=None`` leaves ``args`` out; ``will_continue`` opens a streamed call
    (see :func:`streamed_call`).
    """
    fc: JSONObject = {}
    if id is not None:
        fc["id"] = id
    fc["name"] = name
    if args is not None:
        fc["args"] = args
    if will_continue:
        fc["willContinue"] = True
    part: Part = {"functionCall": fc}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def usage(prompt: int, candidates: int = 0, thoughts: int = 0) -> dict[str, int]:
    """A ``usageMetadata`` object (running totals; zero counters omitted as on the wire)."""
    meta = {"promptTokenCount": prompt}
    if candidates:
        meta["candidatesTokenCount"] = candidates
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    meta["totalTokenCount"] = prompt + candidates + thoughts
    return meta


def chunk(
    *parts: Part,
    finish_reason: str | None = None,
    finish_message: str | None = None,
    usage: JSONObject | None = None,
    response_id: str | None = None,
    model_version: str | None = MODEL_VERSION,
    continuation_token: str | None = None,
) -> Chunk:
    """One ``GenerateContentResponse`` with candidate 0 holding ``parts``.

    ``continuation_token`` (long decode) goes on the candidate: a checkpoint on
    a chunk without a finish reason, the next hop's token with ``CONTINUATION``.
    """
    candidate: JSONObject = {}
    if parts:
        candidate["content"] = {"parts": list(parts), "role": "model"}
    if finish_reason is not None:
        candidate["finishReason"] = finish_reason
    if finish_message is not None:
        candidate["finishMessage"] = finish_message
    candidate["index"] = 0
    if continuation_token is not None:
        candidate["continuationToken"] = continuation_token
    out: Chunk = {"candidates": [candidate]}
    if usage is not None:
        out["usageMetadata"] = usage
    if model_version is not None:
        out["modelVersion"] = model_version
    if response_id is not None:
        out["responseId"] = response_id
    return out


def final(
    sig: str | None = None,
    *,
    finish_reason: str = "STOP",
    usage: JSONObject | None = None,
    response_id: str | None = None,
) -> Chunk:
    """The last chunk of an answer: the finish reason, with the signed empty part when ``sig`` is given."""
    parts = (signature_part(sig),) if sig is not None else ()
    return chunk(*parts, finish_reason=finish_reason, usage=usage, response_id=response_id)


def streamed_call(
    name: str,
    args: JSONObject,
    *,
    id: str | None = None,
    signature: str | None = None,
    piece: int = 12,
    response_id: str | None = None,
) -> list[Chunk]:
    """The chunks of one call streamed with Vertex ``partialArgs`` (``streamFunctionCallArguments``).

    First a part with ``name`` and ``willContinue`` (and the signature), then one
    chunk per fragment: strings cut into ``piece``-character fragments (each with
    the per-path ``willContinue`` except the last), numbers, booleans and nulls
    whole; last the end marker ``{"functionCall": {}}``. Only flat arguments
    (str, number, bool, None) are supported.
    """
    first = call(name, None, id=id, signature=signature, will_continue=True)
    chunks = [chunk(first, response_id=response_id)]
    for key, value in args.items():
        path = f"$.{key}"
        for fragment in _fragments(path, value, piece):
            part = {"functionCall": {"partialArgs": [fragment], "willContinue": True}}
            chunks.append(chunk(part, response_id=response_id))
    chunks.append(chunk({"functionCall": {}}, response_id=response_id))
    return chunks


def _fragments(path: str, value: Any, piece: int) -> list[JSONObject]:
    if isinstance(value, str):
        pieces = [value[i : i + piece] for i in range(0, len(value), piece)] or [""]
        out = []
        for n, fragment in enumerate(pieces):
            arg: JSONObject = {"jsonPath": path, "stringValue": fragment}
            if n < len(pieces) - 1:
                arg["willContinue"] = True
            out.append(arg)
        return out
    if isinstance(value, bool):
        return [{"jsonPath": path, "boolValue": value}]
    if isinstance(value, (int, float)):
        return [{"jsonPath": path, "numberValue": value}]
    if value is None:
        return [{"jsonPath": path, "nullValue": None}]
    raise TypeError(f"streamed_call supports flat str/number/bool/None arguments, not {path}")


def error_chunk(
    code: int = 500,
    status: str = "INTERNAL",
    message: str = (
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting"
    ),
) -> Chunk:
    """An error object sent as an event inside a 200 stream (the service then closes the body)."""
    return {"error": {"code": code, "message": message, "status": status}}


def malformed_call(
    message: str = "Malformed function call: print(default_api.get_weather(city=Paris",
    *,
    usage: JSONObject | None = None,
) -> Chunk:
    """A ``MALFORMED_FUNCTION_CALL`` finish with no content, as the service sends it."""
    return chunk(finish_reason="MALFORMED_FUNCTION_CALL", finish_message=message, usage=usage)
