"""Shared fixtures: both aggregator implementations and the conformance file."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Vendored from the project's shared folder; tests/test_vendored.py notices drift.
SCENARIOS = ROOT / "tests" / "conformance" / "scenarios.json"

IMPLS = {"rust": "fastagg._fastagg", "reference": "fastagg.reference"}


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The module of one aggregator implementation (Rust core or pure-Python twin)."""
    return importlib.import_module(IMPLS[request.param])


def load_scenarios() -> list[dict[str, Any]]:
    with SCENARIOS.open("rb") as fh:
        return json.load(fh)


@pytest.fixture(params=["aiohttp", "asyncio", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    """The name of one built-in HTTP transport of GeminiClient (H3: tests run on each)."""
    return str(request.param)
