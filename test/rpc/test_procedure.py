"""The ``@procedure`` decorator and the generator reading it (``ganeti.rpc.procedure``, ``rpc.gen``).

Made-up backend modules (source text run into a fresh module, with
``from __future__ import annotations`` like the real ones) are read by
:func:`gen.collect` and rendered by :func:`gen.render_table`; the rendered
table is run and compared with what the functions say.
"""

from __future__ import annotations

import re
import textwrap
import types

import pytest

from ganeti.rpc import defs, gen, procedure

_HEAD = "from __future__ import annotations\nfrom ganeti.rpc.procedure import *\n"


def _module(source: str, name: str = "ganeti.backend.madeup") -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(_HEAD + textwrap.dedent(source), f"<{name}>", "exec"), vars(module))
    return module


_POWER = '''
@procedure(NORMAL, fenced=True)
def node_powercycle_twice(ctx: NodeContext, hypervisor: str, hvparams: dict,
                          count: int | None) -> str:
    """Hard-reset the node twice through its
    hypervisor. -> a message

    What follows the first paragraph is for the reader of the backend.
    """
    return "x"


def helper(ctx, x):
    return x


@procedure(URGENT, keepalive=True)
def read_it(ctx: NodeContext) -> int:
    """Read it."""
    return 1
'''


def test_declared_call_takes_everything_from_the_function() -> None:
    module = _module(_POWER)
    call = procedure.declared_call(module.node_powercycle_twice)
    assert call == defs.RpcCall("node_powercycle_twice",
                                (("hypervisor", str), ("hvparams", dict), ("count", int | None)),
                                defs.NORMAL, "Hard-reset the node twice through its hypervisor. -> a message")
    assert procedure.spec_of(module.node_powercycle_twice) == procedure.Procedure(
        defs.NORMAL, fenced=True)
    assert procedure.spec_of(module.helper) is None


def test_collect_and_render_a_table_that_reads_back() -> None:
    module = _module(_POWER)
    decls = gen.collect([module])
    assert [d.call.name for d in decls] == ["node_powercycle_twice", "read_it"]   # source order
    text = gen.render_table(decls)
    assert "# --- " + "ganeti/backend/madeup" + ".py ---" in text   # (a made-up file)
    assert '("count", int | None)' in text
    namespace: dict[str, object] = {}
    exec(compile(text, "<table>", "exec"), namespace)
    rows = namespace["ROWS"]
    assert [defs._row(n, list(a), t, d) for n, a, t, d in rows] == [d.call for d in decls]  # type: ignore[attr-defined]
    assert namespace["FENCED"] == {"node_powercycle_twice"}
    assert namespace["KEEPALIVE"] == {"read_it"}
    assert namespace["KEEPALIVE_WRITE"] == frozenset() and namespace["OFFLINE"] == frozenset()


def test_collect_refuses_a_name_declared_twice() -> None:
    with pytest.raises(ValueError, match="node_powercycle_twice declared twice"):
        gen.collect([_module(_POWER), _module(_POWER, "ganeti.backend.other")])


@pytest.mark.parametrize("source, why", [
    ('def f(ctx, names: list[str]) -> None:\n    """Doc."""', "'list[str]' is not a wire type"),
    ('def f(ctx, names: Any) -> None:\n    """Doc."""', "'Any' is not a wire type"),
    ('def f(ctx, names) -> None:\n    """Doc."""', "'<none>' is not a wire type"),
    ('def f(ctx, n: int = 1) -> None:\n    """Doc."""', "must not have a default"),
    ('def f(ctx, *, n: int) -> None:\n    """Doc."""', "plain positional"),
    ('def f(context, n: int) -> None:\n    """Doc."""', "first parameter must be ctx"),
    ('def f(ctx, n: int) -> None:\n    pass', "docstring"),
], ids=["list-of-str", "any", "unannotated", "default", "keyword-only", "no-ctx", "no-doc"])
def test_declared_call_refuses(source: str, why: str) -> None:
    module = _module("from typing import Any\n@procedure(FAST)\n" + source + "\n")
    with pytest.raises(ValueError, match=re.escape(why)):
        procedure.declared_call(module.f)


def test_unknown_timeout_class_is_refused_at_decoration() -> None:
    with pytest.raises(ValueError, match="sometimes"):
        procedure.procedure("sometimes")


def test_undecorated_function_is_refused() -> None:
    with pytest.raises(ValueError, match="not decorated"):
        procedure.declared_call(_module(_POWER).helper)


def test_wire_types_are_the_validators_types() -> None:
    assert procedure.wire_type("float | None", "x") == (float | None)
    assert procedure.wire_type(dict, "x") is dict
    assert set(procedure.WIRE_TYPES) == {f"{t}{opt}" for t in ("str", "int", "float", "bool", "list", "dict")
                                         for opt in ("", " | None")}


def test_the_annotations_that_changed_still_validate_as_before() -> None:
    # backend annotations once wider or narrower than the row: now the row's types
    assert dict(defs.CALLS["ssh_key_update"].args)["retired_keys"] is list
    replicate = dict(defs.CALLS["replicate_state"].args)
    assert replicate["config"] == (list | None) and replicate["ssconf_values"] == (dict | None)
    assert defs.check_args(defs.CALLS["ssh_key_update"], ["commit", "k", None, [1]]) is None
    assert "config" in (defs.check_args(defs.CALLS["replicate_state"], ["x", None, []]) or "")


def test_check_mode_reports_a_stale_table(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "table.py"
    stale.write_text("ROWS = ()\n", encoding="utf-8")
    monkeypatch.setattr(gen, "TABLE_PATH", str(stale))
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == gen.render_table(gen.collect())
