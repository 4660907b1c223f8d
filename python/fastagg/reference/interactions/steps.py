"""Steps (I9-I13): the value of one step, folded from its deltas."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson

from ..._json import JSONObject, JSONValue
from .args import _ArgParser

_T = TypeVar("_T")

_IMPLIED = {
    "text": "model_output",
    "thought_summary": "thought",
    "thought_signature": "thought",
    "arguments_delta": "function_call",
}


def _list_at(step: JSONObject, key: str) -> list[Any]:
    """The list under ``key``, made a list when missing or another type (I12)."""
    items = step.get(key)
    if not isinstance(items, list):
        items = []
        step[key] = items
    return items


def _append_text(items: list[Any], text: str) -> None:
    last = items[-1] if items else None
    if isinstance(last, dict) and last.get("type") == "text" and isinstance(last.get("text"), str):
        last["text"] += text
    else:
        items.append({"type": "text", "text": text})


class _Step:
    def __init__(self, value: JSONObject) -> None:
        self.value = value
        self.stopped = False
        self.parser: _ArgParser | None = None
        self.invalid = False

    @property
    def type(self) -> str | None:
        t = self.value.get("type")
        return t if isinstance(t, str) else None

    def is_call(self) -> bool:
        return self.type == "function_call"

    def apply(
        self, kind: str, delta: JSONObject, live: bool, args: list[tuple[str, JSONValue]]
    ) -> tuple[tuple[str, bool] | None, bool, str | None]:
        """``(text delta, long path, problem)`` of one delta (I12)."""
        text_out: tuple[str, bool] | None = None
        long_path = False
        problem: str | None = None
        if kind == "text":
            text = delta.get("text")
            if isinstance(text, str):
                _append_text(_list_at(self.value, "content"), text)
                if text:
                    text_out = (text, False)
        elif kind == "thought_summary":
            content = delta.get("content")
            if isinstance(content, dict):
                t = content.get("text") if content.get("type") == "text" else None
                summary = _list_at(self.value, "summary")
                if isinstance(t, str):
                    _append_text(summary, t)
                    if t:
                        text_out = (t, True)
                else:
                    summary.append(dict(content))
        elif kind == "thought_signature":
            sig = delta.get("signature")
            if isinstance(sig, str):
                self.value["signature"] = sig
        elif kind == "arguments_delta":
            fragment = delta.get("arguments")
            if isinstance(fragment, str):
                if self.parser is None:
                    self.parser = _ArgParser()
                long_path = self.parser.feed(fragment, live, args)
        elif kind == "text_annotation_delta":
            annotations = delta.get("annotations")
            extra = list(annotations) if isinstance(annotations, list) else []
            content = self.value.get("content")
            last = content[-1] if isinstance(content, list) and content else None
            if isinstance(last, dict):
                _list_at(last, "annotations").extend(extra)
            else:
                problem = "annotations without content were skipped"
        elif kind in ("image", "audio", "video", "document"):
            _list_at(self.value, "content").append(dict(delta))
        else:
            for k, v in delta.items():
                if k != "type":
                    self.value[k] = v
        return text_out, long_path, problem

    def stop(self) -> str | None:
        """``step.stop`` (I13); the I16 error text when the arguments do not parse."""
        if self.stopped:
            return None
        self.stopped = True
        if self.parser is None:
            return None
        ok, result = self.parser.finish()
        if ok:
            self.value["arguments"] = result
            return None
        self.invalid = True
        self.value["arguments"] = self.parser.raw_text()
        return str(result)

    def render(self) -> JSONObject:
        value: JSONObject = _deep_copy(self.value)
        if not self.stopped and self.parser is not None:
            value["arguments"] = _deep_copy(self.parser.partial())
        return value

    def call(self, rendered: JSONObject) -> JSONObject:
        def get(k: str) -> str | None:
            v = self.value.get(k)
            return v if isinstance(v, str) else None

        args = rendered.get("arguments")
        return {
            "id": get("id"),
            "name": get("name"),
            "args": args if isinstance(args, dict) and not self.invalid else {},
        }

    def unfinished(self) -> bool:
        return self.is_call() and (not self.stopped or self.invalid)


def _deep_copy(value: _T) -> _T:
    """A fresh copy of JSON data (results never share state with the aggregator)."""
    return orjson.loads(orjson.dumps(value)) if isinstance(value, (dict, list)) else value
