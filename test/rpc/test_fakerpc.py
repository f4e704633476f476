"""``test/fakes/fakerpc.py``: FakeRpc has the generated stubs and refuses what a node would refuse."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.fakerpc import FakeRpc

from ganeti import errors
from ganeti.rpc import defs


def test_typed_stub_records_the_positional_list() -> None:
    rpc = FakeRpc()
    rpc.call_hooks_runner(["n1", "n2"], hpath="node-add", phase="pre", env={"A": "1"})
    assert rpc.calls_to("hooks_runner") == [(["n1", "n2"], ["node-add", "pre", {"A": "1"}])]


def test_wrong_argument_name_is_refused() -> None:
    rpc: Any = FakeRpc()      # Any: the wrong call below is what mypy would refuse
    with pytest.raises(TypeError, match="size_mb"):
        rpc.call_blockdev_grow("n1", disk={}, size_mb=10, dryrun=True, backingstore=False,
                               excl_stor=False)
    assert rpc.calls == []


def test_positional_arguments_are_refused() -> None:
    rpc: Any = FakeRpc()
    with pytest.raises(TypeError):
        rpc.call_test_delay(["n1"], 1.0)
    assert rpc.calls == []


@pytest.mark.parametrize("kwargs, why", [
    ({"disk": {}, "amount": "10", "dryrun": True, "backingstore": False, "excl_stor": False},
     "Parameter 'amount' must be an integer, got '10'"),
    ({"disk": {}, "amount": True, "dryrun": True, "backingstore": False, "excl_stor": False},
     "Parameter 'amount' must be an integer, got True"),
    ({"disk": [], "amount": 1, "dryrun": True, "backingstore": False, "excl_stor": False},
     r"Parameter 'disk' must be an object, got \[\]"),
    ({"disk": {}, "amount": 1, "dryrun": None, "backingstore": False, "excl_stor": False},
     "Parameter 'dryrun' must be a boolean, got None"),
], ids=["str-for-int", "bool-for-int", "list-for-dict", "null-for-bool"])
def test_wrong_argument_type_is_refused(kwargs: dict[str, Any], why: str) -> None:
    rpc: Any = FakeRpc()
    with pytest.raises(errors.ProgrammerError, match=why):
        rpc.call_blockdev_grow("n1", **kwargs)
    assert rpc.calls == []


def test_untyped_call_is_checked_against_the_row_too() -> None:
    rpc = FakeRpc()
    with pytest.raises(errors.ProgrammerError, match="expected 1 argument"):
        rpc.call("test_delay", ["n1"], [])
    with pytest.raises(errors.ProgrammerError, match="Unknown RPC procedure"):
        rpc.call("no_such_procedure", ["n1"], [])


def test_values_are_checked_as_the_node_decodes_them() -> None:
    # a tuple travels as a JSON list and an int is a valid float, as on the node
    rpc = FakeRpc()
    rpc.call_jobqueue_rename("n1", rename=(("a", "b"),))
    rpc.call_test_delay("n1", duration=1)
    assert [proc for proc, _, _ in rpc.calls] == ["jobqueue_rename", "test_delay"]


def test_results_builder_and_one() -> None:
    rpc = FakeRpc().set_result("blockdev_find", "n1", {"path": "/x"})
    rpc.set_failure("blockdev_find", "n2", "gone")
    res = rpc.call_blockdev_find(["n1", "n2"], disk={})
    assert res.one("n1") == {"path": "/x"}
    with pytest.raises(errors.OpExecError, match="^Cannot find: gone$"):
        res.one("n2", "Cannot find")


def test_per_node() -> None:
    rpc = FakeRpc()
    disks = {"n1": [[{}, "i1", 0]], "n2": [[{}, "i2", 1]]}
    res = rpc.per_node(disks, lambda r, node: r.call_blockdev_getstatus(node, disks=disks[node]))
    assert list(res) == ["n1", "n2"]
    assert rpc.calls_to("blockdev_getstatus") == [(["n1"], [disks["n1"]]), (["n2"], [disks["n2"]])]


@pytest.mark.parametrize("name", sorted(defs.CALLS))
def test_every_row_is_callable_on_the_fake(name: str) -> None:
    assert callable(getattr(FakeRpc(), f"call_{name}"))
