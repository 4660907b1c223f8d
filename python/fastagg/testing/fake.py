"""``FakeGemini``: a real HTTP server on loopback that speaks the Gemini ``models`` methods.

Built on aiohttp.web. It replays a script of :class:`Step` objects, one per
request, validates every request like the service (:mod:`.validate`), records
what it received and injects the faults a step asks for. ``streamGenerateContent``
sends a step's chunks; ``generateContent`` answers the same step as one response,
aggregated by :class:`~fastagg.StreamAggregator`; ``countTokens`` answers a count
and uses no step.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from .._fastagg import StreamAggregator
from ._http import _drop, _has_credentials
from .validate import Rejection, _check_signatures, decode_signature, validate_request

if TYPE_CHECKING:
    from typing_extensions import Self

    from .fake_interactions import FakeInteractions, InteractionTurn

__all__ = ["FakeGemini", "RecordedRequest", "Script", "Step", "load_script"]

# Gemini API: /{ver}/models/{m}:method; Vertex: /{ver}/[projects/{p}/locations/{l}/]publishers/google/models/{m}:method
_PATH = re.compile(
    r"^/(?P<version>v1|v1alpha|v1beta|v1beta1)/"
    r"(?P<vertex>(?:projects/[^/]+/locations/[^/]+/)?publishers/google/)?"
    r"models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$"
)

_HTTP_ERRORS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    500: (
        "INTERNAL",
        (
            "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting"
        ),
    ),
    502: ("UNAVAILABLE", "Bad gateway."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
}

_METHODS = ("streamGenerateContent", "generateContent", "countTokens")

_NO_AUTH = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)


@dataclass
class Step:
    """What the server answers to one request.

    ``chunks`` are ``GenerateContentResponse`` dicts, one event each. Faults:

    - ``delay_first_byte``: seconds to wait before the status line (nothing is sent before).
    - ``chunk_interval``: seconds between chunks (a model's pace; 0 sends them back to back).
    - ``pause_after`` / ``pause``: after ``pause_after`` chunks were sent, wait
      ``pause`` seconds (``math.inf``: until the client goes away).
    - ``tiny_writes``: write the body in pieces of this many bytes (0: one write per chunk).
    - ``drop_after``: close the connection after this many chunks, without
      ending the chunked body (the client sees a dropped connection).
    - ``http_error``: answer this status (429, 500, 503 …) with a google.rpc
      error body instead of a stream; ``retry_after`` becomes the
      ``Retry-After`` header, ``retry_delay`` (``"1.5s"``) a ``RetryInfo``
      detail, ``error_message`` replaces the service's default text.
    - ``raw``: send these body bytes verbatim instead of ``chunks`` (a recorded stream).

    In-stream errors and ``MALFORMED_FUNCTION_CALL`` are ordinary chunks
    (:func:`~fastagg.testing.chunks.error_chunk`, :func:`~fastagg.testing.chunks.malformed_call`).
    """

    chunks: list[dict[str, Any]] = field(default_factory=list)
    delay_first_byte: float = 0.0
    chunk_interval: float = 0.0
    pause_after: int | None = None
    pause: float = 0.0
    tiny_writes: int = 0
    drop_after: int | None = None
    http_error: int | None = None
    retry_after: float | str | None = None
    retry_delay: str | None = None
    error_message: str | None = None
    raw: bytes | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        """A step from its JSON form (the keys of this class; ``raw`` as a string)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown step keys {unknown}; known: {sorted(known)}")
        values = dict(data)
        if isinstance(values.get("raw"), str):
            values["raw"] = values["raw"].encode()
        if values.get("pause") in ("inf", "infinity"):
            values["pause"] = math.inf
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this step (defaults left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default or (f.name == "chunks" and not value):
                continue
            if f.name == "raw" and isinstance(value, bytes):
                value = value.decode()
            if f.name == "pause" and value == math.inf:
                value = "inf"
            out[f.name] = value
        return out


Responder = Callable[[dict[str, Any], int], Step | Sequence[dict[str, Any]]]
Script = Sequence[Step | Sequence[dict[str, Any]]] | Responder


def load_script(source: str | Path | Sequence[Any] | Mapping[str, Any]) -> list[Step]:
    """Steps from a JSON file or its parsed content.

    Accepted shapes: a list of steps, or ``{"steps": [...]}``. A step is a list
    of chunks or an object with the keys of :class:`Step`. A path ending in
    ``.sse`` is a recorded body served once, verbatim.
    """
    data: Any = source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.suffix == ".sse":
            return [Step(raw=path.read_bytes())]
        data = orjson.loads(path.read_bytes())
    if isinstance(data, Mapping):
        data = data.get("steps")
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        raise TypeError('a script is a list of steps or {"steps": [...]}')
    return [_as_step(item, n) for n, item in enumerate(data)]


def _as_step(item: Any, n: int) -> Step:
    if isinstance(item, Step):
        return item
    if isinstance(item, Mapping):
        return Step.from_dict(item)
    if isinstance(item, Sequence) and not isinstance(item, (str, bytes)):
        return Step(chunks=[dict(c) for c in item])
    raise TypeError(f"step {n} is neither a list of chunks nor a step object: {item!r:.80}")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received and what it did with it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    backend: str  # "gemini" or "vertex" (from the URL shape), "" when the path matched nothing
    model: str
    status: int  # HTTP status of the answer (0: generateContent dropped the connection, S8)
    step: int | None  # index of the script step served, None when none was
    rejection: str | None  # the 4xx/5xx message when the server refused the request
    peer: str  # client address "host:port" (the same port twice: a reused connection)
    warnings: tuple[str, ...] = ()  # what the service might refuse but the fake served (S5)


class FakeGemini:
    """A fake Gemini endpoint on loopback; an async context manager.

    ``script``: steps served one per request, in order (None: the demo scenario;
    a callable ``(body, index) -> Step | chunks`` answers dynamically).
    ``framing="sse"`` answers SSE with CRLF framing when the URL has
    ``alt=sse`` and JSON-array framing otherwise; ``"array"`` always uses the
    array. With ``validate`` the server refuses invalid requests with the
    service's 400 (see :func:`~fastagg.testing.validate.validate_request`);
    ``check_signatures`` additionally refuses signatures it never issued
    ("Corrupted thought signature."). ``require_auth`` asks for an API key or
    bearer token. ``repeat`` starts the script over when it runs out instead of
    answering 400 ``FAILED_PRECONDITION`` naming the script (``name``: by
    default the script file's name, the responder's name or ``"script"``).
    ``on_request`` is called with each :class:`RecordedRequest`.
    ``interactions`` (a list of :class:`~fastagg.testing.InteractionTurn`)
    also serves the Interactions API endpoints on the same port, from that
    script (a :class:`~fastagg.testing.FakeInteractions`, in ``.interactions``).
    ``ssl_context`` (a server context holding a certificate and its key)
    serves over TLS; ``url`` is then ``https://``.

    Attributes: ``url`` (base URL for ``GeminiClient(base_url=...)`` or
    ``HttpOptions(base_url=...)``), ``requests`` (request bodies in order),
    ``records`` (:class:`RecordedRequest` for every request), ``steps_served``.

    ``streamGenerateContent`` and ``generateContent`` share one script and its
    validation: a ``generateContent`` request gets the next step aggregated into one
    response (a failing step fails as the non-streaming method does: an error status,
    or a dropped connection for a stream cut off). ``countTokens`` answers
    ``{"totalTokens": N}``, one token per 4 characters of each part, and uses no step.

    About 420 lines, over the house's ~300: every handler shares the script, the
    request records and the ledgers of issued signatures and continuation tokens.
    The token ledger (``_check_continuation``, ``_issue_tokens``) and the
    non-streaming answers (``_send_whole``, ``_count_tokens``) are the pieces to
    split out next.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        framing: str = "sse",
        host: str = "127.0.0.1",
        port: int = 0,
        validate: bool = True,
        check_signatures: bool = True,
        require_auth: bool = True,
        repeat: bool = False,
        on_request: Callable[[RecordedRequest], Any] | None = None,
        name: str | None = None,
        interactions: Sequence[InteractionTurn] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if framing not in ("sse", "array"):
            raise ValueError(f"framing must be 'sse' or 'array', not {framing!r}")
        self.name = name if name is not None else _script_name(script)
        if script is None:
            from .scenarios import demo_scenario

            script = demo_scenario()
        self._responder: Responder | None = None
        self._steps: list[Step] = []
        if callable(script):
            self._responder = script
        else:
            self._steps = load_script(script)
        self.framing = framing
        self.host = host
        self.port = port
        self.validate = validate
        self.check_signatures = check_signatures
        self.require_auth = require_auth
        self.repeat = repeat
        self.on_request = on_request
        # S6: served over TLS with this context (its certificate and key), at an https URL
        self.ssl_context = ssl_context
        self.records: list[RecordedRequest] = []
        self.signatures_issued: set[bytes] = set()
        # L56: each continuation token issued -> the request it continues (token left out)
        self.continuations: dict[str, dict[str, Any]] = {}
        self.steps_served = 0
        # I19: the Interactions endpoints, served from their own script beside the models'.
        self.interactions: FakeInteractions | None = None
        if interactions is not None:
            from .fake_interactions import FakeInteractions

            self.interactions = FakeInteractions(interactions, host=host)
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. ``http://127.0.0.1:40123`` (``https`` with ``ssl_context``)."""
        if self._runner is None:
            raise RuntimeError("FakeGemini is not running: use 'async with FakeGemini(...)'")
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def requests(self) -> list[Any]:
        """Bodies of the requests to a model URL, parsed, in arrival order (refused ones included)."""
        return [r.body for r in self.records if r.backend]

    @property
    def script(self) -> list[Step]:
        """The scripted steps (empty for a dynamic responder)."""
        return list(self._steps)

    async def start(self) -> None:
        """Bind and start serving (``async with`` does this)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            self.port = sock.getsockname()[1]
            await web.SockSite(runner, sock, ssl_context=self.ssl_context).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        """Cancel the answers in progress and stop the server."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await self._answer(request)
        finally:
            self._tasks.discard(task)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        if self.interactions is not None and self.interactions.serves(request.path):
            return await self.interactions.handle(request)
        routed = self._route(request, await request.read())
        if isinstance(routed, web.StreamResponse):
            return routed
        body, match = routed
        method = match["method"]
        if method == "countTokens":
            return self._count_tokens(request, body, match)
        warnings: list[str] = []
        if self.validate:
            known = self.signatures_issued if self.check_signatures else None
            rejection = validate_request(
                body, known_signatures=known, model=match["model"], warnings=warnings
            )
            if rejection is not None:
                return self._refuse(request, body, match, rejection)
            refused = self._check_continuation(body)
            if refused is not None:
                return self._refuse(request, body, match, 400, "INVALID_ARGUMENT", refused)
        index = self.steps_served
        step = self._next_step(body, index)
        if step is None:
            # S1: not retryable, so a turn ends at once and says why.
            return self._refuse(
                request,
                body,
                match,
                400,
                "FAILED_PRECONDITION",
                f"FakeGemini: the script {self.name!r} is exhausted: request {index + 1} arrived "
                f"but it has {len(self._steps)} steps (add steps, or pass repeat=True)",
            )
        self.steps_served += 1
        self._issue_signatures(step)
        self._issue_tokens(step, body)
        # S7: generateContent answers the same step whole (or fails as the service would)
        whole = _whole_answer(step) if method == "generateContent" else None
        status = step.http_error or (200 if whole is None else whole[0])
        self._record(request, body, match, status, index, None, warnings)
        if step.delay_first_byte > 0:
            await asyncio.sleep(step.delay_first_byte)
        if step.http_error is not None:
            return self._http_error(step)
        if whole is not None:
            return await self._send_whole(request, step, *whole)
        sse = self.framing == "sse" and request.query.get("alt") == "sse"
        return await self._stream(request, step, sse)

    def _route(
        self, request: web.Request, raw_body: bytes
    ) -> tuple[Any, re.Match[str]] | web.StreamResponse:
        """The request's body and route, or the refusal of a bad route, body or credentials."""
        match = _PATH.match(request.path)
        try:
            body: Any = orjson.loads(raw_body) if raw_body else None
        except orjson.JSONDecodeError as exc:
            body = raw_body.decode("utf-8", "replace")
            if match:
                return self._refuse(
                    request,
                    body,
                    match,
                    400,
                    "INVALID_ARGUMENT",
                    f"Invalid JSON payload received. {exc}",
                )
        if match is None or request.method != "POST":
            return self._refuse(
                request,
                body,
                None,
                404,
                "NOT_FOUND",
                f"FakeGemini: no route for {request.method} {request.path} "
                "(expected POST /{version}/models/{model}:streamGenerateContent, "
                ":generateContent or :countTokens, or a Vertex publishers/google/models path)",
            )
        method = match["method"]
        if method not in _METHODS:
            return self._refuse(
                request,
                body,
                match,
                404,
                "NOT_FOUND",
                f"FakeGemini answers streamGenerateContent, generateContent and countTokens, "
                f"not {method}",
            )
        # S2: a key or bearer token is required (require_auth=False turns it off)
        if self.require_auth and not _has_credentials(request):
            return self._refuse(request, body, match, 403, "PERMISSION_DENIED", _NO_AUTH)
        return body, match

    def _next_step(self, body: Any, index: int) -> Step | None:
        if self._responder is not None:
            answer = self._responder(body if isinstance(body, dict) else {}, index)
            return answer if isinstance(answer, Step) else Step(chunks=list(answer))
        if index < len(self._steps):
            return self._steps[index]
        if self.repeat and self._steps:
            return self._steps[index % len(self._steps)]
        return None

    def _issue_signatures(self, step: Step) -> None:
        for chunk in step.chunks:
            for candidate in chunk.get("candidates") or ():
                for part in (candidate.get("content") or {}).get("parts") or ():
                    sig = part.get("thoughtSignature")
                    raw = decode_signature(sig) if isinstance(sig, str) else None
                    if raw is not None:
                        self.signatures_issued.add(raw)

    def _check_continuation(self, body: Any) -> str | None:
        """L56: a hop must resend the request its token came from, unchanged."""
        token = body.get("continuationToken") if isinstance(body, dict) else None
        if token is None:
            return None
        base = self.continuations.get(token) if isinstance(token, str) else None
        if base is None:
            return "Invalid continuation token."
        if _hop_base(body) != base:
            return (
                "The request with a continuation token must be the request that produced it, "
                "unchanged (same contents and config)."
            )
        return None

    def _issue_tokens(self, step: Step, body: Any) -> None:
        if not isinstance(body, dict):
            return
        base = _hop_base(body)
        for chunk in step.chunks:
            for candidate in chunk.get("candidates") or ():
                token = candidate.get("continuationToken")
                if isinstance(token, str):
                    self.continuations[token] = base

    def _record(
        self,
        request: web.Request,
        body: Any,
        match: re.Match[str] | None,
        status: int,
        step: int | None,
        rejection: str | None,
        warnings: Sequence[str] = (),
    ) -> None:
        backend = "" if match is None else ("vertex" if match["vertex"] else "gemini")
        record = RecordedRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            backend=backend,
            model="" if match is None else match["model"],
            status=status,
            step=step,
            rejection=rejection,
            peer=_peer(request),
            warnings=tuple(warnings),
        )
        self.records.append(record)
        if self.on_request is not None:
            self.on_request(record)

    def _refuse(
        self,
        request: web.Request,
        body: Any,
        match: re.Match[str] | None,
        status: int | Rejection,
        code: str = "",
        message: str = "",
    ) -> web.Response:
        rejection = (
            status if isinstance(status, Rejection) else Rejection(message, "", code, status)
        )
        self._record(request, body, match, rejection.code, None, rejection.message)
        return _json_response(rejection.code, rejection.body())

    def _http_error(self, step: Step) -> web.Response:
        status = step.http_error or 500
        code, default = _HTTP_ERRORS.get(status, ("UNKNOWN", f"HTTP {status}"))
        error: dict[str, Any] = {
            "code": status,
            "message": step.error_message or default,
            "status": code,
        }
        if step.retry_delay is not None:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": step.retry_delay,
                }
            ]
        headers = {}
        if step.retry_after is not None:
            headers["Retry-After"] = _header_number(step.retry_after)
        return _json_response(status, {"error": error}, headers)

    async def _send_whole(
        self, request: web.Request, step: Step, status: int, answer: dict[str, Any] | None
    ) -> web.StreamResponse:
        """S7: after the time the step's stream takes, its whole answer (S8: None is a
        dropped connection, with no status line)."""
        frames = 1 if step.raw is not None else len(step.chunks)
        for n in range(frames):
            if step.drop_after == n:
                break
            if step.pause_after == n:
                await _pause(step.pause)
            if n and step.chunk_interval > 0:
                await asyncio.sleep(step.chunk_interval)
        else:
            pause_at_end = step.pause_after is not None and step.pause_after >= frames
            if pause_at_end and step.drop_after is None:
                await _pause(step.pause)
        if answer is None:
            return _drop(request, web.StreamResponse())
        data = json.dumps(answer, indent=2, ensure_ascii=False).encode()
        response = web.StreamResponse(
            status=status, headers={"Content-Type": "application/json; charset=UTF-8"}
        )
        response.content_length = len(data)
        await response.prepare(request)
        await _write(response, data, step.tiny_writes)
        await response.write_eof()
        return response

    def _count_tokens(self, request: web.Request, body: Any, match: re.Match[str]) -> web.Response:
        """S9: ``{"totalTokens": N}`` from the request's text; uses no step."""
        inner = body.get("generateContentRequest") if isinstance(body, dict) else None
        request_body = inner if isinstance(inner, dict) else body
        contents = request_body.get("contents") if isinstance(request_body, dict) else None
        if contents is not None and not (
            isinstance(contents, list) and all(isinstance(c, dict) for c in contents)
        ):
            return self._refuse(
                request,
                body,
                match,
                400,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received. 'contents' must be a list of Content objects.",
            )
        if self.validate and contents:
            rejection = _check_signatures(contents, None)
            if rejection is not None:
                return self._refuse(request, body, match, rejection)
        system = request_body.get("systemInstruction") if isinstance(request_body, dict) else None
        total = _token_count([*(contents or ()), *([system] if isinstance(system, dict) else ())])
        self._record(request, body, match, 200, None, None)
        answer: dict[str, Any] = {"totalTokens": total}
        if total:
            answer["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": total}]
        return _json_response(200, answer)

    async def _stream(self, request: web.Request, step: Step, sse: bool) -> web.StreamResponse:
        content_type = "text/event-stream" if sse else "application/json; charset=UTF-8"
        response = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        await response.prepare(request)
        frames = [step.raw] if step.raw is not None else list(_frames(step.chunks, sse))
        for n, frame in enumerate(frames):
            # S4: the Step options shape how the body is written
            if step.drop_after == n:
                return _drop(request, response)
            if step.pause_after == n:
                await _pause(step.pause)
            if n and step.chunk_interval > 0:
                await asyncio.sleep(step.chunk_interval)
            await _write(response, frame, step.tiny_writes)
        if step.drop_after is not None and step.drop_after >= len(frames):
            return _drop(request, response)
        if step.pause_after is not None and step.pause_after >= len(frames):
            await _pause(step.pause)
        if not sse and step.raw is None:
            await _write(response, b"\n]" if frames else b"[]", step.tiny_writes)
        await response.write_eof()
        return response


