"""What one model response means for the turn: a pure function, no asyncio (L3, L16-L19, L32, L35).

:func:`classify` takes the response as the wire read it (:class:`Response`),
the transport error of the request, whether visible output was streamed, and
what is left of the step's retry budgets, and returns a :class:`Verdict`: one
:class:`Outcome` plus the error or retry detail that goes with it. The turn
driver only acts on the verdict.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from .._json import FunctionCall, JSONObject
from ..client._rpc import retryable, stream_error
from ..errors import InvalidRequestError, ProviderError
from ..events import StepOutcome
from .messages import describe, error_label, times

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

# I35: MALFORMED_TOOL_CALL is the Interactions API's malformed_tool_call (a server-side tool)
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "MALFORMED_TOOL_CALL"})


class Outcome(enum.Enum):
    """What the driver does with a response."""

    ANSWER = "answer"
    TOOL_CALLS = "tool-calls"
    PROVIDER_RETRY = "provider-retry"  # L3.1, when the wait fits the deadline (L17, L44)
    PROVIDER_ERROR = "provider-error"
    HISTORY_ERROR = "history-error"  # L35: MISSING_THOUGHT_SIGNATURE, never retried
    MALFORMED_RETRY = "malformed-retry"  # L3.3, L18, L35
    MALFORMED_ERROR = "malformed-error"
    NO_FINISH_RETRY = "no-finish-retry"  # L3.4, L16, L32
    NO_FINISH_ERROR = "no-finish-error"

    @property
    def step_end(self) -> StepOutcome:
        """The ``StepEnd.outcome`` of a step that ended this way."""
        return _STEP_END[self]


_STEP_END: dict[Outcome, StepOutcome] = {
    Outcome.ANSWER: "answer",
    Outcome.TOOL_CALLS: "tool-calls",
    Outcome.PROVIDER_RETRY: "error",
    Outcome.PROVIDER_ERROR: "error",
    Outcome.HISTORY_ERROR: "error",
    Outcome.MALFORMED_RETRY: "malformed",
    Outcome.MALFORMED_ERROR: "malformed",
    Outcome.NO_FINISH_RETRY: "no-finish",
    Outcome.NO_FINISH_ERROR: "no-finish",
}


# L71: Response and Verdict are built per request and never changed, but not frozen: a
# frozen dataclass's __init__ sets each field through object.__setattr__ (~1.2 µs more).
@dataclass(slots=True)
class Response:
    """The parts of an aggregated response the classifier reads (built by the wire)."""

    finish: str | None
    finish_message: str | None = None
    calls: list[FunctionCall] = field(default_factory=list)  # the finished calls (C13)
    unfinished: tuple[int, str | None] | None = None  # first unfinished call: part, name (L32)
    error: JSONObject | None = None  # the in-stream google.rpc error object
    block_reason: str | None = None  # promptFeedback.blockReason (L19), read without a finish
    nameless: bool = False  # a function call without a name was left out (L95)


@dataclass(slots=True)
class Budget:
    """What one step may still spend; the driver updates it as retries are sent."""

    provider: int  # provider retries left in this step (L15)
    no_finish: int  # no-finish retries left in this step
    malformed_sent: int  # malformed retries sent in this turn
    malformed_max: int
    attempt: int = 0
    stream_error: JSONObject | None = None  # the last retryable no-finish error (L16)


@dataclass(slots=True)
class Verdict:
    outcome: Outcome
    calls: list[FunctionCall] = field(default_factory=list)  # TOOL_CALLS: the calls to run
    error: ProviderError | None = None  # *_ERROR, PROVIDER_RETRY: the error
    detail: str | None = None  # MALFORMED_ERROR, NO_FINISH_ERROR: the message's {detail} (L25)
    lifecycle: str | None = None  # retries: the Lifecycle detail (L32, L41)
    note: bool = False  # MALFORMED_RETRY: add the corrective note (L18; not for L35)
    blocked: bool = False  # a blocked prompt (L19): its reason is the raw finish reason


def classify(
    response: Response, error: ProviderError | None, visible: bool, budget: Budget
) -> Verdict:
    """The verdict on one attempt; updates ``budget.stream_error`` (L16)."""
    calls = response.calls
    cut = None
    if response.unfinished is not None:
        # L32: a call the model did not finish (flushed at close) is never run, and
        # neither are the finished calls of that step: the step is retried as a whole.
        k, name = response.unfinished
        calls = []
        cut = f"the stream ended inside the call {name!r} (part {k}); it was not run"
    elif response.nameless:
        # L95: a call nobody can run or answer is malformed output, never an answer, and
        # the step's other calls wait for the retry as with an unfinished call (L32).
        calls = []
        cut = "the model sent a function call without a name; it was not run"
    blocked = not response.finish and not calls and bool(response.block_reason)
    verdict = _judge(response, calls, cut, blocked, error, visible, budget)
    return replace(verdict, blocked=True) if blocked else verdict


def _judge(
    response: Response,
    calls: list[FunctionCall],
    cut: str | None,
    blocked: bool,
    error: ProviderError | None,
    visible: bool,
    budget: Budget,
) -> Verdict:
    raw = response.finish
    unfinished = cut is not None
    no_finish = not raw and not calls and not blocked
    if error is None and response.error is not None:
        error = stream_error(response.error)
        if no_finish and not visible and retryable(error):
            budget.stream_error, error = response.error, None  # a no-finish step (L16)
    if error is not None:
        if retryable(error) and not visible and budget.provider > 0:
            return Verdict(Outcome.PROVIDER_RETRY, error=error, lifecycle=describe(error))
        return Verdict(Outcome.PROVIDER_ERROR, error=error)
    if raw == "MISSING_THOUGHT_SIGNATURE":  # L35: a history bug; resending cannot help
        return Verdict(Outcome.HISTORY_ERROR)
    if calls:
        return Verdict(Outcome.TOOL_CALLS, calls)  # L71: positional, the usual verdict
    if raw in _MALFORMED or raw == "MALFORMED_RESPONSE" or (unfinished and raw):
        if budget.malformed_sent < budget.malformed_max:
            # L35: a malformed response is resent as it was, without the call note.
            return Verdict(Outcome.MALFORMED_RETRY, lifecycle=cut, note=raw != "MALFORMED_RESPONSE")
        nameless = response.nameless and response.unfinished is None
        return _malformed_error(raw, response.finish_message, budget.malformed_sent + 1, nameless)
    if no_finish:
        if budget.no_finish > 0:
            if cut is None and budget.stream_error is not None:
                cut = describe(stream_error(budget.stream_error))
            return Verdict(Outcome.NO_FINISH_RETRY, lifecycle=cut)
        return _no_finish_error(budget.attempt, budget.stream_error)
    return Verdict(Outcome.ANSWER)


def _malformed_error(
    raw: str | None, finish_message: str | None, tries: int, nameless: bool = False
) -> Verdict:
    """L18, L32, L35, L95: malformed output that retrying did not fix."""
    named = raw in _MALFORMED or raw == "MALFORMED_RESPONSE"
    if named:
        sent, code = raw, raw
    elif nameless:
        sent, code = "a function call without a name", "NAMELESS_FUNCTION_CALL"
    else:
        sent, code = "an unfinished function call", "UNFINISHED_FUNCTION_CALL"
    detail = f"the model sent {sent} {times(tries)}"
    error = ProviderError(
        None,
        code,
        f"{detail} in this turn; retrying did not help",
        True,
        kind="malformed",
        body={"finishReason": raw, "finishMessage": finish_message},
    )
    return Verdict(Outcome.MALFORMED_ERROR, error=error, detail=detail)


def _no_finish_error(attempts: int, stream_err: JSONObject | None) -> Verdict:
    """L3.4, L16: no finish reason within the no-finish budget."""
    why = "" if stream_err is None else f"; last error in the stream: {error_label(stream_err)}"
    error = ProviderError(
        None,
        "NO_FINISH_REASON",
        f"the model's response ended without a finish reason {times(attempts)}{why}",
        True,
        kind="no-finish-reason",
        body=stream_err,
    )
    detail = f"no finish reason in {attempts} attempts" if attempts > 1 else "no finish reason"
    return Verdict(Outcome.NO_FINISH_ERROR, error=error, detail=detail)


def history_error(where: str | None, finish_message: str | None) -> tuple[str, ProviderError]:
    """The {detail} and error of a MISSING_THOUGHT_SIGNATURE finish, naming the part (L35)."""
    if where is not None:
        detail = f"no thought signature at {where}"
        message = (
            f"the model refused the history: {where} has no thoughtSignature; keep the "
            "signatures the model returned, or declare the history's origin "
            "(run_turn(history_origin=...)) so the sentinel is put there"
        )
    else:
        detail = "a thought signature was refused"
        message = (
            "the model reported a missing thought signature although every function call of "
            "the current turn has one; one may come from another model or backend: declare "
            "the history's origin (run_turn(history_origin=...))"
        )
    error = ProviderError(
        None,
        "MISSING_THOUGHT_SIGNATURE",
        message,
        False,
        kind="history",
        body={"finishReason": "MISSING_THOUGHT_SIGNATURE", "finishMessage": finish_message},
    )
    return detail, error


def unsendable(error: InvalidRequestError) -> tuple[str, ProviderError]:
    """The {detail} and error of a turn whose next request would carry the model's own
    output as the request guard refuses it (L33a): never sent, never retried."""
    detail = f"its output at {error.where} cannot be sent back"
    message = f"the model's own output cannot be sent back in the next request: {error}"
    return detail, ProviderError(None, "UNSENDABLE_OUTPUT", message, False, kind="history")
