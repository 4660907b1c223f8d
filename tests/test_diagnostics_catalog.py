"""Diagnostics (spec/diagnostics.md): the one catalog (X1), results and errors (X3-X5)."""

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fastagg import AggregatedResponse, Diagnostic, MalformedStreamError, StreamAggregator
from fastagg.diagnostics import _catalog, _field_types

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "python" / "fastagg" / "diagnostics.json"
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?:!j)?\}")  # X2: `{field}` or `{field!j}`


def _entries() -> list[dict[str, object]]:
    entries: list[dict[str, object]] = json.loads(CATALOG.read_text("utf-8"))["diagnostics"]
    return entries


def test_x1_codes_are_unique_stable_snake_case_with_one_rule_each() -> None:
    codes = [e["code"] for e in _entries()]
    assert len(codes) == len(set(codes))
    for entry in _entries():
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", str(entry["code"])), entry
        assert re.fullmatch(r"[A-Z][0-9]+[a-z]?", str(entry["rule"])), entry


def test_x1_every_field_is_typed_and_documented() -> None:
    catalog = json.loads(CATALOG.read_text("utf-8"))
    assert set(catalog["fields"].values()) <= {"int", "str", "str?", "json"}
    assert list(catalog["field_docs"]) == list(catalog["fields"])
    for entry in _entries():
        assert set(entry["fields"]) <= set(catalog["fields"]), entry["code"]  # type: ignore[arg-type]


def test_x1_templates_use_exactly_their_fields_and_no_other_braces() -> None:
    for entry in _entries():
        template = str(entry["template"])
        assert sorted(set(PLACEHOLDER.findall(template))) == sorted(entry["fields"]), entry  # type: ignore[arg-type]
        rest = PLACEHOLDER.sub("", template).replace("[[", "").replace("]]", "")
        assert not any(mark in rest for mark in ("{", "}", "[[", "]]")), entry["code"]


def test_x1_python_reads_the_one_catalog_file() -> None:
    assert _catalog() == {
        e["code"]: (e["rule"], tuple(e["fields"]), e["template"])  # type: ignore[arg-type]
        for e in _entries()
    }
    assert _field_types() == json.loads(CATALOG.read_text("utf-8"))["fields"]
    assert not (ROOT / "spec" / "diagnostics.json").exists()


def test_x1_diagnostic_attributes_are_the_catalog_fields() -> None:
    own = {"code", "rule", "message"}
    assert set(Diagnostic.__slots__) - own == set(_field_types())
    assert set(Diagnostic.__annotations__) - own == set(_field_types())


def test_x1_the_catalog_is_read_on_first_use_not_at_import() -> None:
    code = "import sys, fastagg, fastagg.diagnostics as d; print(d._read is None, 'json' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["True", "False"]


def _warned(body: bytes) -> AggregatedResponse:
    agg = StreamAggregator(strict=False)
    agg.feed(body)
    return agg.close()


def test_x3_diagnostics_are_the_warnings_structured_in_order() -> None:
    result = _warned(b'data: {"responseId":"a"}\n\ndata: {"responseId":"b"}\n\ndata: x\n\n')
    assert [d.as_dict() for d in result.diagnostics] == [
        {
            "code": "response_id_changed",
            "rule": "E10",
            "message": result.warnings[0],
            "event": 1,
            "kept_id": "a",
            "new_id": "b",
        },
        {
            "code": "invalid_json",
            "rule": "F8",
            "message": result.warnings[1],
            "event": 2,
            "offset": 52,
        },
    ]


def test_x3_optional_field_is_none_when_absent() -> None:
    result = _warned(
        b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}\n\n'
    )
    (d,) = result.diagnostics
    assert (d.code, d.rule, d.call_id, d.path, d.args) == (
        "nameless_call",
        "C15",
        None,
        "candidates[0].content.parts[0]",
        {},
    )


def test_x3_interactions_results_carry_diagnostics() -> None:
    agg = StreamAggregator(api="interactions", strict=False)
    agg.feed(b'data: {"event_type": "mystery"}\n\n')
    result = agg.close()
    assert [(d.code, d.rule, d.event, d.event_type) for d in result.diagnostics] == [
        ("ix_unknown_event_type", "I5", 0, "mystery"),
        ("ix_missing_done", "I3", None, None),
    ]
    assert [d.message for d in result.diagnostics] == result.warnings


def test_x3_d7_dropped_diagnostics_are_counted_by_the_last() -> None:
    result = _warned(b"data: x\n\n" * 1003)
    assert len(result.diagnostics) == 1001
    assert result.diagnostics[-1].as_dict() == {
        "code": "warnings_dropped",
        "rule": "D7",
        "message": "3 more warnings were not kept (at most 1000 are)",
        "count": 3,
        "limit": 1000,
    }


def test_x4_malformed_stream_error_carries_its_diagnostics() -> None:
    agg = StreamAggregator()
    with pytest.raises(MalformedStreamError) as caught:
        agg.feed(b"data: [1]\n\ndata: x\n\n")
    err = caught.value
    assert [(d.code, d.event, d.offset) for d in err.diagnostics] == [
        ("not_an_object", 0, 0),
        ("invalid_json", 1, 11),
    ]
    assert err.diagnostic == err.diagnostics[0]
    assert (str(err), err.diagnostic.rule) == (err.diagnostic.message, "F8")


def test_x5_diagnostic_is_frozen() -> None:
    d = Diagnostic("no_event_found", "...", bytes=3)
    with pytest.raises(AttributeError):
        d.bytes = 4  # type: ignore[misc]


def test_x5_diagnostic_takes_exactly_its_codes_fields() -> None:
    with pytest.raises(TypeError):
        Diagnostic("no_event_found", "...", offset=3)


def test_x5_diagnostics_equal_by_code_and_fields_and_survive_pickle() -> None:
    d = Diagnostic("ix_long_arg_path", "...", step=2)
    assert (d == Diagnostic("ix_long_arg_path", "...", step=2), d.event) == (True, None)
    assert d != Diagnostic("ix_long_arg_path", "...", step=3)
    assert pickle.loads(pickle.dumps(d)) == d
    assert repr(d) == "Diagnostic(code='ix_long_arg_path', rule='I15', step=2)"
