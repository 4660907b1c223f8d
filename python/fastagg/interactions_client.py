"""The documented path of ``InteractionsClient``: ``GeminiClient(..., api="interactions")``
(:mod:`fastagg.client`)."""

from .client.gemini import InteractionsClient

__all__ = ["InteractionsClient"]
