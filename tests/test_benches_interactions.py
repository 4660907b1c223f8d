"""The Interactions benchmark stays alive: every contender (Rust, the twin, google-genai's
streaming path) agrees on each corpus stream. No timing assertions (performance.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``benches`` lives in the source tree, it is not installed
    sys.path.insert(0, str(ROOT))

from benches import interactions  # noqa: E402

_GENAI = interactions._genai_available()


@pytest.mark.parametrize("name", sorted(interactions.STREAMS))
def test_interactions_contenders_agree(name: str) -> None:
    body = interactions.build(name, scale=0.02)
    # The google-genai contender is its 3.x Interactions reader: with an older SDK
    # (the H12 floor venv) the three fastagg readers still have to agree.
    labels = [c for c in interactions.CONTENDERS if c != "google-genai" or _GENAI]
    results = {
        label: interactions.summary(interactions.CONTENDERS[label](body)) for label in labels
    }
    want = results["fastagg"]
    assert want["status"] in ("completed", "requires_action")
    assert want["text"] or want["calls"]
    assert all(r == want for r in results.values()), results


def test_interactions_parallel_calls_have_streamed_arguments() -> None:
    body = interactions.build("parallel_calls", scale=0.02)
    result = interactions.summary(interactions.CONTENDERS["fastagg"](body))
    assert [c["id"] for c in result["calls"]] == [f"c{i}" for i in range(8)]
    assert all(c["args"]["path"] == "/tmp/out.json" for c in result["calls"])
