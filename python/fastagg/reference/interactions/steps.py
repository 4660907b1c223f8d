"""Steps (I9-I13, I15-I17): the value of each step, folded from its events and deltas."""

from __future__ import annotations

from typing import Any, TypeVar

import orjson

from ..._json import JSONObject, JSONValue
from ...diagnostics import Diagnostic
from ..aggregate.response import ArgDelta, CallEnd, CallStart, Delta, TextDelta
from ..diagnostics import _diagnostic
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


# What _Steps.render() gives: steps, finished calls, unfinished calls, text, thought text.
_Rendered = tuple[list[JSONObject], list[JSONObject], list[JSONObject], str, str]


class _Steps:
    """The steps of an interaction by index: step.start / step.delta / step.stop folded in."""

    def __init__(self, warnings: list[Diagnostic], live: bool) -> None:
        self._by_index: dict[int, _Step] = {}
        self._warnings = warnings  # the aggregator's list: diagnostics stay in order
        self._live = live  # deltas are wanted (the aggregator's ``deltas`` option)
        # E14: a step event came after the latest continuation token (the aggregator clears it).
        self.output_after_token = False

    def event(self, n: int, kind: str, event: JSONObject, deltas: list[Delta]) -> JSONObject | None:
        """Fold step event number ``n``; return the usage it carried, if any."""
        index = event.get("index")
        if type(index) is not int or not 0 <= index < 2**31:
            self._warnings.append(_diagnostic("ix_step_index_invalid", event=n, event_type=kind))
            return None
        if kind == "step.start":
            # RULE I10: a step starts once.
            if index in self._by_index:
                self._warnings.append(_diagnostic("ix_step_restarted", event=n, step=index))
                return None
            value = event.get("step")
            step = _Step(dict(value) if isinstance(value, dict) else {})
            self._call_start(step, index, deltas)
            self._by_index[index] = step
            self.output_after_token = True  # E14
            return None
        if kind == "step.delta":
            return self._delta(n, index, event, deltas)
        self._ensure(n, index, None, deltas)
        usage = event.get("usage")
        step = self._by_index[index]
        if not step.stopped:
            self.output_after_token = True  # E14
            err = step.stop()
            if err is not None:
                self._warnings.append(_diagnostic("ix_bad_arguments", step=index, reason=err))
            elif step.is_call() and self._live:
                deltas.append(CallEnd(0, index, step.call(step.render())))
        return usage if isinstance(usage, dict) else None

    def _delta(
        self, n: int, index: int, event: JSONObject, deltas: list[Delta]
    ) -> JSONObject | None:
        """I12: one delta of step ``index``, applied unless the step has stopped."""
        delta = event.get("delta")
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            self._warnings.append(_diagnostic("ix_delta_without_type", event=n, step=index))
            return None
        dtype = delta["type"]
        self._ensure(n, index, _IMPLIED.get(dtype, dtype), deltas)
        meta = event.get("metadata")
        usage = meta.get("total_usage") if isinstance(meta, dict) else None
        usage = usage if isinstance(usage, dict) else None
        step = self._by_index[index]
        if step.stopped:
            self._warnings.append(_diagnostic("ix_delta_after_stop", event=n, step=index))
            return usage
        args: list[tuple[str, JSONValue]] = []
        text, long_path, problem = step.apply(dtype, delta, self._live, args)
        self.output_after_token = True  # E14
        if long_path and step.parser is not None and not step.parser.long_path_warned:
            step.parser.long_path_warned = True
            self._warnings.append(_diagnostic("ix_long_arg_path", step=index))
        if problem is not None:
            self._warnings.append(
                _diagnostic("ix_delta_skipped", event=n, step=index, reason=problem)
            )
        if self._live:
            if text is not None:
                deltas.append(TextDelta(0, index, text[0], text[1]))
            for path, value in args:
                deltas.append(ArgDelta(0, index, path, value))
        return usage

    def _ensure(self, n: int, index: int, kind: str | None, deltas: list[Delta]) -> None:
        """I11: a step seen first in a delta or a stop is started here."""
        if index in self._by_index:
            return
        self._warnings.append(_diagnostic("ix_step_without_start", event=n, step=index))
        step = _Step({} if kind is None else {"type": kind})
        self._call_start(step, index, deltas)
        self._by_index[index] = step

    def _call_start(self, step: _Step, index: int, deltas: list[Delta]) -> None:
        if self._live and step.is_call():
            get = step.value.get
            sid, sname = get("id"), get("name")
            deltas.append(
                CallStart(
                    0,
                    index,
                    sid if isinstance(sid, str) else None,
                    sname if isinstance(sname, str) else None,
                )
            )

    def render(self, closing: bool, diagnostics: list[Diagnostic]) -> _Rendered:
        """The steps in index order and what they add up to; I17 diagnostics when ``closing``."""
        steps: list[JSONObject] = []
        calls: list[JSONObject] = []
        unfinished: list[JSONObject] = []
        text: list[str] = []
        thought: list[str] = []
        for index in sorted(self._by_index):
            step = self._by_index[index]
            rendered = step.render()
            kind = step.type
            if kind == "model_output":
                _collect(rendered, "content", text)
            elif kind == "thought":
                _collect(rendered, "summary", thought)
            elif kind == "function_call":
                # RULE C13: only a call the model finished may be run; the others are
                # shown with their arguments so far and their step index.
                if step.unfinished():
                    unfinished.append({**step.call(rendered), "step": index})
                else:
                    calls.append(step.call(rendered))
            if closing and not step.stopped:
                diagnostics.append(_diagnostic("ix_step_never_stopped", step=index, step_type=kind))
            steps.append(rendered)
        return steps, calls, unfinished, "".join(text), "".join(thought)


def _collect(rendered: JSONObject, key: str, out: list[str]) -> None:
    items = rendered.get(key)
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and item.get("type") == "text":
                t = item.get("text")
                if isinstance(t, str):
                    out.append(t)
