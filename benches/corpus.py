"""The benchmark corpus (spec/contract/performance.md): six deterministic, seeded SSE bodies.

Every stream is the raw body of a ``streamGenerateContent?alt=sse`` response as
the service frames it: ``data: <json>\\r\\n\\r\\n`` per event, JSON written in the
Gemini style (``": "`` after keys, ``","`` between items, raw UTF-8, ``<`` and
``>`` escaped as ``\\u003c`` / ``\\u003e``). Thought signatures are valid standard
base64 (``+``, ``/``, ``=`` padding) of 0.3-1.5 KB; text mixes ASCII and
non-ASCII words and carries escapes (quotes, backslashes, newlines, tabs).

``build(name, scale=..., giant_mb=...)`` returns a :class:`Stream`; ``scale``
shrinks every stream proportionally (the quick run and the tests use small
scales), ``giant_mb`` sets the size of the ``giant_arg`` argument.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["STREAMS", "Stream", "build", "frame", "giant_arg", "split"]

STREAMS: tuple[str, ...] = (
    "text",
    "tool_parallel",
    "streamed_args",
    "interleaved",
    "agentic",
    "giant_arg",
)

GEMINI_MODEL = "gemini-3-flash-preview"
VERTEX_MODEL = "gemini-3-pro-preview"
VERTEX_TIME = "2026-01-16T15:36:56.727880Z"

Event = dict[str, Any]
Part = dict[str, Any]


@dataclass(frozen=True)
class Stream:
    """One corpus stream: its name, raw body, event count and backend (for the SDK path)."""

    name: str
    body: bytes
    events: int
    vertex: bool

    @property
    def payloads(self) -> list[bytes]:
        """The JSON payload of every event, pre-split (the orjson floor's input)."""
        out = []
        for frame_ in self.body.split(b"\r\n\r\n"):
            if frame_:
                out.append(frame_[6:])  # strip b"data: "
        return out


# --------------------------------------------------------------------------
# Wire helpers
# --------------------------------------------------------------------------


def _dumps(event: Event) -> bytes:
    text = json.dumps(event, ensure_ascii=False, separators=(",", ": "))
    # The service escapes HTML-significant characters inside strings; outside
    # strings the JSON has no '<' or '>', so a plain replace is exact.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").encode("utf-8")


def frame(events: list[Event]) -> bytes:
    """The raw SSE body of ``events``, CRLF framed."""
    return b"".join(b"data: " + _dumps(e) + b"\r\n\r\n" for e in events)


def split(body: bytes, size: int = 4096) -> list[bytes]:
    """``body`` cut into network chunks of ``size`` bytes (the last one shorter)."""
    return [body[i : i + size] for i in range(0, len(body), size)]


def _signature(rng: random.Random) -> str:
    # 225..1125 raw bytes -> 300..1500 base64 characters; some lengths need padding.
    raw = rng.randbytes(rng.randint(225, 1125))
    return base64.b64encode(raw).decode("ascii")


_ASCII_WORDS = (
    "the model reads the file and then calls a tool to check the result before it answers "
    "with a short summary of what changed in the function signature and why the test "
    "failed on the second run because the cache was stale after the refactor of parser"
).split()
_OTHER_WORDS = (
    "café",
    "naïve",
    "Größe",
    "über",
    "señal",
    "façade",
    "日本語",
    "中文",
    "데이터",
    "Привет",
    "мир",
    "αβγ",
    "∑",
    "→",
    "µs",
    "😀",
    "—",
    "«ok»",
    "½",
    "Ω",
)
_ESCAPED_WORDS = (
    '"quoted"',
    "back\\slash",
    "line\nbreak",
    "tab\there",
    "<b>",
    "a&b",
    "C:\\tmp\\x",
    "'x'",
)


def _words(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.82:
            out.append(rng.choice(_ASCII_WORDS))
        elif r < 0.95:
            out.append(rng.choice(_OTHER_WORDS))
        else:
            out.append(rng.choice(_ESCAPED_WORDS))
    return " ".join(out) + " "


def _usage(prompt: int, out: int, thoughts: int = 0) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": prompt}
    if out:
        usage["candidatesTokenCount"] = out
    usage["totalTokenCount"] = prompt + out + thoughts
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


def _gemini_event(
    parts: list[Part],
    response_id: str,
    usage: dict[str, Any],
    finish: str | None = None,
) -> Event:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": GEMINI_MODEL,
        "responseId": response_id,
    }


def _vertex_event(
    parts: list[Part],
    response_id: str,
    usage: dict[str, Any] | None = None,
    finish: str | None = None,
) -> Event:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage if usage is not None else {"trafficType": "ON_DEMAND"},
        "modelVersion": VERTEX_MODEL,
        "createTime": VERTEX_TIME,
        "responseId": response_id,
    }


