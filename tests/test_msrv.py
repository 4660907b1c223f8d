"""H13: the Rust floor the workspace and the README name is the one the build needs.

A crate the extension builds with that declares a higher ``rust-version`` stops
a source build on an older rustc, whatever ``Cargo.toml`` says. The floor is
the highest ``rust-version`` over the extension's normal and build
dependencies, for every target (wheels are built for Linux, macOS and
Windows), as ``Cargo.lock`` pins them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")


def _cargo(*args: str) -> str:
    done = subprocess.run(
        ["cargo", *args, "--locked"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))[:2]


def _needed() -> tuple[tuple[int, ...], list[str]]:
    """The highest rust-version in the extension's build, and the crates that declare it."""
    tree = _cargo(
        "tree", "-p", "fastagg-python", "-e", "normal,build", "--prefix", "none", "--target", "all"
    )
    built = {tuple(line.split()[:2]) for line in tree.splitlines() if line.strip()}
    metadata = json.loads(_cargo("metadata", "--format-version", "1"))
    declared = {
        (p["name"], "v" + p["version"]): _version(p["rust_version"])
        for p in metadata["packages"]
        if p.get("rust_version")
    }
    floor = max(v for key, v in declared.items() if key in built)
    return floor, sorted(
        f"{n} {v}" for (n, v), rv in declared.items() if (n, v) in built and rv == floor
    )


def test_h13_the_workspace_rust_version_is_what_the_build_needs() -> None:
    floor, crates = _needed()
    assert (floor, crates) == ((1, 88), ["ar_archive_writer v0.5.5", "psm v0.1.32"])
    workspace = re.search(r'^rust-version = "([0-9.]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    assert workspace is not None and _version(workspace[1]) == floor


def test_h13_the_readme_names_the_same_rust_floor() -> None:
    floor, _ = _needed()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = re.findall(r"Rust toolchain \(([0-9.]+) or newer", readme)
    assert [_version(v) for v in named] == [floor]
