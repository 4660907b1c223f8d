"""Running one step's tool calls: every call answered on every exit path (L5, L6, L8, L26, L39, L42, L46)."""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from .._json import Content, FunctionCall, JSONObject, Part
from .._log import DEBUG, TOOLS, plain, shown
from ..events import ToolCallEnd, ToolCallStart, ToolStatus
from ..limits import TurnLimits
from ..telemetry import TurnTelemetry
from ..tools import (
    DONE,
    QUEUED,
    RUNNING,
    ThreadCall,
    Tool,
    ToolContext,
    ToolMedia,
    ToolResult,
    tool_threads,
)
from .clock import TurnClock, reap
from .emit import Emitter
from .messages import WRAPUP_NOTE, fmt_duration, fmt_seconds
from .wire import Wire

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

_ABORTED = {"error": "aborted"}
#: L102: the most inline media (base64 characters) one request may carry on the Gemini API
#: ("100 MB, base64 encoded", the API's file-input limits since 2026-01-12): a tool result
#: with more can never be sent, so it is answered with an error instead.
MAX_INLINE_MEDIA = 100 * 1024 * 1024
#: L103: the computer-use argument holding the safety service's verdict on a call
SAFETY_DECISION = "safety_decision"
#: L104: the answer of a call the user refused to confirm (it was not run)
REFUSED = (
    "The user declined to confirm this action, so it was not performed. Do not retry it; "
    "choose another way or ask the user."
)
_MEDIA_TYPES = (ToolMedia, ToolResult)
#: What an answered batch has left to announce: (answers, repeated, cut off, nudged).
_Told = tuple[list[JSONObject], list[int], list[int], bool]


