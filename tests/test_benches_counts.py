"""The report's counted sections: callgrind's counts (K7) and the targets' budgets (K8).

No timing here: the parser and the budget arithmetic get made-up inputs with
known answers, and one real callgrind run (where valgrind is installed)
counts calls whose number is known.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # ``benches`` lives in the source tree, it is not installed
    sys.path.insert(0, str(ROOT))

from benches import bounds, callgrind, profile, report, stages  # noqa: E402

# A callgrind file as valgrind writes it: names compressed ("(id) name" once, "(id)" after),
# relative positions, and a call whose inclusive cost follows its calls= line.
CALLGRIND_OUT = """\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000

ob=(1) /venv/lib/_fastagg.cpython-311-x86_64-linux-gnu.so
fl=(1) scan.rs
fn=(1) fastagg_core::scan::Scanner::key
10 100
+2 20
cob=(2) /usr/lib/libpython3.11.so.1.0
cfi=(2) obmalloc.c
cfn=(2) _PyObject_Malloc
calls=3 40
* 500
-1 5

ob=(2)
fl=(2)
fn=(2)
40 300
fn=(3) <pyo3::instance::Bound<T> as pyo3::types::dict::PyDictMethods>::set_item
7 55
cfn=(2)
calls=2 40
8 200
fn=(4) _PyObject_Malloc'2
50 7
"""


def test_k7_callgrind_file_gives_self_instructions_and_calls_per_callee() -> None:
    counts = callgrind.parse(CALLGRIND_OUT)
    assert counts.ir == {
        "fastagg_core::scan::Scanner::key": 125.0,  # 100 + 20 + 5; the call's 500 is not its own
        "_PyObject_Malloc": 307.0,  # with its recursive calls (callgrind's 'N suffix)
        "<pyo3::instance::Bound<T> as pyo3::types::dict::PyDictMethods>::set_item": 55.0,
    }
    assert counts.objects == {
        "/venv/lib/_fastagg.cpython-311-x86_64-linux-gnu.so": 125.0,
        "/usr/lib/libpython3.11.so.1.0": 362.0,
    }
    assert counts.calls == {"_PyObject_Malloc": 5.0}
    assert counts.allocations() == 5.0
    assert counts.total == 487.0
    assert counts.top(1) == [("_PyObject_Malloc", 307.0)]


def test_k7_counts_are_differenced_key_by_key() -> None:
    many = callgrind.Counts({"a": 10.0, "b": 4.0}, {"x": 14.0}, {"a": 6.0})
    few = callgrind.Counts({"a": 4.0, "c": 2.0}, {"x": 6.0}, {"a": 2.0})
    per = many.minus(few, 2)
    assert per.ir == {"a": 3.0, "b": 2.0, "c": -1.0}
    assert per.objects == {"x": 4.0}
    assert per.calls == {"a": 2.0}


def test_k7_short_names_drop_crate_paths_and_generic_arguments() -> None:
    assert callgrind.short_name("fastagg_core::scan::Scanner::key") == "Scanner::key"
    assert (
        callgrind.short_name(
            "<pyo3::instance::Bound<T> as pyo3::types::dict::PyDictMethods>::set_item"
        )
        == "set_item"
    )
    assert callgrind.short_name("_fastagg::build::Builder::object") == "Builder::object"
    assert callgrind.short_name("insertdict") == "insertdict"


def test_k7_object_files_are_grouped_by_where_they_run() -> None:
    assert profile.component("/x/_fastagg.cpython-311-x86_64-linux-gnu.so") == "fastagg"
    assert profile.component("/usr/lib/libpython3.11.so.1.0") == "CPython"
    assert profile.component("/usr/bin/python3.11") == "CPython"
    assert profile.component("/lib/x86_64-linux-gnu/libc.so.6") == "libc"
    assert profile.component("/lib64/ld-linux-x86-64.so.2") == "other"


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_k7_a_job_counts_the_same_per_repetition_whatever_its_set_up() -> None:
    # The job calls zlib's adler32 seven times; the set-up calls it 100 times more, which
    # the difference of the two runs cancels.
    job = (
        "import sys, zlib\n"
        "for _ in range(100): zlib.adler32(b'set-up')\n"
        "for _ in range(int(sys.argv[1]) * 7): zlib.adler32(b'abc')\n"
    )
    counts = callgrind.per_job(job, [])
    assert counts.calls["zlib_adler32"] == 7.0
    assert counts.allocations() >= 0


def _row(
    stream: str,
    contender: str,
    events: int,
    nbytes: int,
    seconds: float,
    ratio: float | None = None,
) -> report.Row:
    return report.Row(stream, contender, events, nbytes, seconds, 1, ratio=ratio)


def _stages(scan: float, parts: float, kept: float, floor: float) -> stages.Stages:
    s = stages.Stages(events=1)
    for name, value in (("scan", scan), ("parts", parts), ("kept", kept), ("floor", floor)):
        s.rounds[name] = [value, value * 2]  # two rounds, the same ratios
    s.rounds["gc"] = [0.0, 0.0]
    return s


def test_k8_a_target_below_the_objects_own_cost_is_out_of_reach() -> None:
    # tool_parallel's shape: orjson building only the kept parts costs 1.07 floors, so
    # the floor target (1.0) cannot be met while `.parts` builds them.
    rows = [
        _row("tool_parallel", "fastagg", 400, 800_000, 400 * 7.8e-6),
        _row("tool_parallel", "orjson floor", 400, 800_000, 400 * 3.3e-6),
        _row("tool_parallel", "reference", 400, 800_000, 400 * 44.55e-6),
    ]
    found = bounds.budgets(rows, {"tool_parallel": _stages(2.2, 8.0, 3.531, 3.3)})
    by = {b.target: b for b in found}
    assert list(by) == ["≤ 1.0x the orjson-loads floor", "≥ 15x the reference"]
    floor = by["≤ 1.0x the orjson-loads floor"]
    assert (round(floor.fastagg, 3), floor.budget, round(floor.objects, 3)) == (2.364, 1.0, 1.07)
    assert floor.verdict() == "out of reach: the objects alone are 1.07x the budget"
    assert round(by["≥ 15x the reference"].budget, 2) == 0.9


def test_k8_a_target_above_the_objects_cost_says_what_the_scan_must_fall_to() -> None:
    rows = [
        _row("text", "fastagg", 10, 3_700, 10 * 0.55e-6),
        _row("text", "orjson floor", 10, 3_700, 10 * 1.0e-6),
        _row("text", "reference", 10, 3_700, 10 * 6.0e-6),
        _row("text", "google-genai", 10, 3_700, 10 * 120e-6),
    ]
    found = bounds.budgets(rows, {"text": _stages(0.55, 0.08, 0.04, 1.0)})
    verdicts = {b.target: b.verdict() for b in found}
    # fastagg 0.55 floors, of which 0.04 the objects: the rest 0.51 must fit 0.40 - 0.04
    # for the reference; google-genai's 120 floors ÷ 100 allow 1.20, which 0.55 meets.
    assert verdicts == {
        "≤ 1.0x the orjson-loads floor": "met",
        "≥ 15x the reference": "reachable: the rest must fall from 0.51 to 0.36 floors (29% less)",
        "≥ 100x google-genai": "met",
    }
    table = bounds.bounds_markdown(rows, {"text": _stages(0.55, 0.08, 0.04, 1.0)})
    assert "| ≥ 15x the reference | text | 0.55 | 0.40 | 0.04 | 0.51 | reachable:" in table


def test_k8_streams_missing_from_either_table_get_no_budget() -> None:
    rows = [_row("text", "fastagg", 10, 3_700, 1e-5)]  # no floor row
    assert bounds.budgets(rows, {"text": _stages(1, 1, 1, 1)}) == []
    assert bounds.bounds_markdown(rows, {}).startswith("(No budgets")


def test_k8_budgets_read_ratios_as_the_targets_table_does() -> None:
    # The medians alone say 15.2x the reference, the rounds' own ratios 14.2x: the targets
    # table reads the latter, and the budget must agree with it (one report, one verdict).
    rows = [
        _row("text", "fastagg", 10, 3_700, 10 * 1.38e-6),
        _row("text", "orjson floor", 10, 3_700, 10 * 1.55e-6, ratio=1 / 0.73),
        _row("text", "reference", 10, 3_700, 10 * 21.0e-6, ratio=14.2),
    ]
    by = {b.target: b for b in bounds.budgets(rows, {"text": _stages(0.8, 0.08, 0.06, 1.47)})}
    assert round(by["≤ 1.0x the orjson-loads floor"].fastagg, 2) == 0.73
    assert round(by["≥ 15x the reference"].budget, 4) == round(0.73 * 14.2 / 15, 4)
    assert not by["≥ 15x the reference"].met
    assert "| ≥ 15x faster than reference on `text` | 14.2x | no |" in report.targets_markdown(rows)


def test_h9_k7_per_request_rows_are_each_stack_less_the_floor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benches import transport_counts

    def made_up(ir: float, allocations: float) -> callgrind.Counts:
        return callgrind.Counts({"f": ir}, {"f": "python"}, {"_PyObject_Malloc": allocations})

    per_request = {
        "floor": made_up(60_000, 39.0),
        "aiohttp": made_up(400_000, 250.0),
        "httpx": made_up(1_500_000, 900.5),
    }
    monkeypatch.setattr(callgrind, "available", lambda: True)
    monkeypatch.setattr(transport_counts, "per_chunk", lambda t, s=None: made_up(7_000, 0.3))
    monkeypatch.setattr(transport_counts, "per_request", per_request.__getitem__)
    rows = transport_counts.transport_counts_markdown().splitlines()
    assert rows[-3:] == [
        "| raw/aiohttp | 400,000 | 340,000 | 250.0 |",
        "| raw/httpx | 1,500,000 | 1,440,000 | 900.5 |",
        "| floor + wake | 60,000 | - | 39.0 |",
    ]
