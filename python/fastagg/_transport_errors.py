"""The error shapes every transport raises (H5): the same kinds and message
on aiohttp, httpx and fastagg's own HTTP/1.1 client."""

from __future__ import annotations

from .errors import ProviderError

__all__ = ["BEFORE", "connection_error", "during", "timeout_error"]


# H5: the same error kinds and message shape on every transport
def timeout_error(exc: BaseException, where: str) -> ProviderError:
    name = type(exc).__name__
    return ProviderError(
        None,
        "DEADLINE_EXCEEDED",
        f"timed out {where}: {name}: {str(exc) or name}",
        True,
        kind="timeout",
    )


def connection_error(exc: BaseException, where: str) -> ProviderError:
    name = type(exc).__name__
    return ProviderError(
        None,
        "CONNECTION",
        f"connection failed {where}: {name}: {str(exc) or name}",
        True,
        kind="connection",
    )


BEFORE = "before the response started"


def during(received: int) -> str:
    return f"after {received} bytes of the body"
