"""A UI-style consumer: render aggregator deltas live while the HTTP body streams in.

    python examples/ui_deltas.py

Streams one response from FakeGemini (thoughts, then a call whose arguments
arrive as ``partialArgs`` fragments) through ``GeminiClient.stream`` into a
``StreamAggregator`` and reacts to each delta as a chat UI would: thought text
greyed out, answer text appended, a tool card opened on ``CallStart`` and
filled in on ``ArgDelta``, closed on ``CallEnd``.
"""

from __future__ import annotations

import asyncio
import json

from fastagg import (
    ArgDelta,
    CallEnd,
    CallStart,
    Finish,
    GeminiClient,
    StreamAggregator,
    StreamError,
    TextDelta,
)
from fastagg.testing import (
    FakeGemini,
    Step,
    chunk,
    final,
    signature,
    streamed_call,
    thought,
)

SCRIPT = [
    Step(
        chunks=[
            chunk(thought("**Drafting the note**\n\nI'll save the packing list.")),
            *streamed_call(
                "save_note",
                {"title": "Picnic", "body": "Sunscreen, a hat, a blanket, water."},
                id="fc_1",
                signature=signature("ui example"),
                piece=8,
            ),
            final(),
        ],
        tiny_writes=16,
    )
]


def render(delta: object) -> None:
    match delta:
        case TextDelta(_, _, text, True):
            print(f"\x1b[2m{text}\x1b[0m", end="", flush=True)
        case TextDelta(_, _, text, False):
            print(text, end="", flush=True)
        case CallStart(_, index, call_id, name):
            print(f"\n[tool card #{index}] {name} (id {call_id})", flush=True)
        case ArgDelta(_, _, json_path, value):
            print(f"    {json_path} += {json.dumps(value)}", flush=True)
        case CallEnd(_, _, call):
            print(f"    ready: {json.dumps(call['args'])}", flush=True)
        case Finish(_, reason):
            print(f"[finished: {reason}]")
        case StreamError(error):
            print(f"[stream error: {error}]")


async def main() -> None:
    request = {"contents": [{"role": "user", "parts": [{"text": "Save my picnic list."}]}]}
    aggregator = StreamAggregator()
    async with (
        FakeGemini(SCRIPT) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="fake") as model,
        model.stream(request, timeout=30) as body,
    ):
        async for block in body:
            for delta in aggregator.feed(block):
                render(delta)
    result = aggregator.close()
    print("history part:", json.dumps(result.parts[-1]))


if __name__ == "__main__":
    asyncio.run(main())
