"""Argument checks of the public entry points (spec/api.md U1, U2).

A wrong type fails here, before any request, with a ``TypeError`` that names
the parameter, what was given and what is expected; deep inside a transport or
the request guard the same mistake reads as an unrelated failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

_CONTENT = "{'role': 'user', 'parts': [{'text': '...'}]}"


def given(value: object) -> str:
    """What was given, short: the type, and the value when it is small."""
    name = type(value).__name__
    if isinstance(value, (str, bytes)):
        text = repr(value)
        return f"{name} {text[:40]}{'...' if len(text) > 40 else ''}"
    if isinstance(value, (bool, int, float)) or value is None:
        return f"{name} {value!r}"
    return name


def fail(where: str, expected: str, value: object, hint: str = "") -> TypeError:
    """U1: ``{where} must be {expected}, got {given}`` (and what to do, when known)."""
    return TypeError(f"{where} must be {expected}, got {given(value)}{hint}")


def check_str(where: str, value: object, *, optional: bool = True) -> None:
    """A str parameter (None allowed when ``optional``)."""
    if isinstance(value, str) or (optional and value is None):
        return
    raise fail(where, "a str" + (" or None" if optional else ""), value)


def _is_sdk(value: object) -> bool:
    """A google-genai (pydantic) object: its module says so, nothing is imported."""
    return type(value).__module__.startswith("google.genai")


def check_turn_args(
    caller: str,
    model: object,
    contents: object,
    tools: object,
    limits: object,
    abort: object,
    system_instruction: object,
    config: object,
    on_event: object,
) -> None:
    """U2: the arguments of ``run_turn`` / ``stream_turn``, checked before the turn starts."""
    from .limits import TurnLimits
    from .tools import Tool

    if not callable(getattr(model, "stream", None)):
        hint = ""
        if isinstance(model, str):
            hint = f" (the model name goes to the client: fastagg.GeminiClient({model!r}))"
        raise fail(f"{caller}(): model", "a model client such as fastagg.GeminiClient", model, hint)
    if not isinstance(contents, (list, tuple)):
        hint = ""
        if isinstance(contents, str):
            hint = f"; wrap a prompt as [{_CONTENT}]"
        elif isinstance(contents, Mapping):
            hint = "; wrap one content in a list"
        raise fail(f"{caller}(): contents", "a list of contents", contents, hint)
    for i, content in enumerate(contents):
        if not isinstance(content, Mapping) and not _is_sdk(content):
            raise fail(
                f"{caller}(): contents[{i}]",
                f"a content dict like {_CONTENT} (or a google-genai Content)",
                content,
            )
    if not isinstance(tools, (list, tuple)):
        hint = "; wrap one tool in a list" if isinstance(tools, Tool) or callable(tools) else ""
        raise fail(f"{caller}(): tools", "a list of fastagg.Tool or functions", tools, hint)
    for i, item in enumerate(tools):
        if not isinstance(item, Tool) and not callable(item) and not _is_sdk(item):
            raise fail(f"{caller}(): tools[{i}]", "a fastagg.Tool or a function", item)
    if limits is not None and not isinstance(limits, TurnLimits):
        hint = "; pass TurnLimits(**...) instead" if isinstance(limits, Mapping) else ""
        raise fail(f"{caller}(): limits", "a fastagg.TurnLimits or None", limits, hint)
    if abort is not None and not _is_event(abort):
        raise fail(f"{caller}(): abort", "an asyncio.Event (or one like it) or None", abort)
    if system_instruction is not None and not isinstance(system_instruction, (str, Mapping)):
        if not _is_sdk(system_instruction):
            raise fail(
                f"{caller}(): system_instruction",
                "a str, a content dict, a google-genai Content or None",
                system_instruction,
            )
    if config is not None and not isinstance(config, Mapping) and not _is_sdk(config):
        raise fail(
            f"{caller}(): config", "a dict, a google-genai GenerateContentConfig or None", config
        )
    if on_event is not None and not callable(on_event):
        raise fail(f"{caller}(): on_event", "a function or None", on_event)


def _is_event(value: object) -> bool:
    """An ``asyncio.Event`` or an object with its ``is_set()`` and ``wait()``."""
    if isinstance(value, asyncio.Event):
        return True
    return callable(getattr(value, "is_set", None)) and callable(getattr(value, "wait", None))


def check_client_args(
    model: object,
    api_key: object,
    project: object,
    location: object,
    base_url: object,
    api_version: object,
    headers: object,
    transport: object,
    api: object,
) -> None:
    """U1: ``GeminiClient``'s arguments, checked before anything is read or opened."""
    if not isinstance(model, str):
        raise fail("GeminiClient(): model", "the model's name as a str", model)
    for where, value in (
        ("api_key", api_key),
        ("project", project),
        ("location", location),
        ("base_url", base_url),
        ("api_version", api_version),
        ("transport", transport),
        ("api", api),
    ):
        check_str(f"GeminiClient(): {where}", value)
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise fail("GeminiClient(): headers", "a dict of str to str or None", headers)
        for key, value in headers.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise fail(
                    f"GeminiClient(): header {key!r}",
                    "a str name with a str value",
                    value if isinstance(key, str) else key,
                )
