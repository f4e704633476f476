"""JSON in and out, in one place: plain data, dataclasses, signed messages.

Every JSON document the project reads or writes goes through this module:
``config.data``, job files, LUXI messages, node RPC bodies, the node join
payload, opcode files and the virtual cluster's state file.

* :func:`dumps` / :func:`dumps_bytes` / :func:`loads`: JSON text <-> data.
  On the way out, dataclasses become objects of their public fields,
  tuples and sets become lists and :class:`~ganeti.private.Private` values
  the text ``"<redacted>"``; :func:`loads` gives plain data.
* :func:`to_data` / :func:`from_data`: dataclass instances <-> plain data,
  driven by the dataclasses' type annotations (no ``to_dict`` methods).
* :class:`FragmentCache`: ``config.data`` re-encoded reusing the JSON of
  unchanged objects.
* :func:`dumps_signed` / :func:`loads_signed`: an HMAC-signed envelope
  ``{"msg": <json text>, "salt": <str>, "hmac": <hex>}``.

The format is strict JSON (RFC 8259) written compactly: no spaces, ASCII
only (other characters as ``\\uXXXX`` escapes), keys in insertion order.
``NaN`` and the infinities are refused in both directions (also numbers
too large for a float, such as ``1e400``, which would decode as infinity),
as is anything else that cannot be encoded or decoded:
:class:`errors.SerializationError`.  Input from other parties (LUXI
requests, node RPC requests) is decoded with ``valid_unicode=True``, which
also refuses strings holding lone surrogates (``"\\ud800"``: text no UTF-8
encoder can write); stored files are read without it, so that data
accepted before stays readable.

Speed trick, fenced here (figures: ``doc/dependencies.md``, measured by
``tools/bench/bench_json.py``): the codec drives ``_json``, the C
accelerator behind the standard :mod:`json` (part of every CPython),
directly.  That is the same C
encoder and scanner :func:`json.dumps` and :func:`json.loads` use, without
importing :mod:`json`, which imports :mod:`re` and :mod:`enum` and costs a
``gnt-*`` command more than a quarter of its run time.  For the same reason
this module imports nothing heavy when it is loaded: :mod:`dataclasses`
and :mod:`typing` where dataclasses are handled (a program that has
dataclass instances has loaded them already), :mod:`hmac` where messages
are signed, :mod:`json` only for ``pretty=True``.
"""

from __future__ import annotations

from _json import encode_basestring_ascii as _c_quote
from _json import make_encoder as _c_make_encoder
from _json import make_scanner as _c_make_scanner

from ganeti import errors
from ganeti.private import REDACTED, Private

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")
    _Conv = Callable[[Any, str], Any]

__all__ = ["dumps", "dumps_bytes", "loads", "to_data", "from_data",
           "dumps_signed", "loads_signed", "FragmentCache", "Encoded", "dumps_spliced"]

_WHITESPACE = " \t\n\r"
_SCALARS = (str, int, float, bool, type(None))

# public field names per dataclass type (None: not a dataclass)
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _dc_fields(cls: type) -> tuple[str, ...] | None:
    """Public field names of a dataclass type, or None for other types."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    names = None
    if hasattr(cls, "__dataclass_fields__"):
        import dataclasses  # already loaded: cls is a dataclass
        if dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
    _FIELDS[cls] = names
    return names


def _default(obj: Any) -> Any:
    """What the encoder calls for a value that is not plain JSON data."""
    if isinstance(obj, Private):
        return REDACTED
    names = _dc_fields(type(obj))
    if names is not None:
        return {n: getattr(obj, n) for n in names}
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


# --- encoding -------------------------------------------------------------------

def _encode(data: Any) -> str:
    """Compact strict JSON text of ``data``; raises SerializationError."""
    try:
        # arguments: markers, default, quote, indent, key and item separators,
        # sort_keys, skipkeys, allow_nan.  No markers dict (None): a circular
        # structure ends in a RecursionError instead of a "circular reference"
        # ValueError, which costs every container an id() lookup (25 % of the
        # time of a big query answer; tools/bench/bench_json.py)
        encode = _c_make_encoder(None, _default, _c_quote, None, ":", ",", False, False, False)
        return "".join(encode(data, 0))
    except (TypeError, ValueError, RecursionError) as exc:
        raise errors.SerializationError(f"Cannot encode as JSON: {exc}") from exc


def dumps(data: Any, *, pretty: bool = False) -> str:
    """Encode ``data`` (dataclasses included) as JSON text.

    ``pretty`` indents by two and sorts keys, for files people read.
    Raises :class:`errors.SerializationError` for values JSON cannot hold
    (objects of other types, NaN, infinities, circular structures).
    """
    if not pretty:
        return _encode(data)
    import json  # the C accelerator cannot indent
    try:
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=_default)
    except (TypeError, ValueError, RecursionError) as exc:
        raise errors.SerializationError(f"Cannot encode as JSON: {exc}") from exc


def dumps_bytes(data: Any, *, pretty: bool = False) -> bytes:
    """Like :func:`dumps`, as UTF-8 bytes."""
    return dumps(data, pretty=pretty).encode("utf-8")


class Encoded:
    """JSON text made by this module earlier, to be spliced into a document
    verbatim by :func:`dumps_spliced` (a cached list of query rows, say)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def dumps_spliced(data: Any) -> str:
    """Like :func:`dumps`, with :class:`Encoded` values written as their text.

    An :class:`Encoded` may stand for ``data`` itself or for a value in its
    dicts (dicts inside dicts, string keys); everything else is encoded as
    :func:`dumps` does it, so the result is byte for byte what :func:`dumps`
    gives for the decoded document.
    """
    if isinstance(data, Encoded):
        return data.text
    if type(data) is not dict:
        return _encode(data)
    parts = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise errors.SerializationError(f"dumps_spliced: key {key!r} is not a string")
        parts.append(f"{_c_quote(key)}:{dumps_spliced(value)}")
    return "{" + ",".join(parts) + "}"


