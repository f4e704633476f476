"""ganeti/opcodes/wire.py and its parts: generated from the opcode classes, current,
import-free.

The committed modules must be what ``tools/gen_opwire.py`` writes from the
classes as they are (as trio checks its generated files), each under the
module size limit; each function (reached through the face, ``wire``)
must have its class's fields with their annotations, send only the
keywords given, and build a dict the master accepts.
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from ganeti import errors, opcodes
from ganeti.opcodes import OP_REGISTRY, upstream, wire, wire_base, wiregen
from ganeti.opcodes.base import OpCode, param

from cli_startup import ALLOWED_GANETI

REPO = wiregen.WIRE_DIR.parents[1]
GENERATED = sorted(wiregen.current())


def _text(modules: dict[str, str]) -> str:
    return "\n".join(modules.values())


def test_committed_modules_are_current() -> None:
    assert wiregen.stale(wiregen.current()) == [], \
        "ganeti/opcodes/wire*.py are stale: run tools/gen_opwire.py"


def test_the_face_base_and_every_part_are_generated() -> None:
    assert GENERATED == sorted(["wire.py", "wire_base.py",
                                *(f"{part}.py" for part in wiregen.PARTS)])
    assert all(len(text.splitlines()) <= wiregen.MAX_LINES
               for text in wiregen.current().values())


def test_a_left_over_or_edited_module_is_stale_and_write_fixes_it(tmp_path: pathlib.Path) -> None:
    wanted = wiregen.current()
    assert wiregen.stale(wanted, tmp_path) == GENERATED       # all missing
    assert wiregen.write(wanted, tmp_path) == GENERATED
    assert wiregen.stale(wanted, tmp_path) == []
    (tmp_path / "wire_old.py").write_text("x = 1\n")           # a part since renamed
    (tmp_path / "wire_node.py").write_text("edited\n")
    (tmp_path / "wiregen.py").write_text("not generated\n")
    assert wiregen.stale(wanted, tmp_path) == ["wire_node.py", "wire_old.py"]
    assert wiregen.write(wanted, tmp_path) == ["wire_node.py", "wire_old.py"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*GENERATED, "wiregen.py"])
    assert wiregen.stale(wanted, tmp_path) == []


def test_a_module_over_the_limit_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    longest = max(len(text.splitlines()) for text in wiregen.current().values())
    monkeypatch.setattr(wiregen, "MAX_LINES", longest - 1)
    with pytest.raises(errors.ProgrammerError, match="module limit.*PARTS"):
        wiregen.current()


def test_an_opcode_of_a_domain_no_part_holds_stops_the_generator() -> None:
    @dataclass(kw_only=True)
    class OpWidgetFrob(OpCode):
        """Frobnicate a widget."""
        widget_name: str

    OpWidgetFrob.__module__ = "ganeti.opcodes.widget"
    with pytest.raises(errors.ProgrammerError, match="widget.py.*PARTS"):
        wiregen.render({OpWidgetFrob.OP_ID: OpWidgetFrob}, {})


def test_every_generated_module_is_in_the_cli_start_up_set() -> None:
    """The gnt-* commands import them all through the face (doc/cli-startup.md)."""
    assert {f"ganeti.opcodes.{name[:-3]}" for name in GENERATED} <= ALLOWED_GANETI


def test_the_freshness_check_sees_a_new_opcode() -> None:
    @dataclass(kw_only=True)
    class OpNodeFrobnicate(OpCode):
        """Frobnicate a node."""
        node_name: str
        hard: bool = False

    OpNodeFrobnicate.__module__ = "ganeti.opcodes.node"
    registry = {**OP_REGISTRY, OpNodeFrobnicate.OP_ID: OpNodeFrobnicate}
    modules = wiregen.render(registry, upstream.NAMED_ONLY)
    assert wiregen.stale(modules) == ["wire.py", "wire_base.py", "wire_node.py"]
    assert "def node_frobnicate(node_name: str, *, hard: bool = NOT_SENT," in modules["wire_node.py"]
    assert 'OP_NODE_FROBNICATE = "OP_NODE_FROBNICATE"' in modules["wire_base.py"]
    assert " node_frobnicate," in modules["wire.py"]


def test_the_generator_refuses_an_annotation_it_cannot_write() -> None:
    import collections

    @dataclass(kw_only=True)
    class OpNodeOdd(OpCode):
        """A field of a type the generated module could not name."""
        counts: collections.Counter = param(None)

    OpNodeOdd.__module__ = "ganeti.opcodes.node"
    with pytest.raises(errors.ProgrammerError, match="Counter"):
        wiregen.render({OpNodeOdd.OP_ID: OpNodeOdd}, {})


def test_tools_script_checks_the_committed_file() -> None:
    res = subprocess.run([sys.executable, str(REPO / "tools" / "gen_opwire.py"), "--check"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("op_id", sorted(OP_REGISTRY))
def test_function_has_the_fields_of_its_class(op_id: str) -> None:
    cls = OP_REGISTRY[op_id]
    fn = getattr(wire, wiregen.function_name(op_id))
    params = dict(inspect.signature(fn).parameters)
    envelope = params.pop("envelope")
    assert envelope.kind == inspect.Parameter.VAR_KEYWORD
    assert envelope.annotation == "Unpack[Envelope]"
    shared = {f.name for f in dataclasses.fields(OpCode)}
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in shared}
    assert set(params) == set(fields)
    for name, f in fields.items():
        required = (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING)
        p = params[name]
        assert (p.default is inspect.Parameter.empty) == required, name
        assert p.kind == (inspect.Parameter.POSITIONAL_OR_KEYWORD if required
                          else inspect.Parameter.KEYWORD_ONLY), name
        assert p.annotation == re.sub(r"\bPrivate\b", "Any", str(f.type)), name
    assert getattr(wire, op_id) == op_id
    assert op_id in wire.OP_IDS


def test_op_ids_are_the_registry() -> None:
    assert wire.OP_IDS == frozenset(OP_REGISTRY)
    assert not set(upstream.NAMED_ONLY) & wire.OP_IDS


def _sample(cls: type[OpCode], f: dataclasses.Field) -> Any:
    """A valid value for the required field ``f``."""
    choices = f.metadata.get("choices")
    if choices:
        return sorted(choices)[0]
    text = str(f.type)
    if text.startswith("list"):
        return []
    return {"str": "x", "float": 1.0, "int": 1, "bool": True}[text]


@pytest.mark.parametrize("op_id", sorted(OP_REGISTRY))
def test_required_only_builds_the_opcode_the_master_accepts(op_id: str) -> None:
    cls = OP_REGISTRY[op_id]
    required = {f.name: _sample(cls, f) for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    data = getattr(wire, wiregen.function_name(op_id))(**required)
    assert data == {"OP_ID": op_id, **required}       # no default is sent
    op = opcodes.from_dict(data)
    assert type(op) is cls


def test_keywords_given_are_sent_as_given_none_included() -> None:
    assert wire.instance_startup("web1", force=False, startup_paused=None) == {  # type: ignore[arg-type]
        "OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "force": False,
        "startup_paused": None}
    assert wire.instance_startup(instance_name="web1") == {
        "OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"}
    assert wire.tags_get(kind="cluster", name=None) == {
        "OP_ID": "OP_TAGS_GET", "kind": "cluster", "name": None}


def test_not_sent_and_drop_none_leave_keys_out() -> None:
    op = wire.instance_migrate("web1", mode=None, cleanup=False, target_node=wire.NOT_SENT)
    assert op == {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "mode": None,
                  "cleanup": False}
    assert wire.drop_none(op) == {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1",
                                  "cleanup": False}


def test_the_envelope_fields_are_keywords_of_every_function() -> None:
    assert wire.node_remove("n1", priority=-10, dry_run=True, reason=[["a", "b", 1]]) == {
        "OP_ID": "OP_NODE_REMOVE", "node_name": "n1", "priority": -10, "dry_run": True,
        "reason": [["a", "b", 1]]}
    assert wire.cluster_verify(debug_level=wire.NOT_SENT) == {"OP_ID": "OP_CLUSTER_VERIFY"}
    assert wire_base._ENVELOPE_KEYS == {
        f.name for f in dataclasses.fields(OpCode)}


def test_a_keyword_the_opcode_does_not_have_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="no_such_parameter"):
        wire.node_remove(node_name="n1", no_such_parameter=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="bogus"):
        wire.cluster_verify(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        wire.instance_startup()  # type: ignore[call-arg]


def test_named_only_opcodes_render_as_functions() -> None:
    """An opcode we only name (none today) gets a constant and a function too."""
    text = _text(wiregen.render({}, {"OP_TEST_NAMED": {"instance_name": ("str", True),
                                                         "early_release": ("bool", False)}}))
    assert 'OP_TEST_NAMED = "OP_TEST_NAMED"' in text
    assert "def test_named(instance_name: str, *, early_release: bool = NOT_SENT" in text


def test_replace_disks_is_an_opcode_now() -> None:
    op = opcodes.from_dict(wire.instance_replace_disks("web1", "replace_new_secondary",
                                                       remote_node="n2"))
    assert (op.OP_ID, op.mode, op.remote_node) == ("OP_INSTANCE_REPLACE_DISKS",
                                                   "replace_new_secondary", "n2")
    with pytest.raises(errors.OpPrereqError, match="mode"):
        opcodes.from_dict(wire.instance_replace_disks("web1", "replace_everything"))


def test_importing_it_imports_nothing_else() -> None:
    """The gnt-* start-up budget (doc/cli-startup.md): no typing, no opcode classes;
    only the face's generated parts."""
    code = ("import sys; before = set(sys.modules); import ganeti.opcodes.wire;"
            " print(sorted(set(sys.modules) - before))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True, cwd=REPO)
    parts = [f"ganeti.opcodes.{name[:-3]}" for name in GENERATED]
    assert res.stdout.strip() == str(sorted(["__future__", "ganeti", "ganeti.opcodes", *parts]))
