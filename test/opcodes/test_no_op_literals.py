"""Opcodes leave the front ends through :mod:`ganeti.opcodes.wire`, never as string dicts.

Outside ``ganeti/opcodes/`` (the product code, ``daemons/``, ``scripts/`` and
``tools/``; tests excluded) the checks refuse:

* a string literal that is an opcode id (``"OP_INSTANCE_STARTUP"``), or that
  looks like one (``OP_`` and upper-case words) without being one of the
  few other names :data:`NOT_OPCODES` lists: code that names an opcode
  without building it uses the constant, ``wire.OP_INSTANCE_STARTUP``;
* a dict display with an ``"OP_ID"`` key (``{"OP_ID": ..., ...}``): an
  opcode is built by its wire function, ``wire.instance_startup(name)``.
  :data:`GENERIC_BUILDS` lists the places that build an opcode dict from
  data they were given (a RAPI body, a batch file's entry), with the reason.

Strings in ``__all__`` and docstrings do not count.  doc/design/contracts.md,
"Adding an opcode".
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator

import pytest

from ganeti.opcodes import upstream, wire

REPO = pathlib.Path(__file__).resolve().parents[2]

#: where the checks look; ganeti/opcodes/ is where the ids are declared
SCANNED = ("ganeti", "daemons", "scripts", "tools")
EXEMPT = ("ganeti/opcodes/",)

#: strings shaped like an opcode id that are not one
NOT_OPCODES = {
    "OP_ID": "the key of the opcode dict",
    "OP_TARGET": "the hooks environment variable (doc/protocols/hooks.md)",
    "OP_UNKNOWN": "the summary of a job whose opcode has no OP_ID",
}

#: file -> why it builds an opcode dict with an "OP_ID" key itself
GENERIC_BUILDS = {
    "ganeti/rapi/opinput.py": "a RAPI row's opcode from its request body (any opcode id)",
    "ganeti/cmdlib/relocation.py": "a multi-allocation entry read from the request, re-keyed",
    "tools/soak/soak_rapi_abuse.py": "deliberately invalid opcodes sent to RAPI",
}

_SHAPE = re.compile(r"OP_[A-Z0-9]+(?:_[A-Z0-9]+)*")


def _python_files() -> Iterator[pathlib.Path]:
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            rel = path.relative_to(REPO).as_posix()
            if not path.is_file() or rel.startswith(EXEMPT) or "__pycache__" in rel:
                continue
            if path.suffix == ".py" or (path.suffix == "" and _is_python_script(path)):
                yield path


def _is_python_script(path: pathlib.Path) -> bool:
    try:
        with path.open("rb") as handle:
            first = handle.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _skipped_strings(nodes: list[ast.AST]) -> set[int]:
    """ids of the string nodes (of a tree's ``nodes``) that are docstrings or
    ``__all__`` entries."""
    skipped: set[int] = set()
    for node in nodes:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                skipped.add(id(body[0].value))
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            skipped.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))
    return skipped


def problems(source: str, where: str) -> list[str]:
    """What :func:`source` does that the module docstring refuses, one line each."""
    nodes = list(ast.walk(ast.parse(source)))     # walked once: the walk is the cost
    skipped = _skipped_strings(nodes)
    known = wire.OP_IDS | set(upstream.NAMED_ONLY)
    found = []
    for node in nodes:
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skipped and _SHAPE.fullmatch(node.value)
                and (node.value in known or node.value not in NOT_OPCODES)):
            found.append(f"{where}:{node.lineno}: string {node.value!r}"
                         f" (use wire.{node.value} or its wire function)")
        if (isinstance(node, ast.Dict) and where not in GENERIC_BUILDS
                and any(isinstance(k, ast.Constant) and k.value == "OP_ID" for k in node.keys)):
            found.append(f"{where}:{node.lineno}: an opcode built as a dict"
                         " (use its ganeti.opcodes.wire function)")
    return found


def test_no_opcode_strings_or_dicts_outside_the_opcodes_package() -> None:
    found = []
    for path in _python_files():
        found += problems(path.read_text(), path.relative_to(REPO).as_posix())
    assert not found, "\n".join(found)


def test_the_exceptions_are_still_needed() -> None:
    """Every GENERIC_BUILDS file still builds a dict, every NOT_OPCODES name is still used."""
    for rel in GENERIC_BUILDS:
        tree = ast.parse((REPO / rel).read_text())
        assert any(isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant)
                                                   and k.value == "OP_ID" for k in n.keys)
                   for n in ast.walk(tree)), f"{rel}: drop its GENERIC_BUILDS entry"
    text = "\n".join(p.read_text() for p in _python_files())
    for name in NOT_OPCODES:
        assert f'"{name}"' in text, f"{name}: drop its NOT_OPCODES entry"


@pytest.mark.parametrize("source, expected", [
    ('op = {"OP_ID": "OP_NODE_REMOVE", "node_name": n}', 2),     # the string and the dict
    ('ids = ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER")', 2),
    ('x = "OP_INSTANCE_REPLACE_DISKS"', 1),                      # named-only ones too
    ('x = "OP_NODE_FROBNICATE"', 1),                             # looks like one: refused too
    ('op = {**body, "OP_ID": op_id}', 1),
    ('op = wire.node_remove(node_name=n)', 0),
    ('ok = op["OP_ID"] in (wire.OP_INSTANCE_MIGRATE,)', 0),
    ('env = {"OP_TARGET": name}', 0),
    ('__all__ = ["OP_AND", "OP_OR"]', 0),
    ('def f():\n    """Submits OP_NODE_REMOVE."""', 0),
    ('msg = f"not an OP_INSTANCE_CREATE: {x}"', 0),
], ids=["dict", "tuple", "named-only", "lookalike", "generic-dict", "wire", "constant",
        "not-an-opcode", "__all__", "docstring", "text"])
def test_the_check_can_fail(source: str, expected: int) -> None:
    assert len(problems(source, "example.py")) == expected
