"""Request validation as the Gemini service does it, with the service's 400 texts.

Texts are those reported from the live service (gemini-wire.md 1.4, 4.8, 6.2).
The fake is never stricter than the service (turn-loop addendum S5): what the
service is not known to refuse is a warning in the request log, not a 400 (a
function response whose id or name differs from its call); a function response
without an id is accepted (google-genai's automatic function calling sends
that); Gemini 1.x and 2.x requests need no signatures. Only when the server
knows which signatures it issued does it refuse one it never issued, as the
service does ("Corrupted thought signature.").
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from .._json import Content, JSONObject, Part
from ..signatures import requires_signatures

__all__ = [
    "MSG_CORRUPTED_SIGNATURE",
    "MSG_FC_RESPONSE_COUNT",
    "MSG_FR_AFTER_FC",
    "MSG_MULTI_TURN_END",
    "MSG_NO_CONTENTS",
    "MSG_ROLE",
    "MSG_SINGLE_TURN_END",
    "SENTINEL_SIGNATURES",
    "Rejection",
    "decode_signature",
    "missing_signature_message",
    "validate_request",
]

MSG_NO_CONTENTS = "* GenerateContentRequest.contents: contents is not specified"
MSG_ROLE = "Please use a valid role: user, model."
MSG_MULTI_TURN_END = (
    "Please ensure that multiturn requests ends with a user role or a function response."
)
MSG_SINGLE_TURN_END = (
    "Please ensure that single turn requests end with a user role or the role field is empty."
)
MSG_FC_RESPONSE_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
MSG_FR_AFTER_FC = (
    "Please ensure that function response turn comes immediately after a function call turn."
)
MSG_CORRUPTED_SIGNATURE = "Corrupted thought signature."

#: Values that switch the signature check off for injected calls (gemini-wire.md 4.9).
SENTINEL_SIGNATURES = frozenset(
    {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}
)
_SENTINEL_BYTES = frozenset(s.encode() for s in SENTINEL_SIGNATURES)


def missing_signature_message(name: str, position: int) -> str:
    """The Gemini API's 400 text for a step whose first function call lacks its signature."""
    return (
        "Function call is missing a thought_signature in functionCall parts. This is required "
        "for tools to work correctly, and missing thought_signature may lead to degraded model "
        f"performance. Additional data, function call `default_api:{name}` , position "
        f"{position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "
        "for more details."
    )


@dataclass(frozen=True)
class Rejection:
    """Why a request was refused: the 400 message and the offending place."""

    message: str
    where: str
    status: str = "INVALID_ARGUMENT"
    code: int = 400

    def body(self) -> JSONObject:
        """The google.rpc.Status error body the service answers with."""
        return {"error": {"code": self.code, "message": self.message, "status": self.status}}


def decode_signature(sig: str) -> bytes | None:
    """The bytes of a base64 signature (standard or URL-safe alphabet, padding optional), or None."""
    if not isinstance(sig, str):
        return None
    text = sig.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _get(obj: JSONObject, camel: str, snake: str) -> Any:
    # The proto JSON parser accepts both spellings; google-genai sends a mix.
    return obj[camel] if camel in obj else obj.get(snake)


def _parts(content: Content) -> list[Part]:
    parts = content.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _role(content: Content) -> str:
    role = content.get("role")
    return role if isinstance(role, str) and role else "user"


def validate_request(
    body: Any,
    *,
    known_signatures: Collection[bytes] | None = None,
    model: str | None = None,
    warnings: list[str] | None = None,
) -> Rejection | None:
    """Check a ``GenerateContentRequest`` the way the service does; None when it is acceptable.

    Checked, in this order: contents present; roles ``user``/``model``; base64
    signatures (and, with ``known_signatures``, that each one was issued);
    function responses right after their calls, as many, in the same order
    (ids and names match where given); the request ends with a user turn; in
    the current turn (after the last user content without function responses)
    the first function call of every model step carries a signature, unless
    ``model`` is a Gemini 1.x/2.x model. A step is a run of consecutive model
    contents (google-genai's chat stores one model content per streamed chunk).
    A function response whose id or name differs from its call is accepted and
    described in ``warnings`` (when a list is given).
    """
    contents = body.get("contents") if isinstance(body, dict) else None
    if not isinstance(contents, list) or not contents:
        return Rejection(MSG_NO_CONTENTS, "contents")
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or _role(content) not in ("user", "model"):
            return Rejection(MSG_ROLE, f"contents[{i}].role")
    rejection = _check_signatures(contents, known_signatures)
    if rejection is None:
        rejection = _check_responses(contents, warnings if warnings is not None else [])
    if rejection is None and _role(contents[-1]) != "user":
        message = MSG_SINGLE_TURN_END if len(contents) == 1 else MSG_MULTI_TURN_END
        rejection = Rejection(message, f"contents[{len(contents) - 1}].role")
    if rejection is None and (model is None or requires_signatures(model)):
        rejection = _check_current_turn(contents)
    return rejection


