"""JSON in and out, in one place: plain data, dataclasses, signed messages.

* :func:`dumps` / :func:`loads`: JSON text <-> plain data.
* :func:`to_data` / :func:`from_data`: dataclass instances <-> plain data,
  driven by the dataclasses' type annotations (no ``to_dict`` methods).
* :func:`dumps_signed` / :func:`loads_signed`: an HMAC-signed envelope
  ``{"msg": <json text>, "salt": <str>, "hmac": <hex>}``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import types
import typing
from typing import Any, TypeVar

import simplejson

from ganeti import errors

__all__ = ["dumps", "dumps_bytes", "loads", "to_data", "from_data",
           "dumps_signed", "loads_signed", "FragmentCache"]

T = TypeVar("T")

_ENCODER = simplejson.JSONEncoder(separators=(",", ":"), sort_keys=False)
_PRETTY = simplejson.JSONEncoder(indent=2, sort_keys=True)
_DECODER = simplejson.JSONDecoder()


def dumps(data: Any, *, pretty: bool = False) -> str:
    """Encode plain data (dataclasses are converted first) as JSON text."""
    data = to_data(data)
    return (_PRETTY if pretty else _ENCODER).encode(data)


def dumps_bytes(data: Any, *, pretty: bool = False) -> bytes:
    """Like :func:`dumps`, as UTF-8 bytes."""
    return dumps(data, pretty=pretty).encode("utf-8")


def loads(text: str | bytes) -> Any:
    """Decode JSON text; raises :class:`errors.SerializationError` on bad input."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.SerializationError(f"Invalid UTF-8 in JSON: {exc}") from exc
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise errors.SerializationError(f"Invalid JSON: {exc}") from exc


_SCALARS = (str, int, float, bool, type(None))


