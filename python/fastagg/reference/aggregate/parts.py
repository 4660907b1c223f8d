"""The parts of a candidate that are not function calls (P1-P6, P8): text runs and kept parts."""

from __future__ import annotations

from ..._json import Part
from .response import Delta, TextDelta
from .state import _CandidateState, _KeptPart, _TextRun


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
    # P4 (P8: a non-string text too): toolCall/toolResponse (P10), executableCode and
    # codeExecutionResult (P11), audioTranscription (P12) and every kind P13 lists
    if not isinstance(text, str):
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
