"""The RAPI users file and the authorisation decision (pure, no I/O).

File format (``var/lib/ganeti/rapi/users``, see doc/rapi.md)::

    # comment
    jack   abc123                 write
    jill   {HA1}<md5 hex>         read
    anne   {cleartext}s3cret      read,write

The password is in clear, ``{cleartext}...`` or ``{HA1}...`` (the md5 hex
digest of ``user:Ganeti Remote API:password``); the prefix is
case-insensitive.  Options are comma separated; unknown options are
ignored (Ganeti does the same).  The options name the user's role
(:mod:`ganeti.rapi.roles`): ``admin``, ``operator``, ``readonly``, and
Ganeti's ``write`` (= ``admin``) and ``read`` (= ``readonly``); the
largest named wins, a user without any is ``readonly``.  ``owner`` limits
an operator's instance actions to the instances tagged ``owner:<user>``.

The decision on a request is :mod:`ganeti.rapi.auth`'s.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from ganeti import errors
from ganeti.rapi import roles

__all__ = ["REALM", "ACCESS_READ", "ACCESS_WRITE", "OWNER", "User", "parse_users",
           "check_password", "parse_basic_auth", "DUMMY"]

REALM = "Ganeti Remote API"
ACCESS_READ = "read"
ACCESS_WRITE = "write"
#: the option that limits an operator to the instances tagged ``owner:<user>``
OWNER = "owner"
_KNOWN_OPTIONS = frozenset([*roles.OPTION_ROLES, OWNER])


@dataclass(frozen=True)
class User:
    """One users-file entry."""

    name: str
    password: str            # as written, with its scheme prefix
    options: frozenset[str]

    @property
    def role(self) -> roles.Role:
        return roles.role_from_options(self.options)

    @property
    def can_write(self) -> bool:
        return self.role >= roles.Role.ADMIN

    @property
    def owner_only(self) -> bool:
        """Whether the user's instance actions are limited to its own (``owner``)."""
        return OWNER in self.options and self.role < roles.Role.ADMIN


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


#: the user a password is checked against when the name is unknown (same work either way)
DUMMY = User("", "{cleartext}" + "x" * 32, frozenset())
