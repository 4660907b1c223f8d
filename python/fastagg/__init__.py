"""fastagg: correct and fast Gemini streaming for agent frameworks.

The streaming core (``StreamAggregator``, ``SseDecoder``) is Rust; the turn
loop (``run_turn``, ``stream_turn``) is asyncio Python.
"""

from __future__ import annotations

from .errors import AggregatorClosed, FastaggError, MalformedStreamError

# DEV-ONLY fallback while the Rust binding is being written; removed before the
# streaming-core issue is called resolved.
try:
    from ._fastagg import (
        AggregatedResponse,
        ArgDelta,
        CallEnd,
        CallStart,
        Candidate,
        Finish,
        SseDecoder,
        SseEvent,
        StreamAggregator,
        StreamError,
        TextDelta,
    )
except ImportError:  # pragma: no cover
    from .reference import (  # type: ignore[assignment]
        AggregatedResponse,
        ArgDelta,
        CallEnd,
        CallStart,
        Candidate,
        Finish,
        SseDecoder,
        SseEvent,
        StreamAggregator,
        StreamError,
        TextDelta,
    )

__all__ = [
    "AggregatedResponse",
    "AggregatorClosed",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "FastaggError",
    "Finish",
    "MalformedStreamError",
    "SseDecoder",
    "SseEvent",
    "StreamAggregator",
    "StreamError",
    "TextDelta",
]
