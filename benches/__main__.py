"""``python -m benches``: run the benchmark suite and print the markdown report."""

from __future__ import annotations

import sys

from .report import main

if __name__ == "__main__":
    sys.exit(main())