class ToolRunner:
    """Runs the tool calls of each step of one turn and answers them in the transcript."""

    def __init__(
        self,
        tools: dict[str, Tool],
        limits: TurnLimits,
        abort: asyncio.Event | None,
        clock: TurnClock,
        emit: Emitter,
        wire: Wire,
        append: Callable[[Content], None],
    ) -> None:
        self.tools = tools
        self.limits = limits
        self.abort = abort
        self.clock = clock
        self.emit = emit
        self.wire = wire
        self.append = append
        self.count = 0  # L26: calls answered other than aborted or repeated
        self.nudged = False
        self._wrapup = limits.turn_budget_set  # L38: read once, not per step (L71)
        self.debug = TOOLS.isEnabledFor(DEBUG)  # O5: read once a turn
        self._cancelling = False  # the batch is being torn down by the turn
        self.otel: TurnTelemetry | None = None  # T4: the turn's telemetry, when on
        # L39: the first answered call of each id this turn (name, args, response), and
        # this step's repeated calls (index of the first one, or an earlier step's response)
        self._answered: dict[str, tuple[str, Any, JSONObject]] = {}
        self._repeats: dict[int, int | JSONObject] = {}
        self._media: dict[int, list[Part]] = {}  # L101: this step's media parts, per call
        self._acked: Sequence[int] = ()  # L104: this step's calls the user confirmed

    async def resume(self, calls: list[FunctionCall], confirmed: list[bool | None]) -> None:
        """L104: answer the calls a turn stopped on for confirmation: ``confirmed[i]`` True
        runs call ``i`` with the acknowledgement, False answers it refused, None (a call
        that needed no confirmation) runs it as usual."""
        await self.run(0, calls, confirmed)

    async def run(
        self, step: int, calls: list[FunctionCall], confirmed: list[bool | None] | None = None
    ) -> None:
        """Run ``calls`` (the model content holding them is already appended) and answer them."""
        responses: list[JSONObject | None] = [None] * len(calls)
        started = self.clock.time()
        tasks: list[asyncio.Task[str | None]] = []
        self._repeats = {}
        self._media = {}
        refused: list[int] = []
        if confirmed is not None:  # L104: refused calls are answered, not run
            refused = [i for i, yes in enumerate(confirmed) if yes is False]
            for i in refused:
                responses[i] = {"error": REFUSED}
            self._acked = [i for i, yes in enumerate(confirmed) if yes is True]
        else:
            self._acked = ()
        # L42: from here on every exit answers every call, the awaited events included.
        try:
            if self.emit.active:
                for i, call in enumerate(calls):
                    await self.emit(
                        ToolCallStart(step, i, call.get("id"), call["name"], call.get("args") or {})
                    )
            first = calls[0].get("id")  # L71: one call under a new id is not looked at again
            if len(calls) > 1 or (isinstance(first, str) and first in self._answered):
                for i, source, detail in _find_repeats(calls, self._answered):
                    if source is not None:
                        self._repeats[i] = source
                    TOOLS.info("step %d: %s", step, plain(detail))  # O2
                    await self.emit.lifecycle(
                        "duplicate-call-id", step, self.count, calls[i]["name"], detail=detail
                    )
            if self.emit.active:
                for i in refused:
                    call = calls[i]
                    await self.emit(
                        ToolCallEnd(
                            step, i, call.get("id"), call["name"], "error", 0.0, {"error": REFUSED}
                        )
                    )
                # L81: an abort a handler set, or a deadline passed while the events above
                # were delivered, holds before any tool starts: none starts.
                await self.clock.take_pending()
            self.clock.progress()
            started = self.clock.last_progress  # L71: the same instant, read once
            # L5: calls run concurrently and are answered in call order; L39: once per call
            repeats = self._repeats
            run: Sequence[int] = range(len(calls))
            if repeats or refused:
                run = [i for i in run if i not in repeats and i not in refused]
            runner = self._call if self.otel is None else functools.partial(_traced, self)  # T4
            if len(run) == 1:
                # L46: one call runs in the turn's own task: a task of its own would cost a
                # Task, two loop iterations and a context copy per step.
                await runner(step, run[0], calls[run[0]], responses)
            elif run:
                loop = self.clock.loop
                tasks = [loop.create_task(runner(step, i, calls[i], responses)) for i in run]
                await asyncio.gather(*tasks)
        except BaseException:  # L6: an abort or any exit answers every call
            self._cancelling = True
            try:
                await reap(tasks)
            finally:
                self._cancelling = False
                if self.debug:
                    for i, response in enumerate(responses):
                        if response is None and i not in self._repeats:
                            name = calls[i]["name"]
                            TOOLS.debug("step %d: %s (call %d) was cut off", step, name, i)
                told = self._answer(calls, responses, final=False)
                if told is not None:
                    await self._announce(step, calls, started, told)
            raise
        told = self._answer(calls, responses, final=True)
        if told is not None:  # L71: the usual step has nothing to announce, awaits nothing
            await self._announce(step, calls, started, told)

    def _answer(
        self, calls: list[FunctionCall], responses: list[JSONObject | None], *, final: bool
    ) -> _Told | None:
        """Append the user content with one function response per call, in call order;
        what is left to announce (None: nothing).

        L42: the content is appended before any event is emitted, so that an interrupt
        while a handler is awaited cannot leave a call unanswered.
        """
        answers: list[JSONObject] = []
        cut_off: list[int] = []
        repeated: list[int] = []
        for i, call in enumerate(calls):
            response = responses[i]
            if response is None and i in self._repeats:  # L39: answered like the first one
                source = self._repeats[i]
                response = responses[source] if isinstance(source, int) else source
                responses[i] = response
                if response is not None:
                    repeated.append(i)
            call_id = call.get("id")
            if isinstance(call_id, str) and response is not None and response != _ABORTED:
                self._answered.setdefault(call_id, (call["name"], call.get("args") or {}, response))
            if response is None:
                response = {"error": "aborted"}  # L26: cut off by abort, deadline or stall
                cut_off.append(i)
            elif i in self._acked:  # L104: the user confirmed it: the service is told so
                response = {**response, "safety_acknowledgement": "true"}
            answers.append(response)
        remaining = None
        nudge = (
            final
            and not self.nudged
            and self._wrapup  # L38: not for the defensive default
            and (remaining := self.clock.remaining()) is not None
            and remaining < self.limits.wrapup_lead
        )
        extra = []
        if nudge:  # L8, L28: one text part after the function responses
            assert remaining is not None
            self.nudged = True
            extra.append(WRAPUP_NOTE.format(remaining=fmt_duration(remaining)))
        content = self.wire.tool_turn(calls, answers, extra)
        if self._media:  # L101: each call's media go in its function response's parts
            parts = content["parts"]
            for i, media in self._media.items():
                if "error" not in answers[i]:
                    parts[i]["functionResponse"]["parts"] = media
            self._media = {}
        self.append(content)
        if (self.emit.active and (repeated or cut_off)) or nudge:
            return answers, repeated, cut_off, nudge
        return None

    async def _announce(
        self, step: int, calls: list[FunctionCall], started: float, told: _Told
    ) -> None:
        """The events of an answered batch: repeated and cut-off calls, the nudge (L42:
        only after the content is in place)."""
        answers, repeated, cut_off, nudge = told
        if self.emit.active:
            for i in repeated:
                call, response = calls[i], answers[i]
                status: ToolStatus = "error" if "error" in response else "ok"
                await self.emit(
                    ToolCallEnd(step, i, call.get("id"), call["name"], status, 0.0, response)
                )
            for i in cut_off:
                call = calls[i]
                elapsed = self.clock.now() - started
                await self.emit(
                    ToolCallEnd(
                        step, i, call.get("id"), call["name"], "aborted", elapsed, answers[i]
                    )
                )
        if nudge:
            await self.emit.lifecycle("wrapup", step, self.count)

    async def _call(
        self, step: int, i: int, call: FunctionCall, responses: list[JSONObject | None]
    ) -> str | None:
        """Run call ``i`` within its tool's timeout and record its response (L26); the
        kind of failure, if it failed (T4: the span's ``error.type``).

        L71: one coroutine per call; the tool's own is awaited directly in it.
        """
        clock = self.clock
        name = call["name"]
        tool = self.tools.get(name)
        start = clock.time()
        status: ToolStatus = "error"
        response: JSONObject | None = None
        run: Any = None
        failure: str | None = None
        if self.debug:  # O4: the arguments only at debug
            call_id = call.get("id")
            TOOLS.debug(
                "step %d: %s (call %d%s) started with arguments %s",
                step,
                name,
                i,
                "" if call_id is None else f", id {call_id!r}",
                shown(call.get("args") or {}),
            )
        if tool is None:
            known = ", ".join(self.tools) or "none"
            response = {"error": f"Unknown tool {name!r}. Available tools: {known}."}
            failure = "unknown_tool"
        else:
            timeout = tool.timeout if tool.timeout is not None else self.limits.tool_timeout
            ctx = self._context(step, tool, call, start, timeout) if tool.wants_context else None
            # L46: when the turn's deadline comes first it ends the tool anyway: no timer.
            # L22: a tool with its own timeout is bounded by it, so the stall clock waits.
            own = math.isfinite(timeout)
            armed = own and start + timeout < clock.deadline
            window = clock.window(timeout if armed else None, hold=own)
            try:
                with window:
                    run = tool._start(_tool_args(call), ctx)
                    response, status, media = _result_of(name, await run)
                    if media:
                        self._media[i] = media
            except asyncio.CancelledError:
                if ctx is not None:
                    ctx.cancelled.set()
                if clock.interrupted or self._cancelling:
                    raise
                response = {"error": "CancelledError: the tool cancelled itself"}
                failure = "CancelledError"
            except Exception as exc:
                response = {"error": _exception_text(exc)}
                failure = type(exc).__qualname__
            finally:
                if window.timed_out and ctx is not None:
                    ctx.cancelled.set()
            if response is None:  # the window suppressed its own cancellation: a timeout
                response = {"error": _timed_out(name, timeout, run)}
                status = "timeout"
                failure = "timeout"
            elif status == "error" and failure is None:
                failure = "invalid_result"  # L84: a value that cannot be sent as JSON
        responses[i] = response
        self.count += 1
        if self.debug:
            _log_call_end(step, name, i, status, clock.time() - start, response)
        if status == "timeout":
            detail = response["error"]  # L85: the caller is told what the model is
            TOOLS.info("step %d: %s", step, detail)  # O2; it names the tool and its timeout only
            await self.emit.lifecycle("tool-timeout", step, self.count, name, detail=detail)
        if self.emit.active:
            await self.emit(
                ToolCallEnd(step, i, call.get("id"), name, status, clock.time() - start, response)
            )
        return failure

    def _context(
        self, step: int, tool: Tool, call: FunctionCall, start: float, timeout: float
    ) -> ToolContext:
        """What a tool that asks for it gets: abort, deadline, heartbeat, clock (L26)."""
        clock = self.clock
        return ToolContext(
            abort=self.abort if self.abort is not None else asyncio.Event(),
            deadline=min(start + timeout, clock.deadline),
            heartbeat=clock.progress,
            clock=clock.now,
            tool_name=tool.name,
            call_id=call.get("id"),
            step=step,
            timeout=timeout,
        )


