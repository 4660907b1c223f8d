"""A target's verdict in the report, shared by its sections (K5)."""

from __future__ import annotations

from typing import Any


def judge(settings: Any, ok: bool) -> str:
    """ "met" or "not met"; none for a --quick run, which one iteration cannot judge."""
    if settings.quick:
        return "not judged in --quick"
    return "met" if ok else "not met"
