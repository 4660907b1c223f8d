"""Tools for the turn loop: :class:`Tool`, the :func:`tool` decorator and :class:`ToolContext`.

The JSON schema of a tool's parameters is derived from its type hints and the
``Args:`` section of its docstring (Google style; Sphinx ``:param x:`` also
works). Supported types: ``str``, ``int``, ``float``, ``bool``, ``list[T]``
(also ``Sequence[T]``, ``set[T]``, ``tuple[T, ...]``), ``dict`` / ``dict[str, T]``,
``Optional[T]`` / ``T | None``, ``Literal[...]``, ``Enum`` subclasses, nested
dataclasses and ``TypedDict``s, ``Any``. Schemas are plain JSON Schema, sent as
``parametersJsonSchema``; nested types are inlined (recursive types are
rejected). Arguments the model sends are converted back: enum values become
members, objects become dataclass instances.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextvars
import dataclasses
import enum
import functools
import inspect
import math
import os
import re
import threading
import types
import typing
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, Union, overload

import orjson

from ._json import FunctionDeclaration, Schema

__all__ = ["Tool", "ToolContext", "ToolMedia", "ToolResult", "tool"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Yields|"
    r"Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo):\s*$"
)
_ARG_SECTIONS = {
    "Args",
    "Arguments",
    "Parameters",
    "Params",
    "Keyword Args",
    "Keyword Arguments",
    "Attributes",
}
_ARG_LINE_RE = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")

Convert = Callable[[Any], Any]


class ToolContext:
    """What a tool may ask for by declaring a parameter annotated ``ToolContext``.

    ``abort``: the turn's abort event (the caller's, or a private one).
    ``deadline``: the event-loop time (``asyncio.get_running_loop().time()``,
    monotonic seconds) at which this call is cut off: its own timeout or the
    turn's deadline, whichever is first (``math.inf`` when neither).
    ``cancelled``: a ``threading.Event`` set when this call is cancelled
    (timeout, abort, turn deadline, stall): sync tools running in a worker thread
    cannot be interrupted, so they should poll it and return early.
    ``heartbeat()`` tells the stall watchdog the tool is alive (thread-safe).
    ``timeout``: the seconds this call was given (``Tool.timeout``, else
    ``TurnLimits.tool_timeout``; ``math.inf`` when none); ``remaining()`` is
    never more than it, nor below 0 (L29).
    """

    __slots__ = (
        "_beat",
        "_clock",
        "abort",
        "call_id",
        "cancelled",
        "deadline",
        "step",
        "timeout",
        "tool_name",
    )

    def __init__(
        self,
        *,
        abort: asyncio.Event,
        deadline: float,
        heartbeat: Callable[[], None],
        clock: Callable[[], float],
        tool_name: str = "",
        call_id: str | None = None,
        step: int = 0,
        timeout: float = math.inf,
    ) -> None:
        self.abort = abort
        self.deadline = deadline
        self.timeout = timeout
        self.tool_name = tool_name
        self.call_id = call_id
        self.step = step
        self.cancelled = threading.Event()
        self._beat = heartbeat
        self._clock = clock

    def heartbeat(self) -> None:
        """Mark progress: a tool that calls this regularly is never reported as stalled."""
        self._beat()

    def remaining(self) -> float:
        """Seconds left before this call is cut off, within [0, ``timeout``] (may be ``math.inf``).

        ``deadline - now`` read at the instant the call began can round a few
        ulps above the call's timeout (L29).
        """
        return max(0.0, min(self.timeout, self.deadline - self._clock()))


class ToolMedia:
    """Media a tool returns to the model: an image, audio, a document (L101).

    ``ToolMedia(data, mime_type)`` carries the bytes inline (sent base64 encoded as the
    function response's ``inlineData`` part); ``ToolMedia.file(uri, mime_type)`` names a
    file the service can read (a Files API URI, a Cloud Storage or HTTPS URL: a
    ``fileData`` part). ``display_name`` labels it; the tool's JSON output may refer to
    it as ``{"$ref": display_name}``. A tool returns media alone (``return
    ToolMedia(...)``) or with JSON output (``return ToolResult(output, media=[...])``).
    """

    __slots__ = ("data", "display_name", "mime_type", "uri")

    def __init__(
        self,
        data: bytes | bytearray | memoryview | None,
        mime_type: str,
        display_name: str | None = None,
        *,
        uri: str | None = None,
    ) -> None:
        if (data is None) == (uri is None):
            raise ValueError("ToolMedia takes either data (the bytes) or uri (a file), not both")
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"ToolMedia data must be bytes, not {type(data).__name__}")
        if uri is not None and (not isinstance(uri, str) or not uri):
            raise TypeError(f"ToolMedia uri must be a non-empty string, not {uri!r}")
        if not isinstance(mime_type, str) or "/" not in mime_type:
            raise ValueError(
                f"ToolMedia mime_type must be an IANA media type such as 'image/png', "
                f"not {mime_type!r}"
            )
        if display_name is not None and not isinstance(display_name, str):
            raise TypeError(
                f"ToolMedia display_name must be a string, not {type(display_name).__name__}"
            )
        self.data = bytes(data) if data is not None else None
        self.mime_type = mime_type
        self.display_name = display_name
        self.uri = uri

    @classmethod
    def file(cls, uri: str, mime_type: str, display_name: str | None = None) -> ToolMedia:
        """Media the service reads from ``uri`` (sent as a ``fileData`` part)."""
        return cls(None, mime_type, display_name, uri=uri)

    def part(self) -> dict[str, Any]:
        """The ``functionResponse.parts`` entry (REST camelCase)."""
        if self.data is not None:
            blob: dict[str, Any] = {
                "mimeType": self.mime_type,
                "data": base64.b64encode(self.data).decode("ascii"),
            }
            if self.display_name is not None:
                blob["displayName"] = self.display_name
            return {"inlineData": blob}
        ref: dict[str, Any] = {"mimeType": self.mime_type, "fileUri": self.uri}
        if self.display_name is not None:
            ref["displayName"] = self.display_name
        return {"fileData": ref}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolMedia):
            return NotImplemented
        return (self.data, self.mime_type, self.display_name, self.uri) == (
            other.data,
            other.mime_type,
            other.display_name,
            other.uri,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        what = f"{len(self.data)} bytes" if self.data is not None else f"uri={self.uri!r}"
        name = "" if self.display_name is None else f", display_name={self.display_name!r}"
        return f"ToolMedia({what}, mime_type={self.mime_type!r}{name})"


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What a tool returns when it answers with media (L101): ``output`` is its JSON
    result (sent as ``{"output": output}``, like any returned value), ``media`` the
    :class:`ToolMedia` sent in the function response's ``parts``, in order."""

    output: Any = None
    media: Sequence[ToolMedia] = ()


class Tool:
    """A function the model may call.

    ``parameters`` is a JSON schema of the arguments object; when None it is
    derived from ``fn``'s signature, type hints and docstring, and so is a
    missing ``description``. ``timeout`` (seconds) overrides
    ``TurnLimits.tool_timeout`` for this tool (``math.inf``: no timeout of its
    own). ``fn`` may be sync (run in one of fastagg's tool threads, L85) or
    async, and may take a parameter annotated ``ToolContext``. A ``Tool`` is
    callable like ``fn``.
    """

    __slots__ = (
        "_convert",
        "_ctx_param",
        "_is_async",
        "_plain",
        "description",
        "fn",
        "name",
        "parameters",
        "timeout",
    )

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        description: str | None = None,
        parameters: Schema | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(
                f"tool name {name!r} is not a valid Gemini function name: start with a letter or "
                "underscore, then letters, digits, '_', '.', ':' or '-', at most 64 characters"
            )
        if timeout is not None and not timeout > 0:
            raise ValueError(f"Tool.timeout must be positive or None, not {timeout}")
        self.name = name
        self.fn = fn
        self.timeout = timeout
        derived = _derived(fn)
        self.description = description if description is not None else derived.description
        self.parameters = parameters if parameters is not None else derived.schema
        self._ctx_param = derived.ctx_param
        self._convert = derived.convert if parameters is None else {}
        self._is_async = _is_async_callable(fn)
        # L71: an async function taking the arguments as they come is called directly
        self._plain = self._is_async and not self._convert and self._ctx_param is None

    @property
    def wants_context(self) -> bool:
        """Whether ``fn`` takes a :class:`ToolContext` parameter."""
        return self._ctx_param is not None

    @classmethod
    def from_function(cls, fn: Callable[..., Any]) -> Tool:
        """A Tool named after ``fn`` (its ``__name__``), described by its docstring."""
        name = getattr(fn, "__name__", None)
        if not isinstance(name, str):
            raise TypeError(f"cannot name a tool after {fn!r}; wrap it in Tool(name, fn)")
        return cls(name, fn)

    def declaration(self) -> FunctionDeclaration:
        """The ``functionDeclarations`` entry (REST camelCase)."""
        decl: FunctionDeclaration = {"name": self.name}
        if self.description:
            decl["description"] = self.description
        if self.parameters and self.parameters.get("properties") != {}:
            # L29: the schema goes as parametersJsonSchema; a tool without parameters has none
            decl["parametersJsonSchema"] = self.parameters
        return decl

    def invoke(self, args: Mapping[str, Any], ctx: ToolContext | None = None) -> Awaitable[Any]:
        """Call the function with the model's ``args`` (converted) and ``ctx``; await the
        result (a coroutine). An async function that takes the arguments as they are is
        called here and its own coroutine returned (L71: no coroutine of ours around it).
        A sync function runs in a tool thread once awaited (L85)."""
        run = self._start(args, ctx)
        return run.wait() if type(run) is ThreadCall else run

    def _start(self, args: Mapping[str, Any], ctx: ToolContext | None) -> Awaitable[Any]:
        """:meth:`invoke` for the turn loop: a sync function gives its :class:`ThreadCall`,
        whose ``fate`` the loop reads when it gives the call up (L85)."""
        if self._plain:
            called: Awaitable[Any] = self.fn(**args)
            return called
        if self._is_async:
            return self._invoke(args, ctx)
        return ThreadCall(self, args, ctx)

    def _kwargs(self, args: Mapping[str, Any], ctx: ToolContext | None) -> dict[str, Any]:
        convert = self._convert
        kwargs = (
            {key: (convert[key](value) if key in convert else value) for key, value in args.items()}
            if convert
            else dict(args)  # L71: nothing to convert, the usual case: a plain copy
        )
        if self._ctx_param is not None and ctx is not None:
            kwargs[self._ctx_param] = ctx
        return kwargs

    async def _invoke(self, args: Mapping[str, Any], ctx: ToolContext | None) -> Any:
        return await self.fn(**self._kwargs(args, ctx))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, fn={self.fn!r})"


