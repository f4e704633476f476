"""The RAPI daemon: HTTPS on the HTTP package's threaded core, requests parsed by its framing.

``ganeti-rapi`` runs on the master node, serves :mod:`ganeti.rapi.resources`
and talks to the master daemon over LUXI only (one client per thread).
TLS 1.2 at least, no renegotiation, ``var/lib/ganeti/rapi.pem`` as key
and certificate, reloaded for new connections when the file changes and on
SIGHUP (a file that does not load keeps the previous certificate).  Users
come from ``var/lib/ganeti/rapi/users``, reloaded when the file changes
(inotify) and on SIGHUP; a file that does not parse keeps the previous
table.  Requests are logged to ``rapi-access.log`` in
Common Log Format (the user name, never the credentials).  ``GET /2/events``
streams Server-Sent Events from a local copy of the master's event stream
(:mod:`ganeti.rapi.stream`, one LUXI long-poll relay thread).  Credentials
are a users-file user (Basic), an API token (Bearer, ``var/lib/ganeti/rapi/tokens``)
or a web console session (``/ui/login``); each row needs a role
(:mod:`ganeti.rapi.auth`, :mod:`ganeti.rapi.roles`); a refusal is a 403
logged with the user.  See doc/rapi.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import os
import platform
import re
import socketserver
import ssl
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ganeti import constants, crypto, errors, events, luxi, serializer
from ganeti.http import framing
from ganeti.http.limits import Limits
from ganeti.http.threaded import DEFAULT_LIMITS, DeadlineReader, ThreadedServer, TlsConnectionMixin
from ganeti.http.tls import rapi_server_context
from ganeti.pathutils import Paths
from ganeti.rapi import auth, consoleslots, consoletokens, resources, roles, sessions, stream, users, webui
from ganeti.server.daemon import DaemonRuntime, run_daemon
from ganeti.server.rapiauth import Sessions, TokenFile
from ganeti.server.logsetup import AccessLog
from ganeti.rpc.client import default_noded_port
from ganeti.server import console, tuning
from ganeti.server.tuning import release_memory
from ganeti.utils import jsonshape, localfile

__all__ = ["MAX_BODY", "MAX_ANONYMOUS_BODY", "MAX_JSON_DEPTH", "MAX_JSON_VALUES",
           "TRIM_AFTER", "body_limit", "decode_body", "REQUEST_TIMEOUT", "LIMITS", "DeadlineReader", "UsersTable", "RapiServer", "make_tls_context",
           "check_request_body", "check_request_line", "error_body", "RequestHeaders", "MAX_LINE",
           "MAX_HEADERS", "MAX_HEAD", "main"]

logger = logging.getLogger(__name__)

#: the largest request body accepted with valid credentials (larger ones get 413 unread)
MAX_BODY = 10 * 1024 * 1024
#: the largest request body accepted without credentials (an anonymous query)
MAX_ANONYMOUS_BODY = 64 * 1024
#: a request body's JSON may nest this deep and hold this many values
#: (checked on the text, before it is decoded: decoding costs ~20x the text)
MAX_JSON_DEPTH = 64
MAX_JSON_VALUES = 200_000
#: after a request body this large, freed C heap memory is given back
#: (glibc's malloc_trim), so the daemon does not keep a burst's peak
TRIM_AFTER = 256 * 1024
#: a request whose head (or then body) takes longer than this to arrive (seconds),
#: or a client silent for this long, is dropped
REQUEST_TIMEOUT = 10.0
#: the daemon's connection bounds (the threaded core's defaults; doc/rapi.md)
LIMITS = dataclasses.replace(DEFAULT_LIMITS, request_timeout=REQUEST_TIMEOUT)


class UsersTable:
    """The users file, kept current: :meth:`reload` keeps the old table on errors.

    The file is opened without following a symbolic link; a link, FIFO or
    directory at its path is an error (logged, the old table stays).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._users: dict[str, users.User] = {}
        self.reload()

    def get(self) -> dict[str, users.User]:
        with self._lock:
            return self._users

    def reload(self) -> bool:
        """Read the file again; False (and a log line) when it is broken."""
        try:
            fd = localfile.open_local(self.path, os.O_RDONLY, what="RAPI users file")
            with open(fd, encoding="utf-8") as fh:
                mode = os.fstat(fh.fileno()).st_mode
                text = fh.read()
        except FileNotFoundError:
            text, mode = "", 0
        except (OSError, UnicodeDecodeError, errors.UntrustedFileError) as exc:
            logger.error("Cannot read the RAPI users file %s: %s; keeping the previous"
                         " users", self.path, exc)
            return False
        try:
            table = users.parse_users(text)
        except errors.ConfigurationError as exc:
            logger.error("RAPI users file %s is invalid (%s); keeping the previous users",
                         self.path, exc)
            return False
        if mode & (stat.S_IROTH | stat.S_IWOTH):
            logger.warning("RAPI users file %s is accessible by others (mode %o)",
                           self.path, stat.S_IMODE(mode))
        with self._lock:
            self._users = table
        logger.info("Loaded %d RAPI users from %s", len(table), self.path)
        return True


