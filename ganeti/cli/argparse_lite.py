"""A small command line parser for the ``gnt-*`` verbs, driven by :class:`Option` objects.

Importing and running :mod:`argparse` costs a CLI process 8-14 ms (it pulls
in ``re`` and ``gettext``, builds a parser, and its intermixed parsing runs
the parse twice); every ``gnt-*`` command pays that, so the hot path uses
this parser instead.  It accepts what argparse accepts for our options and
reports errors with argparse's texts:

* long options (``--opt value``, ``--opt=value``, unique prefixes such as
  ``--prio``), short options (``-o value``, ``-ovalue``, ``-o=value``) and
  bundled short flags (``-vvf``, the last one may take a value: ``-fo x``);
* ``--`` ends the options; ``-`` and negative numbers (``-1``, ``-.5``) are
  positional arguments; options and positional arguments may be intermixed;
* actions ``store``, ``store_true``, ``store_false``, ``store_const``,
  ``append``, ``append_const`` and ``count``; ``type`` (``int``, ``float``
  or any converter raising ``ValueError``/``TypeError``), ``choices``,
  ``default`` (string defaults go through ``type`` as in argparse; list
  defaults of ``append`` are copied), ``dest``, ``const``, ``required``;
* ``-h``/``--help`` is reported to the caller (which formats the help).

``nargs="?"`` on a ``store`` option takes its value only inline
(``--plan=json``); ``--plan`` alone gives ``const`` and never swallows the
next argument (argparse would take ``--plan NODE`` as the value ``NODE``).
Anything else (other ``nargs``, custom action classes...) is not supported:
:func:`supports` says so and the caller falls back to argparse.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from ganeti.cli.options import Option

__all__ = ["Namespace", "ParseResult", "OptionTable", "supports", "parse"]

_KWARGS = frozenset(("action", "type", "choices", "default", "dest", "help", "metavar",
                     "const", "required", "nargs"))
_ACTIONS = frozenset(("store", "store_true", "store_false", "store_const", "append",
                      "append_const", "count"))
_TAKES_VALUE = frozenset(("store", "append"))
_HELP = "help"
_HELP_FLAGS = ("-h", "--help")


class Namespace:
    """The parsed values, as attributes (like ``argparse.Namespace``)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Namespace):
            return NotImplemented
        return vars(self) == vars(other)

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in sorted(self.__dict__.items()))
        return f"Namespace({inner})"


class ParseResult:
    """What :func:`parse` found: ``values`` (with ``args``), or ``error``, or ``help``."""

    __slots__ = ("values", "error", "help")

    def __init__(self, values: Namespace | None = None, error: str | None = None,
                 help: bool = False) -> None:
        self.values = values
        self.error = error
        self.help = help


class _Spec:
    """One option, resolved: action, conversion and its name in messages."""

    __slots__ = ("flags", "dest", "action", "type", "choices", "default", "const", "required",
                 "label", "optional_value")

    def __init__(self, flags: Sequence[str], dest: str, kwargs: dict[str, Any]) -> None:
        self.flags = tuple(flags)
        self.dest = dest
        self.action = kwargs.get("action", "store")
        self.type = kwargs.get("type")
        self.choices = kwargs.get("choices")
        self.const = kwargs.get("const")
        self.required = bool(kwargs.get("required", False))
        self.optional_value = kwargs.get("nargs") == "?"
        if "default" in kwargs:
            self.default = kwargs["default"]
        elif self.action == "store_true":
            self.default = False
        elif self.action == "store_false":
            self.default = True
        else:
            self.default = None
        if self.action == "store_true":
            self.const = True
        elif self.action == "store_false":
            self.const = False
        self.label = "/".join(self.flags)


def supports(options: Iterable[Option]) -> bool:
    """Whether every option only uses what this parser implements."""
    seen: set[str] = set(_HELP_FLAGS)
    for opt in options:
        kwargs = opt.kwargs
        if not _KWARGS.issuperset(kwargs):
            return False
        action = kwargs.get("action", "store")
        if not isinstance(action, str) or action not in _ACTIONS:
            return False
        if "nargs" in kwargs and (kwargs["nargs"] != "?" or action != "store"):
            return False
        for flag in opt.flags:
            if flag in seen or flag == "--" or flag == "-":
                return False  # argparse reports conflicts at build time
            if not flag.startswith("--") and len(flag) != 2:
                return False  # single-dash long options ("-foo")
            seen.add(flag)
    return True


class OptionTable:
    """The options of one verb, indexed by flag."""

    def __init__(self, options: Iterable[Option]) -> None:
        self.specs: list[_Spec] = []
        self.by_flag: dict[str, _Spec | None] = {flag: None for flag in _HELP_FLAGS}
        for opt in options:
            spec = _Spec(opt.flags, opt.dest, opt.kwargs)
            self.specs.append(spec)
            for flag in spec.flags:
                self.by_flag[flag] = spec

    def classify(self, arg: str) -> tuple[str, str | None, str | None]:
        """How ``arg`` reads: ``(kind, flag, explicit_value)``.

        ``kind`` is ``"arg"`` (a positional argument or an option's value),
        ``"option"`` (``flag`` is set; ``explicit_value`` after ``=`` or
        glued to a short flag), ``"unknown"`` (looks like an option but is
        none) or ``"error"`` (``flag`` holds the message: an ambiguous prefix).
        """
        if not arg.startswith("-") or arg == "-":
            return "arg", None, None
        by_flag = self.by_flag
        if arg in by_flag:
            return "option", arg, None
        if "=" in arg:
            name, _, value = arg.partition("=")
            if name in by_flag:
                return "option", name, value
        matches = self._prefix_matches(arg)
        if len(matches) > 1:
            found = ", ".join(m[0] for m in matches)
            return "error", f"ambiguous option: {arg} could match {found}", None
        if matches:
            return "option", matches[0][0], matches[0][1]
        if _is_negative_number(arg) or " " in arg:
            return "arg", None, None
        return "unknown", None, None

    def _prefix_matches(self, arg: str) -> list[tuple[str, str | None]]:
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            return [(flag, value if eq else None) for flag in self.by_flag
                    if flag.startswith(name)]
        # "-ovalue": a short flag with its value glued on
        short = arg[:2]
        if short in self.by_flag:
            return [(short, arg[2:])]
        return []


