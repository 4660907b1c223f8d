"""``FakeInteractions``: a loopback HTTP server that speaks the streamed Interactions API.

It serves ``POST /{version}/interactions`` (``"stream": true``) from a script of
:class:`InteractionTurn` objects, one per create request, and
``GET /{version}/interactions/{id}?stream=true&last_event_id=...`` (resume) from
the events it sent for that interaction. Stored interactions
(``store`` not false) can be continued with ``previous_interaction_id``; an
unknown or unstored one is a 404, as on the service. The framing is the
service's: ``event: <type>`` + ``data: <one-line JSON>`` + a blank line, every
payload carrying ``event_type`` and an ``event_id``, ``event: done`` /
``data: [DONE]`` at the end (spec/interactions.md).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ._http import _drop, _has_credentials

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "FakeInteractions",
    "InteractionTurn",
    "arguments_step",
    "checkpoint_event",
    "error_event",
    "error_step",
    "text_step",
    "thought_step",
]

# Gemini API /{v}/interactions; Vertex /{v}/[projects/{p}/locations/{l}/]interactions (I21)
_PREFIX = r"^/(?P<version>v1|v1beta|v1alpha|v1beta1)/(?:projects/[^/]+/locations/[^/]+/)?"
_CREATE = re.compile(_PREFIX + r"interactions$")
_GET = re.compile(_PREFIX + r"interactions/(?P<id>[^/:]+)$")


@dataclass
class InteractionTurn:
    """What the server answers to one create request.

    ``events`` are the payloads between ``interaction.created`` (added by the
    server, with the interaction id) and ``interaction.completed`` (added with
    ``status`` and ``usage``; ``status=None`` leaves it out). Faults:
    ``drop_after`` closes the connection after that many events (counting the
    created event) without ``[DONE]``; ``cut_after_bytes`` closes it after that
    many body bytes (inside an event); ``send_done=False`` ends the body
    normally but without the ``[DONE]`` sentinel; ``resume_drops`` makes the
    resumes of this interaction drop again: the k-th resume closes the
    connection after ``resume_drops[k]`` of the events it replays (later
    resumes are served whole). ``continuation_token`` (long
    decode, with ``status="requires_continuation"``) goes on the completed
    interaction; :func:`checkpoint_event` puts checkpoint tokens mid-stream.
    ``errors`` (``{"code", "message"}`` objects) go on the completed
    interaction as its ``errors`` (I37); :func:`error_step` is a step that
    carries its own ``error``.
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = "completed"
    usage: dict[str, Any] | None = None
    drop_after: int | None = None
    send_done: bool = True
    cut_after_bytes: int | None = None
    continuation_token: str | None = None
    resume_drops: Sequence[int] = ()
    errors: list[dict[str, Any]] | None = None


def text_step(index: int, *pieces: str) -> list[dict[str, Any]]:
    """A ``model_output`` step streamed as ``text`` deltas."""
    return [
        {"event_type": "step.start", "index": index, "step": {"type": "model_output"}},
        *(
            {"event_type": "step.delta", "index": index, "delta": {"type": "text", "text": p}}
            for p in pieces
        ),
        {"event_type": "step.stop", "index": index},
    ]


def thought_step(index: int, signature: str, summary: str | None = None) -> list[dict[str, Any]]:
    """A ``thought`` step: an optional summary, then its ``thought_signature`` delta."""
    deltas = []
    if summary is not None:
        content = {"type": "text", "text": summary}
        deltas.append({"type": "thought_summary", "content": content})
    deltas.append({"type": "thought_signature", "signature": signature})
    return [
        {"event_type": "step.start", "index": index, "step": {"type": "thought"}},
        *({"event_type": "step.delta", "index": index, "delta": d} for d in deltas),
        {"event_type": "step.stop", "index": index},
    ]