def _watch_files(targets: list[tuple[str, Callable[[], Any]]], stop: threading.Event,
                 wake: threading.Event) -> None:
    """Call a target's function when its file changes (inotify on the file's directory),
    and every target's when ``wake`` is set (SIGHUP).

    Every target is reloaded once as soon as the watches are in place, so a
    change made between the daemon's start and the watches is not missed."""
    import inotify_simple  # type: ignore[import-untyped]
    flags = inotify_simple.flags
    mask = (flags.CLOSE_WRITE | flags.MOVED_TO | flags.MOVED_FROM | flags.CREATE
            | flags.DELETE | flags.ATTRIB)
    with inotify_simple.INotify() as ino:
        by_watch: dict[int, dict[str, Callable[[], Any]]] = {}
        for path, reload in targets:
            directory, name = os.path.split(path)
            os.makedirs(directory, exist_ok=True)
            by_watch.setdefault(ino.add_watch(directory, mask), {})[name] = reload
        wake.set()
        while not stop.is_set():
            events = ino.read(timeout=250)
            if wake.is_set():
                wake.clear()
                due = [reload for _, reload in targets]
            else:
                due = list({id(fn): fn for ev in events
                            if (fn := by_watch.get(ev.wd, {}).get(ev.name)) is not None
                            }.values())
            for reload in due:
                reload()


#: the server's TLS context (kept under its old name for callers and tests)
make_tls_context = rapi_server_context


def _fingerprint(pem: str) -> str:
    """The SHA-256 fingerprint of the certificate in ``pem`` (a file)."""
    with open(pem, "rb") as fh:
        return crypto.cert_fingerprint(fh.read())


def body_limit(authenticated: bool) -> int:
    """The largest body a request may send: :data:`MAX_BODY` with valid
    credentials, :data:`MAX_ANONYMOUS_BODY` without."""
    return MAX_BODY if authenticated else MAX_ANONYMOUS_BODY


def decode_body(data: bytes) -> Any:
    """A request body's JSON, its shape bounded before it is decoded (pure).

    Raises :class:`errors.HttpError` 400 for invalid JSON and for a
    document nested deeper than :data:`MAX_JSON_DEPTH` or holding more than
    :data:`MAX_JSON_VALUES` values (:mod:`ganeti.utils.jsonshape`).
    """
    try:
        jsonshape.check_shape(data, depth=MAX_JSON_DEPTH, values=MAX_JSON_VALUES)
        return serializer.loads(data, valid_unicode=True)   # outside input
    except errors.SerializationError as exc:
        raise errors.HttpError(f"Invalid JSON in the request body: {exc}", 400) from exc