# -- sync tools on threads of their own (L85) ---------------------------------------

#: At most this many tool threads run at once, in the whole process; a call that finds
#: them all busy waits for one (within its timeout).
MAX_TOOL_THREADS = 32
_IDLE = 60.0  # seconds an idle tool thread waits for work before it ends
QUEUED, RUNNING, DONE = "queued", "running", "done"


class ThreadCall:
    """One call of a sync tool, awaited like a coroutine: it runs in a tool thread (L85).

    Tool threads are daemon threads of fastagg's own, not the event loop's default
    executor: neither ``asyncio.run()`` (which waits for that executor's threads)
    nor the interpreter's exit waits for a call that was given up. ``fate`` says
    where the call was when its await was cancelled (a timeout, the turn cut off):
    ``"queued"`` (it never runs), ``"running"`` (its thread runs on, its result is
    dropped) or ``"done"``; None until then.
    """

    __slots__ = ("_args", "_ctx", "_tool", "fate")

    def __init__(self, tool: Tool, args: Mapping[str, Any], ctx: ToolContext | None) -> None:
        self._tool = tool
        self._args = args
        self._ctx = ctx
        self.fate: str | None = None

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def wait(self) -> Any:
        """Run the call in a tool thread and wait for its result."""
        tool = self._tool
        kwargs = tool._kwargs(self._args, self._ctx)
        run = functools.partial(contextvars.copy_context().run, tool.fn, **kwargs)
        job = _THREADS.submit(run, asyncio.get_running_loop())
        try:
            result = await job.future
        except asyncio.CancelledError:
            self.fate = _THREADS.abandon(job)
            raise
        if inspect.isawaitable(result):
            result = await result
        return result


