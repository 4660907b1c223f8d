"""R14: ``feed_chunk()`` reads a ``str`` into the core without leaving a UTF-8
copy on it (the Rust binding; the twin's values are Python objects already).

``sys.getsizeof`` of a ``str`` counts the UTF-8 copy that
``PyUnicode_AsUTF8AndSize`` keeps on it, so an unchanged size is the check.
"""

from __future__ import annotations

import sys

import pytest

import fastagg


def _chunk(text: str, arg: str) -> dict[str, object]:
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": text},
                        {"functionCall": {"name": "write", "args": {"content": arg, "ключ": 1}}},
                    ],
                },
                "index": 0,
            }
        ]
    }


@pytest.mark.parametrize(
    "text",
    [
        "café au lait",  # Latin-1
        "数据处理 and ASCII",  # UCS-2
        "emoji 🚀 beyond the BMP",  # UCS-4
    ],
)
def test_r14_feed_chunk_leaves_no_utf8_copy_on_the_callers_str(text: str) -> None:
    arg = "代码 " * 1000
    sizes = (sys.getsizeof(text), sys.getsizeof(arg))
    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed_chunk(_chunk(text, arg))
    result = agg.close()
    assert (sys.getsizeof(text), sys.getsizeof(arg)) == sizes  # no UTF-8 copy was kept
    assert result.text == text  # and the text is exact
    assert result.function_calls == [
        {"id": None, "name": "write", "args": {"content": arg, "ключ": 1}}
    ]


def test_r14_an_ascii_str_is_read_as_it_is() -> None:
    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed_chunk(_chunk("plain ASCII", "x" * 5000))
    assert agg.close().function_calls[0]["args"]["content"] == "x" * 5000


def test_r14_a_lone_surrogate_is_the_encoders_unicode_error() -> None:
    agg = fastagg.StreamAggregator(deltas=False)
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        agg.feed_chunk(_chunk("bad \ud800 text", "ok"))


def test_r14_feed_event_of_a_str_leaves_no_utf8_copy_on_it() -> None:
    payload = '{"candidates": [{"content": {"role": "model", "parts": [{"text": "数据 ok"}]}}]}'
    size = sys.getsizeof(payload)
    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed_event(payload)
    assert sys.getsizeof(payload) == size
    assert agg.close().text == "数据 ok"


def test_r14_interactions_feed_event_of_a_str_leaves_no_utf8_copy_on_it() -> None:
    events = [
        '{"index":0,"step":{"type":"model_output"},"event_type":"step.start"}',
        '{"index":0,"delta":{"text":"Paris est très claire","type":"text"},'
        '"event_type":"step.delta"}',
    ]
    sizes = [sys.getsizeof(e) for e in events]
    agg = fastagg.StreamAggregator(api="interactions")
    for event in events:
        agg.feed_event(event)
    assert [sys.getsizeof(e) for e in events] == sizes
    assert agg.close().text == "Paris est très claire"
