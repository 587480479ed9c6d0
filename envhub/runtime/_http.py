"""The HTTP client under envhub's runtime: one :class:`HttpClient` that the chat client (policies
and the llm-judge) and the served-environment client send their requests through.

It keeps pooled keep-alive connections per origin (``scheme://host:port``) for the event loop
that uses them, sends bodies the caller has already encoded (orjson) and hands back the whole
answer as an :class:`HttpResponse`. A request that gets no answer raises one of the
:class:`TransportError` types, named as httpx names them (``ConnectError``, ``ReadTimeout``...),
which the callers turn into their own errors. What to retry is the caller's: a chat completion
may be retried on a 500, a served episode's step may not. The pause is computed here, once:
:func:`retry_after` reads ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms``, and
:func:`backoff` doubles a base with jitter.

Built on aiohttp for requests from an event loop: measured on chat-completion requests against
the same local server (bench/http_clients.py), it spends a fifth to a sixth of the CPU per
request that httpx2 did with envhub's sharded pools (~1.4 against ~7-9 CPU-seconds per 10,000),
within 3-4x of a hand-written asyncio client, the floor. Synchronous callers (a verifier's
``score``, ``RemoteEnvironment.tasks``) use httpx2's blocking client, which huggingface_hub
already installs; they are not where a run spends its time.

Made by whoever owns the run and passed in (``ChatClient(http=...)``,
``load_remote(http=...)``); a client made without one makes its own and closes it. There is no
module-level pool.

>>> retry_after({"retry-after": "2"}), retry_after({"retry-after-ms": "250"}), retry_after({})
(2.0, 0.25, None)
>>> retry_after({"retry-after": "600"}) is None  # past the limit: the server is out of service
True
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import random
import ssl
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import orjson

__all__ = [
    "MAX_RETRY_AFTER_S",
    "ConnectError",
    "ConnectTimeout",
    "HttpClient",
    "HttpResponse",
    "ReadError",
    "ReadTimeout",
    "Timeout",
    "TransportError",
    "backoff",
    "jitter",
    "retry_after",
]

#: The longest ``Retry-After`` honoured by default: a server asking for a longer pause is out
#: of service, and waiting for it is not a retry.
MAX_RETRY_AFTER_S = 120.0

@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An answer, read whole: ``status``, ``reason`` (``"Not Found"``), ``headers`` (looked
    up in any case) and the body's bytes."""

    status: int
    reason: str
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:
        """The body as JSON; :class:`ValueError` (orjson's ``JSONDecodeError``) if it is not."""
        return orjson.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class TransportError(Exception):
    """No answer came: the connection could not be made, broke, or timed out. The class name
    and the message say which (the callers put both in their errors)."""


class ConnectError(TransportError):
    """The connection could not be made (refused, unknown host, reset while connecting)."""


class Timeout(TransportError):
    """A timeout."""


class ConnectTimeout(Timeout):
    """The connection was not made within the connect timeout."""


class ReadTimeout(Timeout):
    """The answer did not come within the request's timeout."""


class ReadError(TransportError):
    """The connection broke, or the server's answer was not HTTP, after the request was sent."""


