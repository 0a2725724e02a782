"""One HTTP/1.x connection of `kube.endpoint`'s server: parsing, framing and its deadlines.

An `asyncio.Protocol` on the endpoint's event loop. It reads without blocking,
so a client that sends nothing, or a byte a second, costs a buffer and a
deadline, never a thread: the loop's sweep (`Connection.expired`) drops it when
its deadline passes. Requests are answered one at a time, in order (reading
pauses while one is handled), so a pipelining client queues no more than one
socket read ahead. Only `kube.endpoint` imports this module.

Framing is refused, never guessed (RFC 9112, section 6.3): a body needs one valid
`Content-Length`; `Transfer-Encoding` is not supported (no caller of ours sends
it: Go's `http.Client` sets `Content-Length` for a byte-slice body), answered 411
as a missing length is; an unparseable, negative or conflicting length is 400, a
length over the limit is 413, and each closes the connection, since where the
next request would start is unknown.
"""

from __future__ import annotations

import asyncio
import email.utils
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol, cast

log = logging.getLogger("kube.endpoint")

MAX_HEADERS = 100  # the stdlib's limits, kept
MAX_HEADER_LINE = 65536
MAX_HEAD = MAX_HEADER_LINE + 8192  # the request line and every header together
# How long, and for how many bytes, a connection the server closes is read on.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1 << 20
_REASONS = {status.value: status.phrase for status in HTTPStatus}
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # without the query
    body: bytes


class Reply(Protocol):
    """Where a handled request's answer goes (thread-safe: the endpoint posts it to the loop)."""

    def __call__(self, status: int, content_type: str, body: bytes) -> None: ...


class Server(Protocol):
    """What a connection needs of the endpoint that accepted it."""

    header_timeout: float
    body_timeout: float
    idle_timeout: float
    write_timeout: float
    max_body: int

    def known_post(self, path: str) -> bool: ...

    def admit(self, connection: Connection) -> bool: ...

    def handle(self, request: Request, reply: Callable[[int, str, bytes], None]) -> None: ...

    def forget(self, connection: Connection) -> None: ...


class State(enum.Enum):
    IDLE = "idle"  # between requests (keep-alive)
    HEAD = "head"  # a request's first bytes are in, its head is not complete
    BODY = "body"  # the head is parsed, the body is arriving
    BUSY = "busy"  # a request is being handled; nothing is read meanwhile
    LINGER = "linger"  # the last reply is sent; reading on before closing (RFC 9112, 9.6)


_date: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header's value, formatted once per second."""
    global _date
    second, text = _date
    now = int(time.time())
    if second != now:
        text = email.utils.formatdate(now, usegmt=True)
        _date = (now, text)
    return text


