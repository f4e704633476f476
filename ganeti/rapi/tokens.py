"""RAPI API tokens: a table of hashed secrets, usable as ``Bearer`` credentials (pure).

A token is shown once, when it is made: ``gnt_<id>_<secret>``, the id 16
hex digits (it names the token in lists and in ``DELETE /2/tokens/[id]``),
the secret 43 URL-safe characters (256 random bits).  Only the SHA-256
digest of the secret is kept (a secret that random needs no slow hash: it
cannot be guessed from its digest); :meth:`TokenTable.verify` compares
digests in constant time, and does the same work for an unknown id.

A token has its creator's name, a role (at most the creator's when made;
the server also caps it by the creator's role of the moment), an optional
expiry and a comment.  :meth:`TokenTable.dumps`/:func:`loads` are the
file's text (JSON through :mod:`ganeti.serializer`); the file itself is
written by the server (:mod:`ganeti.server.rapi`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ganeti import errors, serializer
from ganeti.rapi.roles import Role, parse_role

__all__ = ["Token", "TokenTable", "TokenService", "hash_secret", "split_token", "loads",
           "PREFIX", "MAX_TOKENS", "MAX_USER_TOKENS", "MAX_LIFETIME"]

PREFIX = "gnt"
#: at most this many tokens (expired ones are dropped first when a table is full)
MAX_TOKENS = 10_000
#: at most this many tokens per user (expired ones are dropped first)
MAX_USER_TOKENS = 50
#: the furthest expiry a token may have (seconds from its creation; 10 years)
MAX_LIFETIME = 10 * 365 * 86400.0
_TOKEN_RE = re.compile(r"gnt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_ID_RE = re.compile(r"[0-9a-f]{16}")
_FORMAT = 1


def hash_secret(secret: str) -> str:
    """The digest kept for ``secret``: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


def split_token(text: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a token's text, or None when it is not one."""
    m = _TOKEN_RE.fullmatch(text.strip())
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class Token:
    """One token as stored (its secret's digest, never the secret)."""

    id: str
    user: str
    role: Role
    digest: str
    created: float
    expires: float | None = None
    comment: str = ""

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def public(self, now: float) -> dict[str, Any]:
        """What a list shows of it (no digest)."""
        return {"id": self.id, "user": self.user, "role": self.role.label,
                "created": self.created, "expires": self.expires, "comment": self.comment,
                "expired": self.expired(now)}

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "user": self.user, "role": self.role.label,
                "digest": self.digest, "created": self.created, "expires": self.expires,
                "comment": self.comment}


_DUMMY_DIGEST = hash_secret("x" * 43)


class TokenTable:
    """The tokens by id.  Not thread-safe: the server holds a lock around it."""

    def __init__(self, tokens: dict[str, Token] | None = None, *,
                 randbits: Callable[[int], str] = secrets.token_urlsafe,
                 randhex: Callable[[int], str] = secrets.token_hex) -> None:
        self.tokens: dict[str, Token] = dict(tokens or {})
        self._randbits = randbits
        self._randhex = randhex

    def create(self, user: str, role: Role, now: float, *, expires: float | None = None,
               comment: str = "") -> tuple[Token, str]:
        """A new token and its text (shown once).  Raises :class:`errors.HttpError`
        400 for an expiry not in the future or beyond :data:`MAX_LIFETIME`, 409
        when the table is full or ``user`` has :data:`MAX_USER_TOKENS`."""
        if expires is not None and expires <= now:
            raise errors.HttpError("The expiry must be in the future", 400)
        if expires is not None and expires > now + MAX_LIFETIME:
            raise errors.HttpError(f"The expiry must be at most {int(MAX_LIFETIME)} seconds"
                                   " from now", 400)
        if len(self.tokens) >= MAX_TOKENS:
            self.purge(now)
            if len(self.tokens) >= MAX_TOKENS:
                raise errors.HttpError(f"Too many tokens (at most {MAX_TOKENS})", 409)
        if sum(t.user == user for t in self.tokens.values()) >= MAX_USER_TOKENS:
            self.purge(now)
            if sum(t.user == user for t in self.tokens.values()) >= MAX_USER_TOKENS:
                raise errors.HttpError(f"User '{user}' has too many tokens (at most"
                                       f" {MAX_USER_TOKENS}): revoke some first", 409)
        while True:
            token_id = self._randhex(8)
            if token_id not in self.tokens:
                break
        secret = self._randbits(32)
        token = Token(token_id, user, role, hash_secret(secret), now, expires, comment)
        self.tokens[token_id] = token
        return token, f"{PREFIX}_{token_id}_{secret}"

    def verify(self, text: str, now: float) -> Token | None:
        """The live token ``text`` is, or None (malformed, unknown, wrong secret, expired)."""
        parts = split_token(text)
        if parts is None:
            return None
        token_id, secret = parts
        token = self.tokens.get(token_id)
        expected = token.digest if token is not None else _DUMMY_DIGEST
        ok = hmac.compare_digest(expected.encode(), hash_secret(secret).encode())
        if not ok or token is None or token.expired(now):
            return None
        return token

    def revoke(self, token_id: str) -> Token | None:
        """Remove a token; the removed one, or None when there was none."""
        if not _ID_RE.fullmatch(token_id):
            return None
        return self.tokens.pop(token_id, None)

    def purge(self, now: float) -> int:
        """Drop the expired tokens; how many."""
        dead = [t.id for t in self.tokens.values() if t.expired(now)]
        for token_id in dead:
            del self.tokens[token_id]
        return len(dead)

    def dumps(self) -> str:
        """The file's text."""
        return serializer.dumps({"version": _FORMAT, "tokens": [
            t.record() for t in sorted(self.tokens.values(), key=lambda t: t.id)]})


def loads(text: str) -> dict[str, Token]:
    """The tokens of a file's text; raises :class:`errors.ConfigurationError`."""
    if not text.strip():
        return {}
    try:
        data = serializer.loads(text)
        if not isinstance(data, dict) or data.get("version") != _FORMAT:
            raise ValueError("unknown format")
        out: dict[str, Token] = {}
        for rec in data["tokens"]:
            role = parse_role(rec["role"])
            if role is None or not _ID_RE.fullmatch(rec["id"]):
                raise ValueError(f"bad token record {rec.get('id')!r}")
            expires = rec.get("expires")
            out[rec["id"]] = Token(str(rec["id"]), str(rec["user"]), role, str(rec["digest"]),
                                   float(rec["created"]),
                                   None if expires is None else float(expires),
                                   str(rec.get("comment") or ""))
        return out
    except (errors.SerializationError, ValueError, KeyError, TypeError) as exc:
        raise errors.ConfigurationError(f"invalid tokens file: {exc}") from exc


class TokenService(Protocol):
    """The tokens as the ``/2/tokens`` rows see them (the server's persistent table)."""

    def create(self, user: str, role: Role, *, expires: float | None,
               comment: str) -> tuple[Token, str]: ...
    def list(self) -> list[Token]: ...
    def get(self, token_id: str) -> Token | None: ...
    def revoke(self, token_id: str) -> Token | None: ...
    def now(self) -> float: ...
