"""Generate :mod:`ganeti.opcodes.wire` (and its parts) from the opcode classes.

``tools/gen_opwire.py`` rewrites the generated modules (``--check`` exits 1
when a committed one is stale, missing or left over; so does
``test/opcodes/test_wire.py``).  :func:`render` is pure: the registry and
the opcodes we only name (:data:`ganeti.opcodes.upstream.NAMED_ONLY`, with
the parameters we send) in, each module's text out.
doc/design/contracts.md, "Adding an opcode".

Each opcode gets an ``OP_*`` constant and one function named after its
``OP_ID`` (``OP_INSTANCE_STARTUP`` -> ``instance_startup``): its required
fields are positional-or-keyword, in declaration order, the others
keyword-only with the default :data:`~ganeti.opcodes.wire.NOT_SENT`; the
annotations are the fields' own, with ``Private`` written ``Any`` (a
client sends the plain value, the master wraps it).  The fields every
opcode shares (:class:`~ganeti.opcodes.base.OpCode`'s: ``dry_run``,
``priority``, ``depends``...) are one ``**envelope: Unpack[Envelope]``
per function, ``Envelope`` a ``TypedDict`` of their annotations, so mypy
still checks them by name and type while the modules say them once.

The output is several modules, none over :data:`MAX_LINES` (the project's
module limit, ``test/test_module_size.py``): ``wire_base.py`` (``NOT_SENT``,
``drop_none``, ``Envelope``, the ``OP_*`` constants and ``OP_IDS``), one
module of functions per row of :data:`PARTS` (by the domain module of the
opcode's class), and ``wire.py``, the face every caller imports, which
re-exports all of them.  A part that would grow past the limit, or an
opcode class in a domain module no part names, stops the generator: the
next split is a deliberate new row of :data:`PARTS`.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import textwrap
from collections.abc import Mapping, Sequence

from ganeti import errors
from ganeti.opcodes.base import OpCode

__all__ = ["render", "current", "function_name", "stale", "write", "WIRE_DIR", "FACE",
           "BASE", "PARTS", "NAMED_ONLY_PART", "MAX_LINES"]

#: the directory of the generated modules
WIRE_DIR = pathlib.Path(__file__).parent
#: the module every caller imports (``from ganeti.opcodes import wire``)
FACE = "wire"
#: the shared part: ``NOT_SENT``, ``_op``, ``drop_none``, ``Envelope``, the constants
BASE = "wire_base"
#: the modules of functions: name -> (what it holds, the opcode domain modules
#: (``ganeti/opcodes/<domain>.py``) whose opcodes' functions it holds)
PARTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "wire_instance": ("the instance opcodes", ("instance",)),
    "wire_node": ("the node, storage, node group and network opcodes",
                  ("node", "node_storage", "group", "network")),
    "wire_cluster": ("the cluster, export, OS, query, tag and test opcodes (and the"
                     " opcodes we only name)",
                     ("cluster", "backup", "os", "query", "tags", "test")),
}
#: the part holding the functions of the opcodes we only name (NAMED_ONLY)
NAMED_ONLY_PART = "wire_cluster"
#: no generated module may be longer (the project's limit, test/test_module_size.py)
MAX_LINES = 800
#: the file names a generated module may have (a left-over one is stale)
_GENERATED = re.compile(r"wire(_[a-z]+)?\.py")

#: names an annotation may use in the generated module (builtins and ``Any``)
_KNOWN_NAMES = frozenset({"str", "int", "float", "bool", "None", "list", "dict", "Any"})
_WIDTH = 100

_FACE_HEADER = '''\
\"\"\"Opcodes on the wire: one typed keyword function per opcode, returning its dict.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit (test/opcodes/
test_wire.py fails when a generated module is stale).  doc/design/contracts.md, "Adding an
opcode".  This module is the face: callers import it (``from ganeti.opcodes import wire``) and
only it; the functions live in the generated parts (%(parts)s), the shared names in
``wire_base.py``, each part under the module size limit.

``instance_startup("web1", force=True)`` returns ``{"OP_ID": "OP_INSTANCE_STARTUP",
"instance_name": "web1", "force": True}``: a keyword left out is not sent (the master applies
the opcode class's default), a keyword given is sent as given, ``None`` included, unless it is
:data:`NOT_SENT` (``force=opts.force or NOT_SENT``: sent only when true).  :func:`drop_none`
leaves out the ``None`` values instead (a front end's "option not given").  Code that names an
opcode without building one (a table keyed by ``OP_ID``, a check of an answer) uses the
``OP_*`` constants here, never a string: ``test/opcodes/test_no_op_literals.py`` refuses
``"OP_..."`` literals outside ``ganeti/opcodes/``.

Imports nothing but its parts at run time: the ``gnt-*`` commands keep their start-up budget
(doc/cli-startup.md).
\"\"\"

from __future__ import annotations
'''

_BASE_HEADER = '''\
\"\"\"Opcodes on the wire, the shared part: ``NOT_SENT``, ``drop_none``, ``Envelope``, ``OP_*``.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit.  Callers import
:mod:`ganeti.opcodes.wire`, which re-exports this; doc/design/contracts.md, "Adding an opcode".
Imports nothing at run time (doc/cli-startup.md).
\"\"\"

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypedDict


class _NotSent:
    \"\"\"The default of every optional keyword: the key is not sent.\"\"\"

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_SENT"


#: the default of every optional keyword: not sent (the master's default applies)
NOT_SENT: Any = _NotSent()


def _op(op_id: str, params: dict[str, Any]) -> dict[str, Any]:
    \"\"\"The opcode dict: ``params`` (a function's ``locals()``) with its envelope merged in;
    a keyword that is neither the opcode's nor the envelope's is a ``TypeError``.\"\"\"
    unknown = set(params["envelope"]) - _ENVELOPE_KEYS
    if unknown:
        raise TypeError(f"{op_id} has no parameter {', '.join(sorted(unknown))}")
    sent = {**params, **params["envelope"]}
    return {"OP_ID": op_id, **{k: v for k, v in sent.items()
                               if k != "envelope" and v is not NOT_SENT}}


def drop_none(op: dict[str, Any]) -> dict[str, Any]:
    \"\"\"``op`` without its ``None`` values (options a front end was not given).\"\"\"
    return {k: v for k, v in op.items() if v is not None}
'''

_PART_HEADER = '''\
\"\"\"Opcodes on the wire: the functions of %(what)s.

GENERATED from the opcode classes by ``tools/gen_opwire.py``; do not edit.  Callers import
:mod:`ganeti.opcodes.wire`, which re-exports these; doc/design/contracts.md, "Adding an opcode".
Imports nothing but ``wire_base`` at run time (doc/cli-startup.md).
\"\"\"

from __future__ import annotations

'''


def function_name(op_id: str) -> str:
    """``OP_INSTANCE_STARTUP`` -> ``instance_startup``."""
    if not op_id.startswith("OP_"):
        raise errors.ProgrammerError(f"Opcode id {op_id!r} must start with 'OP_'")
    return op_id[3:].lower()


def _annotation(cls: type[OpCode], name: str) -> str:
    """The source text of field ``name``'s annotation, ``Private`` written ``Any``."""
    for klass in cls.__mro__:
        text = klass.__dict__.get("__annotations__", {}).get(name)
        if text is not None:
            break
    else:
        raise errors.ProgrammerError(f"{cls.__name__}.{name} has no annotation")
    if not isinstance(text, str):   # every opcode module uses postponed annotations
        raise errors.ProgrammerError(f"{cls.__name__}.{name}: annotation is not a string")
    return _checked(re.sub(r"\bPrivate\b", "Any", text), f"{cls.__name__}.{name}")


