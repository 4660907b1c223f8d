"""One agent turn with local tools against the fake Gemini server (no key, no network).

    python examples/turn_with_fake.py

FakeGemini plays the built-in demo scenario: thoughts, two parallel
``get_weather`` calls, an in-stream 500 that the loop retries, a ``save_note``
call whose arguments stream, and a final answer. The server validates every
request like the real service, so a transcript that lost a signature or
misordered a function response would be refused with the service's 400.
"""

from __future__ import annotations

import asyncio

from fastagg import GeminiClient, TurnLimits, run_turn
from fastagg.testing import DEMO_PROMPT, FakeGemini, demo_scenario, demo_tools


async def main() -> None:
    async with (
        FakeGemini(demo_scenario()) as server,
        GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="fake") as model,
    ):
        result = await run_turn(
            model,
            [{"role": "user", "parts": [{"text": DEMO_PROMPT}]}],
            tools=demo_tools(),
            limits=TurnLimits(max_steps=10, turn_timeout=60),
        )
    print(result.text)
    print(
        f"-- {result.stop_reason}: {result.steps_used} steps, {result.tool_call_count} tool calls, "
        f"retries {result.retries}, {len(server.requests)} requests, "
        f"{result.usage.get('totalTokenCount')} tokens"
    )


if __name__ == "__main__":
    asyncio.run(main())
