"""Instruction counts and call counts of one job, from valgrind's callgrind (K7).

Issue 12 asks that a missed target come "with the profile", issue 14 that the
allocations between the socket and ``feed()`` be counted. A sampling profiler
is noisy on a shared machine and is not on every machine; callgrind counts
instructions and calls (to 0.01 % between runs), so two builds compare without the noise
(spec/contract/performance.md names it for that).

A job's script runs twice under callgrind, doing the job ``small`` and
``large`` times (its last argument); every count is the difference divided
by ``large - small``, so the interpreter's start, the imports and the set-up
cancel out. ``PYTHONHASHSEED=0`` makes both runs hash alike. What callgrind
does not see: the kernel (page faults, system calls) and time spent waiting.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PYMALLOC", "Counts", "available", "parse", "per_job", "short_name"]

ROOT = Path(__file__).resolve().parent.parent

# pymalloc's entry points, reached through the allocator table by every
# PyObject_* and PyMem_* allocation (both domains use pymalloc by default):
# one call is one Python allocation, whatever its size.
PYMALLOC = ("_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc")


@dataclass
class Counts:
    """Self instructions per function and per object file, calls per callee."""

    ir: dict[str, float] = field(default_factory=dict)
    objects: dict[str, float] = field(default_factory=dict)
    calls: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.ir.values())

    def minus(self, other: Counts, divide: float = 1.0) -> Counts:
        """``(self - other) / divide``, key by key."""

        def diff(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
            return {k: (a.get(k, 0.0) - b.get(k, 0.0)) / divide for k in a.keys() | b.keys()}

        return Counts(
            diff(self.ir, other.ir),
            diff(self.objects, other.objects),
            diff(self.calls, other.calls),
        )

    def allocations(self) -> float:
        """Python allocations: calls into pymalloc (``PYMALLOC``)."""
        return sum(self.calls.get(name, 0.0) for name in PYMALLOC)

    def top(self, n: int) -> list[tuple[str, float]]:
        """The ``n`` functions with the most self instructions, most first."""
        return sorted(self.ir.items(), key=lambda kv: -kv[1])[:n]


# Callgrind names a recursive function's inner calls ``name'2`` (--separate-recs):
# counted with the function itself.
_RECURSION = re.compile(r"'[0-9]+$")


def _named(spec: str, names: dict[str, str]) -> str:
    """A compressed name: ``(id) name`` defines the id, ``(id)`` refers to it."""
    spec = spec.strip()
    if not spec.startswith("("):
        return _RECURSION.sub("", spec)
    close = spec.index(")")
    key, name = spec[1:close], spec[close + 1 :].strip()
    if name:
        names[key] = _RECURSION.sub("", name)
    return names[key]


def parse(text: str) -> Counts:
    """The counts of a callgrind output file (event ``Ir``, any compression).

    A cost line after ``calls=`` is the call's inclusive cost, not the
    caller's own: it is left out of the self counts.
    """
    ir: dict[str, float] = defaultdict(float)
    objects: dict[str, float] = defaultdict(float)
    calls: dict[str, float] = defaultdict(float)
    obs: dict[str, str] = {}
    fns: dict[str, str] = {}
    ob = fn = cfn = ""
    after_call = False
    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if after_call:
                after_call = False
                continue
            cost = line.split()
            if len(cost) > 1:
                ir[fn] += int(cost[1])
                objects[ob] += int(cost[1])
        elif line.startswith("ob="):
            ob = _named(line[3:], obs)
        elif line.startswith("cob="):
            _named(line[4:], obs)
        elif line.startswith("fn="):
            fn = _named(line[3:], fns)
        elif line.startswith("cfn="):
            cfn = _named(line[4:], fns)
        elif line.startswith("calls="):
            calls[cfn] += int(line[6:].split()[0])
            after_call = True
    return Counts(dict(ir), dict(objects), dict(calls))


def available() -> bool:
    """Whether valgrind is on this machine (the report says so where it is not)."""
    return shutil.which("valgrind") is not None


def _run(code: str, args: list[str], env: dict[str, str] | None) -> Counts:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-c",
            code,
            *args,
        ]
        paths = os.pathsep.join([str(ROOT), *sys.path])
        environ = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": paths, **(env or {})}
        done = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(
                f"callgrind run failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        return parse(out.read_text(encoding="utf-8", errors="replace"))


def per_job(
    code: str, args: list[str], small: int = 1, large: int = 3, env: dict[str, str] | None = None
) -> Counts:
    """The counts of one job: ``code`` (run as ``python -c code *args N``) does
    the job N times; the runs with ``small`` and ``large`` are differenced."""
    few = _run(code, [*args, str(small)], env)
    many = _run(code, [*args, str(large)], env)
    return many.minus(few, large - small)


def short_name(function: str) -> str:
    """A function's name without its crate path or generic arguments:
    ``fastagg_core::scan::Scanner::key`` -> ``Scanner::key``."""
    depth = 0
    plain = []
    for ch in function:  # drop <...> (generic arguments, impl blocks)
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            plain.append(ch)
    segments = [s for s in "".join(plain).split("::") if s and not s.startswith("{{")]
    return (
        "::".join(segments[-2:]) if len(segments) > 1 else (segments[0] if segments else function)
    )
