"""Every case of tests/conformance/scenarios.json (the vendored conformance set), for both implementations,
fed as CRLF SSE bytes under several chunkings (F7)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from conftest import load_scenarios
from streams import as_json, chunkings, sse_body

SCENARIOS = load_scenarios()
# Fields of `expect` compared as JSON text (key order and int/float matter).
JSON_FIELDS = {"parts", "function_calls", "usage", "error", "content"}


def test_conformance_file_is_loaded() -> None:
    assert len(SCENARIOS) == 15
    assert all({"name", "rules", "chunks", "expect"} <= set(case) for case in SCENARIOS)


@pytest.mark.parametrize("case", SCENARIOS, ids=[c["name"] for c in SCENARIOS])
def test_conformance_case(impl: ModuleType, case: dict[str, Any]) -> None:
    body = sse_body(case["chunks"])
    for label, pieces in chunkings(body):
        agg = impl.StreamAggregator()
        for piece in pieces:
            agg.feed(piece)
        result = agg.close()
        for field, want in case["expect"].items():
            got = getattr(result, field)
            if field in JSON_FIELDS:
                assert as_json(got) == as_json(want), f"{case['name']} [{label}] {field}"
            else:
                assert got == want, f"{case['name']} [{label}] {field}"
        assert agg.events_seen == len(case["chunks"])
        assert agg.bytes_seen == len(body)