@functools.lru_cache(maxsize=None)
def _dc_fields(cls: type) -> tuple[str, ...] | None:
    """Public field names of a dataclass type, or None for other types."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))


def to_data(obj: Any) -> Any:
    """Convert dataclasses (recursively, also inside lists/dicts) to plain data.

    Tuples and sets become lists; everything else is returned as is.
    """
    cls = type(obj)
    if cls in _SCALARS:
        return obj
    if cls is dict:
        return {k: (v if type(v) in _SCALARS else to_data(v)) for k, v in obj.items()}
    if cls is list or cls is tuple or cls is set or cls is frozenset:
        return [v if type(v) in _SCALARS else to_data(v) for v in obj]
    names = _dc_fields(cls)
    if names is not None:
        return {n: to_data(getattr(obj, n)) for n in names}
    if isinstance(obj, dict):
        return {k: to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_data(v) for v in obj]
    return obj


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init)


def _convert(tp: Any, value: Any, where: str) -> Any:
    if value is None or tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is None:
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return from_data(tp, value, where=where)
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        if len(arms) == 1:
            return _convert(arms[0], value, where)
        for arm in arms:
            if isinstance(arm, type) and dataclasses.is_dataclass(arm) and isinstance(value, dict):
                return from_data(arm, value, where=where)
        return value
    if origin in (list, set, frozenset, tuple):
        if not isinstance(value, (list, tuple)):
            raise errors.SerializationError(f"{where}: expected a list, got {type(value).__name__}")
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_convert(args[0], v, where) for v in value)
            if args and len(args) == len(value):
                return tuple(_convert(a, v, where) for a, v in zip(args, value))
            return tuple(value)
        inner = args[0] if args else Any
        items = [_convert(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return origin(items) if origin is not list else items
    if origin is dict:
        if not isinstance(value, dict):
            raise errors.SerializationError(f"{where}: expected an object, got {type(value).__name__}")
        inner = args[1] if len(args) == 2 else Any
        return {k: _convert(inner, v, f"{where}.{k}") for k, v in value.items()}
    return value


def from_data(cls: type[T], data: Any, *, where: str | None = None,
              strict: bool = False) -> T:
    """Build a ``cls`` dataclass from plain data, following its annotations.

    Missing keys take the field defaults.  Unknown keys are ignored unless
    ``strict`` is true, in which case they raise
    :class:`errors.SerializationError` (as does data of the wrong shape).
    """
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise errors.SerializationError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    names = _field_names(cls)
    if strict:
        unknown = set(data) - names
        if unknown:
            raise errors.SerializationError(f"{where}: unknown keys {sorted(unknown)}")
    kwargs = {k: _convert(hints.get(k, Any), v, f"{where}.{k}")
              for k, v in data.items() if k in names}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise errors.SerializationError(f"{where}: {exc}") from exc


class FragmentCache:
    """Encode a dataclass like :func:`dumps_bytes`, reusing per-object JSON.

    ``fields`` name dict-of-dataclass fields of the root (e.g. the
    ``instances`` and ``disks`` of ``ConfigData``).  The JSON text of each
    value in those dicts is kept between calls and reused while the value is
    the *same object* with the same ``serial_no`` and ``mtime``: whoever
    changes such an object must bump those (``ConfigWriter`` does, in
    ``update``).  The result is byte-identical to ``dumps_bytes(root)``.
    Not thread-safe: the caller serialises calls.
    """

    def __init__(self, fields: tuple[str, ...]) -> None:
        self._fields = fields
        self._entries: dict[str, dict[str, tuple[Any, int, float, str]]] = {f: {} for f in fields}

    def clear(self) -> None:
        """Forget every cached fragment."""
        for entries in self._entries.values():
            entries.clear()

    def _encode_store(self, name: str, store: dict[str, Any]) -> str:
        old = self._entries[name]
        new: dict[str, tuple[Any, int, float, str]] = {}
        parts = []
        encode = _ENCODER.encode
        for key, obj in store.items():
            hit = old.get(key)
            if (hit is not None and hit[0] is obj and hit[1] == obj.serial_no
                    and hit[2] == obj.mtime):
                new[key] = hit
                parts.append(hit[3])
            else:
                text = f"{encode(key)}:{encode(to_data(obj))}"
                new[key] = (obj, obj.serial_no, obj.mtime, text)
                parts.append(text)
        self._entries[name] = new
        return "{" + ",".join(parts) + "}"

    def dumps_bytes(self, root: Any) -> bytes:
        """The compact JSON of dataclass ``root`` as UTF-8 bytes."""
        names = _dc_fields(type(root))
        if names is None:
            raise errors.SerializationError(f"{type(root).__name__} is not a dataclass")
        parts = []
        for name in names:
            value = getattr(root, name)
            if name in self._entries and type(value) is dict:
                text = self._encode_store(name, value)
            else:
                text = _ENCODER.encode(to_data(value))
            parts.append(f"{_ENCODER.encode(name)}:{text}")
        return ("{" + ",".join(parts) + "}").encode("utf-8")


def _sign(key: bytes, text: str, salt: str) -> str:
    return hmac.new(key, (salt + text).encode("utf-8"), hashlib.sha1).hexdigest()


def dumps_signed(data: Any, key: bytes, salt: str = "") -> str:
    """Encode ``data`` inside an HMAC-SHA1 signed envelope."""
    text = dumps(data)
    return dumps({"msg": text, "salt": salt, "hmac": _sign(key, text, salt)})


def loads_signed(text: str | bytes, key: bytes) -> tuple[Any, str]:
    """Verify and decode a signed envelope; returns ``(data, salt)``.

    Raises :class:`errors.SerializationError` when the envelope is malformed
    or the signature does not match.
    """
    env = loads(text)
    if not isinstance(env, dict) or not {"msg", "salt", "hmac"} <= set(env):
        raise errors.SerializationError("Signed message lacks msg/salt/hmac")
    msg, salt, mac = env["msg"], env["salt"], env["hmac"]
    if not all(isinstance(x, str) for x in (msg, salt, mac)):
        raise errors.SerializationError("Signed message fields must be strings")
    if not hmac.compare_digest(_sign(key, msg, salt), mac):
        raise errors.SerializationError("Invalid signature on signed message")
    return loads(msg), salt
