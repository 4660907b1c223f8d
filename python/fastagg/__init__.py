"""fastagg: correct and fast Gemini streaming for agent frameworks.

The streaming core (``StreamAggregator``, ``SseDecoder``) is Rust; the turn
loop (``run_turn``, ``stream_turn``) is asyncio Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

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
from ._version import __version__ as __version__
from .diagnostics import Diagnostic
from .errors import (
    AggregatorClosed,
    FastaggError,
    InvalidRequestError,
    MalformedStreamError,
    ProviderError,
    UnfinishedCallError,
)

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and IDEs
    from .client import GeminiClient
    from .events import (
        AnswerDelta,
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
    from .tools import Tool, ToolContext, ToolMedia, ToolResult, tool

Delta = Union[TextDelta, CallStart, ArgDelta, CallEnd, Finish, StreamError]  # noqa: UP007
"""What ``StreamAggregator.feed()`` returns a list of: one of the six delta classes.

A runtime alias (usable in ``isinstance`` and ``match``); the ``X | Y`` form of classes
needs Python 3.10's ``types.UnionType``, which ``typing.get_args`` reads the same way.
"""

# The turn loop, the HTTP client and their helpers load on first use (PEP 562), so that
# `from fastagg import StreamAggregator` pays for the extension only, not for asyncio,
# httpx or aiohttp (spec/performance addendum R1).
_LAZY = {
    "GeminiClient": "client",
    **dict.fromkeys(
        (
            "AnswerDelta",
            "Lifecycle",
            "StepEnd",
            "StepStart",
            "ThoughtDelta",
            "ToolCallDelta",
            "ToolCallEnd",
            "ToolCallStart",
            "TurnEnd",
            "TurnEvent",
        ),
        "events",
    ),
    **dict.fromkeys(("StopReason", "TurnLimits", "TurnResult"), "limits"),
    **dict.fromkeys(("run_turn", "stream_turn"), "loop"),
    "ModelClient": "model",
    **dict.fromkeys(("check_request", "map_finish_reason", "strip_signatures"), "request"),
    **dict.fromkeys(("Origin", "SignaturePolicy"), "signatures"),
    **dict.fromkeys(("Tool", "ToolContext", "ToolMedia", "ToolResult", "tool"), "tools"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fastagg' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AggregatedResponse",
    "AggregatorClosed",
    "AnswerDelta",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Delta",
    "Diagnostic",
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
    "ToolMedia",
    "ToolResult",
    "TurnEnd",
    "TurnEvent",
    "TurnLimits",
    "TurnResult",
    "UnfinishedCallError",
    "check_request",
    "map_finish_reason",
    "run_turn",
    "stream_turn",
    "strip_signatures",
    "tool",
]
