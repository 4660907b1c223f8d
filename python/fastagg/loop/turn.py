"""One turn: the step driver (L1-L4, L7, L9-L12, L15, L20, L21, L24, L33a, L37, L40, L43).

:class:`Turn` runs the steps in a task of its own and puts the parts together:
the clock (:mod:`.clock`) cancels it when a cause fires, each step's response
is judged by the pure classifier (:mod:`.classify`), tool calls go to the
batch runner (:mod:`.batch`), the wire format stays behind :mod:`.wire`, and
the texts come from :mod:`.messages`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._json import Content, JSONObject, Request
from .._log import DEBUG, LOOP, STREAM, WARNING, failure, plain, plural
from .._sdk_request import loop_inputs
from ..errors import InvalidRequestError, ProviderError
from ..events import Phase, StepEnd, StepKind, StepOutcome, StepStart, TurnEnd, TurnEvent
from ..limits import MAX_RETRY_WAIT, StopReason, TurnLimits, TurnResult
from ..model import ModelClient
from ..request import map_finish_reason
from ..signatures import (
    Origin,
    SignaturePolicy,
    first_unsigned_call,
    prepare_history,
    sentinel_on_first_call,
    turn_start,
)
from ..telemetry import TurnTelemetry, for_turn
from ..tools import Tool
from .batch import ToolRunner, needs_confirmation, pending_detail, tool_map
from .classify import Budget, Outcome, Verdict, classify, history_error, unsendable
from .clock import TurnClock, first_stop, reap
from .emit import DeltaEvents, Emitter
from .messages import FINAL_ANSWER_NOTE, MALFORMED_NOTE, status_notice, stop_message
from .stream import ModelStream, view
from .usage import UsageMeter
from .wire import wire_for

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

_MAX_SERVER_DELAY = MAX_RETRY_WAIT  # L44: a longer Retry-After / retryDelay ends the turn
_RETRIES = (Outcome.PROVIDER_RETRY, Outcome.MALFORMED_RETRY, Outcome.NO_FINISH_RETRY)
_GATHERED = (
    Outcome.PROVIDER_ERROR,
    Outcome.HISTORY_ERROR,
    Outcome.TOOL_CALLS,
    Outcome.NO_FINISH_ERROR,
)


class Turn:
    """The state of one turn. Its methods are the steps; the parts hold the rest.

    About 340 lines, over the house's ~300: the step methods and the result
    assembly share the turn's progress (steps, retries, gathered text, error,
    answer); moving the result out would hand all of it across a module
    boundary. The next split, if one is wanted, is that record plus the result.
    """

    def __init__(
        self,
        model: ModelClient,
        contents: list[Content],
        tools: Sequence[Tool | Callable[..., Any]],
        limits: TurnLimits | None,
        abort: asyncio.Event | None,
        system_instruction: str | Content | None,
        config: JSONObject | None,
        sink: Callable[[TurnEvent], object] | None,
        *,
        origins: Origin | Sequence[Origin | None] | None = None,
        policy: SignaturePolicy | str = SignaturePolicy.AUTO,
        confirm: bool | Mapping[str, bool] | None = None,
    ) -> None:
        # G5: google-genai Content / GenerateContentConfig objects become REST dicts.
        contents, tools, system_instruction, config = loop_inputs(
            contents, tools, system_instruction, config
        )
        self.limits = limits = limits if limits is not None else TurnLimits()
        tool_by_name = tool_map(tools)
        # L33: the history is made acceptable to this model once; later contents are its own.
        self.target = Origin.of(model)
        self.contents, self.origins, self.signature_changes = prepare_history(
            contents,
            origins,
            self.target,
            policy,
            interactions=getattr(model, "api", None) == "interactions",  # L83
        )
        self.added: list[Origin | None] = []  # L33: who made each content the turn adds
        self.wire = wire = wire_for(
            model, self.contents, list(tool_by_name.values()), system_instruction, config
        )
        wire.guard.extend(self.contents)
        # L104: a turn that stopped for confirmation resumes with its calls answered first
        self.resume = _resume(self.contents, confirm)
        if self.resume is None:
            wire.guard.check_end()
        else:
            probe = wire.guard.fork()  # L2: the history as it will be once they are answered
            probe.add(wire.tool_turn(self.resume[0], [{}] * len(self.resume[0]), []))
            probe.check_end()
        self.pending: list[Any] = []  # L103: the calls the turn stopped on
        # L33a: the model's own first call sent without a signature gets the sentinel.
        # (prepare_history has checked the policy; its values are plain strings too)
        self.sign_own = policy in ("auto", "sentinel")
        self.own_sentinels = 0
        self.clock = TurnClock(limits, abort)
        self.emit = Emitter(sink, self.clock, limits.max_steps, self.target.backend)
        self.usage = UsageMeter(limits.max_context_tokens)
        self.stream = ModelStream(model, wire, self.clock, self.usage, self._say)
        self.tools = ToolRunner(
            tool_by_name, limits, abort, self.clock, self.emit, self.wire, self._append
        )
        # T1: None unless OpenTelemetry is imported and a provider set (checked once a turn)
        self.otel = otel = for_turn(model)
        self.tools.otel = otel
        if otel is not None:
            self.stream.model = otel.timed(model)  # T6: the first chunk of each body
        self.steps = 0
        self.retries = {"malformed": 0, "no-finish": 0, "provider": 0}
        self.texts: list[str] = []  # answer text of failed or cut-off steps (L20, L24)
        self.raw_finish: str | None = None
        self.error: ProviderError | None = None
        self.detail: str | None = None  # the {detail} of the provider-error message, if not derived
        self.answer: str | None = None  # set when the model answered (or the final answer did)
        self.blocked = False
        self.status_said = False  # E18: a model's lifecycle notice, once a turn
        self.debug = LOOP.isEnabledFor(DEBUG)  # O5: read once a turn

    # -- task management -------------------------------------------------

    def start(self) -> asyncio.Task[TurnResult]:
        main = self._main() if self.otel is None else self._traced(self.otel)
        self.task = asyncio.get_running_loop().create_task(main)
        return self.task

    async def _traced(self, otel: TurnTelemetry) -> TurnResult:
        """T2: the turn inside its span, current in the turn's task."""
        otel.start()
        try:
            result = await self._main()
        except BaseException as exc:
            otel.fail(exc)
            raise
        otel.end(result)
        return result

    async def cancel(self) -> None:
        """The caller gave up: cancel the turn and wait for its cleanup."""
        self.clock.caller_cancelled = True
        await reap([self.task])

    async def _main(self) -> TurnResult:
        clock = self.clock
        # H10: bound from inside the task, which an eager task factory (Python 3.12+)
        # runs before create_task() has returned it.
        task = asyncio.current_task()
        assert task is not None
        clock.bind(task)
        outcome: StopReason | None = None
        try:
            try:
                clock.start()
                for change in self.signature_changes:  # L33: never silent
                    LOOP.info("signatures: %s", change.detail)  # O2
                    await self._lifecycle(change.phase, 0, detail=change.detail)
                if self.resume is not None:  # L104: the confirmed calls run, refused answered
                    await self.tools.resume(*self.resume)
                outcome = await self._drive()
            except asyncio.CancelledError:
                if clock.caller_cancelled or clock.cause is None:
                    raise  # L14: the caller's own cancellation propagates
            finally:
                clock.stop()
            result = self._result(outcome)
            self._log_end(result)
            if result.stop_reason is not StopReason.COMPLETED:
                await self._lifecycle(
                    result.stop_reason.phase, min(self.steps, self.limits.max_steps)
                )
            if self.emit.active:  # L70: without a sink no event is built
                await self.emit(TurnEnd(result))
            return result
        finally:
            await clock.close()

    def _log_end(self, result: TurnResult) -> None:
        """O2: the turn's end, at debug when it completed, else at info."""
        stop = result.stop_reason
        if stop is StopReason.COMPLETED and not self.debug:
            return
        done = (
            f"{plural(result.steps_used, 'step')} and {plural(result.tool_call_count, 'tool call')}"
        )
        if stop is StopReason.COMPLETED:
            LOOP.debug("turn ended: completed after %s", done)
        elif result.error is not None:
            LOOP.info("turn ended: %s after %s: %s", stop.value, done, failure(result.error))
        else:
            LOOP.info("turn ended: %s after %s", stop.value, done)

    def _diagnose(self, step: int, warnings: list[str]) -> None:
        """O2: the aggregator's diagnostics of a response, at warning (O4: in plain words)."""
        if STREAM.isEnabledFor(WARNING):
            for warning in warnings:
                STREAM.warning("step %d: %s", step, plain(warning))

    async def _lifecycle(
        self, phase: Phase, step: int, tool_name: str | None = None, *, detail: str | None = None
    ) -> None:
        await self.emit.lifecycle(phase, step, self.tools.count, tool_name, detail=detail)

    async def _say(self, phase: Phase, step: int, detail: str) -> None:
        await self._lifecycle(phase, step, detail=detail)

    def _append(self, content: Content, origin: Origin | None = None) -> None:
        """Add a content to the transcript: the model's (``origin``, L33) or the loop's."""
        self.contents.append(content)
        self.added.append(origin)
        if self.usage.cap is not None:  # L23: only a context cap needs the sizes
            self.usage.appended(content)

    def _gather(self, text: str) -> None:
        if text:
            self.texts.append(text)

    # -- the steps -------------------------------------------------------

    async def _drive(self) -> StopReason:
        limits = self.limits
        capped = limits.max_context_tokens is not None  # L71: else nothing to check per step
        while True:
            stop = self.clock.checkpoint()
            if stop is not None:
                return stop
            if self.steps >= limits.max_steps:
                return await self._final_answer()
            if capped and self.usage.exceeded():  # L1, L11: checked before a request
                return StopReason.CONTEXT_CAP
            self.steps += 1
            stop = await self._step(self.steps)
            if stop is not None:
                return stop

    async def _step(self, step: int) -> StopReason | None:
        """Run step ``step`` with its retries (L15); None when tools ran and the turn goes on."""
        limits = self.limits
        budget = Budget(
            limits.provider_retries, limits.no_finish_retries, 0, limits.malformed_retries
        )
        retry: str | None = None  # the kind of retry the next attempt is
        while True:
            budget.attempt += 1
            if budget.attempt > 1:
                stop = self.clock.checkpoint()
                if stop is not None:
                    return stop
            if retry is not None:  # L37: counted once it is really sent
                self.retries[retry] += 1
                retry = None
            budget.malformed_sent = self.retries["malformed"]
            try:
                request = self.wire.request()
            except InvalidRequestError as exc:  # L33a: the model's own output, not the caller's
                again = await self._own_output(step, exc, self.wire.request)
                if again is None:
                    return StopReason.PROVIDER_ERROR
                request = again
            result, error, visible = await self._request(
                step, budget.attempt, request, self.clock.call_timeout()
            )
            response = self.wire.response(result)
            self.raw_finish = response.finish
            warnings = result.warnings
            if warnings:
                for d in result.diagnostics:  # L40: two responses in one body, said out loud
                    if d.code == "response_id_changed":  # X6: read by its code, not its text
                        await self._lifecycle("response-id-changed", step, detail=d.message)
                self._diagnose(step, warnings)
            if not self.status_said:  # E18: a deprecation or retirement notice, said once
                notice = status_notice(getattr(result, "model_status", None), self.target.model)
                if notice is not None:
                    self.status_said = True
                    await self._lifecycle("model-status", step, detail=notice)
            verdict = classify(response, error, visible, budget)
            if verdict.blocked:  # L19: a blocked prompt is an answer, its reason the raw finish
                self.blocked = True
                self.raw_finish = response.block_reason
            outcome = verdict.outcome
            delay = None
            if outcome is Outcome.PROVIDER_RETRY:
                assert verdict.error is not None
                delay = self._retry_delay(verdict.error, limits.provider_retries - budget.provider)
                if delay is None:  # L17, L44: the wait would not fit
                    outcome = Outcome.PROVIDER_ERROR
            if self.debug:
                _log_step_end(step, budget.attempt, response.finish, outcome.step_end)
            if self.emit.active:
                await self._step_end(step, budget.attempt, response.finish, outcome.step_end)
            if outcome in _RETRIES:
                retry = await self._retry(step, outcome, verdict, budget, delay)
                continue
            if outcome in _GATHERED:
                self._gather(result.text)
            return await self._conclude(step, outcome, verdict, result)

    async def _retry(
        self, step: int, outcome: Outcome, verdict: Verdict, budget: Budget, delay: float | None
    ) -> str:
        """Prepare the next attempt of a step; the kind of retry it is (L3, L16, L18, L41)."""
        if outcome is Outcome.PROVIDER_RETRY:
            assert delay is not None
            budget.provider -= 1
            assert verdict.error is not None
            LOOP.info(
                "step %d: %s; retrying in %.3g s (retry %d of %d)",
                step,
                failure(verdict.error),
                delay,
                self.limits.provider_retries - budget.provider,
                self.limits.provider_retries,
            )
            await self._lifecycle("provider-retry", step, detail=verdict.lifecycle)
            with self.clock.hold():  # L22: waiting on purpose is not a stall
                await asyncio.sleep(delay)
            return "provider"
        if outcome is Outcome.MALFORMED_RETRY:
            # L18: the corrective note is its own content, not added twice in a row.
            if verdict.note and not self.wire.is_note(self.contents[-1], MALFORMED_NOTE):
                self._append(self.wire.note(MALFORMED_NOTE))
            LOOP.info(
                "step %d: malformed output (finish %s); asking again (retry %d of %d)",
                step,
                self.raw_finish,
                self.retries["malformed"] + 1,
                self.limits.malformed_retries,
            )
            await self._lifecycle("malformed-retry", step, detail=verdict.lifecycle)
            return "malformed"
        budget.no_finish -= 1
        LOOP.info(
            "step %d: the response ended without a finish reason; asking again (retry %d of %d)",
            step,
            self.limits.no_finish_retries - budget.no_finish,
            self.limits.no_finish_retries,
        )
        await self._lifecycle("no-finish-retry", step, detail=verdict.lifecycle)
        return "no-finish"

    async def _conclude(
        self, step: int, outcome: Outcome, verdict: Verdict, result: Any
    ) -> StopReason | None:
        """Act on a step's final verdict: run its tools, or end the turn."""
        if outcome is Outcome.TOOL_CALLS:
            content = self.wire.model_turn(result)
            assert content is not None  # it holds the calls
            self._append(content, self.target)  # P14: every part goes back as it came, in place
            pending = [call for call in verdict.calls if needs_confirmation(call)]
            if pending:  # L103: nothing runs before the user has confirmed
                self.pending = pending
                self.detail = pending_detail(pending)
                return StopReason.NEEDS_CONFIRMATION
            await self.tools.run(step, verdict.calls)
            return None
        if outcome is Outcome.ANSWER:
            content = self.wire.model_turn(result)
            if content is not None:
                self._append(content, self.target)
            self.answer = result.text
            return StopReason.COMPLETED
        if outcome is Outcome.HISTORY_ERROR:
            where = first_unsigned_call(self.contents)
            self.detail, self.error = history_error(where, result.finish_message)
        else:
            self.error = verdict.error
            self.detail = verdict.detail
        return StopReason.PROVIDER_ERROR

    async def _own_output(
        self, step: int, refused: InvalidRequestError, build: Callable[[], Request]
    ) -> Request | None:
        """L33a: the guard refused the next request, which adds only the model's output
        and the loop's own contents. The sentinel goes on each first call the model sent
        unsigned in the current turn, when that is allowed, and the request is built
        again; else (or if still refused) the turn ends with the error, nothing sent."""
        if self.sign_own:
            first_added = len(self.contents) - len(self.added)
            start = max(turn_start(self.contents), first_added)
            for i in range(start, len(self.contents)):
                if self.added[i - first_added] is None:
                    continue  # the loop's own content
                self.contents[i], name = sentinel_on_first_call(self.contents[i])
                if name is not None:
                    self.own_sentinels += 1
                    detail = (
                        f"put the sentinel signature on the first function call of "
                        f"contents[{i}] ({name!r}): {self.target} sent it without a "
                        "thoughtSignature, and the next request needs one there"
                    )
                    LOOP.info("step %d: signatures: %s", step, detail)  # O2
                    await self._say("signature-sentinel", step, detail)
            self.wire.recheck()
            try:
                return build()
            except InvalidRequestError as exc:
                refused = exc
        self.detail, self.error = unsendable(refused)
        return None

    def _retry_delay(self, error: ProviderError, done: int) -> float | None:
        """Seconds to wait before retry number ``done + 1``; None when that would pass the deadline."""
        limits = self.limits
        if error.retry_after is not None:
            delay = max(0.0, float(error.retry_after))
            if delay > _MAX_SERVER_DELAY:  # L44: do not wait that long, end the turn
                return None
        else:
            # L86: doubling stops once past any cap (2**1024 is no float)
            delay = min(limits.retry_backoff * 2.0 ** min(done, 64), limits.max_retry_backoff)
            delay *= random.uniform(0.5, 1.0)
        remaining = self.clock.remaining()
        if remaining is not None and delay >= remaining:
            return None
        return delay

    async def _step_end(
        self, step: int, attempt: int, raw: str | None, outcome: StepOutcome
    ) -> None:
        """Emit StepEnd; called only when there is a sink (L70: else nothing is awaited)."""
        await self.emit(StepEnd(step, attempt, raw, self.usage.by_step[-1], outcome))

    # -- one request -----------------------------------------------------

    async def _request(
        self,
        step: int,
        attempt: int,
        request: Request,
        timeout: float | None,
        kind: StepKind = "step",
    ) -> tuple[Any, ProviderError | None, bool]:
        """Send one request and aggregate its stream: (result, transport error, visible output seen)."""
        if self.debug:  # O2
            if kind == "step":
                LOOP.debug("step %d, attempt %d: request started", step, attempt)
            else:
                LOOP.debug("step %d: final-answer request started (tools off)", step)
        if self.emit.active:  # L13: StepStart before each request
            await self.emit(StepStart(step, self.limits.max_steps, attempt, kind))
            await self.clock.take_pending()  # L43
        # L71: no progress() here: reading the body restarts the stall clock (L60) before
        # anything can wait.
        events = DeltaEvents(self.emit, step)
        if self.otel is not None:  # T8: off, the one check of a request
            return await self._traced_request(events, step, attempt, request, timeout, kind)
        segments: list[Any] = []
        try:
            return await self.stream.read(events, request, timeout, segments)
        except asyncio.CancelledError:
            # L63: cut in a hop or between two, the partial result is every segment so far.
            await self._interrupted(step, attempt, view(segments))
            raise

    async def _traced_request(
        self,
        events: DeltaEvents,
        step: int,
        attempt: int,
        request: Request,
        timeout: float | None,
        kind: StepKind,
    ) -> tuple[Any, ProviderError | None, bool]:
        """T3: :meth:`_request` inside the request's span, with its metrics (T6)."""
        assert self.otel is not None
        span = self.otel.request(step, attempt, kind, request)
        segments: list[Any] = []
        recorded = len(self.usage.by_step)
        hops = self.stream.hops
        try:
            out = await self.stream.read(events, request, timeout, segments)
        except BaseException as exc:
            cause = self.clock.cause
            span.cut(cause if cause is not None else type(exc).__qualname__)
            if isinstance(exc, asyncio.CancelledError):
                await self._interrupted(step, attempt, view(segments))  # L63
            raise
        span.end(out[0], out[1], self.usage.by_step[recorded:], self.stream.hops - hops)
        return out

    async def _interrupted(self, step: int, attempt: int, partial: Any) -> None:
        """L20: a cut-off request's output is not appended; its text still counts (its
        usage is recorded by the stream)."""
        self._gather(partial.text)
        self.raw_finish = partial.finish_reason
        if self.debug:
            _log_step_end(step, attempt, partial.finish_reason, "interrupted")
        if self.emit.active:
            await self._step_end(step, attempt, partial.finish_reason, "interrupted")

    # -- step cap (L9, L27) ----------------------------------------------

    async def _final_answer(self) -> StopReason:
        limits = self.limits
        note = self.wire.note(FINAL_ANSWER_NOTE)
        try:
            request = self.wire.final_request(note)
        except InvalidRequestError as exc:  # L33a
            again = await self._own_output(
                limits.max_steps + 1, exc, lambda: self.wire.final_request(note)
            )
            if again is None:
                return StopReason.PROVIDER_ERROR
            request = again
        remaining = self.clock.remaining()
        window = limits.synth_timeout if remaining is None else min(limits.synth_timeout, remaining)
        step = limits.max_steps + 1
        bound = self.clock.window(window)
        with bound:
            result, error, _ = await self._request(
                step, 1, request, self.clock.call_timeout_within(window), "final-answer"
            )
        if bound.timed_out:  # the final answer timed out; the turn itself goes on to end
            return StopReason.STEP_CAP
        # L82: the turn's last request is the final answer: its finish is the turn's (a
        # blocked prompt's reason stands for it, L19).
        response = self.wire.response(result)
        self.raw_finish = response.finish or response.block_reason
        if result.warnings:
            self._diagnose(step, result.warnings)
        if self.debug:
            _log_step_end(step, 1, result.finish_reason, "final-answer")
        if self.emit.active:
            await self._step_end(step, 1, result.finish_reason, "final-answer")
        if (
            error is None
            and result.error is None
            # L82: a cut-off or malformed answer is never a trailing model turn
            and map_finish_reason(response.finish) not in (None, "error")
            and result.text
            and not result.function_calls
            and not result.unfinished_calls
        ):
            self.contents.append(note)  # L23: not counted, it was in the request
            self.added.append(None)
            self._append(result.content, self.target)
            self.answer = result.text
        else:
            self._gather(result.text)  # L20, L24: a failed answer's text still counts
        return StopReason.STEP_CAP

    # -- the result (L4, L10, L24) ---------------------------------------

    def _result(self, outcome: StopReason | None) -> TurnResult:
        answered = self.answer is not None
        stop = outcome
        if not answered:  # L21: precedence applies to every outcome but a delivered answer
            found = self.clock.holding()
            if outcome is not None:
                found.append(outcome)
            stop = first_stop(found)
        assert stop is not None
        n = self.tools.count
        message = stop_message(
            stop,
            self.limits,
            n,
            stalled_for=self.clock.stalled_for,
            detail=self.detail,
            error=self.error,
            model=self.target.model,
        )
        if answered and (stop is StopReason.COMPLETED or stop is StopReason.STEP_CAP):
            text = self.answer or ""
        else:
            gathered = "\n\n".join(self.texts)
            text = f"{gathered}\n\n{message}" if gathered else (message or "")
        return TurnResult(
            stop_reason=stop,
            finish_reason=self._finish_reason(stop, answered),
            raw_finish_reason=self.raw_finish,
            text=text,
            message=message,
            contents=self.contents,
            steps_used=self.steps,
            tool_call_count=n,
            elapsed=self.clock.elapsed(),
            usage=self.usage.total,
            retries=self.retries,
            error=self.error if stop is StopReason.PROVIDER_ERROR else None,
            usage_by_step=self.usage.by_step,
            signatures=self._signature_counts(),
            content_origins=self.origins + self.added,
            hops=self.stream.hops,
            pending_calls=self.pending if stop is StopReason.NEEDS_CONFIRMATION else [],
        )

    def _finish_reason(self, stop: StopReason, answered: bool) -> str | None:
        """L4, L24: the unified finish reason of the turn."""
        if stop is StopReason.COMPLETED:
            return "content-filter" if self.blocked else map_finish_reason(self.raw_finish)
        if stop is StopReason.STEP_CAP:
            return map_finish_reason(self.raw_finish) if answered else "tool-calls"
        if stop is StopReason.PROVIDER_ERROR:
            return "error"
        return None

    def _signature_counts(self) -> dict[str, int]:
        counts = {"stripped": 0, "sentinels": self.own_sentinels}
        for change in self.signature_changes:
            counts["stripped" if change.action == "strip" else "sentinels"] += change.count
        return counts


