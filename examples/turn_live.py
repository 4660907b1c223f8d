"""The same kind of turn against the real Gemini API; skips politely without a key.

    GEMINI_API_KEY=... python examples/turn_live.py ["your question"]

Vertex AI instead: set GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION) and
install the ``vertex`` extra for Application Default Credentials.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
import zoneinfo

from fastagg import GeminiClient, TurnLimits, run_turn

MODEL = os.environ.get("FASTAGG_MODEL", "gemini-3-flash-preview")


def current_time(timezone: str) -> str:
    """The current local time in a time zone.

    Args:
        timezone: IANA time zone name, e.g. "Europe/Paris" or "Asia/Tokyo".
    """
    return datetime.datetime.now(zoneinfo.ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M %Z")


async def main(question: str) -> None:
    if os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"):
        model = GeminiClient(MODEL)
    elif os.environ.get("GOOGLE_CLOUD_PROJECT"):
        model = GeminiClient(MODEL, vertex=True)
    else:
        print(
            "turn_live.py: set GEMINI_API_KEY (or GOOGLE_CLOUD_PROJECT for Vertex AI) to run "
            "against the real service; skipping."
        )
        return
    async with model:
        result = await run_turn(
            model,
            [{"role": "user", "parts": [{"text": question}]}],
            tools=[current_time],
            limits=TurnLimits(max_steps=5, turn_timeout=120),
        )
    print(result.text)
    print(
        f"-- {result.stop_reason} ({result.raw_finish_reason}), {result.steps_used} steps, "
        f"{result.tool_call_count} tool calls, {result.elapsed:.1f}s, usage {result.usage}"
    )


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "What time is it in Tokyo and in Paris right now?"))
