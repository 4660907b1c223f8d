"""Events of an agent turn (spec/contract/turn-loop.md L13), as yielded by :func:`fastagg.stream_turn`
and passed to ``on_event``. Every event is also exported at top level (``fastagg.AnswerDelta``).

The answer-text event is ``AnswerDelta(step, text)``, the contract's L13 ``TextDelta``, named
apart (L99) because ``fastagg.TextDelta`` is the *aggregator's* delta
(``TextDelta(candidate, index, text, thought)``, what ``StreamAggregator.feed()`` returns).
``fastagg.events.TextDelta``, the contract's name, names the same class (no warning: the
contract still uses it), but is not listed in ``__all__`` so that ``from fastagg.events import *``
does not shadow the aggregator's ``TextDelta``.

Order within a turn: for each request ``StepStart``, then ``ThoughtDelta`` /
``AnswerDelta`` live as the stream arrives, then ``StepEnd``; for a step with
function calls one ``ToolCallStart`` per call (in call order) and one
``ToolCallEnd`` per call (as they finish); ``Lifecycle`` events when something
notable happens; last ``TurnEnd(result)``. A ``StepStart`` with ``attempt > 1``
means the previous attempt of that step was discarded (any text it showed was
dropped from the answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Union

from . import _repr
from ._json import JSONObject, JSONValue, Usage
from ._phases import Phase

if TYPE_CHECKING:
    from .limits import TurnResult
    from .signatures import Backend

__all__ = [
    "AnswerDelta",
    "Lifecycle",
    "Phase",
    "StepEnd",
    "StepKind",
    "StepOutcome",
    "StepStart",
    "ThoughtDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolStatus",
    "TurnEnd",
    "TurnEvent",
]

# The closed sets of strings the events carry (L13), so a type checker catches a misspelt
# comparison. Literal aliases rather than enums: the values stay the plain strings users
# already compare against, and enum.StrEnum would need Python 3.11.
StepKind = Literal["step", "final-answer"]
"""``StepStart.kind``."""

StepOutcome = Literal[
    "answer", "tool-calls", "malformed", "no-finish", "error", "interrupted", "final-answer"
]
"""``StepEnd.outcome``."""

ToolStatus = Literal["ok", "error", "timeout", "aborted"]
"""``ToolCallEnd.status``."""


@dataclass(frozen=True, slots=True)
class StepStart:
    """A model request is about to be sent.

    ``step`` is 1-based; ``attempt`` counts the requests of this step (retries
    are attempts > 1); ``kind`` is ``"step"`` or ``"final-answer"`` (the request
    after the step cap, numbered ``max_steps + 1``).
    """

    step: int
    max_steps: int
    attempt: int = 1
    kind: StepKind = "step"

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    """A fragment of answer text, delivered as it arrives (L13's ``TextDelta``, L99)."""

    step: int
    text: str

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class ThoughtDelta:
    """A fragment of a thought summary (``thought: true`` parts), delivered as it arrives."""

    step: int
    text: str

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A function call is being streamed by the model, before it is complete.

    ``part`` is the call's position in the step's parts. The first event of a
    call has ``json_path`` None (the call was seen, with its ``name`` when
    known); each later one carries an argument fragment as the model sends it
    (``partialArgs``: a string piece to append, or a scalar). Complete calls
    give only the first event. ``ToolCallStart`` follows once the step ends.
    """

    step: int
    part: int
    name: str | None
    json_path: str | None
    value: JSONValue

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call of ``step`` starts; ``index`` is its position among the step's calls."""

    step: int
    index: int
    id: str | None
    name: str
    args: JSONObject

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    """A tool call ended. ``status`` is ``"ok"``, ``"error"``, ``"timeout"`` or ``"aborted"``;
    ``response`` is the ``functionResponse.response`` sent back; ``elapsed`` in seconds."""

    step: int
    index: int
    id: str | None
    name: str
    status: ToolStatus
    elapsed: float
    response: JSONObject

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class StepEnd:
    """A model request ended.

    ``outcome`` is one of ``"answer"``, ``"tool-calls"``, ``"malformed"``,
    ``"no-finish"``, ``"error"``, ``"interrupted"``, ``"final-answer"``;
    ``usage`` is that request's own usage (``{}`` when none was reported).
    """

    step: int
    attempt: int
    raw_finish_reason: str | None
    usage: Usage
    outcome: StepOutcome

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """Something notable happened.

    ``phase``: ``time-limit``, ``stalled``, ``aborted``, ``step-cap``,
    ``context-cap``, ``provider-error`` (the turn ends; emitted once, just
    before ``TurnEnd``), ``tool-timeout`` (``tool_name`` set),
    ``malformed-retry``, ``no-finish-retry``, ``provider-retry``, ``wrapup``.
    ``signature-strip`` and ``signature-sentinel`` (before the first request,
    step 0, one per content changed; ``detail`` says what and why, L33),
    ``duplicate-call-id`` (``tool_name`` and ``detail`` set, L39),
    ``response-id-changed`` (one body held two responses; ``detail``, L40).
    ``model-status`` (the model is legacy, deprecated or retiring: once a turn, ``detail``
    names the stage, the retirement date and the service's message, E18).
    ``tool_call_count`` is the number of tool calls answered so far,
    ``elapsed`` the seconds since the turn started, ``provider`` the backend of
    the model (``"gemini"`` or ``"vertex"``), ``timestamp`` the wall-clock time
    (``time.time()``) when it happened. ``detail`` says why, in words, where
    there is more to say than the phase (L41): the error that a
    ``provider-retry`` retries, the in-stream error of a ``no-finish-retry``.
    """

    phase: Phase
    step: int
    max_steps: int
    tool_name: str | None
    tool_call_count: int
    elapsed: float
    provider: Backend | None = None
    timestamp: float | None = None
    detail: str | None = None

    __repr__ = _repr.record


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The last event of a turn."""

    result: TurnResult

    __repr__ = _repr.record


TurnEvent = Union[  # noqa: UP007  (a runtime alias: `X | Y` of classes needs 3.10 types.UnionType)
    StepStart,
    AnswerDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolCallEnd,
    StepEnd,
    Lifecycle,
    TurnEnd,
]


def __getattr__(name: str) -> type[AnswerDelta]:
    # L99: the contract's name of the answer-text event (L13), the same class as AnswerDelta.
    if name == "TextDelta":
        return AnswerDelta
    raise AttributeError(f"module 'fastagg.events' has no attribute {name!r}")