def _checked(text: str, where: str) -> str:
    """``text``, an annotation the generated module can write without imports."""
    unknown = set(re.findall(r"[A-Za-z_]\w*", text)) - _KNOWN_NAMES
    if unknown:
        raise errors.ProgrammerError(
            f"{where}: annotation {text!r} names {sorted(unknown)}, which the"
            " generated module cannot import")
    return text


#: a parameter of a generated function: (name, annotation, required)
Param = tuple[str, str, bool]


#: the name of every function's ``**`` parameter (never an opcode field)
ENVELOPE_PARAM = "envelope"


def _envelope_names() -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(OpCode))


def _params(cls: type[OpCode]) -> list[Param]:
    """The fields of ``cls`` as parameters, the envelope's (``OpCode``'s) left out."""
    shared = _envelope_names()
    fields = [f for f in dataclasses.fields(cls) if f.name not in shared]
    if any(f.name == ENVELOPE_PARAM for f in fields):
        raise errors.ProgrammerError(f"{cls.__name__}: a field may not be named"
                                     f" {ENVELOPE_PARAM!r}")
    return [(f.name, _annotation(cls, f.name), _required(f)) for f in fields]


def _envelope() -> list[str]:
    """The ``Envelope`` TypedDict: ``OpCode``'s fields, all optional."""
    lines = ["", "", "if TYPE_CHECKING:",
             "    class Envelope(TypedDict, total=False):",
             '        """The fields every opcode has (``OpCode``\'s); any may be left out."""', ""]
    lines += [f"        {f.name}: {_annotation(OpCode, f.name)}"
              for f in dataclasses.fields(OpCode)]
    lines += ["", "", "#: the keywords ``**envelope`` takes (``_op`` refuses any other)"]
    lines += _wrap("_ENVELOPE_KEYS = frozenset({",
                   [f'"{f.name}"' for f in dataclasses.fields(OpCode)], "})", indent="    ")
    return lines


