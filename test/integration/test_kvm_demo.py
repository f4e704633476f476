"""``make demo KVM=1`` (``tools/demo --kvm``) runs through on real qemu.

The demo boots a tinylinux guest on a 2-node kvm virtual cluster, talks to
it on its serial console and migrates it live there and back
(``--no-cloud-init``: without the cloud-init guest, so that ``make test``
boots no Debian).  Skips only when qemu-system-x86_64 cannot run.

The whole kvm demo, with its image-based install with cloud-init, is a
``soak`` test (``make soak``): it boots the Debian cloud image under TCG.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tools.harness import cloudimage, vcluster
from test.integration import host_helpers

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(bool(host_helpers.qemu_reason()),
                                 reason=host_helpers.qemu_reason() or "qemu runs")]


def _demo(demo_dir: str, *flags: str, timeout: float) -> str:
    """The kvm demo's output (it must succeed); its cluster destroyed after."""
    try:
        res = subprocess.run([sys.executable, os.path.join(vcluster.REPO_ROOT, "tools", "demo"),
                              "--kvm", *flags], env={**os.environ, "GANETI_DEMO_DIR": demo_dir},
                             capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL, check=False)
    finally:
        vcluster.destroy(demo_dir)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def test_kvm_demo_runs_through(tmp_path):
    out = _demo(str(tmp_path / "demo"), "--no-cloud-init", timeout=540)
    assert "cloud1.vcluster" not in out
    assert "tinylinux: booted vm1.vcluster" in out
    assert "Linux 6." in out  # uname, typed on the guest's console
    assert "now runs on node2.vcluster" in out and "now runs on node1.vcluster" in out
    # on node2 the serial log has uptime lines and no booted line: no new boot
    assert "(node2: " in out and ") 0 booted lines; uptime lines: " in out


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_kvm_demo_shows_a_cloud_init_guest(tmp_path):
    host_helpers.skip_unless("" if cloudimage.find_built() else cloudimage.problem())
    out = _demo(str(tmp_path / "demo"), timeout=1700)
    assert "tinylinux: booted vm1.vcluster" in out
    assert "* starting instance cloud1.vcluster on node2.vcluster" in out
    # the serial console: cloud-init ran and the guest logged in under the instance's name
    assert "running 'init-local'" in out and "cloud1 login:" in out
    status = out.split("cloud-init status --wait --long", 1)[1]
    assert "status: done" in status and "DataSourceNoCloud" in status
    lines = [line.strip() for line in status.splitlines()]
    assert "cloud1" in lines                               # hostname
    # the key the demo made (its first 40 characters shown) in the demo user's authorized_keys
    shown = out.split("the demo's SSH key: ", 1)[1].split("(", 1)[1].split("...)", 1)[0]
    assert shown.startswith("ssh-ed25519 ")
    assert [line for line in lines if line.startswith(shown) and line.endswith("demo@vcluster")]
