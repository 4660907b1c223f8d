"""Pure-Python twin of the Rust streaming core (``fastagg._fastagg``).

It follows ``spec/contract/aggregation.md`` and the developers' addendum
``spec/aggregation.md`` to the letter, warning texts included: it is the
oracle of the differential tests and the baseline of the benchmarks. It is
written for clarity first, but every step is linear in its input (no buffer is
re-scanned or re-joined per chunk).

The package mirrors ``rust/core/src`` file for file:

- ``framing``: raw body bytes -> frames (event payloads, framing warnings),
  F1-F15, and the generic WHATWG decoder ``framing.decoder`` (F15);
- ``event``: payload validation, size -> UTF-8 -> JSON -> object (F8, F10),
  with the error texts in ``error``;
- ``json_path``: the paths of streamed partial args (C4, C5, C9, C16);
- ``aggregate``: the event / candidate / part / call state machine (E, P and
  C rules) and the results (``AggregatedResponse``, ``Candidate``, D1-D8);
- ``diagnostics``: every warning as a ``fastagg.Diagnostic`` rendered from the
  shared catalog (spec/diagnostics.md X1-X5);
- ``interactions``: the Interactions API twin (I rules).
"""

from __future__ import annotations

from ..diagnostics import Diagnostic

# ``__all__`` as before; the ``X as X`` imports are the other top-level names the
# single-module twin had, still importable from here.
from .aggregate import StreamAggregator
from .aggregate.response import (
    AggregatedResponse,
    ArgDelta,
    CallEnd,
    CallStart,
    Candidate,
    Finish,
    StreamError,
    TextDelta,
)
from .aggregate.response import Delta as Delta
from .error import EVENT_TOO_LARGE as EVENT_TOO_LARGE
from .error import INVALID_JSON as INVALID_JSON
from .error import INVALID_UTF8 as INVALID_UTF8
from .framing import INCOMPLETE as INCOMPLETE
from .framing import PAYLOAD as PAYLOAD
from .framing import TOO_LARGE as TOO_LARGE
from .framing import UNTERMINATED as UNTERMINATED
from .framing import WARNING as WARNING
from .framing import Frame as Frame
from .framing.decoder import SseDecoder, SseEvent
from .json_path import Segment as Segment
from .json_path import parse_json_path as parse_json_path

__all__ = [
    "AggregatedResponse",
    "ArgDelta",
    "CallEnd",
    "CallStart",
    "Candidate",
    "Diagnostic",
    "Finish",
    "SseDecoder",
    "SseEvent",
    "StreamAggregator",
    "StreamError",
    "TextDelta",
]
