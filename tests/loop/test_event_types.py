"""The closed string sets of the turn events as Literal aliases (L13, L33).

The aliases are what a type checker holds the loop to; these tests hold the aliases to
the contract's L13 text and to the values the loop derives at run time.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from fastagg.events import Phase, ToolStatus
from fastagg.limits import StopReason
from fastagg.signatures import Origin, SignatureChange

CONTRACT = Path(__file__).resolve().parents[2] / "spec" / "contract" / "turn-loop.md"


def _l13() -> str:
    text = CONTRACT.read_text(encoding="utf-8")
    match = re.search(r"^- \*\*L13\*\* (.*?)(?=^- \*\*)", text, re.M | re.S)
    assert match is not None
    return " ".join(match.group(1).split())


def test_l13_phase_alias_is_the_contract_phases_and_the_addendum_ones() -> None:
    listed = re.search(r"with phases (.*?); last", _l13())
    assert listed is not None
    contract = re.findall(r"`([a-z-]+)`", listed.group(1))
    assert len(contract) == 11
    phases = typing.get_args(Phase)
    assert phases[: len(contract)] == tuple(contract)
    assert phases[len(contract) :] == (
        "signature-strip",
        "signature-sentinel",
        "duplicate-call-id",
        "response-id-changed",
        "continuation",
        "continuation-resume",
        "stream-resume",
        "needs-confirmation",
        "model-status",
    )


def test_l13_tool_status_alias_is_the_contract_statuses() -> None:
    listed = re.search(r"`ToolCallEnd` \(([a-z /]+),", _l13())
    assert listed is not None
    assert typing.get_args(ToolStatus) == tuple(listed.group(1).split(" / "))


@pytest.mark.parametrize("reason", [r for r in StopReason if r is not StopReason.COMPLETED])
def test_l13_stop_reason_phase_is_its_value(reason: StopReason) -> None:
    assert reason.phase == reason.value
    assert reason.phase in typing.get_args(Phase)


def test_l13_completed_turn_has_no_phase() -> None:
    with pytest.raises(ValueError, match="no lifecycle phase"):
        _ = StopReason.COMPLETED.phase


@pytest.mark.parametrize(
    ("action", "phase"), [("strip", "signature-strip"), ("sentinel", "signature-sentinel")]
)
def test_l33_signature_change_phase_names_its_action(
    action: typing.Literal["strip", "sentinel"], phase: str
) -> None:
    origin, target = Origin("gemini-2.5-flash"), Origin("gemini-3-flash-preview")
    change = SignatureChange(action, "contents[1]", 1, origin, target)
    assert change.phase == phase