def _n(base: int, scale: float) -> int:
    return max(2, round(base * scale))


# --------------------------------------------------------------------------
# The six streams
# --------------------------------------------------------------------------


def _text(rng: random.Random, scale: float) -> tuple[list[Event], bool]:
    rid = "resp-text-0001"
    events: list[Event] = []
    prompt, thoughts, out = 1834, 0, 0
    for _ in range(_n(300, scale)):
        thoughts += 9
        part = {"text": _words(rng, rng.randint(5, 25)), "thought": True}
        events.append(_gemini_event([part], rid, _usage(prompt, 0, thoughts)))
    for _ in range(_n(3000, scale)):
        out += 11
        part = {"text": _words(rng, rng.randint(5, 25))}
        events.append(_gemini_event([part], rid, _usage(prompt, out, thoughts)))
    last = {"text": "", "thoughtSignature": _signature(rng)}
    events.append(_gemini_event([last], rid, _usage(prompt, out + 1, thoughts), "STOP"))
    return events, False


def _nested_args(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "query": _words(rng, rng.randint(3, 8)).strip(),
        "filters": [
            {"field": rng.choice(("path", "owner", "lang")), "op": "eq", "value": f"v{i}-{k}"}
            for k in range(rng.randint(1, 3))
        ],
        "options": {"limit": rng.randint(1, 100), "deep": rng.random() < 0.5, "score": 0.25},
    }


def _tool_parallel(rng: random.Random, scale: float) -> tuple[list[Event], bool]:
    rid = "resp-tools-0001"
    events: list[Event] = []
    n = _n(400, scale)
    for i in range(n):
        parts: list[Part] = []
        for k in range(3):
            fc = {
                "id": f"call-{i:04d}-{k}",
                "name": ("search_code", "read_file", "list_dir")[k],
                "args": _nested_args(rng, i),
            }
            part: Part = {"functionCall": fc}
            if k == 0:
                part["thoughtSignature"] = _signature(rng)
            parts.append(part)
        finish = "STOP" if i == n - 1 else None
        events.append(_gemini_event(parts, rid, _usage(4210, 30 * (i + 1), 50), finish))
    return events, False


_CODE_LINES = (
    "def handler(event: dict) -> str:\n",
    '    """Return the greeting for «{name}»."""\n',
    "    return f\"Hello, {event['name']} — µs ≤ 1\\n\"\n",
    "    if x < 10 and y > 2:\n",
    '        path = "C:\\\\Users\\\\dev\\\\data.json"\n',
    "\tcount += 1  # 日本語のコメント\n",
    '    log.info("done: %s", json.dumps({"ok": True}))\n',
    "\n",
)


