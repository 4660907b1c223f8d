"""Untrusted bytes cannot exhaust memory or CPU (aggregation.md C13, C14, D2b, F16-F18, ...).

Every test runs against both implementations (the ``impl`` fixture). Costs are
checked by comparing sizes or counting, never by timing.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from test_aggregation_rules import chunk, fc, pa, run_chunks, sse


def c13(index: int, length: int) -> str:
    return f"array index {index} is more than 8 past the end of an array of {length} (C13)"


# -- C13 array padding -----------------------------------------------------------


def test_c13_abusive_padding_path_is_skipped_and_nothing_else_is_lost(impl: ModuleType) -> None:
    abusive = "$.k" + "[10000]" * 3
    result, deltas = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                willContinue=True,
                partialArgs=[pa("$.ok", stringValue="v"), pa(abusive, nullValue=None)],
            )
        ),
        chunk(
            fc(
                partialArgs=[
                    pa("$.list[8]", numberValue=1),
                    pa("$.list[17]", numberValue=2),
                    pa("$.list[27]", numberValue=3),
                    pa("$.ok", stringValue="w"),
                ]
            )
        ),
    )
    assert result.warnings == [
        f"C5: candidate 0, part 0: partial arg at {json.dumps(abusive)} skipped: {c13(10000, 0)}",
        f'C5: candidate 0, part 0: partial arg at "$.list[27]" skipped: {c13(27, 18)}',
    ]
    args = result.function_calls[0]["args"]
    assert args == {"ok": "vw", "list": [None] * 8 + [1] + [None] * 8 + [2]}
    assert [d.json_path for d in deltas if isinstance(d, impl.ArgDelta)] == [
        "$.ok",
        "$.list[8]",
        "$.list[17]",
        "$.ok",
    ]


def test_c13_memory_of_padding_is_linear_in_the_input(impl: ModuleType) -> None:
    # Partial args naming fresh deep array paths at the largest index allowed
    # (before C13, at index 10 000: 1 250 times more nulls).
    def args_size(n: int) -> tuple[int, int]:
        paths = [f"$.k{i}" + "[8]" * 20 for i in range(n)]
        body = sse(chunk(fc(name="f", partialArgs=[pa(p, numberValue=1) for p in paths])))
        agg = impl.StreamAggregator()
        agg.feed(body)
        result = agg.close()
        assert result.warnings == []
        return len(json.dumps(result.function_calls[0]["args"])), len(body)

    (small, _), (large, large_body) = args_size(500), args_size(1000)
    assert large < 2.05 * small
    assert large < 16 * large_body  # 9 values per 3-byte segment at most


# -- D2b option bounds --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "cap"),
    [
        ("max_array_index", 2**64 - 1, 2**31 - 1),
        ("max_array_index", 10**12, 2**31 - 1),
        ("max_array_index", 2**31, 2**31 - 1),
        ("max_event_bytes", 10**40, 2**63 - 1),
        ("max_event_bytes", 2**63, 2**63 - 1),
    ],
)
def test_d2b_limits_above_their_cap_are_a_value_error(
    impl: ModuleType, name: str, value: int, cap: int
) -> None:
    with pytest.raises(ValueError) as info:
        impl.StreamAggregator(**{name: value})
    assert type(info.value) is ValueError
    assert str(info.value) == f"{name} must be at most {cap}, got {value}"


def test_d2b_largest_max_array_index_keeps_existing_values_on_a_refused_write(
    impl: ModuleType,
) -> None:
    cap = 2**31 - 1
    result, _ = run_chunks(
        impl,
        chunk(
            fc(
                name="f",
                partialArgs=[
                    pa("$.a[1]", numberValue=7),
                    pa(f"$.a[{cap}]", numberValue=1),
                    pa(f"$.b[{cap}]", numberValue=1),
                ],
            )
        ),
        max_array_index=cap,
        max_event_bytes=2**63 - 1,
    )
    assert result.function_calls[0]["args"] == {"a": [None, 7]}
    assert result.warnings == [
        f'C5: candidate 0, part 0: partial arg at "$.a[{cap}]" skipped: {c13(cap, 2)}',
        f'C5: candidate 0, part 0: partial arg at "$.b[{cap}]" skipped: {c13(cap, 0)}',
    ]
