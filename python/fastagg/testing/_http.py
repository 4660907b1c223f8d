"""What both fake servers (:mod:`.fake`, :mod:`.fake_interactions`) do to an HTTP request.

A module of its own so that neither server imports the other for it: ``FakeGemini``
holds a ``FakeInteractions`` (``FakeGemini(interactions=...)``), so the Interactions fake
cannot import ``fake`` back (L100: no import circles).
"""

from __future__ import annotations

from aiohttp import web


def _drop(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    # Close the socket in the middle of the chunked body: no terminating chunk.
    transport = request.transport
    if transport is not None:
        transport.close()
    response.force_close()
    return response


def _has_credentials(request: web.Request) -> bool:
    auth = request.headers.get("Authorization", "")
    return bool(
        request.headers.get("x-goog-api-key")
        or request.query.get("key")
        or (auth.startswith("Bearer ") and auth[7:].strip())
    )
