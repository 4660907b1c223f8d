"""Every code block of the README runs as written (issue: "Every code block in
the README is executed by a test"). The two set-up commands at the top are
run verbatim by .ci/run on a fresh clone; this file runs the rest."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
PYTHON = [code for lang, code in BLOCKS if lang == "python"]
SHELL = [code.strip() for lang, code in BLOCKS if lang == "sh"]

# What each Python block prints, in README order.
PRINTS = [
    "[{'id': 't8k2m1qz', 'name': 'get_weather', 'args': {'city': 'Paris', 'unit': 'celsius'}}]\n",
    "completed | Sunny and 24 °C in Paris.\n",
    "call: get_weather {'city': 'Paris'}\ncall: get_weather {'city': 'London'}\n3 parts\n",
]


def test_readme_starts_with_the_demo_and_test_commands() -> None:
    assert SHELL[0].endswith("pip install . && fastagg demo")
    assert SHELL[1].endswith("pip install -e '.[test]' && pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "readme_command 1" in ci
    assert "readme_command 2" in ci


def test_readme_says_what_a_first_install_needs_before_the_first_command() -> None:
    # spec/api.md "Readable objects and the demo": before the first command, not under it
    text = (ROOT / "README.md").read_text()
    before = " ".join(text[: text.index("```sh")].split())
    assert "C compiler" in before
    assert "Rust toolchain, 1.88 or newer" in before
    assert "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" in before
    assert "needs the Rust toolchain" not in text[: text.index("## Install")]


@pytest.mark.parametrize("index", range(len(PRINTS)))
def test_readme_python_block_runs_and_prints_what_it_says(index: int) -> None:
    assert len(PYTHON) == len(PRINTS)
    done = subprocess.run(
        [sys.executable, "-c", PYTHON[index]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stderr == ""
    assert (done.returncode, done.stdout) == (0, PRINTS[index])


def test_readme_aggregate_command_prints_the_parts() -> None:
    (command,) = [c for c in SHELL[2:] if c.startswith("fastagg aggregate")]
    done = subprocess.run(
        [sys.executable, "-m", "fastagg", *command.split()[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    parts = json.loads(done.stdout)
    assert parts[-1]["functionCall"] == {
        "id": "t8k2m1qz",
        "name": "get_weather",
        "args": {"city": "Paris", "unit": "celsius"},
    }
