"""The spec index: every rule id of `spec/`, where it is implemented, and which tests check it.

A rule is defined by a list item that starts with its bold id (``- **C14 ...**``) in the vendored
contract (`spec/contract/*.md`) or the project's addenda (`spec/*.md`). It is

- *implemented* where library code names it as a whole word (a comment, a docstring or a
  diagnostic's rule field) in `rust/core/src`, `rust/python/src` or `python/fastagg`; Rust unit-test
  modules (`#[cfg(test)]` onwards, `tests.rs`) do not count as implementation;
- *tested* where a test's name holds the id as one of its ``_``-separated words
  (``test_c14_least_recent_call_closed``, Rust ``fn c14_...``), or a data-driven case run by the tests
  (`tests/conformance/*.json`, `tests/vectors/*.json`) names it in ``rules`` or in its name.

``python tools/spec_index.py`` writes `spec/INDEX.md`; ``--check`` exits 1 naming every rule that is
untested or unimplemented and when `spec/INDEX.md` is stale. `tests/test_spec_index.py` runs the check.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC_FILES = sorted((ROOT / "spec" / "contract").glob("*.md")) + sorted(
    p for p in (ROOT / "spec").glob("*.md") if p.name != "INDEX.md"
)
CODE_DIRS = [
    ROOT / "rust" / "core" / "src",
    ROOT / "rust" / "python" / "src",
    ROOT / "python" / "fastagg",
    ROOT / "benches",  # the measurement rules (K6) are implemented there
]
# the manifests that implement the dependency and toolchain rules (H12, H13)
CODE_FILES = [ROOT / "Cargo.toml", ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
RUST_TEST_DIRS = [
    ROOT / "rust" / "core" / "tests",
    ROOT / "rust" / "core" / "src",
    ROOT / "rust" / "python" / "src",
]
CASE_FILES = ["tests/conformance/*.json", "tests/vectors/*.json"]
INDEX = ROOT / "spec" / "INDEX.md"

RULE_DEF = re.compile(r"^\s*[-*] \*\*(?P<id>[A-Z][0-9]+(?:\.[0-9]+)?[a-z]?)\b(?P<title>[^*]*)\*\*")
PY_TEST = re.compile(r"^\s*(?:async\s+)?def\s+(test_\w+)", re.M)
RUST_TEST = re.compile(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*fn\s+(\w+)", re.M)
# proptest! blocks name their cases `fn name(...)` without #[test]
RUST_PROPTEST = re.compile(r"^\s*fn\s+(\w+)\s*\([^)]*\bin\b", re.M)
SHOWN = 3


@dataclass
class Rule:
    id: str
    title: str
    source: str
    code: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)


def rules() -> dict[str, Rule]:
    found: dict[str, Rule] = {}
    for path in SPEC_FILES:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = RULE_DEF.match(line)
            if not m:
                continue
            rid = m["id"]
            if rid in found:
                raise SystemExit(
                    f"{rel(path)}:{lineno}: rule {rid} is defined twice (first in {found[rid].source})"
                )
            title = m["title"].strip().rstrip(".") or "(untitled)"
            found[rid] = Rule(rid, title, f"{rel(path)}:{lineno}")
    return found


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def words(name: str) -> set[str]:
    return set(name.lower().split("_"))


def _code_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".rs":
        if path.name == "tests.rs":
            return ""
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
    return text


def scan_code(found: dict[str, Rule]) -> None:
    pattern = re.compile(
        r"(?<![\w.])("
        + "|".join(sorted(map(re.escape, found), key=len, reverse=True))
        + r")(?![\w])"
    )
    sources = [
        path
        for base in CODE_DIRS
        for path in sorted(base.rglob("*"))
        if path.suffix in {".rs", ".py", ".pyi"} and path.is_file()
    ]
    for path in [*sources, *CODE_FILES]:
        # files, not line numbers: the index changes only when a rule moves
        for rid in sorted(set(pattern.findall(_code_text(path)))):
            found[rid].code.append(rel(path))


def test_names() -> list[tuple[str, str]]:
    """(display name, name) of every test and data-driven case."""
    names: list[tuple[str, str]] = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for name in PY_TEST.findall(path.read_text(encoding="utf-8")):
            names.append((f"{rel(path)}::{name}", name))
    seen: set[Path] = set()
    for base in RUST_TEST_DIRS:
        for path in sorted(base.rglob("*.rs")):
            if path in seen:
                continue
            seen.add(path)
            text = path.read_text(encoding="utf-8")
            for name in RUST_TEST.findall(text) + RUST_PROPTEST.findall(text):
                names.append((f"{rel(path)}::{name}", name))
    for pattern in CASE_FILES:
        for path in sorted(ROOT.glob(pattern)):
            for case in _cases(json.loads(path.read_text(encoding="utf-8"))):
                name = str(case.get("name", ""))
                cited = " ".join(str(r) for r in case.get("rules", []))
                names.append((f"{rel(path)}::{name}", f"{name}_{cited.replace(' ', '_')}"))
    return names


def _cases(data: object) -> list[dict[str, object]]:
    if isinstance(data, dict):
        data = data.get("cases", data.get("scenarios", []))
    return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []


def scan_tests(found: dict[str, Rule]) -> None:
    lower = {rid.lower(): rid for rid in found}
    for shown, name in test_names():
        for word in words(name) & set(lower):
            found[lower[word]].tests.append(shown)


def build() -> dict[str, Rule]:
    found = rules()
    scan_code(found)
    scan_tests(found)
    return found


def render(found: dict[str, Rule]) -> str:
    out = [
        "# Spec index: rule -> code -> tests",
        "",
        "Generated by `python tools/spec_index.py` from the rule definitions in `spec/contract/*.md` and",
        "`spec/*.md`; `tests/test_spec_index.py` fails when a rule has no test or no implementation site,",
        "or when this file is stale. Do not edit by hand.",
        "",
    ]
    by_source: dict[str, list[Rule]] = {}
    for rule in found.values():
        by_source.setdefault(rule.source.split(":")[0], []).append(rule)
    for source, items in by_source.items():
        out += [f"## `{source}`", "", "| rule | title | code | tests |", "|---|---|---|---|"]
        for r in items:
            code = _cell(r.code, lambda s: f"`{s}`", len(r.code))
            tests = _cell(r.tests, lambda s: f"`{s.split('::', 1)[1]}` ({s.split('::', 1)[0]})")
            title = r.title.replace("|", "\\|")
            out.append(f"| {r.id} | {title} | {code} | {tests} |")
        out.append("")
    return "\n".join(out)


def _cell(items: list[str], fmt: object, limit: int = SHOWN) -> str:
    if not items:
        return "**none**"
    shown = "<br>".join(fmt(s) for s in items[:limit])  # type: ignore[operator]
    return shown + (f"<br>+{len(items) - limit} more" if len(items) > limit else "")


def problems(found: dict[str, Rule]) -> list[str]:
    out = []
    for r in found.values():
        if not r.tests:
            out.append(
                f"{r.id} ({r.source}): no test name cites it (name a test test_{r.id.lower()}_...)"
            )
        if not r.code:
            out.append(
                f"{r.id} ({r.source}): no implementation site names it (add a `{r.id}:` comment at its code)"
            )
    return out


def main(argv: list[str]) -> int:
    found = build()
    text = render(found)
    if "--check" in argv:
        issues = problems(found)
        if not INDEX.exists() or INDEX.read_text(encoding="utf-8") != text:
            issues.append("spec/INDEX.md is stale: run `python tools/spec_index.py`")
        for line in issues:
            print(line)
        return 1 if issues else 0
    INDEX.write_text(text, encoding="utf-8")
    missing = problems(found)
    print(f"spec/INDEX.md: {len(found)} rules, {len(missing)} problems")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