# --- decoding -------------------------------------------------------------------

def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:   # inf - inf is nan; the scanner never gives nan itself
        raise ValueError(f"number {text} is out of range")
    return value


class _ScanContext:
    """The decoder settings ``_json.make_scanner`` reads (strict JSON, plain types)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(_finite_float)
    parse_int = int
    parse_constant = staticmethod(_refuse_constant)


# (typeshed types the context as the scanner class; any object with the attributes will do)
_SCAN = _c_make_scanner(_ScanContext())  # type: ignore[arg-type]


def _skip_whitespace(text: str, idx: int) -> int:
    end = len(text)
    while idx < end and text[idx] in _WHITESPACE:
        idx += 1
    return idx


def _find_lone_surrogate(data: Any) -> str | None:
    """The first string (key or value) in ``data`` holding a lone surrogate, or None."""
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
    return None


def loads(text: str | bytes, *, valid_unicode: bool = False) -> Any:
    """Decode one JSON document (UTF-8 when given bytes).

    Raises :class:`errors.SerializationError` on bad input, including
    ``NaN``, ``Infinity``, numbers out of the float range and data after
    the document; with ``valid_unicode`` also strings holding lone
    surrogates (for input from other parties, see the module docstring).
    """
    check = False
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.SerializationError(f"Invalid UTF-8 in JSON: {exc}") from exc
        # valid UTF-8 holds no surrogates: only \uXXXX escapes can make them
        check = valid_unicode and "\\u" in text
    elif valid_unicode:
        check = "\\u" in text or not text.isascii()
    if check:
        data = loads(text)
        bad = _find_lone_surrogate(data)
        if bad is not None:
            shown = bad[:60].encode("ascii", "backslashreplace").decode("ascii")
            raise errors.SerializationError(
                f"Invalid JSON: string '{shown}' holds a lone surrogate (not valid Unicode)")
        return data
    try:
        idx = _skip_whitespace(text, 0)
        try:
            try:
                data, end = _SCAN(text, idx)
            except SystemError:
                # The scanner builds most of its errors from json.decoder, which
                # it looks up in sys.modules without importing it (CPython 3.11):
                # before anything imported json, bad input gives a SystemError.
                # Bad input only: import it and scan again for the real error.
                import json.decoder  # noqa: F401
                data, end = _SCAN(text, idx)
        except StopIteration as exc:
            raise ValueError(f"Expecting value at character {exc.value}") from None
        if text[end:].strip(_WHITESPACE):
            raise ValueError(f"Extra data at character {_skip_whitespace(text, end)}")
        return data
    except (ValueError, RecursionError) as exc:
        raise errors.SerializationError(f"Invalid JSON: {exc}") from exc


# --- dataclasses <-> plain data -------------------------------------------------

def to_data(obj: Any) -> Any:
    """Convert dataclasses (recursively, also inside lists/dicts) to plain data.

    Tuples and sets become lists; everything else is returned as is.  (The
    encoder does the same by itself; this is for plain data in memory.)
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


# per dataclass type: init field name -> converter of its value (None: as is)
_PLANS: dict[type, dict[str, _Conv | None]] = {}


