"""Ready-made scripts for :class:`~fastagg.testing.FakeGemini`, with the local tools they expect.

- :func:`demo_scenario`: a weather/picnic turn in five requests: thoughts and two
  parallel calls; a thought-only answer cut by an in-stream 500 with no finish
  reason (a turn loop retries it); a call whose arguments stream as
  ``partialArgs`` and whose stream is cut off mid-argument (it must not run;
  the retry streams it whole); a streamed final answer with the signed empty
  last part. Tools: :func:`get_weather`, :func:`save_note` (see
  :func:`demo_tools`), prompt :data:`DEMO_PROMPT`; :func:`demo_history` is an
  earlier exchange with Gemini 2.5 to start from (its signature must not reach
  Gemini 3).
- :func:`runaway_scenario`: the model calls :func:`lookup` ``n`` times in a
  row, then answers in text (the final-answer request of a loop with
  ``max_steps=n`` gets that answer).
- :func:`stalled_scenario`: one thought chunk, then silence until the client gives up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .._json import Content, JSONObject
from ..signatures import Origin
from .chunks import (
    call,
    chunk,
    error_chunk,
    final,
    signature,
    streamed_call,
    text,
    thought,
    usage,
)
from .fake import Step

__all__ = [
    "DEMO_PROMPT",
    "RUNAWAY_PROMPT",
    "STALLED_PROMPT",
    "demo_history",
    "demo_scenario",
    "demo_tools",
    "get_weather",
    "lookup",
    "runaway_scenario",
    "save_note",
    "stalled_scenario",
]

DEMO_PROMPT = (
    "I'm planning a picnic this weekend. Compare the weather in Paris and London, "
    "pick the better city and save me a short packing note."
)
RUNAWAY_PROMPT = "Find out everything about the history of the croissant."
STALLED_PROMPT = "Summarize this very long report."

_WEATHER: dict[str, JSONObject] = {
    "Paris": {"city": "Paris", "temp_c": 24, "sky": "sunny", "rain_chance": 0.05, "wind_kmh": 8},
    "London": {
        "city": "London",
        "temp_c": 16,
        "sky": "showers",
        "rain_chance": 0.7,
        "wind_kmh": 22,
    },
}

NOTE_BODY = (
    "Picnic in Paris on Saturday: 24 °C and sunny, light wind. Pack sunscreen, "
    "a hat, a blanket, two litres of water and something for the wasps."
)


def get_weather(city: str) -> JSONObject:
    """Current weather and weekend outlook for a city.

    Args:
        city: City name, e.g. "Paris".
    """
    data = _WEATHER.get(city.strip().title())
    if data is None:
        raise ValueError(f"no weather data for {city!r}")
    return dict(data)


def save_note(title: str, body: str) -> JSONObject:
    """Save a short note for the user.

    Args:
        title: Title of the note.
        body: Text of the note.
    """
    return {"saved": True, "title": title, "chars": len(body)}


def lookup(query: str) -> str:
    """Look something up in the encyclopedia.

    Args:
        query: What to look up.
    """
    return f"Result for {query!r}: nothing conclusive yet."


def demo_tools() -> list[Callable[..., Any]]:
    """The local tools the demo scenario calls: ``get_weather`` and ``save_note``."""
    return [get_weather, save_note]


def demo_history(prompt: str = DEMO_PROMPT) -> tuple[list[Content], list[Origin | None]]:
    """An earlier exchange with ``gemini-2.5-flash`` (its answer signed), then ``prompt``:
    the contents and their origins, for ``run_turn(..., history_origin=...)``."""
    earlier = {
        "role": "model",
        "parts": [
            {
                "text": "Happy to help with the picnic! Tell me which cities you have in mind.",
                "thoughtSignature": signature("gemini 2.5 earlier answer"),
            }
        ],
    }
    contents = [
        {"role": "user", "parts": [{"text": "Hi! Can you help me plan a picnic?"}]},
        earlier,
        {"role": "user", "parts": [{"text": prompt}]},
    ]
    return contents, [None, Origin("gemini-2.5-flash"), None]


def demo_scenario(pace: float = 0.0) -> list[Step]:
    """The five requests of the demo turn (see the module docstring).

    ``pace``: seconds between chunks, so that a person can watch the stream
    (``fastagg demo`` uses 0.15); tests keep the default 0.
    """
    rid = "demo-1"
    step1 = Step(
        chunk_interval=pace,
        chunks=[
            chunk(
                thought("**Planning the comparison**\n\nThe user wants to compare "),
                usage=usage(96, thoughts=24),
                response_id=rid,
            ),
            chunk(
                thought("Paris and London. I'll fetch both forecasts at once."),
                usage=usage(96, thoughts=51),
                response_id=rid,
            ),
            chunk(
                call(
                    "get_weather",
                    {"city": "Paris"},
                    id="fc_paris",
                    signature=signature("demo step 1"),
                ),
                response_id=rid,
            ),
            chunk(
                call("get_weather", {"city": "London"}, id="fc_london"),
                finish_reason="STOP",
                usage=usage(96, candidates=18, thoughts=51),
                response_id=rid,
            ),
        ],
    )
    # The fault: reasoning starts, then the service fails inside the 200 stream
    # and never sends a finish reason. Nothing visible was delivered: retryable.
    rid = "demo-2"
    step2 = Step(
        chunk_interval=pace,
        chunks=[
            chunk(
                thought("**Comparing the forecasts**\n\nParis: 24 °C and sunny. "),
                usage=usage(231, thoughts=30),
                response_id=rid,
            ),
            error_chunk(),
        ],
    )
    # The cut-off: the stream ends inside the streamed call (no end marker, no
    # finish reason). Its partial arguments must never reach the tool.
    rid = "demo-3a"
    cut_off = Step(
        chunk_interval=pace,
        chunks=[
            chunk(
                thought("**Writing the note**\n\nParis wins. "),
                usage=usage(231, thoughts=30),
                response_id=rid,
            ),
            *streamed_call(
                "save_note",
                {"title": "Picnic packing list", "body": NOTE_BODY},
                id="fc_note",
                signature=signature("demo step 3a"),
                piece=24,
                response_id=rid,
            )[:-3],
        ],
    )
    rid = "demo-3"
    step3 = Step(
        chunk_interval=pace,
        chunks=[
            chunk(
                thought(
                    "**Comparing the forecasts**\n\nParis is sunny at 24 °C, London has "
                    "showers. Paris wins; I'll write the packing note."
                ),
                usage=usage(231, thoughts=44),
                response_id=rid,
            ),
            *streamed_call(
                "save_note",
                {"title": "Picnic packing list", "body": NOTE_BODY},
                id="fc_note",
                signature=signature("demo step 3"),
                piece=24,
                response_id=rid,
            ),
            final(usage=usage(231, candidates=52, thoughts=44), response_id=rid),
        ],
    )
    rid = "demo-4"
    answer = [
        "Paris is the better pick: ",
        "24 °C and sunny with a light breeze, ",
        "while London expects showers (70 % chance) at 16 °C. ",
        "I saved your packing note \u201cPicnic packing list\u201d: ",
        "sunscreen, a hat, a blanket, water and a plan for the wasps.",
    ]
    step4 = Step(
        chunk_interval=pace,
        chunks=[
            *(
                chunk(text(piece), usage=usage(310, candidates=8 * (n + 1)), response_id=rid)
                for n, piece in enumerate(answer)
            ),
            final(
                signature("demo step 4"),
                usage=usage(310, candidates=47, thoughts=12),
                response_id=rid,
            ),
        ],
    )
    return [step1, step2, cut_off, step3, step4]


def runaway_scenario(n: int = 10) -> list[Step]:
    """``n`` steps that each call ``lookup`` (signed), then one text answer."""
    if n < 1:
        raise ValueError("runaway_scenario needs n >= 1")
    steps = []
    for i in range(n):
        rid = f"runaway-{i + 1}"
        steps.append(
            Step(
                chunks=[
                    chunk(
                        thought(f"I still need more detail (search {i + 1})."),
                        usage=usage(60 + 40 * i, thoughts=12),
                        response_id=rid,
                    ),
                    chunk(
                        call(
                            "lookup",
                            {"query": f"croissant history part {i + 1}"},
                            id=f"fc_lookup_{i + 1}",
                            signature=signature(f"runaway {i + 1}"),
                        ),
                        finish_reason="STOP",
                        usage=usage(60 + 40 * i, candidates=9, thoughts=12),
                        response_id=rid,
                    ),
                ]
            )
        )
    rid = "runaway-answer"
    steps.append(
        Step(
            chunks=[
                chunk(
                    text(
                        "From what I gathered: the croissant descends from the Austrian "
                        "kipferl and became French in the 19th century."
                    ),
                    response_id=rid,
                ),
                final(
                    signature("runaway answer"),
                    usage=usage(60 + 40 * n, candidates=28),
                    response_id=rid,
                ),
            ]
        )
    )
    return steps


def stalled_scenario() -> list[Step]:
    """One thought chunk, then the stream stays open and silent until the client leaves."""
    return [
        Step(
            chunks=[
                chunk(
                    thought("**Reading the report**\n\nThis will take a while."),
                    usage=usage(40, thoughts=9),
                    response_id="stalled-1",
                )
            ],
            pause_after=1,
            pause=math.inf,
        )
    ]
