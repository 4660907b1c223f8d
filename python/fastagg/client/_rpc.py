"""google.rpc errors -> :class:`ProviderError`: one mapper for HTTP answers and in-stream errors.

``GeminiClient`` and ``InteractionsClient`` map a non-200 answer with
:func:`http_error` (H2), the turn loop an ``{"error": {...}}`` event inside a
200 stream with :func:`stream_error`, and :func:`retryable` is the loop's
retry test (L3, L17). The retryable statuses and codes are defined here only.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from typing import Literal

import orjson

from .._json import JSONObject
from ..errors import ProviderError

#: HTTP statuses that are worth retrying (spec/contract/turn-loop.md L3).
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
#: google.rpc codes that are worth retrying (L3), whatever the HTTP status said (L17).
RETRYABLE_CODES = frozenset({"RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED"})

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)s\s*$")


def rpc_error(
    error: JSONObject,
    *,
    status: int | None,
    kind: Literal["http", "in-stream"],
    fallback: str,
    retry_after: float | None = None,
    body: JSONObject | None = None,
) -> ProviderError:
    """The ProviderError of a google.rpc.Status object (``code``, ``message``, ``status``, ``details``).

    ``status`` is the HTTP status (for an in-stream error: the object's own
    ``code``); ``retry_after`` a ``Retry-After`` that wins over ``RetryInfo``
    (H2). An HTTP error is retryable by its status (H2); an in-stream one also by
    its code, as it has no HTTP status of its own.
    """
    code = error.get("status") if isinstance(error.get("status"), str) else None
    if retry_after is None:
        retry_after = retry_info_delay(error.get("details"))
    is_retryable = status in RETRYABLE_STATUSES or (kind == "in-stream" and code in RETRYABLE_CODES)
    return ProviderError(
        status,
        code,
        str(error.get("message") or fallback),
        is_retryable,
        retry_after,
        kind=kind,
        body=body if body is not None else error,
    )


def http_error(
    status: int,
    body: bytes,
    headers: Mapping[str, str] | None = None,
    *,
    reason: str = "",
    now: float | None = None,
) -> ProviderError:
    """The ``ProviderError`` of a non-200 answer with this status, body and headers (H2).

    The body is a google.rpc.Status JSON (``{"error": {"code", "message",
    "status", "details"}}``, sometimes wrapped in a one-element array); anything
    else is quoted in the message (``code=None``).
    """
    try:
        parsed = orjson.loads(body) if body.strip() else None
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
        parsed = parsed[0]
    retry_after = parse_retry_after((headers or {}).get("retry-after"), now=now)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        fallback = f"HTTP {status} {reason}".strip()
        return rpc_error(
            parsed["error"],
            status=status,
            kind="http",
            fallback=fallback,
            retry_after=retry_after,
            body=parsed,
        )
    # H2: a non-JSON body gives code=None and is quoted
    text = body.decode("utf-8", "replace").strip()
    snippet = text[:300] + ("…" if len(text) > 300 else "")
    message = f"HTTP {status} {reason}".strip() + (f": {snippet}" if snippet else "")
    return ProviderError(status, None, message, status in RETRYABLE_STATUSES, retry_after)


def stream_error(error: JSONObject) -> ProviderError:
    """The ProviderError of an in-stream google.rpc error object (L16, L19)."""
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    return rpc_error(
        error, status=status, kind="in-stream", fallback="error event in the response stream"
    )


def retryable(error: ProviderError) -> bool:
    """L17: a status or code of the L3 list is retryable whatever the client said."""
    return (
        bool(error.retryable) or error.status in RETRYABLE_STATUSES or error.code in RETRYABLE_CODES
    )


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return max(seconds, 0.0)


def retry_info_delay(details: object) -> float | None:
    """``retryDelay`` of a ``google.rpc.RetryInfo`` detail: ``"1.5s"`` or ``{"seconds", "nanos"}``."""
    if not isinstance(details, list):
        return None
    for detail in details:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith(
            "google.rpc.RetryInfo"
        ):
            continue
        delay = detail.get("retryDelay")
        if isinstance(delay, str):
            match = _DURATION.match(delay)
            if match:
                return float(match.group(1))
        elif isinstance(delay, dict):
            try:
                return float(delay.get("seconds", 0)) + float(delay.get("nanos", 0)) / 1e9
            except (TypeError, ValueError):
                return None
    return None
