"""fastagg for google-genai users (extra ``fastagg[genai]``; rules G1-G9 in spec/integrations.md).

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
import httpx
import orjson

from ._chunks import chunk_to_mapping
from ._fastagg import AggregatedResponse, StreamAggregator
from ._genai_convert import GenaiConversionWarning, require_genai
from ._json import Request
from ._rpc import RETRYABLE_STATUSES, parse_retry_after, retry_info_delay
from ._sdk_request import to_sdk
from .errors import FastaggError, ProviderError

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
    (an HTTP error) is the SDK's exception, unchanged.
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
    return agg.close().to_genai()


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
    return agg.close().to_genai()


# ---------------------------------------------------------------- chats


def _check_chat(chat: Any, config: Any) -> tuple[list[Any], list[Any]]:
    """The chat's two history lists, after G7's checks (before anything is sent)."""
    effective = config if config is not None else getattr(chat, "_config", None)
    tools = getattr(effective, "tools", None) or (
        effective.get("tools") if isinstance(effective, dict) else None
    )
    afc = getattr(effective, "automatic_function_calling", None)
    if isinstance(effective, dict):
        afc = effective.get("automatic_function_calling")
    disabled = bool(getattr(afc, "disable", None) or (isinstance(afc, dict) and afc.get("disable")))
    if tools and any(callable(t) for t in tools) and not disabled:
        raise ValueError(
            "send_message_stream: the chat's config has Python functions as tools, so the "
            "SDK would run them on each partial chunk (automatic function calling). Pass "
            "config=GenerateContentConfig(tools=[...], automatic_function_calling="
            "AutomaticFunctionCallingConfig(disable=True)) and run the calls of the aggregated "
            "turn yourself, or use fastagg.run_turn(GenaiClient(client, model), ...)"
        )
    comprehensive = chat.get_history()
    curated = chat.get_history(curated=True)
    if comprehensive is not chat.get_history() or curated is not chat.get_history(curated=True):
        import google.genai

        raise RuntimeError(
            "send_message_stream: this google-genai version "
            f"({google.genai.__version__}) returns copies from Chat.get_history(), so the "
            "chat's history cannot be corrected; fastagg was tested with 2.x and 3.x, "
            "where it returns the history itself"
        )
    return comprehensive, curated


def _record(
    chat: Any,
    histories: tuple[list[Any], list[Any], int],
    result: AggregatedResponse,
    outputs: list[Any],
) -> GenerateContentResponse:
    """Replace what the SDK recorded for this exchange by the one aggregated turn (G7).

    The SDK appends the exchange at the end of its histories as its stream ends, just
    before this runs: the user content, then the content of each chunk that had one
    (``outputs``, the very objects), or one empty model content when none had. Found
    by those objects, not by the lengths when the message was sent: another message
    on the same chat may have been recorded meanwhile.
    """
    comprehensive, curated, n_comprehensive = histories
    size = 1 + max(len(outputs), 1)
    tail = comprehensive[-size:]
    if len(comprehensive) < n_comprehensive + size or any(
        mine is not theirs for mine, theirs in zip(outputs, tail[1:], strict=False)
    ):
        import google.genai

        raise RuntimeError(
            f"send_message_stream: google-genai {google.genai.__version__} did not record "
            "this message's exchange last, so there is no turn to correct; fastagg was "
            "tested with 2.x and 3.x"
        )
    user_input = tail[0]
    del comprehensive[-size:]
    if len(curated) >= size and curated[-size] is user_input:  # recorded as valid
        del curated[-size:]
    content = types.Content.model_validate(result.content)
    valid = bool(result.parts) and result.finish_reason is not None and result.error is None
    output = [content] if result.parts else []
    if _takes_afc_history(chat):
        # google-genai before 2.18 takes the automatic-function-calling history too;
        # its own stream passes [] when there is none, which G7 requires.
        chat.record_history(
            user_input=user_input,
            model_output=output,
            automatic_function_calling_history=[],
            is_valid=valid,
        )
    else:
        chat.record_history(user_input=user_input, model_output=output, is_valid=valid)
    return result.to_genai()


def _collect(chunk: GenerateContentResponse, outputs: list[Any]) -> None:
    """The chunk's content, as the SDK's chat records it (G7: how _record finds them)."""
    candidates = chunk.candidates
    if candidates and candidates[0].content:
        outputs.append(candidates[0].content)


def _takes_afc_history(chat: Any) -> bool:
    """Whether this SDK's ``record_history`` has the parameter (G7); once per message."""
    parameters = inspect.signature(chat.record_history).parameters
    return "automatic_function_calling_history" in parameters


