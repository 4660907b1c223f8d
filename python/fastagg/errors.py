"""Exception classes of fastagg, shared by the Rust core and the pure-Python twin."""

from __future__ import annotations

from typing import Any


class FastaggError(Exception):
    """Base class of every error fastagg raises on purpose."""


class MalformedStreamError(FastaggError, ValueError):
    """A payload of the stream could not be used (aggregation.md F8, F10).

    ``kind`` is ``"invalid-json"``, ``"invalid-utf8"`` or ``"event-too-large"``;
    ``offset`` is the byte offset of the event in the stream, ``event_index``
    its 0-based index among dispatched payloads. The bad event was skipped and
    the aggregator is still usable. ``deltas`` holds every delta that the same
    ``feed()`` call produced from good events; ``errors`` every error of that
    call (this one first).
    """

    def __init__(
        self,
        message: str,
        kind: str,
        offset: int,
        event_index: int,
        deltas: list[Any] | None = None,
        errors: list[MalformedStreamError] | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.offset = offset
        self.event_index = event_index
        self.deltas: list[Any] = [] if deltas is None else deltas
        self.errors: list[MalformedStreamError] = [self] if errors is None else errors


class AggregatorClosed(FastaggError, RuntimeError):
    """``feed*()`` was called after ``close()``."""
