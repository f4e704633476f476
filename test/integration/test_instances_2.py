"""gnt-instance on a real 3-node virtual cluster: failures, runtime statuses, parallelism, hooks.

One cluster shared by the module (tests run in file order).  Broken and
slow OS definitions and hook scripts are installed directly in the node
roots; guest events (crash, user shutdown, a guest started behind the
master's back) go through the fake hypervisor's state files.
"""

from __future__ import annotations

import os
import re

import pytest
from instance_helpers import (NOCHECK, config_bytes, disk_files, fake_hv, install_os,
                              interrupt_migration, rows, start_behind_masters_back, status_of)
from vcluster_harness import SHORT_RPC_TIMEOUTS, VirtualCluster

from ganeti import constants, daemonctl, luxi
from ganeti.hypervisor import base as hvbase
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(240)

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"
RUN1 = "run1.example.com"
RUN3 = "run3.example.com"
DOWN2 = "down2.example.com"

_BROKEN_CREATE = """#!/bin/sh
echo "brokenos: writing half an image" >&2
printf 'HALF' | dd of="$DISK_0_PATH" bs=1 seek=0 conv=notrunc 2>/dev/null
echo "brokenos: the installer crashed" >&2
exit 3
"""

_SLOW_CREATE = """#!/bin/sh
sleep 1
exit 0
"""


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcj"), nodes=3, use_ssh=False,
                        masterd_args=SHORT_RPC_TIMEOUTS) as cluster:
        install_os(cluster, "brokenos", {"create": _BROKEN_CREATE})
        install_os(cluster, "slowos", {"create": _SLOW_CREATE})
        install_os(cluster, "partialos", {}, nodes=[N1, N2])
        yield cluster


def _add(vc, name: str, node: str, *extra: str, template: str = "diskless") -> None:
    vc.ok("gnt-instance", "add", "-t", template, "-o", "tinyos", "-n", node, *NOCHECK,
          *extra, name)


def test_failing_os_create_removes_what_add_created(vc):
    before = config_bytes(vc)
    res = vc.run("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "brokenos",
                 "-n", N2, *NOCHECK, "broken1.example.com")
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "broken1.example.com" in out and "the installer crashed" in out, out
    assert "broken1.example.com" not in config_bytes(vc).decode()
    assert "broken1.example.com" not in {r[0] for r in rows(vc, "name")}
    for node in vc.names:
        assert disk_files(vc, node, "broken1.example.com") == []
        assert not os.path.isdir(os.path.join(vc.paths(node).file_storage_dir,
                                              "broken1.example.com"))
        assert not os.path.exists(os.path.join(vc.paths(node).hypervisor_state_dir,
                                               "broken1.example.com.json"))
    assert config_bytes(vc) != b"" and len(before) > 0
    # the OS log was kept on the node
    logs = os.listdir(vc.paths(N2).os_log_dir)
    assert any("brokenos" in name and "broken1.example.com" in name for name in logs), logs


def test_os_missing_on_one_node_is_reported(vc):
    res = vc.run("gnt-os", "diagnose")
    diag = res.stdout
    block = diag[diag.index("OS: partialos"):].split("\n\n")[0]
    head, *node_lines = block.splitlines()
    assert "global status: invalid" in head or "partial" in head, block
    assert any(N3 in line and "missing" in line for line in node_lines), block
    assert any(N1 in line and "status: valid" in line for line in node_lines), block
    assert res.returncode != 0      # not every OS is valid everywhere
    assert "partialos" not in vc.ok("gnt-os", "list", "--no-headers").split()
    res = vc.run("gnt-instance", "add", "-t", "diskless", "-o", "partialos", "-n", N3,
                 *NOCHECK, "partial3.example.com")
    assert res.returncode != 0 and "partialos" in res.stdout + res.stderr


def test_setup_instances(vc):
    _add(vc, RUN1, N1)
    _add(vc, RUN3, N3)
    _add(vc, DOWN2, N2, "--no-start")
    assert rows(vc, "name,status,pnode") == [[DOWN2, "ADMIN_down", N2],
                                             [RUN1, "running", N1], [RUN3, "running", N3]]


def test_crash_gives_error_down(vc):
    fake_hv(vc, N1).simulate_crash(RUN1)
    assert status_of(vc, RUN1) == "ERROR_down"
    vc.ok("gnt-instance", "startup", RUN1)
    assert status_of(vc, RUN1) == "running"


