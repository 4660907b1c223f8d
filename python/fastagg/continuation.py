"""Long decode: one step's answer across continuation hops (spec/turn-loop.md L56-L62).

A hop that ends in ``CONTINUATION`` (generateContent) or ``requires_continuation``
(Interactions) is not the end of the answer: the loop sends the identical
request again with the hop's token, and the answers of all hops (and of the
attempts resumed from a checkpoint after a drop) are one model turn. This
module holds the pure parts: which token continues a result, the next hop's
request, and :class:`Hops`, the segments seen as one aggregated result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._json import JSONObject

__all__ = ["MAX_HOPS", "MAX_RESUMES", "Hops", "checkpoint_token", "hop_request", "hop_token"]

#: L61: hops of one step attempt at most (the service's own budget ends a real decode sooner).
MAX_HOPS = 64
#: L59: resumes of one hop after dropped connections.
MAX_RESUMES = 3

_PLAIN = frozenset({"text", "thought"})


def _token(result: Any) -> str | None:
    token = result.continuation_token  # E14 (I6 on Interactions): the latest one
    return token if isinstance(token, str) and token else None


def hop_token(result: Any) -> str | None:
    """L56: the token to continue with, when ``result`` ended its hop with one."""
    if result.finish_reason in ("CONTINUATION", "requires_continuation"):
        return _token(result)
    return None


def checkpoint_token(result: Any) -> str | None:
    """L59: after a drop, the latest checkpoint token (only a result without a finish
    reason has one: a token on a finished chunk is stale).

    L80: only when it covers everything received: output in an event after it
    would be generated again by the resumed stream (E14 judges per event).
    """
    if result.finish_reason or result.output_after_token:
        return None
    return _token(result)


def hop_request(request: Mapping[str, Any], result: Any, token: str) -> JSONObject:
    """L58: the same request with the token; a stored interaction also names the hop that
    issued it (``previous_interaction_id``), as the service checks."""
    out = {**request, "continuationToken": token}
    interaction = getattr(result, "interaction_id", None)
    if interaction is not None and request.get("store") is not False:
        out["previous_interaction_id"] = interaction
    return out


class Hops:
    """Several segments (hops, resumed attempts) of one step read as one result (L57).

    Parts are concatenated in order, adjacent plain text parts with the same
    thought flag merged (as P1 merges them within a stream); text, calls and
    warnings are concatenated; the finish reason, message and error are the
    last segment's. Interactions segments keep all their steps, in order,
    under ``content["interaction"]`` with the last hop's id.
    """

    def __init__(self, segments: Sequence[Any]) -> None:
        last = segments[-1]
        self.finish_reason = last.finish_reason
        self.finish_message = last.finish_message
        self.error = last.error
        self.usage = last.usage
        self.prompt_feedback = next(
            (s.prompt_feedback for s in segments if s.prompt_feedback is not None), None
        )
        self.text = "".join(s.text for s in segments)
        self.function_calls = [c for s in segments for c in s.function_calls]
        self.warnings = [w for s in segments for w in s.warnings]
        self.parts: list[JSONObject] = []
        first = 0  # where the segment's first part landed (only a first part can merge)
        for segment in segments:
            for k, part in enumerate(segment.parts):
                self._add(part)
                if k == 0:
                    first = len(self.parts) - 1
        # Only the last segment can hold an unfinished call: earlier ones ended their hop.
        self.unfinished_calls = [first + k for k in last.unfinished_calls]
        self.steps = [st for s in segments for st in getattr(s, "steps", ())]
        self.interaction_id = getattr(last, "interaction_id", None)
        self._interactions = hasattr(last, "steps")

    def _add(self, part: JSONObject) -> None:
        if self.parts and set(part) <= _PLAIN and set(self.parts[-1]) <= _PLAIN:
            prev = self.parts[-1]
            if bool(prev.get("thought")) == bool(part.get("thought")):
                self.parts[-1] = {**prev, "text": prev["text"] + part["text"]}
                return
        self.parts.append(part)

    @property
    def content(self) -> JSONObject:
        content: JSONObject = {"role": "model", "parts": self.parts}
        if self._interactions:
            stored: JSONObject = {"steps": self.steps}
            if self.interaction_id is not None:
                stored = {"id": self.interaction_id, **stored}
            content["interaction"] = stored
        return content
