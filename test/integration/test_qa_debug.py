"""Ganeti's QA uses of ``gnt-debug wconfd`` and ``gnt-debug test-osparams``
against our daemons (doc/commands.md, doc/compat.md).

A real 2-node virtual cluster.  ``wconfd`` is answered by our master (it
holds the config and the locks; there is no WConfd): ``flushconfig``
writes the config file again and pushes it to the master candidates
(qa_cluster.TestClusterMasterFailover runs it before a failover); the lock
lists come from the master's lock monitor.  ``test-osparams`` follows
qa_instance.TestSecretOsParams up to its last check: the queued job's file
holds ``"param1":"<redacted>"``, never the value; the feedback names the
keys only (Ganeti's prints the values back; ours never does).
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from vcluster_harness import VirtualCluster

from ganeti import serializer

pytestmark = pytest.mark.timeout(600)

N1, N2 = "node1.vcluster", "node2.vcluster"
SECRETS = "param1=secret1,param2=secret2"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcd"), nodes=2, use_ssh=False) as cluster:
        yield cluster


def _status(vc: Any, job_id: str) -> str:
    return vc.ok("gnt-job", "list", "--no-headers", "-o", "status", job_id).strip()


def _wait_status(vc: Any, job_id: str, wanted: set[str], rounds: int = 600) -> str:
    status = ""
    for _ in range(rounds):
        status = _status(vc, job_id)
        if status in wanted:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} stayed {status}")


def _config(vc: Any, node: str) -> dict[str, Any]:
    with open(vc.paths(node).config_file, "rb") as fh:
        return serializer.loads(fh.read())


def test_wconfd_echo(vc):
    assert vc.ok("gnt-debug", "wconfd", "echo", "hello there") == "Answer: hello there\n"


def test_wconfd_flushconfig_writes_and_distributes_the_config(vc):
    before = _config(vc, N1)
    os.utime(vc.paths(N1).config_file, (0, 0))
    assert vc.ok("gnt-debug", "wconfd", "flushconfig") == "Configuration flushed.\n"
    after = _config(vc, N1)
    assert after["serial_no"] == before["serial_no"] + 1
    assert os.stat(vc.paths(N1).config_file).st_mtime > 0
    assert after["nodes"] == before["nodes"]
    # the answer comes once the candidates were sent it: node2 has the new serial
    assert _config(vc, N2)["serial_no"] == after["serial_no"]


def test_wconfd_lock_lists_show_a_running_delay(vc):
    job_id = vc.ok("gnt-debug", "delay", "--submit", "--print-jobid", "300").strip()
    try:
        _wait_status(vc, job_id, {"running"})
        master_uuid = vc.ok("gnt-node", "list", "--no-headers", "-o", "uuid", N1).strip()
        mine = vc.ok("gnt-debug", "wconfd", "listlocks", job_id)
        assert mine == (f"Answer: [['cluster/BGL', 'shared'],"
                        f" ['node/{master_uuid}', 'exclusive']]\n")
        every = vc.ok("gnt-debug", "wconfd", "listalllocks")
        assert "'cluster/BGL'" in every and f"'node/{master_uuid}'" in every
        owners = vc.ok("gnt-debug", "wconfd", "listalllocksowners")
        assert f"['node/{master_uuid}', [[{job_id}, 'exclusive']]]" in owners
        # the delay's thread is alive: nothing is stale, nothing released
        assert vc.ok("gnt-debug", "wconfd", "cleanuplocks") == "Stale locks cleaned up.\n"
        assert _status(vc, job_id) == "running"
        assert vc.ok("gnt-debug", "wconfd", "listlocks", job_id) == mine
    finally:
        vc.run("gnt-job", "cancel", "--kill", "--yes-do-it", job_id)
    vc.run("gnt-job", "wait", job_id, timeout=120)
    assert vc.ok("gnt-debug", "wconfd", "listlocks", job_id) == "Answer: []\n"


def test_wconfd_refuses_unknown_commands(vc):
    res = vc.run("gnt-debug", "wconfd", "nosuch")
    assert res.returncode == 1 and "Command 'nosuch' not supported" in res.stderr


def test_secret_os_params_job_file_is_redacted(vc):
    # qa_instance._TestRedactionOfSecretOsParams: the job waits behind a delay, its file
    # read while queued (20 running jobs: the default, as the QA puts it back)
    vc.ok("gnt-cluster", "modify", "--max-running-jobs", "1")
    delay_id = vc.ok("gnt-debug", "delay", "--print-jobid", "--submit", "300").strip()
    try:
        job_id = vc.ok("gnt-debug", "test-osparams", "--os-parameters-secret", SECRETS,
                       "--submit", "--print-jobid").strip()
        with open(os.path.join(vc.paths(N1).queue_dir, f"job-{job_id}")) as fh:
            text = fh.read()
        assert '"param1":"<redacted>"' in text and '"param2":"<redacted>"' in text
        assert "secret1" not in text and "secret2" not in text
    finally:
        vc.ok("gnt-job", "cancel", "--kill", "--yes-do-it", delay_id)
        vc.ok("gnt-cluster", "modify", "--max-running-jobs", "20")
    vc.ok("gnt-job", "wait", job_id, timeout=120)
    assert _status(vc, job_id) == "success"
    for node in (N1, N2):       # the finished job, and its copy on the candidate
        path = os.path.join(vc.paths(node).queue_dir, f"job-{job_id}")
        if os.path.exists(path):
            with open(path) as fh:
                assert "secret1" not in fh.read()


def test_secret_os_params_feedback_names_the_keys(vc):
    res = vc.run("gnt-debug", "test-osparams", "--os-parameters-secret", SECRETS)
    assert res.returncode == 0, res.stderr
    assert "Secret OS parameters: param1, param2 (received; values are never written" \
        in res.stdout + res.stderr
    assert "secret1" not in res.stdout + res.stderr


def test_secret_os_params_are_required(vc):
    res = vc.run("gnt-debug", "test-osparams")
    assert res.returncode != 0 and "Opcode needs secret parameters" in res.stderr
