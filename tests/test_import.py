"""R1 (spec/performance.md): `import fastagg` loads only what `StreamAggregator` needs; every
public name still resolves, and the version literal matches the project's metadata."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import fastagg

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (the test extra installs it there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("asyncio", "httpx", "aiohttp", "importlib.metadata", "fastagg.loop", "fastagg.client")


def test_r1_import_loads_no_loop_client_or_metadata() -> None:
    code = f"import sys, fastagg; print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_r1_the_turn_loop_loads_no_http_stack() -> None:
    # run_turn over the google-genai adapter or a caller's own ModelClient never
    # needs aiohttp or httpx (about 0.3 s to import); GeminiClient loads them.
    code = "import sys, fastagg.loop; print([m for m in ('httpx', 'aiohttp') if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_r1_every_public_name_resolves_lazily() -> None:
    for name in fastagg.__all__:
        assert getattr(fastagg, name) is not None, name
    assert set(fastagg.__all__) <= set(dir(fastagg))
    assert fastagg.run_turn is __import__("fastagg.loop").loop.run_turn


def test_r1_unknown_name_is_an_attribute_error() -> None:
    try:
        fastagg.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert str(exc) == "module 'fastagg' has no attribute 'no_such_name'"
    else:
        raise AssertionError("no AttributeError")


def test_r1_version_literal_matches_pyproject_and_metadata() -> None:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        declared = tomllib.load(fh)["project"]["version"]
    assert fastagg.__version__ == declared == importlib.metadata.version("fastagg")
