"""fastagg benchmark suite (spec/contract/performance.md): corpus, contenders and the report.

Run it with ``python -m benches`` from the source tree (``--quick`` for the
one-iteration smoke run, ``--help`` for the flags).
"""

from __future__ import annotations

__all__ = ["contenders", "corpus", "report"]
