"""fastagg._http1: the HTTP/1.1 response framing of fastagg's own transport (H8).

The protocol is driven by hand here, byte by byte where framing could split,
with a stand-in for the asyncio transport that records what it was asked to do.
"""

from __future__ import annotations

import asyncio
import gzip
import random
import zlib
from typing import Any

import pytest

from fastagg._http1 import HIGH_WATER, Connection, HttpProtocolError, IncompleteBody, parse_head

BODY = b'data: {"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}\r\n\r\n' * 3
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


class FakeSocket:
    """What Connection calls on its asyncio transport."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self.paused = 0
        self.resumed = 0

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1


def connection() -> tuple[Connection, FakeSocket]:
    loop = asyncio.new_event_loop()
    conn = Connection(loop)
    sock = FakeSocket()
    conn.transport = sock  # type: ignore[assignment]
    conn.send(b"POST / HTTP/1.1\r\n\r\n")
    loop.close()
    return conn, sock


def chunked(body: bytes, size: int) -> bytes:
    out = b""
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        out += b"%x\r\n%s\r\n" % (len(piece), piece)
    return out + b"0\r\n\r\n"


def feed_in_pieces(wire: bytes, step: int) -> tuple[Connection, bytes]:
    conn, _ = connection()
    got = b""
    for i in range(0, len(wire), step):
        conn.data_received(wire[i : i + step])
        if conn.body:
            got += conn.take()
    return conn, got


WIRE = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(BODY, 37)


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 64, len(WIRE)])
def test_h8_chunked_body_is_the_same_bytes_however_the_reads_split_it(step: int) -> None:
    conn, got = feed_in_pieces(WIRE, step)
    assert got == BODY
    assert conn.done and conn.error is None and conn.reusable()
    assert conn.response is not None and conn.response[:2] == (200, "OK")
    assert conn.response[2]["content-type"] == "text/event-stream"


def test_h8_chunk_extensions_and_trailers_are_read_and_dropped() -> None:
    wire = (
        HEAD + b"Transfer-Encoding: chunked\r\n\r\n5;name=x\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    conn, got = feed_in_pieces(wire, 3)
    assert (got, conn.done, conn.reusable()) == (b"hello", True, True)


@pytest.mark.parametrize("step", [1, 4, 1000])
def test_h8_content_length_body_ends_at_its_length(step: int) -> None:
    wire = HEAD + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY
    conn, got = feed_in_pieces(wire, step)
    assert (got, conn.done, conn.reusable()) == (BODY, True, True)


def test_h8_a_body_without_length_ends_when_the_server_closes() -> None:
    conn, _ = connection()
    conn.data_received(HEAD + b"\r\n" + BODY[:10])
    conn.data_received(BODY[10:])
    assert not conn.done
    conn.eof_received()
    assert (conn.take(), conn.done, conn.reusable()) == (BODY, True, False)


def test_h8_bytes_beyond_the_body_make_the_connection_not_reusable() -> None:
    conn, _ = connection()
    conn.data_received(HEAD + b"Content-Length: 2\r\n\r\nokEXTRA")
    assert (conn.take(), conn.done, conn.reusable()) == (b"ok", True, False)


def test_h8_connection_close_and_http_1_0_are_not_kept_alive() -> None:
    conn, _ = connection()
    conn.data_received(HEAD + b"Connection: close\r\nContent-Length: 0\r\n\r\n")
    assert (conn.done, conn.reusable()) == (True, False)
    conn, _ = connection()
    conn.data_received(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert (conn.done, conn.reusable()) == (True, False)


def test_h8_interim_100_continue_is_skipped() -> None:
    conn, _ = connection()
    conn.data_received(b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + b"Content-Length: 2\r\n\r\nok")
    assert conn.response is not None and conn.response[0] == 200
    assert conn.take() == b"ok"


@pytest.mark.parametrize(
    ("coding", "pack"),
    [("gzip", gzip.compress), ("deflate", zlib.compress)],
)
def test_h8_gzip_and_deflate_bodies_are_decoded(coding: str, pack: Any) -> None:
    packed = pack(BODY)
    wire = HEAD + f"Content-Encoding: {coding}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    conn, got = feed_in_pieces(wire + chunked(packed, 16), 5)
    assert (got, conn.done) == (BODY, True)


def test_h8_repeated_headers_are_joined_and_looked_up_in_any_case() -> None:
    status, reason, headers, http11 = parse_head(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nX-A: 1\r\nx-a: 2"
    )
    assert (status, reason, http11) == (429, "Too Many Requests", True)
    assert (headers["retry-after"], headers["RETRY-AFTER"], headers.get("X-A")) == (
        "3",
        "3",
        "1, 2",
    )
    assert "Retry-After" in headers and "nope" not in headers


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"ICY 200 OK\r\n\r\n", "does not start with an HTTP/1.x status line: b'ICY 200 OK'"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "does not start with an HTTP/1.x status line"),
        (HEAD + b"no colon here\r\n\r\n", "a response header line is malformed: b'no colon here'"),
        (HEAD + b" folded: x\r\n\r\n", "a response header line is malformed"),
        (HEAD + b"Content-Length: 1, 2\r\n\r\n", "an invalid Content-Length '1, 2'"),
        (HEAD + b"Content-Length: -1\r\n\r\n", "an invalid Content-Length '-1'"),
        (HEAD + b"Content-Encoding: br\r\n\r\n", "Content-Encoding 'br'"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols (101)"),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
            "a chunk-size line is not hexadecimal: b'zz' (after 5 bytes of the body)",
        ),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n",
            "a chunk-size line is not hexadecimal: b'0x5'",
        ),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nhiXX",
            "a chunk of the body does not end with CRLF (after 2 bytes of the body)",
        ),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
            "a chunk size has more than 15 hex digits: b'1000000000000000' (after 0 bytes",
        ),
        (
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"1" * 5000,
            "a chunk-size line is over 4096 bytes",
        ),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 11000, "the response head is over 65536 bytes"),
    ],
)
def test_h8_malformed_responses_are_clear_errors_that_keep_what_arrived(
    wire: bytes, message: str
) -> None:
    conn, sock = connection()
    conn.data_received(wire)
    assert isinstance(conn.error, HttpProtocolError)
    assert message in str(conn.error)
    assert sock.closed and not conn.reusable()


def test_h7_h8_body_bytes_before_a_framing_error_are_still_handed_out() -> None:
    conn, _ = connection()
    conn.data_received(HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
    assert conn.take() == b"hello"


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel", "closed the connection mid-body"),
        (b"HTTP/1.1 200", "closed the connection before the response head ended"),
    ],
)
def test_h8_a_connection_closed_early_is_an_incomplete_body(wire: bytes, message: str) -> None:
    conn, _ = connection()
    conn.data_received(wire)
    conn.connection_lost(None)
    assert isinstance(conn.error, IncompleteBody) and message in str(conn.error)
    assert not conn.done


def test_h8_reading_pauses_above_the_high_water_mark_and_resumes_when_taken() -> None:
    conn, sock = connection()
    conn.data_received(HEAD + b"Content-Length: %d\r\n\r\n" % (HIGH_WATER + 2))
    conn.data_received(b"x" * (HIGH_WATER + 1))
    assert (sock.paused, sock.resumed) == (1, 0)
    conn.data_received(b"x")  # already paused: not asked twice
    assert sock.paused == 1
    assert len(conn.take()) == HIGH_WATER + 2
    assert (sock.paused, sock.resumed) == (1, 1)


ALPHABET = [b"\r\n", b"\r", b"\n", b":", b";", b" ", b"0", b"5", b"a", b"z", b"x" * 7]
HEADS = [
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
    HEAD + b"Content-Length: 9\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"",
]


def hostile(rng: random.Random) -> bytes:
    """A response from a small alphabet of framing bytes after one of a few heads."""
    return rng.choice(HEADS) + b"".join(rng.choices(ALPHABET, k=rng.randrange(40)))


def outcome(wire: bytes, cuts: list[int], push: bool = False) -> tuple[bytes, str | None, bool]:
    """The body, the error and whether the body ended, for ``wire`` read in pieces cut
    at ``cuts``: taken after each read, or with ``push`` given to a sink inside
    data_received (H11), nothing then buffered."""
    conn, _ = connection()
    pieces: list[bytes] = []
    if push:
        conn.sink = pieces.append
    prev = 0
    for end in [*sorted(cuts), len(wire)]:
        conn.data_received(wire[prev:end])
        prev = end
        if push:
            assert conn.body == []
        elif conn.body:
            pieces.append(conn.take())
        if conn.error is not None:
            break
    return b"".join(pieces), None if conn.error is None else str(conn.error), conn.done


def test_h8_hostile_bytes_give_a_protocol_error_or_a_body_and_any_split_gives_the_same() -> None:
    # Random responses from a small alphabet of framing bytes: the protocol never raises
    # out of data_received, and how the reads split the bytes changes nothing.
    rng = random.Random(8)
    for _ in range(1500):
        wire = hostile(rng)
        whole = outcome(wire, [])
        cuts = [rng.randrange(len(wire) + 1) for _ in range(rng.randrange(5))]
        got, error, done = outcome(wire, cuts)
        assert (got, error is None, done) == (whole[0], whole[1] is None, whole[2]), wire
        if error is not None:
            assert error == whole[1], wire


def test_h11_a_sink_gets_what_the_reader_would_take_for_any_bytes_and_split() -> None:
    rng = random.Random(11)
    packed = gzip.compress(BODY * 5)
    wires = [
        WIRE,
        HEAD
        + b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        + chunked(packed, 29),
        HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed,
    ]
    wires += [hostile(rng) for _ in range(1500)]
    for wire in wires:
        cuts = [rng.randrange(len(wire) + 1) for _ in range(rng.randrange(6))]
        assert outcome(wire, cuts, push=True) == outcome(wire, cuts), wire
    assert outcome(wires[1], [], push=True)[0] == BODY * 5


def test_h11_after_the_sink_raises_nothing_more_is_fed_and_the_connection_closes() -> None:
    conn, sock = connection()
    pieces: list[bytes] = []
    failure = ValueError("refused")

    def sink(piece: bytes) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            raise failure

    conn.sink = sink
    head, body = WIRE.split(b"\r\n\r\n", 1)
    conn.data_received(head + b"\r\n\r\n")
    for i in range(0, len(body), 40):
        conn.data_received(body[i : i + 40])
    assert len(pieces) == 2 and conn.sink_error is failure and conn.sink is None
    assert (conn.body, conn.keep_alive, sock.closed) == ([], False, True)
    assert not conn.reusable()


def test_h8_a_decompression_bomb_is_refused_before_it_is_inflated() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))  # 64 MiB of zeros in ~64 KiB
    wire = HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb) + bomb
    conn, _ = connection()
    conn.data_received(wire)
    assert isinstance(conn.error, HttpProtocolError)
    assert "expands more than 200x its size" in str(conn.error)
    # What was handed out is bounded by the compressed bytes seen (200x, plus 1 MiB).
    assert conn.received <= 200 * len(bomb) + HIGH_WATER


def test_h8_a_new_connection_is_not_reusable_before_any_response() -> None:
    loop = asyncio.new_event_loop()
    conn = Connection(loop)
    loop.close()
    assert (conn.keep_alive, conn.done, conn.reusable()) == (False, False, False)
