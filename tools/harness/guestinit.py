"""PID 1 of a guest-cluster node, after the initramfs handed over (doc/vcluster.md).

Runs inside the guest as ``<python> -m tools.harness.guestinit`` from the
repository (visible through the host's root, read-only), on every boot,
with the node's writable ``/etc``, ``/var``, ``/root`` and ``/srv`` already
overlaid (:mod:`tools.harness.guestimage`).  Like a distribution's init it:

1. reads the node's settings from ``/etc/vcluster-guest/guest.json`` and
   its daemons' environment from ``/etc/vcluster-guest/env`` (both written
   by the host into the state disk when the cluster was made);
2. creates the LVM volume group on the extra disks at the first boot
   (``pvcreate`` + ``vgcreate``; then ``/etc/vcluster-guest/vg-made``
   marks it done), and activates it at every later boot (``vgchange
   -ay``); LVM runs without udev (``/etc/lvm/lvm.conf``); and sets DRBD's
   usermode helper to ``/bin/true`` (:data:`DRBD_HELPER`, the cluster's
   ``drbd_usermode_helper``: an operator's ``modprobe.d`` option; without
   it the kernel runs ``drbdadm``, which has no configuration here and
   refuses every resync);
3. starts OpenSSH's ``sshd`` (``/etc/vcluster-guest/sshd_config``, port 22;
   its host key made at the first boot), then the node daemon when the node belongs to a cluster (it has
   ``server.pem``), then the master daemon and RAPI when ssconf names this
   node the master: the same :mod:`ganeti.daemonctl` calls the host's
   virtual cluster makes, with the standard paths (root ``/``);
4. prints :data:`READY_LINE`, the node's name, the boot id and the uptime on
   the console, and reaps orphans for ever.

The ``ganeti`` modules are imported only once the node has joined a
cluster: under TCG every import costs, and a fresh node only needs sshd.
Nothing here runs on the host; the pure part (:func:`lvm_setup_commands`)
is tested there.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

#: what PID 1 prints once the daemons are started (then the name, boot id, uptime)
READY_LINE = "vcluster-guest: ready"

__all__ = ["CONFIG_DIR", "READY_LINE", "lvm_setup_commands", "read_env_file", "main"]

#: where the host puts the node's settings (in the /etc overlay's upper layer)
CONFIG_DIR = "/etc/vcluster-guest"
_MASTERD_TRIES = 3
#: seconds one master daemon start may take: its vote waits for a majority of the
#: nodes, which may still be booting
_MASTERD_TIMEOUT = 90.0
#: the DRBD module's usermode helper on guest nodes, and where the module takes it
DRBD_HELPER = "/bin/true"
_DRBD_HELPER_PARAM = "/sys/module/drbd/parameters/usermode_helper"


def _say(msg: str) -> None:
    sys.stdout.write(f"vcluster-guest: [{_uptime()}] {msg}\n")
    sys.stdout.flush()


def read_env_file(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (blank lines and ``#`` comments skipped) as a dict."""
    env = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key.strip()] = value
    return env


def lvm_setup_commands(vg_name: str, disks: Sequence[str], vg_exists: bool) -> list[list[str]]:
    """The LVM commands of a boot: create the VG on ``disks`` once, activate it always.

    No disks: nothing to do (the node has no volume group).
    """
    if not disks:
        return []
    if not vg_exists:      # vgcreate leaves the new VG active
        return [["pvcreate", "-ff", "-y", *disks], ["vgcreate", vg_name, *disks]]
    return [["vgchange", "-ay", vg_name]]


def _run(argv: Sequence[str]) -> bool:
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=120,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _say(f"{argv[0]} failed: {exc}")
        return False
    if res.returncode != 0:
        _say(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()[-300:]}")
    return res.returncode == 0


def _data_disks() -> list[str]:
    """``/dev/vdb`` ... (``/dev/vda`` is the state disk)."""
    names = sorted(n for n in os.listdir("/dev") if n.startswith("vd") and n[2:].isalpha())
    return [f"/dev/{n}" for n in names if n != "vda"]


