"""The ``ModelClient`` protocol: what the turn loop needs from a model connection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from ._json import Request

__all__ = ["ModelClient"]


@runtime_checkable
class ModelClient(Protocol):
    """A streaming connection to one model (``fastagg.GeminiClient`` is the built-in one).

    ``stream(request, timeout=...)`` sends ``request`` (a ``GenerateContentRequest``
    body in REST camelCase) to ``streamGenerateContent?alt=sse`` and returns an
    async context manager yielding an async iterator of raw body bytes, in any
    chunking. Contract:

    - HTTP errors raise :class:`fastagg.errors.ProviderError` (``status``,
      ``code``, ``message``, ``retryable``, ``retry_after``), on entering the
      context or while iterating; a dropped connection raises it with
      ``kind="connection"``, a transport timeout with ``kind="timeout"``.
    - ``timeout`` is the time the turn has left for this request (None: no
      limit); the loop enforces its own clocks too.
    - Leaving the context closes the response at once, also when the loop
      cancels the task mid-read (abort, deadline, stall).
    - The request is serialized before ``stream()`` returns or while entering
      the context: the loop reuses the request dict and appends to its
      ``contents`` list after the response is closed, so a client must not
      keep references to them.
    """

    model: str

    def stream(
        self, request: Request, *, timeout: float | None
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """Send ``request`` and stream the raw response body."""
        ...
