"""The texts a turn puts into the transcript and into its result (L8-L10, L24-L28, L41)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client._rpc import retryable
from ..errors import ProviderError
from ..limits import StopReason, TurnLimits

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

MALFORMED_NOTE = (
    "Your previous function call was malformed. Call a declared function with valid JSON "
    "arguments, one call at a time, or answer in plain text."
)
FINAL_ANSWER_NOTE = (
    "You have reached the step limit for this turn, so tools are now disabled. Using only the "
    "information gathered so far, give your best final answer now, and say briefly what is "
    "still missing, if anything."
)
WRAPUP_NOTE = (
    "Time check: about {remaining} of processing time remain for this turn. Finish now: give "
    "your best answer from what you have gathered, and call another tool only if it is essential."
)


def stop_message(
    stop: StopReason,
    limits: TurnLimits,
    tool_calls: int,
    *,
    stalled_for: float,
    detail: str | None,
    error: ProviderError | None,
    model: str | None = None,
) -> str | None:
    """The honest message of a turn that ended with ``stop`` (L10, L25); None when completed."""
    n = tool_calls
    if stop is StopReason.COMPLETED:
        return None
    if stop is StopReason.STEP_CAP:
        if n:
            return (
                f"I gathered information across {_calls(n)} but reached the {limits.max_steps}-step "
                "limit for a single turn before I could finish. Please narrow the request or break it "
                "into smaller asks and I'll continue."
            )
        return (
            f"I reached the {limits.max_steps}-step limit for a single turn before I could "
            "finish. Please narrow the request or break it into smaller asks and I'll continue."
        )
    if stop is StopReason.TIME_LIMIT:
        return (
            f"I had to stop after {fmt_duration(limits.turn_timeout)} — this turn hit its "
            f"processing time limit. I completed {_calls(n)} before stopping; ask me to continue "
            "and I'll pick up from there."
        )
    if stop is StopReason.STALLED:
        return (
            f"I had to stop because this turn made no progress for {fmt_seconds(stalled_for)}s — "
            "a tool or model call appears to be stuck. I completed "
            f"{_calls(n)} before stopping; ask me to continue and I'll pick up from there."
        )
    if stop is StopReason.ABORTED:
        return (
            f"This turn was stopped before I could finish. I completed {_calls(n)} before stopping."
        )
    if stop is StopReason.CONTEXT_CAP:
        return (
            "I had to stop because this conversation no longer fits the model's context window. "
            "Start a new conversation or ask me to summarize."
        )
    if stop is StopReason.NEEDS_CONFIRMATION:  # L103: detail names the calls
        return (
            f"Before I go on, please confirm: {detail}. Resume with run_turn(..., "
            "confirm=True) to allow it or confirm=False to refuse it."
        )
    if detail is None and error is not None and refused(error):
        return refusal_message(error, model)
    return f"The model service failed ({detail or error_detail(error)}). Please try again."


# U3: the google.rpc reasons of a refused API key (ErrorInfo.reason).
_KEY_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"})
_REASON_CHARS = 300


def refused(error: ProviderError) -> bool:
    """U3: the service refused the request itself; sending it again cannot help."""
    return error.kind in ("http", "in-stream") and error.status is not None and not retryable(error)


def refusal_message(error: ProviderError, model: str | None) -> str:
    """U3: a refused request in words: the service's own reason, and what to change (not "try again")."""
    reason = error.message.strip()
    if len(reason) > _REASON_CHARS:
        reason = reason[:_REASON_CHARS] + "…"
    label = " ".join(str(x) for x in ("HTTP", error.status, error.code) if x is not None)
    said = reason if error.code is None and reason.startswith("HTTP ") else f"{label}: {reason}"
    if error.status == 404:
        name = f"the model {model!r}" if model else "the model"
        return (
            f"The model service could not find {name} ({said}). Check the model name "
            "(models.list shows the models this key can use)."
        )
    if _key_refused(error):
        return (
            f"The model service refused the API key ({said}). Check the key given to "
            "GeminiClient(api_key=...) or in GEMINI_API_KEY."
        )
    if error.status in (401, 403):
        return (
            f"The model service refused the credentials ({said}). Check the API key, or the "
            "project's access to this model."
        )
    return (
        f"The model service refused the request ({said}). Sending it again will not help: "
        "the request must change."
    )