def _code_fragment(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        line = rng.choice(_CODE_LINES)
        out.append(line)
        length += len(line)
    return "".join(out)[:size]


def _streamed_args(rng: random.Random, scale: float) -> tuple[list[Event], bool]:
    rid = "resp-stream-0001"
    start = {
        "functionCall": {"id": "fc-write-1", "name": "write_file", "willContinue": True},
        "thoughtSignature": _signature(rng),
    }
    events = [_vertex_event([start], rid)]
    path_arg = {"jsonPath": "$.path", "stringValue": "src/app/handlers/greeting.py"}
    events.append(
        _vertex_event([{"functionCall": {"partialArgs": [path_arg], "willContinue": True}}], rid)
    )
    for _ in range(_n(4000, scale)):
        frag = {
            "jsonPath": "$.content",
            "stringValue": _code_fragment(rng, rng.randint(30, 95)),
            "willContinue": True,
        }
        events.append(
            _vertex_event([{"functionCall": {"partialArgs": [frag], "willContinue": True}}], rid)
        )
    scalars = [
        {"jsonPath": "$.content", "stringValue": "# end of file\n"},
        {"jsonPath": "$.overwrite", "boolValue": True},
        {"jsonPath": "$.mode", "numberValue": 420},
    ]
    events.append(
        _vertex_event([{"functionCall": {"partialArgs": scalars, "willContinue": True}}], rid)
    )
    usage = {**_usage(5120, 62000, 310), "trafficType": "ON_DEMAND"}
    events.append(_vertex_event([{"functionCall": {}}], rid, usage, "STOP"))
    return events, True


def _interleaved(rng: random.Random, scale: float) -> tuple[list[Event], bool]:
    rid = "resp-inter-0001"
    a, b = "fc-edit-a", "fc-notes-b"
    events = [
        _vertex_event(
            [
                {
                    "functionCall": {"id": a, "name": "edit_file", "willContinue": True},
                    "thoughtSignature": _signature(rng),
                }
            ],
            rid,
        ),
        _vertex_event(
            [{"functionCall": {"id": b, "name": "write_notes", "willContinue": True}}], rid
        ),
    ]

    def frag(call_id: str, path: str, value: str) -> Event:
        pa = {"jsonPath": path, "stringValue": value, "willContinue": True}
        return _vertex_event(
            [{"functionCall": {"id": call_id, "partialArgs": [pa], "willContinue": True}}], rid
        )

    events.append(frag(a, "$.path", "src/lib/parser.rs"))
    edits = _n(250, scale)
    for k in range(edits):
        for field in ("old_text", "new_text"):
            for _ in range(2):
                events.append(
                    frag(a, f"$.edits[{k}].{field}", _code_fragment(rng, rng.randint(20, 70)))
                )
                events.append(frag(b, f"$.notes[{k}]", _words(rng, rng.randint(3, 9))))
    num = {"jsonPath": "$.edits[0].line", "numberValue": 17}
    events.append(
        _vertex_event(
            [{"functionCall": {"id": a, "partialArgs": [num], "willContinue": True}}], rid
        )
    )
    events.append(_vertex_event([{"functionCall": {"id": a}}], rid))
    usage = {**_usage(7300, 21000, 480), "trafficType": "ON_DEMAND"}
    events.append(_vertex_event([{"functionCall": {"id": b}}], rid, usage, "STOP"))
    return events, True


def _agentic(rng: random.Random, scale: float) -> tuple[list[Event], bool]:
    rid = "resp-agent-0001"
    events: list[Event] = []
    n = _n(300, scale)
    prompt, out = 3000, 0
    for i in range(n):
        out += 40
        usage = _usage(prompt, out, 20 * (i + 1))
        events.append(
            _gemini_event([{"text": _words(rng, rng.randint(8, 25)), "thought": True}], rid, usage)
        )
        events.append(_gemini_event([{"text": _words(rng, rng.randint(5, 25))}], rid, usage))
        signed = {"text": _words(rng, rng.randint(3, 12)), "thoughtSignature": _signature(rng)}
        events.append(_gemini_event([signed], rid, usage))
        call = {
            "functionCall": {
                "id": f"step-{i:03d}",
                "name": rng.choice(("run_shell", "read_file", "grep")),
                "args": {"command": _words(rng, rng.randint(2, 6)).strip(), "cwd": "/work", "n": i},
            },
            "thoughtSignature": _signature(rng),
        }
        finish = "STOP" if i == n - 1 else None
        events.append(_gemini_event([call], rid, usage, finish))
    return events, False


def giant_arg(megabytes: float, *, fragment: int = 16384, seed: int = 6) -> bytes:
    """One streamed call whose ``$.content`` argument is ``megabytes`` MB, in ``fragment``-sized pieces."""
    rng = random.Random(seed)
    rid = "resp-giant-0001"
    pool = [_code_fragment(rng, fragment) for _ in range(16)]
    head = frame(
        [
            _vertex_event(
                [
                    {
                        "functionCall": {
                            "id": "fc-giant",
                            "name": "write_file",
                            "willContinue": True,
                        },
                        "thoughtSignature": _signature(rng),
                    }
                ],
                rid,
            )
        ]
    )
    # Frame each pooled fragment once and repeat the framed bytes: generating a
    # 100 MB body this way takes well under a second.
    framed = [
        frame(
            [
                _vertex_event(
                    [
                        {
                            "functionCall": {
                                "partialArgs": [
                                    {
                                        "jsonPath": "$.content",
                                        "stringValue": p,
                                        "willContinue": True,
                                    }
                                ],
                                "willContinue": True,
                            }
                        }
                    ],
                    rid,
                )
            ]
        )
        for p in pool
    ]
    count = max(1, round(megabytes * 1_000_000 / fragment))
    body = [head]
    body.extend(framed[rng.randrange(len(framed))] for _ in range(count))
    usage = {**_usage(900, 12000000, 0), "trafficType": "ON_DEMAND"}
    body.append(frame([_vertex_event([{"functionCall": {}}], rid, usage, "STOP")]))
    return b"".join(body)


_BUILDERS: dict[str, Callable[[random.Random, float], tuple[list[Event], bool]]] = {
    "text": _text,
    "tool_parallel": _tool_parallel,
    "streamed_args": _streamed_args,
    "interleaved": _interleaved,
    "agentic": _agentic,
}


def build(name: str, *, scale: float = 1.0, giant_mb: float = 50.0, seed: int = 2026) -> Stream:
    """Stream ``name`` of the corpus (deterministic for a given ``scale`` and ``seed``)."""
    if name == "giant_arg":
        body = giant_arg(giant_mb)
        return Stream(name, body, body.count(b"\r\n\r\n"), True)
    if name not in _BUILDERS:
        raise ValueError(f"unknown stream {name!r}; known: {', '.join(STREAMS)}")
    rng = random.Random(f"{seed}-{name}")
    events, vertex = _BUILDERS[name](rng, scale)
    return Stream(name, frame(events), len(events), vertex)