def test_user_shutdown_gives_user_down(vc):
    fake_hv(vc, N1).simulate_user_shutdown(RUN1)
    assert status_of(vc, RUN1) == "USER_down"
    vc.ok("gnt-instance", "startup", RUN1)
    assert status_of(vc, RUN1) == "running"


def test_running_behind_masters_back_gives_error_up(vc):
    start_behind_masters_back(vc, N2, DOWN2)
    assert rows(vc, "status,admin_state", DOWN2) == [["ERROR_up", "down"]]
    vc.ok("gnt-instance", "shutdown", DOWN2)
    assert status_of(vc, DOWN2) == "ADMIN_down"
    assert fake_hv(vc, N2).get_instance_state(DOWN2) is None


def test_running_on_wrong_node(vc):
    start_behind_masters_back(vc, N1, DOWN2)
    try:
        assert status_of(vc, DOWN2) == "ERROR_wrongnode"
    finally:
        fake_hv(vc, N1).stop_instance(DOWN2, force=True)
    assert status_of(vc, DOWN2) == "ADMIN_down"


def test_node_daemon_down_gives_error_nodedown(vc):
    paths = vc.paths(N3)
    daemonctl.stop_daemon(paths, constants.NODED, timeout=10.0)
    try:
        assert rows(vc, "name,status", RUN3, RUN1) == [[RUN3, "ERROR_nodedown"],  # as given
                                                       [RUN1, "running"]]
        # an operation needing the node fails cleanly
        res = vc.run("gnt-instance", "reboot", RUN3)
        assert res.returncode != 0 and N3 in res.stdout + res.stderr
    finally:
        vcluster.start(vc.cluster, N3)
    assert status_of(vc, RUN3) == "running"


def _job_ids(stderr: str) -> list[int]:
    return [int(m) for m in re.findall(r"JobID: (\d+)", stderr)]


def _ts(value) -> float:
    if isinstance(value, (list, tuple)):
        return value[0] + value[1] / 1e6
    return float(value)


def test_adds_on_different_instances_run_in_parallel(vc):
    ids = []
    for name, node in (("slow1.example.com", N1), ("slow2.example.com", N2)):
        res = vc.run("gnt-instance", "add", "-t", "diskless", "-o", "slowos", "--no-start",
                     "--submit", "-n", node, *NOCHECK, name)
        assert res.returncode == 0, res.stdout + res.stderr
        ids += _job_ids(res.stdout + res.stderr)
    assert len(ids) == 2
    for job_id in ids:
        vc.ok("gnt-job", "wait", str(job_id))
    cl = luxi.Client(vc.paths(N1).master_socket)
    (s1, e1, st1), (s2, e2, st2) = cl.QueryJobs(ids, ["start_ts", "end_ts", "status"])
    assert st1 == st2 == constants.JOB_STATUS_SUCCESS
    s1, e1, s2, e2 = map(_ts, (s1, e1, s2, e2))
    assert e1 - s1 >= 0.9 and e2 - s2 >= 0.9          # each really ran the slow create
    assert s1 < e2 and s2 < e1, (s1, e1, s2, e2)      # the running intervals overlap
    assert rows(vc, "name,status", "slow1.example.com", "slow2.example.com") == \
        [["slow1.example.com", "ADMIN_down"], ["slow2.example.com", "ADMIN_down"]]


def _install_env_hook(vc, hpath: str, out_dir: str) -> None:
    for node in vc.names:
        hook_dir = vc.paths(node).hooks_dir(hpath, "post")
        os.makedirs(hook_dir, exist_ok=True)
        script = os.path.join(hook_dir, "50-env")
        target = os.path.join(out_dir, f"{hpath}-{node}.env")
        with open(script, "w") as fh:
            fh.write(f"#!/bin/sh\nenv > '{target}'\n")
        os.chmod(script, 0o755)


def _read_env(path: str) -> dict[str, str]:
    with open(path) as fh:
        return dict(line.split("=", 1) for line in fh.read().splitlines() if "=" in line)


