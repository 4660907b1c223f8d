"""The client: ``GeminiClient`` for the Gemini API and Vertex AI, on ``streamGenerateContent``
or the Interactions API, its HTTP transports (:mod:`fastagg.client.transport`, also reached as
:mod:`fastagg.transport`), the google.rpc error mapping and the Interactions wire format.

``GeminiClient`` and ``InteractionsClient`` load on first use (PEP 562): the turn loop and the
google-genai helpers use the error mapping and the wire format without loading an HTTP stack
(spec/performance addendum R1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gemini import GeminiClient, InteractionsClient

__all__ = ["GeminiClient", "InteractionsClient"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'fastagg.client' has no attribute {name!r}")
    from . import gemini

    value = getattr(gemini, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
