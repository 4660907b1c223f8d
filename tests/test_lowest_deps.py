"""H12: every runtime dependency names a floor, and the floors are what CI installs.

`tools/lowest_deps.py` turns `[project].dependencies` into `name==floor` pins;
`.ci/run` installs them into the oldest CPython's venv and sets
`FASTAGG_LOWEST_DEPS=1` there, so the last test proves that run used the floors.
"""

from __future__ import annotations

import importlib.util
import os
import re
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lowest_deps", ROOT / "tools" / "lowest_deps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _numbers(text: str) -> tuple[int, ...]:
    parts = [int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def test_h12_the_floors_are_the_runtime_dependencies_of_pyproject() -> None:
    pins = _tool().floors((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # aiohttp 3.12.4 is the first release with the connection's `closed` future (H7).
    assert pins == [
        "orjson==3.9.15",
        "aiohttp==3.12.4",
        "httpx==0.28.1",
        "google-genai==1.68",
        "google-auth[requests]==2.47.0",
    ]


def test_h12_a_dependency_without_a_floor_is_an_error_that_names_it() -> None:
    pyproject = '[project]\ndependencies = ["orjson>=3.9", "httpx"]\n'
    with pytest.raises(ValueError) as info:
        _tool().floors(pyproject, extras=())
    assert str(info.value) == (
        "pyproject.toml [project].dependencies: 'httpx' is not `name>=floor`; give every"
        " runtime dependency a floor (CI installs it, tools/lowest_deps.py)"
    )
    extra = '[project]\ndependencies = []\noptional-dependencies = {genai = ["google-genai"]}\n'
    with pytest.raises(ValueError) as info:
        _tool().floors(extra, extras=("genai",))
    assert str(info.value).startswith("pyproject.toml extra 'genai': 'google-genai' is not")


def test_h12_a_floor_with_an_upper_bound_or_a_marker_is_refused_too() -> None:
    tool = _tool()
    for requirement in ("aiohttp>=3.12.4,<4", "uvloop>=0.19; sys_platform != 'win32'"):
        with pytest.raises(ValueError, match="is not `name>=floor`"):
            tool.floors(f"[project]\ndependencies = [{requirement!r}]\n", extras=())


def test_h12_the_installed_dependencies_meet_their_floors() -> None:
    # In CI's floor venv (FASTAGG_LOWEST_DEPS=1) each is exactly its floor.
    exact = os.environ.get("FASTAGG_LOWEST_DEPS") == "1"
    for pin in _tool().floors((ROOT / "pyproject.toml").read_text(encoding="utf-8")):
        name, floor = pin.split("==")
        name = name.split("[")[0]
        installed = version(name)
        if exact:
            assert _numbers(installed) == _numbers(floor), (name, installed)
        else:
            assert _numbers(installed) >= _numbers(floor), (name, installed)