def _find_repeats(
    calls: list[FunctionCall], answered: dict[str, tuple[str, Any, JSONObject]]
) -> list[tuple[int, int | JSONObject | None, str]]:
    """L39: a call repeating an id of this turn with the same name and args runs once.

    The calls that reuse an id, in order: (index, what answers it, or None when it runs
    anyway, the Lifecycle detail). Synchronous: a step without reused ids awaits nothing.
    """
    found: list[tuple[int, int | JSONObject | None, str]] = []
    first: dict[str, int] = {}
    for i, call in enumerate(calls):
        call_id = call.get("id")
        if not isinstance(call_id, str):
            continue
        j = first.setdefault(call_id, i)
        source: int | JSONObject
        if j != i:
            name, args, source = calls[j]["name"], calls[j].get("args") or {}, j
            where = f"call {j} of this step"
        elif call_id in answered:
            name, args, source = answered[call_id]
            where = "a call of an earlier step"
        else:
            continue
        if name == call["name"] and args == (call.get("args") or {}):
            detail = (
                f"call {i} repeats the id {call_id!r} of {where} with the same name and "
                "arguments; the tool ran once and each part gets its response"
            )
            found.append((i, source, detail))
        else:
            detail = (
                f"call {i} reuses the id {call_id!r} of another call of this turn with "
                "a different name or arguments; both were run"
            )
            found.append((i, None, detail))
    return found


