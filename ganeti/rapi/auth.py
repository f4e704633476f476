"""Who sent a RAPI request, and may they (pure: the tables are passed in).

Three kinds of credentials, tried in this order:

* ``Authorization: Basic`` with a users-file user and password (Ganeti's);
* ``Authorization: Bearer gnt_<id>_<secret>``, an API token
  (:mod:`ganeti.rapi.tokens`); its role is the smaller of the token's and
  its creator's current one, and a token whose creator left the users file
  is dead;
* the web console's session cookie (:mod:`ganeti.rapi.sessions`), with the
  user's current role; a request other than GET with a session must carry
  the session's CSRF token.

:func:`identify` finds the principal (or none: an anonymous request);
:func:`decide` judges it against the role a row needs.  Missing,
malformed or wrong credentials are 401 (one message for an unknown user
and a wrong password); a known principal without the role, or a session
write without its CSRF token, is 403 with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ganeti import errors
from ganeti.rapi import roles, sessions, users
from ganeti.rapi.roles import Role
from ganeti.rapi.tokens import Token

__all__ = ["Principal", "Decision", "identify", "is_bearer", "decide", "still_holds", "VIA_BASIC",
           "VIA_TOKEN", "VIA_SESSION"]

VIA_BASIC, VIA_TOKEN, VIA_SESSION = "basic", "token", "session"
_SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Principal:
    """An authenticated requester."""

    user: str
    role: Role
    via: str
    owner_only: bool = False
    token_id: str | None = None
    session: sessions.Session | None = None


@dataclass(frozen=True)
class Decision:
    """An HTTP status (200: go on), the principal (None: anonymous) and the reason."""

    status: int
    principal: Principal | None = None
    message: str = ""

    @property
    def user(self) -> str | None:
        return self.principal.user if self.principal else None


def _basic(table: Mapping[str, users.User], value: str) -> Decision:
    creds = users.parse_basic_auth(value)
    if creds is None:
        return Decision(401, message="Malformed or unsupported Authorization header")
    name, password = creds
    user = table.get(name)
    # compare even for an unknown user, so both cases take the same path
    ok = users.check_password(user or users.DUMMY, password) and user is not None
    if not ok or user is None:
        return Decision(401, message="Invalid user name or password")
    return Decision(200, Principal(user.name, user.role, VIA_BASIC, user.owner_only))


def is_bearer(authorization: str | None) -> bool:
    """Whether an ``Authorization`` header offers a token (``Bearer``)."""
    return (authorization is not None
            and authorization.strip().partition(" ")[0].lower() == "bearer")


def identify(table: Mapping[str, users.User], authorization: str | None, cookie: str | None,
             *, token: Callable[[str], Token | None],
             session: Callable[[str], sessions.Session | None]) -> Decision:
    """The principal of a request from its ``Authorization`` and ``Cookie`` headers.

    ``token`` looks a token's text up (None: unknown, wrong or expired);
    ``session`` a session id (None: unknown or expired).  An
    ``Authorization`` header wins over a cookie.
    """
    if authorization is not None:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer":
            found = token(value.strip()) if value.strip() else None
            owner = table.get(found.user) if found is not None else None
            if found is None or owner is None:
                return Decision(401, message="Invalid, expired or revoked token")
            return Decision(200, Principal(owner.name, min(found.role, owner.role), VIA_TOKEN,
                                           owner.owner_only, token_id=found.id))
        return _basic(table, authorization)
    sid = sessions.cookie_value(cookie)
    if sid is None:
        return Decision(200)
    live = session(sid)
    member = table.get(live.user) if live is not None else None
    if live is None or member is None:
        return Decision(401, message="Session expired or unknown; log in again")
    return Decision(200, Principal(member.name, member.role, VIA_SESSION, member.owner_only,
                                   session=live))


def decide(ident: Decision, *, need: Role, needs_auth: bool, method: str,
           csrf: str | None, what: str, write: bool = False) -> Decision:
    """Judge the principal of ``ident`` for a request needing role ``need``.

    ``needs_auth``: the request needs a principal (a write, or every
    request with ``--require-authentication``); ``csrf`` is the request's
    ``X-CSRF-Token``; ``what`` names the action in a refusal; ``write``: the
    row changes something (``access="write"``) whatever its method, so a
    session needs the CSRF header for it even as a GET (a console, a job).
    """
    if ident.status != 200:
        return ident
    principal = ident.principal
    if principal is None:
        if needs_auth:
            return Decision(401, message="Authentication required")
        return ident
    if (principal.via == VIA_SESSION and (write or method not in _SAFE_METHODS)
            and (principal.session is None or not sessions.csrf_ok(principal.session, csrf))):
        return Decision(403, principal, f"Permission denied: {what} with a session needs"
                                        f" the session's {sessions.CSRF_HEADER} header")
    if principal.role < need:
        return Decision(403, principal, roles.refusal(principal.user, principal.role, need,
                                                      what))
    return ident


def still_holds(check: Callable[[], object]) -> Callable[[], bool]:
    """A predicate for a long-lived answer (the event stream, a console): whether
    ``check()``, the credentials of the request that opened it checked again,
    still passes (it raises :class:`errors.HttpError` once a token is revoked
    or a session ended; doc/rapi.md, "Events")."""
    def holds() -> bool:
        try:
            check()
        except errors.HttpError:
            return False
        return True
    return holds