def test_post_hooks_get_the_instance_environment(vc, tmp_path):
    _install_env_hook(vc, "instance-reboot", str(tmp_path))
    _install_env_hook(vc, "instance-add", str(tmp_path))
    vc.ok("gnt-instance", "reboot", RUN3)
    env = _read_env(str(tmp_path / f"instance-reboot-{N3}.env"))
    assert env["GANETI_INSTANCE_NAME"] == RUN3
    assert env["GANETI_INSTANCE_PRIMARY"] == N3
    assert env["GANETI_HOOKS_PHASE"] == "post"
    assert env["GANETI_OP_CODE"] == "OP_INSTANCE_REBOOT"
    assert env["GANETI_INSTANCE_DISK_TEMPLATE"] == "diskless"
    assert env["GANETI_INSTANCE_OS_TYPE"] == "tinyos"
    # the master runs the post hooks too
    assert os.path.exists(tmp_path / f"instance-reboot-{N1}.env")
    _add(vc, "hooked.example.com", N2, "-B", "vcpus=2")
    env = _read_env(str(tmp_path / f"instance-add-{N2}.env"))
    assert env["GANETI_INSTANCE_NAME"] == "hooked.example.com"
    assert env["GANETI_INSTANCE_VCPUS"] == "2"
    assert env["GANETI_INSTANCE_NIC_COUNT"] == "1"


def test_startup_shutdown_by_tags_and_force_multiple(vc):
    vc.ok("gnt-instance", "add-tags", RUN1, "batch")
    vc.ok("gnt-instance", "add-tags", RUN3, "batch")
    before = config_bytes(vc)
    # more than one instance selected: refused without --force-multiple, nothing changed
    res = vc.run("gnt-instance", "shutdown", "--tags", "batch")
    assert res.returncode == 1 and "--force-multiple" in res.stderr, res.stderr
    assert config_bytes(vc) == before
    assert rows(vc, "name,status", RUN1, RUN3) == [[RUN1, "running"], [RUN3, "running"]]
    vc.ok("gnt-instance", "shutdown", "--tags", "--force-multiple", "--timeout", "0", "batch")
    assert rows(vc, "name,status") == [[DOWN2, "ADMIN_down"], ["hooked.example.com", "running"],
                                       [RUN1, "ADMIN_down"], [RUN3, "ADMIN_down"],
                                       ["slow1.example.com", "ADMIN_down"],
                                       ["slow2.example.com", "ADMIN_down"]]
    assert fake_hv(vc, N1).get_instance_state(RUN1) is None
    vc.ok("gnt-instance", "startup", "--tags", "--force-multiple", "batch")
    assert rows(vc, "name,status", RUN1, RUN3) == [[RUN1, "running"], [RUN3, "running"]]
    assert fake_hv(vc, N3).get_instance_state(RUN3) is not None
    assert status_of(vc, DOWN2) == "ADMIN_down"


def test_add_with_os_size_and_no_install(vc):
    name = "blank.example.com"
    vc.ok("gnt-instance", "add", "-t", "file", "-s", "4M", "-o", "tinyos", "--no-install",
          "--no-start", "-n", N2, *NOCHECK, name)
    assert rows(vc, "status,disk.count,disk.sizes", name) == [["ADMIN_down", "1", "4"]]
    (disk,) = disk_files(vc, N2, name)
    assert os.path.getsize(disk) == 4 << 20
    with open(disk, "rb") as fh:
        assert fh.read(11) == b"\0" * 11      # the OS create script did not run
    vc.ok("gnt-instance", "remove", "-f", name)


def test_migrate_non_live_and_cleanup(vc):
    name = "mig.example.com"
    _add(vc, name, N1, "--disk", "0:size=4M", template="sharedfile")
    vc.ok("gnt-instance", "migrate", "-f", "--non-live", "-n", N2, name)
    assert rows(vc, "status,pnode", name) == [["running", N2]]
    assert fake_hv(vc, N2).get_instance_state(name) is not None
    assert fake_hv(vc, N1).get_instance_state(name) is None
    out = vc.ok("gnt-instance", "migrate", "-f", "--cleanup", name)
    assert "nothing to clean up" in out
    assert rows(vc, "status,pnode", name) == [["running", N2]]
    vc.ok("gnt-instance", "remove", "-f", name)


def _hv_state(vc, node: str, name: str) -> str | None:
    state = fake_hv(vc, node).get_instance_state(name)
    return None if state is None else state["state"]


