"""style.md habits, checked with the tools themselves: ruff (check + format),
mypy --strict on the package and the examples, and mypy.stubtest on the
shipped stubs of the Rust module (the .pyi must match what it exports)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECKS = {
    "ruff-check": [sys.executable, "-m", "ruff", "check", "python", "tests", "examples", "benches"],
    "ruff-format": [
        sys.executable,
        "-m",
        "ruff",
        "format",
        "--check",
        "python",
        "tests",
        "examples",
        "benches",
    ],
    "mypy-package": [sys.executable, "-m", "mypy", "--strict", "python/fastagg"],
    "mypy-examples": [sys.executable, "-m", "mypy", "--strict", "examples"],
    "stubtest": [sys.executable, "-m", "mypy.stubtest", "fastagg._fastagg"],
}


@pytest.mark.skipif(
    os.environ.get("FASTAGG_LINT_STEP") == "1",
    reason="CI runs these checks once, as a step of their own (.ci/run)",
)
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_style_check_passes(name: str) -> None:
    done = subprocess.run(
        CHECKS[name], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


if __name__ == "__main__":  # .ci/run's lint step: every check once, each named
    failed = 0
    for name, command in CHECKS.items():
        done = subprocess.run(command, cwd=ROOT, check=False)
        print(f"{name}: {'ok' if done.returncode == 0 else 'FAILED'}", flush=True)
        failed |= done.returncode != 0
    sys.exit(failed)