class BadRequest(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class Connection(asyncio.Protocol):
    """One client connection; `deadline` is when the sweep drops it (inf while it is handled)."""

    def __init__(self, server: Server, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.clock = clock
        self.state = State.IDLE
        self.deadline = float("inf")
        self.since = clock()  # when the connection last made progress (for eviction)
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._request: tuple[str, str, int] | None = None  # method, path, body length
        self._close_after = False
        self._eof = False
        self._write_paused = False
        self._lingered = 0

    # -- asyncio callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._enter(State.IDLE, self.server.idle_timeout)
        if not self.server.admit(self):  # every connection is busy: refuse this one
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "too many requests in progress")

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = State.LINGER
        self.deadline = float("inf")
        self.server.forget(self)

    def data_received(self, data: bytes) -> None:
        if self.state is State.LINGER:
            self._lingered += len(data)
            if self._lingered >= LINGER_BYTES:
                self.abort()
            return
        self._buffer += data
        if self.state is State.IDLE:
            self._enter(State.HEAD, self.server.header_timeout)
        self._advance()

    def eof_received(self) -> bool:
        """A client may half-close after its last request: answer it, then close.
        (Keeping a TLS transport half-open is not possible: it closes.)"""
        self._eof = True
        if self.state is State.LINGER:
            return False  # the client closed too: done
        self._advance()
        tls = self.transport is None or self.transport.get_extra_info("sslcontext") is not None
        return self.state is State.BUSY and not tls

    def pause_writing(self) -> None:
        self._write_paused = True
        self.deadline = self.clock() + self.server.write_timeout

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.state is State.IDLE and self.transport is not None:
            self._enter(State.IDLE, self.server.idle_timeout)
            self._carry_on(self.transport)

    # -- the sweep and eviction ----------------------------------------------------------

    def expired(self, now: float) -> bool:
        """Drop the connection if its deadline has passed; True if it was."""
        if now < self.deadline:
            return False
        if self.state in (State.HEAD, State.BODY):
            log.debug("dropping a client too slow to send its request (%s)", self.state.value)
        self.abort()
        return True

    @property
    def evictable(self) -> bool:
        """Idle or mid-request: closing it loses no answer in progress."""
        return self.state in (State.IDLE, State.HEAD, State.BODY, State.LINGER)

    def abort(self) -> None:
        self.deadline = float("inf")
        if self.transport is not None:
            self.transport.abort()

    # -- parsing ---------------------------------------------------------------------------

    def _enter(self, state: State, timeout: float) -> None:
        self.state = state
        self.since = self.clock()
        self.deadline = self.since + timeout

    def _advance(self) -> None:
        """Parse and dispatch what the buffer holds, one request at a time."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.state is State.HEAD:
            end = self._buffer.find(b"\r\n\r\n")
            cut = end + 4
            if end < 0:
                end = self._buffer.find(b"\n\n")  # bare LF line ends, as the stdlib allows
                cut = end + 2
            if end < 0:
                if len(self._buffer) > MAX_HEAD:
                    self._refuse(
                        HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large"
                    )
                elif self._eof:
                    self.abort()
                return
            head = bytes(self._buffer[:end])
            del self._buffer[:cut]
            if len(head) > MAX_HEAD:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
                return
            try:
                self._request = self._parse(head)
            except BadRequest as err:
                self._refuse(err.status, str(err))
                return
            self._enter(State.BODY, self.server.body_timeout)
        if self.state is State.BODY:
            assert self._request is not None
            method, path, length = self._request
            if len(self._buffer) < length:
                if self._eof:
                    self.abort()
                return
            body = bytes(self._buffer[:length])
            del self._buffer[:length]
            self._dispatch(Request(method, path, body))

    def _parse(self, head: bytes) -> tuple[str, str, int]:
        lines = head.decode("iso-8859-1").split("\n")
        while lines and not lines[0].strip():  # RFC 9112, 2.2: empty lines before it are ignored
            del lines[0]
        words = lines[0].split() if lines else []
        if len(words) != 3 or not words[2].startswith("HTTP/"):
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"bad request line {lines[0][:80]!r}")
        method, target, version = words
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            major = version[5:].split(".")[0]
            if major.isdigit() and int(major) >= 2:
                raise BadRequest(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"{version} not supported")
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"bad version {version[:20]!r}")
        if len(lines) - 1 > MAX_HEADERS:
            raise BadRequest(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers")
        headers: dict[str, list[str]] = {}
        for line in lines[1:]:
            line = line.rstrip("\r")
            if len(line) > MAX_HEADER_LINE:
                raise BadRequest(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "header line too long")
            name, colon, value = line.partition(":")
            if not colon or not name or name[0] in " \t" or name[-1] in " \t":
                # folded lines are refused as RFC 9112 (5.2) allows
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"bad header line {line[:80]!r}")
            headers.setdefault(name.lower(), []).append(value.strip())
        connection = ",".join(headers.get("connection", ())).lower()
        self._close_after = "close" in connection or (
            version == "HTTP/1.0" and "keep-alive" not in connection
        )
        path = target.split("?", 1)[0]
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        length = self._body_length(method, path, headers)
        expect = headers.get("expect", [""])[0].lower()
        if expect == "100-continue" and version == "HTTP/1.1" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return method, path, length

    def _body_length(self, method: str, path: str, headers: dict[str, list[str]]) -> int:
        if "transfer-encoding" in headers:
            if "content-length" in headers:  # a request smuggling shape (RFC 9112, 6.3)
                raise BadRequest(
                    HTTPStatus.BAD_REQUEST, "both Transfer-Encoding and Content-Length"
                )
            raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Transfer-Encoding is not supported")
        values = headers.get("content-length")
        if values is None:
            if method in _BODY_METHODS and self.server.known_post(path):
                raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return 0
        texts = {v.strip() for value in values for v in value.split(",")}
        if len(texts) != 1 or not (text := texts.pop()).isdigit() or not text.isascii():
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"bad Content-Length {values[0][:40]!r}")
        length = int(text)
        if length > self.server.max_body:
            raise BadRequest(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {self.server.max_body} bytes"
            )
        return length

    # -- answering -------------------------------------------------------------------------

    def _dispatch(self, request: Request) -> None:
        self.state = State.BUSY
        self.deadline = float("inf")  # the handler's time is the handler's to bound
        assert self.transport is not None
        self.transport.pause_reading()
        self.server.handle(request, self._answer)

    def _refuse(self, status: int, reason: str) -> None:
        log.debug("refused a request: %d %s", status, reason)
        self._close_after = True
        self._answer(status, _TEXT, reason.encode() + b"\n")

    def _answer(self, status: int, content_type: str, body: bytes) -> None:
        """Send a reply (on the loop); go on to the next request, or close."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        close = "Connection: close\r\n" if self._close_after else ""
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
            f"Date: {_http_date()}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{close}\r\n"
        )
        transport.write(head.encode("latin-1") + body)
        self._request = None
        if self._close_after:
            self._linger(transport)
            return
        self._enter(State.IDLE, self.server.idle_timeout)
        if self._write_paused:  # the client is not reading: neither do we (resume_writing)
            self.deadline = self.clock() + self.server.write_timeout
            return
        self._carry_on(transport)

    def _carry_on(self, transport: asyncio.Transport) -> None:
        """After a reply: read again, and parse what is already buffered (pipelining)."""
        transport.resume_reading()
        if self._buffer:
            self._enter(State.HEAD, self.server.header_timeout)
            # on the next loop turn, not here: a reply given inline would recurse once per
            # pipelined request, and one read can hold thousands of them
            asyncio.get_running_loop().call_soon(self._advance)
        elif self._eof:
            transport.close()

    def _linger(self, transport: asyncio.Transport) -> None:
        """Half-close, then read on until the client closes, or LINGER_* run out.

        A socket closed with input still unread makes the kernel send a reset instead
        of a FIN, and a reset can destroy the reply the client has not read yet: this
        happened to a client that had already sent its next request when the server
        chose to close. (TLS has no half-close: the transport closes after the reply.)
        """
        self._lingered = len(self._buffer)
        self._buffer.clear()
        self._enter(State.LINGER, LINGER_SECONDS)
        if self._write_paused:  # the reply is still going out: give it its time too
            self.deadline += self.server.write_timeout
        if self._eof or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        transport.resume_reading()
