"""The contenders as pytest-benchmark tests, one group per corpus stream.

Not collected by the default ``pytest`` run (``testpaths`` is ``tests``); run them
explicitly, with the ``bench`` extra installed (``pip install -e '.[test,bench]'``)::

    pytest benches/test_bench_contenders.py --benchmark-autosave        # saves a run
    pytest benches/test_bench_contenders.py --benchmark-compare         # against the last one
    pytest benches/test_bench_contenders.py --benchmark-compare=0001 \\
        --benchmark-compare-fail=median:10%                            # fail on a regression

Saved runs go to ``.benchmarks/`` (ignored by git), named after the commit, so two
commits are compared by checking out one, saving, checking out the other and comparing.
``FASTAGG_BENCH_SCALE`` (default 1.0) and ``FASTAGG_BENCH_GIANT_MB`` (default 10) size
the corpus; ``--benchmark-disable`` runs every contender once, untimed (the CI smoke
run). ``python -m benches`` stays the side-by-side report; these tests time the same
contender functions on the same 4 KiB chunks, after the same agreement check.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pytest

from benches import contenders as C
from benches import corpus

pytest.importorskip("pytest_benchmark")

SCALE = float(os.environ.get("FASTAGG_BENCH_SCALE", "1.0"))
GIANT_MB = float(os.environ.get("FASTAGG_BENCH_GIANT_MB", "10"))


@functools.cache
def _prepared(stream: str) -> C.Prepared:
    return C.prepare(corpus.build(stream, scale=SCALE, giant_mb=GIANT_MB))


@functools.cache
def _expected(stream: str) -> list[dict[str, Any]]:
    return C.parts_of(C.CONTENDERS[0].run(_prepared(stream)))


@pytest.mark.parametrize("contender", [c.name for c in C.CONTENDERS])
@pytest.mark.parametrize("stream", corpus.STREAMS)
def test_contender(benchmark: Any, stream: str, contender: str) -> None:
    (found,) = C.by_name([contender])
    prep = _prepared(stream)
    if contender == "google-genai" and prep.genai_client is None:
        pytest.skip("google-genai is not installed")
    benchmark.group = stream
    benchmark.extra_info.update(events=prep.stream.events, bytes=len(prep.stream.body))
    if found.comparable:  # the report's agreement check, before anything is timed
        assert C.parts_of(found.run(prep)) == _expected(stream)
    benchmark(found.run, prep)
