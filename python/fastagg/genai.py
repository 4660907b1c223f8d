"""fastagg for google-genai users (extra ``fastagg[genai]``; rules G1-G11 in spec/integrations.md).

- :func:`aggregate` / :func:`aggregate_async`: the chunks of
  ``generate_content_stream`` in, one ``GenerateContentResponse`` out
  (signatures byte-exact, streamed arguments assembled, interleaved calls
  routed by id), with optional per-chunk and per-delta callbacks.
- :func:`send_message_stream` / :func:`send_message_stream_async`: a chat's
  ``send_message_stream`` that records ONE aggregated model turn in the
  chat's history instead of one content per chunk.
- :class:`GenaiClient`: a :class:`fastagg.ModelClient` over your configured
  ``genai.Client`` (its auth, Vertex settings and ``HttpOptions``), for
  :func:`fastagg.run_turn`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
)
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from ._chunks import chunk_to_mapping
from ._fastagg import AggregatedResponse, StreamAggregator
from ._genai_convert import GenaiConversionWarning, require_genai
from ._json import Request
from ._sdk_request import to_sdk
from .client._rpc import RETRYABLE_STATUSES, parse_retry_after, retry_info_delay
from .errors import FastaggError, ProviderError, UnfinishedCallError

types = require_genai("fastagg.genai")

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.chats import AsyncChat, Chat
    from google.genai.types import GenerateContentResponse

__all__ = [
    "AsyncChatStream",
    "ChatStream",
    "GenaiClient",
    "GenaiConversionWarning",
    "StreamEndedInsideCall",
    "StreamInterrupted",
    "aggregate",
    "aggregate_async",
    "send_message_stream",
    "send_message_stream_async",
]

OnChunk = Callable[["GenerateContentResponse", list[Any]], Any]


class StreamInterrupted(FastaggError):
    """The SDK's stream raised mid-way (an in-stream error, a dropped connection).

    G3: nothing received is lost: ``partial`` is the ``GenerateContentResponse``
    of every chunk before the failure (None when none came), ``result`` the
    same as an :class:`~fastagg.AggregatedResponse`; the SDK's exception is
    ``__cause__``.
    """

    def __init__(self, message: str, result: AggregatedResponse) -> None:
        super().__init__(message)
        self.result = result
        self.partial = result.to_genai() if result.candidates else None


class StreamEndedInsideCall(StreamInterrupted, UnfinishedCallError):
    """The stream ended inside a function call (G9): its arguments are incomplete.

    A :class:`StreamInterrupted` (``except`` clauses that retry those catch it)
    and a :class:`fastagg.UnfinishedCallError`. ``result.unfinished_calls``
    holds the cut-off call(s) with the arguments received so far and
    ``partial`` the response as received, both for display only;
    ``result.function_calls`` lists the calls the model finished. Nothing was
    run or recorded for it: retry the request (a chat: send the message again).
    """

    def __init__(self, message: str, result: AggregatedResponse) -> None:
        UnfinishedCallError.__init__(self, message, result)
        self.partial = result.to_genai() if result.candidates else None


def _interrupted(
    agg: StreamAggregator[AggregatedResponse], exc: BaseException
) -> StreamInterrupted:
    result = agg.close()
    return StreamInterrupted(
        f"the google-genai stream failed after {agg.events_seen} chunk(s): "
        f"{type(exc).__name__}: {exc}",
        result,
    )


def aggregate(
    stream: Iterable[GenerateContentResponse], *, on_chunk: OnChunk | None = None
) -> GenerateContentResponse:
    """Aggregate a ``client.models.generate_content_stream(...)`` iterator into one response.

    ``on_chunk(chunk, deltas)`` is called for every chunk with the fastagg
    deltas it produced (``TextDelta``, ``CallStart``, ``ArgDelta``, ``CallEnd``
    ...), so a UI can keep streaming. Raises :class:`StreamInterrupted` when
    the stream fails after a chunk came (G3); a failure before any chunk
    (an HTTP error) is the SDK's exception, unchanged. A stream that ends
    inside a function call raises :class:`StreamEndedInsideCall` (G9).
    """
    agg = StreamAggregator()
    iterator = iter(stream)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except Exception as exc:
            if agg.events_seen == 0:
                raise  # nothing received: the SDK's own error, unchanged (G3)
            raise _interrupted(agg, exc) from exc
        deltas = agg.feed_chunk(chunk)
        if on_chunk is not None:
            on_chunk(chunk, deltas)
    return _finished(agg)


async def aggregate_async(
    stream: AsyncIterable[GenerateContentResponse]
    | Awaitable[AsyncIterable[GenerateContentResponse]],
    *,
    on_chunk: OnChunk | None = None,
) -> GenerateContentResponse:
    """:func:`aggregate` for ``client.aio.models.generate_content_stream(...)``.

    Takes the coroutine itself or what it returns; an awaitable that
    ``on_chunk`` returns is awaited before the next chunk is read.
    """
    agg = StreamAggregator()
    source = await stream if inspect.isawaitable(stream) else stream
    iterator = aiter(source)
    while True:
        try:
            chunk = await anext(iterator)
        except StopAsyncIteration:
            break
        except Exception as exc:
            if agg.events_seen == 0:
                raise  # nothing received: the SDK's own error, unchanged (G3)
            raise _interrupted(agg, exc) from exc
        deltas = agg.feed_chunk(chunk)
        if on_chunk is not None:
            done = on_chunk(chunk, deltas)
            if inspect.isawaitable(done):
                await done
    return _finished(agg)


def _finished(agg: StreamAggregator[AggregatedResponse]) -> GenerateContentResponse:
    """The stream's one response, unless it ended inside a call (G9)."""
    result = agg.close()
    _raise_if_cut_off(result, chat=False, ran=[])
    return result.to_genai()


