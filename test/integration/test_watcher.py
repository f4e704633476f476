"""ganeti-watcher on a real 3-node virtual cluster (fake hypervisor).

Every pass is one ``daemons/ganeti-watcher --wait-children`` per node (the
master last), run with the node's environment by ``tools/vcluster
watcher``'s :func:`tools.harness.vcluster.run_watcher`.  Each test removes
the instances it made, so the passes of later tests find nothing of it.
"""

from __future__ import annotations

import fcntl
import http.client
import os
import signal
import ssl
import subprocess
import sys
import time

import pytest
from host_helpers import request_children
from instance_helpers import NOCHECK, disk_files, fake_hv, status_of
from vcluster_harness import VirtualCluster

from ganeti import constants, daemonctl, luxi, serializer
from tools.harness import vcluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

N1, N2, N3 = "node1.vcluster", "node2.vcluster", "node3.vcluster"


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcw"), nodes=3, use_ssh=False) as cluster:
        yield cluster


def watch(vc, node: str | None = None, *args: str) -> dict[str, tuple[int, str]]:
    """One pass; ``{node: (exit status, its new watcher.log text)}``."""
    return {name: (code, "\n".join(lines)) for name, code, lines in
            vcluster.run_watcher(vc.cluster, node, ["--wait-children", *args])}


def master_log(vc, *args: str) -> str:
    code, text = watch(vc, N1, *args)[N1]
    assert code == 0, text
    return text


def add(vc, name: str, node: str, *extra: str) -> None:
    vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-o", "tinyos",
          "-n", node, *NOCHECK, *extra, name)


def remove(vc, name: str) -> None:
    vc.ok("gnt-instance", "remove", "-f", "--ignore-failures", name)


def jobs(vc) -> list[list[str]]:
    out = vc.ok("gnt-job", "list", "--no-headers", "--separator=|", "-o", "id,status,summary")
    return [line.split("|") for line in out.splitlines() if line.strip()]


def state_file(vc) -> str:
    data = vc.paths(N1).data_dir
    (name,) = [n for n in os.listdir(data) if n.startswith("watcher.") and n.endswith(".data")]
    return os.path.join(data, name)


def test_nothing_to_do_on_a_healthy_cluster(vc):
    before = jobs(vc)
    result = watch(vc)
    assert sorted(result) == [N1, N2, N3]
    assert all(code == 0 for code, _ in result.values()), result
    assert "0 job(s) submitted" in result[N1][1]
    assert jobs(vc) == before


