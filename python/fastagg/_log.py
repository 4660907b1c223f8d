"""The loggers of fastagg (spec/observability.md "## Logging", O1-O9).

``fastagg`` carries a :class:`logging.NullHandler` and no level, as a library's
logger should: nothing is printed until the application configures logging (O1).
Its children, one per part: ``fastagg.client`` (HTTP requests), ``fastagg.loop``
(steps, retries, resumes, hops, signature changes, the turn's end),
``fastagg.tools`` (tool calls) and ``fastagg.stream`` (the aggregator's
diagnostics of a response the loop read).
"""

from __future__ import annotations

import logging
import re

__all__: list[str] = []

DEBUG = logging.DEBUG
INFO = logging.INFO
WARNING = logging.WARNING

ROOT = logging.getLogger("fastagg")
if not any(isinstance(h, logging.NullHandler) for h in ROOT.handlers):
    ROOT.addHandler(logging.NullHandler())  # O1: silent unless the application says otherwise

CLIENT = logging.getLogger("fastagg.client")
LOOP = logging.getLogger("fastagg.loop")
TOOLS = logging.getLogger("fastagg.tools")
STREAM = logging.getLogger("fastagg.stream")

#: O5: a value shown in a debug record is cut to this many characters.
MAX_SHOWN = 500

_ARGS_TAIL = re.compile(r"(?:; its args: .*| \(its args: .*\))$", re.S)


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment (O3: a key could be in any of them)."""
    cut = len(url)
    for mark in ("?", "#"):
        at = url.find(mark)
        if 0 <= at < cut:
            cut = at
    url = url[:cut]
    start = url.find("//")
    if start >= 0:
        end = url.find("/", start + 2)
        host = url[start + 2 : end if end >= 0 else len(url)]
        if "@" in host:
            url = url[: start + 2] + host.rpartition("@")[2] + ("" if end < 0 else url[end:])
    return url


def shown(value: object) -> str:
    """``repr(value)``, cut to :data:`MAX_SHOWN` characters (for debug records only, O4)."""
    text = repr(value)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN]}... ({len(text)} characters)"
    return text


def plain(text: str) -> str:
    """A text as a log message (O4, O6): without the arguments of a call the aggregator
    left out (a diagnostic's message names no rule, X6)."""
    return _ARGS_TAIL.sub("", text)


def plural(n: int, word: str) -> str:
    """``"1 step"``, ``"2 steps"``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def failure(error: BaseException | None) -> str:
    """What went wrong, in words, without the service's own text (O4): ``"HTTP 503
    UNAVAILABLE"``, ``"connection lost"``, ``"timed out"``; a cancellation or another
    exception by its type."""
    if error is None:
        return "unknown error"
    kind = getattr(error, "kind", None)
    if kind is None:
        return type(error).__name__
    status = getattr(error, "status", None)
    code = getattr(error, "code", None)
    if kind == "http":
        return " ".join(str(x) for x in ("HTTP", status, code) if x is not None)
    if kind == "in-stream":
        label = " ".join(str(x) for x in (status, code) if x is not None)
        return f"{label or 'an error'} in the response stream"
    if kind == "connection":
        return "connection lost"
    if kind == "timeout":
        return "timed out"
    if kind == "malformed":
        return "unreadable response stream"
    return str(code or kind)
