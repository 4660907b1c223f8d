"""The agent turn loop: :func:`run_turn` and :func:`stream_turn` (spec/contract/turn-loop.md L1-L14).

One turn is: model request -> aggregated stream -> tools -> next request, until
the model answers or a budget ends the turn. The parts:

- :mod:`.turn`: the step driver. The turn runs in one task of its own.
- :mod:`.clock`: the clocks (turn deadline, stall watchdog, first-output
  window) are event-loop timers and the abort event is watched by one small
  task; when one fires it latches its cause and cancels the turn task, once.
  Each section cleans up as the cancellation passes through it (the HTTP
  response is closed by leaving its ``async with``; a tool batch is cancelled
  and every unanswered call gets ``{"error": "aborted"}``), then the cause
  becomes the stop reason. A cancellation with no latched cause is the
  caller's own and propagates. Local limits (a tool's timeout, the
  final-answer bound) are windows that do not end the turn.
- :mod:`.classify`: what a response means (answer, tools, retry, error), pure.
- :mod:`.batch`: one step's tool calls, every call answered on every exit.
- :mod:`.wire`: the request and transcript format (``generateContent``, or
  the Interactions API when the client's ``api`` says so). The transcript is
  one list that grows by appending; the request holds that list, so a step
  copies nothing, and the request guard (L2) only checks the contents added
  since the previous request.
- :mod:`.stream`: one model request, through its long-decode hops and
  resumes (the pure parts in :mod:`fastagg.loop.continuation`).
- :mod:`.emit`: events; text and thought deltas become events as ``feed()``
  returns them. :mod:`.messages`: the texts. :mod:`.usage`: usage and the
  context guard.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from .._args import check_turn_args
from .._json import Content, JSONObject
from ..events import TurnEnd, TurnEvent
from ..limits import TurnLimits, TurnResult
from ..model import ModelClient
from ..signatures import Origin, SignaturePolicy
from ..tools import Tool
from .batch import tool_map as _tool_map  # noqa: F401  (tests import it from here)
from .messages import FINAL_ANSWER_NOTE as FINAL_ANSWER_NOTE
from .messages import MALFORMED_NOTE as MALFORMED_NOTE
from .messages import WRAPUP_NOTE as WRAPUP_NOTE
from .messages import fmt_duration as _fmt_duration  # noqa: F401  (tests import it from here)
from .turn import Turn

__all__ = ["run_turn", "stream_turn"]


async def run_turn(
    model: ModelClient,
    contents: list[Content],
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    limits: TurnLimits | None = None,
    abort: asyncio.Event | None = None,
    system_instruction: str | Content | None = None,
    config: JSONObject | None = None,
    on_event: Callable[[TurnEvent], object] | None = None,
    history_origin: Origin | Sequence[Origin | None] | None = None,
    signature_policy: SignaturePolicy | str = SignaturePolicy.AUTO,
    confirm: bool | Mapping[str, bool] | None = None,
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
    cannot accept (:mod:`fastagg.signatures`, L33). ``confirm`` resumes a turn that
    stopped with ``needs-confirmation`` (pass that result's ``contents``): True runs the
    calls waiting for confirmation, False answers them refused, or a dict says it per
    call id (L104).

    Raises :class:`InvalidRequestError` when ``contents`` would be rejected (L2;
    nothing is sent), and ``CancelledError`` when the calling task is cancelled
    (after cleanup). The model's own output that cannot be sent back as it came
    gets the sentinel signature or ends the turn (L33a), never an exception.
    Everything else (budgets, abort, provider failures) ends the turn with a
    result whose ``stop_reason`` and ``message`` say what happened. A wrong
    argument type raises ``TypeError`` before anything is sent (U2).
    """
    check_turn_args(
        "run_turn", model, contents, tools, limits, abort, system_instruction, config, on_event
    )
    turn = Turn(
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
        confirm=confirm,
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
    contents: list[Content],
    *,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    limits: TurnLimits | None = None,
    abort: asyncio.Event | None = None,
    system_instruction: str | Content | None = None,
    config: JSONObject | None = None,
    on_event: Callable[[TurnEvent], object] | None = None,
    history_origin: Origin | Sequence[Origin | None] | None = None,
    signature_policy: SignaturePolicy | str = SignaturePolicy.AUTO,
    confirm: bool | Mapping[str, bool] | None = None,
) -> AsyncIterator[TurnEvent]:
    """Run one turn like :func:`run_turn`, yielding its events as they happen.

    The last event is ``TurnEnd(result)``. Closing the iterator early (or
    cancelling the task that reads it) cancels the turn, with the same cleanup.
    ``break`` alone does not close it: until the generator is garbage
    collected the turn keeps running (L45). Use
    ``async with contextlib.aclosing(stream_turn(...)) as events:`` or call
    ``aclose()``.
    """
    check_turn_args(
        "stream_turn", model, contents, tools, limits, abort, system_instruction, config, on_event
    )
    queue: asyncio.Queue[Any] = asyncio.Queue()
    sink: Callable[[TurnEvent], object]
    if on_event is None:
        sink = queue.put_nowait
    else:
        user = on_event

        async def sink(event: TurnEvent) -> None:
            result = user(event)
            if result is not None and inspect.isawaitable(result):
                await result
            queue.put_nowait(event)

    turn = Turn(
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
        confirm=confirm,
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
    # L45: closing the generator (aclose, or its collection) cancels the turn
    finally:
        if not task.done():
            await turn.cancel()


_DONE = object()
