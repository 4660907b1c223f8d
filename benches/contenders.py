"""The contenders of spec/contract/performance.md, each a function ``chunks -> result``.

Every contender gets the same network chunks (the stream cut into 4 KiB
pieces) and turns them into an aggregated model turn; :func:`parts_of` maps
each result to the same comparable form (the wire-shaped ``parts`` list of
candidate 0) so the report can check that they agree.

1. ``fastagg`` / ``fastagg+deltas`` / ``fastagg+display``:
   ``fastagg.StreamAggregator(deltas=False|True|"display")`` (``"display"``: what
   the turn loop asks for, performance R5), ``feed()`` per chunk, then ``close()``
   and ``.parts``.
2. ``reference``: ``fastagg.reference.StreamAggregator``, the same calls.
3. ``google-genai``: the SDK's own streaming path, in process. A real
   ``genai.Client`` whose transport method ``_api_client._request`` is replaced
   by one that returns the SDK's ``HttpResponse`` around an ``httpx.Response``
   streaming our chunks; ``client.models.generate_content_stream`` then runs
   unchanged: its CR/LF line decoder, ``data: `` handling, ``json.loads``,
   ``json.dumps`` error check, ``json.loads`` again, ``_from_mldev`` /
   ``_from_vertex``, ``GenerateContentResponse._from_response`` and the
   continuation bookkeeping, per event. A straightforward Python aggregation
   of the chunk objects follows (:func:`aggregate_genai`).
4. ``orjson floor``: ``orjson.loads`` of every event payload, pre-split (no
   framing, no aggregation, nothing to compare).
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

import fastagg
import fastagg.reference

from .corpus import Stream

__all__ = [
    "CONTENDERS",
    "Contender",
    "Prepared",
    "aggregate_genai",
    "genai_available",
    "parts_of",
    "prepare",
]


@dataclass
class Prepared:
    """What a contender is timed on: the stream, its 4 KiB chunks, its payloads, a client."""

    stream: Stream
    chunks: list[bytes]
    payloads: list[bytes]
    genai_client: Any = None


@dataclass(frozen=True)
class Contender:
    """A named way to turn a stream into an aggregated turn."""

    name: str
    run: Callable[[Prepared], Any]
    comparable: bool = True  # False for the floor, which aggregates nothing


def prepare(stream: Stream, chunk_size: int = 4096, *, with_genai: bool = True) -> Prepared:
    """Cut ``stream`` into chunks and payloads (outside any timing)."""
    chunks = [stream.body[i : i + chunk_size] for i in range(0, len(stream.body), chunk_size)]
    client = _genai_client(stream.vertex) if with_genai and genai_available() else None
    return Prepared(stream, chunks, stream.payloads, client)


# --------------------------------------------------------------------------
# 1-2. fastagg and its pure-Python twin
# --------------------------------------------------------------------------


def _aggregator(factory: Callable[..., Any], deltas: bool | str) -> Callable[[Prepared], Any]:
    def run(prep: Prepared) -> Any:
        agg = factory(deltas=deltas)
        feed = agg.feed
        for chunk in prep.chunks:
            feed(chunk)
        result = agg.close()
        return result.parts  # what an agent reads; included in the timing

    return run


# --------------------------------------------------------------------------
# 3. google-genai
# --------------------------------------------------------------------------


def genai_available() -> bool:
    """Whether google-genai (with httpx) is importable."""
    try:
        import httpx  # noqa: F401
        from google import genai  # noqa: F401
    except ImportError:
        return False
    return True


class _CannedTransport:
    """Stands in for ``BaseApiClient._request``: the response streams the current chunks."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def __call__(self, http_request: Any, http_options: Any = None, stream: bool = False) -> Any:
        import httpx
        from google.genai import _api_client

        body = httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=iter(self.chunks),
        )
        return _api_client.HttpResponse(dict(body.headers), response_stream=body)


def _genai_client(vertex: bool) -> Any:
    from google import genai

    client = (
        genai.Client(vertexai=True, api_key="bench") if vertex else genai.Client(api_key="bench")
    )
    client._api_client._request = _CannedTransport()
    return client


def _run_genai(prep: Prepared) -> Any:
    client = prep.genai_client
    if client is None:
        raise RuntimeError("google-genai is not installed")
    client._api_client._request.chunks = prep.chunks
    model = "gemini-3-pro-preview" if prep.stream.vertex else "gemini-3-flash-preview"
    responses = client.models.generate_content_stream(model=model, contents="benchmark")
    return aggregate_genai(responses)


