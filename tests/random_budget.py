"""How many examples each random (hypothesis) test runs, from one environment variable.

``FASTAGG_EXAMPLES_SCALE`` multiplies every random test's count: 1, the default, is a quick
run for a developer's machine; CI's main suite runs 5 (the counts the suite had before they
were scaled); a long hunt for rare cases runs 50 or more. The tests without a count of their
own (hypothesis's 100) get ``examples(20)`` through the profile ``tests/conftest.py`` loads.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("FASTAGG_EXAMPLES_SCALE", "1"))


def examples(count: int) -> int:
    """``count`` scaled by ``FASTAGG_EXAMPLES_SCALE``, and never fewer than 10."""
    return max(10, round(count * SCALE))