def test_cleanup_without_target_finds_the_node_the_migration_went_to(vc):
    """The migration went to N3 and its guest runs there; the master died before the
    config switch.  ``--cleanup`` without -n asks every node, finds N3 and finishes
    the migration (the first other node, N2, has nothing: taken as the target, the
    source was resumed and the guest ran twice on one shared disk)."""
    name = "lost.example.com"
    _add(vc, name, N1, "--disk", "0:size=4M", template="sharedfile")
    interrupt_migration(vc, name, N1, N3, resumed=True)
    assert [_hv_state(vc, n, name) for n in (N1, N2, N3)] == ["migrating", None, "running"]
    out = vc.ok("gnt-instance", "migrate", "-f", "--cleanup", name)
    assert f"is running on {N3}: the migration was going there" in out, out
    assert f"runs on {N3}: finishing the migration" in out, out
    assert rows(vc, "status,pnode", name) == [["running", N3]]
    assert [_hv_state(vc, n, name) for n in (N1, N2, N3)] == [None, None, "running"]
    vc.ok("gnt-instance", "remove", "-f", name)


def test_cleanup_without_target_refuses_what_it_cannot_tell(vc):
    """Leftovers on two nodes: refused with the nodes named, nothing changed; with -n
    the operator picks the node and the other leftover is left alone."""
    name = "twice.example.com"
    _add(vc, name, N1, "--disk", "0:size=4M", template="sharedfile")
    interrupt_migration(vc, name, N1, N2, resumed=False)
    spec = hvbase.InstanceSpec(name=name)
    # a second incoming copy, as from an earlier interrupted try to N3
    fake_hv(vc, N3).accept_instance(spec, {"state": fake_hv(vc, N1).get_instance_state(name)},
                                    N3)
    before = config_bytes(vc)
    res = vc.run("gnt-instance", "migrate", "-f", "--cleanup", name)
    assert res.returncode != 0
    assert (f"is on several nodes besides its primary: {N2} (incoming), {N3} (incoming);"
            " give the node its migration was going to with -n") in res.stdout + res.stderr
    assert config_bytes(vc) == before
    assert [_hv_state(vc, n, name) for n in (N1, N2, N3)] == ["migrating", "incoming",
                                                               "incoming"]
    res = vc.run("gnt-instance", "migrate", "-f", "--cleanup", "-n", N1, name)
    assert res.returncode != 0
    assert f"Node {N1} is the primary node of instance {name}" in res.stdout + res.stderr
    vc.ok("gnt-instance", "migrate", "-f", "--cleanup", "-n", N2, name)
    assert rows(vc, "status,pnode", name) == [["running", N1]]
    assert [_hv_state(vc, n, name) for n in (N1, N2, N3)] == ["running", None, "incoming"]
    fake_hv(vc, N3).stop_instance(name, force=True)
    vc.ok("gnt-instance", "remove", "-f", name)


def test_prealloc_wipe_disks_wipes_new_disks_and_the_grown_part(vc):
    name = "wipe.example.com"
    vc.ok("gnt-cluster", "modify", "--prealloc-wipe-disks", "yes")
    try:
        assert "preallocation wipe disks: True" in vc.ok("gnt-cluster", "info")
        out = vc.ok("gnt-instance", "add", "-t", "file", "-s", "8M", "-o", "tinyos",
                    "--no-start", "-n", N2, *NOCHECK, name)
        assert f"* wiping disk disk/0 of {name} on {N2} (8 MiB)" in out
        assert "wipe: done, 8.0 MiB" in out          # the final progress entry
        (disk,) = disk_files(vc, N2, name)
        # a stray byte left after the wipe (the tinyos create script writes the start)
        with open(disk, "r+b") as fh:
            fh.seek((8 << 20) - 1)
            fh.write(b"\xff")
        out = vc.ok("gnt-instance", "grow-disk", name, "0", "4M")
        assert f"* wiping disk disk/0 of {name} on {N2} (4 MiB from 8 MiB)" in out
        with open(disk, "rb") as fh:
            fh.seek((8 << 20) - 1)
            assert fh.read() == b"\xff" + bytes(4 << 20)   # only the grown part was wiped
    finally:
        vc.ok("gnt-cluster", "modify", "--prealloc-wipe-disks", "no")
        vc.run("gnt-instance", "remove", "-f", name)
