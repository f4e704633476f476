"""Instance LU behaviour burnin relies on: runtime memory, rename to the same name.

Uses the fake config/RPC environment of test_cmdlib_instance.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from test.cmdlib.test_cmdlib_instance import _create, env  # noqa: F401  (env: a fixture)

from ganeti import errors


def _balloon(fake: Any) -> list[tuple[str, str, int]]:
    calls: list[tuple[str, str, int]] = []

    def do_instance_balloon_memory(node: str, inst: dict, memory: int) -> None:
        calls.append((node, inst["name"], memory))
        fake.running[node][inst["name"]]["memory"] = memory
    fake.do_instance_balloon_memory = do_instance_balloon_memory
    return calls


def test_runtime_memory_balloons_the_running_instance(env: Any) -> None:  # noqa: F811
    calls = _balloon(env.rpc)
    _create(env, template="diskless", beparams={"minmem": 128, "maxmem": 256})
    before = env.cfg.get_instance_info_by_name("inst1").beparams
    result = env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", runtime_mem=160)
    assert result == [["runtime_memory", 160]]
    assert calls == [("node1", "inst1", 160)]
    assert env.rpc.running["node1"]["inst1"]["memory"] == 160
    # the configured memory does not change
    assert env.cfg.get_instance_info_by_name("inst1").beparams == before


@pytest.mark.parametrize("mem", [64, 512], ids=["below-minmem", "above-maxmem"])
def test_runtime_memory_outside_min_max_needs_force(env: Any, mem: int) -> None:  # noqa: F811
    calls = _balloon(env.rpc)
    _create(env, template="diskless", beparams={"minmem": 128, "maxmem": 256})
    before = env.raw()
    with pytest.raises(errors.OpPrereqError, match="between 128 and 256"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", runtime_mem=mem)
    assert calls == [] and env.raw() == before
    env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", runtime_mem=mem, force=True)
    assert calls == [("node1", "inst1", mem)]


def test_runtime_memory_of_a_stopped_instance_refused(env: Any) -> None:  # noqa: F811
    calls = _balloon(env.rpc)
    _create(env, template="diskless", start=False, beparams={"minmem": 128, "maxmem": 256})
    with pytest.raises(errors.OpPrereqError, match="not running") as info:
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", runtime_mem=160)
    assert info.value.ecode == errors.ECODE_STATE
    assert calls == []


def test_runtime_memory_node_refusal_is_the_job_error(env: Any) -> None:  # noqa: F811
    _create(env, template="diskless", beparams={"minmem": 128, "maxmem": 256})
    env.rpc.fail["instance_balloon_memory"] = "not enough memory on node1"
    with pytest.raises(errors.OpExecError, match="not enough memory"):
        env.run("OP_INSTANCE_SET_PARAMS", instance_name="inst1", runtime_mem=200)


def test_rename_to_the_same_name_reruns_only_the_os_script(env: Any) -> None:  # noqa: F811
    _create(env, start=False)
    inst = env.cfg.get_instance_info_by_name("inst1")
    disk_ids = [d.logical_id for d in env.cfg.get_instance_disks(inst.uuid)]
    env.rpc.calls.clear()
    assert env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst1",
                   name_check=False, ip_check=False) == "inst1"
    procs = [proc for proc, _ in env.rpc.calls]
    assert "instance_run_rename" in procs and "blockdev_rename" not in procs
    after = env.cfg.get_instance_info_by_name("inst1")
    assert after.uuid == inst.uuid
    assert [d.logical_id for d in env.cfg.get_instance_disks(inst.uuid)] == disk_ids


def test_rename_to_the_same_name_still_needs_a_stopped_instance(env: Any) -> None:  # noqa: F811
    _create(env)
    with pytest.raises(errors.OpPrereqError, match="stop it"):
        env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst1",
                name_check=False, ip_check=False)


def test_rename_to_another_instances_name_still_refused(env: Any) -> None:  # noqa: F811
    _create(env, start=False)
    _create(env, name="inst2", start=False)
    with pytest.raises(errors.OpPrereqError, match="already in use") as info:
        env.run("OP_INSTANCE_RENAME", instance_name="inst1", new_name="inst2",
                name_check=False, ip_check=False)
    assert info.value.ecode == errors.ECODE_EXISTS
