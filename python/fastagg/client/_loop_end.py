"""A cleanup that runs when the event loop ends (H3, H8).

A kept-alive connection belongs to the event loop it was made in, and a loop
that has ended can close nothing. ``asyncio.run()`` (and ``asyncio.Runner``,
and uvloop's ``run``) finalize every async generator still open before they
close their loop: one opened for the purpose runs its cleanup then, inside
that loop, so a client used under one ``asyncio.run()`` after another leaves
no socket open behind it. A loop closed by hand without that step leaves the
cleanup to the garbage collector, as before.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

__all__ = ["at_loop_end"]


async def _until_the_end(cleanup: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await cleanup()


async def at_loop_end(cleanup: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    """Run ``cleanup()`` when the running loop ends; keep the returned generator
    referenced while the resource lives (dropped, it runs ``cleanup`` when collected),
    and ``await gen.aclose()`` to run it earlier. ``cleanup`` may run twice."""
    guard = _until_the_end(cleanup)
    await guard.asend(None)
    return guard
