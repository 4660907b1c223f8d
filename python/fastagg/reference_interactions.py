"""The Interactions twin under its earlier name; it lives in ``fastagg.reference.interactions``."""

from .reference.interactions import InteractionResponse, InteractionsAggregator

__all__ = ["InteractionResponse", "InteractionsAggregator"]