def _is_negative_number(arg: str) -> bool:
    body = arg[1:]
    if body.isdigit() and body.isascii():
        return True
    whole, dot, frac = body.partition(".")
    return bool(dot) and (not whole or (whole.isdigit() and whole.isascii())) \
        and frac.isdigit() and frac.isascii()


def _convert(spec: _Spec, text: str) -> tuple[Any, str | None]:
    """``text`` through the option's type and choices: ``(value, error)``."""
    value: Any = text
    conv = spec.type
    if conv is not None:
        try:
            value = conv(text)
        except Exception as exc:  # converters report bad values with exceptions
            if not isinstance(exc, (ValueError, TypeError)) and \
                    type(exc).__name__ != "ArgumentTypeError":
                raise
            name = getattr(conv, "__name__", repr(conv))
            if conv in (int, float) or not str(exc):
                return None, f"argument {spec.label}: invalid {name} value: {text!r}"
            return None, f"argument {spec.label}: {exc}"
    if spec.choices is not None and value not in spec.choices:
        choices = ", ".join(repr(c) for c in spec.choices)
        return None, f"argument {spec.label}: invalid choice: {value!r} (choose from {choices})"
    return value, None


def _apply(spec: _Spec, values: dict[str, Any], value: Any) -> None:
    action = spec.action
    if action == "store":
        values[spec.dest] = value
    elif action in ("store_true", "store_false", "store_const"):
        values[spec.dest] = spec.const
    elif action == "count":
        values[spec.dest] = (values.get(spec.dest) or 0) + 1
    else:  # append, append_const: never modify the default list in place
        items = list(values.get(spec.dest) or [])
        items.append(value if action == "append" else spec.const)
        values[spec.dest] = items


def parse(table: OptionTable, argv: Sequence[str]) -> ParseResult:
    """Parse ``argv`` (options and positional arguments, intermixed).

    The positional arguments end up in ``values.args``.  Errors carry
    argparse's texts (without the ``prog: error:`` prefix).
    """
    values: dict[str, Any] = {}
    for opt in table.specs:
        if opt.dest not in values:
            default = opt.default
            values[opt.dest] = list(default) if isinstance(default, list) else default
    positionals: list[str] = []
    unknown: list[str] = []
    seen: set[str] = set()
    # Classify everything first (as argparse does): an ambiguous prefix is
    # reported before any other problem.
    kinds: list[tuple[str, str | None, str | None]] = []
    for arg in argv:
        if arg == "--":
            break
        kinds.append(table.classify(arg))
        if kinds[-1][0] == "error":
            return ParseResult(error=kinds[-1][1])
    count = len(kinds)
    i = 0
    while i < count:
        kind, flag, explicit = kinds[i]
        arg = argv[i]
        i += 1
        if kind == "arg":
            positionals.append(arg)
            continue
        if kind == "unknown":
            unknown.append(arg)
            continue
        assert flag is not None
        while True:  # once per flag of a bundle ("-vvo x")
            spec = table.by_flag[flag]
            if spec is None:  # -h/--help ("-hx" too: help runs before "-x" would)
                if explicit is not None and flag.startswith("--"):
                    return ParseResult(error=f"argument -h/--help: ignored explicit argument"
                                             f" {explicit!r}")
                return ParseResult(help=True)
            seen.add(spec.dest)
            if spec.optional_value:
                if explicit is None:
                    values[spec.dest] = spec.const
                    break
                value, problem = _convert(spec, explicit)
                if problem:
                    return ParseResult(error=problem)
                _apply(spec, values, value)
                break
            if spec.action in _TAKES_VALUE:
                if explicit is None:
                    if i >= count or kinds[i][0] != "arg":
                        return ParseResult(error=f"argument {spec.label}: expected one argument")
                    explicit = argv[i]
                    i += 1
                value, problem = _convert(spec, explicit)
                if problem:
                    return ParseResult(error=problem)
                _apply(spec, values, value)
                break
            _apply(spec, values, None)
            if explicit is None:
                break
            # a flag with text after it: more bundled short flags ("-vf"), or an error
            nxt = "-" + explicit[:1]
            if flag.startswith("--") or not explicit or nxt not in table.by_flag:
                return ParseResult(error=f"argument {spec.label}: ignored explicit argument"
                                         f" {explicit!r}")
            flag, explicit = nxt, (explicit[1:] or None)
    positionals.extend(argv[count + 1:])  # after "--"
    missing = [spec.label for spec in table.specs if spec.required and spec.dest not in seen]
    if missing:
        return ParseResult(error="the following arguments are required: " + ", ".join(missing))
    if unknown:
        return ParseResult(error="unrecognized arguments: " + " ".join(unknown))
    for spec in table.specs:  # argparse runs string defaults through the type
        if spec.dest not in seen and spec.type is not None and \
                spec.action in _TAKES_VALUE and values.get(spec.dest) is spec.default and \
                isinstance(spec.default, str):
            value, problem = _convert(spec, spec.default)
            if problem:
                return ParseResult(error=problem)
            values[spec.dest] = value
    values["args"] = positionals
    return ParseResult(values=Namespace(**values))