def _named_only_params(op_id: str, table: Mapping[str, tuple[str, bool]]) -> list[Param]:
    """The parameters of an opcode we only name (``table``'s; the envelope's come apart)."""
    if ENVELOPE_PARAM in table:
        raise errors.ProgrammerError(f"{op_id}: a parameter may not be named {ENVELOPE_PARAM!r}")
    return [(name, _checked(ann, f"{op_id}.{name}"), req) for name, (ann, req) in table.items()]


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _wrap(head: str, items: Sequence[str], tail: str, indent: str = " " * 8) -> list[str]:
    """``head`` + ``items`` joined by ", " + ``tail``, wrapped at :data:`_WIDTH`."""
    lines: list[str] = []
    line = head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else tail)
        sep = "" if line.endswith(("(", "[", "{")) or not line.strip() else " "
        if len(line) + len(sep) + len(piece) > _WIDTH and line.strip():
            lines.append(line.rstrip())
            line = indent + piece
        else:
            line = line + sep + piece
    lines.append(line)
    return lines


def _docstring(text: str) -> list[str]:
    """A one-paragraph docstring, wrapped at :data:`_WIDTH`."""
    if len(text) + 10 <= _WIDTH:
        return [f'    """{text}"""']
    return textwrap.wrap(text, _WIDTH - 4, initial_indent='    """',
                         subsequent_indent="    ") + ['    """']


def _function(op_id: str, params: Sequence[Param], doc: str) -> list[str]:
    """One opcode's function: required parameters positional, the others keyword-only,
    the envelope's fields as ``**envelope``."""
    required = [f"{name}: {ann}" for name, ann, req in params if req]
    optional = [f"{name}: {ann} = NOT_SENT" for name, ann, req in params if not req]
    items = required + (["*"] + optional if optional else [])
    items.append(f"**{ENVELOPE_PARAM}: Unpack[Envelope]")
    lines = ["", ""]
    lines += _wrap(f"def {function_name(op_id)}(", items, ") -> dict[str, Any]:")
    lines += _docstring(doc)
    lines.append(f"    return _op({op_id}, locals())")
    return lines


def _doc(cls: type[OpCode]) -> str:
    return (cls.__doc__ or cls.__name__).strip().splitlines()[0]


def _part_of(op_id: str, cls: type[OpCode]) -> str:
    """The part holding ``cls``'s function (by the domain module of the class)."""
    domain = cls.__module__.rsplit(".", 1)[-1]
    for part, (_, domains) in PARTS.items():
        if domain in domains:
            return part
    raise errors.ProgrammerError(
        f"{op_id}: its class is in ganeti/opcodes/{domain}.py, which no generated wire module"
        f" holds; add {domain!r} to a row of PARTS in ganeti/opcodes/wiregen.py")


def _base(ids: Sequence[str], named_only: Sequence[str]) -> list[str]:
    """``wire_base.py``: the shared code, the constants and ``Envelope``."""
    exports = ["NOT_SENT", "OP_IDS", "drop_none", *sorted([*ids, *named_only])]
    out = [_BASE_HEADER.rstrip("\n"), "", ""]
    out += _wrap("__all__ = [", [f'"{name}"' for name in exports], "]", indent="    ")
    out += ["", "#: the ``OP_ID`` of every opcode the master implements"]
    out += [f'{op_id} = "{op_id}"' for op_id in ids]
    out += _wrap("OP_IDS = frozenset({", ids, "})", indent="    ")
    out += _envelope()
    if named_only:
        out += ["", "#: Ganeti's opcodes that documents we read or write name, not implemented"
                    " here", "#: (ganeti/opcodes/upstream.py, NAMED_ONLY)"]
        out += [f'{op_id} = "{op_id}"' for op_id in named_only]
    return out