# ---------------------------------------------------------------- chats


@dataclasses.dataclass
class _Afc:
    """Automatic function calling run by fastagg (G11): on the aggregated turn, not per chunk."""

    function_map: dict[str, Any]
    remaining: int  # requests left to send, the SDK's maximum_remote_calls
    config: Any  # what each request is sent with: the chat's config, the SDK's AFC off


def _check_chat(chat: Any) -> tuple[list[Any], list[Any]]:
    """The chat's two history lists, after G7's checks (before anything is sent)."""
    comprehensive = chat.get_history()
    curated = chat.get_history(curated=True)
    if comprehensive is not chat.get_history() or curated is not chat.get_history(curated=True):
        import google.genai

        raise RuntimeError(
            "send_message_stream: this google-genai version "
            f"({google.genai.__version__}) returns copies from Chat.get_history(), so the "
            "chat's history cannot be corrected; fastagg was tested with 1.68 to 3.6, "
            "where it returns the history itself"
        )
    return comprehensive, curated


def _plan_afc(chat: Any, config: Any, *, is_async: bool) -> _Afc | None:
    """G11: whether the SDK would call functions automatically for this message, decided
    with the SDK's own rules (``automatic_function_calling``, the tools); None when not."""
    from google.genai import _extra_utils as sdk

    effective = config if config else getattr(chat, "_config", None)  # as the chat picks it
    if not effective or sdk.should_disable_afc(effective):
        return None
    find = sdk.find_afc_incompatible_tool_indexes
    options = {}
    if is_async and "is_agent_platform" in inspect.signature(find).parameters:
        # google-genai 3.x: an AsyncChat on Vertex AI runs MCP servers' tools too
        options["is_agent_platform"] = bool(getattr(chat._modules._api_client, "vertexai", 0))
    if find(effective, **options):
        return None  # the SDK turns it off itself (declarations or MCP servers among the tools)
    model = (
        types.GenerateContentConfig.model_validate(effective)
        if isinstance(effective, dict)
        else effective
    )
    tools = model.tools or []
    if any(getattr(tool, "mcp_servers", None) for tool in tools) or _has_mcp_sessions(tools):
        raise ValueError(
            "send_message_stream: MCP sessions or servers among the tools with automatic "
            "function calling cannot be run on the aggregated turn by fastagg. Turn it off "
            "(automatic_function_calling=AutomaticFunctionCallingConfig(disable=True)) and "
            "call the session's tools with the turn's result.function_calls, or use the "
            "chat's send_message (not streamed)"
        )
    # The SDK's own map (a coroutine function in a sync chat raises its own error here).
    function_map = sdk.get_function_map(model, is_caller_method_async=is_async)
    if not function_map:
        return None
    remaining = sdk.get_max_remote_calls_afc(model)
    off = types.AutomaticFunctionCallingConfig(disable=True)
    return _Afc(
        function_map, remaining, model.model_copy(update={"automatic_function_calling": off})
    )


def _has_mcp_sessions(tools: list[Any]) -> bool:
    try:
        from google.genai import _mcp_utils
    except ImportError:  # pragma: no cover - every supported release has it
        return False
    return bool(_mcp_utils.has_mcp_session_usage(tools))


