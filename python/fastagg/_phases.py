"""The phases of ``Lifecycle`` events, one closed set of strings (spec/contract/turn-loop.md L13).

Its own module because three others name it: :mod:`fastagg.events` (``Lifecycle.phase``,
where users import it), :mod:`fastagg.limits` (``StopReason.phase``) and
:mod:`fastagg.signatures` (``SignatureChange.phase``); ``events`` in turn names types of the
other two (``TurnEnd.result``, ``Lifecycle.provider``), so defining it in any of them
would make an import circle (L100).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["Phase"]

Phase = Literal[
    "time-limit",
    "stalled",
    "aborted",
    "step-cap",
    "context-cap",
    "provider-error",
    "tool-timeout",
    "malformed-retry",
    "no-finish-retry",
    "provider-retry",
    "wrapup",
    "signature-strip",
    "signature-sentinel",
    "duplicate-call-id",
    "response-id-changed",
    "continuation",
    "continuation-resume",
    "stream-resume",
    "needs-confirmation",
    "model-status",
]
"""``Lifecycle.phase``: the L13 phases, then those of L33, L39, L40, L56, L59, I26, L103 and E18."""
