"""``GeminiClient``: the built-in ``ModelClient`` for the Gemini API and Vertex AI, on
``streamGenerateContent`` or the Interactions API (``InteractionsClient`` is its
``api="interactions"`` form).

The client only moves bytes: it builds the ``:streamGenerateContent?alt=sse``
URL and headers, serializes the request with orjson, and hands the raw body
chunks to the caller (the turn loop feeds them to the Rust aggregator). Non-200
answers and transport failures become :class:`fastagg.errors.ProviderError`.
The HTTP stack is a :mod:`fastagg.transport` (aiohttp by default, or httpx).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urljoin

import orjson

from .._args import check_client_args, check_str
from .._fastagg import InteractionResponse, StreamAggregator
from .._json import JSONObject, Request
from .._log import CLIENT, DEBUG, failure, safe_url
from ..errors import ProviderError
from ._rpc import http_error as provider_error_from_response
from .interactions_wire import request_body
from .transport import Response, Transport, make_transport, origin_of, pump

if TYPE_CHECKING:
    import aiohttp
    import httpx
    from typing_extensions import Self

__all__ = ["INTERACTIONS_API_REVISION", "GeminiClient", "InteractionsClient"]

GEMINI_API_HOST = "https://generativelanguage.googleapis.com"
VERTEX_GLOBAL_HOST = "https://aiplatform.googleapis.com"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
USER_AGENT = "fastagg/0.1.0"
#: The Interactions API revision every Interactions request names in ``Api-Revision``
#: (I32): the steps schema both aggregators read; google-genai 3.6.1 pins the same value.
INTERACTIONS_API_REVISION = "2026-05-20"

# An error body larger than this is cut (a proxy's HTML page, say).
MAX_ERROR_BODY = 256 * 1024

_MODEL_MARKERS = ("/publishers/google/models/", "/models/")


class GeminiClient:
    """Streams ``streamGenerateContent`` from the Gemini API or Vertex AI (a ``ModelClient``).

    Gemini API (default): ``api_key`` or env ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``,
    sent as ``x-goog-api-key``; API version ``v1beta`` unless ``api_version`` is given.

    Vertex AI (``vertex=True``): with ``project`` (or env ``GOOGLE_CLOUD_PROJECT``)
    the path is ``projects/{p}/locations/{loc}/publishers/google/models/{m}`` on
    ``{loc}-aiplatform.googleapis.com`` (``aiplatform.googleapis.com`` for
    ``location="global"``, the default; env ``GOOGLE_CLOUD_LOCATION``), authorized
    with a bearer token from ``credentials`` or Application Default Credentials
    (needs the ``vertex`` extra, google-auth). Without a project but with an API
    key it is Vertex express mode: ``publishers/google/models/{m}`` on the
    global host. API version ``v1beta1`` unless ``api_version`` is given.

    ``base_url`` replaces scheme and host (and may carry a path prefix); the
    version and resource path are appended as google-genai does with
    ``HttpOptions(base_url=...)``.

    The body is read by aiohttp (``transport="aiohttp"``, the default) or by httpx
    (``transport="httpx"``, with ``pip install 'fastagg[httpx]'``) (H3, H8). No
    redirect is followed: a 3xx answer is a :class:`ProviderError` (H15).
    ``http_client`` is your own ``aiohttp.ClientSession``, ``httpx.AsyncClient``
    or :class:`fastagg.transport.Transport` (several clients may share one);
    it is then not closed by :meth:`aclose` (H4).

    ``api="interactions"`` makes :meth:`stream` POST to the Interactions API
    (``{version}/interactions``, ``model`` and ``"stream": true`` added to the
    body) instead of ``streamGenerateContent``, so the turn loop runs on that
    API (spec/interactions.md I22); :meth:`resume` then reopens a dropped
    stored interaction from its last ``event_id``. On either API, :meth:`create`
    streams one Interactions body as given and :meth:`run` aggregates one
    interaction, resuming a dropped stream (I21).

    Interactions requests send ``Api-Revision: 2026-05-20`` (``api_revision``; I32).

    Use as ``async with GeminiClient(...) as model:`` or call :meth:`aclose`.
    """

    #: Which wire format :meth:`stream` speaks: ``"generate_content"`` or ``"interactions"``.
    api: str = "generate_content"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        vertex: bool = False,
        project: str | None = None,
        location: str | None = None,
        credentials: Any = None,
        base_url: str | None = None,
        http_client: aiohttp.ClientSession | httpx.AsyncClient | Transport | None = None,
        api_version: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: str | None = None,
        api: str | None = None,
        api_revision: str | None = INTERACTIONS_API_REVISION,
    ) -> None:
        # U1: a wrong type is named here, before a key is read or a session opened.
        check_client_args(
            model, api_key, project, location, base_url, api_version, headers, transport, api
        )
        check_str("GeminiClient(): api_revision", api_revision)
        if api is not None:
            if api not in ("generate_content", "interactions"):
                raise ValueError(f"api must be 'generate_content' or 'interactions', got {api!r}")
            self.api = api
        if not model:
            raise ValueError("GeminiClient needs a model name, e.g. 'gemini-3-flash-preview'")
        self.model = model
        self.vertex = vertex
        self.project: str | None = None
        self.location: str | None = None
        self._credentials = credentials
        self._token_lock = asyncio.Lock()
        self._stream_url: tuple[str, str] | None = None
        self._headers: dict[str, str] = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "accept-encoding": "identity",  # H18: a compressed body is only bounded
        }
        if vertex:
            self._init_vertex(model, api_key, project, location, credentials, base_url, api_version)
        else:
            self._init_gemini(model, api_key, base_url, api_version)
        if headers:
            self._headers.update({k.lower(): v for k, v in headers.items()})
        self._sse_headers = _sse_headers(self._headers, api_revision)
        self.transport: Transport
        self.transport, self._owns_http = make_transport(http_client, transport)

    def _init_gemini(
        self, model: str, api_key: str | None, base_url: str | None, api_version: str | None
    ) -> None:
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise ValueError(
                "no API key for the Gemini API: pass GeminiClient(api_key=...) or set "
                "GEMINI_API_KEY (for Vertex AI pass vertex=True)"
            )
        self.api_version = api_version or "v1beta"
        self._auth = "api-key"
        self._headers["x-goog-api-key"] = key
        name = model.removeprefix("models/")
        self.url = _join(base_url or GEMINI_API_HOST, self.api_version, f"models/{name}")

    def _init_vertex(
        self,
        model: str,
        api_key: str | None,
        project: str | None,
        location: str | None,
        credentials: Any,
        base_url: str | None,
        api_version: str | None,
    ) -> None:
        self.api_version = api_version or "v1beta1"
        if api_key and (project or credentials is not None):
            raise ValueError(
                "Vertex AI takes either an API key (express mode) or project/credentials, not both"
            )
        project = project or (None if api_key else os.environ.get("GOOGLE_CLOUD_PROJECT"))
        key = api_key or (None if project else os.environ.get("GOOGLE_API_KEY"))
        name = model.removeprefix("models/")
        if not name.startswith(("publishers/", "projects/")):
            name = f"publishers/google/models/{name}"
        if project is None:
            if not key:
                raise ValueError(
                    "Vertex AI needs project= (or env GOOGLE_CLOUD_PROJECT) with credentials, "
                    "or api_key= (or env GOOGLE_API_KEY) for express mode"
                )
            self._auth = "api-key"
            self._headers["x-goog-api-key"] = key
            self.url = _join(base_url or VERTEX_GLOBAL_HOST, self.api_version, name)
            return
        loc = location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
        self.project = project
        self.location = loc
        self._auth = "bearer"
        host = VERTEX_GLOBAL_HOST if loc == "global" else f"https://{loc}-aiplatform.googleapis.com"
        if not name.startswith("projects/"):
            name = f"projects/{project}/locations/{loc}/{name}"
        self.url = _join(base_url or host, self.api_version, name)

    @property
    def stream_url(self) -> str:
        """The full POST URL of ``streamGenerateContent`` (``alt=sse`` included)."""
        url = self.url
        cached = self._stream_url
        if cached is None or cached[0] != url:  # made once per URL (H9)
            cached = self._stream_url = (url, f"{url}:streamGenerateContent?alt=sse")
        return cached[1]

    @property
    def interactions_url(self) -> str:
        """The Interactions collection URL: POST creates, ``/{id}`` with GET resumes (I21)."""
        for marker in _MODEL_MARKERS:
            head, sep, _ = self.url.rpartition(marker)
            if sep:
                return f"{head}/interactions"
        return f"{self.url}/interactions"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (only when this client created it)."""
        if self._owns_http:
            await self.transport.aclose()

    def __repr__(self) -> str:
        backend = "vertex" if self.vertex else "gemini"
        api = "" if self.api == "generate_content" else f", api={self.api!r}"
        return f"GeminiClient(model={self.model!r}, backend={backend!r}, url={self.url!r}{api})"

    async def _request_headers(self) -> dict[str, str]:
        if self._auth != "bearer":
            return self._headers
        token = await self._bearer_token()
        return {**self._headers, "authorization": f"Bearer {token}"}

    async def _bearer_token(self) -> str:
        async with self._token_lock:
            google_auth = _import_google_auth()
            try:
                creds = self._credentials
                if creds is None:
                    creds, _ = await asyncio.to_thread(
                        google_auth.default, scopes=[CLOUD_PLATFORM_SCOPE]
                    )
                    self._credentials = creds
                if not getattr(creds, "valid", False) or not getattr(creds, "token", None):
                    await asyncio.to_thread(_refresh, creds)
            except google_auth.exceptions.GoogleAuthError as exc:
                raise ProviderError(
                    None,
                    "UNAUTHENTICATED",
                    f"could not get a Vertex AI access token: {type(exc).__name__}: {exc}",
                    False,
                ) from exc
            token: str = creds.token
            return token

    def stream(
        self, request: Request, *, timeout: float | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """POST ``request`` and yield an iterator over the raw body chunks.

        ``timeout`` (seconds) bounds connecting and each wait for bytes; the
        turn loop passes the time it has left. It only ever shortens the
        transport's own timeouts (a caller's smaller one is kept, L36). The
        iterator is the transport's :class:`~fastagg.transport.Response` itself:
        one frame per chunk between the socket and the caller (H6). Raises :class:`ProviderError`
        for a non-200 answer (``kind="http"``), for transport failures before or
        during the body (``kind="connection"``) and for timeouts
        (``kind="timeout"``). The response is closed when the block exits, however
        it exits.
        """
        if self.api == "interactions":
            # I22: the loop's request as an Interactions create body, model and stream added.
            body = {"model": self.model, **request_body(request), "stream": True}
            return self._post(self.interactions_url, body, timeout, sse=True)
        return self._post(self.stream_url, request, timeout)

    def _post(
        self, url: str, request: Request, timeout: float | None, *, sse: bool = False
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        return _Posted(self, url, request, timeout, sse)

    @asynccontextmanager
    async def resume(
        self, interaction_id: str, last_event_id: str | None, *, timeout: float | None = None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET the stream of a stored interaction from the event after ``last_event_id`` (I20).

        Errors as :meth:`stream` raises them; the transport needs a ``get()``
        (both built-in ones have it).
        """
        query = urlencode(
            {"stream": "true", **({"last_event_id": last_event_id} if last_event_id else {})}
        )
        url = f"{self.interactions_url}/{interaction_id}?{query}"
        get = getattr(self.transport, "get", None)
        if get is None:
            raise TypeError(
                f"resuming an interaction needs a transport with get(); "
                f"{type(self.transport).__name__} has only post()"
            )
        headers = {**(await self._request_headers()), **self._sse_headers}
        started = _request_started("GET", url, None)
        try:
            response = await get(url, headers, timeout)
        except BaseException as exc:
            if started is not None:
                _request_ended("GET", url, started, None, exc)
            raise
        error: BaseException | None = None
        try:
            async with streaming_body(response, url) as chunks:
                yield chunks
        except BaseException as exc:
            error = exc
            raise
        finally:
            if started is not None:
                _request_ended("GET", url, started, response, error)

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
        return await _run_interaction(self, request, max_resumes, on_delta, timeout)


async def _run_interaction(
    client: GeminiClient,
    request: JSONObject,
    max_resumes: int,
    on_delta: Callable[[Any], object] | None,
    timeout: float | None,
) -> InteractionResponse:
    """:meth:`GeminiClient.run`: create, pump, and resume a dropped stored interaction (I21)."""
    agg = StreamAggregator(api="interactions")
    feed = agg.feed if on_delta is None else _delivering(agg.feed, on_delta)
    resumes = 0
    opened = client.create(request, timeout=timeout)
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
            opened = client.resume(interaction_id, seen.last_event_id, timeout=timeout)


class InteractionsClient(GeminiClient):
    """``GeminiClient(..., api="interactions")`` under the name earlier releases documented.

    Nothing of its own but the default: :meth:`GeminiClient.create` and
    :meth:`GeminiClient.run` work on every ``GeminiClient``. ``interactions_url`` is
    ``{base}/{version}/interactions`` on the Gemini API,
    ``.../projects/{p}/locations/{l}/interactions`` on Vertex AI and
    ``.../{version}/interactions`` in Vertex express mode.
    """

    api = "interactions"


class _Posted:
    """What :meth:`GeminiClient.stream` returns: the POST on entry, the body's
    iterator as the value, the response closed on exit however the block
    exits (H2). A plain class, not an ``@asynccontextmanager``: a request makes
    no async generator (each is one more object, two frames and the event
    loop's bookkeeping of async generators; H9)."""

    __slots__ = ("_client", "_request", "_response", "_sse", "_started", "_timeout", "_url")

    def __init__(
        self, client: GeminiClient, url: str, request: Request, timeout: float | None, sse: bool
    ) -> None:
        self._client = client
        self._url = url
        self._request = request
        self._timeout = timeout
        self._sse = sse
        self._response: Response | None = None
        self._started: float | None = None

    async def __aenter__(self) -> Response:
        client = self._client
        body = orjson.dumps(self._request)
        # O5: one check per request; nothing is formatted nor timed when it is off.
        started = self._started = _request_started("POST", self._url, body)
        # An API key's headers are the client's own dict, the same each request (H9).
        headers = client._headers if client._auth != "bearer" else await client._request_headers()
        if self._sse:
            headers = {**headers, **client._sse_headers}  # I32: Api-Revision with it
        try:
            response = await client.transport.post(self._url, body, headers, self._timeout)
        except BaseException as exc:
            if started is not None:
                _request_ended("POST", self._url, started, None, exc)
            raise
        try:
            await _raise_unless_ok(response, self._url)
        except BaseException as exc:
            if started is not None:
                _request_ended("POST", self._url, started, response, exc)
            await response.aclose()
            raise
        self._response = response
        return response

    async def __aexit__(self, *exc: object) -> None:
        response, self._response = self._response, None
        if response is not None:
            if self._started is not None:
                error = exc[1] if isinstance(exc[1], BaseException) else None
                _request_ended("POST", self._url, self._started, response, error)
            await response.aclose()


def _request_started(method: str, url: str, body: bytes | None) -> float | None:
    """Log a request as it is sent (O2, debug); its start time, or None when not logged."""
    if not CLIENT.isEnabledFor(DEBUG):
        return None
    if body is None:
        CLIENT.debug("%s %s", method, safe_url(url))
    else:
        CLIENT.debug("%s %s: sending %d bytes", method, safe_url(url), len(body))
    return time.perf_counter()


def _request_ended(
    method: str,
    url: str,
    started: float,
    response: Response | None,
    error: BaseException | None,
) -> None:
    """Log a request's outcome (O2, debug): its status, the bytes received and the time it
    took, or how it failed. Never a header (O3)."""
    elapsed = time.perf_counter() - started
    where = f"{method} {safe_url(url)}"
    received = getattr(response, "received", None)
    got = "" if received is None else f", {received} bytes received"
    if response is None or isinstance(error, ProviderError):
        assert error is not None
        again = " (retryable)" if getattr(error, "retryable", False) else ""
        message = getattr(error, "message", "")
        CLIENT.debug(
            "%s failed after %.3f s%s: %s%s: %s",
            where,
            elapsed,
            got,
            failure(error),
            again,
            message,
        )
        return
    status = f"{response.status} {response.reason}".strip()
    if error is None:
        CLIENT.debug("%s: %s%s in %.3f s", where, status, got, elapsed)
    elif isinstance(error, asyncio.CancelledError):
        CLIENT.debug("%s: %s%s, cancelled after %.3f s", where, status, got, elapsed)
    else:
        CLIENT.debug(
            "%s: %s%s, reading stopped after %.3f s by %s",
            where,
            status,
            got,
            elapsed,
            type(error).__name__,
        )


@asynccontextmanager
async def streaming_body(response: Response, url: str) -> AsyncIterator[Response]:
    """``response`` itself when its status is 200, else its :class:`ProviderError` (H2);
    closed when the block exits, however it exits."""
    try:
        await _raise_unless_ok(response, url)
        yield response
    finally:
        await response.aclose()


async def _raise_unless_ok(response: Response, url: str) -> None:
    """The :class:`ProviderError` of a response whose status is not 200 (H2, H15)."""
    status = response.status
    if 300 <= status < 400:
        raise _redirected(response, url)
    if status != 200:
        raise provider_error_from_response(
            response.status,
            await response.read_error_body(MAX_ERROR_BODY),
            response.headers,
            reason=response.reason,
        )


# H15: the Gemini API never redirects; following one would send the key along
def _redirected(response: Response, url: str) -> ProviderError:
    """A redirect as an error that names where it pointed (its origin only: a
    query may hold a secret of the server's)."""
    location = response.headers.get("location")
    there = origin_of(urljoin(url, location)) if location else origin_of(url)
    return ProviderError(
        response.status,
        None,
        f"HTTP {response.status} {response.reason}".strip()
        + f": the server sent the request on to {there}; fastagg follows no redirect (the"
        " API key or token would go with it): point base_url at the address that answers",
        False,
        kind="http",
    )


def _sse_headers(headers: Mapping[str, str], api_revision: str | None) -> dict[str, str]:
    """What an Interactions request adds to the client's headers: ``Accept``, and the
    revision it was written for unless the caller's headers name one or it is None (I32)."""
    extra = {"accept": "text/event-stream"}
    if api_revision is not None and "api-revision" not in headers:
        extra["api-revision"] = api_revision
    return extra


def _join(base: str, version: str, resource: str) -> str:
    return f"{base.rstrip('/')}/{version.strip('/')}/{resource}"


_VERTEX_NEEDS = (
    "Vertex AI with a project needs google-auth and requests (for its token refresh): "
    "pip install 'fastagg[vertex]' (or use an API key: GeminiClient(..., vertex=True, "
    "api_key=...))"
)


def _import_google_auth() -> Any:
    # H1: google-auth alone has no `requests`, which its token refresh needs; the
    # `vertex` extra asks for google-auth[requests]. Either missing is one message,
    # before anything is sent. requests is looked for, not imported: _refresh imports
    # it in its worker thread, and only when a token has to be refreshed.
    try:
        import google.auth
        import google.auth.exceptions
    except ImportError as exc:
        raise ImportError(f"{_VERTEX_NEEDS}; the import failed: {exc}") from exc
    if importlib.util.find_spec("requests") is None:
        raise ImportError(f"{_VERTEX_NEEDS}; requests is not installed")
    return google.auth


def _refresh(credentials: Any) -> None:
    """Refresh in a worker thread: requests' import and the blocking HTTP stay off the loop."""
    from google.auth.transport.requests import Request

    credentials.refresh(Request())


def _delivering(
    feed: Callable[[bytes], list[Any]], on_delta: Callable[[Any], object]
) -> Callable[[bytes], None]:
    def deliver(chunk: bytes) -> None:
        for delta in feed(chunk):
            on_delta(delta)

    return deliver