def _call_as_response(call: dict[str, Any]) -> GenerateContentResponse:
    """One finished call alone, in the shape the SDK's function runner reads (G11)."""
    fc = types.FunctionCall(name=call["name"], args=call["args"])
    content = types.Content(role="model", parts=[types.Part(function_call=fc)])
    response: GenerateContentResponse = types.GenerateContentResponse(
        candidates=[types.Candidate(content=content)]
    )
    return response


def _answered(part: Any, call: dict[str, Any]) -> Any:
    """The SDK's function response part, answering its call by id as well (G11)."""
    if call.get("id") and part.function_response is not None:
        part.function_response.id = call["id"]
    return part


def _cut_off_message(result: AggregatedResponse, *, chat: bool, ran: list[str]) -> str:
    """G9: what happened, and what to do."""
    parts = result.parts
    names: list[str] = []
    for unfinished in list[Any](result.unfinished_calls):
        # {"id", "name", "args", "part"} (or, before that shape, the part's index)
        if isinstance(unfinished, dict):
            name = unfinished.get("name")
        else:
            name = parts[unfinished].get("functionCall", {}).get("name")
        names.append(name if isinstance(name, str) and name else "a function with no name")
    what = f"a call to {names[0]}" if len(names) == 1 else "calls to " + ", ".join(names)
    message = (
        f"the google-genai stream ended inside {what}: its arguments are incomplete, so it "
        "must not be run. "
    )
    if chat:
        message += "Nothing of this message is kept in the chat's history: send the message again"
        if ran:
            names_ran = list(dict.fromkeys(ran))
            message += f" ({', '.join(names_ran)} already ran for it and will run again)"
        message += ". "
    else:
        message += "Retry the request. "
    where = "call" if len(names) == 1 else "calls"
    return message + (
        "The response as received is on this exception (.partial, .result; the cut-off "
        f"{where} in .result.unfinished_calls)."
    )


def _raise_if_cut_off(result: AggregatedResponse, *, chat: bool, ran: list[str]) -> None:
    if result.unfinished_calls:
        raise StreamEndedInsideCall(_cut_off_message(result, chat=chat, ran=ran), result)


def _model_turn(result: AggregatedResponse, outputs: list[Any]) -> tuple[Any, bool]:
    """The one model content recorded for a request, and whether it is valid (G7, G10)."""
    finished = result.finish_reason is not None and result.error is None
    if result.parts:
        return types.Content.model_validate(result.content), finished
    if any(p.text == "" for content in outputs for p in content.parts or ()):
        # G10: an empty text answer, which the aggregate drops (P2) but the SDK keeps
        return types.Content(role="model", parts=[types.Part(text="")]), finished
    return types.Content(role="model", parts=[]), False