def _whole_answer(step: Step) -> tuple[int, dict[str, Any] | None]:
    """S7: the status and body of a step answered whole: the step's stream aggregated by
    StreamAggregator. S8: an in-stream error becomes its status and error body; a dropped
    or unfinished stream is status 0 and None, a dropped connection."""
    if step.drop_after is not None:
        return 0, None
    aggregator = StreamAggregator(deltas=False, strict=False)
    for frame in [step.raw] if step.raw is not None else _frames(step.chunks, True):
        aggregator.feed(frame)
    result = aggregator.close()
    if result.error is not None:
        code = result.error.get("code") if isinstance(result.error, dict) else None
        status = code if isinstance(code, int) and 400 <= code <= 599 else 500
        return status, {"error": result.error}
    answer = result.to_dict()
    if not answer.get("candidates"):
        answer.pop("candidates", None)
        blocked = isinstance(result.prompt_feedback, dict) and result.prompt_feedback.get(
            "blockReason"
        )
        return (200, answer) if blocked else (0, None)
    finished = all(c.finish_reason and not c.unfinished_calls for c in result.candidates)
    if result.truncated or not finished:
        return 0, None
    return 200, answer


def _token_count(contents: Iterable[Any]) -> int:
    """S9: the fake's deterministic token count: per part, one token per 4 characters
    (rounded up) of a text part's text, or of the compact JSON of any other part (its
    signature left out)."""
    total = 0
    for content in contents:
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                size = len(part["text"])
            else:
                rest = {
                    k: v
                    for k, v in part.items()
                    if k not in ("thoughtSignature", "thought_signature")
                }
                size = len(json.dumps(rest, ensure_ascii=False, separators=(",", ":")))
            total += -(-size // 4)
    return total


def _hop_base(body: dict[str, Any]) -> dict[str, Any]:
    """What a continuation hop must resend (L56): the request without its token, and
    without top-level empty objects, which the API reads as absent (google-genai's own
    hop adds ``"generationConfig": {}`` to a request that had none)."""
    return {k: v for k, v in body.items() if k != "continuationToken" and v != {}}


def _script_name(script: Script | str | Path | None) -> str:
    if script is None:
        return "demo"
    if isinstance(script, (str, Path)):
        return Path(script).name
    if callable(script):
        return str(getattr(script, "__name__", "script"))
    return "script"


def _frames(chunks: Iterable[dict[str, Any]], sse: bool) -> Iterable[bytes]:
    for n, chunk in enumerate(chunks):
        if sse:
            # Google's style: ": " after keys, raw UTF-8, one line, CRLF framing.
            text = json.dumps(chunk, ensure_ascii=False, separators=(",", ": "))
            yield b"data: " + text.encode() + b"\r\n\r\n"
        else:
            text = json.dumps(chunk, ensure_ascii=False, indent=2)
            yield (b"[" if n == 0 else b"\n,\r\n") + text.encode()


async def _write(response: web.StreamResponse, data: bytes, size: int) -> None:
    if size <= 0:
        await response.write(data)
        return
    for i in range(0, len(data), size):
        await response.write(data[i : i + size])
        await asyncio.sleep(0)


async def _pause(seconds: float) -> None:
    if seconds == math.inf:
        await asyncio.Event().wait()  # until the client leaves or the server stops
    elif seconds > 0:
        await asyncio.sleep(seconds)


def _peer(request: web.Request) -> str:
    info = request.transport.get_extra_info("peername") if request.transport else None
    return f"{info[0]}:{info[1]}" if info else ""


def _header_number(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _json_response(
    status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> web.Response:
    # Pretty-printed, as the service sends error bodies.
    text = json.dumps(body, indent=2, ensure_ascii=False)
    return web.Response(
        status=status, text=text, content_type="application/json", charset="utf-8", headers=headers
    )