def _tool_args(call: FunctionCall) -> Any:
    """The arguments the tool gets: the model's, without the service's ``safety_decision``
    (L103)."""
    args = call.get("args") or {}
    if SAFETY_DECISION in args:
        return {key: value for key, value in args.items() if key != SAFETY_DECISION}
    return args


def _result_of(name: str, value: Any) -> tuple[JSONObject, ToolStatus, list[Part] | None]:
    """The response to a call whose tool returned ``value``, and its media parts (L101)."""
    if isinstance(value, _MEDIA_TYPES):
        return _media_output(name, value)
    response, status = _output(name, value)
    return response, status, None


def _log_call_end(
    step: int, name: str, i: int, status: ToolStatus, elapsed: float, response: JSONObject
) -> None:
    """O2: the end of a tool call, at debug (the caller checked that it is on); an error's
    text may quote the arguments (O4)."""
    if status == "ok":
        TOOLS.debug("step %d: %s (call %d) ended: ok in %.3f s", step, name, i, elapsed)
    else:
        TOOLS.debug(
            "step %d: %s (call %d) ended: %s in %.3f s: %s",
            step,
            name,
            i,
            status,
            elapsed,
            shown(response.get("error")),
        )


async def _traced(
    runner: ToolRunner, step: int, i: int, call: FunctionCall, responses: list[JSONObject | None]
) -> str | None:
    """T4: :meth:`ToolRunner._call` inside the call's ``execute_tool`` span, current while
    the tool runs (a sync tool's thread gets a copy of the context, so it nests there too)."""
    assert runner.otel is not None
    name = call["name"]
    tool = runner.tools.get(name)
    description = tool.description if tool is not None else None
    span = runner.otel.tool(name, call.get("id"), call.get("args"), description)
    try:
        failure = await runner._call(step, i, call, responses)
    except BaseException as exc:
        span.fail(exc)
        raise
    span.end(responses[i], failure)
    return failure


def needs_confirmation(call: FunctionCall) -> bool:
    """L103: whether the safety service asks the user to confirm ``call`` before it runs."""
    args = call.get("args")
    decision = args.get(SAFETY_DECISION) if isinstance(args, dict) else None
    return isinstance(decision, dict) and decision.get("decision") == "require_confirmation"


def pending_detail(calls: list[FunctionCall]) -> str:
    """L103: the calls waiting for confirmation, in words, for the turn's message."""
    said = []
    for call in calls:
        explanation = call["args"][SAFETY_DECISION].get("explanation")
        why = f" ({_utf8(explanation)})" if isinstance(explanation, str) and explanation else ""
        said.append(f"the model wants to run {call['name']}{why}")
    return "; ".join(said)