def _setup_lvm(vg_name: str) -> None:
    """Make the VG at the first boot (then leave a mark), activate it at the others.

    Without the mark, ``vgs`` decides: disks that hold the VG are never
    initialised again.
    """
    if not vg_name:
        return
    mark = os.path.join(CONFIG_DIR, "vg-made")
    exists = os.path.exists(mark) or subprocess.run(
        ["vgs", vg_name], capture_output=True, timeout=60, check=False).returncode == 0
    for argv in lvm_setup_commands(vg_name, _data_disks(), exists):
        if not _run(argv):
            return
    with open(mark, "w") as fh:
        fh.write(vg_name + "\n")


def _setup_drbd() -> None:
    try:
        with open(_DRBD_HELPER_PARAM, "w") as fh:
            fh.write(DRBD_HELPER)
    except OSError as exc:
        _say(f"cannot set the DRBD usermode helper: {exc}")


def _start_sshd() -> None:
    """OpenSSH's sshd with the node's config; its host key is made at the first boot."""
    key = os.path.join(CONFIG_DIR, "ssh_host_ed25519_key")
    if not os.path.exists(key):
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    _run(["/usr/sbin/sshd", "-f", os.path.join(CONFIG_DIR, "sshd_config"),
          "-E", "/var/log/vcluster-sshd.log"])


def _start_daemons(conf: dict[str, object]) -> None:
    """noded when the node has joined; masterd and RAPI when ssconf names it master."""
    from ganeti.pathutils import Paths

    paths = Paths("/")
    if not os.path.exists(paths.server_pem):
        return       # not in a cluster yet: nothing more to import
    from ganeti import bootstrap, constants, daemonctl, errors, ssconf

    bootstrap.make_node_dirs(paths)
    ip, port = str(conf["ip"]), int(str(conf.get("noded_port", constants.DEFAULT_NODED_PORT)))
    try:
        daemonctl.start_noded(paths, ip, port, timeout=120.0)
    except errors.GanetiError as exc:
        _say(f"the node daemon did not start: {exc}")
        return
    try:
        master = ssconf.SimpleStore(paths).get_master_node()
    except errors.GanetiError:
        return
    if master != conf["name"]:
        return
    # masterd asks a majority of node daemons to confirm it: the others may still boot
    for attempt in range(1, _MASTERD_TRIES + 1):
        try:
            daemonctl.start_masterd(paths, timeout=_MASTERD_TIMEOUT, extra_args=shlex.split(
                os.environ.get("GANETI_MASTERD_ARGS", "")))
            daemonctl.start_rapi(paths)
            return
        except errors.GanetiError as exc:
            _say(f"master daemon start {attempt}/{_MASTERD_TRIES} failed: {exc}")
            time.sleep(5)


def _uptime() -> str:
    try:
        with open("/proc/uptime") as fh:
            return fh.read().split()[0]
    except (OSError, IndexError):
        return "?"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _reap_forever() -> None:
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            signal.pause()
            continue
        except InterruptedError:
            continue
        if pid == 0:
            signal.pause()


def main() -> None:
    """Boot the node (see the module docstring); never returns as PID 1."""
    try:
        _boot()
    except Exception as exc:  # PID 1 must not exit: the kernel would panic
        _say(f"boot failed: {exc!r}")
    if os.getpid() == 1:
        _reap_forever()


def _boot() -> None:
    with open(os.path.join(CONFIG_DIR, "guest.json")) as fh:
        conf = json.load(fh)
    with open(os.path.join(CONFIG_DIR, "env")) as fh:
        os.environ.update(read_env_file(fh.read()))
    _say("init started")
    _setup_lvm(str(conf.get("vg_name") or ""))
    _setup_drbd()
    _start_sshd()
    _say("sshd started")
    _start_daemons(conf)
    sys.stdout.write(f"{READY_LINE} {conf['name']} {_boot_id()} uptime {_uptime()}\n")
    sys.stdout.flush()


if __name__ == "__main__":  # pragma: no cover
    main()