class HttpClient:
    """Pooled connections to any number of origins, for requests from an event loop
    (:meth:`request`) and from synchronous code (:meth:`request_sync`).

    ``max_connections`` bounds the open connections to each origin (size it to the run's
    concurrency; requests beyond it wait for a free one, which is not a timeout). Each origin
    has one pool: splitting it into several, as envhub did on httpx, measured no gain on
    aiohttp, whose pool finds a free connection in constant time (bench/http_clients.py).
    ``timeout_s`` bounds making the connection and each wait for the answer's bytes, as httpx
    counts (a request may say otherwise); ``connect_timeout_s`` bounds making a connection.

    A connection not made within ``connect_retry_s`` (four times that for ``https://``, whose
    handshake takes more round trips) is abandoned and made again at once, with twice the time,
    until the connect timeout is used up. A server whose accept queue is full (a small listen
    backlog under a burst of new connections) drops the connection's SYN, and the kernel would
    send it again only after a second, then three, seven... (tests/test_http_core.py measures
    both). ``None`` leaves it to the kernel. The window is the event loop's time: a loop too busy
    to see a connection complete within it makes one connection more (none in bench/eval_http.py's
    runs at concurrency 256).

    Idle connections are dropped after ``keepalive_s``, shorter than servers' keep-alive, so a
    server never closes one under a request. Proxies come from ``HTTPS_PROXY``/``HTTP_PROXY``/
    ``NO_PROXY``, read once per origin.

    The connections belong to the event loop that opened them: used from another loop (a
    later ``asyncio.run``), the client opens new ones. Close it with :meth:`aclose` from the
    loop that used it.
    """

    def __init__(self, *, max_connections: int = 256, timeout_s: float = 120.0, connect_timeout_s: float = 10.0,
                 keepalive_s: float = 30.0, connect_retry_s: float | None = 0.25) -> None:
        self.max_connections = max(1, max_connections)
        self.timeout_s = timeout_s
        self.connect_timeout_s = min(connect_timeout_s, timeout_s)
        self.keepalive_s = keepalive_s
        self.connect_retry_s = connect_retry_s
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}
        self._sync: httpx2.Client | None = None

    def __repr__(self) -> str:
        return f"HttpClient(origins={list(self._sessions)!r}, max_connections={self.max_connections})"

    # --- from an event loop -------------------------------------------------------------

    async def request(self, method: str, url: str, *, content: bytes | None = None,
                      headers: Mapping[str, str] | None = None, params: Mapping[str, Any] | None = None,
                      timeout_s: float | None = None) -> HttpResponse:
        """Send one request and read its answer, whatever its status. Raises
        :class:`ConnectError` or :class:`ConnectTimeout` when no connection could be made
        (the request was not sent), and :class:`ReadTimeout` or :class:`ReadError` when the
        answer did not come (the server may have acted on the request)."""
        session = self._session(url)
        total = self.timeout_s if timeout_s is None else timeout_s
        limit = min(self.connect_timeout_s, total)
        connect_s = limit if self.connect_retry_s is None else \
            min(self.connect_retry_s * (4 if url.startswith("https:") else 1), limit)
        started = time.monotonic()
        while True:
            try:
                async with session.request(method, url, data=content, headers=headers, params=params,
                                           timeout=self._timeout(total, connect_s)) as response:
                    body = await response.read()
                    return HttpResponse(response.status, response.reason or "", response.headers, body)
            except aiohttp.ConnectionTimeoutError as e:
                # Not connected within connect_s: a dropped SYN, or a slow network. Try again at
                # once, with twice the time, until the connect timeout is used up.
                if connect_s >= limit or time.monotonic() - started >= limit:
                    raise ConnectTimeout(f"no connection to {_origin(url)} within {limit:g} s") from e
                connect_s = min(connect_s * 2, limit)
            except aiohttp.ClientConnectorError as e:
                raise ConnectError(_connect_failure(e.os_error)) from e
            except (aiohttp.SocketTimeoutError, TimeoutError) as e:
                raise ReadTimeout(f"no answer within {total:g} s") from e
            except aiohttp.ClientError as e:
                raise ReadError(str(e) or type(e).__name__) from e

    def _timeout(self, total: float, connect_s: float) -> aiohttp.ClientTimeout:
        key = (total, connect_s)
        timeout = self._timeouts.get(key)
        if timeout is None:
            # As httpx counts: ``total`` for making the connection and for each wait for the
            # answer's bytes, none for waiting for a free connection (that is not a failure).
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(total=None, sock_connect=connect_s,
                                                                  sock_read=total)
        return timeout

    def _session(self, url: str) -> aiohttp.ClientSession:
        """The running loop's session for ``url``'s origin, opened on first use."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # Sessions opened by another (finished) loop hold connections bound to it.
            _abandon(self._sessions.values())
            self._sessions, self._loop = {}, loop
        origin = _origin(url)
        session = self._sessions.get(origin)
        if session is None:
            connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0, ssl=_ssl_context(),
                                             keepalive_timeout=self.keepalive_s)
            session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                            proxy=_env_proxy(origin), skip_auto_headers=("User-Agent",))
            self._sessions[origin] = session
        return session

    # --- from synchronous code ----------------------------------------------------------

    def request_sync(self, method: str, url: str, *, content: bytes | None = None,
                     headers: Mapping[str, str] | None = None, params: Mapping[str, Any] | None = None,
                     timeout_s: float | None = None) -> HttpResponse:
        """:meth:`request` for synchronous callers, on a blocking pool of its own; the same
        answers and errors."""
        if self._sync is None:
            limits = httpx2.Limits(max_connections=self.max_connections,
                                   max_keepalive_connections=self.max_connections, keepalive_expiry=self.keepalive_s)
            self._sync = httpx2.Client(limits=limits, verify=_ssl_context(), timeout=httpx2.Timeout(
                self.timeout_s, connect=self.connect_timeout_s, pool=None))
        timeout = httpx2.USE_CLIENT_DEFAULT if timeout_s is None else \
            httpx2.Timeout(timeout_s, connect=min(self.connect_timeout_s, timeout_s), pool=None)
        try:
            response = self._sync.request(method, url, content=content, headers=headers, params=params,
                                          timeout=timeout)
        except httpx2.ConnectTimeout as e:
            raise ConnectTimeout(str(e)) from e
        except httpx2.ConnectError as e:
            raise ConnectError(str(e)) from e  # "[Errno 111] Connection refused", as it always read
        except httpx2.TimeoutException as e:
            raise ReadTimeout(str(e)) from e
        except httpx2.TransportError as e:
            raise ReadError(str(e) or type(e).__name__) from e
        return HttpResponse(response.status_code, response.reason_phrase, response.headers, response.content)

    # --- closing ------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every connection: the running loop's, and the blocking pool's. Connections
        opened by a loop that has finished went with it."""
        sessions, loop, self._sessions, self._loop = self._sessions, self._loop, {}, None
        if loop is asyncio.get_running_loop():
            for session in sessions.values():
                await session.close()
        else:
            _abandon(sessions.values())
        self.close_sync()

    def close_sync(self) -> None:
        """Close the blocking pool of :meth:`request_sync`."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    def __del__(self) -> None:
        # Not closed by its owner (a run cut short, a loop that ended first): its connections
        # go with it, without aiohttp's warnings about sessions left open.
        with contextlib.suppress(Exception):
            _abandon(self._sessions.values())

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def retry_after(headers: Mapping[str, str], *, limit: float = MAX_RETRY_AFTER_S) -> float | None:
    """The pause a server asks for, in seconds: ``retry-after-ms``, else ``Retry-After`` as
    seconds or an HTTP date (a date past is 0). ``headers`` looks names up in any case (as
    aiohttp's and httpx's do), or holds them in lower case. None when there is none, it cannot be read, or
    it is longer than ``limit`` (then the caller's own backoff applies).

    >>> retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), retry_after({"retry-after": "soon"})
    (0.0, None)
    """
    seconds: float | None = None
    value = headers.get("retry-after-ms")
    if value:
        try:
            seconds = max(0.0, float(value) / 1000)
        except ValueError:
            seconds = None
    if seconds is None:
        seconds = _retry_after_s(headers.get("retry-after"))
    return seconds if seconds is not None and seconds <= limit else None


def _retry_after_s(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(attempt: int, base_s: float, max_s: float) -> float:
    """The pause before retry ``attempt`` (1 for the first): ``base_s`` doubled each time up to
    ``max_s``, less up to 25% jitter, so clients that failed together retry apart."""
    return min(max_s, base_s * 2.0 ** (attempt - 1)) * (1 - 0.25 * random.random())


def jitter(seconds: float) -> float:
    """A pause a server asked for, plus up to 25%: clients it refused together come back apart,
    and none before it asked."""
    return seconds * (1 + 0.25 * random.random())


def _connect_failure(error: OSError) -> str:
    """What a failed connection from an event loop says: for a refused one (on every address
    the host has), the words envhub's errors have always used there (httpx's), which users and
    scripts may match; else the error.

    >>> _connect_failure(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)"))
    'All connection attempts failed'
    """
    refused = isinstance(error, ConnectionRefusedError) or str(error).startswith("Multiple exceptions")
    return "All connection attempts failed" if refused else str(error) or type(error).__name__


def _origin(url: str) -> str:
    """``scheme://host:port`` of ``url``.

    >>> _origin("http://127.0.0.1:8000/v1/chat/completions"), _origin("https://api.example.com")
    ('http://127.0.0.1:8000', 'https://api.example.com')
    """
    end = url.find("/", url.find("//") + 2)
    return url if end < 0 else url[:end]


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One verifying SSL context for every pool (loading the CA bundle costs ~40 ms a time),
    honouring ``SSL_CERT_FILE``/``SSL_CERT_DIR`` as httpx does."""
    return httpx2.create_ssl_context()


def _env_proxy(origin: str) -> str | None:
    """The proxy the environment names for ``origin`` (``HTTPS_PROXY``, ``HTTP_PROXY``; none
    for a host ``NO_PROXY`` lists)."""
    scheme, _, host = origin.partition("://")
    proxies = urllib.request.getproxies_environment()
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # public, not in typeshed
    if not proxies or bypass(host.rsplit(":", 1)[0], proxies):
        return None
    return proxies.get(scheme) or proxies.get("all")


def _abandon(sessions: Any) -> None:
    """Mark sessions of a finished loop closed without that loop: their connections went with it."""
    for session in list(sessions):
        closing = session.close()
        try:
            closing.send(None)
        except StopIteration:
            continue
        closing.close()
