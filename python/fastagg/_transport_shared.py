"""What every transport shares: the default limits (H1) and the error shapes
(H5), the same kinds and message on aiohttp, httpx and fastagg's own HTTP/1.1
client."""

from __future__ import annotations

from .errors import ProviderError, ProviderErrorKind

__all__ = [
    "BEFORE",
    "CONNECT_TIMEOUT",
    "MAX_CONNECTIONS",
    "POOL_TIMEOUT",
    "WRITE_TIMEOUT",
    "connection_error",
    "during",
    "timeout_error",
]

# Without a per-request timeout, connecting is bounded and reading is not:
# a thinking model may be silent for minutes, and the turn loop owns the clocks (H1).
CONNECT_TIMEOUT = 30.0
POOL_TIMEOUT = 60.0
WRITE_TIMEOUT = 60.0
MAX_CONNECTIONS = 100


# H5: the same error kinds and message shape on every transport
def _error(
    exc: BaseException, where: str, verb: str, code: str, kind: ProviderErrorKind
) -> ProviderError:
    name = type(exc).__name__
    return ProviderError(None, code, f"{verb} {where}: {name}: {str(exc) or name}", True, kind=kind)


def timeout_error(exc: BaseException, where: str) -> ProviderError:
    return _error(exc, where, "timed out", "DEADLINE_EXCEEDED", "timeout")


def connection_error(exc: BaseException, where: str) -> ProviderError:
    return _error(exc, where, "connection failed", "CONNECTION", "connection")


BEFORE = "before the response started"


def during(received: int) -> str:
    return f"after {received} bytes of the body"
