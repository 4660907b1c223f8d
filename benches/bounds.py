"""Each speed target's budget against what no implementation of the contract can cut (K8).

Issue 12: "Where a target is missed, the report says by how much and what
limits it". A target allows fastagg a time per event (its budget: the
floor's, a contender's divided by the ratio asked, a byte rate's). Part of
fastagg's job is the Python objects ``.parts`` must return: plain dicts,
lists and strings, built eagerly. Building them costs at least what the
fastest builder takes, so the job can never cost less than that, however
cheap the scan becomes.

Both sides are expressed in units of the orjson-loads floor measured in the
same run, so that the contenders table (where the budgets come from) and the
stage table (where the objects' cost comes from) are compared through the
one yardstick both measured:

- budget = the time the target allows ÷ the floor, from the contenders table,
  with its ratios read as the targets table reads them (the median of the
  ratios within a round), so a budget is met exactly where that table says;
- objects = the cheaper of ``.parts`` and ``kept parts, orjson`` ÷ the floor,
  from the stage table (the median of the per-round ratios);
- the rest = fastagg ÷ the floor, less the objects: framing, the scan, the
  aggregation and whatever ``.parts`` costs beyond the objects themselves.

A target is *out of reach* where the objects alone exceed its budget: no
scan, however fast, meets it while ``.parts`` builds the objects it owes.
Otherwise it is *reachable*, and the rest must fall to the budget minus the
objects.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .stages import Stages

__all__ = ["Budget", "bounds_markdown", "budgets", "times"]


@dataclass(frozen=True)
class Budget:
    target: str
    stream: str
    fastagg: float  # floors
    budget: float  # floors
    objects: float  # floors

    @property
    def rest(self) -> float:
        """Floors of the job beyond the objects (framing, scan, aggregation)."""
        return self.fastagg - self.objects

    @property
    def met(self) -> bool:
        return self.fastagg <= self.budget

    @property
    def reachable(self) -> bool:
        return self.objects <= self.budget

    def verdict(self) -> str:
        if self.met:
            return "met"
        if not self.reachable:
            return (
                f"out of reach: the objects alone are {self.objects / self.budget:.2f}x the budget"
            )
        to = self.budget - self.objects
        return (
            f"reachable: the rest must fall from {self.rest:.2f} to {to:.2f} floors "
            f"({1 - to / self.rest:.0%} less)"
        )


def _us(row: Any) -> float:
    return float(row.seconds) * 1e6 / float(row.events)


def times(row: Any, mine: Any) -> float:
    """``row``'s time ÷ fastagg's (``mine``): the median of the ratios within a
    round where the contenders table has it, else the ratio of the medians.
    The targets table reads its ratios through this too."""
    return float(row.ratio) if row.ratio is not None else _us(row) / _us(mine)


def _allowed(stream: str, t: dict[tuple[str, str], Any]) -> list[tuple[str, float]]:
    """Each target on ``stream`` with the time it allows, in fastagg's own time
    (so that a budget is met exactly where the targets table says it is)."""
    mine = t[(stream, "fastagg")]
    allowed = [("≤ 1.0x the orjson-loads floor", times(t[(stream, "orjson floor")], mine))]
    reference = t.get((stream, "reference"))
    if reference is not None:
        allowed.append(("≥ 15x the reference", times(reference, mine) / 15))
    genai = t.get((stream, "google-genai"))
    if genai is not None:  # on every stream since performance.md of 2026-12-05
        allowed.append(("≥ 100x google-genai", times(genai, mine) / 100))
    return allowed


def budgets(rows: Sequence[Any], measured: dict[str, Stages]) -> list[Budget]:
    """The budget of every speed target on every stream both tables have."""
    t = {(r.stream, r.contender): r for r in rows if r.seconds is not None}
    out = []
    for stream, stages in measured.items():
        if (stream, "fastagg") not in t or (stream, "orjson floor") not in t:
            continue
        # fastagg in floors, as the targets table has it
        mine = 1 / times(t[(stream, "orjson floor")], t[(stream, "fastagg")])
        rounds = zip(
            stages.rounds["parts"], stages.rounds["kept"], stages.rounds["floor"], strict=True
        )
        objects = statistics.median(min(p, k) / f for p, k, f in rounds)
        out += [
            Budget(target, stream, mine, allowed * mine, objects)
            for target, allowed in _allowed(stream, t)
        ]
    return out


def bounds_markdown(rows: Sequence[Any], measured: dict[str, Stages]) -> str:
    found = budgets(rows, measured)
    if not found:
        return "(No budgets: the contenders table and the stage table share no stream.)"
    lines = [
        "| target | stream | fastagg | budget | objects alone | the rest | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for b in found:
        lines.append(
            f"| {b.target} | {b.stream} | {b.fastagg:.2f} | {b.budget:.2f} | {b.objects:.2f} "
            f"| {b.rest:.2f} | {b.verdict()} |"
        )
    lines += [
        "",
        "In floors: time per event ÷ the orjson-loads floor's on the same stream. `fastagg` "
        "and `budget` (the time the target allows: the floor's, the reference's ÷ 15, "
        "or google-genai's ÷ 100) come from the "
        "contenders table; `objects alone` (the cheaper of `.parts` and orjson building the "
        "kept parts: the least any eager builder of the same plain objects pays) from the "
        "stage table, the median of its per-round ratios to the floor timed in the same round; "
        "`the rest` is `fastagg` less the objects (framing, the scan, the aggregation, what "
        "`.parts` costs beyond the objects). `out of reach`: the objects `.parts` must return "
        "cost more than the target allows, so no scan meets it while `.parts` builds plain "
        "objects eagerly (spec/contract/api.md). `reachable`: what the rest would have to fall "
        "to; the profile below says where its instructions go.",
    ]
    return "\n".join(lines)