def tool_map(tools: Sequence[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """Tools by name; plain functions become tools (L5)."""
    out: dict[str, Tool] = {}
    for item in tools:
        t = item if isinstance(item, Tool) else Tool.from_function(item)
        if t.name in out:
            raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
        out[t.name] = t
    return out


def _timed_out(name: str, timeout: float, run: Any) -> str:
    """What the model and the caller are told of a call past its timeout (L26, L85)."""
    after = f"{name} timed out after {fmt_seconds(timeout)}s"
    fate = run.fate if type(run) is ThreadCall else None
    if fate == RUNNING:
        return (
            f"{after} and is still running in its thread (a sync function cannot be "
            "stopped); its result will be ignored"
        )
    if fate == QUEUED:
        return (
            f"{after} before it could start (all {tool_threads()} tool threads were busy); "
            "it was not run"
        )
    if fate == DONE:
        return f"{after}; it returned only then, and its result was not used"
    return f"{after} and was stopped"


def _output(name: str, value: Any) -> tuple[JSONObject, ToolStatus]:
    """The response to a call whose tool returned ``value``: ``{"output": ...}`` as plain
    JSON (L26), or an error response saying why it cannot be sent (L84)."""
    try:
        return {"output": _jsonable(value)}, "ok"
    except Exception as exc:
        kind = _utf8(type(value).__name__)
        error = (
            f"{name} returned a value of type {kind} that cannot be sent to the model as JSON "
            f"({_utf8(_message(exc))}); a tool must return JSON values: strings, numbers "
            "(integers within 64 bits), booleans, None, and lists and dicts of them"
        )
        return {"error": error}, "error"


def _media_output(
    name: str, value: ToolMedia | ToolResult
) -> tuple[JSONObject, ToolStatus, list[Part]]:
    """L101, L102: the response and the ``functionResponse.parts`` of a tool that returned
    media; an error response (and no parts) when they cannot be sent."""
    result = value if isinstance(value, ToolResult) else ToolResult(None, (value,))
    media = list(result.media)
    for item in media:
        if not isinstance(item, ToolMedia):
            kind = _utf8(type(item).__name__)
            error = (
                f"{name} returned ToolResult media holding a {kind}; each item must be a ToolMedia"
            )
            return {"error": error}, "error", []
    response, status = _output(name, result.output)
    if status == "error":
        return response, status, []
    parts = [item.part() for item in media]
    inline = sum(len(p["inlineData"]["data"]) for p in parts if "inlineData" in p)
    if inline > MAX_INLINE_MEDIA:
        error = (
            f"{name} returned {inline / 2**20:.1f} MB of inline media (base64 encoded), more "
            f"than the {MAX_INLINE_MEDIA // 2**20} MB a request may carry inline; it was not "
            "sent. Return smaller media, or upload the file (Files API, Cloud Storage) and "
            "return ToolMedia.file(uri, mime_type)"
        )
        return {"error": error}, "error", []
    return response, status, parts


def _exception_text(exc: BaseException) -> str:
    """``"Type: message"`` of a tool's exception (L26), always sendable (L84): a message
    that cannot be read is said so, one that is not valid UTF-8 is escaped."""
    name = _utf8(type(exc).__name__)
    try:
        message = str(exc)
    except Exception as err:
        return f"{name} (its message cannot be read: str() raised {type(err).__name__})"
    return _utf8(f"{name}: {message}")


def _message(exc: Exception) -> str:
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def _utf8(text: str) -> str:
    """``text`` with what UTF-8 cannot hold (lone surrogates) written as escapes."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# L84: what orjson (and the service's JSON) can hold as an integer
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _jsonable(value: Any) -> Any:
    """A tool's result as plain JSON (L26: dataclasses, enums, tuples ...); raises when it
    cannot be one (L84: an integer beyond 64 bits, a string that is not UTF-8 ...)."""
    kind = type(value)
    if (
        value is None
        or kind is bool
        or kind is float
        or (kind is str and value.isascii())
        or (kind is int and _INT_MIN <= value <= _INT_MAX)
    ):
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
