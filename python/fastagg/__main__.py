"""``python -m fastagg``: the same commands as the ``fastagg`` console script."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
