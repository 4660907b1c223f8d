"""The step classifier alone: a response, a transport error and budgets in, a verdict out (no asyncio).

Rules: L3 (step outcomes), L16 (in-stream error without a finish reason), L17
(retryable codes), L18 (malformed note), L19 (blocked prompt), L32 (unfinished
calls), L35 (more finish reasons).
"""

from __future__ import annotations

from typing import Any

from fastagg.errors import ProviderError
from fastagg.loop.classify import Budget, Outcome, Response, classify

CALL = {"id": "c1", "name": "lookup", "args": {"key": "k"}}
INTERNAL = {"code": 500, "status": "INTERNAL", "message": "boom"}


def budget(**kw: Any) -> Budget:
    values: dict[str, Any] = {
        "provider": 2,
        "no_finish": 2,
        "malformed_sent": 0,
        "malformed_max": 1,
    }
    values.update(kw)
    b = Budget(**values)
    b.attempt = 1
    return b


def test_l3_a_finish_reason_without_calls_is_an_answer() -> None:
    verdict = classify(Response("STOP"), None, True, budget())
    assert (verdict.outcome, verdict.outcome.step_end, verdict.error) == (
        Outcome.ANSWER,
        "answer",
        None,
    )


def test_l3_calls_are_run_whatever_the_finish_reason() -> None:
    verdict = classify(Response("STOP", calls=[CALL]), None, True, budget())
    assert (verdict.outcome, verdict.calls) == (Outcome.TOOL_CALLS, [CALL])


def test_l3_l15_a_retryable_transport_error_before_output_is_a_provider_retry() -> None:
    error = ProviderError(503, "UNAVAILABLE", "overloaded", True)
    verdict = classify(Response(None), error, False, budget())
    assert (verdict.outcome, verdict.error, verdict.lifecycle) == (
        Outcome.PROVIDER_RETRY,
        error,
        "503 UNAVAILABLE: overloaded",
    )


def test_l3_l15_no_provider_retry_left_in_the_step_is_a_provider_error() -> None:
    error = ProviderError(503, "UNAVAILABLE", "overloaded", True)
    verdict = classify(Response(None), error, False, budget(provider=0))
    assert (verdict.outcome, verdict.outcome.step_end) == (Outcome.PROVIDER_ERROR, "error")


def test_l3_an_error_after_visible_output_is_not_retried() -> None:
    error = ProviderError(503, "UNAVAILABLE", "overloaded", True)
    verdict = classify(Response(None), error, True, budget())
    assert verdict.outcome is Outcome.PROVIDER_ERROR


def test_l17_a_retryable_code_counts_although_the_client_said_otherwise() -> None:
    error = ProviderError(None, "RESOURCE_EXHAUSTED", "quota", False)
    verdict = classify(Response(None), error, False, budget())
    assert verdict.outcome is Outcome.PROVIDER_RETRY


def test_l16_a_retryable_in_stream_error_without_finish_or_output_is_a_no_finish_retry() -> None:
    b = budget()
    verdict = classify(Response(None, error=INTERNAL), None, False, b)
    assert (verdict.outcome, verdict.lifecycle, b.stream_error) == (
        Outcome.NO_FINISH_RETRY,
        "500 INTERNAL: boom",
        INTERNAL,
    )


def test_l16_the_spent_no_finish_budget_names_the_last_stream_error() -> None:
    b = budget(no_finish=0)
    b.attempt = 3
    verdict = classify(Response(None, error=INTERNAL), None, False, b)
    assert verdict.outcome is Outcome.NO_FINISH_ERROR
    assert verdict.detail == "no finish reason in 3 attempts"
    assert verdict.error is not None
    assert (verdict.error.kind, verdict.error.code, verdict.error.retryable) == (
        "no-finish-reason",
        "NO_FINISH_REASON",
        True,
    )
    assert verdict.error.message == (
        "the model's response ended without a finish reason 3 times; "
        "last error in the stream: 500 INTERNAL"
    )
    assert verdict.error.body is INTERNAL


def test_l3_an_in_stream_error_with_a_finish_reason_is_a_provider_error() -> None:
    verdict = classify(Response("STOP", error=INTERNAL), None, True, budget())
    assert verdict.outcome is Outcome.PROVIDER_ERROR
    assert verdict.error is not None
    assert (verdict.error.status, verdict.error.code, verdict.error.kind) == (
        500,
        "INTERNAL",
        "in-stream",
    )


def test_l18_a_malformed_call_is_retried_with_the_note() -> None:
    verdict = classify(Response("MALFORMED_FUNCTION_CALL"), None, False, budget())
    assert (verdict.outcome, verdict.note, verdict.outcome.step_end) == (
        Outcome.MALFORMED_RETRY,
        True,
        "malformed",
    )


def test_l18_a_persisting_malformed_call_is_a_malformed_provider_error() -> None:
    verdict = classify(
        Response("MALFORMED_FUNCTION_CALL", "bad json"), None, False, budget(malformed_sent=1)
    )
    assert verdict.outcome is Outcome.MALFORMED_ERROR
    assert verdict.detail == "the model sent MALFORMED_FUNCTION_CALL 2 times"
    assert verdict.error is not None
    assert (verdict.error.kind, verdict.error.code, verdict.error.body) == (
        "malformed",
        "MALFORMED_FUNCTION_CALL",
        {"finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "bad json"},
    )


def test_l35_malformed_response_is_retried_without_the_call_note() -> None:
    verdict = classify(Response("MALFORMED_RESPONSE"), None, False, budget())
    assert (verdict.outcome, verdict.note) == (Outcome.MALFORMED_RETRY, False)


def test_l35_missing_thought_signature_is_a_history_error_never_retried() -> None:
    verdict = classify(Response("MISSING_THOUGHT_SIGNATURE"), None, False, budget())
    assert (verdict.outcome, verdict.outcome.step_end) == (Outcome.HISTORY_ERROR, "error")


def test_l19_a_blocked_prompt_is_an_answer() -> None:
    verdict = classify(Response(None, block_reason="SAFETY"), None, False, budget())
    assert (verdict.outcome, verdict.blocked) == (Outcome.ANSWER, True)


def test_l32_an_unfinished_call_without_finish_reason_is_a_no_finish_retry_not_run() -> None:
    response = Response(None, calls=[CALL], unfinished=(0, "lookup"))
    verdict = classify(response, None, True, budget())
    assert (verdict.outcome, verdict.calls, verdict.lifecycle) == (
        Outcome.NO_FINISH_RETRY,
        [],
        "the stream ended inside the call 'lookup' (part 0); it was not run",
    )


def test_l32_an_unfinished_call_with_a_finish_reason_is_malformed() -> None:
    response = Response("STOP", calls=[CALL], unfinished=(0, "lookup"))
    verdict = classify(response, None, True, budget(malformed_sent=1))
    assert verdict.outcome is Outcome.MALFORMED_ERROR
    assert verdict.detail == "the model sent an unfinished function call 2 times"
    assert verdict.error is not None
    assert verdict.error.code == "UNFINISHED_FUNCTION_CALL"
