"""The RAPI users file and the authorisation decision (pure, no I/O).

File format (``var/lib/ganeti/rapi/users``, see doc/rapi.md)::

    # comment
    jack   abc123                 write
    jill   {HA1}<md5 hex>         read
    anne   {cleartext}s3cret      read,write

The password is in clear, ``{cleartext}...`` or ``{HA1}...`` (the md5 hex
digest of ``user:Ganeti Remote API:password``); the prefix is
case-insensitive.  Options are comma separated; unknown options are
ignored (Ganeti does the same), a user without options may only read.

:func:`authorize` takes the parsed table and the request's facts and
returns a :class:`Decision`; the server only turns it into a status code.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from ganeti import errors

__all__ = ["REALM", "ACCESS_READ", "ACCESS_WRITE", "User", "parse_users",
           "check_password", "parse_basic_auth", "Decision", "authorize"]

REALM = "Ganeti Remote API"
ACCESS_READ = "read"
ACCESS_WRITE = "write"
_KNOWN_OPTIONS = frozenset([ACCESS_READ, ACCESS_WRITE])


@dataclass(frozen=True)
class User:
    """One users-file entry."""

    name: str
    password: str            # as written, with its scheme prefix
    options: frozenset[str]

    @property
    def can_write(self) -> bool:
        return ACCESS_WRITE in self.options


def parse_users(text: str) -> dict[str, User]:
    """Parse a users file; raises :class:`errors.ConfigurationError` naming the line."""
    users: dict[str, User] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 2:
            raise errors.ConfigurationError(f"users file line {lineno}: expected"
                                            " 'user password [options]'")
        if len(parts) > 3:
            raise errors.ConfigurationError(f"users file line {lineno}: too many fields")
        name, password = parts[0], parts[1]
        options = frozenset(o.strip().lower() for o in parts[2].split(",")
                            if o.strip()) if len(parts) == 3 else frozenset()
        if name in users:
            raise errors.ConfigurationError(f"users file line {lineno}: user '{name}'"
                                            " listed twice")
        users[name] = User(name, password, options & _KNOWN_OPTIONS)
    return users


def _ha1(user: str, password: str) -> str:
    return hashlib.md5(f"{user}:{REALM}:{password}".encode()).hexdigest()


def check_password(user: User, password: str) -> bool:
    """Whether ``password`` is ``user``'s password (constant-time comparison)."""
    stored = user.password
    lower = stored.lower()
    if lower.startswith("{ha1}"):
        expected, given = stored[5:].lower(), _ha1(user.name, password)
    elif lower.startswith("{cleartext}"):
        expected, given = stored[11:], password
    else:
        expected, given = stored, password
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def parse_basic_auth(header: str) -> tuple[str, str] | None:
    """``(user, password)`` from a ``Basic`` Authorization header, or None if malformed."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`authorize`: an HTTP status (200 = go on) and the user."""

    status: int
    user: str | None = None
    message: str = ""


_DUMMY = User("", "{cleartext}" + "x" * 32, frozenset())


def authorize(users: dict[str, User], header: str | None, *, needs_write: bool,
              require_auth: bool) -> Decision:
    """Decide on one request.

    Reads pass without credentials unless ``require_auth``; a write needs a
    valid user with the ``write`` option.  Missing, malformed or wrong
    credentials give 401 (one message for unknown user and bad password);
    a valid user without ``write`` on a write gives 403.
    """
    needed = needs_write or require_auth
    if header is None:
        if not needed:
            return Decision(200)
        return Decision(401, message="Authentication required")
    creds = parse_basic_auth(header)
    if creds is None:
        return Decision(401, message="Malformed or unsupported Authorization header")
    name, password = creds
    user = users.get(name)
    # compare even for an unknown user, so both cases take the same path
    ok = check_password(user or _DUMMY, password) and user is not None
    if not ok or user is None:
        return Decision(401, message="Invalid user name or password")
    if needs_write and not user.can_write:
        return Decision(403, user=name, message="Permission denied: no write access")
    return Decision(200, user=name)
