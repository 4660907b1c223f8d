"""The agent turn loop: :func:`run_turn` and :func:`stream_turn` (spec/contract/turn-loop.md L1-L14).

One turn is: model request -> aggregated stream -> tools -> next request, until
the model answers or a budget ends the turn. How it is built:

- The turn runs in one task of its own. The clocks (turn deadline, stall
  watchdog, first-output deadline, final-answer bound) are event-loop timers,
  and the abort event is watched by one small task; when one fires it records
  its cause and cancels the turn task. Each section cleans up as the
  cancellation passes through it (the HTTP response is closed by leaving its
  ``async with``; a tool batch is cancelled and every unanswered call gets
  ``{"error": "aborted"}``), then the cause becomes the stop reason. A
  cancellation with no recorded cause is the caller's own and propagates.
- The transcript is one list that grows by appending; the request dict holds
  that list, so a step copies nothing, and the request guard (L2) only
  checks the contents added since the previous request.
- Text and thought deltas are turned into events as ``feed()`` returns them.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import orjson

from . import ArgDelta as _AggArgDelta
from . import CallStart as _AggCallStart
from . import StreamAggregator
from . import TextDelta as _AggTextDelta
from ._sdk_request import loop_inputs
from .client import retry_info_delay
from .continuation import MAX_HOPS, MAX_RESUMES, Hops, checkpoint_token, hop_request, hop_token
from .errors import MalformedStreamError, ProviderError
from .events import (
    Lifecycle,
    StepEnd,
    StepStart,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
    TurnEvent,
)
from .interactions_wire import InteractionsTurn
from .limits import StopReason, TurnLimits, TurnResult
from .model import ModelClient
from .request import RequestGuard, map_finish_reason
from .signatures import (
    Origin,
    SignaturePolicy,
    first_unsigned_call,
    prepare_history,
    requires_signatures,
)
from .tools import Tool, ToolContext

__all__ = ["run_turn", "stream_turn"]

MALFORMED_NOTE = (
    "Your previous function call was malformed. Call a declared function with valid JSON "
    "arguments, one call at a time, or answer in plain text."
)
FINAL_ANSWER_NOTE = (
    "You have reached the step limit for this turn, so tools are now disabled. Using only the "
    "information gathered so far, give your best final answer now, and say briefly what is "
    "still missing, if anything."
)
WRAPUP_NOTE = (
    "Time check: about {remaining} of processing time remain for this turn. Finish now: give "
    "your best answer from what you have gathered, and call another tool only if it is essential."
)

_PRECEDENCE = {
    StopReason.TIME_LIMIT: 0,
    StopReason.STALLED: 1,
    StopReason.ABORTED: 2,
    StopReason.CONTEXT_CAP: 3,
    StopReason.STEP_CAP: 4,
    StopReason.PROVIDER_ERROR: 5,
    StopReason.COMPLETED: 6,
}
_CAUSES = {
    "time-limit": StopReason.TIME_LIMIT,
    "stalled": StopReason.STALLED,
    "first-output": StopReason.STALLED,
    "aborted": StopReason.ABORTED,
}
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_RETRYABLE_CODES = frozenset({"RESOURCE_EXHAUSTED", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED"})
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
_EPSILON = 0.0005  # timers may fire this much early
_MAX_SERVER_DELAY = 300.0  # L44: a longer Retry-After / retryDelay ends the turn


async def run_turn(
    model: ModelClient,
    contents: list[dict[str, Any]],
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    limits: TurnLimits | None = None,
    abort: asyncio.Event | None = None,
    system_instruction: str | dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    on_event: Callable[[TurnEvent], Any] | None = None,
    history_origin: Origin | Sequence[Origin | None] | None = None,
    signature_policy: SignaturePolicy | str = SignaturePolicy.AUTO,
) -> TurnResult:
    """Run one agentic turn against ``model`` and return how it ended.

    ``contents`` is the conversation so far (REST camelCase, ending with a user
    content); it is not modified, ``result.contents`` is the new transcript.
    ``tools`` are :class:`Tool` objects or plain functions (made into tools by
    name, type hints and docstring). ``config`` holds top-level request fields
    (``generationConfig``, ``toolConfig``, ``safetySettings``,
    ``cachedContent`` ...) merged into every request; a ``tools`` list in it is
    sent after the function declarations. ``on_event`` receives every
    :mod:`fastagg.events` event as it happens; when it returns an awaitable, that
    is awaited before the turn goes on; its exceptions propagate. google-genai
    ``Content`` objects (in ``contents`` or as ``system_instruction``) and a
    ``GenerateContentConfig`` as ``config`` are accepted too (G5).
    ``history_origin`` says which model and backend produced ``contents`` (one
    :class:`~fastagg.signatures.Origin`, or one per content, None for unknown);
    ``signature_policy`` says what to do with signatures the target model
    cannot accept (:mod:`fastagg.signatures`, L33).

    Raises :class:`InvalidRequestError` when a request would be rejected (L2),
    and ``CancelledError`` when the calling task is cancelled (after cleanup).
    Everything else (budgets, abort, provider failures) ends the turn with a
    result whose ``stop_reason`` and ``message`` say what happened.
    """
    turn = _Turn(
        model,
        contents,
        tools,
        limits,
        abort,
        system_instruction,
        config,
        on_event,
        origins=history_origin,
        policy=signature_policy,
    )
    task = turn.start()
    try:
        await asyncio.wait((task,))
    except asyncio.CancelledError:
        await turn.cancel()
        raise
    return task.result()


async def stream_turn(
    model: ModelClient,
    contents: list[dict[str, Any]],
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    limits: TurnLimits | None = None,
    abort: asyncio.Event | None = None,
    system_instruction: str | dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    on_event: Callable[[TurnEvent], Any] | None = None,
    history_origin: Origin | Sequence[Origin | None] | None = None,
    signature_policy: SignaturePolicy | str = SignaturePolicy.AUTO,
) -> AsyncIterator[TurnEvent]:
    """Run one turn like :func:`run_turn`, yielding its events as they happen.

    The last event is ``TurnEnd(result)``. Closing the iterator early (or
    cancelling the task that reads it) cancels the turn, with the same cleanup.
    ``break`` alone does not close it: until the generator is garbage
    collected the turn keeps running (L45). Use
    ``async with contextlib.aclosing(stream_turn(...)) as events:`` or call
    ``aclose()``.
    """
    queue: asyncio.Queue[Any] = asyncio.Queue()
    sink: Callable[[TurnEvent], Any]
    if on_event is None:
        sink = queue.put_nowait
    else:
        user = on_event

        async def sink(event: TurnEvent) -> None:
            result = user(event)
            if result is not None and inspect.isawaitable(result):
                await result
            queue.put_nowait(event)

    turn = _Turn(
        model,
        contents,
        tools,
        limits,
        abort,
        system_instruction,
        config,
        sink,
        origins=history_origin,
        policy=signature_policy,
    )
    task = turn.start()
    task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        while True:
            event = await queue.get()
            if event is _DONE:
                task.result()  # the turn failed: raise its exception
                return
            yield event
            if type(event) is TurnEnd:
                await asyncio.wait((task,))
                return
    finally:
        if not task.done():
            await turn.cancel()


_DONE = object()


class _Turn:
    """The state of one turn; see the module docstring for the design."""

    def __init__(
        self,
        model: ModelClient,
        contents: list[dict[str, Any]],
        tools: Sequence[Tool | Callable[..., Any]],
        limits: TurnLimits | None,
        abort: asyncio.Event | None,
        system_instruction: str | dict[str, Any] | None,
        config: dict[str, Any] | None,
        sink: Callable[[TurnEvent], Any] | None,
        *,
        origins: Origin | Sequence[Origin | None] | None = None,
        policy: SignaturePolicy | str = SignaturePolicy.AUTO,
    ) -> None:
        # google-genai Content / GenerateContentConfig objects become REST dicts (G5).
        contents, tools, system_instruction, config = loop_inputs(
            contents, tools, system_instruction, config
        )
        self.model = model
        self.limits = limits = limits if limits is not None else TurnLimits()
        self.abort = abort
        self.sink = sink
        self.tools = _tool_map(tools)
        self.base = _base_request(list(self.tools.values()), system_instruction, config)
        # L33: the history is made acceptable to this model once; later contents are its own.
        self.target = Origin.of(model)
        self.contents, self.origins, self.signature_changes = prepare_history(
            contents, origins, self.target, policy
        )
        self.request: dict[str, Any] = {"contents": self.contents, **self.base}
        # I22: on the Interactions API signatures live on the model's steps, checked there.
        self.interactions = getattr(model, "api", None) == "interactions"
        self.guard = RequestGuard(
            require_signatures=not self.interactions and requires_signatures(self.target.model)
        )
        self.guard.extend(self.contents)
        self.guard.check_end()
        self.track_context = limits.max_context_tokens is not None
        # progress of the turn
        self.steps = 0
        self.hops = 0  # L62: continuation hops sent this turn
        self.tool_calls = 0
        self.usage: dict[str, Any] = {}
        self.usage_by_step: list[dict[str, Any]] = []
        self.retries = {"malformed": 0, "no-finish": 0, "provider": 0}
        self.texts: list[str] = []
        self.raw_finish: str | None = None
        self.error: ProviderError | None = None
        self.detail: str | None = (
            None  # the {detail} of the provider-error message, when not derived
        )
        self.answer: str | None = (
            None  # set when the model answered (or the final answer succeeded)
        )
        self.blocked = False
        self.nudged = False
        # L39: the first answered call of each id this turn (name, args, response), and
        # this step's repeated calls (index of the first one, or an earlier step's response)
        self.answered: dict[str, tuple[str, Any, dict[str, Any]]] = {}
        self.repeats: dict[int, int | dict[str, Any]] = {}
        self.prompt_tokens: int | None = None
        self.chars_since = 0
        # clocks
        self.cause: str | None = None
        self.caller_cancelled = False
        self.finished = False
        self.cancelling_batch = False
        self.stall_holds = 0
        self.stalled_after = 0.0
        self.last_progress = 0.0
        self.start_time = 0.0
        self.deadline = math.inf
        self.handles: dict[str, asyncio.TimerHandle] = {}
        self.watcher: asyncio.Task[None] | None = None

    # -- task management -------------------------------------------------

    def start(self) -> asyncio.Task[TurnResult]:
        self.loop = asyncio.get_running_loop()
        self.task = self.loop.create_task(self._main())
        return self.task

    async def cancel(self) -> None:
        """The caller gave up: cancel the turn and wait for its cleanup."""
        self.caller_cancelled = True
        await _reap([self.task])

    def _interrupt(self, cause: str) -> None:
        if self.cause is None and not self.finished:
            self.cause = cause
            self.task.cancel()

    async def _main(self) -> TurnResult:
        loop = self.loop
        limits = self.limits
        self.start_time = self.last_progress = now = loop.time()
        self.deadline = now + limits.turn_timeout
        outcome: StopReason | None = None
        try:
            try:
                if math.isfinite(self.deadline):
                    self.handles["deadline"] = loop.call_at(
                        self.deadline, self._interrupt, "time-limit"
                    )
                if limits.stall_timeout is not None:
                    self.handles["stall"] = loop.call_at(
                        now + limits.stall_timeout, self._check_stall
                    )
                if self.abort is not None:
                    self.watcher = loop.create_task(self._watch_abort(self.abort))
                for change in self.signature_changes:  # L33: never silent
                    await self._lifecycle(f"signature-{change.action}", 0, detail=change.detail)
                outcome = await self._drive()
            except asyncio.CancelledError:
                if self.caller_cancelled or self.cause is None:
                    raise
            finally:
                self.finished = True
                for handle in self.handles.values():
                    handle.cancel()
                self.handles.clear()
            result = self._result(outcome)
            if result.stop_reason is not StopReason.COMPLETED:
                await self._lifecycle(result.stop_reason.value, min(self.steps, limits.max_steps))
            await self._emit(TurnEnd(result))
            return result
        finally:
            if self.watcher is not None:
                await _reap([self.watcher])

    async def _watch_abort(self, abort: asyncio.Event) -> None:
        await abort.wait()
        self._interrupt("aborted")

    def _check_stall(self) -> None:
        stall = self.limits.stall_timeout
        assert stall is not None
        if self.finished or self.cause is not None:
            return
        now = self.loop.time()
        due = now + stall
        if not self.stall_holds:
            due = self.last_progress + stall
            if now >= due - _EPSILON:
                self.stalled_after = stall
                self._interrupt("stalled")
                return
        self.handles["stall"] = self.loop.call_at(due, self._check_stall)

    def _heartbeat(self) -> None:
        self.last_progress = self.loop.time()

    def _remaining(self) -> float | None:
        if math.isinf(self.deadline):
            return None
        return max(0.0, self.deadline - self.loop.time())

    def _call_timeout(self, left: float | None) -> float | None:
        """The timeout of one model call: ``request_timeout`` within the time left (L36)."""
        cap = self.limits.request_timeout
        if cap is None:
            return left
        return cap if left is None else min(cap, left)

    def _holding(self) -> list[StopReason]:
        """The interrupting causes that hold right now (L1, L7)."""
        found = []
        if self.cause in _CAUSES:
            found.append(_CAUSES[self.cause])
        if self.loop.time() >= self.deadline - _EPSILON:
            found.append(StopReason.TIME_LIMIT)
        if self.abort is not None and self.abort.is_set():
            found.append(StopReason.ABORTED)
        return found

    def _checkpoint(self) -> StopReason | None:
        found = self._holding()
        return min(found, key=_PRECEDENCE.__getitem__) if found else None

    async def _take_pending_interrupt(self) -> None:
        """Raise the turn's cancellation now when a cause already holds (L43).

        A synchronous handler that sets the abort event returns before the
        watcher task has run, and a deadline may pass without its timer having
        fired yet: latch the cause and take the cancellation before a request
        is sent.
        """
        stop = self._checkpoint()
        if stop is not None:
            self._interrupt("aborted" if stop is StopReason.ABORTED else "time-limit")
            await asyncio.sleep(0)

    # -- events ----------------------------------------------------------

    async def _emit(self, event: TurnEvent) -> None:
        if self.sink is not None:
            result = self.sink(event)
            if result is not None and inspect.isawaitable(result):
                await result

    async def _lifecycle(
        self, phase: str, step: int, tool_name: str | None = None, *, detail: str | None = None
    ) -> None:
        if self.sink is not None:
            await self._emit(
                Lifecycle(
                    phase,
                    step,
                    self.limits.max_steps,
                    tool_name,
                    self.tool_calls,
                    self.loop.time() - self.start_time,
                    provider=self.target.backend,
                    timestamp=time.time(),
                    detail=detail,
                )
            )

    # -- the steps -------------------------------------------------------

    async def _drive(self) -> StopReason:
        limits = self.limits
        while True:
            stop = self._checkpoint()
            if stop is not None:
                return stop
            if self.steps >= limits.max_steps:
                return await self._final_answer()
            if self.track_context and self._context_exceeded():
                return StopReason.CONTEXT_CAP
            self.steps += 1
            stop = await self._step(self.steps)
            if stop is not None:
                return stop

    def _context_exceeded(self) -> bool:
        cap = self.limits.max_context_tokens
        if cap is None or self.prompt_tokens is None:
            return False
        return self.prompt_tokens + self.chars_since / 4 > cap

    def _append(self, content: dict[str, Any]) -> None:
        self.contents.append(content)
        if self.track_context:
            self.chars_since += len(orjson.dumps(content))

    async def _step(self, step: int) -> StopReason | None:
        """Run step ``step`` with its retries; None when tools ran and the turn goes on."""
        limits = self.limits
        provider_left = limits.provider_retries
        no_finish_left = limits.no_finish_retries
        attempt = 0
        retry: str | None = None  # the kind of retry the next attempt is
        stream_error: dict[str, Any] | None = None
        while True:
            attempt += 1
            if attempt > 1:
                stop = self._checkpoint()
                if stop is not None:
                    return stop
            if retry is not None:  # L37: counted once it is really sent
                self.retries[retry] += 1
                retry = None
            self.guard.extend(self.contents)
            self.guard.check_end()
            result, error, visible = await self._request(
                step, attempt, self.request, self._call_timeout(self._remaining())
            )
            raw = result.finish_reason
            self.raw_finish = raw
            for warning in result.warnings:  # L40: two responses in one body, said out loud
                if warning.startswith("E10:"):
                    await self._lifecycle("response-id-changed", step, detail=warning)
            calls = result.function_calls
            # L32: a call the model did not finish (flushed at close) is never run.
            unfinished = bool(calls) and bool(result.unfinished_calls)
            cut = None
            if unfinished:
                calls = []
                k = result.unfinished_calls[0]
                name = result.parts[k]["functionCall"].get("name")
                cut = f"L32: the stream ended inside the call {name!r} (part {k}); it was not run"
            no_finish = not raw and not calls and not self._blocked(result)
            if error is None and result.error is not None:
                error = _stream_error(result.error)
                if no_finish and not visible and _retryable(error):
                    stream_error, error = (
                        result.error,
                        None,
                    )  # a no-finish step (L3.4) that says why
            if error is not None:
                if _retryable(error) and not visible and provider_left > 0:
                    delay = self._retry_delay(error, limits.provider_retries - provider_left)
                    if delay is not None:
                        provider_left -= 1
                        retry = "provider"
                        await self._step_end(step, attempt, raw, "error")
                        await self._lifecycle("provider-retry", step, detail=_describe(error))
                        await self._backoff(delay)
                        continue
                await self._step_end(step, attempt, raw, "error")
                self.error = error
                self._gather(result.text)
                return StopReason.PROVIDER_ERROR
            if raw == "MISSING_THOUGHT_SIGNATURE":  # L35: a history bug; resending cannot help
                await self._step_end(step, attempt, raw, "error")
                self._missing_signature(result.finish_message)
                self._gather(result.text)
                return StopReason.PROVIDER_ERROR
            if calls:
                await self._step_end(step, attempt, raw, "tool-calls")
                self._gather(result.text)
                await self._run_tools(step, result.content, calls)
                return None
            if raw in _MALFORMED or raw == "MALFORMED_RESPONSE" or (unfinished and raw):
                await self._step_end(step, attempt, raw, "malformed")
                if self.retries["malformed"] < limits.malformed_retries:
                    retry = "malformed"
                    # L35: a malformed response is resent as it was, without the call note.
                    if raw != "MALFORMED_RESPONSE" and not _is_note(
                        self.contents[-1], MALFORMED_NOTE
                    ):
                        self._append({"role": "user", "parts": [{"text": MALFORMED_NOTE}]})
                    await self._lifecycle("malformed-retry", step, detail=cut)
                    continue
                tries = self.retries["malformed"] + 1
                named = raw in _MALFORMED or raw == "MALFORMED_RESPONSE"
                sent = raw if named else "an unfinished function call"
                self.detail = f"the model sent {sent} {_times(tries)}"
                self.error = ProviderError(
                    None,
                    raw if named else "UNFINISHED_FUNCTION_CALL",
                    f"{self.detail} in this turn; retrying did not help",
                    True,
                    kind="malformed",
                    body={"finishReason": raw, "finishMessage": result.finish_message},
                )
                return StopReason.PROVIDER_ERROR
            if no_finish:
                await self._step_end(step, attempt, raw, "no-finish")
                if no_finish_left > 0:
                    no_finish_left -= 1
                    retry = "no-finish"
                    if cut is None and stream_error is not None:
                        cut = _describe(_stream_error(stream_error))
                    await self._lifecycle("no-finish-retry", step, detail=cut)
                    continue
                why = (
                    ""
                    if stream_error is None
                    else f"; last error in the stream: {_error_label(stream_error)}"
                )
                self.detail = (
                    f"no finish reason in {attempt} attempts" if attempt > 1 else "no finish reason"
                )
                self.error = ProviderError(
                    None,
                    "NO_FINISH_REASON",
                    f"the model's response ended without a finish reason {_times(attempt)}{why}",
                    True,
                    kind="no-finish-reason",
                    body=stream_error,
                )
                self._gather(result.text)
                return StopReason.PROVIDER_ERROR
            await self._step_end(step, attempt, raw, "answer")
            if _has_substance(result.parts):
                self._append(result.content)
            self.answer = result.text
            return StopReason.COMPLETED

    def _missing_signature(self, finish_message: str | None) -> None:
        """The error of a MISSING_THOUGHT_SIGNATURE finish, naming the part (L35)."""
        where = first_unsigned_call(self.contents)
        if where is not None:
            self.detail = f"no thought signature at {where}"
            message = (
                f"the model refused the history: {where} has no thoughtSignature; keep the "
                "signatures the model returned, or declare the history's origin "
                "(run_turn(history_origin=...)) so the sentinel is put there"
            )
        else:
            self.detail = "a thought signature was refused"
            message = (
                "the model reported a missing thought signature although every function call of "
                "the current turn has one; one may come from another model or backend: declare "
                "the history's origin (run_turn(history_origin=...))"
            )
        self.error = ProviderError(
            None,
            "MISSING_THOUGHT_SIGNATURE",
            message,
            False,
            kind="history",
            body={"finishReason": "MISSING_THOUGHT_SIGNATURE", "finishMessage": finish_message},
        )

    def _blocked(self, result: Any) -> bool:
        feedback = result.prompt_feedback
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self.blocked = True
            self.raw_finish = str(feedback["blockReason"])
            return True
        return False

    def _gather(self, text: str) -> None:
        if text:
            self.texts.append(text)

    def _retry_delay(self, error: ProviderError, done: int) -> float | None:
        """Seconds to wait before retry number ``done + 1``; None when that would pass the deadline."""
        limits = self.limits
        if error.retry_after is not None:
            delay = max(0.0, float(error.retry_after))
            if delay > _MAX_SERVER_DELAY:  # L44: do not wait that long, end the turn
                return None
        else:
            delay = min(limits.retry_backoff * 2**done, limits.max_retry_backoff)
            delay *= random.uniform(0.5, 1.0)
        remaining = self._remaining()
        if remaining is not None and delay >= remaining:
            return None
        return delay

    async def _backoff(self, delay: float) -> None:
        self.stall_holds += 1  # waiting on purpose is not a stall
        try:
            await asyncio.sleep(delay)
        finally:
            self.stall_holds -= 1
            self.last_progress = self.loop.time()

    async def _step_end(self, step: int, attempt: int, raw: str | None, outcome: str) -> None:
        if self.sink is not None:
            await self._emit(StepEnd(step, attempt, raw, self.usage_by_step[-1], outcome))

    async def _request(
        self,
        step: int,
        attempt: int,
        request: dict[str, Any],
        timeout: float | None,
        kind: str = "step",
    ) -> tuple[Any, ProviderError | None, bool]:
        """Send one request and aggregate its stream: (result, transport error, visible output seen).

        Long decode (L56-L61): a hop ending with a continuation token is followed by
        the same request with the token, and a drop after a checkpoint is resumed;
        the result is then every segment read as one (:class:`Hops`).
        """
        if self.sink is not None:
            await self._emit(StepStart(step, self.limits.max_steps, attempt, kind))
            await self._take_pending_interrupt()
        self.call_names: dict[int, str | None] = {}
        segments: list[Any] = []
        visible = False
        sent = request
        resumes = 0
        while True:
            agg: Any = (
                StreamAggregator(api="interactions") if self.interactions else StreamAggregator()
            )
            opener = self.model.stream(sent, timeout=timeout)
            while True:
                error, seen, covered = await self._read(step, attempt, agg, opener, segments)
                visible = visible or seen
                partial = agg.snapshot() if error is not None and self.interactions else None
                # I26: a stored interaction is resumed where it dropped, into the same aggregate.
                if (
                    partial is not None
                    and error is not None
                    and error.kind in ("connection", "timeout")
                    and partial.interaction_id is not None
                    and request.get("store") is not False
                    and resumes < MAX_RESUMES
                ):
                    resumes += 1
                    agg.reconnect()
                    await self._lifecycle("stream-resume", step, detail=_resumed(error, resumes))
                    opener = self.model.resume(  # type: ignore[attr-defined]
                        partial.interaction_id, partial.last_event_id, timeout=timeout
                    )
                    continue
                break
            result: Any = agg.close()
            self._record_usage(result.usage)
            if self.interactions:
                result = InteractionsTurn(result)
            segments.append(result)
            token = hop_token(result) if error is None else None
            if token is None and error is not None and error.kind in ("connection", "timeout"):
                # L59: resume from the checkpoint when it covers everything received.
                token = checkpoint_token(result) if covered and resumes < MAX_RESUMES else None
                if token is not None:
                    resumes += 1
                    sent = hop_request(request, result, token)
                    await self._lifecycle(
                        "continuation-resume", step, detail=_resumed(error, resumes)
                    )
                    continue
                token = None
            if token is None or len(segments) >= MAX_HOPS:
                view = segments[0] if len(segments) == 1 else Hops(segments)
                return view, error, visible
            self.hops += 1
            resumes = 0
            sent = hop_request(
                request, result, token
            )  # L58: the same request, never the partial output
            await self._lifecycle(
                "continuation", step, detail=f"L56: hop {len(segments) + 1} of step {step}"
            )
            await self._take_pending_interrupt()

    async def _read(
        self, step: int, attempt: int, agg: Any, opener: Any, segments: list[Any]
    ) -> tuple[ProviderError | None, bool, bool]:
        """Feed one body into ``agg``: (transport error, visible output, and whether the
        latest continuation token came in the last body chunk that had output, L59)."""
        loop = self.loop
        self.last_progress = loop.time()  # L60: a hop or a resume is progress
        visible = False
        error: ProviderError | None = None
        marker = b"continuation_token" if self.interactions else b"continuationToken"
        token_at = output_at = 0
        n = 0
        first_timeout = self.limits.first_output_timeout
        waiting = first_timeout is not None
        if first_timeout is not None:
            self.stall_holds += 1
            self.handles["first"] = loop.call_later(first_timeout, self._interrupt, "first-output")
        try:
            async with opener as body:
                async for chunk in body:
                    if waiting:
                        waiting = False
                        self.stall_holds -= 1
                        self.handles.pop("first").cancel()
                    self.last_progress = loop.time()
                    n += 1
                    if marker in chunk:
                        token_at = n
                    try:
                        deltas = agg.feed(chunk)
                    except MalformedStreamError as exc:
                        visible = await self._deltas(step, exc.deltas) or visible
                        error = ProviderError(
                            None, "MALFORMED_STREAM", str(exc), True, kind="malformed"
                        )
                        break
                    if deltas:
                        output_at = n
                        visible = await self._deltas(step, deltas) or visible
            if error is None and not self.interactions:
                # A last event without a trailing blank line is shown live too (D5).
                deltas = agg.finish()
                if deltas:
                    visible = await self._deltas(step, deltas) or visible
        except ProviderError as exc:
            error = exc
        except (ConnectionError, EOFError) as exc:
            error = ProviderError(
                None, "CONNECTION", f"{type(exc).__name__}: {exc}", True, kind="connection"
            )
        except TimeoutError as exc:
            error = ProviderError(
                None, "DEADLINE_EXCEEDED", f"the request timed out: {exc}", True, kind="timeout"
            )
        except asyncio.CancelledError:
            partial = agg.snapshot()
            self._record_usage(partial.usage)
            self._gather("".join(s.text for s in segments) + partial.text)
            self.raw_finish = partial.status if self.interactions else partial.finish_reason
            await self._step_end(step, attempt, self.raw_finish, "interrupted")
            raise
        finally:
            if waiting:
                self.stall_holds -= 1
                handle = self.handles.pop("first", None)
                if handle is not None:
                    handle.cancel()
        return error, visible, token_at >= output_at

    async def _deltas(self, step: int, deltas: list[Any]) -> bool:
        """Deliver text and thought deltas as events; True when visible output came."""
        visible = False
        sink = self.sink
        for delta in deltas:
            kind = type(delta)
            if kind is _AggTextDelta:
                if delta.candidate:
                    continue
                if delta.thought:
                    if sink is not None:
                        await self._emit(ThoughtDelta(step, delta.text))
                else:
                    visible = True
                    if sink is not None:
                        await self._emit(TextDelta(step, delta.text))
            elif kind is _AggCallStart and not delta.candidate:
                visible = True
                self.call_names[delta.index] = delta.name
                if sink is not None:
                    await self._emit(ToolCallDelta(step, delta.index, delta.name, None, None))
            elif kind is _AggArgDelta and not delta.candidate and sink is not None:
                name = self.call_names.get(delta.index)
                await self._emit(
                    ToolCallDelta(step, delta.index, name, delta.json_path, delta.value)
                )
        return visible

    def _record_usage(self, usage: dict[str, Any] | None) -> None:
        usage = usage or {}
        self.usage_by_step.append(usage)
        if usage:
            _add_usage(self.usage, usage)
            # L23 / I27: the prompt size as either API reports it
            prompt = usage.get("promptTokenCount", usage.get("total_input_tokens"))
            if isinstance(prompt, int):
                self.prompt_tokens = prompt
                self.chars_since = 0

    # -- tools (L5, L6, L8) ----------------------------------------------

    async def _run_tools(
        self, step: int, content: dict[str, Any], calls: list[dict[str, Any]]
    ) -> None:
        self._append(content)
        responses: list[dict[str, Any] | None] = [None] * len(calls)
        started = self.loop.time()
        tasks: list[asyncio.Task[None]] = []
        self.repeats = {}
        # L42: from here on every exit answers every call, the awaited events included.
        try:
            for i, call in enumerate(calls):
                if self.sink is not None:
                    await self._emit(
                        ToolCallStart(step, i, call.get("id"), call["name"], call.get("args") or {})
                    )
            await self._find_repeats(step, calls)
            self.last_progress = started = self.loop.time()
            run = [i for i in range(len(calls)) if i not in self.repeats]  # L39: once per call
            if len(run) == 1:
                # One call runs in the turn's own task: a task of its own would cost a
                # Task, two loop iterations and a context copy per step (L46).
                await self._call_tool(step, run[0], calls[run[0]], responses)
            else:
                tasks = [
                    self.loop.create_task(self._call_tool(step, i, calls[i], responses))
                    for i in run
                ]
                await asyncio.gather(*tasks)
        except BaseException:
            self.cancelling_batch = True
            try:
                await _reap(tasks)
            finally:
                self.cancelling_batch = False
                await self._answer_calls(step, calls, responses, started, final=False)
            raise
        await self._answer_calls(step, calls, responses, started, final=True)

    async def _answer_calls(
        self,
        step: int,
        calls: list[dict[str, Any]],
        responses: list[dict[str, Any] | None],
        started: float,
        *,
        final: bool,
    ) -> None:
        """Append the user content with one function response per call, in call order.

        The content is appended before any event is emitted, so that an interrupt
        while a handler is awaited cannot leave a call unanswered (L42).
        """
        parts: list[dict[str, Any]] = []
        cut_off: list[int] = []
        repeated: list[int] = []
        for i, call in enumerate(calls):
            response = responses[i]
            if response is None and i in self.repeats:  # L39: answered like the first one
                source = self.repeats[i]
                response = responses[source] if isinstance(source, int) else source
                responses[i] = response
                if response is not None:
                    repeated.append(i)
            call_id = call.get("id")
            if (
                isinstance(call_id, str)
                and response is not None
                and response != {"error": "aborted"}
            ):
                self.answered.setdefault(call_id, (call["name"], call.get("args") or {}, response))
            if response is None:
                response = {"error": "aborted"}
                cut_off.append(i)
            fr: dict[str, Any] = {}
            if call.get("id") is not None:
                fr["id"] = call["id"]
            fr["name"] = call["name"]
            fr["response"] = response
            parts.append({"functionResponse": fr})
        remaining = self._remaining()
        nudge = (
            final
            and not self.nudged
            and remaining is not None
            and remaining < self.limits.wrapup_lead
            and self.limits.turn_budget_set  # L38: not for the defensive default
        )
        if nudge:
            assert remaining is not None
            self.nudged = True
            parts.append({"text": WRAPUP_NOTE.format(remaining=_fmt_duration(remaining))})
        self._append({"role": "user", "parts": parts})
        if self.sink is not None:
            for i in repeated:  # events only after the content is in place (L42)
                call, response = calls[i], parts[i]["functionResponse"]["response"]
                status = "error" if "error" in response else "ok"
                await self._emit(
                    ToolCallEnd(step, i, call.get("id"), call["name"], status, 0.0, response)
                )
            for i in cut_off:
                call = calls[i]
                await self._emit(
                    ToolCallEnd(
                        step,
                        i,
                        call.get("id"),
                        call["name"],
                        "aborted",
                        self.loop.time() - started,
                        parts[i]["functionResponse"]["response"],
                    )
                )
        if nudge:
            await self._lifecycle("wrapup", step)

    async def _find_repeats(self, step: int, calls: list[dict[str, Any]]) -> None:
        """L39: a call repeating an id of this turn with the same name and args runs once."""
        self.repeats = {}
        first: dict[str, int] = {}
        for i, call in enumerate(calls):
            call_id = call.get("id")
            if not isinstance(call_id, str):
                continue
            j = first.setdefault(call_id, i)
            source: int | dict[str, Any]
            if j != i:
                name, args, source = calls[j]["name"], calls[j].get("args") or {}, j
                where = f"call {j} of this step"
            elif call_id in self.answered:
                name, args, source = self.answered[call_id]
                where = "a call of an earlier step"
            else:
                continue
            if name == call["name"] and args == (call.get("args") or {}):
                self.repeats[i] = source
                detail = (
                    f"L39: call {i} repeats the id {call_id!r} of {where} with the same name and "
                    "arguments; the tool ran once and each part gets its response"
                )
            else:
                detail = (
                    f"L39: call {i} reuses the id {call_id!r} of another call of this turn with "
                    "a different name or arguments; both were run"
                )
            await self._lifecycle("duplicate-call-id", step, call["name"], detail=detail)

    async def _call_tool(
        self, step: int, i: int, call: dict[str, Any], responses: list[dict[str, Any] | None]
    ) -> None:
        loop = self.loop
        name = call["name"]
        tool = self.tools.get(name)
        start = loop.time()
        status = "ok"
        if tool is None:
            known = ", ".join(self.tools) or "none"
            response: dict[str, Any] = {
                "error": f"Unknown tool {name!r}. Available tools: {known}."
            }
            status = "error"
        else:
            timeout = tool.timeout if tool.timeout is not None else self.limits.tool_timeout
            own = math.isfinite(timeout)
            ctx = None
            if tool.wants_context:
                ctx = ToolContext(
                    abort=self.abort if self.abort is not None else asyncio.Event(),
                    deadline=min(start + timeout, self.deadline),
                    heartbeat=self._heartbeat,
                    clock=loop.time,
                    tool_name=name,
                    call_id=call.get("id"),
                    step=step,
                )
            task = asyncio.current_task()
            assert task is not None
            timed_out = False

            def on_timeout() -> None:
                nonlocal timed_out
                timed_out = True
                task.cancel()

            # When the turn's deadline comes first it ends the tool anyway: no timer (L46).
            armed = own and start + timeout < self.deadline
            handle = loop.call_later(timeout, on_timeout) if armed else None
            if own:
                self.stall_holds += 1  # the tool's own timeout bounds it (L7)
            try:
                response = {"output": _jsonable(await tool.invoke(call.get("args") or {}, ctx))}
            except asyncio.CancelledError:
                if ctx is not None:
                    ctx.cancelled.set()
                if timed_out:
                    response = {
                        "error": f"{name} timed out after {_fmt_seconds(timeout)}s and was stopped"
                    }
                    status = "timeout"
                elif self.cause is None and not self.caller_cancelled and not self.cancelling_batch:
                    response = {"error": "CancelledError: the tool cancelled itself"}
                    status = "error"
                else:
                    raise
                uncancel = getattr(task, "uncancel", None)
                if timed_out and uncancel is not None:
                    uncancel()
            except Exception as exc:
                response = {"error": f"{type(exc).__name__}: {exc}"}
                status = "error"
            finally:
                if handle is not None:
                    handle.cancel()
                if own:
                    self.stall_holds -= 1
                self.last_progress = loop.time()
        responses[i] = response
        self.tool_calls += 1
        if status == "timeout":
            await self._lifecycle("tool-timeout", step, name)
        if self.sink is not None:
            await self._emit(
                ToolCallEnd(step, i, call.get("id"), name, status, loop.time() - start, response)
            )

    # -- step cap (L9) ---------------------------------------------------

    async def _final_answer(self) -> StopReason:
        limits = self.limits
        note = {"role": "user", "parts": [{"text": FINAL_ANSWER_NOTE}]}
        guard = self.guard.fork()
        guard.extend(self.contents)
        guard.add(note)
        guard.check_end()
        request = {**self.base, "contents": [*self.contents, note]}
        request["toolConfig"] = _tools_off(request.get("toolConfig"))
        remaining = self._remaining()
        window = limits.synth_timeout if remaining is None else min(limits.synth_timeout, remaining)
        self.handles["synth"] = self.loop.call_later(window, self._interrupt, "synth-timeout")
        step = limits.max_steps + 1
        try:
            result, error, _ = await self._request(
                step, 1, request, self._call_timeout(window), "final-answer"
            )
        except asyncio.CancelledError:
            if self.cause != "synth-timeout" or self.caller_cancelled:
                raise
            self.cause = None  # the final answer timed out; the turn itself goes on to end
            uncancel = getattr(self.task, "uncancel", None)
            if uncancel is not None:
                uncancel()
            return StopReason.STEP_CAP
        finally:
            handle = self.handles.pop("synth", None)
            if handle is not None:
                handle.cancel()
        await self._step_end(step, 1, result.finish_reason, "final-answer")
        if error is None and result.error is None and result.text and not result.function_calls:
            self.contents.append(note)
            self._append(result.content)
            self.answer = result.text
        return StopReason.STEP_CAP

    # -- the result (L4, L10) --------------------------------------------

    def _result(self, outcome: StopReason | None) -> TurnResult:
        limits = self.limits
        answered = self.answer is not None
        stop = outcome
        if not answered:
            found = self._holding()
            if outcome is not None:
                found.append(outcome)
            stop = min(found, key=_PRECEDENCE.__getitem__)
        assert stop is not None
        n = self.tool_calls
        message: str | None
        if stop is StopReason.COMPLETED:
            message = None
        elif stop is StopReason.STEP_CAP:
            message = (
                f"I gathered information across {_calls(n)} but reached the {limits.max_steps}-step "
                "limit for a single turn before I could finish. Please narrow the request or break it "
                "into smaller asks and I'll continue."
                if n
                else f"I reached the {limits.max_steps}-step limit for a single turn before I could "
                "finish. Please narrow the request or break it into smaller asks and I'll continue."
            )
        elif stop is StopReason.TIME_LIMIT:
            message = (
                f"I had to stop after {_fmt_duration(limits.turn_timeout)} — this turn hit its "
                f"processing time limit. I completed {_calls(n)} before stopping; ask me to continue "
                "and I'll pick up from there."
            )
        elif stop is StopReason.STALLED:
            after = (
                self.limits.first_output_timeout
                if self.cause == "first-output"
                else self.stalled_after
            )
            message = (
                f"I had to stop because this turn made no progress for {_fmt_seconds(after or 0.0)}s — "
                "a tool or model call appears to be stuck. I completed "
                f"{_calls(n)} before stopping; ask me to continue and I'll pick up from there."
            )
        elif stop is StopReason.ABORTED:
            message = f"This turn was stopped before I could finish. I completed {_calls(n)} before stopping."
        elif stop is StopReason.CONTEXT_CAP:
            message = (
                "I had to stop because this conversation no longer fits the model's context window. "
                "Start a new conversation or ask me to summarize."
            )
        else:
            message = f"The model service failed ({self.detail or _error_detail(self.error)}). Please try again."
        if answered and (stop is StopReason.COMPLETED or stop is StopReason.STEP_CAP):
            text = self.answer or ""
        else:
            gathered = "\n\n".join(self.texts)
            text = f"{gathered}\n\n{message}" if gathered else (message or "")
        if stop is StopReason.COMPLETED:
            finish = "content-filter" if self.blocked else map_finish_reason(self.raw_finish)
        elif stop is StopReason.STEP_CAP:
            finish = map_finish_reason(self.raw_finish) if answered else "tool-calls"
        elif stop is StopReason.PROVIDER_ERROR:
            finish = "error"
        else:
            finish = None
        return TurnResult(
            stop_reason=stop,
            finish_reason=finish,
            raw_finish_reason=self.raw_finish,
            text=text,
            message=message,
            contents=self.contents,
            steps_used=self.steps,
            tool_call_count=n,
            elapsed=self.loop.time() - self.start_time,
            usage=self.usage,
            retries=self.retries,
            error=self.error if stop is StopReason.PROVIDER_ERROR else None,
            usage_by_step=self.usage_by_step,
            signatures=self._signature_counts(),
            content_origins=self._content_origins(),
            hops=self.hops,
        )

    def _signature_counts(self) -> dict[str, int]:
        counts = {"stripped": 0, "sentinels": 0}
        for change in self.signature_changes:
            counts["stripped" if change.action == "strip" else "sentinels"] += change.count
        return counts

    def _content_origins(self) -> list[Origin | None]:
        """The origin of each transcript content: as declared, then this model's (L33)."""
        added = self.contents[len(self.origins) :]
        return [*self.origins, *(self.target if c["role"] == "model" else None for c in added)]