class _Message:
    """One chat message's exchange: a request (a hop), or one per round of automatic
    function calling (G11); what it put in the chat's history, to undo it (G9)."""

    def __init__(self, chat: Any, message: Any, config: Any, *, is_async: bool) -> None:
        self.chat = chat
        self.comprehensive, self.curated = _check_chat(chat)
        self.afc = _plan_afc(chat, config, is_async=is_async)
        self.config = self.afc.config if self.afc is not None else config
        self.message = message  # what the next request sends
        self.recorded: list[Any] = []  # the contents this message put in the histories
        self.ran: list[str] = []  # the functions run for it (G9's message)
        self.agg = StreamAggregator()
        self.outputs: list[Any] = []  # the chunks' contents the SDK records (G7)
        self.size = len(self.comprehensive)

    def feed(self, chunk: GenerateContentResponse) -> None:
        self.agg.feed_chunk(chunk)
        candidates = chunk.candidates  # the content the SDK's chat records (G7)
        if candidates and candidates[0].content:
            self.outputs.append(candidates[0].content)

    def failed(self, exc: Exception) -> Exception:
        """The hop's stream failed: the SDK recorded nothing for it; the earlier hops are
        undone too. A failure before any chunk is the SDK's exception, unchanged (G3)."""
        self.undo()
        return exc if self.agg.events_seen == 0 else _interrupted(self.agg, exc)

    def end_hop(self) -> tuple[AggregatedResponse, list[dict[str, Any]]]:
        """The hop's stream ended: record its one model turn in place of the SDK's; the
        result and the calls fastagg runs before the next hop (none: the message is done)."""
        result = self.agg.close()
        user_input = self._take_exchange()
        if result.unfinished_calls:
            self.undo()
            _raise_if_cut_off(result, chat=True, ran=self.ran)
        content, valid = _model_turn(result, self.outputs)
        if _takes_afc_history(self.chat):
            # google-genai before 2.18 takes the automatic-function-calling history too;
            # its own stream passes [] when there is none, which G7 requires.
            self.chat.record_history(
                user_input=user_input,
                model_output=[content],
                automatic_function_calling_history=[],
                is_valid=valid,
            )
        else:
            self.chat.record_history(user_input=user_input, model_output=[content], is_valid=valid)
        self.recorded += [user_input, content]
        return result, self._calls_to_run(result)

    def _calls_to_run(self, result: AggregatedResponse) -> list[dict[str, Any]]:
        afc = self.afc
        if afc is None:
            return []
        afc.remaining -= 1
        calls = list(result.function_calls)  # finished calls only (G9)
        if afc.remaining <= 0 or any(c["name"] not in afc.function_map for c in calls):
            return []  # no request left to answer with / not the chat's function: the caller's
        return calls

    def next_hop(self, calls: list[dict[str, Any]], parts: list[Any]) -> None:
        self.ran += [c["name"] for c in calls]
        self.message = parts
        self.agg = StreamAggregator()
        self.outputs = []
        self.size = len(self.comprehensive)

    def undo(self) -> None:
        """Take what this message recorded out of both histories (a retry starts clean)."""
        for history in (self.comprehensive, self.curated):
            history[:] = [c for c in history if not any(c is mine for mine in self.recorded)]
        self.recorded = []

    def _take_exchange(self) -> Any:
        """Take out what the SDK recorded for this hop; its user content.

        The SDK appends the exchange at the end of its histories as its stream ends, just
        before this runs: the user content, then the content of each chunk that had one
        (``outputs``, the very objects), or one empty model content when none had. Found
        by those objects, not by the lengths when the message was sent: another message
        on the same chat may have been recorded meanwhile (G7).
        """
        comprehensive, curated, outputs = self.comprehensive, self.curated, self.outputs
        size = 1 + max(len(outputs), 1)
        tail = comprehensive[-size:]
        if len(comprehensive) < self.size + size or any(
            mine is not theirs for mine, theirs in zip(outputs, tail[1:], strict=False)
        ):
            import google.genai

            self.undo()
            raise RuntimeError(
                f"send_message_stream: google-genai {google.genai.__version__} did not record "
                "this message's exchange last, so there is no turn to correct; fastagg was "
                "tested with 1.68 to 3.6"
            )
        user_input = tail[0]
        del comprehensive[-size:]
        if len(curated) >= size and curated[-size] is user_input:  # recorded as valid
            del curated[-size:]
        return user_input

    def run_calls(self, calls: list[dict[str, Any]]) -> list[Any]:
        """G11: the SDK's own function runner on each finished call, in order."""
        from google.genai import _extra_utils as sdk

        assert self.afc is not None
        out = []
        for call in calls:
            (part,) = sdk.get_function_response_parts(
                _call_as_response(call), self.afc.function_map
            )
            out.append(_answered(part, call))
        return out

    async def run_calls_async(self, calls: list[dict[str, Any]]) -> list[Any]:
        """:meth:`run_calls` for an ``AsyncChat`` (coroutine functions awaited, the others
        run in a worker thread, as the SDK does)."""
        from google.genai import _extra_utils as sdk

        assert self.afc is not None
        out = []
        for call in calls:
            (part,) = await sdk.get_function_response_parts_async(
                _call_as_response(call), self.afc.function_map
            )
            out.append(_answered(part, call))
        return out


def _takes_afc_history(chat: Any) -> bool:
    """Whether this SDK's ``record_history`` has the parameter (G7); once per hop."""
    parameters = inspect.signature(chat.record_history).parameters
    return "automatic_function_calling_history" in parameters


