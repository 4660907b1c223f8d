"""A pydantic-ai agent on fastagg's GoogleModel (no key, no network).

    pip install 'fastagg[pydantic-ai]' && python examples/pydantic_ai_agent.py

The fake server streams a ``save_note`` call whose arguments arrive as Vertex
``partialArgs`` fragments. pydantic-ai's own GoogleModel turns each fragment
into a tool call of its own, so the tool never runs and the run "completes";
``fastagg.integrations.pydantic_ai.GoogleModel`` hands it the whole call.
"""

from __future__ import annotations

import asyncio

from google import genai
from google.genai import types
from pydantic_ai import Agent
from pydantic_ai.providers.google import GoogleProvider

from fastagg.integrations.pydantic_ai import GoogleModel
from fastagg.testing import AGENT_PROMPT, FakeGemini, streamed_args_scenario


def save_note(title: str, body: str) -> str:
    """Save a short note for the user.

    Args:
        title: Title of the note.
        body: Text of the note.
    """
    print(f"save_note(title={title!r}, body={len(body)} characters)")
    return "saved"


async def main() -> None:
    async with FakeGemini(streamed_args_scenario()) as server:
        client = genai.Client(
            vertexai=True, api_key="fake", http_options=types.HttpOptions(base_url=server.url)
        )
        model = GoogleModel("gemini-3-flash-preview", provider=GoogleProvider(client=client))
        agent = Agent(model, tools=[save_note])
        async with agent.run_stream(AGENT_PROMPT) as run:
            async for text in run.stream_text(delta=True):
                print(text, end="", flush=True)
        print()
        refused = [r for r in server.records if r.rejection]
    print(f"ok: {len(server.records)} requests, {len(refused)} refused")


if __name__ == "__main__":
    asyncio.run(main())
