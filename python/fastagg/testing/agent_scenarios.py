"""Scripts that catch the streaming bugs of agent frameworks, for :class:`~fastagg.testing.FakeGemini`.

Both use the demo tools ``get_weather(city)`` and ``save_note(title, body)``
(:func:`~fastagg.testing.demo_tools`) and answer in two requests: the calls,
then (after the function responses) a text answer. The fake server refuses
the second request with the service's 400s when the model turn was recorded
wrongly (a dropped turn, a moved signature, a call without its response).

- :func:`interleaved_calls_scenario`: two calls whose argument fragments
  interleave, each fragment naming its call by id. An aggregator that keeps
  one "current" call gives ``save_note`` part of the title and
  ``get_weather`` the rest.
- :func:`streamed_args_scenario`: one call whose arguments stream as
  Vertex ``partialArgs``; an aggregator that only reads ``args`` sends it
  back as ``args: {}``.

The expected calls are :data:`INTERLEAVED_CALLS` and :data:`STREAMED_CALLS`,
the final answers :data:`INTERLEAVED_ANSWER` and :data:`STREAMED_ANSWER`.
"""

from __future__ import annotations

from .._json import JSONObject
from .chunks import call, chunk, final, signature, streamed_call, text, thought, usage
from .fake import Step
from .scenarios import NOTE_BODY

__all__ = [
    "AGENT_PROMPT",
    "INTERLEAVED_ANSWER",
    "INTERLEAVED_CALLS",
    "STREAMED_ANSWER",
    "STREAMED_CALLS",
    "interleaved_calls_scenario",
    "streamed_args_scenario",
]

AGENT_PROMPT = "What's the weather in Paris? And save me a picnic note."
INTERLEAVED_CALLS: list[tuple[str, JSONObject]] = [
    ("save_note", {"title": "Picnic", "body": "Sunscreen and a hat."}),
    ("get_weather", {"city": "Paris"}),
]
STREAMED_CALLS: list[tuple[str, JSONObject]] = [
    ("save_note", {"title": "Picnic packing list", "body": NOTE_BODY}),
]
INTERLEAVED_ANSWER = "Paris: 24 °C and sunny. I saved your note \u201cPicnic\u201d."
STREAMED_ANSWER = "Saved \u201cPicnic packing list\u201d for you."


def _fragment(call_id: str, path: str, value: str, *, more: bool = False) -> JSONObject:
    arg: JSONObject = {"jsonPath": path, "stringValue": value}
    if more:
        arg["willContinue"] = True
    return {"functionCall": {"id": call_id, "partialArgs": [arg], "willContinue": True}}


def _answer(words: str, seed: str, prompt_tokens: int) -> Step:
    return Step(
        [
            chunk(text(words), usage=usage(prompt_tokens, candidates=12)),
            final(signature(seed), usage=usage(prompt_tokens, candidates=14)),
        ]
    )


def interleaved_calls_scenario() -> list[Step]:
    """``save_note`` and ``get_weather`` streamed at once, fragments routed by id; then the answer."""
    calls = Step(
        [
            chunk(thought("Weather first, and the note in parallel."), usage=usage(40, thoughts=9)),
            chunk(
                call(
                    "save_note",
                    None,
                    id="fc_note",
                    signature=signature("interleaved calls"),
                    will_continue=True,
                )
            ),
            chunk(_fragment("fc_note", "$.title", "Pic", more=True)),
            chunk(call("get_weather", None, id="fc_weather", will_continue=True)),
            chunk(_fragment("fc_note", "$.title", "nic")),
            chunk(_fragment("fc_weather", "$.city", "Paris")),
            chunk(_fragment("fc_note", "$.body", "Sunscreen and a hat.")),
            chunk({"functionCall": {"id": "fc_weather"}}),
            chunk(
                {"functionCall": {"id": "fc_note"}},
                finish_reason="STOP",
                usage=usage(40, candidates=30, thoughts=9),
            ),
        ]
    )
    return [calls, _answer(INTERLEAVED_ANSWER, "interleaved answer", 120)]


def streamed_args_scenario() -> list[Step]:
    """One ``save_note`` call whose arguments stream as ``partialArgs``; then the answer."""
    calls = Step(
        [
            chunk(thought("I'll write the note."), usage=usage(40, thoughts=5)),
            *streamed_call(
                "save_note",
                STREAMED_CALLS[0][1],
                id="fc_note",
                signature=signature("streamed args"),
                piece=24,
            ),
            final(usage=usage(40, candidates=40, thoughts=5)),
        ]
    )
    return [calls, _answer(STREAMED_ANSWER, "streamed answer", 130)]
