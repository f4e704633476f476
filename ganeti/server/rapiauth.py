"""The RAPI daemon's credential state: the tokens file and the session store (I/O, locks).

:class:`TokenFile` is the persistent :class:`ganeti.rapi.tokens.TokenService`
the ``/2/tokens`` rows use: the table in memory under a lock, written
through to ``var/lib/ganeti/rapi/tokens`` (atomically, mode 0600, only
digests) on every change before the change is answered, and reloaded
when the file changes on disk (a cluster file upload, SIGHUP).  A revoked
token is gone from memory when the revocation is answered.

A reload reads the file outside the lock, so a change may land while it
parses: every change bumps a generation under the lock, and a reload is
applied only when no change happened since it started (the change's own
write is newer than what the reload read).  A reload of the very file this
process last wrote (same inode, mtime and size: the inotify event of our
own write) is skipped.
:class:`Sessions` is the locked :class:`ganeti.rapi.sessions.SessionStore`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from ganeti import errors
from ganeti.rapi import sessions, tokens
from ganeti.rapi.roles import Role
from ganeti.utils import localfile

__all__ = ["TokenFile", "Sessions"]

logger = logging.getLogger(__name__)


class TokenFile:
    """The API tokens, kept in memory and on disk."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._table = tokens.TokenTable()
        #: ids revoked in memory whose removal from the file failed: a reload skips them
        self._revoked: set[str] = set()
        #: bumped under the lock by every change of the table
        self._generation = 0
        #: (st_ino, st_mtime_ns, st_size) of the file this process last wrote
        self._written: tuple[int, int, int] | None = None
        self.reload()

    def now(self) -> float:
        return self._clock()

    def reload(self) -> bool:
        """Read the file again; False (and a log line, the table kept) when it is broken.

        True without a change when the file is the one this process last wrote,
        or when a token changed while the file was read (that change's write is
        newer than what was read).
        """
        with self._lock:
            generation = self._generation
            written = self._written
        if written is not None and _identity(self.path) == written:
            return True
        try:
            data = localfile.read_local(self.path, what="RAPI tokens file")
            loaded = tokens.loads(data.decode("utf-8") if data else "")
        except (OSError, UnicodeDecodeError, errors.GanetiError) as exc:
            logger.error("Cannot load the RAPI tokens file %s: %s; keeping the previous"
                         " tokens", self.path, exc)
            return False
        with self._lock:
            if self._generation != generation:
                logger.info("RAPI tokens file %s changed by this daemon while it was"
                            " read; that read is dropped", self.path)
                return True
            self._table.tokens = {k: t for k, t in loaded.items() if k not in self._revoked}
        logger.info("Loaded %d RAPI tokens from %s", len(loaded), self.path)
        return True

    def _save(self) -> None:
        """Write the table (the lock held); the change counts even when the write fails."""
        self._generation += 1
        localfile.write_local_atomic(self.path, self._table.dumps(), mode=0o600,
                                     what="RAPI tokens file")
        self._written = _identity(self.path)

    def create(self, user: str, role: Role, *, expires: float | None,
               comment: str) -> tuple[tokens.Token, str]:
        with self._lock:
            now = self._clock()
            self._table.purge(now)
            token, text = self._table.create(user, role, now, expires=expires,
                                             comment=comment)
            try:
                self._save()
            except OSError as exc:
                del self._table.tokens[token.id]
                raise errors.HttpError(f"The token was not made: the tokens file cannot"
                                       f" be written ({exc})", 503) from exc
        logger.info("RAPI token %s made for user %s (role %s)", token.id, user, role.label)
        return token, text

    def list(self) -> list[tokens.Token]:
        with self._lock:
            return sorted(self._table.tokens.values(), key=lambda t: (t.user, t.created))

    def get(self, token_id: str) -> tokens.Token | None:
        with self._lock:
            return self._table.tokens.get(token_id)

    def revoke(self, token_id: str) -> tokens.Token | None:
        """Remove a token; the removed one, or None when there was none.

        Raises :class:`errors.HttpError` 503 when the file cannot be written:
        the token is revoked in this daemon's memory (and kept out of reloads)
        but still in the file, so a restart or another node would take it.
        """
        failure: OSError | None = None
        with self._lock:
            gone = self._table.revoke(token_id)
            if gone is not None:
                try:
                    self._save()
                except OSError as exc:
                    # still revoked in memory (and kept out of a reload): it stops
                    # working now, and on disk at the next successful save
                    self._revoked.add(gone.id)
                    failure = exc
        if gone is None:
            return None
        if failure is not None:
            logger.error("RAPI token %s of user %s revoked in memory but the tokens file"
                         " was not written: %s", gone.id, gone.user, failure)
            raise errors.HttpError(
                f"Token {gone.id} is revoked in this daemon's memory only: the tokens"
                f" file cannot be written ({failure}); it would work again after a"
                " restart or on another node, revoke it again", 503) from failure
        logger.info("RAPI token %s of user %s revoked", gone.id, gone.user)
        return gone

    def verify(self, text: str) -> tokens.Token | None:
        with self._lock:
            return self._table.verify(text, self._clock())


def _identity(path: str) -> tuple[int, int, int] | None:
    """(st_ino, st_mtime_ns, st_size) of ``path``, None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class Sessions:
    """The web console's sessions, under a lock."""

    def __init__(self, store: sessions.SessionStore | None = None) -> None:
        self._store = sessions.SessionStore() if store is None else store
        self._lock = threading.Lock()

    def create(self, user: str) -> tuple[str, sessions.Session]:
        with self._lock:
            return self._store.create(user)

    def lookup(self, sid: str) -> sessions.Session | None:
        with self._lock:
            return self._store.lookup(sid)

    def drop(self, sid: str) -> bool:
        with self._lock:
            return self._store.drop(sid)
