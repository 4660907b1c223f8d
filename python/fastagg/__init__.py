"""fastagg: correct and fast Gemini streaming for agent frameworks.

The streaming core (``StreamAggregator``, ``SseDecoder``) is Rust; the turn
loop (``run_turn``, ``stream_turn``) is asyncio Python.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError as _NotInstalled
from importlib.metadata import version as _version
from typing import Union

from ._fastagg import (
    AggregatedResponse,
    ArgDelta,
    CallEnd,
    CallStart,
    Candidate,
    Finish,
    InteractionResponse,
    SseDecoder,
    SseEvent,
    StreamAggregator,
    StreamError,
    TextDelta,
)

# The turn loop imports the aggregator from this package, so it comes after it.
from .client import GeminiClient
from .errors import (
    AggregatorClosed,
    FastaggError,
    InvalidRequestError,
    MalformedStreamError,
    ProviderError,
)
from .events import (
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
from .limits import StopReason, TurnLimits, TurnResult
from .loop import run_turn, stream_turn
from .model import ModelClient
from .request import check_request, map_finish_reason, strip_signatures
from .signatures import Origin, SignaturePolicy
from .tools import Tool, ToolContext, tool

Delta = Union[TextDelta, CallStart, ArgDelta, CallEnd, Finish, StreamError]  # noqa: UP007
"""What ``StreamAggregator.feed()`` returns a list of: one of the six delta classes.

A runtime alias (usable in ``isinstance`` and ``match``); the ``X | Y`` form of classes
needs Python 3.10's ``types.UnionType``, which ``typing.get_args`` reads the same way.
"""

try:
    __version__ = _version("fastagg")
except _NotInstalled:  # pragma: no cover - running from a source tree without install
    __version__ = "0+unknown"

__all__ = [
    "AggregatedResponse",
    "AggregatorClosed",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Delta",
    "FastaggError",
    "Finish",
    "GeminiClient",
    "InteractionResponse",
    "InvalidRequestError",
    "Lifecycle",
    "MalformedStreamError",
    "ModelClient",
    "Origin",
    "ProviderError",
    "SignaturePolicy",
    "SseDecoder",
    "SseEvent",
    "StepEnd",
    "StepStart",
    "StopReason",
    "StreamAggregator",
    "StreamError",
    "TextDelta",
    "ThoughtDelta",
    "Tool",
    "ToolCallDelta",
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
]