def arguments_step(index: int, call_id: str, name: str, *fragments: str) -> list[dict[str, Any]]:
    """A ``function_call`` step whose argument text streams as ``arguments_delta`` fragments."""
    start = {"type": "function_call", "id": call_id, "name": name, "arguments": {}}
    return [
        {"event_type": "step.start", "index": index, "step": start},
        *(
            {
                "event_type": "step.delta",
                "index": index,
                "delta": {"type": "arguments_delta", "arguments": f},
            }
            for f in fragments
        ),
        {"event_type": "step.stop", "index": index},
    ]


def error_step(index: int, code: int, message: str, *pieces: str) -> list[dict[str, Any]]:
    """A ``model_output`` step whose ``step.start`` carries ``error``, a google.rpc.Status
    (``code`` a google.rpc.Code number), then its ``text`` deltas (I37)."""
    events = text_step(index, *pieces)
    events[0]["step"]["error"] = {"code": code, "message": message}
    return events


def checkpoint_event(token: str) -> dict[str, Any]:
    """A long-decode checkpoint: ``interaction.status_update`` carrying ``continuation_token``."""
    return {
        "event_type": "interaction.status_update",
        "status": "in_progress",
        "continuation_token": token,
    }


def error_event(code: str, message: str) -> dict[str, Any]:
    """An in-stream ``error`` event (its ``code`` is a string, as on the service)."""
    return {"event_type": "error", "error": {"code": code, "message": message}}


@dataclass
class _Stored:
    events: list[dict[str, Any]]
    store: bool
    request: dict[str, Any]
    tokens: set[str] = field(default_factory=set)  # continuation tokens it issued
    resume_drops: list[int] = field(default_factory=list)  # I19: the next resumes' faults


