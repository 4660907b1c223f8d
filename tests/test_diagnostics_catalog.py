"""X1: the diagnostics catalog and its generated copies agree."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_x1_generated_copies_are_fresh() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_diagnostics.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert (run.returncode, run.stdout) == (0, "")
