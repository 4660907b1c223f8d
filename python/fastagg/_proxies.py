"""The environment's proxy for a URL (H3), looked up the same way by every
transport: ``http(s)_proxy`` / ``all_proxy``, with ``no_proxy`` read by the
standard library's own rules."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Mapping

__all__ = ["origin_of", "proxy_for"]


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the key proxy lookups are kept under."""
    end = url.find("/", url.find("//") + 2)
    return url if end < 0 else url[:end]


def proxy_for(env: Mapping[str, str], origin: str) -> str | None:
    """The proxy URL the environment ``env`` routes ``origin`` through, or None."""
    parts = urllib.parse.urlsplit(origin)
    proxy = env.get(parts.scheme) or env.get("all")
    # NO_PROXY is read by the stdlib's own rules (not in typeshed).
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if proxy is None or bypass(parts.hostname or "", env):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"
