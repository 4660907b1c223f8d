"""The vendored contract and conformance cases match the shared folder they were copied from.

The repository stands alone: tests read `tests/conformance/` and `spec/contract/`. When a
`../shared/` folder sits beside the checkout (the developers' workplace), this test fails
naming each file that changed there, so the copy is refreshed; elsewhere it is skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

VENDORED = {
    "tests/conformance/scenarios.json": "conformance/scenarios.json",
    "spec/contract/aggregation.md": "spec/aggregation.md",
    "spec/contract/api.md": "spec/api.md",
    "spec/contract/performance.md": "spec/performance.md",
    "spec/contract/style.md": "spec/style.md",
    "spec/contract/turn-loop.md": "spec/turn-loop.md",
}


@pytest.mark.parametrize("ours", sorted(VENDORED))
def test_vendored_file_exists(ours: str) -> None:
    assert (ROOT / ours).is_file(), f"{ours} is missing from the repository"


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared beside this checkout")
@pytest.mark.parametrize("ours", sorted(VENDORED))
def test_vendored_file_matches_shared(ours: str) -> None:
    theirs = SHARED / VENDORED[ours]
    if not theirs.is_file():
        pytest.skip(f"{theirs} does not exist")
    assert (ROOT / ours).read_bytes() == theirs.read_bytes(), (
        f"{ours} differs from {theirs}: re-copy it (cp {theirs} {ours})"
    )


def test_no_test_reads_outside_the_repository() -> None:
    """No test module names the shared folder except this one."""
    offenders = [
        p.name
        for p in (ROOT / "tests").rglob("*.py")
        if p.name != Path(__file__).name and "../shared" in p.read_text(encoding="utf-8")
    ]
    assert offenders == []
