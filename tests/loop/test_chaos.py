"""Turns against random, often hostile, model scripts: the loop's promises hold in every one.

Each turn replays a seeded script of replies (answers, parallel and streamed
calls with and without ids, missing signatures, unknown tools, bad arguments,
in-stream and HTTP errors, dropped connections, malformed calls, other finish
reasons, a bad payload after the events, empty and reasoning-only steps, blocked
prompts) against four tools: one raises, one sets the turn's abort event.
Whatever happens, the turn returns (it never raises), and:

- L14: no task of the turn is pending and every response is closed;
- L2: every request sent passes the request guard, and the transcript plus a
  new user message does too (``TurnResult.contents`` is replayable as is);
- L11: every signature in the transcript is one a reply carried, on a part of
  the same kind (no signature is made up, moved from a call to text, or altered),
  but for the sentinel L33a puts on a call the model sent unsigned, each counted;
- L12: ``usage_by_step`` has one entry per request sent, failed attempts included;
- L13: with a sink (half the turns; the other half takes L70's path without
  one), the events end with ``TurnEnd`` carrying the very result returned, every
  ``StepStart`` is answered by one ``StepEnd`` before the next ``StepStart``, and
  every ``ToolCallStart`` by one ``ToolCallEnd``;
- L9: no more steps than ``max_steps`` plus the step-cap request;
- L10: a completed turn has no error and no message; any other has a message.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from typing import Any

from chaos_turns import ABORT, broken, check_events, halt, weather
from fastagg.errors import ProviderError
from fastagg.limits import StopReason, TurnLimits
from fastagg.loop import run_turn
from fastagg.request import SENTINEL_SIGNATURE, check_request
from fastagg.testing.chunks import (
    call,
    chunk,
    error_chunk,
    final,
    malformed_call,
    signature,
    streamed_call,
    text,
    thought,
    usage,
)
from scripted_model import Reply, ScriptedModel, assert_replayable, pending_tasks

TURNS = int(os.environ.get("FASTAGG_CHAOS_TURNS", "400"))  # the stop counts below are for 400
SEED = int(os.environ.get("FASTAGG_CHAOS_SEED", "14"))
USER = [{"role": "user", "parts": [{"text": "Plan a trip to Paris."}]}]


async def pause(seconds: float) -> str:
    """Yields to the event loop once."""
    await asyncio.sleep(0)
    return "done"


TOOLS = [weather, broken, pause, halt]
GOOD_ARGS = {
    "weather": {"city": "Paris"},
    "broken": {"n": 3},
    "pause": {"seconds": 0.5},
    "halt": {},
}


class Endless(ScriptedModel):
    """A scripted model that answers plainly once its script is used up."""

    def stream(self, request: dict[str, Any], *, timeout: float | None) -> Any:
        if len(self.requests) >= len(self.replies):
            self.replies.append(Reply([chunk(text("Fine.")), final(signature("pad"))]))
        return super().stream(request, timeout=timeout)


def _calls(rng: random.Random, n: int, seed: str) -> list[dict[str, Any]]:
    ids = rng.choice(["unique", "none", "repeated"])
    parts = []
    for i in range(rng.choice([1, 1, 2, 3])):
        name = rng.choice(["weather", "broken", "pause", "weather", "missing_tool"] * 3 + ["halt"])
        args = GOOD_ARGS.get(name, {}) if rng.random() < 0.85 else {"wrong": [1, {"x": None}]}
        call_id = {"unique": f"{seed}-{i}", "none": None, "repeated": f"{seed}"}[ids]
        signed = i == 0 and rng.random() < 0.9
        parts.append(call(name, args, id=call_id, signature=signature(seed) if signed else None))
    return parts


def _reply(rng: random.Random, n: int) -> Reply:
    """Reply ``n`` of a script: one of the shapes the service sends, or breaks."""
    seed = f"r{n}"
    kind = rng.choice(
        ["answer", "calls", "calls", "calls", "streamed", "thought_only", "no_finish",
         "in_stream_error", "http_error", "drop", "malformed", "other_finish", "bad_payload",
         "empty", "blocked"]
    )  # fmt: skip
    use = usage(10 + n, 5)
    if kind == "answer":
        return Reply(
            [chunk(text("It is ")), chunk(text("sunny.")), final(signature(seed), usage=use)]
        )
    if kind == "calls":
        lead = [chunk(thought("Planning."))] if rng.random() < 0.5 else []
        return Reply([*lead, chunk(*_calls(rng, n, seed), finish_reason="STOP", usage=use)])
    if kind == "streamed":
        name = rng.choice(["weather", "pause"])
        events = streamed_call(
            name,
            GOOD_ARGS[name],
            id=seed if rng.random() < 0.5 else None,
            signature=signature(seed),
        )
        return Reply([*events, final(finish_reason="STOP", usage=use)], piece=rng.choice([None, 7]))
    if kind == "thought_only":
        return Reply([chunk(thought("Hmm.", signature=signature(seed))), final(usage=use)])
    if kind == "no_finish":
        return Reply([chunk(text("Half an answer"))])
    if kind == "in_stream_error":
        code, status = rng.choice(
            [(503, "UNAVAILABLE"), (400, "INVALID_ARGUMENT"), (500, "INTERNAL")]
        )
        lead = [chunk(text("Par"))] if rng.random() < 0.3 else []
        return Reply([*lead, error_chunk(code, status, "trouble")])
    if kind == "http_error":
        status = rng.choice([429, 500, 503, 400, 404])
        retryable = status in (429, 500, 503)
        error = ProviderError(status, None, f"HTTP {status}", retryable, retry_after=0.0)
        return Reply(error=error)
    if kind == "drop":
        return Reply(
            [chunk(text("Once ")), chunk(text("upon")), final(signature(seed))],
            drop_after=rng.randint(0, 2),
        )
    if kind == "malformed":
        return Reply([malformed_call(usage=use)])
    if kind == "other_finish":
        reason = rng.choice(["MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "BLOCKLIST", "NEW_ONE"])
        return Reply([chunk(text("Partial")), final(finish_reason=reason, usage=use)])
    if kind == "bad_payload":
        return Reply([chunk(text("Before "))], raw=b"data: {not json\r\n\r\n")
    if kind == "empty":
        return Reply([final(usage=use)])
    return Reply([{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": use}])


def _signatures(obj: Any, kind: str = "") -> list[tuple[str, str]]:
    """Every (part kind, signature) in ``obj``: the kind is "call", "thought" or "text"."""
    found = []
    if isinstance(obj, dict):
        if isinstance(obj.get("thoughtSignature"), str):
            part = "call" if "functionCall" in obj else "thought" if obj.get("thought") else "text"
            found.append((part, obj["thoughtSignature"]))
        for value in obj.values():
            found += _signatures(value)
    elif isinstance(obj, list):
        for value in obj:
            found += _signatures(value)
    return found


async def _one(model: ScriptedModel, limits: TurnLimits, seen: list[Any] | None) -> Any:
    sink = None if seen is None else seen.append  # L70: without a sink, the other path
    ABORT[:] = [asyncio.Event()]
    result = await run_turn(model, USER, tools=TOOLS, limits=limits, on_event=sink, abort=ABORT[-1])
    assert pending_tasks() == []
    return result


def test_l2_l9_l10_l11_l12_l13_l14_random_hostile_scripts_keep_every_promise() -> None:
    rng = random.Random(SEED)
    stops: Counter[StopReason] = Counter()
    for turn in range(TURNS):
        replies = [_reply(rng, n) for n in range(rng.randint(1, 8))]
        model = Endless(*replies)
        limits = TurnLimits(
            max_steps=rng.choice([1, 2, 4, 8]), retry_backoff=0.0, max_retry_backoff=0.0
        )
        seen: list[Any] | None = [] if rng.random() < 0.5 else None

        result = asyncio.run(_one(model, limits, seen))
        where = f"turn {turn}: {result.stop_reason} {result.message!r}"
        assert model.closed == model.opened, where
        for request in model.requests:
            check_request(request)
        assert_replayable(result.contents)
        sent = Counter(_signatures([r.events for r in model.replies]))
        kept = Counter(_signatures(result.contents))
        # L33a: the sentinel goes only where the model sent a call unsigned, and is counted.
        assert kept.pop(("call", SENTINEL_SIGNATURE), 0) == result.signatures["sentinels"], where
        assert kept <= sent, where
        assert len(result.usage_by_step) == len(model.requests), where
        assert result.steps_used <= limits.max_steps + 1, where
        if seen is not None:
            check_events(seen, result)
        if result.stop_reason is StopReason.COMPLETED:
            assert (result.error, result.message) == (None, None), where
        else:
            assert result.message, where
        stops[result.stop_reason] += 1
    # The scripts reach the four ways a turn ends without a clock (the clocks' own
    # ends are tested in test_clocks.py), each many times.
    if (TURNS, SEED) != (400, 14):
        return
    assert stops == {
        StopReason.COMPLETED: 230,
        StopReason.PROVIDER_ERROR: 116,
        StopReason.STEP_CAP: 39,
        StopReason.ABORTED: 15,
    }