def _check_signatures(contents: list[Content], known: Collection[bytes] | None) -> Rejection | None:
    for i, content in enumerate(contents):
        for j, part in enumerate(_parts(content)):
            sig = _get(part, "thoughtSignature", "thought_signature")
            if sig is None:
                continue
            raw = decode_signature(sig)
            if raw is None:
                return Rejection(
                    f"Invalid value at 'contents[{i}].parts[{j}].thought_signature' (TYPE_BYTES), "
                    f'Base64 decoding failed for "{sig}"',
                    f"contents[{i}].parts[{j}].thoughtSignature",
                )
            if known is not None and raw not in known and not _is_sentinel(sig, raw):
                return Rejection(
                    MSG_CORRUPTED_SIGNATURE, f"contents[{i}].parts[{j}].thoughtSignature"
                )
    return None


def _is_sentinel(sig: str, raw: bytes) -> bool:
    return sig in SENTINEL_SIGNATURES or raw in _SENTINEL_BYTES


# S3: a step is a run of consecutive model contents, as google-genai chat stores history
def _steps(contents: list[Content]) -> list[tuple[int, int]]:
    """(first, end) index ranges of runs of consecutive model contents."""
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(contents):
        if _role(contents[i]) == "model":
            j = i
            while j < len(contents) and _role(contents[j]) == "model":
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _calls(contents: list[Content], first: int, end: int) -> list[tuple[int, int, Any]]:
    return [
        (i, j, _get(part, "functionCall", "function_call"))
        for i in range(first, end)
        for j, part in enumerate(_parts(contents[i]))
        if _get(part, "functionCall", "function_call") is not None
    ]


def _check_responses(contents: list[Content], warnings: list[str]) -> Rejection | None:
    answered: set[int] = set()
    for first, end in _steps(contents):
        calls = _calls(contents, first, end)
        if not calls or end >= len(contents):
            continue
        answered.add(end)
        responses = [
            (j, _get(part, "functionResponse", "function_response"))
            for j, part in enumerate(_parts(contents[end]))
            if _get(part, "functionResponse", "function_response") is not None
        ]
        if len(responses) != len(calls):
            return Rejection(MSG_FC_RESPONSE_COUNT, f"contents[{end}]")
        for n, ((ci, cj, fc), (rj, fr)) in enumerate(zip(calls, responses, strict=True)):
            fc = fc if isinstance(fc, dict) else {}
            fr = fr if isinstance(fr, dict) else {}
            where = f"contents[{end}].parts[{rj}].functionResponse"
            for key in ("id", "name"):
                # S5: a response without an id is fine; a differing one is only a warning.
                if fc.get(key) is not None and fr.get(key) is not None and fr[key] != fc[key]:
                    warnings.append(
                        f"{where}: function response {n + 1} has {key} {fr[key]!r} but function "
                        f"call {n + 1} (contents[{ci}].parts[{cj}]) has {key} {fc[key]!r}; served "
                        "anyway, as the service is not known to refuse it"
                    )
    for i, content in enumerate(contents):
        if i in answered or _role(content) != "user":
            continue
        if any(
            _get(p, "functionResponse", "function_response") is not None for p in _parts(content)
        ):
            return Rejection(MSG_FR_AFTER_FC, f"contents[{i}]")
    return None


def _check_current_turn(contents: list[Content]) -> Rejection | None:
    # The turn starts after the last user content that carries no function response.
    start = 0
    for i, content in enumerate(contents):
        if _role(content) == "user" and not any(
            _get(p, "functionResponse", "function_response") is not None for p in _parts(content)
        ):
            start = i + 1
    for first, end in _steps(contents):
        if first < start:
            continue
        calls = _calls(contents, first, end)
        if not calls:
            continue
        ci, cj, fc = calls[0]
        part = _parts(contents[ci])[cj]
        if not _get(part, "thoughtSignature", "thought_signature"):
            name = fc.get("name", "") if isinstance(fc, dict) else ""
            return Rejection(
                missing_signature_message(str(name), ci + 1), f"contents[{ci}].parts[{cj}]"
            )
    return None
