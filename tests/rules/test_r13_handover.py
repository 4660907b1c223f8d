"""R13: the long strings of streamed arguments (1 MiB or more) are handed
over by the core at ``close()``; every way of reading the result still holds
them, whichever is read first. Both implementations (the twin keeps Python
objects throughout, so the values must agree)."""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType

import orjson
import pytest

from worker_streams import STREAMED_ARG

MIB = 1 << 20


def _event(part: dict[str, object], **more: object) -> str:
    return json.dumps({"candidates": [{"content": {"role": "model", "parts": [part]}, **more}]})


def _stream(impl: ModuleType, big: str) -> object:
    """Two streamed calls; the first one's ``$.files[1].body`` and ``$.note``
    are long, ``$.files[0].body`` short; a text part between them."""
    agg = impl.StreamAggregator()
    half = len(big) // 2
    for part in (
        {"functionCall": {"id": "a", "name": "write", "willContinue": True}},
        {
            "functionCall": {
                "partialArgs": [
                    {"jsonPath": "$.files[0].body", "stringValue": "short"},
                    {
                        "jsonPath": "$.files[1].body",
                        "stringValue": big[:half],
                        "willContinue": True,
                    },
                ],
                "willContinue": True,
            }
        },
        {
            "functionCall": {
                "partialArgs": [
                    {"jsonPath": "$.files[1].body", "stringValue": big[half:]},
                    {"jsonPath": "$.note", "stringValue": big[::-1]},
                ],
                "willContinue": True,
            }
        },
        {"functionCall": {}},
        {"text": "between"},
        {"functionCall": {"id": "b", "name": "read", "args": {"path": big[:10]}}},
    ):
        agg.feed_event(_event(part))
    agg.feed_event(_event({"text": ""}, finishReason="STOP"))
    return agg.close()


def _expected(big: str) -> list[dict[str, object]]:
    return [
        {
            "functionCall": {
                "id": "a",
                "name": "write",
                "args": {"files": [{"body": "short"}, {"body": big}], "note": big[::-1]},
            }
        },
        {"text": "between"},
        {"functionCall": {"id": "b", "name": "read", "args": {"path": big[:10]}}},
    ]


BIG = ("abc\u00e9\u4e2d" * (MIB // 5 + 1))[: MIB * 7 // 10]  # 1.12 MiB of UTF-8


@pytest.mark.parametrize("first", ["parts", "function_calls", "to_dict", "to_json", "content"])
def test_r13_every_reading_holds_the_handed_over_strings_whichever_comes_first(
    impl: ModuleType, first: str
) -> None:
    assert len(BIG.encode()) > MIB
    result = _stream(impl, BIG)
    expected = _expected(BIG)
    readings = {
        "parts": lambda: result.parts,
        "function_calls": lambda: (
            [{"functionCall": c} for c in result.function_calls] + [{"text": "between"}]
        ),
        "to_dict": lambda: result.to_dict()["candidates"][0]["content"]["parts"],
        "to_json": lambda: orjson.loads(result.to_json())["candidates"][0]["content"]["parts"],
        "content": lambda: result.content["parts"],
    }
    order = [first] + [k for k in readings if k != first]
    for name in order * 2:  # each twice: built once, then read again
        got = readings[name]()
        if name == "function_calls":
            assert got[0] == expected[0] and got[1]["functionCall"] == expected[2]["functionCall"]
        else:
            assert got == expected, name
    if impl.__name__ == "fastagg._fastagg":  # the binding's D3a: one args dict, the str in it
        assert result.function_calls[0]["args"] is result.parts[0]["functionCall"]["args"]


def test_r13_the_same_result_on_every_close_and_a_snapshot_before_it_is_whole(
    impl: ModuleType,
) -> None:
    agg = impl.StreamAggregator()
    agg.feed_event(_event({"functionCall": {"name": "w", "willContinue": True}}))
    agg.feed_event(
        _event(
            {
                "functionCall": {
                    "partialArgs": [{"jsonPath": "$.body", "stringValue": BIG}],
                    "willContinue": True,
                }
            }
        )
    )
    snap = agg.snapshot()
    assert snap.parts[0]["functionCall"]["args"] == {"body": BIG}
    agg.feed_event(_event({"functionCall": {}}))
    done = agg.close()
    assert agg.close() is done
    assert done.function_calls[0]["args"] == {"body": BIG}
    assert agg.snapshot() is done
    assert orjson.loads(done.to_json())["candidates"][0]["content"]["parts"][0] == {
        "functionCall": {"name": "w", "args": {"body": BIG}}
    }


_FAILING_WORKER = (
    STREAMED_ARG
    + r"""
import json, resource, sys

size, pieces = int(sys.argv[1]), int(sys.argv[2])
result = streamed_arg(size, size // pieces).close()
vm = proc_kib("/proc/self/status", "VmSize") * 1024
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
# Room for small objects, none for a str of the argument's size.
resource.setrlimit(resource.RLIMIT_AS, (vm + size // 4, hard))
try:
    result.function_calls
    failed = "no"
except MemoryError:
    failed = "MemoryError"
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
body = result.function_calls[0]["args"]["body"]
big = "x" * size
print(json.dumps({"failed": failed, "length": len(body), "same": body == big,
                  "parts": result.parts[0]["functionCall"]["args"]["body"] == big}))
"""
)


@pytest.mark.parametrize("pieces", [2, 1], ids=["grown_into_a_mapping", "arrived_in_one_piece"])
def test_r13_a_str_that_could_not_be_made_leaves_the_text_for_the_next_read(pieces: int) -> None:
    """E: bad luck (a MemoryError) loses nothing received. The text is taken
    from its slot only once its ``str`` exists, so the read after a failed one
    returns the whole argument."""
    size = 16 * MIB
    done = subprocess.run(
        [sys.executable, "-c", _FAILING_WORKER, str(size), str(pieces)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {
        "failed": "MemoryError",
        "length": size,
        "same": True,
        "parts": True,
    }


_CLOSE_WORKER = (
    STREAMED_ARG
    + r"""
import sys

agg = streamed_arg(int(sys.argv[1]))
before = proc_kib("/proc/self/status", "VmRSS")
result = agg.close()
print(before - proc_kib("/proc/self/status", "VmRSS"))
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")
@pytest.mark.parametrize("mib", [12, 4])
def test_r13_a_close_that_hands_8_mib_over_returns_the_freed_pages_first(mib: int) -> None:
    """R13: the blocks an argument grew through below 1 MiB (about 1 MiB)
    were freed during the feed but stay resident in mimalloc. A close() that
    hands 8 MiB or more over returns them before the ``str`` is made, so
    process RSS falls at close (before: it stayed, or rose). A smaller one
    keeps them: the next stream would pay a page fault for every page
    returned (``feed_chunk()`` of a 1 MiB argument took 1.4x the time)."""
    done = subprocess.run(
        [sys.executable, "-c", _CLOSE_WORKER, str(mib << 20)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dropped_kib = int(done.stdout)
    if mib >= 8:
        assert dropped_kib >= 512
    else:
        assert dropped_kib < 256
