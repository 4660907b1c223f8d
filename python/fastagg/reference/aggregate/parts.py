"""The parts of a candidate that are not function calls (P1-P6, P8): text runs and kept parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._json import Part
from .response import Delta, TextDelta

if TYPE_CHECKING:
    from .candidate import _CandidateState


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


def _is_plain(part: Part) -> bool:
    """RULE P8: `text` (a string) and optionally `thought` (a boolean), nothing else."""
    if not isinstance(part.get("text"), str):
        return False
    return len(part) == 1 or (
        len(part) == 2 and "thought" in part and isinstance(part["thought"], bool)
    )


def _add_part(cand: _CandidateState, part: Part, deltas: list[Delta] | None) -> None:
    """Fold one non-empty part that is not a function call (P1-P4, P8)."""
    text = part.get("text")
    if not isinstance(text, str):  # P4 (P8: a non-string text too)
        cand.slots.append(_KeptPart(part))
        return
    thought = part.get("thought", False)
    if _is_plain(part):
        if not text:
            return  # P2
        if not thought:
            cand.visible = True  # R5
        slots = cand.slots
        run = slots[-1] if slots else None
        if not isinstance(run, _TextRun) or run.thought is not thought:
            run = _TextRun(thought)
            slots.append(run)
        run.fragments.append(text)
        if deltas is not None:
            deltas.append(TextDelta(cand.index, len(slots) - 1, text, thought))
        return
    thought = thought is True  # P3: a text part with other keys, kept as is
    cand.slots.append(_KeptPart(part, text, thought))
    if text and not thought:
        cand.visible = True  # R5
    if text and deltas is not None:
        deltas.append(TextDelta(cand.index, len(cand.slots) - 1, text, thought))
