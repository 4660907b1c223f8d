"""Results as google-genai objects, shared by the Rust core and the reference (integrations G1, G2).

``to_genai()`` keeps what the installed SDK can hold and reports the rest
with a :class:`GenaiConversionWarning` instead of raising; a missing SDK is
an ``ImportError`` that names the extra to install.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ._json import JSONObject

if TYPE_CHECKING:
    from google.genai.types import GenerateContentResponse

__all__ = ["GenaiConversionWarning", "require_genai", "to_genai"]

# Bounded: every round removes at least one path the SDK refused.
_MAX_ROUNDS = 16


class GenaiConversionWarning(UserWarning):
    """``to_genai()`` left out data the installed google-genai cannot hold (G1)."""


def require_genai(what: str) -> ModuleType:
    """``google.genai.types``, or an ImportError naming the extra (G2)."""
    try:
        from google.genai import types
    except ImportError as exc:
        raise ImportError(
            f"{what} needs the google-genai package, which is not installed: "
            "pip install 'fastagg[genai]'"
        ) from exc
    return types


def to_genai(data: JSONObject, stacklevel: int = 2) -> GenerateContentResponse:
    """``data`` (a fresh ``AggregatedResponse.to_dict()``, changed here) as a ``GenerateContentResponse``.

    G1: the in-stream ``error`` object (the SDK's response type has no place
    for it) and every key the installed SDK refuses are left out, each named
    in one :class:`GenaiConversionWarning`; the ``AggregatedResponse`` still
    holds them all. ``stacklevel`` points the warning at the caller of the
    public method (the Rust method adds no Python frame).
    """
    import pydantic

    types = require_genai("to_genai()")
    dropped: list[str] = []
    if "error" in data:
        error = data.pop("error")
        dropped.append(f"error (the in-stream error {error!r})")
    for _ in range(_MAX_ROUNDS):
        try:
            response: GenerateContentResponse = types.GenerateContentResponse.model_validate(data)
            break
        except pydantic.ValidationError as exc:
            paths = {tuple(err["loc"]) for err in exc.errors()}
            for path in sorted(paths, key=lambda p: [str(k) for k in p]):
                if _remove(data, path):
                    dropped.append(_render(path))
    else:  # pragma: no cover - each round removes a refused path
        raise ValueError("to_genai(): google-genai kept refusing the response")
    if dropped:
        from google.genai import __version__ as version

        warnings.warn(
            GenaiConversionWarning(
                f"to_genai(): left out what google-genai {version} cannot hold: {'; '.join(dropped)}. "
                "The AggregatedResponse keeps it (.error, .to_dict())."
            ),
            stacklevel=stacklevel,
        )
    return response


def _remove(data: Any, path: tuple[Any, ...]) -> bool:
    """Delete ``path`` from ``data`` (a fresh ``to_dict()``, changed in place)."""
    if not path:
        return False
    parent = data
    for key in path[:-1]:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        # A list item the SDK refuses as a whole: blank it rather than shift the others.
        parent[last] = {}
        return True
    return False


def _render(path: tuple[Any, ...]) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out