def check_request_body(method: str, headers: Any, limit: int = MAX_BODY,
                       types: tuple[str, ...] = ("application/json",)) -> int:
    """The body length to read, after the header checks (pure).

    Raises :class:`errors.HttpError`: 501 for a ``Transfer-Encoding``, 400
    for a bad ``Content-Length``, 413 over ``limit`` (before anything of
    the body is read), 415 for a body whose type is not in ``types``
    (``application/json`` but for the login form).
    """
    if headers.get("Transfer-Encoding") is not None:
        raise errors.HttpError("Transfer-Encoding is not supported; send Content-Length",
                               501)
    lengths = headers.get_all("Content-Length") or []
    if len(set(lengths)) > 1:
        raise errors.HttpError("Conflicting Content-Length headers", 400)
    if not lengths:
        return 0
    text = lengths[0].strip()
    if not (text.isascii() and text.isdigit()):     # "²".isdigit() holds too
        raise errors.HttpError(f"Invalid Content-Length {text!r}", 400)
    digits = text.lstrip("0") or "0"        # int() refuses 4,300 digits and more
    if len(digits) > len(str(limit)) or int(digits) > limit:
        who = "" if limit >= MAX_BODY else " without credentials"
        raise errors.HttpError(f"Request body too large ({digits[:20]} bytes, at most"
                               f" {limit}{who})", 413)
    length = int(digits)
    if length:
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in types:
            raise errors.HttpError(f"Request body must be {' or '.join(types)}, not"
                                   f" {ctype or 'missing'}", 415)
    return length


def _status_of(exc: errors.GanetiError) -> int:
    if isinstance(exc, errors.HttpError):
        return exc.status
    if isinstance(exc, errors.OpPrereqError):
        return 404 if exc.ecode == errors.ECODE_NOENT else 400
    if isinstance(exc, (errors.JobQueueFull, errors.JobQueueDrainError,
                        errors.NotMasterError)):
        return 503     # NotMasterError: a fenced or failing-over master (doc/design/failover.md)
    if isinstance(exc, (errors.NoMasterError, errors.LuxiTimeoutError,
                        errors.ConnectionClosedError)):
        return 502
    if isinstance(exc, (errors.QueryFilterParseError, errors.TagError)):
        return 400
    return 500


#: a request line (its line end included) over this many bytes gets 414, a header
#: line 431; more than MAX_HEADERS header lines 431; a whole head over MAX_HEAD 431
MAX_LINE = 65536
MAX_HEADERS = 100
MAX_HEAD = 2 * MAX_LINE
#: the methods RAPI serves; any other gets 501
METHODS = frozenset({"GET", "PUT", "POST", "DELETE"})
#: the Server header of every answer
SERVER_VERSION = f"Ganeti-RAPI/2 Python/{platform.python_version()}"
_VERSION_WORD = re.compile(r"HTTP/(\d+)\.(\d+)")


def check_request_line(line: str) -> None:
    """Refuse a request line RAPI answers before its headers arrive (pure).

    Raises :class:`errors.HttpError`: 400 for an HTTP/0.9 request (no
    version, so no headers follow), 505 for HTTP/2 and later.  Any other
    malformed line is left to :mod:`ganeti.http.framing` (400).
    """
    words = line.split()
    if len(words) == 2:
        raise errors.HttpError("HTTP/0.9 requests are not supported", 400)
    if len(words) == 3 and (m := _VERSION_WORD.fullmatch(words[2])) and int(m.group(1)) >= 2:
        raise errors.HttpError(f"Invalid HTTP version ({words[2][:20]})", 505)


class RequestHeaders:
    """A request's headers, looked up by name in any case (what the checks read)."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._headers.get(name.lower(), default)

    def get_all(self, name: str) -> list[str] | None:
        """A list-valued header's values (repeated headers arrive joined with ", ")."""
        value = self._headers.get(name.lower())
        return None if value is None else [v.strip() for v in value.split(",")]


def error_body(status: int, explain: str | None = None) -> bytes:
    """The JSON body of an error answer: code, reason phrase and explanation (pure)."""
    short = framing.reason_phrase(status) or "Error"
    return serializer.dumps({"code": status, "message": short,
                             "explain": explain or short}).encode()


@dataclasses.dataclass(frozen=True)
class _Reply:
    """A JSON answer with headers of its own (the login's cookie)."""

    data: Any
    headers: tuple[tuple[str, str], ...] = ()


#: the web console's paths (served outside the resource table)
UI_PREFIX = "/ui"
_FORM = "application/x-www-form-urlencoded"
_NO_STORE = ("Cache-Control", "no-store")


