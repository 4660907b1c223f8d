"""A Google ADK agent (SSE streaming) with fastagg under it (no key, no network).

    pip install 'fastagg[adk]' && python examples/adk_agent.py

``adk.install()`` is the one line: ADK's Gemini model then aggregates its
streams with fastagg. The fake server streams two calls whose argument
fragments interleave (routed by id); ADK's own aggregator would run
``save_note`` with half a title and give ``get_weather`` the rest.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.models.google_llm import Gemini
from google.adk.runners import InMemoryRunner
from google.genai import types

from fastagg.integrations import adk
from fastagg.testing import AGENT_PROMPT, FakeGemini, interleaved_calls_scenario

adk.install()


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    print(f"get_weather(city={city!r})")
    return {"city": city, "temp_c": 24, "sky": "sunny"}


def save_note(title: str, body: str) -> dict[str, Any]:
    """Save a short note for the user."""
    print(f"save_note(title={title!r}, body={body!r})")
    return {"saved": True}


async def main() -> None:
    async with FakeGemini(interleaved_calls_scenario()) as server:
        # base_url and client_kwargs (not client=, which ADK 2.7 lacks): every supported ADK
        model = Gemini(
            model="gemini-3-flash-preview",
            base_url=server.url,
            client_kwargs={"vertexai": True, "api_key": "fake"},
        )
        agent = LlmAgent(
            name="picnic",
            model=model,
            instruction="Help with picnics.",
            tools=[get_weather, save_note],
        )
        runner = InMemoryRunner(agent=agent, app_name="picnic")
        session = await runner.session_service.create_session(app_name="picnic", user_id="me")
        events = runner.run_async(
            user_id="me",
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text=AGENT_PROMPT)]),
            run_config=RunConfig(streaming_mode=StreamingMode.SSE),
        )
        async for event in events:
            if event.partial or not event.content or not event.content.parts:
                continue
            for part in event.content.parts:
                if part.text and not part.thought:
                    print(part.text)
        refused = [r for r in server.records if r.rejection]
    print(f"ok: {len(server.records)} requests, {len(refused)} refused")


if __name__ == "__main__":
    asyncio.run(main())
