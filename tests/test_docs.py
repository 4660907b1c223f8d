"""Every Python block of docs/*.md runs as written and prints the ```text block after it;
examples/ scripts for the frameworks run too (issue 10: "each code block run by the tests").

A block that uses a framework or google-genai is skipped where that is not
installed (CI runs this file again in its framework venvs: the oldest and the
newest ADK and pydantic-ai, and the newest google-genai).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
# (doc, index, code, expected stdout)
BLOCKS = [
    (doc.name, i, code, expected)
    for doc in DOCS
    for i, (code, expected) in enumerate(
        re.findall(r"```python\n(.*?)```\n+```text\n(.*?)```", doc.read_text(), re.S)
    )
]
NEEDS = {
    "google.adk": "google.adk",
    "integrations import adk": "google.adk",
    "pydantic_ai": "pydantic_ai",
    "google.genai": "google.genai",
    "fastagg.genai": "google.genai",
    "opentelemetry": "opentelemetry.sdk",
}
EXAMPLES = {
    "genai_chat.py": "google.genai",
    "adk_agent.py": "google.adk",
    "pydantic_ai_agent.py": "pydantic_ai",
}


def _installed(module: str) -> bool:
    try:  # find_spec of a submodule imports its parent, which may be missing too
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _require(code: str) -> None:
    for marker, module in NEEDS.items():
        if marker in code and not _installed(module):
            pytest.skip(f"needs {module}, which is not installed here")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_every_doc_has_a_checked_block() -> None:
    assert {doc.name for doc in DOCS} <= {name for name, _, _, _ in BLOCKS}
    for doc in DOCS:
        text = doc.read_text()
        assert text.count("```python") == len([b for b in BLOCKS if b[0] == doc.name]), doc.name


@pytest.mark.parametrize(
    ("doc", "index", "code", "expected"), BLOCKS, ids=[f"{b[0]}-{b[1]}" for b in BLOCKS]
)
def test_doc_block_runs_and_prints_what_it_says(
    doc: str, index: int, code: str, expected: str
) -> None:
    _require(code)
    done = _run(["-W", "ignore::DeprecationWarning", "-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_framework_example_runs(script: str) -> None:
    _require(EXAMPLES[script])
    done = _run(["-W", "ignore::DeprecationWarning", f"examples/{script}"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("ok:"), done.stdout
