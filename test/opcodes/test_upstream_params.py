"""Ganeti 3.0's opcode parameters: implemented, accepted at their default, missing.

The table of what we accept only at upstream's default is
:data:`ganeti.opcodes.upstream.ACCEPTED_AT_DEFAULT`.  With Debian's
``ganeti-3.0`` installed (``make compat-deps``), upstream's own opcode
definitions are read at test time (test/opcodes/upstream_opcode_params.py)
and every implemented opcode is checked: no upstream parameter may be
missing, and the recorded defaults must be upstream's.  The per-opcode
table in doc/compat.md ("Opcode parameters") is generated here; rewrite it
with ``python test/opcodes/test_upstream_params.py --write``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import typing
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from ganeti import errors, opcodes  # noqa: E402
from ganeti.opcodes import upstream  # noqa: E402

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_opcode_params.py")
DOC = os.path.join(ROOT, "doc", "compat.md")
SYSTEM_PYTHON = "/usr/bin/python3"
BEGIN, END = "<!-- opcode-table:begin -->", "<!-- opcode-table:end -->"


def upstream_params() -> dict[str, dict[str, Any] | None] | None:
    """Ganeti 3.0's parameters of our opcodes, or None without the package."""
    if not os.path.exists("/usr/share/ganeti/3.0/ganeti/opcodes.py"):
        return None
    res = subprocess.run([SYSTEM_PYTHON, "-E", "-s", DRIVER],
                         input=json.dumps(sorted(opcodes.OP_REGISTRY)),
                         env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    data: dict[str, dict[str, Any] | None] = json.loads(res.stdout)
    return data


def _need_upstream() -> dict[str, dict[str, Any] | None]:
    data = upstream_params()
    if data is None:
        if os.environ.get("GANETI_TEST_REQUIRE_UPSTREAM") == "1":
            pytest.fail("ganeti-3.0 is not installed (make compat-deps)")
        pytest.skip("ganeti-3.0 is not installed (make compat-deps)")
    return data


def classify(up: dict[str, dict[str, Any] | None]) -> list[tuple[str, int, list[str], list[str]]]:
    """Per OP_ID: (op_id, implemented count, accepted-at-default names, missing names)."""
    rows = []
    for op_id, cls in sorted(opcodes.OP_REGISTRY.items()):
        theirs = up.get(op_id)
        if theirs is None:
            continue
        ours = {f.name for f in dataclasses.fields(cls)}
        accepted = upstream.ACCEPTED_AT_DEFAULT.get(op_id, {})
        rows.append((op_id, len(set(theirs) & ours), sorted(set(theirs) & set(accepted)),
                     sorted(set(theirs) - ours - set(accepted))))
    return rows


def render(up: dict[str, dict[str, Any] | None]) -> str:
    """The generated doc/compat.md table (between the markers)."""
    rows = classify(up)
    ours_only = sorted(k for k, v in up.items() if v is None)
    lines = [BEGIN,
             f"{len(rows)} opcodes of ours exist in Ganeti 3.0; parameters in total:"
             f" {sum(r[1] for r in rows)} implemented, {sum(len(r[2]) for r in rows)} accepted"
             f" at upstream's default only, {sum(len(r[3]) for r in rows)} missing."
             + (f" Ours only: {', '.join(ours_only)}." if ours_only else ""),
             "",
             "| Opcode | Implemented | Accepted at default only | Missing |",
             "|---|---|---|---|"]
    for op_id, impl, acc, miss in rows:
        lines.append(f"| `{op_id}` | {impl} | {', '.join(f'`{a}`' for a in acc) or '-'} |"
                     f" {', '.join(f'`{m}`' for m in miss) or '-'} |")
    lines.append(END)
    return "\n".join(lines)


def _doc_table() -> str:
    with open(DOC, encoding="utf-8") as fh:
        text = fh.read()
    return text[text.index(BEGIN):text.index(END) + len(END)]


# --- without the package ------------------------------------------------------
def test_table_names_no_implemented_parameter() -> None:
    for op_id, params in upstream.ACCEPTED_AT_DEFAULT.items():
        cls = opcodes.OP_REGISTRY[op_id]
        assert not set(params) & {f.name for f in dataclasses.fields(cls)}, op_id


def test_default_is_dropped_other_values_refused() -> None:
    base = {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i1"}
    op = opcodes.from_dict({**base, "instance_uuid": None})
    assert op.instance_name == "i1" and "instance_uuid" not in opcodes.to_dict(op)
    with pytest.raises(errors.ParameterError, match="instance_uuid") as exc:
        opcodes.from_dict({**base, "instance_uuid": "0123"})
    assert exc.value.args[1] == errors.ECODE_INVAL
    create = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "mode": "create",
              "disk_template": "diskless", "disks": [], "nics": [], "os_type": "tinyos",
              "pnode": "node1"}
    opcodes.from_dict({**create, "commit": False, "compress": "none", "forthcoming": False,
                       "osparams_secret": {}, "source_shutdown_timeout": 120})
    for name, value in (("forthcoming", True), ("helper_startup_timeout", 5),
                        ("helper_shutdown_timeout", 60), ("commit", 0)):
        with pytest.raises(errors.ParameterError, match=f"'{name}' is not supported yet"):
            opcodes.from_dict({**create, name: value})
    with pytest.raises(errors.ParameterError, match="unknown parameter"):
        opcodes.from_dict({**base, "no_such_param": None})


def test_null_means_our_default_where_upstreams_default_is_null() -> None:
    create = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "mode": "create",
              "disk_template": "diskless", "disks": [], "nics": [], "os_type": "tinyos",
              "pnode": "node1", "osparams_private": None}
    assert opcodes.from_dict(create).osparams_private == {}
    with pytest.raises(errors.ParameterError, match="osparams"):
        opcodes.from_dict({**create, "osparams": None})     # upstream's default is {}


# --- with upstream's definitions ---------------------------------------------
def test_no_upstream_parameter_is_missing() -> None:
    up = _need_upstream()
    missing = {op_id: miss for op_id, _impl, _acc, miss in classify(up) if miss}
    assert missing == {}


def test_recorded_defaults_are_upstreams() -> None:
    up = _need_upstream()
    for op_id, params in upstream.ACCEPTED_AT_DEFAULT.items():
        theirs = up[op_id]
        assert theirs is not None, op_id
        for name, default in params.items():
            assert name in theirs and theirs[name] == default, (op_id, name, theirs.get(name))


def test_null_table_is_upstreams() -> None:
    up = _need_upstream()
    expected: dict[str, frozenset[str]] = {}
    for op_id, cls in opcodes.OP_REGISTRY.items():
        theirs = up.get(op_id) or {}
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.name not in theirs or theirs[f.name] is not None:
                continue
            tp = hints[f.name]
            nullable = tp is Any or type(None) in typing.get_args(tp)
            has_default = (f.default is not dataclasses.MISSING
                           or f.default_factory is not dataclasses.MISSING)
            if not nullable and has_default:
                expected[op_id] = expected.get(op_id, frozenset()) | {f.name}
    assert upstream.NULL_IS_DEFAULT == expected


def test_doc_table_is_current() -> None:
    up = _need_upstream()
    assert _doc_table() == render(up), "rerun: python test/opcodes/test_upstream_params.py --write"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    data = upstream_params()
    assert data is not None, "ganeti-3.0 is not installed"
    with open(DOC, encoding="utf-8") as fh:
        text = fh.read()
    text = text[:text.index(BEGIN)] + render(data) + text[text.index(END) + len(END):]
    with open(DOC, "w", encoding="utf-8") as fh:
        fh.write(text)
