"""fastagg: correct and fast Gemini streaming for agent frameworks.

The streaming core (``StreamAggregator``, ``SseDecoder``) is Rust; the turn
loop (``run_turn``, ``stream_turn``) is asyncio Python.
"""

from __future__ import annotations

from .errors import AggregatorClosed, FastaggError, MalformedStreamError

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
from .errors import InvalidRequestError, ProviderError

# The turn loop imports the aggregator from this package, so it comes after it.
from .client import GeminiClient  # noqa: E402
from .events import (  # noqa: E402
    Lifecycle,
    StepEnd,
    StepStart,
    ThoughtDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
    TurnEvent,
)
from .limits import StopReason, TurnLimits, TurnResult  # noqa: E402
from .loop import run_turn, stream_turn  # noqa: E402
from .model import ModelClient  # noqa: E402
from .request import check_request, map_finish_reason, strip_signatures  # noqa: E402
from .tools import Tool, ToolContext, tool  # noqa: E402

__all__ = [
    "AggregatedResponse",
    "GeminiClient",
    "InvalidRequestError",
    "Lifecycle",
    "ModelClient",
    "ProviderError",
    "StepEnd",
    "StepStart",
    "StopReason",
    "ThoughtDelta",
    "ToolCallDelta",
    "Tool",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolContext",
    "TurnEnd",
    "TurnEvent",
    "TurnLimits",
    "TurnResult",
    "check_request",
    "map_finish_reason",
    "run_turn",
    "stream_turn",
    "strip_signatures",
    "tool",
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
