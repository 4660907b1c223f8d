"""The Interactions turn both end-to-end files script: two parallel streamed calls, then the answer."""

from __future__ import annotations

from fastagg.testing import InteractionTurn
from fastagg.testing.fake_interactions import arguments_step, text_step, thought_step

WEATHER = {"Paris": "18 C, clear", "London": "12 C, rain"}


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER[city]


CALLS = InteractionTurn(
    [
        *thought_step(0, "EqQBCqEBAY89a1==", "Checking both cities"),
        *arguments_step(1, "fc7k2m9q", "get_weather", '{"ci', 'ty":"Pa', 'ris"}'),
        *arguments_step(2, "q3v8t1xz", "get_weather", '{"city":"Lon', 'don"}'),
    ],
    status="requires_action",
    usage={"total_input_tokens": 52, "total_output_tokens": 24, "total_tokens": 241},
)
ANSWER = InteractionTurn(
    text_step(0, "Paris: 18 C, clear. ", "London: 12 C, rain."),
    usage={"total_input_tokens": 90, "total_output_tokens": 12, "total_tokens": 102},
)
