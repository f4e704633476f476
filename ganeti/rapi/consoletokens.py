"""Console tokens: short-lived, single-use tickets that open one instance's console (pure).

A browser cannot send an ``Authorization`` or ``X-CSRF-Token`` header with
a WebSocket, so the web console's consoles (serial, VNC) open in two steps
(doc/rapi.md, "Consoles"): an authenticated write,
``POST /2/instances/[name]/console/token[?kind=vnc]``, gets a token from
:meth:`ConsoleTokens.issue`, and the WebSocket request
(``GET /2/instances/[name]/console/websocket?token=...``) spends it with
:meth:`ConsoleTokens.redeem`.  A token

* opens the console of the instance it was made for and no other (spent
  on another's path it is refused, and gone: a misused token is burnt);
* opens one kind of console (:data:`KINDS`: the serial console or VNC),
  the one it was made for: a serial token does not open VNC, nor the
  other way round (refused, and burnt);
* works once: the first redeem removes it, whatever its outcome;
* expires :data:`TOKEN_TTL` seconds after it was made (the clock is
  passed in);
* carries the check of the credentials that made it (``recheck``), which
  the broker runs again while the console is open.

Only the SHA-256 of a token is kept, and at most :data:`MAX_TOKENS` live
ones (the expired are dropped as new ones are made; beyond it, a 503).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable

from ganeti import errors

__all__ = ["TOKEN_TTL", "MAX_TOKENS", "KIND_SERIAL", "KIND_VNC", "KINDS", "Grant", "ConsoleOpen", "ConsoleTokens", "redact"]

#: seconds a console token stays valid
TOKEN_TTL = 30.0
#: live tokens held at most
MAX_TOKENS = 1024
#: the consoles a token opens: the serial console (a byte stream) and VNC (RFB)
KIND_SERIAL = "serial"
KIND_VNC = "vnc"
KINDS = (KIND_SERIAL, KIND_VNC)


@dataclasses.dataclass(frozen=True)
class Grant:
    """What a spent token allows: ``user`` may open ``instance``'s console of
    ``kind`` (:data:`KINDS`) while ``recheck()`` (the credentials that made it,
    checked again) returns True."""

    instance: str
    user: str
    recheck: Callable[[], bool]
    kind: str = KIND_SERIAL


@dataclasses.dataclass(frozen=True)
class ConsoleOpen:
    """A WebSocket request for ``instance``'s console with ``token`` (the server
    checks the upgrade, spends the token and brokers the console): where the
    instance runs (its primary ``node`` at ``address``), under which
    ``hypervisor``, whether it runs, and which console (``kind``, one of
    :data:`KINDS`)."""

    instance: str
    token: str | None
    node: str = ""
    address: str = ""
    hypervisor: str = ""
    running: bool = False
    kind: str = KIND_SERIAL


#: a console token in a request line: never written to the access log
_TOKEN_PARAM = re.compile(r"([?&]token=)[^&\s]*")


def redact(request_line: str) -> str:
    """``request_line`` with the value of a ``token`` query parameter (a
    console token) replaced by ``-``, for the access log."""
    if "token=" not in request_line:      # nearly every request: no regex pass
        return request_line
    return _TOKEN_PARAM.sub(r"\1-", request_line)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


class ConsoleTokens:
    """The live console tokens of one RAPI daemon (in memory, thread safe)."""

    def __init__(self, *, ttl: float = TOKEN_TTL, max_tokens: int = MAX_TOKENS,
                 clock: Callable[[], float] = time.monotonic,
                 random: Callable[[int], str] = secrets.token_urlsafe) -> None:
        self.ttl = ttl
        self.max_tokens = max_tokens
        self._clock = clock
        self._random = random
        self._lock = threading.Lock()
        self._live: dict[bytes, tuple[float, Grant]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)

    def issue(self, grant: Grant) -> tuple[str, float]:
        """A new token for ``grant`` and its lifetime in seconds.

        Raises :class:`errors.HttpError` 503 when :data:`MAX_TOKENS` are live.
        """
        token = self._random(32)
        now = self._clock()
        with self._lock:
            for key in [k for k, (end, _) in self._live.items() if end <= now]:
                del self._live[key]
            if len(self._live) >= self.max_tokens:
                raise errors.HttpError("Too many console tokens waiting to be used;"
                                       " try again later", 503)
            self._live[_digest(token)] = (now + self.ttl, grant)
        return token, self.ttl

    def redeem(self, token: str | None, instance: str, kind: str = KIND_SERIAL) -> Grant:
        """Spend ``token`` on ``instance``'s console of ``kind``: its :class:`Grant`.

        Raises :class:`errors.HttpError` 403 for a missing, unknown, used or
        expired token and for one made for another instance or another kind
        of console (spent all the same).
        """
        if not token:
            raise errors.HttpError("A console needs a token (POST .../console/token)", 403)
        with self._lock:
            entry = self._live.pop(_digest(token), None)
        if entry is None:
            raise errors.HttpError("Unknown or already used console token", 403)
        end, grant = entry
        if self._clock() >= end:
            raise errors.HttpError("Expired console token", 403)
        if grant.instance != instance:
            raise errors.HttpError(f"This console token is for another instance, not"
                                   f" {instance[:40]!r}", 403)
        if grant.kind != kind:
            raise errors.HttpError(f"This console token is for the {grant.kind} console,"
                                   f" not {kind[:10]!r}", 403)
        return grant
