"""The profile of fastagg's job on every corpus stream, in instructions (K7).

Issue 12: "Where a target is missed, the report says by how much and what
limits it, with the profile." The stage table (``stages.py``) says which
stage a missed target's time is in; this section says which functions, from
callgrind's exact counts (``callgrind.py``): instructions per event of the
timed job (``feed()`` of every 4 KiB chunk, ``close()``, ``.parts``), split
by where they run (the extension, CPython, libc), and the functions with the
most of them. For the streams whose delta target is missed, the same for what
``deltas=True`` adds.
"""

from __future__ import annotations

from . import callgrind, corpus

__all__ = ["JOB", "component", "profile_markdown", "profiles"]

# One job per iteration; the last argument is the number of iterations.
JOB = """
import sys
from benches import corpus
from fastagg import StreamAggregator
name, scale, giant_mb, deltas, n = sys.argv[1:6]
stream = corpus.build(name, scale=float(scale), giant_mb=float(giant_mb))
chunks = corpus.split(stream.body)
for _ in range(int(n)):
    agg = StreamAggregator(deltas=deltas == "1")
    for chunk in chunks:
        agg.feed(chunk)
    agg.close().parts
"""

COMPONENTS = ("fastagg", "CPython", "libc", "other")
SCALE, GIANT_MB = 0.3, 4.0  # the corpus counted: events enough, minutes under valgrind
# The streams whose delta target (<= 1.15x without) was missed in the last report.
DELTA_STREAMS = ("text", "streamed_args", "giant_arg")


def component(object_file: str) -> str:
    """Where an object file's instructions count: the extension, CPython, libc, other."""
    base = object_file.rsplit("/", 1)[-1]
    if base.startswith("_fastagg"):
        return "fastagg"
    if base.startswith(("libpython", "python")):
        return "CPython"
    if base.startswith("libc.so") or base.startswith("libc-"):
        return "libc"
    return "other"


def profiles(
    names: tuple[str, ...], scale: float, giant_mb: float, deltas: bool
) -> dict[str, callgrind.Counts]:
    """Per-job counts of each stream (``deltas`` as given)."""
    flag = "1" if deltas else "0"
    return {
        name: callgrind.per_job(JOB, [name, repr(scale), repr(giant_mb), flag]) for name in names
    }


def _events(name: str, scale: float, giant_mb: float) -> int:
    return corpus.build(name, scale=scale, giant_mb=giant_mb).events


def _top(counts: callgrind.Counts, n: int) -> str:
    total = counts.total
    return ", ".join(
        f"`{callgrind.short_name(fn)}` {share / total:.0%}"
        for fn, share in counts.top(n)
        if share > 0
    )


def profile_markdown() -> str:
    if not callgrind.available():
        return "(Not measured: valgrind is not on this machine.)"
    scale, giant_mb = SCALE, GIANT_MB
    names = tuple(corpus.STREAMS)
    plain = profiles(names, scale, giant_mb, deltas=False)
    with_deltas = profiles(DELTA_STREAMS, scale, giant_mb, deltas=True)
    lines = [
        "| stream | instructions per event | fastagg | CPython | libc | other | "
        "Python allocations per event | functions with the most (share of the job) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, counts in plain.items():
        events = _events(name, scale, giant_mb)
        by = dict.fromkeys(COMPONENTS, 0.0)
        for obj, ir in counts.objects.items():
            by[component(obj)] += ir
        total = counts.total
        lines.append(
            f"| {name} | {total / events:,.0f} | "
            + " | ".join(f"{by[c] / total:.0%}" for c in COMPONENTS)
            + f" | {counts.allocations() / events:.2f} | {_top(counts, 6)} |"
        )
    lines += [
        "",
        "What `deltas=True` adds (the streams whose delta target was missed):",
        "",
        "| stream | added instructions per event | ÷ without | "
        "added Python allocations per event | functions with the most of the addition |",
        "|---|---:|---:|---:|---|",
    ]
    for name, counts in with_deltas.items():
        events = _events(name, scale, giant_mb)
        extra = counts.minus(plain[name])
        lines.append(
            f"| {name} | {extra.total / events:,.0f} | {counts.total / plain[name].total:.2f}x | "
            f"{extra.allocations() / events:.2f} | {_top(extra, 5)} |"
        )
    lines += [
        "",
        f"Instructions (callgrind `Ir`) of the timed job: `feed()` of every 4 KiB chunk, "
        f"`close()`, `.parts` (`deltas=False` unless said), on the corpus at scale {scale} "
        f"(`giant_arg`: {giant_mb:g} MB). Each count is the difference of a run doing the job "
        "three times and one doing it once, halved, so start-up and set-up cancel and "
        "first-use costs (caches, arenas) are left out; `PYTHONHASHSEED=0`. Repeatable to 0.01 % "
        "between runs: they compare builds where times are noisy. Not counted: the kernel "
        "(page faults, which the giant argument's fresh pages pay) and the cache misses that "
        "make an instruction slow (the stage table has the times). `fastagg` is the "
        "extension (core and binding; Python objects it builds are counted in CPython's "
        "allocator and constructors, `CPython`), `other` the loader and valgrind's own. "
        "Python allocations: calls into pymalloc (`"
        + "`, `".join(callgrind.PYMALLOC)
        + "`). A function's share is of its own instructions (not of what it calls).",
    ]
    return "\n".join(lines)
