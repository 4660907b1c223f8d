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
        except (AttributeError, TypeError):
            # The SDK's enums look a value up with value.upper(): a number or a
            # boolean where an enum goes raises out of pydantic instead of failing
            # validation, so find those values and leave them out (G1).
            # A list of enums has no blank item to put in place of one: it goes whole.
            misfits = {
                p[:-1] if isinstance(p[-1], int) else p
                for p in _enum_misfits(types.GenerateContentResponse, data, ())
            }
            if not misfits:
                raise
            for path in sorted(misfits, key=lambda p: [str(k) for k in p]):
                _remove(data, path)
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


def _enum_misfits(model: Any, data: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Paths in ``data`` (the fields of ``model``) where an enum field holds a value
    that is not a string."""
    if not isinstance(data, dict):
        return []
    fields = {}
    for name, info in model.model_fields.items():
        fields[name] = info.annotation
        if info.alias:
            fields[info.alias] = info.annotation
    found = []
    for key, value in data.items():
        if key in fields:
            found += _misfits(fields[key], value, (*path, key))
    return found


def _misfits(annotation: Any, value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import enum
    import typing

    import pydantic

    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        # None is a field left empty, but a misfit as a list item (path ends in an index)
        fits = isinstance(value, str) or (value is None and not isinstance(path[-1], int))
        return [] if fits else [path]
    if value is None:
        return []
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return _enum_misfits(annotation, value, path)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (list, tuple) and args:
        if not isinstance(value, list):
            return []  # pydantic refuses a non-list with a ValidationError of its own
        return [p for n, item in enumerate(value) for p in _misfits(args[0], item, (*path, n))]
    if len(args) == 1:  # Optional[X]
        return _misfits(args[0], value, path)
    return []


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
