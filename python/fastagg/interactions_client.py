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
from contextlib import AbstractAsyncContextManager
from typing import Any

from ._fastagg import InteractionResponse, StreamAggregator
from ._json import JSONObject
from .client import GeminiClient
from .errors import ProviderError
from .transport import pump

__all__ = ["InteractionsClient"]


class InteractionsClient(GeminiClient):
    """A :class:`GeminiClient` with ``api="interactions"``; see the module docstring.

    ``interactions_url`` is ``{base}/{version}/interactions`` on the Gemini API,
    ``.../projects/{p}/locations/{l}/interactions`` on Vertex AI and
    ``.../{version}/interactions`` in Vertex express mode.
    """

    api = "interactions"

    def create(
        self, request: JSONObject, *, timeout: float | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """POST ``request`` (an Interactions body; ``model`` and ``"stream": true`` added)
        and stream the body.

        An async context manager yielding the raw body chunks; errors as
        :meth:`GeminiClient.stream` raises them.
        """
        body = {"model": self.model, **request, "stream": True}
        return self._post(self.interactions_url, body, timeout, sse=True)

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
        feed = agg.feed if on_delta is None else _delivering(agg.feed, on_delta)
        resumes = 0
        opened = self.create(request, timeout=timeout)
        while True:
            try:
                async with opened as body:
                    await pump(body, feed)  # H11: on_delta is synchronous, nothing to await
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


def _delivering(
    feed: Callable[[bytes], list[Any]], on_delta: Callable[[Any], object]
) -> Callable[[bytes], None]:
    def deliver(chunk: bytes) -> None:
        for delta in feed(chunk):
            on_delta(delta)

    return deliver