class _Job:
    __slots__ = ("abandoned", "fn", "future", "loop", "state")

    def __init__(
        self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]
    ) -> None:
        self.fn = fn
        self.loop = loop
        self.future = future
        self.state = QUEUED
        self.abandoned = False

    def settle(self, ok: bool, value: Any) -> None:
        """In the loop's thread: hand the outcome to the awaiting call, if it still waits."""
        if self.future.done():
            return
        if ok:
            self.future.set_result(value)
        else:
            self.future.set_exception(value)


class _ToolThreads:
    """A bounded set of daemon threads running sync tool calls (L85)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._cond = threading.Condition()
        self._queue: collections.deque[_Job] = collections.deque()
        self._threads = 0
        self._idle = 0
        self._started = 0

    def submit(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> _Job:
        job = _Job(fn, loop, loop.create_future())
        with self._cond:
            self._queue.append(job)
            if self._idle >= len(self._queue):
                self._cond.notify()
                return job
            if self._threads >= self.limit:
                return job  # every thread is busy: the next one free takes it
            self._threads += 1
            self._started += 1
            name = f"fastagg-tool-{self._started}"
        try:
            threading.Thread(target=self._work, name=name, daemon=True).start()
        except BaseException:
            with self._cond:
                self._threads -= 1
                self._queue.remove(job)
            raise
        return job

    def abandon(self, job: _Job) -> str:
        """The call's await was cancelled: a queued job never runs. Where it was."""
        with self._cond:
            job.abandoned = True
            return job.state

    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue:
                    self._idle += 1
                    try:
                        woken = cond.wait(_IDLE)
                    finally:
                        self._idle -= 1
                    if not woken and not self._queue:
                        self._threads -= 1
                        return
                job = self._queue.popleft()
                if job.abandoned:
                    continue
                job.state = RUNNING
            try:
                ok, value = True, job.fn()
            except BaseException as exc:
                ok, value = False, exc
            with cond:
                job.state = DONE
            try:
                job.loop.call_soon_threadsafe(job.settle, ok, value)
            except RuntimeError:
                pass  # the loop is closed: no one waits for this result
            del job, value

    def _after_fork(self) -> None:
        # A forked child has none of the parent's threads: count from zero.
        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._threads = self._idle = 0


