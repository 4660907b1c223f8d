"""What the service sends today (spec/aggregation.md P10-P13, E15-E17), on both
implementations: the vectors of tests/vectors/service.json run every byte chunking; these
run the parsed-chunk path (``feed_chunk``: dicts and google-genai objects) and hold the
spec's tables to the google-genai types."""

from __future__ import annotations

import base64
import datetime
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from google.genai import types as genai_types

SPEC = Path(__file__).resolve().parents[2] / "spec" / "aggregation.md"
BIG = base64.b64encode(bytes(i % 251 for i in range(82_500))).decode()  # 110,000 chars


def chunk(*parts: dict[str, Any], **candidate: Any) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}} if parts else {}
    cand.update(candidate)
    return {"candidates": [cand]}


def fold(impl: ModuleType, *chunks: Any) -> Any:
    agg = impl.StreamAggregator()
    for c in chunks:
        agg.feed_chunk(c)
    return agg.close()


def test_p10_server_side_tool_parts_from_chunks_are_kept_in_place_with_a_110_kb_signature(
    impl: ModuleType,
) -> None:
    assert len(BIG) == 110_000
    tool_call = {
        "toolCall": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": ["q"]}},
        "thoughtSignature": "c2ln",
    }
    tool_response = {
        "toolResponse": {"id": "s1", "toolType": "GOOGLE_SEARCH_WEB", "response": {"r": [1]}},
        "thoughtSignature": BIG,
    }
    r = fold(
        impl,
        chunk({"text": "a"}, tool_call),
        chunk(tool_response, {"text": "b"}),
        chunk(finishReason="STOP"),
    )
    assert r.parts == [{"text": "a"}, tool_call, tool_response, {"text": "b"}]
    assert r.parts[2]["thoughtSignature"] is not None and r.parts[2]["thoughtSignature"] == BIG
    assert (r.text, r.function_calls, r.unfinished_calls, r.warnings) == ("ab", [], [], [])


def test_p11_code_execution_parts_from_a_genai_response_keep_their_ids(impl: ModuleType) -> None:
    response = genai_types.GenerateContentResponse(
        candidates=[
            genai_types.Candidate(
                content=genai_types.Content(
                    role="model",
                    parts=[
                        genai_types.Part(
                            executable_code=genai_types.ExecutableCode(
                                id="x1", language=genai_types.Language.PYTHON, code="print(1)"
                            )
                        ),
                        genai_types.Part(
                            code_execution_result=genai_types.CodeExecutionResult(
                                id="x1", outcome=genai_types.Outcome.OUTCOME_OK, output="1\n"
                            )
                        ),
                    ],
                ),
                finish_reason=genai_types.FinishReason.STOP,
            )
        ]
    )
    r = fold(impl, response)
    assert r.parts == [
        {"executableCode": {"code": "print(1)", "id": "x1", "language": "PYTHON"}},
        {"codeExecutionResult": {"id": "x1", "outcome": "OUTCOME_OK", "output": "1\n"}},
    ]
    assert (r.text, r.function_calls, r.complete) == ("", [], True)


def test_p12_audio_transcription_parts_are_kept_and_not_model_text(impl: ModuleType) -> None:
    part = {"audioTranscription": {"text": "Hello.", "finished": True}}
    r = fold(impl, chunk({"text": "a"}, part, {"text": "b"}, finishReason="STOP"))
    assert r.parts == [{"text": "a"}, part, {"text": "b"}]
    assert r.text == "ab"


def test_p13_every_part_kind_of_the_genai_part_type_is_in_the_spec_table_and_kept(
    impl: ModuleType,
) -> None:
    table = _section("P13")
    keys = [f.alias for f in genai_types.Part.model_fields.values()]
    missing = [k for k in keys if f"`{k}`" not in table]
    assert missing == []
    # Every data key other than text and functionCall is a kept part, in place.
    others = [k for k in keys if k not in ("text", "thought", "functionCall")]
    parts = [{k: {"v": i}} for i, k in enumerate(others)]
    r = fold(impl, chunk({"text": "a"}, *parts, {"text": "b"}))
    assert r.parts == [{"text": "a"}, *parts, {"text": "b"}]


