"""ganeti.failover.faultpoints: an armed point exits the process, others do not."""

import os
import subprocess
import sys

from ganeti.failover import faultpoints

CODE = ("from ganeti.failover import faultpoints as f\n"
        "for i in range(3):\n"
        "    f.reached('after_config_write')\n"
        "    print('passed', i, flush=True)\n")


def _run(armed: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path)}
    if armed is not None:
        env[faultpoints.ENV] = armed
    return subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_unarmed_passes_every_point() -> None:
    res = _run(None)
    assert res.returncode == 0
    assert res.stdout.split("\n")[:3] == ["passed 0", "passed 1", "passed 2"]


def test_other_point_armed_passes() -> None:
    assert _run("before_vote").returncode == 0


def test_armed_point_exits_at_once() -> None:
    res = _run("after_config_write")
    assert res.returncode == faultpoints.EXIT_STATUS
    assert res.stdout == ""


def test_nth_time() -> None:
    res = _run("after_config_write:2")
    assert res.returncode == faultpoints.EXIT_STATUS
    assert res.stdout == "passed 0\n"