class ChatStream(Iterator["GenerateContentResponse"]):
    """The chunks of one chat message; iterate it to the end to record the turn.

    After the last chunk, ``response`` is the aggregated
    ``GenerateContentResponse`` and ``result`` the
    :class:`~fastagg.AggregatedResponse` (``result.function_calls`` are the
    calls to run). With automatic function calling (G11) the chunks of every
    request come one after the other, and ``result`` is the last request's.
    A stream left early records nothing, like the SDK's.
    """

    def __init__(self, chat: Chat, message: Any, config: Any = None) -> None:
        self._message = _Message(chat, message, config, is_async=False)
        self._chunks = chat.send_message_stream(message, config=self._message.config)
        self._reading = threading.Lock()
        self._closed = False
        self.response: GenerateContentResponse | None = None
        self.result: AggregatedResponse | None = None

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> GenerateContentResponse:
        # G7, D8: one next() at a time, from whichever thread (a thread pool reads a sync
        # iterator one chunk per worker: Starlette's StreamingResponse does).
        if not self._reading.acquire(blocking=False):
            raise RuntimeError(
                "ChatStream: next() was called from two threads at once; read one chat "
                "message's stream from one thread at a time"
            )
        try:
            return self._next()
        finally:
            self._reading.release()

    def close(self) -> None:
        """Stop reading: the SDK's stream (and its connection) is closed and nothing is
        recorded, as for a stream left early (G7); later ``next()`` calls end at once.
        A ``next()`` running on another thread is waited for."""
        with self._reading:
            if self.result is None and not self._closed:
                self._closed = True
                close = getattr(self._chunks, "close", None)
                if close is not None:
                    close()
                self._message.undo()

    def _next(self) -> GenerateContentResponse:
        message = self._message
        while True:
            if self.result is not None or self._closed:
                raise StopIteration
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self._closed = True  # G9: a cut-off raises once, then the stream has ended
                result, calls = message.end_hop()
                if not calls:
                    self.result = result
                    self.response = result.to_genai()
                    raise
                message.next_hop(calls, message.run_calls(calls))
                self._chunks = message.chat.send_message_stream(
                    message.message, config=message.config
                )
                self._closed = False
                continue
            except Exception as exc:
                self._closed = True
                raise message.failed(exc) from exc
            # D8: this read may come on another thread than the last (a thread's ident can
            # be reused after it ends, so none is compared); the lock keeps the feeds in order.
            message.agg.hand_over()
            message.feed(chunk)
            return chunk


class AsyncChatStream(AsyncIterator["GenerateContentResponse"]):
    """:class:`ChatStream` for an ``AsyncChat`` (``async for``)."""

    def __init__(self, chat: AsyncChat, message: Any, config: Any = None) -> None:
        self._message = _Message(chat, message, config, is_async=True)
        self._chunks: AsyncIterator[GenerateContentResponse] | None = None
        self._closed = False
        self.response: GenerateContentResponse | None = None
        self.result: AggregatedResponse | None = None

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def aclose(self) -> None:
        """:meth:`ChatStream.close`: the SDK's stream is closed (nothing is sent when no
        chunk was asked for yet) and nothing is recorded (G7)."""
        if self.result is None and not self._closed:
            self._closed = True
            close = getattr(self._chunks, "aclose", None)
            if close is not None:
                await close()
            self._message.undo()

    async def __anext__(self) -> GenerateContentResponse:
        message = self._message
        while True:
            if self.result is not None or self._closed:
                raise StopAsyncIteration
            try:
                if self._chunks is None:
                    self._chunks = aiter(
                        await message.chat.send_message_stream(
                            message.message, config=message.config
                        )
                    )
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._closed = True  # G9: a cut-off raises once, then the stream has ended
                result, calls = message.end_hop()
                if not calls:
                    self.result = result
                    self.response = result.to_genai()
                    raise
                message.next_hop(calls, await message.run_calls_async(calls))
                self._chunks = None
                self._closed = False
                continue
            except Exception as exc:
                self._closed = True
                raise message.failed(exc) from exc
            message.feed(chunk)
            return chunk


def send_message_stream(chat: Chat, message: Any, config: Any = None) -> ChatStream:
    """``chat.send_message_stream(message)`` that records one aggregated model turn (G7).

    Yields the SDK's chunks unchanged. When the stream ends, the history holds
    the user message and one model content with every part signature-exact
    (streamed arguments assembled), valid for the next request exactly when
    the aggregate finished without an error. A stream that ends inside a call
    raises :class:`StreamEndedInsideCall` and keeps nothing of the message
    (G9). With automatic function calling on, the chat's Python functions run
    on each request's finished calls, not on partial chunks (G11).
    """
    return ChatStream(chat, message, config)


def send_message_stream_async(chat: AsyncChat, message: Any, config: Any = None) -> AsyncChatStream:
    """:func:`send_message_stream` for ``client.aio.chats`` (use ``async for``, no ``await``)."""
    return AsyncChatStream(chat, message, config)


# ---------------------------------------------------------------- ModelClient