def test_e15_model_status_from_a_genai_response_and_from_dicts(impl: ModuleType) -> None:
    if not hasattr(genai_types, "ModelStatus"):  # google-genai 1.x has no such type
        pytest.skip("this google-genai has no types.ModelStatus")
    retire = datetime.datetime(2027, 6, 30, tzinfo=datetime.timezone.utc)
    response = genai_types.GenerateContentResponse(
        candidates=[genai_types.Candidate(content=genai_types.Content(role="model"))],
        model_status=genai_types.ModelStatus(
            model_stage=genai_types.ModelStage.DEPRECATED,
            retirement_time=retire,
            message="Use gemini-3-flash.",
        ),
    )
    r = fold(impl, chunk({"text": "hi"}), response, {"modelStatus": None})
    want = {
        "message": "Use gemini-3-flash.",
        "modelStage": "DEPRECATED",
        "retirementTime": "2027-06-30T00:00:00Z",
    }
    assert r.model_status == want
    assert r.to_dict()["modelStatus"] == want
    assert fold(impl, chunk({"text": "hi"})).model_status is None
    stages = fold(impl, {"modelStatus": {"modelStage": "LEGACY"}}, {"modelStatus": {"x": 1}})
    assert stages.model_status == {"x": 1}


def test_e16_logprobs_from_chunks_add_up_integers_and_floats_alike(impl: ModuleType) -> None:
    def lp(total: float, *tokens: str) -> dict[str, Any]:
        steps = [{"token": t, "logProbability": -0.5} for t in tokens]
        return {"chosenCandidates": steps, "logProbabilitySum": total}

    r = fold(
        impl,
        chunk({"text": "a"}, logprobsResult=lp(-1, "a")),
        chunk({"text": "b"}, logprobsResult=lp(-2, "b")),
        chunk({"text": "c"}, logprobsResult=lp(-0.5, "c", "d"), finishReason="STOP"),
    )
    got = r.candidates[0].metadata["logprobsResult"]
    assert got == {
        "chosenCandidates": [{"token": t, "logProbability": -0.5} for t in "abcd"],
        "logProbabilitySum": -3.5,
    }
    ints = fold(impl, chunk(logprobsResult=lp(-1)), chunk(logprobsResult=lp(-2)))
    total = ints.to_dict()["candidates"][0]["logprobsResult"]["logProbabilitySum"]
    assert (total, type(total)) == (-3, int)
    big = fold(impl, chunk(logprobsResult=lp(2**62)), chunk(logprobsResult=lp(2**62)))
    total = big.to_dict()["candidates"][0]["logprobsResult"]["logProbabilitySum"]
    assert (total, type(total)) == (2.0**63, float)


def test_e16_the_callers_chunk_is_not_changed_by_what_later_chunks_add(impl: ModuleType) -> None:
    first = chunk(logprobsResult={"chosenCandidates": [{"token": "a"}]})
    fold(impl, first, chunk(logprobsResult={"chosenCandidates": [{"token": "b"}]}))
    assert first["candidates"][0]["logprobsResult"] == {"chosenCandidates": [{"token": "a"}]}


def test_e17_every_response_and_candidate_field_of_the_genai_types_is_in_the_spec_table() -> None:
    table = _section("E17")
    fields = [
        f.alias
        for model in (
            genai_types.GenerateContentResponse,
            genai_types.Candidate,
            genai_types.GenerateContentResponseUsageMetadata,
        )
        for f in model.model_fields.values()
    ]
    assert [k for k in fields if f"`{k}`" not in table] == []


def _section(rule: str) -> str:
    """The text of one rule's list item in spec/aggregation.md (its table included)."""
    text = SPEC.read_text("utf-8")
    found = re.search(rf"^- \*\*{rule}\b.*?(?=^- \*\*|^## )", text, re.M | re.S)
    assert found is not None
    return found.group(0)