def _plan(cls: type) -> dict[str, _Conv | None]:
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    import dataclasses
    import typing
    hints = typing.get_type_hints(cls)
    plan = {f.name: _converter(hints.get(f.name, typing.Any))
            for f in dataclasses.fields(cls) if f.init}
    _PLANS[cls] = plan
    return plan


def _type_name(value: Any) -> str:
    return type(value).__name__


def _converter(tp: Any) -> _Conv | None:
    """The function turning decoded data into a ``tp`` value (None: nothing to do).

    Built once per annotation: dataclasses are built, ints become floats
    where a float is declared, containers are checked and converted
    element-wise; ``None`` passes everywhere; other values are kept.
    """
    import dataclasses
    import types
    import typing
    if tp is typing.Any:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is None:
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            def build(value: Any, where: str) -> Any:
                return None if value is None else from_data(tp, value, where=where)
            return build
        if tp is float:
            def to_float(value: Any, where: str) -> Any:
                if isinstance(value, int) and not isinstance(value, bool):
                    return float(value)
                return value
            return to_float
        return None
    if origin in (typing.Union, types.UnionType):
        arms = [a for a in args if a is not type(None)]
        if len(arms) == 1:
            return _converter(arms[0])
        classes = [a for a in arms if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if not classes:
            return None

        def first_dataclass(value: Any, where: str) -> Any:
            if isinstance(value, dict):
                return from_data(classes[0], value, where=where)
            return value
        return first_dataclass
    if origin in (list, set, frozenset, tuple):
        return _sequence_converter(origin, args)
    if origin is dict:
        inner = _converter(args[1]) if len(args) == 2 else None

        def to_dict(value: Any, where: str) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise errors.SerializationError(f"{where}: expected an object,"
                                                f" got {_type_name(value)}")
            if inner is None:
                return dict(value)
            return {k: inner(v, f"{where}.{k}") for k, v in value.items()}
        return to_dict
    return None


def _sequence_converter(origin: type, args: tuple[Any, ...]) -> _Conv:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, (list, tuple)):
            raise errors.SerializationError(f"{where}: expected a list, got {_type_name(value)}")

    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            each = _converter(args[0])
            arms = None
        else:
            each = None
            arms = [_converter(a) for a in args]

        def to_tuple(value: Any, where: str) -> Any:
            if value is None:
                return None
            check(value, where)
            if arms is not None and arms and len(arms) == len(value):
                return tuple(v if c is None else c(v, where) for c, v in zip(arms, value))
            if each is not None:
                return tuple(each(v, where) for v in value)
            return tuple(value)
        return to_tuple
    inner = _converter(args[0]) if args else None

    def to_collection(value: Any, where: str) -> Any:
        if value is None:
            return None
        check(value, where)
        items = (list(value) if inner is None
                 else [inner(v, f"{where}[{i}]") for i, v in enumerate(value)])
        return items if origin is list else origin(items)
    return to_collection


