"""The spec index (issue 11): every rule id of `spec/` is cited by a test name and at its code.

`tools/spec_index.py` finds the rules (bold list items in `spec/contract/*.md` and `spec/*.md`),
the library lines that name them and the tests whose names hold them, and renders
`spec/INDEX.md` from the same scan.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _index() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spec_index", ROOT / "tools" / "spec_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["spec_index"] = module
    spec.loader.exec_module(module)
    return module


def test_every_rule_is_named_by_a_test_and_by_its_implementation() -> None:
    index = _index()
    assert index.problems(index.build()) == []


def test_index_md_is_the_current_scan() -> None:
    index = _index()
    written = (ROOT / "spec" / "INDEX.md").read_text(encoding="utf-8")
    assert written == index.render(index.build()), "run `python tools/spec_index.py`"


def test_the_scan_finds_rules_of_every_rule_file_and_their_sites() -> None:
    index = _index()
    found = index.build()
    sources = {rule.source.split(":")[0] for rule in found.values()}
    assert sources >= {
        "spec/contract/aggregation.md",
        "spec/contract/turn-loop.md",
        "spec/aggregation.md",
        "spec/turn-loop.md",
        "spec/integrations.md",
        "spec/interactions.md",
        "spec/diagnostics.md",
    }
    c14 = found["C14"]
    assert "rust/core/src/aggregate/calls.rs" in c14.code
    assert any(name.split("::")[1].split("_")[:2] == ["test", "c14"] for name in c14.tests)


def test_a_rule_nobody_cites_is_reported(tmp_path: Path) -> None:
    index = _index()
    found = index.build()
    found["Z9"] = index.Rule("Z9", "made up", "spec/x.md:1")
    assert index.problems(found)[-2:] == [
        "Z9 (spec/x.md:1): no test name cites it (name a test test_z9_...)",
        "Z9 (spec/x.md:1): no implementation site names it (add a `Z9:` comment at its code)",
    ]