class GenaiClient:
    """A :class:`fastagg.ModelClient` that sends through your ``genai.Client`` (G6).

    ``run_turn(GenaiClient(client, "gemini-3-flash-preview"), contents,
    tools=[...])`` keeps the client's credentials, Vertex settings and
    ``HttpOptions``. Each request is converted to SDK objects before sending
    (a field the SDK cannot express raises ``ValueError``), each received
    chunk is re-encoded as one SSE event for the loop's aggregator; SDK
    errors become :class:`~fastagg.ProviderError` (an error after the first
    chunk is an in-stream error event, as on the wire).
    """

    def __init__(self, client: Client, model: str) -> None:
        self.client = client
        self.model = model

    def __repr__(self) -> str:
        return f"GenaiClient(model={self.model!r})"

    def stream(
        self, request: Request, *, timeout: float | None
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """Send ``request`` (REST camelCase) through the SDK; the body as SSE bytes."""
        contents, config = to_sdk(request, timeout, types)
        return self._open(contents, config)

    @contextlib.asynccontextmanager
    async def _open(self, contents: list[Any], config: Any) -> AsyncIterator[AsyncIterator[bytes]]:
        try:
            chunks = await self.client.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=config
            )
        except _sdk_failures() as exc:
            raise _provider_error(exc, started=False) from exc
        body = _sse(chunks)
        try:
            yield body
        finally:
            await body.aclose()
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()


async def _sse(chunks: AsyncIterator[GenerateContentResponse]) -> AsyncGenerator[bytes, None]:
    started = False
    try:
        async for chunk in chunks:
            started = True
            yield b"data: " + orjson.dumps(chunk_to_mapping(chunk)) + b"\r\n\r\n"
    except _sdk_failures() as exc:
        error = _provider_error(exc, started=started)
        if error.kind != "in-stream":
            raise error from exc
        yield b"data: " + orjson.dumps({"error": error.body}) + b"\r\n\r\n"


def _provider_error(exc: BaseException, *, started: bool) -> ProviderError:
    """An SDK or transport exception as the ProviderError GeminiClient would raise (G6)."""
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        details = exc.details if isinstance(exc.details, dict) else {}
        inner = details.get("error") if isinstance(details.get("error"), dict) else details
        body = {"code": exc.code, "message": exc.message or "", "status": exc.status}
        if isinstance(inner, dict) and inner.get("details") is not None:
            body["details"] = inner["details"]
        response = getattr(exc, "response", None)
        http_status = getattr(response, "status_code", None) or getattr(response, "status", None)
        # An error event inside a 200 stream: the SDK raises it like an HTTP error.
        if started or http_status == 200:
            return ProviderError(
                exc.code,
                exc.status,
                exc.message or str(exc),
                exc.code in RETRYABLE_STATUSES,
                retry_info_delay(body.get("details")),
                kind="in-stream",
                body=body,
            )
        headers = getattr(response, "headers", None) or {}
        retry_after = parse_retry_after(headers.get("retry-after")) or retry_info_delay(
            body.get("details")
        )
        return ProviderError(
            exc.code,
            exc.status,
            exc.message or str(exc),
            exc.code in RETRYABLE_STATUSES,
            retry_after,
            kind="http",
            body=details or None,
        )
    name = type(exc).__name__
    if isinstance(exc, _transport_errors()[1]):
        return ProviderError(
            None, "DEADLINE_EXCEEDED", f"timed out: {name}: {exc}", True, kind="timeout"
        )
    return ProviderError(
        None, "CONNECTION", f"connection failed: {name}: {exc}", True, kind="connection"
    )


def _sdk_failures() -> tuple[type[Exception], ...]:
    """What the SDK raises for a failed exchange: its APIError, or the transport's errors."""
    from google.genai import errors

    return (errors.APIError, *_transport_errors()[0])


@functools.cache
def _transport_errors() -> tuple[tuple[type[Exception], ...], tuple[type[Exception], ...]]:
    """(every transport error, the timeouts among them) of the HTTP stacks google-genai
    runs on: aiohttp, and httpx and httpx2 where installed (google-genai 3.x runs on httpx2
    and no longer installs httpx, an optional extra of fastagg's too) (G6)."""
    failures: list[type[Exception]] = [aiohttp.ClientError]
    timeouts: list[type[Exception]] = [aiohttp.ServerTimeoutError]
    for name in ("httpx", "httpx2"):
        try:  # by name: mypy runs where they are not installed too
            stack = importlib.import_module(name)
        except ImportError:
            continue
        failures.append(stack.TransportError)
        timeouts.append(stack.TimeoutException)
    return (*failures, OSError, TimeoutError), (TimeoutError, *timeouts)
