"""Request rules of the turn loop: :func:`check_request` (L2), :func:`strip_signatures`
(L11) and :func:`map_finish_reason` (L4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._json import Content, FunctionCall
from .errors import InvalidRequestError

__all__ = ["SENTINEL_SIGNATURE", "check_request", "map_finish_reason", "strip_signatures"]

SENTINEL_SIGNATURE = "skip_thought_signature_validator"

MSG_TRAILING_MODEL = "Requests ending with a model turn are not supported"

_FINISH: dict[str, str] = {
    "MAX_TOKENS": "length",
    # L56: a CONTINUATION hop with a token is continued, never a finish; one without a
    # token (or past the hop cap) is cut off.
    "CONTINUATION": "length",
    # I25: Interactions statuses, the raw finish reason of that API
    "completed": "stop",
    "requires_action": "tool-calls",
    "incomplete": "length",
    "requires_continuation": "length",
    "budget_exceeded": "length",
    "failed": "error",
    "TOO_MANY_TOOL_CALLS": "tool-calls",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "MALFORMED_TOOL_CALL": "error",  # I35: Interactions malformed_tool_call
    **{
        raw: "content-filter"
        for raw in (
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "LANGUAGE",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
            "MODEL_ARMOR",
            "CONTENT_BLOCKED",  # I35: Interactions content_blocked
        )
    },
}


def map_finish_reason(raw: str | None) -> str | None:
    """The unified finish reason of a raw Gemini ``finishReason`` (spec/contract/turn-loop.md L4).

    ``length``, ``tool-calls``, ``error``, ``content-filter``, or ``stop`` for
    ``STOP``, ``OTHER``, ``FINISH_REASON_UNSPECIFIED``, ``IMAGE_OTHER``,
    ``NO_IMAGE`` and every value not listed; ``None`` for no finish reason.
    """
    if raw is None or raw == "":
        return None
    return _FINISH.get(raw, "stop")


def check_request(request: Mapping[str, Any], *, require_signatures: bool = True) -> None:
    """Raise :class:`InvalidRequestError` if Gemini would reject ``request`` (spec/contract/turn-loop.md L2).

    Checks: ``contents`` is a non-empty list of contents with role ``user`` or
    ``model`` and a non-empty ``parts`` list; the last content is a ``user``
    content; every model content with function calls is followed by one user
    content with exactly as many ``functionResponse`` parts, in the same order,
    with the same names and, where both carry one, the same ids; function
    responses appear only right after such a model content; in the current turn
    (after the last user content that is not only function responses) the first
    function-call part of every model content has a ``thoughtSignature``
    (``require_signatures=False`` skips this for models that do not sign
    calls, such as Gemini 2.5 without thinking).
    """
    contents = request.get("contents") if isinstance(request, Mapping) else None
    if not isinstance(contents, list):
        raise InvalidRequestError("the request has no contents list", "contents")
    guard = RequestGuard(require_signatures=require_signatures)
    guard.extend(contents)
    guard.check_end()


class RequestGuard:
    """The checks of :func:`check_request`, run incrementally over a growing contents list.

    ``extend(contents)`` validates the contents not seen yet (the list may only
    grow); ``check_end()`` validates what depends on the end of the list. The
    turn loop keeps one guard per turn so a step costs only its new contents.
    """

    __slots__ = (
        "_last_role",
        "_pending",
        "_pending_at",
        "_require_signatures",
        "_seen",
        "_unsigned",
    )

    def __init__(self, *, require_signatures: bool = True) -> None:
        self._require_signatures = require_signatures
        self._seen = 0
        self._last_role: str | None = None
        self._pending: list[FunctionCall] | None = None  # calls awaiting responses
        self._pending_at = -1
        self._unsigned: list[
            str
        ] = []  # model contents of the current turn with an unsigned first call

    @property
    def requires_signatures(self) -> bool:
        """Whether the first call of each current-turn model content must be signed (L2)."""
        return self._require_signatures

    def fork(self) -> RequestGuard:
        """An independent copy, to check a request that adds contents without keeping them."""
        other = RequestGuard(require_signatures=self._require_signatures)
        other._seen = self._seen
        other._pending = self._pending
        other._pending_at = self._pending_at
        other._unsigned = list(self._unsigned)
        other._last_role = self._last_role
        return other

    def extend(self, contents: list[Any]) -> None:
        """Validate the contents of ``contents`` not seen yet (the list may only have grown)."""
        for i in range(self._seen, len(contents)):
            self._one(i, contents[i])  # add(), one frame less per content (L71)
            self._seen += 1

    def add(self, content: Any) -> None:
        """Validate one more content, placed after those seen so far."""
        self._one(self._seen, content)
        self._seen += 1

    def check_end(self) -> None:
        """Validate the end of the contents seen so far."""
        if self._seen == 0:
            raise InvalidRequestError(
                "contents is empty: a request needs at least one user content", "contents"
            )
        if self._pending is not None:
            raise InvalidRequestError(
                f"{MSG_TRAILING_MODEL} (contents[{self._pending_at}] has function calls "
                "and no function responses follow)",
                f"contents[{self._pending_at}]",
            )
        if self._last_role == "model":
            raise InvalidRequestError(MSG_TRAILING_MODEL, f"contents[{self._seen - 1}]")
        if self._unsigned:
            where = self._unsigned[0]
            raise InvalidRequestError(
                f"Function call is missing a thought_signature in functionCall parts at {where}: "
                "the first function call of every model content of the current turn must carry "
                "the thoughtSignature it was received with (use strip_signatures(...) when "
                "replaying history from another model)",
                where,
            )

    def _one(self, i: int, content: Any) -> None:
        # ``type(x) is dict`` first: an ABC isinstance costs a Python frame, and
        # this runs for every content and part of every request (loop overhead).
        # L71: for the same reason a location ``contents[i]`` is formatted only to raise.
        if type(content) is not dict and not isinstance(content, Mapping):
            raise InvalidRequestError(f"contents[{i}] is not an object", f"contents[{i}]")
        role = content.get("role")
        if role not in ("user", "model"):
            raise InvalidRequestError(
                f"contents[{i}] has role {role!r}; use a valid role: user, model", f"contents[{i}]"
            )
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            raise InvalidRequestError(f"contents[{i}] has no parts", f"contents[{i}].parts")
        if role == "model":
            if self._pending is not None:
                raise InvalidRequestError(
                    f"contents[{i}]: the function calls of contents[{self._pending_at}] must be followed "
                    "by a user content with their function responses",
                    f"contents[{i}]",
                )
            calls: list[FunctionCall] = []
            first_at = -1
            signed = False
            for j, part in enumerate(parts):
                if type(part) is not dict and not isinstance(part, Mapping):
                    raise InvalidRequestError(
                        f"contents[{i}].parts[{j}] is not an object", f"contents[{i}].parts[{j}]"
                    )
                # L71: a text part costs two membership tests, no method call.
                call = part["functionCall"] if "functionCall" in part else None
                if call is not None and (type(call) is dict or isinstance(call, Mapping)):
                    if not calls:
                        first_at = j
                        signature = part.get("thoughtSignature")
                        signed = isinstance(signature, str) and signature != ""
                    calls.append(call)  # type: ignore[arg-type]
                elif "functionResponse" in part:
                    raise InvalidRequestError(
                        f"contents[{i}].parts[{j}]: a function response belongs in a user content",
                        f"contents[{i}].parts[{j}]",
                    )
            if calls:
                self._pending, self._pending_at = calls, i
                if self._require_signatures and not signed:
                    self._unsigned.append(f"contents[{i}].parts[{first_at}]")
        else:
            responses: list[tuple[int, Any]] = []
            for j, part in enumerate(parts):
                if type(part) is not dict and not isinstance(part, Mapping):
                    raise InvalidRequestError(
                        f"contents[{i}].parts[{j}] is not an object", f"contents[{i}].parts[{j}]"
                    )
                if "functionResponse" in part:  # L71: no method call for a text part
                    response = part["functionResponse"]
                    if response is not None:
                        responses.append((j, response))
            pending = self._pending
            if pending is not None:
                self._match(i, pending, responses)
                self._pending = None
            elif responses:
                j = responses[0][0]
                raise InvalidRequestError(
                    f"contents[{i}].parts[{j}]: a function response must directly follow the model "
                    "content with its function call",
                    f"contents[{i}].parts[{j}]",
                )
            if len(responses) < len(parts):  # ordinary user content: a new turn starts
                self._unsigned.clear()
        self._last_role = role

    def _match(self, i: int, calls: list[FunctionCall], responses: list[tuple[int, Any]]) -> None:
        if len(responses) != len(calls):
            raise InvalidRequestError(
                f"contents[{i}] has {len(responses)} function response part(s) but contents[{i - 1}] has "
                f"{len(calls)} function call(s); the numbers must be equal",
                f"contents[{i}]",
            )
        k = 0
        for j, response in responses:  # L71: in step with the calls, no zip or enumerate
            call = calls[k]
            if type(response) is not dict and not isinstance(response, Mapping):
                at = f"contents[{i}].parts[{j}]"
                raise InvalidRequestError(f"{at}.functionResponse is not an object", at)
            name = response.get("name")
            if name != call.get("name"):
                at = f"contents[{i}].parts[{j}]"
                raise InvalidRequestError(
                    f"{at}: function response {k} is named {name!r} but call {k} of "
                    f"contents[{i - 1}] is {call.get('name')!r}; responses must follow the call order",
                    at,
                )
            rid = response.get("id")
            if rid is not None:
                cid = call.get("id")
                if cid is not None and rid != cid:
                    at = f"contents[{i}].parts[{j}]"
                    raise InvalidRequestError(
                        f"{at}: function response id {rid!r} does not match call id {cid!r}", at
                    )
            k += 1


def strip_signatures(contents: list[Content], *, sentinel: bool = True) -> list[Content]:
    """A copy of ``contents`` without thought signatures, for replay to a different model.

    Signatures are bound to the model that produced them (another model answers
    "Corrupted thought signature."). Every ``thoughtSignature`` is removed from
    model contents; a part left empty (``{}`` or ``{"text": ""}``) is dropped,
    and so is a model content left without parts. The Interactions steps a
    content carries (``content["interaction"]``, sent in their place on that
    API) lose their ``signature`` too, and then the interaction's ``id`` (L83).
    With ``sentinel=True`` the
    first function call of each model content of the current turn gets
    ``"skip_thought_signature_validator"`` so Gemini 3 accepts the replay.
    Contents that need no change are shared with the input, not copied.
    """
    from .signatures import strip_steps  # signatures imports this module

    out: list[Content] = []
    for content in contents:
        if content.get("role") != "model":
            out.append(content)
            continue
        stored, in_steps = strip_steps(content.get("interaction"))
        if not in_steps and not any(
            isinstance(p, Mapping) and "thoughtSignature" in p for p in content.get("parts", ())
        ):
            out.append(content)
            continue
        parts = []
        for part in content["parts"]:
            if isinstance(part, Mapping) and "thoughtSignature" in part:
                part = {k: v for k, v in part.items() if k != "thoughtSignature"}
                if not part or part == {"text": ""}:
                    continue
            parts.append(part)
        if parts:
            changed = {**content, "parts": parts}
            if in_steps:
                changed["interaction"] = stored
            out.append(changed)
    if sentinel:
        turn_start = 0
        for i, content in enumerate(out):
            if content.get("role") == "user" and any(
                not (isinstance(p, Mapping) and "functionResponse" in p)
                for p in content.get("parts", ())
            ):
                turn_start = i + 1
        for i in range(turn_start, len(out)):
            content = out[i]
            if content.get("role") != "model":
                continue
            parts = content.get("parts", [])
            for j, part in enumerate(parts):
                if isinstance(part, Mapping) and "functionCall" in part:
                    if "thoughtSignature" not in part:
                        new_parts = list(parts)
                        new_parts[j] = {**part, "thoughtSignature": SENTINEL_SIGNATURE}
                        out[i] = {**content, "parts": new_parts}
                    break
    return out
