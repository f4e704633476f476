"""tools/burnin on a real 3-node virtual cluster, once per template, serial and with -p.

Burnin is run the way operators run it (``tools/burnin`` with the master
node's environment, over LUXI).  Every step the template supports must run
(only the skips listed in :data:`EXPECTED_SKIPS` are allowed), and nothing
may be left behind: no instance in the config, no disk image, no
fake-hypervisor state file.  A failing step (a pre hook refusing reboots)
must make burnin exit 1 with the job's error after removing its instances.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from instance_helpers import node_files
from vcluster_harness import VirtualCluster

from ganeti import opcodes
from tools.harness import vcluster

pytestmark = pytest.mark.timeout(300)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BURNIN = os.path.join(REPO, "tools", "burnin")
INSTANCES = ["b1.example.com", "b2.example.com", "b3.example.com"]
SHORT = ["--disk-size", "8M", "--disk-growth", "4M"]

#: The steps a template does not support on this cluster, and nothing else.
EXPECTED_SKIPS = {
    "diskless": {"grow-disks", "replace1", "replace2", "move", "add-remove-disks", "confd"},
    "file": {"replace1", "replace2", "failover", "migrate", "confd"},
    "sharedfile": {"replace1", "replace2", "move", "confd"},
}

#: Until the master has export/import, burnin runs without that step.
HAVE_IMPEXP = "OP_BACKUP_EXPORT" in opcodes.OP_REGISTRY


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcb"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def burnin(vc, *argv: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **vcluster.node_env(vc.cluster, vc.cluster.master_node)}
    extra = [] if HAVE_IMPEXP else ["--no-importexport"]
    return subprocess.run([sys.executable, BURNIN, "-o", "tinyos", "--no-name-check",
                           "--no-ip-check", *extra, *argv], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def timing_rows(stdout: str) -> dict[str, str]:
    """``{step: status}`` from the closing table."""
    lines = stdout.splitlines()
    start = lines.index("- Step timings") + 2
    return {line.split()[0]: line.split()[1] for line in lines[start:-1]}


def _leftovers(vc) -> list[str]:
    return sorted(path for path in node_files(vc) if any(i in path for i in INSTANCES))


@pytest.mark.parametrize("template", sorted(EXPECTED_SKIPS))
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_burnin_passes(vc, template: str, parallel: bool) -> None:
    argv = ["-t", template, *SHORT, "--rename", "spare.example.com", *INSTANCES]
    res = burnin(vc, *(["-p"] if parallel else []), *argv)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = timing_rows(res.stdout)
    skipped = {step for step, status in rows.items() if status == "skipped"}
    expected = EXPECTED_SKIPS[template] | (set() if HAVE_IMPEXP else {"export-import"})
    assert skipped == expected, res.stdout
    assert set(rows.values()) == {"done", "skipped"}
    # each skip is explained on its own line
    skip_lines = [line for line in res.stdout.splitlines() if line.startswith("- Skipping ")]
    assert len(skip_lines) == len(expected) and all(line.endswith(")") for line in skip_lines)
    # the primaries rotated over the three nodes
    for name, node in zip(INSTANCES, vc.names):
        assert f"  * instance {name}\n    on {node}\n" in res.stdout
    # nothing is left behind
    assert vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").strip() == ""
    assert _leftovers(vc) == []
    failed = vc.ok("gnt-job", "list", "--no-headers", "-o", "id,status")
    assert "error" not in failed.split()


def test_burnin_keep_instances_leaves_them_running(vc) -> None:
    res = burnin(vc, "-t", "file", *SHORT, "-K", "--no-move", "--no-reboot",
                 "--no-reinstall", "--no-activate-disks", "--no-add-disks",
                 "--no-add-nics", "--no-renamesame", "--no-importexport", "--no-startstop",
                 *INSTANCES[:2])
    assert res.returncode == 0, res.stdout + res.stderr
    out = vc.ok("gnt-instance", "list", "--no-headers", "--separator=|",
                "-o", "name,status,disk.sizes,be/minmem,oper_ram")
    rows = sorted(line.split("|") for line in out.splitlines())
    # grown by 4M, and ballooned down to minmem by the runtime-memory step
    assert rows == [[INSTANCES[0], "running", "12", "128", "128"],
                    [INSTANCES[1], "running", "12", "128", "128"]]
    for name in INSTANCES[:2]:
        vc.ok("gnt-instance", "remove", "-f", name)
    assert _leftovers(vc) == []


def _refuse_reboots(vc) -> str:
    hook_dir = vc.paths(vc.names[0]).hooks_dir("instance-reboot", "pre")
    os.makedirs(hook_dir, exist_ok=True)
    script = os.path.join(hook_dir, "10-refuse")
    with open(script, "w") as fh:
        fh.write("#!/bin/sh\necho 'reboots are refused here' >&2\nexit 1\n")
    os.chmod(script, 0o755)
    return script


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_burnin_failure_exits_1_after_removing_its_instances(vc, parallel: bool) -> None:
    script = _refuse_reboots(vc)
    try:
        res = burnin(vc, *(["-p"] if parallel else []), "-t", "sharedfile", *SHORT,
                     *INSTANCES)
    finally:
        os.unlink(script)
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.startswith("burnin: reboot: job "), res.stderr
    assert "10-refuse" in res.stderr or "hook" in res.stderr.lower()
    rows = timing_rows(res.stdout)
    assert rows["reboot"] == "failed" and rows["remove"] == "done"
    assert "rename-same" not in rows
    assert "- Error detected: opcode buffer follows:" in res.stdout
    assert vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").strip() == ""
    assert _leftovers(vc) == []
