"""Token usage of a turn (L12) and the context guard built on it (L11, L23)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .._json import Content, Usage

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []


class UsageMeter:
    """Sums usage over the requests of a turn and estimates the next prompt's size."""

    __slots__ = ("_chars_since", "_prompt_tokens", "by_step", "cap", "total")

    def __init__(self, max_context_tokens: int | None) -> None:
        self.cap = max_context_tokens
        self.total: Usage = {}
        self.by_step: list[Usage] = []
        self._prompt_tokens: int | None = None
        self._chars_since = 0

    def record(self, usage: Usage | None) -> None:
        """One request's usage (``{}`` when it reported none)."""
        # L12: every request counts, failed attempts and the final answer included
        usage = usage or {}
        self.by_step.append(usage)
        if usage:
            add_usage(self.total, usage)
            # L23, I27: the prompt size as either API reports it
            prompt = usage.get("promptTokenCount", usage.get("total_input_tokens"))
            if isinstance(prompt, int):
                self._prompt_tokens = prompt
                self._chars_since = 0

    def appended(self, content: Content) -> None:
        """L23: what is appended after a reported prompt size counts as its compact JSON / 4."""
        self._chars_since += len(orjson.dumps(content))

    def exceeded(self) -> bool:
        """L11, L23: the next request would not fit ``max_context_tokens``."""
        if self.cap is None or self._prompt_tokens is None:
            return False
        return self._prompt_tokens + self._chars_since / 4 > self.cap


def add_usage(total: Usage, usage: Mapping[str, Any]) -> None:
    """Sum ``usage`` into ``total`` field by field (L12); per-modality lists by modality."""
    for key, value in usage.items():
        if type(value) is int:  # L71: the usual field first (a bool is not an int here)
            total[key] = total.get(key, 0) + value
        elif isinstance(value, bool) or not isinstance(value, (int, float, list)):
            total[key] = value
        elif isinstance(value, list):
            merged = {
                d.get("modality"): dict(d) for d in total.get(key, []) if isinstance(d, Mapping)
            }
            for entry in value:
                if not isinstance(entry, Mapping):
                    continue
                have = merged.get(entry.get("modality"))
                if have is None:
                    merged[entry.get("modality")] = dict(entry)
                else:
                    have["tokenCount"] = have.get("tokenCount", 0) + entry.get("tokenCount", 0)
            total[key] = list(merged.values())
        else:
            total[key] = total.get(key, 0) + value