def login_credentials(ctype: str, data: bytes) -> tuple[str, str]:
    """``(user, password)`` of a login body, a form or a JSON object (pure).

    Raises :class:`errors.HttpError` 400 when either is missing.
    """
    fields: dict[str, Any]
    if ctype == _FORM:
        try:
            pairs = urllib.parse.parse_qs(data.decode("utf-8"), keep_blank_values=True,
                                          strict_parsing=bool(data), errors="strict")
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.HttpError(f"Invalid login form: {exc}", 400) from exc
        fields = {k: v[-1] for k, v in pairs.items()}
    else:
        fields = decode_body(data) if data else {}
        if not isinstance(fields, dict):
            raise errors.HttpError("The login body must be a JSON object", 400)
    user, password = fields.get("user"), fields.get("password")
    if not isinstance(user, str) or not user or not isinstance(password, str):
        raise errors.HttpError("Give 'user' and 'password'", 400)
    return user, password


class _Close(Exception):
    """The connection ends now, without an answer (the peer went away or timed out)."""


class _HttpConnection(socketserver.StreamRequestHandler):
    """One connection's requests, parsed by :mod:`ganeti.http.framing`, answered in turn."""

    server: RapiServer  # type: ignore[assignment]  # the accept loop, not a socketserver server
    deadline_input: DeadlineReader
    _user: str | None = None
    _size: int | None = None
    _allow: list[str] = []
    _large = False          # this request read a body of TRIM_AFTER bytes or more
    _body_unread = False    # the request has a body not read (yet)
    _close = False          # the connection ends after this answer
    _requestline = ""
    _method = ""
    _ui = False             # a web console path: no Basic challenge on a 401
    #: the request's credentials check, kept so that a stream can run it again
    _reauthorize: Callable[[], auth.Principal | None]

    def handle(self) -> None:
        parser = framing.RequestParser(max_head_size=MAX_HEAD, max_headers=MAX_HEADERS,
                                       max_body_size=MAX_BODY, max_line_size=MAX_LINE,
                                       defer_body_checks=True)
        self._buf = bytearray(65536)
        while True:
            self._user, self._size, self._allow, self._large = None, None, [], False
            self._requestline, self._method, self._close = "", "", False
            self._ui = False
            self._bearer = False
            self._body_unread = False
            self.deadline_input.arm()
            try:
                head = self._read_head(parser)
            except errors.HttpError as exc:
                self._close = True
                self._send_error(exc.status, str(exc))
                return
            finally:
                self.deadline_input.disarm()
            if head is None:
                return
            try:
                self._serve(head, parser)
            finally:
                if self._large:
                    release_memory()
            if self._close or not head.keep_alive:
                return
            if self.may_park(parser.buffered):   # idle: the accept loop keeps it, not a thread
                return

    def may_park(self, buffered: int) -> bool:
        """Whether the idle connection went back to the accept loop (the
        threaded core's :class:`TlsConnectionMixin` says; not without it)."""
        return False

    def _receive(self, parser: framing.RequestParser) -> None:
        """Feed the parser what the socket has (within the armed deadline)."""
        count = self.deadline_input.readinto(self._buf)
        if count:
            parser.feed(bytes(self._buf[:count]))
        else:
            parser.feed_eof()

    def _read_head(self, parser: framing.RequestParser) -> framing.RequestHead | None:
        """The next request's head; None when the client closed between requests."""
        line_checked = False
        while True:
            if not line_checked and (line := parser.start_line()) is not None:
                self._requestline, line_checked = consoletokens.redact(line), True
                check_request_line(line)
            head = parser.head()
            if head is not None:
                return head
            if parser.eof:
                return None
            self._receive(parser)

    def _serve(self, head: framing.RequestHead, parser: framing.RequestParser) -> None:
        self._method = head.method
        self._body_unread = (head.headers.get("transfer-encoding") is not None
                             or any(v != "0" for v in
                                    RequestHeaders(head.headers).get_all("content-length") or []))
        if head.method not in METHODS:
            self._close = True
            self._send_error(501, f"Unsupported method ({head.method[:40]!r})")
            return
        if not self._body_unread:
            parser.next_request()       # no body: the request is consumed
        try:
            result = self._process(head, parser)
            if isinstance(result, stream.StreamRequest):
                result = result.resumed(head.headers.get("last-event-id"))
        except (TimeoutError, ConnectionError, ssl.SSLError):
            self._close = True
            raise
        except errors.GanetiError as exc:
            status = _status_of(exc)
            if status >= 500:
                logger.error("%s %s failed: %s", head.method, head.target, exc)
            self._send_error(status, str(exc))
            return
        except Exception:   # never a traceback to the client
            logger.exception("Unexpected error in %s %s", head.method, head.target)
            self._send_error(500, "Internal error; see the RAPI daemon's log")
            return
        if isinstance(result, stream.StreamRequest):
            self._stream(result)
            return
        if isinstance(result, consoletokens.ConsoleOpen):   # a WebSocket (server/console.py)
            self._close = True
            try:
                console.serve_browser(self.server, result, head, parser.buffered,
                                      self.connection, self.client_address[0], self._opened)
            except errors.HttpError as exc:   # answered before the 101
                self._send_error(exc.status, str(exc))
            return
        if isinstance(result, webui.Page):
            self._answer(200, [("Content-Type", result.content_type), *result.headers],
                         result.body)
            return
        if isinstance(result, _Reply):
            self._answer(200, [("Content-Type", "application/json"), *result.headers],
                         serializer.dumps(result.data).encode())
            return
        content_type = "application/json"
        if isinstance(result, resources.RawBody):
            content_type, body = result.content_type, result.body
        else:
            body = serializer.dumps(result).encode()
        self._answer(200, [("Content-Type", content_type)], body)

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        """Send one answer (and log it); a reply to HEAD has no body."""
        self._size = len(body)
        head = [("Server", SERVER_VERSION), ("Date", framing.http_date(time.time()))]
        self.wfile.write(framing.build_response(status, head + headers, body,
                                                keep_alive=not self._close,
                                                head_only=self._method == "HEAD"))
        self._log(status)

    def _log(self, status: int) -> None:
        self.server.access_log.log(self.client_address[0], self._user, self._requestline,
                                   status, self._size)

    def _send_error(self, status: int, explain: str | None = None) -> None:
        """Every error as a Ganeti JSON error body; the connection closes after those that
        leave the stream in doubt (a body unread would be taken for the next request)."""
        headers = [("Content-Type", "application/json")]
        if status == 401 and not self._ui:
            # a failed token asks for a token again, not for a password
            challenge = (f'Bearer realm="{users.REALM}", error="invalid_token"'
                         if self._bearer else f'Basic realm="{users.REALM}"')
            headers.append(("WWW-Authenticate", challenge))
        if status == 403:
            # %r: a name from the request (a user, an instance) cannot start a new log line
            logger.warning("Refused %s to user %r from %s: %r", self._method, self._user,
                           self.client_address[0], explain)
        if status == 501 and self._allow:      # a known path with another method
            headers.append(("Allow", ", ".join(self._allow)))
        if status in (400, 413, 414, 431, 501) or status >= 500 or self._body_unread:
            self._close = True
        try:
            self._answer(status, headers, error_body(status, explain))
        except (OSError, ValueError) as exc:
            logger.debug("Error answer to %s not sent: %s", self.client_address[0], exc)

    def _stream(self, request: stream.StreamRequest) -> None:
        """Serve ``GET /2/events``: the head once subscribed, then events until the
        client goes away (the body ends when the connection closes).  The thread
        leaves the server's worker pool first: a stream never holds a worker."""
        self._close = True
        self.server.pool.detach()

        def begin() -> None:
            self.wfile.write(framing.build_stream_head(200, [
                ("Server", SERVER_VERSION), ("Date", framing.http_date(time.time())),
                ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]))
            self._log(200)

        # the credentials that opened the stream, checked again: a revoked
        # token or an ended session stops it (doc/rapi.md, "Events")
        allowed = auth.still_holds(self._reauthorize)
        try:
            stream.serve_events(self.server.event_bus, request, self.wfile.write, begin=begin,
                                keepalive=self.server.keepalive, stop=self.server.stopping,
                                allowed=allowed)
        except (TimeoutError, ConnectionError, ssl.SSLError) as exc:
            logger.debug("Event stream to %s ended: %s", self.client_address[0], exc)

    def _opened(self, user: str) -> None:
        """A console's WebSocket was accepted for ``user``: the access log line."""
        self._user = user
        self._log(101)

    def _read_body(self, head: framing.RequestHead, parser: framing.RequestParser) -> bytes:
        """The request's body (``Content-Length`` bytes), within the request deadline."""
        if (head.headers.get("expect", "").lower() == "100-continue"
                and head.version == "HTTP/1.1"):
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.deadline_input.arm()
        try:
            while True:
                try:
                    request = parser.next_request()
                except errors.HttpError as exc:
                    self._close = True
                    raise errors.HttpError("Request body ended early", 400) from exc
                if request is not None:
                    return request.body
                self._receive(parser)
        finally:
            self.deadline_input.disarm()

    def _process(self, head: framing.RequestHead, parser: framing.RequestParser) -> Any:
        url = urllib.parse.urlsplit(head.target)
        try:
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True,
                                          strict_parsing=bool(url.query), errors="strict")
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.HttpError(f"Invalid query string: {exc}", 400) from exc
        path = url.path     # raw: split at "/" before decoding (ganeti.rapi.uri)
        method = head.method
        headers = RequestHeaders(head.headers)
        if path == UI_PREFIX or path.startswith(UI_PREFIX + "/"):
            self._ui = True
            return self._serve_ui(method, path, headers, head, parser)
        self._allow = resources.allowed_methods(path)
        route, args = resources.match(method, path)
        self._reauthorize = functools.partial(
            self._authorize, headers, method, route.required_role,
            route.needs_auth or self.server.require_auth, f"{route.method} {route.path}",
            write=route.needs_write)
        principal = self._reauthorize()
        limit = body_limit(principal is not None)
        length = check_request_body(method, headers, limit)
        body: Any = None
        if self._body_unread:
            data = self._read_body(head, parser)
            self._body_unread = False
            if length:
                self._large = length >= TRIM_AFTER
                body = decode_body(data)
            del data
        ctx = resources.Ctx(method=method, args=args, query=query, body=body,
                            client=self.server.luxi_client(),
                            user=principal.user if principal else None, path=path,
                            principal=principal, tokens=self.server.tokens,
                            console_token=console.token_issuer(
                                self.server.console_tokens, principal, self._reauthorize,
                                self.server.console_slots),
                            console_password=self.server.vnc_password)
        return resources.dispatch(route, ctx)

    def _authorize(self, headers: RequestHeaders, method: str, need: roles.Role,
                   needs_auth: bool, what: str, *, write: bool = False
                   ) -> auth.Principal | None:
        """The request's principal (None: anonymous), or the 401/403 as an HttpError."""
        server = self.server
        self._bearer = auth.is_bearer(headers.get("Authorization"))
        ident = auth.identify(server.users.get(), headers.get("Authorization"),
                              headers.get("Cookie"), token=server.tokens.verify,
                              session=server.sessions.lookup)
        decision = auth.decide(ident, need=need, needs_auth=needs_auth, method=method,
                               csrf=headers.get(sessions.CSRF_HEADER), what=what,
                               write=write)
        self._user = decision.user
        if decision.status != 200:
            raise errors.HttpError(decision.message, decision.status)
        return decision.principal

    def _serve_ui(self, method: str, path: str, headers: RequestHeaders,
                  head: framing.RequestHead, parser: framing.RequestParser) -> Any:
        """The web console's session paths: ``POST /ui/login``, ``POST /ui/logout``,
        ``GET /ui/session`` (doc/rapi.md, "Sessions"); any other GET is one of its
        static files (:mod:`ganeti.rapi.webui`, doc/webui.md), served to anyone."""
        paths = {f"{UI_PREFIX}/login": "POST", f"{UI_PREFIX}/logout": "POST",
                 f"{UI_PREFIX}/session": "GET"}
        if path not in paths:
            found = webui.page(UI_PREFIX, path) if method == "GET" else None
            if found is None:
                raise errors.HttpError(f"Resource {path[:40]!r} not found", 404)
            if self._body_unread:
                raise errors.HttpError(f"{path} takes no request body", 400)
            return found
        if method != paths[path]:
            self._allow = [paths[path]]
            raise errors.HttpError(f"Method {method} is not supported; allowed:"
                                   f" {paths[path]}", 501)
        if path == f"{UI_PREFIX}/login":
            return self._login(headers, head, parser)
        if self._body_unread:       # answered unread: the connection closes after the 400
            raise errors.HttpError(f"{path} takes no request body", 400)
        principal = self._authorize(headers, method, roles.Role.READONLY, True, f"{method} {path}")
        assert principal is not None
        if principal.via != auth.VIA_SESSION or principal.session is None:
            raise errors.HttpError("This path is for a web console session", 400)
        if path == f"{UI_PREFIX}/session":
            return _Reply({"user": principal.user, "role": principal.role.label,
                           "csrf_token": principal.session.csrf}, (_NO_STORE,))
        sid = sessions.cookie_value(headers.get("Cookie"))
        if sid is not None:
            self.server.sessions.drop(sid)
        logger.info("User %s logged out of the web console", principal.user)
        return _Reply({"logged_out": True}, (("Set-Cookie", sessions.clear_cookie()),
                                              _NO_STORE))

    def _login(self, headers: RequestHeaders, head: framing.RequestHead,
               parser: framing.RequestParser) -> _Reply:
        if not sessions.same_origin(headers.get("Origin"), headers.get("Host")):
            # a login form posted from another site (login CSRF)
            raise errors.HttpError("Permission denied: a login from another origin", 403)
        length = check_request_body("POST", headers, MAX_ANONYMOUS_BODY,
                                    types=("application/json", _FORM))
        data = b""
        if self._body_unread:
            data = self._read_body(head, parser)
            self._body_unread = False
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        name, password = login_credentials(ctype, data[:length])
        user = self.server.users.get().get(name)
        ok = users.check_password(user or users.DUMMY, password) and user is not None
        if not ok or user is None:
            logger.warning("Failed web console login for user %r from %s", name[:64],
                           self.client_address[0])
            raise errors.HttpError("Invalid user name or password", 401)
        self._user = user.name
        sid, session = self.server.sessions.create(user.name)
        logger.info("User %s logged in to the web console from %s", user.name,
                    self.client_address[0])
        return _Reply({"user": user.name, "role": user.role.label,
                       "csrf_token": session.csrf,
                       "idle_timeout": int(sessions.IDLE_TIMEOUT)},
                      (("Set-Cookie", sessions.set_cookie(sid)), _NO_STORE))