# -- helpers --------------------------------------------------------------


async def _reap(tasks: Sequence[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until all are done, even if we are cancelled meanwhile."""
    for task in tasks:
        task.cancel()
    pending = [t for t in tasks if not t.done()]
    interrupted: BaseException | None = None
    while pending:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError as exc:
            interrupted = exc
        pending = [t for t in pending if not t.done()]
    for task in tasks:
        if not task.cancelled():
            task.exception()  # mark retrieved: the first failure is already propagating
    if interrupted is not None:
        raise interrupted


def _tool_map(tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    out: dict[str, Tool] = {}
    for item in tools:
        t = item if isinstance(item, Tool) else Tool.from_function(item)
        if t.name in out:
            raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
        out[t.name] = t
    return out


def _base_request(
    tools: list[Tool],
    system_instruction: str | dict[str, Any] | None,
    config: dict[str, Any] | None,
) -> dict[str, Any]:
    base: dict[str, Any] = {}
    if system_instruction is not None:
        base["systemInstruction"] = (
            {"parts": [{"text": system_instruction}]}
            if isinstance(system_instruction, str)
            else system_instruction
        )
    if tools:
        base["tools"] = [{"functionDeclarations": [t.declaration() for t in tools]}]
    for key, value in (config or {}).items():
        if key == "contents":
            raise ValueError("config cannot set contents; pass them as the contents argument")
        if key == "tools" and "tools" in base:
            base["tools"] = [*base["tools"], *value]
        elif isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            base[key] = _merge(base[key], value)
        else:
            base[key] = value
    return base


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _tools_off(tool_config: Any) -> dict[str, Any]:
    """``toolConfig`` with function calling disabled (mode NONE; no allowed names)."""
    config = dict(tool_config) if isinstance(tool_config, Mapping) else {}
    calling = dict(config.get("functionCallingConfig") or {})
    calling.pop("allowedFunctionNames", None)
    calling["mode"] = "NONE"
    config["functionCallingConfig"] = calling
    return config


def _is_note(content: dict[str, Any], note: str) -> bool:
    return content.get("role") == "user" and content.get("parts") == [{"text": note}]


def _has_substance(parts: list[dict[str, Any]]) -> bool:
    """False for an empty or reasoning-only model content (thoughts, empty signed text)."""
    for part in parts:
        if part.get("thought") is True:
            continue
        if (
            "text" in part
            and not part["text"]
            and all(k in ("text", "thought", "thoughtSignature") for k in part)
        ):
            continue
        return True
    return False


def _retryable(error: ProviderError) -> bool:
    return (
        bool(error.retryable) or error.status in _RETRYABLE_STATUS or error.code in _RETRYABLE_CODES
    )


def _stream_error(error: dict[str, Any]) -> ProviderError:
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    rpc = error.get("status") if isinstance(error.get("status"), str) else None
    message = str(error.get("message") or "error event in the response stream")
    retryable = status in _RETRYABLE_STATUS or rpc in _RETRYABLE_CODES
    return ProviderError(
        status,
        rpc,
        message,
        retryable,
        retry_info_delay(error.get("details")),
        kind="in-stream",
        body=error,
    )


def _describe(error: ProviderError) -> str:
    """A provider error in words for a lifecycle event (L41): status, code, message."""
    label = " ".join(str(x) for x in (error.status, error.code) if x is not None)
    return f"{label or 'error'}: {error.message}"


def _error_label(error: Mapping[str, Any]) -> str:
    return (
        " ".join(str(x) for x in (error.get("code"), error.get("status")) if x is not None)
        or "unknown"
    )


def _error_detail(error: ProviderError | None) -> str:
    """The short ``{detail}`` of the provider-error message (L10)."""
    if error is None:
        return "unknown error"
    if error.kind == "http":
        return " ".join(x for x in ("HTTP", str(error.status or ""), error.code or "") if x)
    if error.kind == "in-stream":
        label = " ".join(str(x) for x in (error.status, error.code) if x is not None)
        return f"{label or 'an error'} in the response stream"
    if error.kind == "connection":
        return "connection lost"
    if error.kind == "timeout":
        return "request timed out"
    if error.code == "MALFORMED_STREAM":
        return "unreadable response stream"
    return error.code or error.kind


def _add_usage(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Sum ``usage`` into ``total`` field by field (L12); per-modality lists by modality."""
    for key, value in usage.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, list)):
            total[key] = value
        elif isinstance(value, list):
            merged = {
                d.get("modality"): dict(d) for d in total.get(key, []) if isinstance(d, Mapping)
            }
            for entry in value:
                if not isinstance(entry, Mapping):
                    continue
                have = merged.get(entry.get("modality"))
                if have is None:
                    merged[entry.get("modality")] = dict(entry)
                else:
                    have["tokenCount"] = have.get("tokenCount", 0) + entry.get("tokenCount", 0)
            total[key] = list(merged.values())
        else:
            total[key] = total.get(key, 0) + value


def _jsonable(value: Any) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    return orjson.loads(
        orjson.dumps(
            value,
            default=_json_default,
            option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
        )
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def _resumed(error: ProviderError, n: int) -> str:
    return f"L59: resume {n} of {MAX_RESUMES} after {_describe(error)}"


def _calls(n: int) -> str:
    return f"{n} tool call" if n == 1 else f"{n} tool calls"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _fmt_seconds(seconds: float) -> str:
    """``30`` -> ``"30"``, ``0.05`` -> ``"0.05"``, ``90.0`` -> ``"90"``."""
    return f"{seconds:g}"


def _fmt_duration(seconds: float) -> str:
    """``"0.5s"`` under a second, ``"45s"``, ``"2m 5s"``, ``"5m"``, ``"1h 2m"``."""
    if seconds < 1:
        return f"{seconds:.1f}s"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if not hours and not minutes:
        return f"{secs}s"
    pieces = [f"{hours}h"] if hours else []
    if minutes:
        pieces.append(f"{minutes}m")
    if secs:
        pieces.append(f"{secs}s")
    return " ".join(pieces)