_THREADS = _ToolThreads(MAX_TOOL_THREADS)


def tool_threads() -> int:
    """How many tool threads may run at once (L85)."""
    return _THREADS.limit


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_THREADS._after_fork)


F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a function: ``@tool`` or ``@tool(name=..., timeout=...)``."""

    def make(f: Callable[..., Any]) -> Tool:
        return Tool(name or f.__name__, f, description, timeout=timeout)

    return make(fn) if fn is not None else make


def _is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(_code_of(fn))


def _code_of(fn: Any) -> Any:
    """The function whose annotations describe ``fn`` (partials and callable objects too)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return fn
    return type(fn).__call__


@dataclasses.dataclass
class _Derived:
    description: str | None
    schema: Schema
    convert: dict[str, Convert]
    ctx_param: str | None


# Deriving reads the signature, resolves the type hints and parses the
# docstring (~90 µs), and run_turn does it for every plain function on every
# turn: results are kept per function object, weakly (L47).
_DERIVED: weakref.WeakKeyDictionary[Any, _Derived] = weakref.WeakKeyDictionary()


def _derived(fn: Callable[..., Any]) -> _Derived:
    """``_derive(fn)``, once per function object; the schema is each caller's own copy."""
    try:
        found = _DERIVED.get(fn)
    except TypeError:  # not weakly referenceable, or unhashable: derive every time
        return _derive(fn)
    if found is None:
        found = _DERIVED[fn] = _derive(fn)
    # A schema is JSON by construction: an orjson round trip is a deep copy (~2 µs).
    return dataclasses.replace(found, schema=orjson.loads(orjson.dumps(found.schema)))