def from_data(cls: type[T], data: Any, *, where: str | None = None,
              strict: bool = False) -> T:
    """Build a ``cls`` dataclass from plain data, following its annotations.

    Missing keys take the field defaults.  Unknown keys are ignored unless
    ``strict`` is true, in which case they raise
    :class:`errors.SerializationError` (as does data of the wrong shape).
    """
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise errors.SerializationError(f"{where}: expected an object, got {_type_name(data)}")
    plan = _plan(cls)
    if strict:
        unknown = set(data) - set(plan)
        if unknown:
            raise errors.SerializationError(f"{where}: unknown keys {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in plan:
            conv = plan[key]
            kwargs[key] = value if conv is None else conv(value, f"{where}.{key}")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise errors.SerializationError(f"{where}: {exc}") from exc


# --- config.data fragments ------------------------------------------------------

class _StoreText:
    """The encoded entries of one store, in its order, with what they were made from."""

    __slots__ = ("keys", "objs", "serials", "mtimes", "parts")

    def __init__(self, keys: list[str], objs: list[Any], serials: list[int],
                 mtimes: list[float], parts: list[bytes]) -> None:
        self.keys = keys
        self.objs = objs
        self.serials = serials
        self.mtimes = mtimes
        self.parts = parts       # b'"key":{...},' of each entry (no comma after the last)


def _false_positions(flags: list[bool], found: set[int]) -> None:
    """Add the indexes of the False entries of ``flags`` to ``found`` (the search runs in C)."""
    pos = -1
    while True:
        try:
            pos = flags.index(False, pos + 1)
        except ValueError:
            return
        found.add(pos)


class FragmentCache:
    """Encode a dataclass like :func:`dumps_bytes`, reusing per-object JSON.

    ``fields`` name dict-of-dataclass fields of the root (e.g. the
    ``instances`` and ``disks`` of ``ConfigData``).  The JSON text of each
    value in those dicts is kept between calls and reused while the value is
    the *same object* with the same ``serial_no`` and ``mtime``: whoever
    changes such an object must bump those (``ConfigWriter`` does, in
    ``update``).  The result is byte-identical to ``dumps_bytes(root)``.
    Not thread-safe: the caller serialises calls.

    While a store keeps its keys in the same order (no entry added or
    removed, the common case of one changed instance), the entries to
    encode again are found by comparing lists of the values, serials and
    mtimes in C, and the document is one join of the kept bytes (one
    6 MB buffer: every big buffer is fresh memory in the master, see
    ``tuning.fix_mmap_threshold``, and costs page faults) instead
    of a Python loop over every entry and three copies of the text
    (doc/scale.md has the figures).
    """

    def __init__(self, fields: tuple[str, ...]) -> None:
        self._fields = fields
        self._stores: dict[str, _StoreText] = {}

    def clear(self) -> None:
        """Forget every cached fragment."""
        self._stores.clear()

    def _encode_store(self, name: str, store: dict[str, Any]) -> list[bytes]:
        """The pieces of ``store``'s JSON object, braces excluded."""
        from operator import attrgetter, eq, is_
        keys = list(store)
        objs = list(store.values())
        serials = list(map(attrgetter("serial_no"), objs))
        mtimes = list(map(attrgetter("mtime"), objs))
        old = self._stores.get(name)
        if old is not None and old.keys == keys:
            stale: set[int] = set()
            _false_positions(list(map(is_, objs, old.objs)), stale)
            _false_positions(list(map(eq, serials, old.serials)), stale)
            _false_positions(list(map(eq, mtimes, old.mtimes)), stale)
            parts = old.parts
            if stale:
                parts = list(parts)
                last = len(parts) - 1
                for pos in stale:
                    text = f"{_encode(keys[pos])}:{_encode(objs[pos])}"
                    parts[pos] = (text if pos == last else text + ",").encode("utf-8")
        else:
            known: dict[str, tuple[Any, int, float, bytes]] = {}
            if old is not None:
                known = dict(zip(old.keys, zip(old.objs, old.serials, old.mtimes, old.parts)))
            parts = []
            for key, obj, serial, mtime in zip(keys, objs, serials, mtimes):
                hit = known.get(key)
                if hit is not None and hit[0] is obj and hit[1] == serial and hit[2] == mtime:
                    part = hit[3].rstrip(b",")      # an entry ends in '}': only the comma goes
                else:
                    part = f"{_encode(key)}:{_encode(obj)}".encode("utf-8")
                parts.append(part + b",")
            if parts:
                parts[-1] = parts[-1][:-1]
        self._stores[name] = _StoreText(keys, objs, serials, mtimes, parts)
        return parts

    def dumps_bytes(self, root: Any) -> bytes:
        """The compact JSON of dataclass ``root`` as UTF-8 bytes."""
        names = _dc_fields(type(root))
        if names is None:
            raise errors.SerializationError(f"{type(root).__name__} is not a dataclass")
        pieces = [b"{"]
        for name in names:
            value = getattr(root, name)
            if len(pieces) > 1:
                pieces.append(b",")
            pieces.append(f"{_encode(name)}:".encode("utf-8"))
            if name in self._fields and type(value) is dict:
                pieces.append(b"{")
                pieces.extend(self._encode_store(name, value))
                pieces.append(b"}")
            else:
                pieces.append(_encode(value).encode("utf-8"))
        pieces.append(b"}")
        return b"".join(pieces)


# --- signed messages ------------------------------------------------------------

def _sign(key: bytes, text: str, salt: str) -> str:
    import hashlib
    import hmac
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
    import hmac
    env = loads(text)
    if not isinstance(env, dict) or not {"msg", "salt", "hmac"} <= set(env):
        raise errors.SerializationError("Signed message lacks msg/salt/hmac")
    msg, salt, mac = env["msg"], env["salt"], env["hmac"]
    if not all(isinstance(x, str) for x in (msg, salt, mac)):
        raise errors.SerializationError("Signed message fields must be strings")
    if not hmac.compare_digest(_sign(key, msg, salt), mac):
        raise errors.SerializationError("Invalid signature on signed message")
    return loads(msg), salt
