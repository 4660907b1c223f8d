"""The state the aggregator folds events into, as plain records: the stream's
(``_TurnState``), each candidate's (``_CandidateState``), its slots (``_TextRun``,
``_KeptPart``, ``_StreamedCall``) and the bounded diagnostics (``_Warnings``).

Records and the few methods on their own fields; the rules that change them are in
``candidate``, ``parts``, ``calls`` and ``merge``, which all name these types. (In
``rust/core/src/aggregate`` the structs sit in ``mod.rs`` and their modules; Python keeps
them in one module so that those modules need not import one another in a circle, L100.)
"""

from __future__ import annotations

import itertools

from ..._json import JSONObject, JSONValue, Part
from ...diagnostics import Diagnostic
from ..diagnostics import _diagnostic

_MAX_WARNINGS = 1000  # D7


class _Warnings:
    """The diagnostics of a stream, bounded (D7, X3); the ones beyond the cap are counted."""

    __slots__ = ("dropped", "kept")

    def __init__(self) -> None:
        self.kept: list[Diagnostic] = []
        self.dropped = 0

    def append(self, diagnostic: Diagnostic) -> None:
        if len(self.kept) < _MAX_WARNINGS:
            self.kept.append(diagnostic)
        else:
            self.dropped += 1

    def render(self) -> tuple[Diagnostic, ...]:
        """The kept diagnostics, then one that counts the others."""
        if not self.dropped:
            return tuple(self.kept)
        summary = _diagnostic("warnings_dropped", count=self.dropped, limit=_MAX_WARNINGS)
        return (*self.kept, summary)


class _TurnState:
    """Everything aggregated so far from the event payloads."""

    def __init__(self, max_array_index: int, warnings: _Warnings) -> None:
        self.max_array_index = max_array_index
        self.warnings = warnings
        self.candidates: dict[int, _CandidateState] = {}
        self.usage: JSONObject | None = None
        self.model_version: JSONValue = None
        self.response_id: JSONValue = None
        self.create_time: JSONValue = None
        self.prompt_feedback: JSONValue = None
        self.model_status: JSONValue = None
        self.error: JSONValue = None
        # E14: candidate 0's latest token, and output in an event after it.
        self.continuation_token: str | None = None
        self.output_after_token = False
        self.clock = itertools.count(1)  # orders the updates of streamed calls (C2, C17)

    def shape(self, i: int, where: str, expected: str) -> None:
        """E7: a value of the wrong type is ignored with a warning."""
        self.warnings.append(_diagnostic("wrong_shape", event=i, path=where, expected=expected))


class _TextRun:
    """Consecutive plain text parts with one thought flag (P1)."""

    __slots__ = ("fragments", "thought")

    def __init__(self, thought: bool) -> None:
        self.thought = thought
        self.fragments: list[str] = []

    def text(self) -> str:
        if len(self.fragments) > 1:
            self.fragments = ["".join(self.fragments)]
        return self.fragments[0]


class _KeptPart:
    """A part kept as received (P3, P4, complete calls)."""

    __slots__ = ("is_call", "part", "text", "thought")

    def __init__(
        self,
        part: Part,
        text: str | None = None,
        thought: bool = False,
        is_call: bool = False,
    ) -> None:
        self.part = part
        self.text = text  # the text a P3 part adds to text / thought_text
        self.thought = thought
        self.is_call = is_call


class _StreamedCall:
    """A function call assembled from streamed chunks (C2-C12)."""

    __slots__ = ("args", "finished", "id", "name", "signature", "slot", "touched")

    def __init__(self, slot: int, call_id: str | None, name: str | None) -> None:
        self.slot = slot
        self.finished = False  # C13: closed by the model, not flushed by close()
        self.id = call_id
        self.name = name
        self.args: JSONObject = {}
        self.signature: JSONValue = None  # any JSON value but null (P5: kept as received)
        self.touched = 0  # clock of the last chunk routed here


_Slot = _TextRun | _KeptPart | _StreamedCall


class _CandidateState:
    __slots__ = (
        "citation_seen",
        "finish_message",
        "finish_reason",
        "index",
        "metadata",
        "open_by_id",
        "open_calls",
        "slots",
        "visible",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.slots: list[_Slot] = []
        # C17: the open calls in recency order (most recently updated last), and by id.
        self.open_calls: dict[_StreamedCall, None] = {}
        self.open_by_id: dict[str, _StreamedCall] = {}
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.metadata: JSONObject = {}
        self.citation_seen: dict[str, set[str]] = {}
        self.visible = False  # R5: answer text or a function call came


class _Checkpoint:
    """What the candidate-0 objects of one event brought (E14): output (a part that P2,
    P6 and E7 do not drop) and a non-empty string ``continuationToken``."""

    __slots__ = ("output", "token")

    def __init__(self) -> None:
        self.output = False
        self.token: str | None = None
