"""A3/Y5 (spec/integrations.md): CI tests each drop-in on the releases it names as tested.

`.ci/run` pins the oldest supported and the newest release of ADK and pydantic-ai; the
drop-ins' ``TESTED_VERSIONS`` and the extras in pyproject.toml name the same range. When a
new release appears, all three move together, or this test says which one lags. Read from
the source text, so it runs where the frameworks are not installed.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 floor venv
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _ci_pin(name: str) -> str:
    found = re.search(rf"\b{name}=([0-9][0-9.]*)", (ROOT / ".ci/run").read_text())
    assert found is not None, f".ci/run sets no {name}"
    return found.group(1)


def _tested_versions(module: str) -> tuple[str, ...]:
    tree = ast.parse((ROOT / "python/fastagg/integrations" / module).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TESTED_VERSIONS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return tuple(str(v) for v in value)
    raise AssertionError(f"{module} has no TESTED_VERSIONS")


def _extra(name: str) -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    (requirement,) = extras[name]
    return str(requirement)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def test_a4_ci_pins_the_oldest_and_newest_tested_adk() -> None:
    oldest, newest = _ci_pin("ADK_OLDEST"), _ci_pin("ADK_NEWEST")
    assert _tested_versions("adk.py") == (oldest, newest)
    bound = re.fullmatch(r"google-adk>=([0-9.]+),<([0-9.]+)", _extra("adk"))
    assert bound is not None, _extra("adk")
    assert bound.group(1) == oldest
    # the upper bound is the release after the newest tested minor
    assert _release(bound.group(2)) == (*_release(newest)[:1], _release(newest)[1] + 1)


def test_y5_ci_pins_the_oldest_and_newest_tested_pydantic_ai() -> None:
    oldest, newest = _ci_pin("PYDANTIC_AI_OLDEST"), _ci_pin("PYDANTIC_AI_NEWEST")
    tested = _tested_versions("pydantic_ai.py")
    assert tested == (oldest.rsplit(".", 1)[0], newest.rsplit(".", 1)[0])
    bound = re.fullmatch(r"pydantic-ai-slim\[google\]>=([0-9.]+),<([0-9.]+)", _extra("pydantic-ai"))
    assert bound is not None, _extra("pydantic-ai")
    assert bound.group(1) == tested[0]
    assert _release(bound.group(2)) == (*_release(newest)[:1], _release(newest)[1] + 1)