def rapi_version(vc) -> tuple[int, bytes]:
    """``GET /version`` from the master's RAPI daemon, checked against rapi.pem, and the
    certificate it served (DER)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=vc.paths(N1).rapi_pem)
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=ctx, timeout=30)
    try:
        conn.request("GET", "/version")
        resp = conn.getresponse()
        assert resp.status == 200
        cert = conn.sock.getpeercert(binary_form=True)
        return serializer.loads(resp.read()), cert
    finally:
        conn.close()


def test_killed_node_daemon_master_daemon_and_rapi_daemon_are_back_after_one_pass(vc):
    noded = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    masterd = daemonctl.daemon_pid(vc.paths(N1), constants.MASTERD)
    rapi = daemonctl.daemon_pid(vc.paths(N1), constants.RAPI)
    assert rapi is not None
    os.kill(noded, signal.SIGKILL)
    os.kill(masterd, signal.SIGKILL)
    os.kill(rapi, signal.SIGKILL)
    result = watch(vc)
    assert "started the node daemon" in result[N2][1]
    assert "started the master daemon" in result[N1][1]
    assert "RAPI daemon: started the RAPI daemon" in result[N1][1]
    assert result[N1][0] == 0, result[N1][1]
    new_noded = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    new_masterd = daemonctl.daemon_pid(vc.paths(N1), constants.MASTERD)
    new_rapi = daemonctl.daemon_pid(vc.paths(N1), constants.RAPI)
    assert new_noded not in (None, noded) and new_masterd not in (None, masterd)
    assert new_rapi not in (None, rapi)
    assert "node2.vcluster" in vc.ok("gnt-node", "list", "-o", "name,mfree")
    assert luxi.Client(vc.paths(N1).master_socket).QueryClusterInfo()["name"]
    assert rapi_version(vc)[0] == 2


def test_hung_master_daemon_is_killed_and_restarted(vc):
    masterd = daemonctl.daemon_pid(vc.paths(N1), constants.MASTERD)
    os.kill(masterd, signal.SIGSTOP)
    try:
        text = master_log(vc, "--daemon-timeout", "3")     # (default 15 s)
    finally:
        try:
            os.kill(masterd, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert f"restarted the hung master daemon (old pid {masterd})" in text
    assert daemonctl.daemon_pid(vc.paths(N1), constants.MASTERD) not in (None, masterd)
    vc.ok("gnt-cluster", "info")


def test_hung_rapi_daemon_is_killed_and_restarted(vc):
    rapi = daemonctl.daemon_pid(vc.paths(N1), constants.RAPI)
    assert rapi is not None and rapi_version(vc)[0] == 2
    os.kill(rapi, signal.SIGSTOP)
    try:
        text = master_log(vc, "--daemon-timeout", "3")     # (default 10 s)
    finally:
        try:
            os.kill(rapi, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert f"RAPI daemon: restarted the hung RAPI daemon (old pid {rapi})" in text
    assert daemonctl.daemon_pid(vc.paths(N1), constants.RAPI) not in (None, rapi)
    assert rapi_version(vc)[0] == 2
    # a healthy RAPI daemon is left alone by the next pass
    again = daemonctl.daemon_pid(vc.paths(N1), constants.RAPI)
    assert "RAPI daemon:" not in master_log(vc)
    assert daemonctl.daemon_pid(vc.paths(N1), constants.RAPI) == again


def test_crashed_instance_is_restarted_by_one_pass(vc):
    add(vc, "crash1.vcluster", N2)
    fake_hv(vc, N2).simulate_crash("crash1.vcluster")
    assert status_of(vc, "crash1.vcluster") == "ERROR_down"
    text = master_log(vc)
    assert "Restarting instance crash1.vcluster (attempt 1 of 5)" in text
    assert status_of(vc, "crash1.vcluster") == "running"
    (job,) = [j for j in jobs(vc) if j[2] == "INSTANCE_STARTUP(crash1.vcluster)"]
    assert job[1] == "success"
    reason = vc.ok("gnt-job", "info", job[0])
    assert "gnt:watcher" in reason
    status = open(vc.paths(N1).watcher_instance_status_file).read()
    assert "crash1.vcluster ERROR_down\n" in status     # what this pass saw
    remove(vc, "crash1.vcluster")


def test_user_down_instance_is_cleaned_up_with_a_shutdown(vc):
    add(vc, "user1.vcluster", N3)
    fake_hv(vc, N3).simulate_user_shutdown("user1.vcluster")
    assert status_of(vc, "user1.vcluster") == "USER_down"
    text = master_log(vc)
    assert "USER_down instance user1.vcluster" in text
    assert [j[1] for j in jobs(vc) if j[2] == "INSTANCE_SHUTDOWN(user1.vcluster)"] == ["success"]
    assert status_of(vc, "user1.vcluster") != "USER_down"
    remove(vc, "user1.vcluster")


def test_instance_failing_to_start_is_tried_five_times_then_given_up(vc):
    name = "broken1.vcluster"
    add(vc, name, N2)
    fake_hv(vc, N2).simulate_crash(name)
    for path in disk_files(vc, N2, name):
        os.remove(path)                # every start fails: the disk is gone
    logs = [master_log(vc) for _ in range(7)]
    starts = [j for j in jobs(vc) if j[2] == f"INSTANCE_STARTUP({name})"]
    assert len(starts) == 5 and all(j[1] == "error" for j in starts)
    assert [f"attempt {k} of 5" in logs[k - 1] for k in range(1, 6)] == [True] * 5
    giving_up = [text.count(f"Instance {name} could not be restarted after 5 attempts;"
                            " giving up") for text in logs]
    assert giving_up == [0, 0, 0, 0, 0, 1, 0]
    # eight hours after the last attempt the attempts expire (stored timestamps moved back)
    path = state_file(vc)
    data = serializer.loads(open(path).read())
    data["instances"][name]["last"] -= 8 * 3600
    with open(path, "w") as fh:
        fh.write(serializer.dumps(data))
    text = master_log(vc)
    assert "attempt 1 of 5" in text
    assert len([j for j in jobs(vc) if j[2] == f"INSTANCE_STARTUP({name})"]) == 6
    remove(vc, name)


def test_paused_watcher_does_nothing_unless_told_to_ignore_the_pause(vc):
    vc.ok("gnt-cluster", "watcher", "pause", "1h")
    try:
        add(vc, "paused1.vcluster", N3)
        fake_hv(vc, N3).simulate_crash("paused1.vcluster")
        result = watch(vc)
        assert all("is paused until" in text and "doing nothing" in text
                   for _code, text in result.values()), result
        assert status_of(vc, "paused1.vcluster") == "ERROR_down"
        text = master_log(vc, "--ignore-pause")
        assert "--ignore-pause was given" in text
        assert status_of(vc, "paused1.vcluster") == "running"
    finally:
        vc.ok("gnt-cluster", "watcher", "continue")
    remove(vc, "paused1.vcluster")


def test_second_watcher_exits_at_once_while_one_runs(vc, tmp_path):
    hooks = vc.paths(N3).watcher_hooks_dir
    os.makedirs(hooks, exist_ok=True)
    started, release = tmp_path / "started", tmp_path / "release"
    hook = os.path.join(hooks, "50-wait")
    with open(hook, "w") as fh:
        fh.write(f"#!/bin/sh\ntouch {started}\n"
                 f"for i in $(seq 200); do [ -e {release} ] && exit 0; sleep 0.1; done\n"
                 "exit 1\n")
    os.chmod(hook, 0o755)
    try:
        first = subprocess.Popen([sys.executable, vcluster.WATCHER], env=vc.env(N3),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        second = subprocess.run([sys.executable, vcluster.WATCHER], env=vc.env(N3),
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 0
        assert f"Another watcher is already running on this node (pid {first.pid})" \
            in second.stderr
        release.touch()
        assert first.wait(timeout=60) == 0
    finally:
        release.touch()
        os.remove(hook)
    log = open(vc.paths(N3).daemon_log_file(constants.WATCHER)).read()
    assert "Watcher hook 50-wait succeeded" in log


def test_lock_held_elsewhere_makes_the_watcher_exit(vc):
    fd = os.open(vc.paths(N2).watcher_lock_file, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code, text = watch(vc, N2)[N2]
        assert code == 0 and "Another watcher is already running" in text
        assert "node daemon" not in text.lower().replace("another watcher", "")
    finally:
        os.close(fd)


def test_node_reboot_reactivates_the_disks_of_its_instances(vc):
    add(vc, "reboot1.vcluster", N3)
    master_log(vc)                               # boot ids as they are now
    old = open(vc.paths(N3).vnode_boot_id_file).read()
    vcluster.stop(vc.cluster, N3)
    vc.ok("gnt-cluster", "add-tags", "while-node3-was-down")   # a push node3 misses
    vcluster.start(vc.cluster, N3)               # the node "boots": a new boot id
    new = open(vc.paths(N3).vnode_boot_id_file).read().strip()
    with open(vc.paths(N1).config_file, "rb") as fh:
        current = fh.read()
    with open(vc.paths(N3).config_file, "rb") as fh:
        assert fh.read() != current
    assert new != old.strip()
    deadline = time.monotonic() + 60      # the master's live-data cache lasts a few seconds
    while vc.ok("gnt-node", "list", "--no-headers", "-o", "bootid", N3).strip() != new:
        assert time.monotonic() < deadline, "the master never saw the new boot id"
        time.sleep(0.5)
    text = master_log(vc)
    assert "Node node3.vcluster rebooted (new boot id)" in text
    assert [j[1] for j in jobs(vc)
            if j[2] == "INSTANCE_ACTIVATE_DISKS(reboot1.vcluster)"] == ["success"]
    assert "INSTANCE_ACTIVATE_DISKS" not in master_log(vc)    # only once per reboot
    assert [j[1] for j in jobs(vc) if j[2] == "CLUSTER_REDIST_CONF"] == ["success"]
    with open(vc.paths(N1).config_file, "rb") as fh:
        current = fh.read()
    with open(vc.paths(N3).config_file, "rb") as fh:
        assert fh.read() == current             # the watcher pushed what node3 missed
    vc.ok("gnt-cluster", "remove-tags", "while-node3-was-down")
    remove(vc, "reboot1.vcluster")


def disk_link(vc, node: str, name: str, idx: int = 0) -> str:
    return os.path.join(vc.paths(node).instance_disks_dir, f"{name}:{idx}")


def test_verify_disks_reports_missing_and_wrong_sized_disk_files(vc):
    add(vc, "vdisk1.vcluster", N2)
    add(vc, "vdisk2.vcluster", N3)
    res = vc.run("gnt-cluster", "verify-disks")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No disks need to be activated." in res.stdout
    (small,) = disk_files(vc, N3, "vdisk2.vcluster")
    os.truncate(small, 1024 * 1024)
    res = vc.run("gnt-cluster", "verify-disks", "--group", "default")
    assert res.returncode == 0, res.stdout + res.stderr     # a wrong size is a warning
    assert ("WARNING: Disk 0 of instance vdisk2.vcluster on node node3.vcluster has the"
            " wrong size: 1048576 bytes, expected 8 MiB (8388608 bytes)") in res.stdout
    (gone,) = disk_files(vc, N2, "vdisk1.vcluster")
    os.remove(gone)
    res = vc.run("gnt-cluster", "verify-disks")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Instance vdisk1.vcluster has missing disks:\n\tnode2.vcluster disk/0\n" \
        in res.stdout
    assert "You need to replace or recreate disks for all the above instances" in res.stdout
    assert "Activating disks" not in res.stdout
    # the watcher reports it too, and does not try to activate a missing disk
    text = master_log(vc)
    assert "Instance vdisk1.vcluster has missing disks: node2.vcluster disk/0" in text
    assert "INSTANCE_ACTIVATE_DISKS" not in text
    remove(vc, "vdisk1.vcluster")
    remove(vc, "vdisk2.vcluster")


def test_verify_disks_activates_inactive_disks(vc):
    name = "vdisk3.vcluster"
    add(vc, name, N2)
    vc.ok("gnt-instance", "deactivate-disks", "-f", name)
    assert not os.path.lexists(disk_link(vc, N2, name))
    res = vc.run("gnt-cluster", "verify-disks")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Activating disks for instance '{name}'" in res.stdout
    assert os.path.islink(disk_link(vc, N2, name))
    assert "No disks need to be activated." in vc.ok("gnt-cluster", "verify-disks")
    remove(vc, name)


def test_one_watcher_pass_activates_the_disks_of_an_up_instance(vc):
    name = "vdisk4.vcluster"
    add(vc, name, N3)
    before = {j[0] for j in jobs(vc)}
    vc.ok("gnt-instance", "deactivate-disks", "-f", name)
    assert not os.path.lexists(disk_link(vc, N3, name))
    assert status_of(vc, name) == "running"
    assert "INSTANCE_ACTIVATE_DISKS" not in master_log(vc, "--no-verify-disks")
    text = master_log(vc)
    assert f"Activating the disks of instance {name} (verify-disks found them inactive)" in text
    assert os.path.islink(disk_link(vc, N3, name))
    new = [j for j in jobs(vc) if j[0] not in before]
    assert [(j[1], j[2]) for j in new if j[2].startswith("INSTANCE_ACTIVATE")] == [
        ("success", f"INSTANCE_ACTIVATE_DISKS({name})")]
    assert not [j for j in new if "VERIFY_DISKS" in j[2]]     # archived by the watcher
    assert "INSTANCE_ACTIVATE_DISKS" not in master_log(vc)    # nothing left to do
    remove(vc, name)


def test_jobs_older_than_the_job_age_are_archived_and_newer_kept(vc):
    cl = luxi.Client(vc.paths(N1).master_socket)

    def delay_job() -> int:
        return cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])

    old_job = delay_job()

    def end_of(job: int) -> float:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ((status, end),) = cl.QueryJobs([job], ["status", "end_ts"])
            if status in constants.JOBS_FINALIZED:
                return end[0] + end[1] / 1e6
            time.sleep(0.05)
        raise AssertionError(f"job {job} did not finish")

    old_end = end_of(old_job)
    time.sleep(3.0)
    new_job = delay_job()
    new_end = end_of(new_job)
    assert new_end - old_end >= 3.0
    # the master's "now" is a little later than ours (the pass starts after this line):
    # the cut-off lands just after old_end, and stays before new_end for up to ~3 s
    age = time.time() - old_end - 0.1
    text = master_log(vc, "--job-age", f"{age:.3f}")
    assert "Archived" in text
    listed = {int(j[0]) for j in jobs(vc)}
    assert old_job not in listed and new_job in listed


def test_corrupt_state_file_is_reset(vc):
    with open(state_file(vc), "w") as fh:
        fh.write("{corrupt")
    text = master_log(vc)
    assert "is corrupt" in text and "resetting it" in text
    assert serializer.loads(open(state_file(vc)).read())["version"] == 1
    assert "is corrupt" not in master_log(vc)


def _wait(cond, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_an_operators_shutdown_while_the_pass_waits_is_not_undone(vc, tmp_path):
    """The pass decides to restart a crashed instance, then waits for verify-disks;
    the operator shuts the instance down meanwhile: the startup job is refused
    under the instance's lock (expected_admin_state) and logged as a skip."""
    hold, name = "a-hold.vcluster", "shut1.vcluster"
    add(vc, hold, N2)
    add(vc, name, N3)
    fake_hv(vc, N3).simulate_crash(name)
    assert status_of(vc, name) == "ERROR_down"
    # a reboot of a-hold.vcluster holds its instance lock in a pre-hook until
    # released; the group's verify-disks job (locks sorted: a-hold first) waits
    # for it before it takes shut1's lock
    hooks = vc.paths(N1).hooks_dir("instance-reboot", "pre")
    os.makedirs(hooks, exist_ok=True)
    held, release = tmp_path / "held", tmp_path / "release"
    hook = os.path.join(hooks, "50-hold")
    with open(hook, "w") as fh:
        fh.write(f"#!/bin/sh\ntouch {held}\n"
                 f"for i in $(seq 600); do [ -e {release} ] && exit 0; sleep 0.1; done\n")
    os.chmod(hook, 0o755)
    log_file = vc.paths(N1).daemon_log_file(constants.WATCHER)
    offset = os.path.getsize(log_file) if os.path.exists(log_file) else 0
    watcher = None
    try:
        cl = luxi.Client(vc.paths(N1).master_socket)
        cl.SubmitJob([{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": hold,
                       "reboot_type": "soft"}])
        assert _wait(held.exists)
        watcher = subprocess.Popen([sys.executable, vcluster.WATCHER, "--wait-children"],
                                   env=vc.env(N1), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert _wait(lambda: any(j[2].startswith("GROUP_VERIFY_DISKS") for j in jobs(vc)))
        vc.ok("gnt-instance", "shutdown", "--timeout", "0", name)   # the operator
        assert status_of(vc, name) == "ADMIN_down"
        release.touch()
        _out, err = watcher.communicate(timeout=240)
        assert watcher.returncode == 0, err
    finally:
        release.touch()
        os.remove(hook)
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait(timeout=30)
    with open(log_file, encoding="utf-8") as fh:
        fh.seek(offset)
        text = fh.read()
    assert f"Restarting instance {name} (attempt 1 of 5)" in text
    assert f"Skipping instance {name}" in text and constants.ADMIN_STATE_CHANGED in text
    assert "ended with status error" not in text
    assert status_of(vc, name) == "ADMIN_down"                   # not undone
    (job,) = [j for j in jobs(vc) if j[2] == f"INSTANCE_STARTUP({name})"]
    assert job[1] == "error"
    assert constants.ADMIN_STATE_CHANGED in vc.ok("gnt-job", "info", job[0])
    remove(vc, name)
    remove(vc, hold)


def test_a_directory_at_the_state_path_does_not_stop_the_pass(vc):
    name = "statedir1.vcluster"
    add(vc, name, N2)
    master_log(vc)
    path = state_file(vc)
    os.remove(path)
    os.mkdir(path)
    os.mkdir(os.path.join(path, "inside"))
    fake_hv(vc, N2).simulate_crash(name)
    text = master_log(vc)
    assert "moved it aside" in text and "is a directory" not in text.replace("was a directory",
                                                                            "")
    assert f"Restarting instance {name} (attempt 1 of 5)" in text
    assert status_of(vc, name) == "running"
    assert os.path.isfile(path) and serializer.loads(open(path).read())["version"] == 1
    assert os.path.isdir(os.path.join(path + ".invalid-1", "inside"))   # kept for a look
    remove(vc, name)


def test_a_symlink_at_the_lock_path_is_refused_and_its_target_untouched(vc, tmp_path):
    lock = vc.paths(N2).watcher_lock_file
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    if os.path.lexists(lock):
        os.remove(lock)
    os.symlink(target, lock)
    try:
        code, text = watch(vc, N2)[N2]
    finally:
        os.remove(lock)
    assert code == 1
    assert "Cannot take the watcher lock" in text and "is a symbolic link" in text
    assert target.read_text() == "keep me\n"
    code, text = watch(vc, N2)[N2]
    assert code == 0, text


def _noded_children(vc, node: str) -> set[int]:
    return request_children(daemonctl.daemon_pid(vc.paths(node), constants.NODED))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_node_daemon_killed_with_a_kept_child_is_restarted_at_once(vc):
    """kill -9 of noded while a kept-connection child idles (it would for 15 s):
    the child holds no pid-file lock, so the next pass starts a new node daemon,
    and the child goes away with its parent."""
    assert _wait(lambda: (vc.ok("gnt-instance", "list") is not None
                          and bool(_noded_children(vc, N2))), timeout=30)
    kept = _noded_children(vc, N2)
    noded = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    os.kill(noded, signal.SIGKILL)
    code, text = watch(vc, N2)[N2]
    assert code == 0, text
    assert "started the node daemon" in text and "Another copy" not in text
    new = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    assert new not in (None, noded)
    assert _wait(lambda: not any(_alive(pid) for pid in kept), timeout=10)
    assert "node2.vcluster" in vc.ok("gnt-node", "list", "-o", "name,mfree")


def test_a_directory_at_the_node_daemons_pid_file_path_does_not_keep_it_down(vc):
    paths = vc.paths(N3)
    noded = daemonctl.daemon_pid(paths, constants.NODED)
    os.kill(noded, signal.SIGKILL)
    assert _wait(lambda: not _alive(noded), timeout=10)
    pid_file = paths.pid_file(constants.NODED)
    if os.path.lexists(pid_file):
        os.remove(pid_file)
    os.mkdir(pid_file)
    code, text = watch(vc, N3)[N3]
    assert code == 0, text
    assert "started the node daemon" in text
    assert os.path.isfile(pid_file) and os.path.isdir(pid_file + ".invalid-1")
    assert daemonctl.daemon_pid(paths, constants.NODED) not in (None, noded)
    os.rmdir(pid_file + ".invalid-1")


def test_a_node_daemon_killed_during_a_request_is_restarted_while_the_child_finishes(vc):
    """A child busy with a request (a node-side delay) when noded dies holds no
    pid-file lock: the next pass starts a new node daemon while the child
    still runs; the child finishes its request and exits."""
    before = _noded_children(vc, N2)
    cl = luxi.Client(vc.paths(N1).master_socket)
    job = cl.SubmitJob([{"OP_ID": "OP_TEST_DELAY", "duration": 6.0, "on_master": False,
                         "on_nodes": [N2]}])
    assert _wait(lambda: bool(_noded_children(vc, N2) - before), timeout=30)
    busy = _noded_children(vc, N2) - before
    noded = daemonctl.daemon_pid(vc.paths(N2), constants.NODED)
    os.kill(noded, signal.SIGKILL)
    code, text = watch(vc, N2, "--no-verify-disks")[N2]
    assert code == 0, text
    assert "started the node daemon" in text and "Another copy" not in text
    assert daemonctl.daemon_pid(vc.paths(N2), constants.NODED) not in (None, noded)
    assert _wait(lambda: not any(_alive(pid) for pid in busy), timeout=30)
    assert _wait(lambda: cl.QueryJobs([job], ["status"])[0][0] in ("success", "error"),
                 timeout=60)