class ChatStream(Iterator["GenerateContentResponse"]):
    """The chunks of one chat message; iterate it to the end to record the turn.

    After the last chunk, ``response`` is the aggregated
    ``GenerateContentResponse`` and ``result`` the
    :class:`~fastagg.AggregatedResponse` (``result.function_calls`` are the
    calls to run). A stream left early records nothing, like the SDK's.
    """

    def __init__(self, chat: Chat, message: Any, config: Any = None) -> None:
        comprehensive, curated = _check_chat(chat, config)
        self._histories = (comprehensive, curated, len(comprehensive))
        self._outputs: list[Any] = []  # the chunks' contents the SDK records (G7)
        self._chat = chat
        self._chunks = chat.send_message_stream(message, config=config)
        self._agg = StreamAggregator()
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
            if self.result is None:
                self._closed = True
                close = getattr(self._chunks, "close", None)
                if close is not None:
                    close()

    def _next(self) -> GenerateContentResponse:
        if self.result is not None or self._closed:
            raise StopIteration
        try:
            chunk = next(self._chunks)
        except StopIteration:
            self.result = self._agg.close()
            self.response = _record(self._chat, self._histories, self.result, self._outputs)
            raise
        except Exception as exc:
            if self._agg.events_seen == 0:
                raise
            raise _interrupted(self._agg, exc) from exc
        # D8: this read may come on another thread than the last (a thread's ident can be
        # reused after it ends, so none is compared); the lock keeps the feeds in order.
        self._agg.hand_over()
        self._agg.feed_chunk(chunk)
        _collect(chunk, self._outputs)
        return chunk


class AsyncChatStream(AsyncIterator["GenerateContentResponse"]):
    """:class:`ChatStream` for an ``AsyncChat`` (``async for``)."""

    def __init__(self, chat: AsyncChat, message: Any, config: Any = None) -> None:
        comprehensive, curated = _check_chat(chat, config)
        self._histories = (comprehensive, curated, len(comprehensive))
        self._outputs: list[Any] = []  # the chunks' contents the SDK records (G7)
        self._chat = chat
        self._message = message
        self._config = config
        self._chunks: AsyncIterator[GenerateContentResponse] | None = None
        self._closed = False
        self._agg = StreamAggregator()
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

    async def __anext__(self) -> GenerateContentResponse:
        if self.result is not None or self._closed:
            raise StopAsyncIteration
        try:
            if self._chunks is None:
                self._chunks = aiter(
                    await self._chat.send_message_stream(self._message, config=self._config)
                )
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self.result = self._agg.close()
            self.response = _record(self._chat, self._histories, self.result, self._outputs)
            raise
        except Exception as exc:
            if self._agg.events_seen == 0:
                raise
            raise _interrupted(self._agg, exc) from exc
        self._agg.feed_chunk(chunk)
        _collect(chunk, self._outputs)
        return chunk


def send_message_stream(chat: Chat, message: Any, config: Any = None) -> ChatStream:
    """``chat.send_message_stream(message)`` that records one aggregated model turn (G7).

    Yields the SDK's chunks unchanged. When the stream ends, the history holds
    the user message and one model content with every part signature-exact
    (streamed arguments assembled), valid for the next request exactly when
    the aggregate finished without an error.
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
    runs on: httpx, aiohttp, and httpx2 where installed (its 2.x and 3.x use it) (G6)."""
    failures: list[type[Exception]] = [httpx.TransportError, aiohttp.ClientError]
    timeouts: list[type[Exception]] = [httpx.TimeoutException, aiohttp.ServerTimeoutError]
    try:  # by name: mypy runs where it is not installed too
        httpx2 = importlib.import_module("httpx2")
    except ImportError:
        pass
    else:
        failures.append(httpx2.TransportError)
        timeouts.append(httpx2.TimeoutException)
    return (*failures, OSError, TimeoutError), (TimeoutError, *timeouts)
