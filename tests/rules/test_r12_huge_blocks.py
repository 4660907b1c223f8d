"""R12: a block that grows to 1 MiB or more becomes a mapping of its own (Linux); R13: a
closed result hands its long argument strings over to their `str`.

A giant streamed argument grows by doubling. Before R12 each doubling copied
the string into a new mimalloc block and left the old one resident, so a
32 MiB argument in 16 KiB fragments peaked at 2.33x its size (R4). As a
mapping it grows by ``mremap`` and leaves nothing behind: the peak is the
argument plus a fixed slack. The Rust binding only (the twin's memory is
Python's). Each case runs in a fresh subprocess, whose ``VmHWM`` starts at
its exec.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from proc_status import STATUS
from worker_streams import STREAMED_ARG

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mremap and /proc/self/status are Linux's"
)

_WORKER = (
    """
import hashlib, json, sys
import fastagg
"""
    + STATUS
    + """
size, piece, last = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def event(part):
    return b"data: " + json.dumps({"candidates": [{"content": {"role": "model", "parts": [part]}}]}).encode() + b"\\n\\n"

fragment = event({"functionCall": {"partialArgs": [
    {"jsonPath": "$.content", "stringValue": piece, "willContinue": True}], "willContinue": True}})
agg = fastagg.StreamAggregator(deltas=False)
agg.feed(event({"functionCall": {"id": "c1", "name": "write_file", "willContinue": True}}))
base = status("VmRSS")
for _ in range(size // len(piece.encode())):
    agg.feed(fragment)
if last:
    agg.feed(event({"functionCall": {"partialArgs": [
        {"jsonPath": "$.content", "stringValue": last, "willContinue": True}], "willContinue": True}}))
agg.feed(event({"functionCall": {}}))
result = agg.close()
close_peak = status("VmHWM") - base
content = result.function_calls[0]["args"]["content"]
calls_peak = status("VmHWM") - base
print(json.dumps({
    "close": close_peak, "calls": calls_peak, "chars": len(content),
    "sha1": hashlib.sha1(content.encode()).hexdigest(),
    "warnings": result.warnings, "unfinished": result.unfinished_calls,
}))
"""
)

MIB = 1 << 20
SIZE = 32 * MIB
# The fixed part of the peak: the chain of blocks below 1 MiB that the string
# left behind before it became a mapping, the event buffers, the Python objects
# of the feed() calls, and mimalloc's arena pages. Measured at 8, 32 and 96 MiB
# before R12 declined huge pages: 6.0 MiB over the argument for ASCII and
# 10.0 MiB for the wide one (its events are \u-escaped, six bytes a
# character), the same at every size. The bound keeps that margin for a
# kernel whose huge-page mode is `always` (which gives them unasked).
SLACK = 12 * MIB


def _run(piece: str, last: str = "") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(SIZE), piece, last],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_r12_a_32_mib_streamed_argument_peaks_at_its_size_plus_a_fixed_slack() -> None:
    import hashlib

    piece = "abcdefgh" * 2048  # 16 KiB of ASCII
    out = _run(piece)
    expected = piece * (SIZE // len(piece))
    assert (out["chars"], out["sha1"]) == (SIZE, hashlib.sha1(expected.encode()).hexdigest())
    assert (out["warnings"], out["unfinished"]) == ([], [])
    # Before R12: 2.33x (74.6 MiB) for this very case.
    assert isinstance(out["close"], int) and out["close"] <= SIZE + SLACK
    # R13: the core hands its copy over as the `str` is written (one byte per
    # character for ASCII): reading `.function_calls` adds nothing to the peak
    # but a piece. Before R13: 70.0 MiB.
    assert isinstance(out["calls"], int) and out["calls"] <= SIZE + SLACK


def test_r12_a_wide_argument_adds_its_str_and_nothing_else() -> None:
    import hashlib

    piece = "\u4e2d\u6587x" * 2048  # 14 KiB of UTF-8: 2 of 3 characters need 2 bytes in a str
    out = _run(piece)
    count = SIZE // len(piece.encode())
    expected = piece * count
    utf8 = len(expected.encode())
    assert (out["chars"], out["sha1"]) == (
        len(expected),
        hashlib.sha1(expected.encode()).hexdigest(),
    )
    assert isinstance(out["close"], int) and out["close"] <= utf8 + SLACK
    # The str holds 2 bytes per character (UCS-2), made once at that width; the
    # core's copy is handed over while it is written (R13): the peak is the larger.
    assert isinstance(out["calls"], int)
    assert out["calls"] <= max(utf8, 2 * len(expected)) + SLACK


def test_r4_a_str_made_from_a_huge_text_is_made_at_its_final_width() -> None:
    """R4 (binding, ``build/strings.rs`` HUGE): 32 MiB of ASCII, then one CJK
    character. Python's UTF-8 decoder would write the ASCII one byte a
    character, then copy it into a 2-byte buffer: 96 MiB for a 64 MiB ``str``."""
    import hashlib

    piece = "abcdefgh" * 2048
    out = _run(piece, "\u4e2d")
    expected = piece * (SIZE // len(piece)) + "\u4e2d"
    assert (out["chars"], out["sha1"]) == (
        len(expected),
        hashlib.sha1(expected.encode()).hexdigest(),
    )
    assert isinstance(out["close"], int) and isinstance(out["calls"], int)
    str_bytes = 2 * len(expected)  # UCS-2
    assert out["calls"] - out["close"] <= str_bytes + 4 * MIB


@pytest.mark.parametrize(
    "unit",
    ["a", "\u00e9a", "\u4e2dab", "\U0001f600a", "a\\n\u4e2d", "\\u00e9\\ud83d\\ude00"],
    ids=["ascii", "latin-1", "ucs-2", "ucs-4", "escaped ucs-2", "escaped ucs-4"],
)
def test_r4_huge_strings_of_every_kind_are_their_characters(unit: str) -> None:
    """The HUGE path of the ``str`` maker, on a complete call's argument (the
    builder: plain and escaped) and on a streamed one (the core's string)."""
    import fastagg

    text_json = unit * ((1 << 20) // len(unit.encode()) + 1)  # past 1 MiB
    expected = json.loads(f'"{text_json}"')
    whole = (
        '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
        '{"name": "w", "args": {"content": "' + text_json + '"}}}]}}]}'
    )
    agg = fastagg.StreamAggregator()
    agg.feed_event(whole)
    assert agg.close().function_calls[0]["args"]["content"] == expected
    streamed = fastagg.StreamAggregator()
    streamed.feed_event(
        '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
        '{"name": "w", "willContinue": true, "partialArgs": [{"jsonPath": "$.content", '
        '"stringValue": "' + text_json + '", "willContinue": true}]}}]}}]}'
    )
    streamed.feed_event(
        '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {}}]}}]}'
    )
    assert streamed.close().function_calls[0]["args"]["content"] == expected


def _thp_mode() -> str | None:
    """The kernel's transparent-huge-page mode (the bracketed word), if it has one."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return None
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else None


_THP_WORKER = (
    STREAMED_ARG
    + r"""
result = streamed_arg(4 << 20).close()  # 4 MiB of argument, and the events' buffers
assert len(result.function_calls[0]["args"]["body"]) == 4 << 20
print(proc_kib("/proc/self/smaps_rollup", "AnonHugePages"))
"""
)


@pytest.mark.skipif(
    _thp_mode() != "madvise",
    reason="only where huge pages are given on request can the extension decline them",
)
def test_r12_arenas_get_no_transparent_huge_pages() -> None:
    """R12: mimalloc's arenas are not advised for huge pages, so nothing in
    the process is backed by them (Python's own allocators never ask). Before,
    feeding this stream left 10 MiB of the process in huge pages."""
    done = subprocess.run(
        [sys.executable, "-c", _THP_WORKER], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) == 0
