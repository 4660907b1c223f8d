"""What the HTTP client tests send and expect: the request, a two-chunk answer, its
body as FakeGemini frames it, and each transport's exception for a body cut short."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastagg.testing import chunk, final, signature, text, usage

REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
CHUNKS = [chunk(text("Hello"), usage=usage(3)), final(signature("s"), usage=usage(3, 2))]
# The stack's own exception name follows the transport-neutral prefix (H5).
DROP_ERROR = {
    "aiohttp": "ClientPayloadError",
    "httpx": "RemoteProtocolError",
}


def frames(chunks: list[dict[str, Any]]) -> bytes:
    """The SSE body FakeGemini writes for ``chunks``."""
    return b"".join(
        b"data: " + json.dumps(c, ensure_ascii=False, separators=(",", ": ")).encode() + b"\r\n\r\n"
        for c in chunks
    )


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request as a test server reads it: the head, then the ``Content-Length``
    body (returned); ``IncompleteReadError`` once the client has gone."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)
