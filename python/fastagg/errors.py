"""Exception classes of fastagg, shared by the Rust core and the pure-Python twin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ._json import JSONObject

if TYPE_CHECKING:
    from .diagnostics import Diagnostic

ProviderErrorKind = Literal[
    "http", "in-stream", "connection", "no-finish-reason", "malformed", "timeout", "history"
]
"""``ProviderError.kind``: where the failure came from (a Literal: the values stay plain strings)."""


class FastaggError(Exception):
    """Base class of every error fastagg raises on purpose."""


class MalformedStreamError(FastaggError, ValueError):
    """A payload of the stream could not be used (spec/contract/aggregation.md F8, F10).

    ``kind`` is ``"invalid-json"``, ``"invalid-utf8"`` or ``"event-too-large"``, or
    for a body that cannot be read as it was fed (raised whatever ``strict``
    says; nothing more of it is used) ``"compressed-body"`` (U4: feed the
    decompressed bytes) or ``"lines-without-ends"`` (U5: feed the bytes, not lines);
    ``offset`` is the byte offset of the event in the stream, ``event_index``
    its 0-based index among dispatched payloads. The bad event was skipped and
    the aggregator is still usable. ``deltas`` holds every delta that the same
    ``feed()`` call produced from good events; ``errors`` every error of that
    call (this one first). ``diagnostic`` is the payload's diagnostic (the F8 or
    I4 entry of fastagg/diagnostics.json); ``diagnostics`` those of ``errors`` (X4).
    """

    def __init__(
        self,
        message: str,
        kind: str,
        offset: int,
        event_index: int,
        deltas: list[Any] | None = None,
        errors: list[MalformedStreamError] | None = None,
        *,
        diagnostic: Diagnostic | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.offset = offset
        self.event_index = event_index
        self.deltas: list[Any] = [] if deltas is None else deltas
        self.errors: list[MalformedStreamError] = [self] if errors is None else errors
        self.diagnostic = diagnostic

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """X4: the diagnostics of ``errors``, in order."""
        return tuple(e.diagnostic for e in self.errors if e.diagnostic is not None)


class AggregatorClosed(FastaggError, RuntimeError):
    """``feed*()`` was called after ``close()``."""


class ProviderError(FastaggError):
    """The model service failed (HTTP error, error inside a 200 stream, dropped
    connection, or a step that kept ending without a finish reason).

    ``status`` is the HTTP status (None when there was none), ``code`` the
    google.rpc status string (``"RESOURCE_EXHAUSTED"``, ``"INTERNAL"`` …) or
    another short code, ``retryable`` whether trying again can help,
    ``retry_after`` the delay the service asked for in seconds (``Retry-After``
    or ``RetryInfo.retryDelay``), ``kind`` one of ``"http"``, ``"in-stream"``,
    ``"connection"``, ``"no-finish-reason"``, ``"malformed"``, ``"timeout"``,
    ``"history"`` (the model refused the history, L35, or its own output cannot be
    sent back, L33a; see :data:`ProviderErrorKind`);
    ``body`` the error object as received, when there was one.
    """

    def __init__(
        self,
        status: int | None,
        code: str | None,
        message: str,
        retryable: bool,
        retry_after: float | None = None,
        *,
        kind: ProviderErrorKind = "http",
        body: JSONObject | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        self.kind = kind
        self.body = body

    def __repr__(self) -> str:
        return (
            f"ProviderError(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, retryable={self.retryable!r}, "
            f"retry_after={self.retry_after!r}, kind={self.kind!r})"
        )


class InvalidRequestError(FastaggError, ValueError):
    """A request would be rejected by the service (spec/contract/turn-loop.md L2); it was not sent.

    ``where`` names the offending place, e.g. ``"contents[3].parts[0]"``.
    """

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class UnfinishedCallError(FastaggError):
    """The stream ended inside a function call: its arguments are incomplete, so it must not run.

    ``result`` is the closed :class:`~fastagg.AggregatedResponse` of what came:
    ``result.unfinished_calls`` holds the cut-off call(s) with the arguments
    received so far (for display), ``result.function_calls`` only the calls the
    model finished. Nothing was run and nothing was recorded for the cut-off
    exchange: retrying the request is the way on. The google-genai helpers raise
    it as ``fastagg.genai.StreamEndedInsideCall``, which is also their
    ``StreamInterrupted``.
    """

    def __init__(self, message: str, result: Any) -> None:
        super().__init__(message)
        self.result = result