class _Handler(TlsConnectionMixin, _HttpConnection):
    """A RAPI connection (its TLS handshake done by the accept loop): its requests."""

    server: RapiServer


class RapiServer(ThreadedServer):
    """The RAPI daemon's server: the HTTP package's threaded core
    (:mod:`ganeti.http.threaded`: the accept loop with its TLS handshakes,
    a bounded worker pool, deadlines, lingering close) with the users, the
    access log, the LUXI clients (one per worker thread) and the event bus."""

    def __init__(self, address: tuple[str, int], tls: ssl.SSLContext, *,
                 users_table: UsersTable, access_log: AccessLog, luxi_address: str,
                 pem: str | None = None, token_file: TokenFile | None = None,
                 session_store: Sessions | None = None,
                 require_auth: bool = False, event_bus: events.EventBus | None = None,
                 keepalive: float = stream.KEEPALIVE, limits: Limits = LIMITS,
                 node_tls: ssl.SSLContext | None = None, noded_port: int | None = None,
                 vnc_password_dir: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(address, tls, _Handler, limits=limits, clock=clock)
        #: the key and certificate file :meth:`reload_certificate` reads
        self.pem = pem
        self.fingerprint: str | None = _fingerprint(pem) if pem else None
        self.users = users_table
        #: the API tokens (by default beside the users file) and the console's sessions
        self.tokens = token_file if token_file is not None else TokenFile(
            os.path.join(os.path.dirname(users_table.path), "tokens"))
        self.sessions = session_store if session_store is not None else Sessions()
        self.access_log = access_log
        self.require_auth = require_auth
        self._luxi_address = luxi_address
        self._local = threading.local()
        #: the local copy of the master's events (fed by a stream.EventRelay)
        self.event_bus = events.EventBus() if event_bus is None else event_bus
        self.keepalive = keepalive
        #: set at shutdown: event streams end
        self.stopping = threading.Event()
        #: console tokens; the node RPC's TLS and port (doc/rapi.md, "Consoles")
        self.console_tokens = consoletokens.ConsoleTokens()
        #: the cap on open consoles (doc/rapi.md, "Consoles")
        self.console_slots = consoleslots.ConsoleSlots()
        self.node_tls = node_tls
        self.noded_port = noded_port if noded_port is not None else default_noded_port()
        #: reads a VNC password, only from files under ``vnc_password_dir`` (None: never)
        self.vnc_password = functools.partial(console.read_vnc_password,
                                              within=vnc_password_dir)

    def reload_certificate(self) -> bool:
        """Load :attr:`pem` again for the connections accepted from now on.

        A file that does not load (missing, half written, no key) is logged
        and the previous certificate stays; False then.
        """
        if self.pem is None:
            return False
        try:
            tls = make_tls_context(self.pem)
            fingerprint = _fingerprint(self.pem)
        except (OSError, ssl.SSLError, errors.GanetiError, ValueError) as exc:
            logger.error("Cannot load the RAPI certificate %s (%s); keeping the previous one",
                         self.pem, exc)
            return False
        self.tls_context = tls
        if fingerprint != self.fingerprint:
            logger.info("RAPI certificate reloaded from %s (%s)", self.pem, fingerprint)
        self.fingerprint = fingerprint
        return True

    def luxi_client(self) -> luxi.Client:
        """This thread's LUXI client (one connection per thread)."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = luxi.Client(self._luxi_address)
            self._local.client = client
        return client


# --- the daemon -----------------------------------------------------------------------------

def _add_options(parser: argparse.ArgumentParser) -> None:
    port = int(os.environ.get(constants.ENV_RAPI_PORT) or constants.DEFAULT_RAPI_PORT)
    parser.add_argument("-p", "--port", type=int, default=port,
                        help=f"TCP port (default {port})")
    parser.add_argument("-b", "--bind", default="0.0.0.0", metavar="ADDRESS",
                        help="address to listen on (default: all)")
    parser.add_argument("--require-authentication", action="store_true",
                        help="refuse reads without a valid user too")


def _check(options: argparse.Namespace, paths: Paths) -> None:
    if not os.path.exists(paths.rapi_pem):
        raise errors.ConfigurationError(f"RAPI certificate {paths.rapi_pem} missing;"
                                        " is this node in a cluster?")


def _prepare(runtime: DaemonRuntime) -> RapiServer:
    paths, opts = runtime.paths, runtime.options
    table = UsersTable(paths.rapi_users_file)
    token_file = TokenFile(paths.rapi_tokens_file)
    access = AccessLog(paths.log_file(constants.RAPI_ACCESS_LOG))
    server = RapiServer((opts.bind, opts.port), make_tls_context(paths.rapi_pem),
                        users_table=table, access_log=access, token_file=token_file,
                        luxi_address=paths.master_socket, pem=paths.rapi_pem,
                        require_auth=opts.require_authentication,
                        node_tls=console.node_tls(paths.server_pem),
                        vnc_password_dir=paths.conf_dir)
    wake = threading.Event()
    targets = [(table.path, table.reload), (token_file.path, token_file.reload),
               (paths.rapi_pem, server.reload_certificate)]
    threading.Thread(target=_watch_files, args=(targets, runtime.stop_event, wake),
                     name="rapi-files", daemon=True).start()
    runtime.add_reopen_callback(access.reopen)
    runtime.add_reopen_callback(wake.set)
    relay = stream.EventRelay(server.event_bus, lambda: luxi.Client(paths.master_socket))
    threading.Thread(target=relay.run, args=(runtime.stop_event,), name="rapi-events",
                     daemon=True).start()
    runtime.add_stop_callback(server.stopping.set)
    runtime.add_stop_callback(server.shutdown)
    logger.info("RAPI listening on %s:%d", opts.bind, opts.port)
    return server


#: how often the accept loop looks at its stop flag (socketserver's loop has
#: no wake-up: a stop, e.g. on the old master in a failover, waits up to this)
STOP_POLL = 0.1


def _serve(runtime: DaemonRuntime, server: RapiServer) -> None:
    try:
        server.serve_forever(poll_interval=STOP_POLL)
    finally:
        server.server_close()
        server.access_log.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``daemons/ganeti-rapi``."""
    return run_daemon(constants.RAPI, add_options=_add_options, check_fn=_check,
                      prepare_fn=_prepare, exec_fn=_serve, description="Ganeti Remote API",
                      argv=argv, tuning=tuning.RAPI)