class FakeInteractions:
    """A fake Interactions API endpoint on loopback; an async context manager.

    Attributes: ``url`` (base URL), ``records`` (``(method, path, query, body)``
    per request), ``headers`` (each request's headers, names lower-cased, in the
    order of ``records``), ``interactions`` (id -> the events sent and the request).
    A script that runs out answers 400 naming the request number.
    """

    def __init__(self, script: Sequence[InteractionTurn], *, host: str = "127.0.0.1") -> None:
        self._script = list(script)
        self.host = host
        self.port = 0
        self.records: list[tuple[str, str, dict[str, str], Any]] = []
        self.headers: list[dict[str, str]] = []
        self.interactions: dict[str, _Stored] = {}
        self._served = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. ``http://127.0.0.1:40123``."""
        if self._runner is None:
            raise RuntimeError("FakeInteractions is not running: use 'async with'")
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()
        self._runner = runner
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    def serves(path: str) -> bool:
        """Whether ``path`` is an Interactions endpoint (FakeGemini routes these here)."""
        return bool(_CREATE.match(path) or _GET.match(path))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request (also when mounted in :class:`~fastagg.testing.FakeGemini`)."""
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.records.append((request.method, request.path, dict(request.query), body))
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        if not _has_credentials(request):
            return _error(401, "unauthenticated", "An API key or bearer token is required.")
        create = _CREATE.match(request.path)
        if create and request.method == "POST":
            return await self._create(request, body)
        get = _GET.match(request.path)
        if get and request.method == "GET":
            return await self._resume(request, get.group("id"))
        return _error(404, "not_found", f"No route for {request.method} {request.path}.")

    async def _create(self, request: web.Request, body: Any) -> web.StreamResponse:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return _error(400, "invalid_request", "'model' is required.")
        if body.get("stream") is not True:
            return _error(
                400, "invalid_request", "FakeInteractions only streams: send stream=true."
            )
        previous = body.get("previous_interaction_id")
        if previous is not None and (
            previous not in self.interactions or not self.interactions[previous].store
        ):
            return _error(404, "not_found", f"Interaction {previous!r} was not found.")
        if "input" not in body and "continuation_token" not in body:
            return _error(400, "invalid_request", "'input' is required.")
        refused = self._check_continuation(body)
        if refused is not None:
            return _error(400, "invalid_request", refused)
        if self._served >= len(self._script):
            return _error(
                400, "failed_precondition", f"script exhausted at request {self._served + 1}"
            )
        turn = self._script[self._served]
        self._served += 1
        interaction_id = f"v1_fake{self._served}"
        events = self._events(interaction_id, turn)
        tokens = {t for e in events if (t := _token(e)) is not None}
        store = body.get("store", True) is not False
        stored = _Stored(events, store, body, tokens, list(turn.resume_drops))
        self.interactions[interaction_id] = stored
        return await _stream(request, events, turn)

    def _check_continuation(self, body: dict[str, Any]) -> str | None:
        """L57: the next hop names the hop that issued its token (stored), or resends its input."""
        token = body.get("continuation_token")
        if token is None:
            return None
        previous = body.get("previous_interaction_id")
        if body.get("store", True) is not False:
            issuer = self.interactions.get(previous) if isinstance(previous, str) else None
            if issuer is None or token not in issuer.tokens:
                return "continuation_token does not belong to previous_interaction_id."
            if "input" in body:
                return "A continuation with previous_interaction_id takes no 'input'."
            return None
        for stored in self.interactions.values():
            if token in stored.tokens:
                if body.get("input") != stored.request.get("input"):
                    return "A stateless continuation must resend the original 'input'."
                return None
        return "Invalid continuation_token."

    async def _resume(self, request: web.Request, interaction_id: str) -> web.StreamResponse:
        stored = self.interactions.get(interaction_id)
        if stored is None or not stored.store:
            return _error(404, "not_found", f"Interaction {interaction_id!r} was not found.")
        last = request.query.get("last_event_id")
        ids = [e["event_id"] for e in stored.events]
        start = ids.index(last) + 1 if last in ids else 0
        drop = stored.resume_drops.pop(0) if stored.resume_drops else None
        return await _stream(request, stored.events[start:], InteractionTurn(drop_after=drop))

    @staticmethod
    def _events(interaction_id: str, turn: InteractionTurn) -> list[dict[str, Any]]:
        created = {
            "event_type": "interaction.created",
            "interaction": {"id": interaction_id, "status": "in_progress", "object": "interaction"},
        }
        events = [created, *turn.events]
        if turn.status is not None:
            done: dict[str, Any] = {"id": interaction_id, "status": turn.status}
            if turn.usage is not None:
                done["usage"] = turn.usage
            if turn.continuation_token is not None:
                done["continuation_token"] = turn.continuation_token
            if turn.errors is not None:
                done["errors"] = turn.errors
            events.append({"event_type": "interaction.completed", "interaction": done})
        stamped = [{**e, "event_id": f"{interaction_id}-e{n}"} for n, e in enumerate(events)]
        for event in stamped:
            if event["event_type"] == "interaction.status_update":
                event.setdefault("interaction_id", interaction_id)
        return stamped


def _token(event: dict[str, Any]) -> str | None:
    """The continuation token an event carries (a checkpoint, or the hop's end)."""
    holder = event.get("interaction") if "interaction" in event else event
    token = holder.get("continuation_token") if isinstance(holder, dict) else None
    return token if isinstance(token, str) else None


async def _stream(
    request: web.Request, events: list[dict[str, Any]], faults: InteractionTurn
) -> web.StreamResponse:
    """Writes ``events`` with the faults of ``faults`` (its events are not used)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    budget = faults.cut_after_bytes
    for n, event in enumerate(events):
        if faults.drop_after == n:
            return _drop(request, response)
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        frame = f"event: {event['event_type']}\ndata: {data}\n\n".encode()
        if budget is not None and len(frame) >= budget:
            await response.write(frame[:budget])
            return _drop(request, response)
        if budget is not None:
            budget -= len(frame)
        await response.write(frame)
        await asyncio.sleep(0)
    if faults.drop_after is not None and faults.drop_after >= len(events):
        return _drop(request, response)
    if faults.send_done:
        await response.write(b"event: done\ndata: [DONE]\n\n")
    await response.write_eof()
    return response


def _error(status: int, code: str, message: str) -> web.Response:
    body = {"error": {"code": code, "message": message}}
    return web.json_response(body, status=status)