def _resume(
    contents: list[Content], confirm: bool | Mapping[str, bool] | None
) -> tuple[list[Any], list[bool | None]] | None:
    """L104: the calls ``contents`` ends with and, for each, whether the user confirmed it
    (None: it needed no confirmation); None when there is nothing to resume. A history
    that ends with calls waiting for confirmation needs ``confirm``."""
    last = contents[-1] if contents else None
    calls: list[Any] = []
    if isinstance(last, Mapping) and last.get("role") == "model":
        for part in last.get("parts") or ():
            call = part.get("functionCall") if isinstance(part, Mapping) else None
            if isinstance(call, Mapping):
                calls.append(call)
    waiting = [call for call in calls if needs_confirmation(call)]
    if confirm is None:
        if waiting:
            raise InvalidRequestError(
                f"contents ends with {len(waiting)} function call(s) waiting for the user's "
                f"confirmation ({', '.join(repr(c['name']) for c in waiting)}); resume with "
                "run_turn(..., confirm=True) to allow them, confirm=False to refuse them, or "
                "confirm={call_id: bool}",
                f"contents[{len(contents) - 1}]",
            )
        return None
    if not waiting:
        raise ValueError(
            "confirm= was given, but contents does not end with function calls waiting for "
            "the user's confirmation; pass the contents of the result that stopped with "
            "needs-confirmation"
        )
    if isinstance(confirm, bool):
        answers: Mapping[str, bool] | None = None
    elif isinstance(confirm, Mapping):
        answers = confirm
        ids = [call.get("id") for call in waiting]
        missing = [i for i in ids if i not in answers]
        unknown = [key for key in answers if key not in ids]
        if None in ids or missing or unknown:
            raise ValueError(
                f"confirm= must answer each call waiting for confirmation by its id "
                f"({', '.join(repr(i) for i in ids)}); "
                + (
                    "a call without an id can only be answered with confirm=True or False"
                    if None in ids
                    else f"missing: {missing}, unknown: {unknown}"
                )
            )
        for key, value in answers.items():
            if not isinstance(value, bool):
                raise TypeError(f"confirm[{key!r}] must be True or False, not {value!r}")
    else:
        raise TypeError(
            f"confirm must be True, False or a dict of call ids to bool, not {type(confirm).__name__}"
        )
    confirmed: list[bool | None] = []
    for call in calls:
        if not needs_confirmation(call):
            confirmed.append(None)
        elif answers is None:
            confirmed.append(bool(confirm))
        else:
            confirmed.append(answers[call["id"]])
    return calls, confirmed


def _log_step_end(step: int, attempt: int, finish: str | None, outcome: StepOutcome) -> None:
    """O2: the end of a request-step, at debug (the caller checked that it is on)."""
    how = f"finish {finish}" if finish else "no finish reason"
    LOOP.debug("step %d, attempt %d ended: %s, %s", step, attempt, outcome.replace("-", " "), how)
