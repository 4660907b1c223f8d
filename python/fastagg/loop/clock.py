"""The clocks of one turn and the one place that cancels it (L1, L7, L21, L22, L43).

A :class:`TurnClock` owns the turn deadline, the stall watchdog, the
first-output window and the abort watcher. When one fires it latches its
cause and cancels the turn task, once: whatever fires later finds the latch
set and does nothing. The cause later becomes the stop reason; a
cancellation with no latched cause is the caller's own.

A :class:`Window` is a local time limit (a tool's own timeout, the
final-answer bound) that does not end the turn: it cancels the task it runs
in and, when it was the only reason, takes that cancellation back on exit.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal

from ..limits import StopReason, TurnLimits

# Internal to the turn loop: nothing here is public API (spec/api.md).
__all__: list[str] = []

Cause = Literal["time-limit", "stalled", "first-output", "aborted"]

# L7: the order in which simultaneous causes win.
PRECEDENCE = {
    StopReason.TIME_LIMIT: 0,
    StopReason.STALLED: 1,
    StopReason.ABORTED: 2,
    StopReason.CONTEXT_CAP: 3,
    StopReason.STEP_CAP: 4,
    StopReason.PROVIDER_ERROR: 5,
    StopReason.NEEDS_CONFIRMATION: 6,  # L103
    StopReason.COMPLETED: 7,
}
_STOPS: dict[Cause, StopReason] = {
    "time-limit": StopReason.TIME_LIMIT,
    "stalled": StopReason.STALLED,
    "first-output": StopReason.STALLED,  # L21: a first-byte timeout is a stall
    "aborted": StopReason.ABORTED,
}
EPSILON = 0.0005  # timers may fire this much early


def first_stop(found: Sequence[StopReason]) -> StopReason:
    """The cause that wins among ``found`` (L7)."""
    return min(found, key=PRECEDENCE.__getitem__)


class TurnClock:
    """Deadline, stall watchdog, first-output window and abort watcher of one turn."""

    def __init__(self, limits: TurnLimits, abort: asyncio.Event | None) -> None:
        self.limits = limits
        self.abort = abort
        self.cause: Cause | None = None
        self.caller_cancelled = False
        self.finished = False
        self.stalled_for = 0.0  # the timeout that fired, for the stalled message (L25)
        # L22: the stall watchdog runs; only then does progress() count (L71: the body's
        # readers skip it per chunk otherwise)
        self.watching = limits.stall_timeout is not None
        self.start_time = 0.0
        self.deadline = math.inf
        self.last_progress = 0.0
        self._holds = 0
        self._hold = _Hold(self)
        self._timers: list[asyncio.TimerHandle] = []
        self._stall: asyncio.TimerHandle | None = None
        self._first: asyncio.TimerHandle | None = None
        self._watcher: asyncio.Task[None] | None = None

    def bind(self, task: asyncio.Task[Any]) -> None:
        """The task this clock cancels."""
        self.loop = loop = asyncio.get_running_loop()
        self.task = task
        self.time = loop_clock(loop)

    def start(self) -> None:
        """Start the clocks; called when the turn task first runs."""
        loop, limits = self.loop, self.limits
        self.start_time = self.last_progress = now = self.time()
        self.deadline = now + limits.turn_timeout
        if math.isfinite(self.deadline):
            self._timers.append(loop.call_at(self.deadline, self.interrupt, "time-limit"))
        if limits.stall_timeout is not None:
            self._stall = loop.call_at(now + limits.stall_timeout, self._check_stall)
        # An abort set already is found by the first checkpoint (holding()). A watcher
        # of it would run at once under an eager task factory (H10) and cancel the
        # turn's task while that runs: a turn that then ends without waiting again
        # would end cancelled instead of aborted.
        if self.abort is not None and not self.abort.is_set():
            self._watcher = loop.create_task(self._watch_abort(self.abort))

    def stop(self) -> None:
        """The turn's work is over: no cause can latch any more."""
        self.finished = True
        for timer in (*self._timers, self._stall, self._first):
            if timer is not None:
                timer.cancel()
        self._timers.clear()

    async def close(self) -> None:
        """Stop the abort watcher (after the last event was delivered)."""
        if self._watcher is not None:
            await reap([self._watcher])

    # -- the cause latch -------------------------------------------------

    def interrupt(self, cause: Cause) -> None:
        """Latch ``cause`` and cancel the turn task, unless a cause already holds."""
        if self.cause is None and not self.finished:
            self.cause = cause
            self.task.cancel()

    @property
    def interrupted(self) -> bool:
        """The turn is being cancelled: by a latched cause or by its caller."""
        return self.cause is not None or self.caller_cancelled

    def holding(self) -> list[StopReason]:
        """The interrupting causes that hold right now (L1, L7, L21)."""
        found = []
        if self.cause is not None:
            found.append(_STOPS[self.cause])
        if self.time() >= self.deadline - EPSILON:
            found.append(StopReason.TIME_LIMIT)
        if self.abort is not None and self.abort.is_set():
            found.append(StopReason.ABORTED)
        return found

    def checkpoint(self) -> StopReason | None:
        """The cause that wins among those holding right now; None when none holds."""
        abort = self.abort
        if (
            self.cause is None
            and self.time() < self.deadline - EPSILON
            and (abort is None or not abort.is_set())
        ):
            return None  # L71: nothing holds, the usual case: no list is built
        found = self.holding()
        return first_stop(found) if found else None

    async def take_pending(self) -> None:
        """Raise the turn's cancellation now when a cause already holds (L43).

        A synchronous handler that sets the abort event returns before the
        watcher task has run, and a deadline may pass without its timer having
        fired yet: latch the cause and take the cancellation before a request
        is sent.
        """
        stop = self.checkpoint()
        if stop is not None:
            self.interrupt("aborted" if stop is StopReason.ABORTED else "time-limit")
            await asyncio.sleep(0)

    async def _watch_abort(self, abort: asyncio.Event) -> None:
        await abort.wait()
        self.interrupt("aborted")

    # -- time ------------------------------------------------------------

    def now(self) -> float:
        return self.time()

    def elapsed(self) -> float:
        return self.time() - self.start_time

    def remaining(self) -> float | None:
        """Seconds until the turn deadline; None without one."""
        if math.isinf(self.deadline):
            return None
        return self._left()

    def call_timeout(self) -> float | None:
        """The timeout of one model call: ``request_timeout`` within the time left (L36)."""
        # L71: remaining() and call_timeout_within() in one frame, read once a request
        cap = self.limits.request_timeout
        if math.isinf(self.deadline):
            return cap
        left = self._left()
        return left if cap is None else min(cap, left)

    def _left(self) -> float:
        """Seconds until the finite deadline, within [0, turn_timeout] (L36).

        ``deadline - now`` rounds: read at the start instant of a large clock
        reading it can exceed the turn's own timeout by a few ulps.
        """
        return min(self.limits.turn_timeout, max(0.0, self.deadline - self.time()))

    def call_timeout_within(self, left: float | None) -> float | None:
        """``request_timeout`` within ``left`` seconds (None: no bound) (L36)."""
        cap = self.limits.request_timeout
        if cap is None:
            return left
        return cap if left is None else min(cap, left)

    def window(self, delay: float | None, *, hold: bool = False) -> Window | _Hold:
        """A local time limit of ``delay`` seconds (None: none) for the current task.

        With ``hold`` the stall clock waits while the window is open (L22: the
        limit bounds what runs in it). Leaving the window counts as progress.
        """
        if delay is None and hold:
            return self._hold  # L71: no timer to arm: the shared stall hold does the same
        return Window(self, delay, hold)

    # -- the stall watchdog (L22) ----------------------------------------

    def progress(self) -> None:
        """Something happened: restart the stall clock."""
        self.last_progress = self.time()

    def hold(self) -> _Hold:
        """``with clock.hold():`` pauses the stall clock; leaving it counts as progress (L22)."""
        return self._hold

    def open_first_output(self) -> bool:
        """Start the first-output window (L22: the stall clock waits meanwhile); False if unset."""
        timeout = self.limits.first_output_timeout
        if timeout is None:
            return False
        self._holds += 1
        self._first = self.loop.call_later(timeout, self._first_output_passed, timeout)
        return True

    def close_first_output(self) -> None:
        """The first byte came, or the request ended without one."""
        self._holds -= 1
        if self._first is not None:
            self._first.cancel()
            self._first = None

    def _first_output_passed(self, timeout: float) -> None:
        if self.cause is None:
            self.stalled_for = timeout
        self.interrupt("first-output")

    def _check_stall(self) -> None:
        stall = self.limits.stall_timeout
        assert stall is not None
        if self.finished or self.cause is not None:
            return
        now = self.time()
        due = now + stall
        if not self._holds:
            due = self.last_progress + stall
            if now >= due - EPSILON:
                self.stalled_for = stall
                self.interrupt("stalled")
                return
        self._stall = self.loop.call_at(due, self._check_stall)


