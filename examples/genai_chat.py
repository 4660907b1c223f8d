"""A google-genai chat whose model turns go through fastagg (no key, no network).

    pip install 'fastagg[genai]' && python examples/genai_chat.py

The fake server streams two calls whose arguments interleave, routed by id.
``fastagg.genai.send_message_stream`` yields the SDK's chunks and records one
aggregated, signed model turn in the chat's history, so the calls run with
their full arguments and the follow-up request is accepted. (The SDK's own
``chat.send_message_stream`` records a content per chunk and the next
request gets a 400.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from google import genai
from google.genai import types

from fastagg import Tool
from fastagg.genai import send_message_stream
from fastagg.testing import AGENT_PROMPT, FakeGemini, demo_tools, interleaved_calls_scenario

TOOLS = {fn.__name__: fn for fn in demo_tools()}


def config() -> types.GenerateContentConfig:
    declarations = [
        types.FunctionDeclaration.model_validate(Tool.from_function(fn).declaration())
        for fn in TOOLS.values()
    ]
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def conversation(url: str) -> None:
    client = genai.Client(
        vertexai=True, api_key="fake", http_options=types.HttpOptions(base_url=url)
    )
    chat = client.chats.create(model="gemini-3-flash-preview", config=config())
    stream = send_message_stream(chat, AGENT_PROMPT)
    for chunk in stream:
        if chunk.candidates and chunk.candidates[0].content:
            print(".", end="", flush=True)
    print()
    assert stream.result is not None
    responses = []
    for call in stream.result.function_calls:
        output: Any = TOOLS[call["name"]](**call["args"])
        print(f"{call['name']}({call['args']}) -> {output}")
        responses.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call["id"], name=call["name"], response={"output": output}
                )
            )
        )
    answer = "".join(chunk.text or "" for chunk in send_message_stream(chat, responses))
    print(answer)
    print(f"ok: {len(chat.get_history())} contents in the history")


async def main() -> None:
    async with FakeGemini(interleaved_calls_scenario()) as server:
        await asyncio.to_thread(conversation, server.url)


if __name__ == "__main__":
    asyncio.run(main())
