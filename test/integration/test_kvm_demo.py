"""``make demo KVM=1`` (``tools/demo --kvm``) runs through on real qemu.

The demo boots a tinylinux guest on a 2-node kvm virtual cluster, talks to
it on its serial console and migrates it live there and back.  Skips only
when qemu-system-x86_64 cannot run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.harness import vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]


def test_kvm_demo_runs_through(tmp_path):
    demo_dir = tmp_path / "demo"
    try:
        res = subprocess.run([sys.executable, os.path.join(vcluster.REPO_ROOT, "tools", "demo"),
                              "--kvm"], env={**os.environ, "GANETI_DEMO_DIR": str(demo_dir)},
                             capture_output=True, text=True, timeout=540,
                             stdin=subprocess.DEVNULL, check=False)
    finally:
        vcluster.destroy(str(demo_dir))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "tinylinux: booted vm1.vcluster" in out
    assert "Linux 6." in out  # uname, typed on the guest's console
    assert "now runs on node2.vcluster" in out and "now runs on node1.vcluster" in out
    # on node2 the serial log has uptime lines and no booted line: no new boot
    assert "(node2: " in out and ") 0 booted lines; uptime lines: " in out