class _Hold:
    """The stall hold: a counter, so holds may overlap (concurrent tools).

    Also the window without a timer (``TurnClock.window(None, hold=True)``), which
    never times out.
    """

    __slots__ = ("clock",)
    timed_out = False

    def __init__(self, clock: TurnClock) -> None:
        self.clock = clock

    def __enter__(self) -> None:
        self.clock._holds += 1

    def __exit__(self, *exc: object) -> None:
        clock = self.clock
        clock._holds -= 1
        clock.last_progress = clock.time()


class Window:
    """A local time limit that cancels the task it runs in without ending the turn.

    ``timed_out`` is True when the window fired and its cancellation ended the
    scope; that cancellation is then taken back (the one ``uncancel`` of the
    loop) and suppressed. A cancellation for any other reason (a latched
    cause, the caller) passes through unchanged.
    """

    __slots__ = ("_clock", "_delay", "_expired", "_handle", "_hold", "_task", "timed_out")

    def __init__(self, clock: TurnClock, delay: float | None, hold: bool) -> None:
        self._clock = clock
        self._delay = delay
        self._hold = hold
        self._expired = False
        self._handle: asyncio.TimerHandle | None = None
        self.timed_out = False

    def __enter__(self) -> None:
        if self._hold:
            self._clock._holds += 1
        if self._delay is not None:
            task = asyncio.current_task()
            assert task is not None
            self._task = task
            self._handle = self._clock.loop.call_later(self._delay, self._fire)

    def _fire(self) -> None:
        self._expired = True
        self._task.cancel()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        clock = self._clock
        if self._hold:
            clock._holds -= 1
        clock.last_progress = clock.time()
        if self._handle is not None:
            self._handle.cancel()
        if not self._expired or clock.interrupted:
            return False
        uncancel = getattr(self._task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
        self.timed_out = exc_type is not None and issubclass(exc_type, asyncio.CancelledError)
        return self.timed_out


def loop_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``loop.time``, or ``time.monotonic`` itself when that is all ``loop.time`` does.

    L71: the stock ``BaseEventLoop.time`` is a Python frame around
    ``time.monotonic()``, read about ten times a step; a loop with a clock of
    its own (a test loop with virtual time, or one patched per instance) is
    read through its own method.
    """
    method = loop.time
    if getattr(method, "__func__", None) is asyncio.BaseEventLoop.time:
        return time.monotonic
    return method


async def reap(tasks: Sequence[asyncio.Future[Any]]) -> None:
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
