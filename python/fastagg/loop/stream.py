"""One model request: send it, aggregate its stream, deliver its deltas (L13, L19, L20, L36)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .._json import Request
from ..errors import MalformedStreamError, ProviderError
from ..model import ModelClient
from .clock import TurnClock
from .emit import DeltaEvents
from .wire import Wire


async def read_response(
    model: ModelClient,
    wire: Wire,
    clock: TurnClock,
    events: DeltaEvents,
    request: Request,
    timeout: float | None,
    on_cut: Callable[[Any], Awaitable[None]],
) -> tuple[Any, ProviderError | None, bool]:
    """(aggregated result, transport error, whether visible output streamed).

    A failure of the request or its stream becomes the returned error (the
    result then holds what arrived); a cancellation passes ``on_cut`` the
    partial result, then propagates.
    """
    agg = wire.aggregator()
    visible = False
    error: ProviderError | None = None
    waiting = clock.open_first_output()
    try:
        async with model.stream(request, timeout=timeout) as body:
            async for chunk in body:
                if waiting:
                    waiting = False
                    clock.close_first_output()
                clock.progress()
                try:
                    deltas = agg.feed(chunk)
                except MalformedStreamError as exc:  # L19: a bad payload ends the stream
                    visible = await events.deliver(exc.deltas) or visible
                    error = ProviderError(
                        None, "MALFORMED_STREAM", str(exc), True, kind="malformed"
                    )
                    break
                if deltas:
                    visible = await events.deliver(deltas) or visible
        if error is None:
            # A last event without a trailing blank line is shown live too (D5).
            deltas = agg.finish()
            if deltas:
                visible = await events.deliver(deltas) or visible
    except ProviderError as exc:
        error = exc
    except (ConnectionError, EOFError) as exc:  # L19
        error = ProviderError(
            None, "CONNECTION", f"{type(exc).__name__}: {exc}", True, kind="connection"
        )
    except TimeoutError as exc:  # L19, L36
        error = ProviderError(
            None, "DEADLINE_EXCEEDED", f"the request timed out: {exc}", True, kind="timeout"
        )
    except asyncio.CancelledError:
        await on_cut(agg.snapshot())
        raise
    finally:
        if waiting:
            clock.close_first_output()
    return agg.close(), error, visible
