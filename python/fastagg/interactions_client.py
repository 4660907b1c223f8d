"""``InteractionsClient``: streams the Gemini Interactions API and resumes dropped streams.

A :class:`~fastagg.GeminiClient` (same authentication, hosts, ``base_url`` and
``http_client`` options) whose requests go to ``{version}/interactions``
instead of ``models/{m}:streamGenerateContent``. :meth:`InteractionsClient.run`
sends one create request, aggregates the stream with
``StreamAggregator(api="interactions")`` and, when the connection drops after
the interaction was created, resumes it from the last ``event_id``
(spec/interactions.md I20, I21).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import orjson

from ._fastagg import InteractionResponse, StreamAggregator
from ._json import JSONObject
from .client import GeminiClient, streaming_body
from .errors import ProviderError

__all__ = ["InteractionsClient"]

_MODELS = ("/publishers/google/models/", "/models/")


class InteractionsClient(GeminiClient):
    """Streams ``POST {version}/interactions`` (``"stream": true``); see the module docstring.

    ``interactions_url`` is ``{base}/{version}/interactions`` on the Gemini API,
    ``.../projects/{p}/locations/{l}/interactions`` on Vertex AI and
    ``.../{version}/interactions`` in Vertex express mode.
    """

    @property
    def interactions_url(self) -> str:
        """The collection URL: POST creates, ``/{id}`` with GET resumes."""
        for marker in _MODELS:
            head, sep, _ = self.url.rpartition(marker)
            if sep:
                return f"{head}/interactions"
        return f"{self.url}/interactions"

    @asynccontextmanager
    async def _open(
        self, url: str, body: bytes | None, timeout: float | None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        headers = {**(await self._request_headers()), "accept": "text/event-stream"}
        if body is None:
            get = getattr(self.transport, "get", None)
            if get is None:
                raise TypeError(
                    f"resuming an interaction needs a transport with get(); "
                    f"{type(self.transport).__name__} has only post()"
                )
            response = await get(url, headers, timeout)
        else:
            response = await self.transport.post(url, body, headers, timeout)
        async with streaming_body(response) as chunks:
            yield chunks

    def create(
        self, request: JSONObject, *, timeout: float | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """POST ``request`` (``model`` and ``"stream": true`` added) and stream the body.

        An async context manager yielding the raw body chunks; errors as
        :meth:`GeminiClient.stream` raises them.
        """
        body = orjson.dumps({"model": self.model, **request, "stream": True})
        return self._open(self.interactions_url, body, timeout)

    def resume(
        self, interaction_id: str, last_event_id: str | None, *, timeout: float | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """GET the stream of ``interaction_id`` from the event after ``last_event_id``."""
        query = httpx.QueryParams(
            {"stream": "true", **({"last_event_id": last_event_id} if last_event_id else {})}
        )
        url = f"{self.interactions_url}/{interaction_id}?{query}"
        return self._open(url, None, timeout)

    async def run(
        self,
        request: JSONObject,
        *,
        max_resumes: int = 3,
        on_delta: Callable[[Any], object] | None = None,
        timeout: float | None = None,
    ) -> InteractionResponse:
        """One interaction, aggregated; a dropped stream is resumed (I21).

        A connection error after ``interaction.created`` arrived, on a stored
        interaction (``store`` not false), calls ``reconnect()`` and resumes
        from ``last_event_id``, at most ``max_resumes`` times; otherwise the
        :class:`ProviderError` is raised. ``on_delta`` sees every delta.
        """
        agg = StreamAggregator(api="interactions")
        resumes = 0
        opened = self.create(request, timeout=timeout)
        while True:
            try:
                async with opened as body:
                    async for chunk in body:
                        for delta in agg.feed(chunk):
                            if on_delta is not None:
                                on_delta(delta)
                return agg.close()
            except ProviderError as exc:
                seen = agg.snapshot()
                interaction_id = seen.interaction_id
                if (
                    exc.kind not in ("connection", "timeout")
                    or interaction_id is None
                    or request.get("store", True) is False
                    or resumes >= max_resumes
                ):
                    raise
                resumes += 1
                agg.reconnect()
                opened = self.resume(interaction_id, seen.last_event_id, timeout=timeout)