_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def _set_path(args: dict[str, Any], path: str, value: Any, append: bool) -> None:
    """Set ``value`` at JSON path ``path`` (``$.a[0].b``) in ``args``, creating containers."""
    tokens: list[str | int] = []
    for m in _PATH_TOKEN.finditer(path, 1):
        tokens.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
    node: Any = args
    for here, nxt in itertools.pairwise(tokens):
        empty: Any = [] if isinstance(nxt, int) else {}
        if isinstance(here, int):
            while len(node) <= here:
                node.append(None)
            if node[here] is None:
                node[here] = empty
            node = node[here]
        else:
            node = node.setdefault(here, empty)
    last = tokens[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
        current = node[last]
        node[last] = current + value if append and isinstance(current, str) else value
    else:
        current = node.get(last)
        node[last] = current + value if append and isinstance(current, str) else value


def _sig(part: Any) -> str | None:
    raw = part.thought_signature
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def aggregate_genai(responses: Iterable[Any]) -> list[dict[str, Any]]:
    """Aggregate SDK ``GenerateContentResponse`` chunks into wire-shaped parts (candidate 0).

    Text runs with the same thought flag are concatenated, signed and other
    parts are kept as they are, complete calls are kept, streamed calls
    (``partial_args`` / ``will_continue``) are assembled by id or into the most
    recent open call. Signatures, bytes in the SDK, are written back as
    standard base64 so they compare with the wire strings.
    """
    parts: list[dict[str, Any]] = []
    run: dict[str, Any] | None = None  # the open plain-text part
    open_calls: dict[str, dict[str, Any]] = {}  # id (or "") -> part under construction
    last_open: dict[str, Any] | None = None
    for response in responses:
        candidates = response.candidates
        if not candidates or candidates[0].content is None or not candidates[0].content.parts:
            continue
        for part in candidates[0].content.parts:
            fc = part.function_call
            sig = _sig(part)
            if fc is not None:
                if (
                    fc.partial_args
                    or fc.will_continue is not None
                    or (fc.name is None and fc.args is None)
                ):
                    key = fc.id or ""
                    target = open_calls.get(key) if fc.id else None
                    if target is None and fc.id is None and fc.name is None:
                        target = last_open
                    if target is None:
                        if fc.name is None and not fc.partial_args:
                            continue  # an end marker with nothing open
                        run = None
                        call: dict[str, Any] = {}
                        if fc.id is not None:
                            call["id"] = fc.id
                        call["name"] = fc.name
                        call["args"] = {}
                        target = {"functionCall": call}
                        if sig is not None:
                            target["thoughtSignature"] = sig
                        parts.append(target)
                        open_calls[key] = target
                    args = target["functionCall"]["args"]
                    for pa in fc.partial_args or ():
                        if pa.string_value is not None:
                            _set_path(args, pa.json_path, pa.string_value, True)
                        elif pa.number_value is not None:
                            _set_path(args, pa.json_path, pa.number_value, False)
                        elif pa.bool_value is not None:
                            _set_path(args, pa.json_path, pa.bool_value, False)
                    last_open = target
                    if not fc.will_continue:
                        for k, v in list(open_calls.items()):
                            if v is target:
                                del open_calls[k]
                        last_open = next(reversed(open_calls.values()), None)
                    continue
                run = None
                call = {}
                if fc.id is not None:
                    call["id"] = fc.id
                if fc.name is not None:
                    call["name"] = fc.name
                if fc.args is not None:
                    call["args"] = fc.args
                done: dict[str, Any] = {"functionCall": call}
                if sig is not None:
                    done["thoughtSignature"] = sig
                parts.append(done)
                continue
            if part.text is not None:
                thought = bool(part.thought)
                if sig is None:
                    if not part.text:
                        continue
                    if run is not None and bool(run.get("thought")) == thought:
                        run["text"] += part.text
                    else:
                        run = (
                            {"text": part.text, "thought": True} if thought else {"text": part.text}
                        )
                        parts.append(run)
                    continue
                run = None
                signed: dict[str, Any] = {"text": part.text}
                if part.thought is not None:
                    signed["thought"] = part.thought
                signed["thoughtSignature"] = sig
                parts.append(signed)
                continue
            run = None
            parts.append(part.model_dump(mode="json", by_alias=True, exclude_none=True))
    return parts


# --------------------------------------------------------------------------
# 4. the floor
# --------------------------------------------------------------------------


def _run_floor(prep: Prepared) -> Any:
    loads = orjson.loads
    for payload in prep.payloads:
        loads(payload)
    return None


CONTENDERS: tuple[Contender, ...] = (
    Contender("fastagg", _aggregator(fastagg.StreamAggregator, False)),
    Contender("fastagg+deltas", _aggregator(fastagg.StreamAggregator, True)),
    Contender("fastagg+display", _aggregator(fastagg.StreamAggregator, "display")),
    Contender("reference", _aggregator(fastagg.reference.StreamAggregator, False)),
    Contender("google-genai", _run_genai),
    Contender("orjson floor", _run_floor, comparable=False),
)


def parts_of(result: Any) -> list[dict[str, Any]]:
    """The comparable form of a contender's result: the wire-shaped parts of candidate 0."""
    return list(result)


def by_name(names: Iterable[str]) -> Iterator[Contender]:
    """The contenders called ``names``, in table order."""
    wanted = set(names)
    return (c for c in CONTENDERS if c.name in wanted)
