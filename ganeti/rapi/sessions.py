"""Browser sessions of the web console: the store, the cookie and the CSRF check (pure).

``POST /ui/login`` makes a session (:meth:`SessionStore.create`): a random
session id, sent once as the ``__Host-ganeti_session`` cookie (``Secure``,
``HttpOnly``, ``SameSite=Strict``, ``Path=/``, no ``Domain``: the ``__Host-``
prefix makes a browser refuse it otherwise, so a sibling host cannot plant
one), and a random CSRF token, returned in the answer's body.  A login's
``Origin``, when sent, must be this server's (:func:`same_origin`).  Every
request with the cookie but a GET, and every write row even as a GET, must
carry the CSRF token in ``X-CSRF-Token`` (:func:`csrf_ok`, constant time;
:func:`ganeti.rapi.auth.decide`).  The store keeps the SHA-256 of each
session id, not the id; a session ends at logout, after :data:`IDLE_TIMEOUT`
without a request, or :data:`MAX_AGE` after login.  A user has at most
:data:`MAX_USER_SESSIONS` (a new login ends that user's least recently used
one); when the store holds :data:`MAX_SESSIONS` live sessions a new login is
refused (503) rather than ending another user's.  Sessions live in the
daemon's memory only: a restart or a master failover logs everyone out.  The
clock is passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from ganeti import errors

__all__ = ["COOKIE", "CSRF_HEADER", "IDLE_TIMEOUT", "MAX_AGE", "MAX_SESSIONS",
           "MAX_USER_SESSIONS", "Session",
           "SessionStore", "cookie_value", "set_cookie", "clear_cookie", "csrf_ok", "same_origin"]

COOKIE = "__Host-ganeti_session"
CSRF_HEADER = "X-CSRF-Token"
#: a session unused this long (seconds) ends
IDLE_TIMEOUT = 30 * 60.0
#: a session ends this long after login whatever its use
MAX_AGE = 12 * 3600.0
#: at most this many sessions; a login beyond is refused
MAX_SESSIONS = 4096
#: at most this many sessions per user; a new one beyond ends the user's least recently used
MAX_USER_SESSIONS = 16


def _digest(sid: str) -> str:
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()


@dataclass
class Session:
    """One logged-in browser."""

    user: str
    csrf: str
    created: float
    last_seen: float


class SessionStore:
    """The sessions by the digest of their id.  Not thread-safe: the server locks around it."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 idle: float = IDLE_TIMEOUT, max_age: float = MAX_AGE,
                 limit: int = MAX_SESSIONS, user_limit: int = MAX_USER_SESSIONS,
                 rand: Callable[[int], str] = secrets.token_urlsafe) -> None:
        self._clock, self.idle, self.max_age, self.limit = clock, idle, max_age, limit
        self.user_limit = user_limit
        self._rand = rand
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, user: str) -> tuple[str, Session]:
        """A new session for ``user``: its id (for the cookie, shown once) and record.

        Ends ``user``'s least recently used sessions beyond :attr:`user_limit`;
        raises :class:`errors.HttpError` 503 when the store is full of live
        sessions (of any users: none of them is ended for this one).
        """
        now = self._clock()
        self._expire(now)
        own = [k for k, s in self._sessions.items() if s.user == user]
        own.sort(key=lambda k: self._sessions[k].last_seen)
        for key in own[:max(0, len(own) - self.user_limit + 1)]:
            del self._sessions[key]
        if len(self._sessions) >= self.limit:
            raise errors.HttpError(f"Too many web console sessions (at most {self.limit});"
                                   " try again later", 503)
        sid = self._rand(32)
        session = Session(user, self._rand(32), now, now)
        self._sessions[_digest(sid)] = session
        return sid, session

    def lookup(self, sid: str) -> Session | None:
        """The live session of ``sid`` (its idle clock restarted), or None."""
        now = self._clock()
        key = _digest(sid)
        session = self._sessions.get(key)
        if session is None:
            return None
        if now - session.last_seen >= self.idle or now - session.created >= self.max_age:
            del self._sessions[key]
            return None
        session.last_seen = now
        return session

    def drop(self, sid: str) -> bool:
        """End a session (logout); whether there was one."""
        return self._sessions.pop(_digest(sid), None) is not None

    def drop_user(self, user: str) -> int:
        """End every session of ``user``; how many."""
        keys = [k for k, s in self._sessions.items() if s.user == user]
        for key in keys:
            del self._sessions[key]
        return len(keys)

    def _expire(self, now: float) -> None:
        dead = [k for k, s in self._sessions.items()
                if now - s.last_seen >= self.idle or now - s.created >= self.max_age]
        for key in dead:
            del self._sessions[key]


def cookie_value(header: str | None) -> str | None:
    """The session id in a ``Cookie`` header, or None (the last one when repeated)."""
    if not header:
        return None
    found = None
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE and value:
            found = value.strip('"')
    return found


def set_cookie(sid: str, max_age: float = MAX_AGE) -> str:
    """The ``Set-Cookie`` value that gives the browser ``sid``."""
    return (f"{COOKIE}={sid}; Path=/; Max-Age={int(max_age)}; Secure; HttpOnly;"
            " SameSite=Strict")


def clear_cookie() -> str:
    """The ``Set-Cookie`` value that removes the cookie (logout)."""
    return f"{COOKIE}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Strict"


def same_origin(origin: str | None, host: str | None) -> bool:
    """Whether a login's ``Origin`` header is this server's own (login CSRF check).

    No ``Origin`` (a non-browser client) passes.  One that is present must be
    ``https://`` with exactly the request's ``Host`` (host and port, case
    aside), and nothing more: another site, plain ``http``, another port, a
    ``null`` origin (a sandboxed or file page) or a missing ``Host`` fail.
    """
    if origin is None:
        return True
    if not host:
        return False
    scheme, sep, netloc = origin.strip().partition("://")
    return (sep == "://" and scheme.lower() == "https" and netloc != ""
            and netloc.lower() == host.strip().lower())


def csrf_ok(session: Session, header: str | None) -> bool:
    """Whether the ``X-CSRF-Token`` value ``header`` is the session's (constant time)."""
    if not header:
        return False
    return hmac.compare_digest(session.csrf.encode("utf-8"), header.strip().encode("utf-8"))