def _part(what: str, functions: Mapping[str, list[str]]) -> list[str]:
    """A module of ``functions`` (``OP_ID`` -> its lines), sorted by ``OP_ID``."""
    ids = sorted(functions)
    out = [(_PART_HEADER % {"what": what}).rstrip("\n"), ""]
    out += _wrap(f"from ganeti.opcodes.{BASE} import (", ["NOT_SENT", "_op", *ids], ")",
                 indent="    ")
    out += ["", "# typing.TYPE_CHECKING without importing typing (the CLI's start-up path)",
            "TYPE_CHECKING = False", "if TYPE_CHECKING:",
            "    from typing import Any, Unpack", "",
            f"    from ganeti.opcodes.{BASE} import Envelope", "", ""]
    out += _wrap("__all__ = [", [f'"{function_name(i)}"' for i in ids], "]", indent="    ")
    for op_id in ids:
        out += functions[op_id]
    return out


def _face(base_names: Sequence[str], parts: Mapping[str, Sequence[str]]) -> list[str]:
    """``wire.py``: every name of ``wire_base`` and of the ``parts`` (module -> names)."""
    every = list(base_names)
    out = [(_FACE_HEADER % {"parts": ", ".join(f"``{m}.py``" for m in parts)}).rstrip("\n"),
           ""]
    out += _wrap(f"from ganeti.opcodes.{BASE} import (", base_names, ")", indent="    ")
    for module, names in parts.items():
        out += _wrap(f"from ganeti.opcodes.{module} import (", names, ")", indent="    ")
        every += names
    out += ["", ""]
    out += _wrap("__all__ = [", [f'"{name}"' for name in every], "]", indent="    ")
    return out


def render(registry: Mapping[str, type[OpCode]],
           named_only: Mapping[str, Mapping[str, tuple[str, bool]]]) -> dict[str, str]:
    """The generated modules (file name -> text) for ``registry`` (``OP_ID`` -> class)
    and the opcodes ``named_only`` (``OP_ID`` -> {parameter: (annotation, required)}):
    ``wire.py``, ``wire_base.py`` and one module per row of :data:`PARTS` (an empty
    one too).  Raises :class:`errors.ProgrammerError` for an opcode no part holds or
    a module over :data:`MAX_LINES`."""
    ids = sorted(registry)
    clash = sorted(set(ids) & set(named_only))
    if clash:
        raise errors.ProgrammerError(f"{clash} are implemented: not named-only")
    functions: dict[str, dict[str, list[str]]] = {part: {} for part in PARTS}
    for op_id in ids:
        cls = registry[op_id]
        functions[_part_of(op_id, cls)][op_id] = _function(op_id, _params(cls), _doc(cls))
    for op_id, table in named_only.items():
        functions[NAMED_ONLY_PART][op_id] = _function(
            op_id, _named_only_params(op_id, table),
            "Ganeti's opcode, not implemented here (see NAMED_ONLY).")
    base_names = ["NOT_SENT", "OP_IDS", "drop_none", *sorted([*ids, *named_only])]
    modules = {BASE: _base(ids, sorted(named_only))}
    for part, (what, _) in PARTS.items():
        modules[part] = _part(what, functions[part])
    modules[FACE] = _face(base_names, {part: [function_name(i) for i in sorted(functions[part])]
                                       for part in PARTS})
    texts = {f"{name}.py": "\n".join(lines) + "\n" for name, lines in modules.items()}
    too_long = [f"{name}: {len(text.splitlines())} lines" for name, text in texts.items()
                if len(text.splitlines()) > MAX_LINES]
    if too_long:
        raise errors.ProgrammerError(
            f"Generated wire modules over the {MAX_LINES}-line module limit: {too_long};"
            " split the part: a new row of PARTS in ganeti/opcodes/wiregen.py"
            " (doc/design/contracts.md, \"Adding an opcode\")")
    return texts


def current() -> dict[str, str]:
    """The generated modules (file name -> text) for the opcodes as they are now."""
    from ganeti.opcodes import registry, upstream
    return render(registry.OP_REGISTRY, upstream.NAMED_ONLY)


def stale(wanted: Mapping[str, str], directory: pathlib.Path = WIRE_DIR) -> list[str]:
    """The file names in ``directory`` that differ from ``wanted`` (file name -> text):
    stale or missing ones, and generated-looking ones (``wire_*.py``) not wanted."""
    found = {p.name for p in directory.iterdir() if _GENERATED.fullmatch(p.name)}
    differ = [name for name, text in wanted.items()
              if name not in found or (directory / name).read_text() != text]
    return sorted(differ + [name for name in found if name not in wanted])


def write(wanted: Mapping[str, str], directory: pathlib.Path = WIRE_DIR) -> list[str]:
    """Write ``wanted`` (file name -> text) into ``directory`` and remove left-over
    generated modules; the names written or removed."""
    changed = stale(wanted, directory)
    for name in changed:
        if name in wanted:
            (directory / name).write_text(wanted[name])
        else:
            (directory / name).unlink()
    return changed