def _derive(fn: Callable[..., Any]) -> _Derived:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of {fn!r}: {exc}") from exc
    try:
        hints = typing.get_type_hints(_code_of(fn))
    except Exception as exc:
        raise TypeError(
            f"cannot resolve the type hints of {fn!r}: {exc} (under `from __future__ import "
            "annotations` the types a tool names must be importable from its module, not local)"
        ) from exc
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    properties: dict[str, Schema] = {}
    required: list[str] = []
    convert: dict[str, Convert] = {}
    ctx_param = None
    for pname, param in sig.parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        hint = hints.get(pname, Any)
        if _is_context(hint) or (pname == "ctx" and hint is Any):
            ctx_param = pname
            continue
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"tool parameter {pname!r} of {fn!r} is positional-only; tools take keywords"
            )
        schema, conv = _schema(hint, f"{getattr(fn, '__name__', fn)}({pname})", ())
        if pname in arg_docs:
            schema = {**schema, "description": arg_docs[pname]}
        properties[pname] = schema
        if conv is not None:
            convert[pname] = conv
        if param.default is inspect.Parameter.empty:
            required.append(pname)
    schema_obj: Schema = {"type": "object", "properties": properties}
    if required:
        schema_obj["required"] = required
    return _Derived(summary or None, schema_obj, convert, ctx_param)


