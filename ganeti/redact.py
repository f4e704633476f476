"""Scrubbing secret values out of text: error texts, log lines, job results.

A private or secret value (doc/protocols/opcodes.md, "Private parameters")
is never *serialised* in clear (:mod:`ganeti.private`), but free text
written by others can still carry it: an OS script that refuses a value
prints it, and its last log lines become an error message.  A
:class:`Redactor` knows the secret values of one daemon and replaces each
occurrence in a text (:meth:`Redactor.scrub`) or in JSON-like data
(:meth:`Redactor.scrub_data`) with :data:`~ganeti.private.REDACTED`.

The values come from two kinds of places:

* *held* values: :meth:`Redactor.hold` adds them for as long as the
  ``with`` block runs (counted, so two holders of one value are fine); the
  master holds a job's private values from submission until it is final,
  a node daemon holds a request's private values while it runs;
* *sources* (:class:`VersionedSource`): the values of the moment, computed
  again only when their version changes (the master's source is the
  configuration, versioned by its serial number: every instance's private
  OS parameters).  The compiled pattern is cached until the held values or
  a source's version change, so scrubbing a text costs one regular
  expression search.

Policy for short values: a value whose text has fewer than
:data:`MIN_SCRUB_LENGTH` characters is not scrubbed from free text (a
one-character secret ``0`` would otherwise mangle every number of every
message); it is still never serialised in clear.  Besides the value
itself, its JSON-escaped and ``repr``-escaped forms are scrubbed (a
message quoting it with ``!r`` escapes backslashes and quotes).

Pure logic and a lock: no files, no sockets (the daemons' log filter is
:class:`ganeti.server.logsetup.RedactingFilter`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from ganeti.private import REDACTED, Private

__all__ = ["MIN_SCRUB_LENGTH", "PRIVATE_KEYS", "secret_texts", "private_values",
           "values_under_keys", "scrub_text", "scrub_data", "Redactor", "VersionedSource"]

#: Values whose text is shorter than this are not scrubbed from free text.
MIN_SCRUB_LENGTH = 4

#: Keys whose dict values are private wherever they appear in RPC arguments
#: (an instance's ``osparams_private``; the ``osparams_secret`` of one
#: operation), see :func:`values_under_keys`.
PRIVATE_KEYS = frozenset({"osparams_private", "osparams_secret"})

_MAX_DEPTH = 64


def secret_texts(value: Any) -> set[str]:
    """The texts that show ``value``: itself, JSON- and repr-escaped forms.

    ``value`` may be a :class:`~ganeti.private.Private`; None, booleans and
    texts shorter than :data:`MIN_SCRUB_LENGTH` give nothing.
    """
    if isinstance(value, Private):
        value = value.get()
    if value is None or isinstance(value, bool):
        return set()
    return set(_forms(value if isinstance(value, str) else str(value)))


@functools.lru_cache(maxsize=65536)
def _forms(text: str) -> frozenset[str]:
    # memoised: the config source asks again for every value at each config change
    forms = {text, json.dumps(text)[1:-1], repr(text)[1:-1]}
    return frozenset(form for form in forms
                     if len(form) >= MIN_SCRUB_LENGTH and form != REDACTED)


#: values that hold no Private: skipped without a call (every opcode field is searched)
_LEAVES = frozenset({str, int, float, bool, type(None)})


def private_values(obj: Any, _depth: int = 0) -> list[Any]:
    """Every :class:`~ganeti.private.Private` value inside ``obj``, unwrapped.

    ``obj`` may be an opcode (its dataclass fields are searched), a dict, a
    list or a tuple, nested.
    """
    if _depth > _MAX_DEPTH:
        return []
    if isinstance(obj, Private):
        return [obj.get()]
    if isinstance(obj, Mapping):
        items: Iterable[Any] = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    elif hasattr(obj, "__dataclass_fields__"):
        items = [getattr(obj, name, None) for name in obj.__dataclass_fields__]
    else:
        return []
    return [found for item in items if type(item) not in _LEAVES
            for found in private_values(item, _depth + 1)]


def values_under_keys(data: Any, keys: Collection[str] = PRIVATE_KEYS,
                      _depth: int = 0) -> list[Any]:
    """The values of every dict found under one of ``keys``, anywhere in ``data``.

    This is how a node daemon finds the private values in a request's
    arguments (e.g. ``instance["osparams_private"]``).
    """
    if _depth > _MAX_DEPTH:
        return []
    found: list[Any] = []
    if isinstance(data, dict):
        for key, item in data.items():
            if key in keys and isinstance(item, dict):
                found.extend(v for v in item.values() if not isinstance(v, (dict, list)))
            else:
                found.extend(values_under_keys(item, keys, _depth + 1))
    elif isinstance(data, (list, tuple)):
        for item in data:
            found.extend(values_under_keys(item, keys, _depth + 1))
    return found


def _pattern(texts: Collection[str]) -> re.Pattern[str] | None:
    if not texts:
        return None
    # longest first: a secret containing another is replaced as a whole
    return re.compile("|".join(re.escape(t) for t in sorted(texts, key=lambda t: (-len(t), t))))


def scrub_text(text: str, texts: Collection[str]) -> str:
    """``text`` with every occurrence of each of ``texts`` replaced by the marker."""
    pattern = _pattern(texts)
    return text if pattern is None else pattern.sub(REDACTED, text)


def _scrub_with(data: Any, pattern: re.Pattern[str], depth: int = 0) -> Any:
    if isinstance(data, str):
        return pattern.sub(REDACTED, data)
    if depth > _MAX_DEPTH:
        return data
    if isinstance(data, dict):
        return {_scrub_with(k, pattern, depth + 1): _scrub_with(v, pattern, depth + 1)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_scrub_with(v, pattern, depth + 1) for v in data]
    if isinstance(data, tuple):
        return tuple(_scrub_with(v, pattern, depth + 1) for v in data)
    return data


def scrub_data(data: Any, texts: Collection[str]) -> Any:
    """A copy of JSON-like ``data`` with :func:`scrub_text` applied to every string
    (keys too); other values are kept as they are."""
    pattern = _pattern(texts)
    return data if pattern is None else _scrub_with(data, pattern)


class VersionedSource:
    """Secret values recomputed only when ``version()`` changes.

    ``values()`` returns the raw values (any scalars); :meth:`current` turns
    them into texts with :func:`secret_texts`.  Safe to call from several
    threads.
    """

    def __init__(self, version: Callable[[], Any], values: Callable[[], Iterable[Any]]) -> None:
        self._version = version
        self._values = values
        self._cached: tuple[Any, frozenset[str]] | None = None

    def version(self) -> Any:
        """The version of the values now (cheap)."""
        return self._version()

    def current(self) -> tuple[Any, frozenset[str]]:
        """``(version, texts)`` of the moment."""
        version = self._version()
        cached = self._cached
        if cached is not None and cached[0] == version:
            return cached
        cached = (version, frozenset(t for v in self._values() for t in secret_texts(v)))
        self._cached = cached     # one attribute write: atomic
        return cached


class Redactor:
    """The secret values a daemon knows, and scrubbing with them.

    Thread-safe.  The compiled pattern is cached until the values change.
    """

    def __init__(self, sources: Iterable[VersionedSource] = ()) -> None:
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()
        self._held_version = 0
        self._sources = list(sources)
        # (key, texts, pattern): the key is the held version and the sources' versions
        self._cache: tuple[Any, frozenset[str], re.Pattern[str] | None] = (
            None, frozenset(), None)

    def add_source(self, source: VersionedSource) -> None:
        """Also scrub the texts of ``source`` (its version is asked on every scrub)."""
        with self._lock:
            self._sources.append(source)
            self._held_version += 1

    def add(self, values: Iterable[Any]) -> list[str]:
        """Hold ``values`` until :meth:`release` with the returned texts."""
        texts = [t for v in values for t in secret_texts(v)]
        if texts:
            with self._lock:
                self._held.update(texts)
                self._held_version += 1
        return texts

    def release(self, texts: Iterable[str]) -> None:
        """Stop holding texts returned by :meth:`add` (counted)."""
        texts = list(texts)
        if not texts:
            return
        with self._lock:
            self._held.subtract(texts)
            for text in [t for t, n in self._held.items() if n <= 0]:
                del self._held[text]
            self._held_version += 1

    @contextlib.contextmanager
    def hold(self, values: Iterable[Any]) -> Iterator[None]:
        """Scrub ``values`` too while the ``with`` block runs."""
        texts = self.add(values)
        try:
            yield
        finally:
            if texts:
                self.release(texts)

    def texts(self) -> frozenset[str]:
        """Every text scrubbed at this moment."""
        with self._lock:
            held = set(self._held)
            sources = list(self._sources)
        for source in sources:
            held.update(source.current()[1])
        return frozenset(held)

    def _current(self) -> re.Pattern[str] | None:
        with self._lock:
            sources = list(self._sources)
            held_version = self._held_version
        key = (held_version, tuple(source.version() for source in sources))
        cache = self._cache
        if cache[0] == key:
            return cache[2]
        texts = self.texts()
        # compiling is the costly part (0.2-0.3 ms a value): a new version
        # with the same values (most config changes) keeps the pattern
        pattern = cache[2] if texts == cache[1] else _pattern(texts)
        # a change between reading the key and the texts is caught by the next
        # key (the held version only grows; a source's version moves on)
        self._cache = (key, texts, pattern)
        return pattern

    def scrub(self, text: str) -> str:
        """``text`` without any secret value (each replaced by the marker)."""
        pattern = self._current()
        return text if pattern is None else pattern.sub(REDACTED, text)

    def scrub_data(self, data: Any) -> Any:
        """JSON-like ``data`` with every string scrubbed (see :func:`scrub_data`)."""
        pattern = self._current()
        return data if pattern is None else _scrub_with(data, pattern)
