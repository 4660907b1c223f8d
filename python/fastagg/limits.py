"""Budgets and the outcome of one agent turn (spec/contract/turn-loop.md L1, L7, L9, L10, L12).

``TurnLimits`` holds every budget of a turn, ``StopReason`` says why it ended
and ``TurnResult`` is what :func:`fastagg.run_turn` returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import cast

from . import _repr
from ._json import Content, FunctionCall, Usage
from ._phases import Phase
from .errors import ProviderError
from .signatures import Origin

__all__ = ["StopReason", "TurnLimits", "TurnResult"]

#: L44, L86: the longest a turn waits before a retry, whoever asks for more.
MAX_RETRY_WAIT = 300.0


class _DefaultSeconds(float):
    """The defensive default ``turn_timeout``: a float that tells it was not chosen (L38)."""

    __slots__ = ()


@dataclass(frozen=True)
class TurnLimits:
    """The budgets of one turn. Times are in seconds.

    ``max_steps``: model requests that may each lead to tool calls (retries of a
    request are attempts of the same step, the final-answer request after the
    cap is not a step). ``turn_timeout``: wall clock of the whole turn
    (``math.inf`` disables it). ``stall_timeout``: no progress (a chunk, a step
    start, a tool start/finish/heartbeat) for this long ends the turn as
    ``stalled``; it waits while tools with a finite timeout run, during a
    provider-retry backoff, and before the first byte of a step when
    ``first_output_timeout`` is set. ``first_output_timeout``: request sent to
    first byte, per request. ``wrapup_lead``: the wrap-up nudge is added when
    less than this remains of a finite ``turn_timeout`` that the caller set
    (the 300 s default is a safety net, not a budget to warn the model about). ``tool_timeout``:
    default per tool execution (``Tool.timeout`` overrides it). ``synth_timeout``:
    the final-answer request after the step cap. ``max_context_tokens``: the
    context guard. ``malformed_retries`` (per turn), ``no_finish_retries`` and
    ``provider_retries`` (per step): retry budgets. ``retry_backoff``: first
    provider-retry delay when the service names none, doubled per retry (with
    jitter), capped at ``max_retry_backoff`` (finite, at most 300 s: a turn never
    sleeps longer before a retry, L44, L86). ``request_timeout``: the timeout
    given to each model call (connecting, sending, each wait for bytes), at
    most the time the turn has left; the client's own smaller timeouts stay.
    """

    max_steps: int = 50
    turn_timeout: float = _DefaultSeconds(300.0)
    stall_timeout: float | None = None
    first_output_timeout: float | None = None
    wrapup_lead: float = 120.0
    tool_timeout: float = 300.0
    synth_timeout: float = 60.0
    max_context_tokens: int | None = None
    malformed_retries: int = 1
    no_finish_retries: int = 2
    provider_retries: int = 2
    retry_backoff: float = 1.0
    max_retry_backoff: float = 30.0
    request_timeout: float | None = None

    @property
    def turn_budget_set(self) -> bool:
        """Whether ``turn_timeout`` was given by the caller (not the default)."""
        return type(self.turn_timeout) is not _DefaultSeconds

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"TurnLimits.max_steps must be at least 1, not {self.max_steps}")
        for name in ("turn_timeout", "tool_timeout", "synth_timeout"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(
                    f"TurnLimits.{name} must be positive (math.inf disables), not {value}"
                )
        for name in ("stall_timeout", "first_output_timeout", "request_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"TurnLimits.{name} must be positive or None, not {value}")
        if not (self.wrapup_lead >= 0 and not math.isnan(self.wrapup_lead)):
            raise ValueError(f"TurnLimits.wrapup_lead must be zero or more, not {self.wrapup_lead}")
        for name in ("retry_backoff", "max_retry_backoff"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):  # L86: every wait ends
                raise ValueError(
                    f"TurnLimits.{name} must be a finite number of seconds, zero or more, "
                    f"not {value}"
                )
        if self.max_retry_backoff > MAX_RETRY_WAIT:
            raise ValueError(
                f"TurnLimits.max_retry_backoff must be at most {MAX_RETRY_WAIT:g} seconds (the "
                "longest wait a turn makes between two attempts), not "
                f"{self.max_retry_backoff}"
            )
        for name in ("malformed_retries", "no_finish_retries", "provider_retries"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"TurnLimits.{name} must be zero or more, not {getattr(self, name)}"
                )
        if self.max_context_tokens is not None and self.max_context_tokens < 1:
            raise ValueError(
                f"TurnLimits.max_context_tokens must be positive or None, not {self.max_context_tokens}"
            )


class StopReason(str, Enum):
    """Why a turn ended (spec/contract/turn-loop.md L7 gives the precedence when several apply)."""

    COMPLETED = "completed"
    STEP_CAP = "step-cap"
    TIME_LIMIT = "time-limit"
    STALLED = "stalled"
    ABORTED = "aborted"
    CONTEXT_CAP = "context-cap"
    PROVIDER_ERROR = "provider-error"
    #: L103: a call needs the user's confirmation before it runs (computer use); the
    #: result's ``pending_calls`` hold it, ``run_turn(..., confirm=...)`` resumes (L104).
    NEEDS_CONFIRMATION = "needs-confirmation"

    def __str__(self) -> str:
        return self.value

    @property
    def phase(self) -> Phase:
        """The ``Lifecycle.phase`` announcing this end (every reason but ``COMPLETED``, L13)."""
        if self is StopReason.COMPLETED:
            raise ValueError("a completed turn has no lifecycle phase")
        return cast("Phase", self.value)  # the values are L13 phases (tested)


@dataclass(frozen=True)
class TurnResult:
    """The outcome of one turn.

    ``text`` is the final answer; when the turn did not complete it is the
    answer text gathered so far followed by the honest ``message`` (L10).
    ``finish_reason`` is unified (L4), ``raw_finish_reason`` verbatim.
    ``contents`` is the whole transcript (input + new), replayable as is.
    ``usage`` is summed over every request of the turn; ``usage_by_step`` holds
    each request's own usage (``{}`` when it reported none), in order, failed
    attempts, retries and the final-answer request included (L12).
    ``signatures`` counts what the signature policy changed in the history
    (``{"stripped": n, "sentinels": m}``, L33); ``content_origins`` tags each
    content of ``contents`` with the model that produced it (None: unknown or
    a user content), to pass as ``history_origin`` of the next turn.
    """

    stop_reason: StopReason
    finish_reason: str | None
    raw_finish_reason: str | None
    text: str
    message: str | None
    contents: list[Content]
    steps_used: int
    tool_call_count: int
    elapsed: float
    usage: Usage
    retries: dict[str, int]
    error: ProviderError | None
    usage_by_step: list[Usage] = field(default_factory=list)
    signatures: dict[str, int] = field(default_factory=dict)
    content_origins: list[Origin | None] = field(default_factory=list)
    #: L62: long-decode continuation hops sent in this turn (0 when every answer fit one request).
    hops: int = 0
    #: L103: the calls waiting for the user's confirmation (``needs-confirmation``), as the
    #: model sent them: ``args["safety_decision"]`` holds the service's ``explanation``.
    pending_calls: list[FunctionCall] = field(default_factory=list)

    def __repr__(self) -> str:
        return _repr.turn_result(self)