def _is_context(hint: Any) -> bool:
    """``ToolContext``, or ``ToolContext | None``."""
    if hint is ToolContext:
        return True
    args = typing.get_args(hint)
    return bool(args) and ToolContext in args and all(a in (ToolContext, type(None)) for a in args)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Summary (text before the first section) and the per-argument descriptions."""
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for raw in lines:
        line = raw.strip()
        sphinx = _SPHINX_RE.match(line)
        if sphinx:
            current = sphinx.group(1)
            args[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        header = _SECTION_RE.match(line)
        if header and (len(raw) - len(raw.lstrip())) == 0:
            section = header.group(1)
            current, arg_indent = None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section == "sphinx":
            if line.startswith(":"):
                current = None
            elif line and current is not None:
                args[current] = f"{args[current]} {line}".strip()
            continue
        if section not in _ARG_SECTIONS or not line:
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _ARG_LINE_RE.match(line)
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line}".strip()
    text = "\n".join(summary).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text, args


_PRIMITIVES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema(hint: Any, where: str, stack: tuple[Any, ...]) -> tuple[Schema, Convert | None]:
    """JSON schema of ``hint`` and, when the value needs it, a converter from JSON."""
    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return {}, None
    if hint in _PRIMITIVES:
        return {"type": _PRIMITIVES[hint]}, (_to_float if hint is float else None)
    if hint is type(None):
        return {"type": "null"}, None
    if hint in (list, tuple, set, frozenset) or hint is Sequence:
        return {"type": "array"}, (None if hint in (list, Sequence) else hint)
    if hint is dict or hint is Mapping:
        return {"type": "object"}, None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        schema = _enum_schema(values)
        return schema, hint
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _object_schema(hint, where, stack, dataclass_=True)
    if _is_typeddict(hint):
        return _object_schema(hint, where, stack, dataclass_=False)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _schema(args[0], where, stack)
    if origin is Literal:
        return _enum_schema(list(args)), None
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        subs = [_schema(a, where, stack) for a in members]
        if len(subs) == 1:
            schema, conv = subs[0]
            if not nullable:
                return schema, conv
            if isinstance(schema.get("type"), str) and "enum" not in schema:
                return {**schema, "type": [schema["type"], "null"]}, _optional(conv)
            return {"anyOf": [schema, {"type": "null"}]}, _optional(conv)
        any_of = [s for s, _ in subs] + ([{"type": "null"}] if nullable else [])
        if any(c is not None for _, c in subs):
            raise TypeError(f"{where}: a union of enums or objects is not supported; use one type")
        return {"anyOf": any_of}, None
    if origin in (list, set, frozenset, tuple) or origin in (Sequence, typing.Sequence):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis) and args:
            raise TypeError(
                f"{where}: fixed-length tuples are not supported; use tuple[T, ...] or list[T]"
            )
        item_schema, item_conv = _schema(args[0], where, stack) if args else ({}, None)
        array: Schema = {"type": "array"}
        if item_schema:
            array["items"] = item_schema
        container: Any = list if origin in (list, Sequence, typing.Sequence) else origin
        if item_conv is None and container is list:
            return array, None
        return array, _list_converter(item_conv, container)
    if origin in (dict, Mapping, typing.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str (JSON object keys), not {args[0]!r}")
        value_schema, value_conv = _schema(args[1], where, stack) if args else ({}, None)
        obj_schema: Schema = {"type": "object"}
        if value_schema:
            obj_schema["additionalProperties"] = value_schema
        if value_conv is None:
            return obj_schema, None
        return obj_schema, lambda v: {k: value_conv(x) for k, x in v.items()}
    raise TypeError(f"{where}: type {hint!r} is not supported in tool parameters")


def _enum_schema(values: list[Any]) -> Schema:
    kinds = {type(v) for v in values}
    if kinds == {str}:
        return {"type": "string", "enum": values}
    if kinds == {bool}:
        return {"type": "boolean", "enum": values}
    if kinds <= {int}:
        return {"type": "integer", "enum": values}
    if kinds <= {int, float}:
        return {"type": "number", "enum": values}
    return {"enum": values}


def _is_typeddict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__")


def _object_schema(
    cls: Any, where: str, stack: tuple[Any, ...], *, dataclass_: bool
) -> tuple[Schema, Convert | None]:
    if cls in stack:
        raise TypeError(f"{where}: recursive type {cls.__name__} is not supported")
    stack = (*stack, cls)
    hints = typing.get_type_hints(cls)
    _, field_docs = _parse_docstring(inspect.getdoc(cls) or "")
    properties: dict[str, Schema] = {}
    required: list[str] = []
    convert: dict[str, Convert] = {}
    if dataclass_:
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        defaults = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        }
        required = [n for n in names if n not in defaults]
    else:
        names = list(hints)
        required = [n for n in names if n in cls.__required_keys__]
    for fname in names:
        schema, conv = _schema(hints.get(fname, Any), f"{where}.{fname}", stack)
        if fname in field_docs:
            schema = {**schema, "description": field_docs[fname]}
        properties[fname] = schema
        if conv is not None:
            convert[fname] = conv
    obj: Schema = {"type": "object", "properties": properties}
    if required:
        obj["required"] = required
    if not dataclass_:
        if not convert:
            return obj, None
        return obj, lambda v: {k: (convert[k](x) if k in convert else x) for k, x in v.items()}

    def to_dataclass(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(value).__name__}")
        return cls(**{k: (convert[k](x) if k in convert else x) for k, x in value.items()})

    return obj, to_dataclass


def _optional(conv: Convert | None) -> Convert | None:
    if conv is None:
        return None
    return lambda v: None if v is None else conv(v)


def _to_float(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _list_converter(item: Convert | None, container: Any) -> Convert:
    if item is None:
        return lambda v: container(v)
    return lambda v: container(item(x) for x in v)