def _key_refused(error: ProviderError) -> bool:
    """A refused API key: an ErrorInfo reason says so, or the message does."""
    body = error.body or {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    details = inner.get("details") if isinstance(inner, dict) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("reason") in _KEY_REASONS:
            return True
    return error.status == 400 and "api key" in error.message.lower()


def describe(error: ProviderError) -> str:
    """A provider error in words for a lifecycle event (L41): status, code, message."""
    label = " ".join(str(x) for x in (error.status, error.code) if x is not None)
    return f"{label or 'error'}: {error.message}"


def error_label(error: Mapping[str, Any]) -> str:
    """``"500 INTERNAL"`` for an in-stream google.rpc error object."""
    return (
        " ".join(str(x) for x in (error.get("code"), error.get("status")) if x is not None)
        or "unknown"
    )


def error_detail(error: ProviderError | None) -> str:
    """The short ``{detail}`` of the provider-error message (L10, L25)."""
    if error is None:
        return "unknown error"
    if error.kind == "http":
        return " ".join(x for x in ("HTTP", str(error.status or ""), error.code or "") if x)
    if error.kind == "in-stream":
        label = " ".join(str(x) for x in (error.status, error.code) if x is not None)
        return f"{label or 'an error'} in the response stream"
    if error.kind == "connection":
        return "connection lost"
    if error.kind == "timeout":
        return "request timed out"
    if error.code == "MALFORMED_STREAM":
        return "unreadable response stream"
    return error.code or error.kind


def _calls(n: int) -> str:
    return f"{n} tool call" if n == 1 else f"{n} tool calls"


def times(n: int) -> str:
    """``"once"``, ``"2 times"``."""
    return "once" if n == 1 else f"{n} times"


def fmt_seconds(seconds: float) -> str:
    """``30`` -> ``"30"``, ``0.05`` -> ``"0.05"``, ``90.0`` -> ``"90"`` (L25)."""
    return f"{seconds:g}"


def fmt_duration(seconds: float) -> str:
    """``"0.5s"`` under a second, ``"45s"``, ``"2m 5s"``, ``"5m"``, ``"1h 2m"`` (L25)."""
    if seconds < 1:
        return f"{seconds:.1f}s"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if not hours and not minutes:
        return f"{secs}s"
    pieces = [f"{hours}h"] if hours else []
    if minutes:
        pieces.append(f"{minutes}m")
    if secs:
        pieces.append(f"{secs}s")
    return " ".join(pieces)


# E18: the stages worth telling the user about, in words
_STAGES = {
    "LEGACY": "is a legacy model, on the path to deprecation",
    "DEPRECATED": "is deprecated",
    "RETIRED": "is retired",
}


def status_notice(status: Any, model: str | None) -> str | None:
    """E18: the readable notice of a ``modelStatus`` that warns of a retirement, else None.

    ``gemini-2.5-flash is deprecated and retires on 2027-06-30: <the service's message>``.
    """
    if not isinstance(status, Mapping):
        return None
    stage = status.get("modelStage")
    when = status.get("retirementTime")
    date = when[:10] if isinstance(when, str) and when[:10].count("-") == 2 else None
    words = _STAGES.get(stage) if isinstance(stage, str) else None
    if words is None and date is None:
        return None
    name = model or "the model"
    text = f"{name} {words}" if words is not None else name
    if date is not None:
        verb = "retired on" if stage == "RETIRED" else "retires on"
        text += f" and {verb} {date}" if words is not None else f" {verb} {date}"
    message = status.get("message")
    if isinstance(message, str) and message.strip():
        text += f": {message.strip()}"
    return text
