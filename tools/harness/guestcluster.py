"""Guest clusters: every node a qemu guest with its own kernel (doc/vcluster.md, "Guest clusters").

``tools/vcluster create DIR --guests --nodes N`` lays out::

    DIR/guests.json       the cluster's data (:class:`GuestCluster`)
    DIR/id_cluster(.pub)  the cluster SSH key (the host drives the nodes with it)
    DIR/known_hosts       the nodes' SSH host keys, as the host saw them
    DIR/bin/gnt-*         wrappers running the command on the current master (``env``)
    DIR/node<k>/          state.img (ext4: the node's /etc, /var, /root, /srv layers),
                          disk<i>.img (LVM), console.log, qmp.sock, pid files

Node ``k`` is ``node<k>.vcluster`` at ``<subnet>.k`` on the cluster's own
bridge (:mod:`tools.harness.guestvm`), the host at ``<subnet>.254``; the
cluster is ``cluster.vcluster`` at the first master's address.  Inside,
every node runs the standard paths (no ``GANETI_ROOTDIR``), its daemons on
the standard ports (noded 1811, RAPI 5080, SSH 22), started by the guest's
init (:mod:`tools.harness.guestinit`) on every boot.  The host reaches them
over SSH with the cluster key: ``gnt-cluster init`` on node1 and ``gnt-node
add`` of the others run there as on a real cluster.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import asdict, dataclass, field

from ganeti import constants, errors, ssh
from ganeti.pathutils import Paths
from ganeti.utils.process import RunResult
from tools.harness import guestimage, guestoob, guestvm, procscan

__all__ = ["GuestNode", "GuestCluster", "DATA_FILE", "sshd_config", "precompile", "CLUSTER_NAME", "DOMAIN",
           "DEFAULT_MEMORY_MIB", "DEFAULT_DISK_COUNT", "DEFAULT_DISK_SIZE_GIB",
           "DEFAULT_STATE_DISK_MIB", "DEFAULT_VG_NAME", "is_guest_cluster", "load", "create",
           "start", "stop", "destroy", "run_on", "current_master", "env_lines",
           "wrapper_script", "hosts_text", "env_text", "lvm_conf", "seed_files",
           "init_argv", "init_accepts_vg_name", "run_gnt", "forget_connections", "run_watcher", "boot_count", "wait_ready",
           "console_tail"]

DATA_FILE = "guests.json"
DOMAIN = "vcluster"
CLUSTER_NAME = f"cluster.{DOMAIN}"
DEFAULT_MEMORY_MIB = 640
#: virtual CPUs per guest
DEFAULT_CPUS = 1
DEFAULT_DISK_COUNT = 1
DEFAULT_DISK_SIZE_GIB = 4
DEFAULT_STATE_DISK_MIB = 2048
#: the volume group Ganeti uses by default
DEFAULT_VG_NAME = "xenvg"
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TINYOS = os.path.join(_REPO_ROOT, "tools", "os", "tinyos")
_BOOT_TIMEOUT = 240.0

Log = Callable[[str], None]


@dataclass
class GuestNode:
    """One node guest."""

    name: str
    index: int
    ip: str
    tap: str
    mac: str


@dataclass
class GuestCluster:
    """A guest cluster as recorded in ``DIR/guests.json``."""

    directory: str
    bridge: str
    subnet: str
    image_dir: str
    accel: str
    python: str
    repo: str
    memory_mib: int = DEFAULT_MEMORY_MIB
    cpus: int = DEFAULT_CPUS
    disk_count: int = DEFAULT_DISK_COUNT
    disk_size_gib: int = DEFAULT_DISK_SIZE_GIB
    vg_name: str = DEFAULT_VG_NAME
    cluster_name: str = CLUSTER_NAME
    nodes: list[GuestNode] = field(default_factory=list)
    #: seconds ``create`` took (printed at its end)
    create_seconds: float | None = None

    @property
    def host_ip(self) -> str:
        return guestvm.host_address(ipaddress.IPv4Network(self.subnet))

    def node(self, name: str) -> GuestNode:
        """The node called ``name`` (``node3`` works for ``node3.vcluster``)."""
        for node in self.nodes:
            if name in (node.name, node.name.split(".")[0]):
                return node
        raise errors.ParameterError(f"No node '{name}' in the guest cluster {self.directory}",
                                    errors.ECODE_NOENT)

    def node_dir(self, node: GuestNode) -> str:
        return os.path.join(self.directory, node.name.split(".")[0])

    def spec(self, node: GuestNode) -> guestvm.GuestSpec:
        """What qemu needs to boot ``node``."""
        image = self.image_dir
        cmdline = guestimage.kernel_cmdline(
            hostname=node.name, address=node.ip,
            prefix=ipaddress.IPv4Network(self.subnet).prefixlen, python=self.python,
            repo=self.repo)
        ndir = self.node_dir(node)
        return guestvm.GuestSpec(
            name=node.name, directory=ndir, kernel=os.path.join(image, "vmlinuz"),
            initrd=os.path.join(image, "initrd.img"), cmdline=cmdline, tap=node.tap,
            mac=node.mac, memory_mib=self.memory_mib, cpus=self.cpus, accel=self.accel,
            data_disks=tuple(os.path.join(ndir, f"disk{i}.img")
                             for i in range(self.disk_count)))

    @property
    def key_file(self) -> str:
        return os.path.join(self.directory, "id_cluster")

    def save(self) -> None:
        data = asdict(self)
        data.pop("directory")
        tmp = os.path.join(self.directory, DATA_FILE + ".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, os.path.join(self.directory, DATA_FILE))


def is_guest_cluster(directory: str) -> bool:
    """Whether ``directory`` holds a guest cluster."""
    return os.path.exists(os.path.join(os.path.abspath(directory), DATA_FILE))


def load(directory: str) -> GuestCluster:
    """Read ``DIR/guests.json``; raises :class:`errors.ConfigurationError`."""
    directory = os.path.abspath(directory)
    try:
        with open(os.path.join(directory, DATA_FILE)) as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise errors.ConfigurationError(f"{directory} is not a guest cluster: {exc}") from exc
    nodes = [GuestNode(**n) for n in data.pop("nodes")]
    return GuestCluster(directory=directory, nodes=nodes, **data)


# --- pure: the files each node starts with --------------------------------------------------

def hosts_text(gc: GuestCluster) -> str:
    """``/etc/hosts`` of every node: localhost, the cluster name and every node."""
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
             f"{gc.nodes[0].ip} {gc.cluster_name}"]
    lines += [f"{n.ip} {n.name} {n.name.split('.')[0]}" for n in gc.nodes]
    return "\n".join(lines) + "\n"


def env_text(gc: GuestCluster) -> str:
    """The environment of the guest's init and daemons (``KEY=VALUE`` lines)."""
    return "".join(f"{k}={v}\n" for k, v in _env(gc).items())


#: the master lease of guest clusters (seconds; the project's default is 6)
GUEST_LEASE_DURATION = 40.0


def _env(gc: GuestCluster) -> dict[str, str]:
    return {
        "PATH": os.pathsep.join([os.path.join(gc.repo, "scripts"),
                                 os.path.dirname(gc.python), "/usr/local/sbin",
                                 "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]),
        "PYTHONPATH": gc.repo,
        "HOME": "/root",
        # no udev in the guests: LVM and device-mapper make their device nodes themselves
        "DM_DISABLE_UDEV": "1",
        # emulated guests next to a busy host can take longer than the default 6 s
        # lease for one renewal round (doc/vcluster.md); one word: sshd's SetEnv
        "GANETI_MASTERD_ARGS": f"--lease-duration={GUEST_LEASE_DURATION:g}",
    }


def sshd_config(gc: GuestCluster, node: GuestNode) -> str:
    """OpenSSH's ``sshd_config`` of a node: root by key only, the daemons' environment."""
    env = " ".join(f"{k}={v}" for k, v in _env(gc).items())
    return (f"# guest-cluster node {node.name} (tools/harness/guestcluster.py)\n"
            f"ListenAddress {node.ip}\nPort 22\n"
            "HostKey /etc/vcluster-guest/ssh_host_ed25519_key\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nUseDNS no\nStrictModes no\n"
            "AuthorizedKeysFile .ssh/authorized_keys\nPidFile /run/sshd.pid\n"
            "MaxStartups 100:30:200\nMaxSessions 64\n"
            f"SetEnv {env}\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\n")


def lvm_conf() -> str:
    """``/etc/lvm/lvm.conf`` of the guests: LVM without udev."""
    return ("# guest-cluster node (tools/harness/guestcluster.py): no udev here\n"
            "devices {\n    obtain_device_list_from_udev = 0\n}\n"
            "activation {\n    udev_sync = 0\n    udev_rules = 0\n}\n"
            "global {\n    use_lvmpolld = 0\n}\n")


def seed_files(gc: GuestCluster, node: GuestNode, cluster_pub: str,
               cluster_key: str | None) -> dict[str, tuple[int, str]]:
    """The state disk's first contents: ``path -> (mode, text)``.

    Paths are relative to the state disk's root, whose ``<dir>/upper`` is
    the upper layer of the guest's ``/<dir>`` (:data:`guestimage.OVERLAY_DIRS`).
    ``cluster_key`` (the private cluster key) goes to node1 only, where
    ``gnt-cluster init`` keeps it; the others get it when they join.
    """
    conf = {"name": node.name, "ip": node.ip, "vg_name": gc.vg_name, "ssh_port": 22,
            "noded_port": constants.DEFAULT_NODED_PORT}
    root = Paths("/")
    files = {
        "etc/upper/hosts": (0o644, hosts_text(gc)),
        "etc/upper/hostname": (0o644, node.name + "\n"),
        "etc/upper/vcluster-guest/guest.json": (0o644, json.dumps(conf, indent=1) + "\n"),
        "etc/upper/vcluster-guest/env": (0o644, env_text(gc)),
        "etc/upper/vcluster-guest/sshd_config": (0o644, sshd_config(gc, node)),
        "etc/upper/lvm/lvm.conf": (0o644, lvm_conf()),
        "root/upper/.ssh/authorized_keys": (0o600, cluster_pub.strip() + "\n"),
        # the host's root may have a .bashrc (bash reads it for SSH commands)
        "root/upper/.bashrc": (0o644, "# guest-cluster node: nothing here\n"),
    }
    # the tinyos OS definition (tools/os/tinyos), as the host cluster's nodes have it
    os_dir = root.os_search_path[0].lstrip("/")
    assert os_dir.startswith("srv/")
    for name in sorted(os.listdir(_TINYOS)):
        with open(os.path.join(_TINYOS, name), encoding="utf-8") as fh:
            mode = 0o755 if os.access(os.path.join(_TINYOS, name), os.X_OK) else 0o644
            files[f"srv/upper/{os_dir[4:]}/tinyos/{name}"] = (mode, fh.read())
    if cluster_key is not None:
        key = root.ssh_key_file.lstrip("/")
        assert key.startswith("var/")
        files["var/upper/" + key[4:]] = (0o600, cluster_key)
        files["var/upper/" + key[4:] + ".pub"] = (0o644, cluster_pub.strip() + "\n")
    return files


def init_argv(gc: GuestCluster, *, accepts_vg_name: bool) -> list[str]:
    """``gnt-cluster init`` as node1 runs it."""
    argv = ["gnt-cluster", "init", "--enabled-hypervisors", constants.HT_FAKE,
            "--specs-disk-size", "min=1"]
    # the guests' VG is the cluster's, and plain (first: the default template, as
    # on an LVM cluster) and drbd are enabled, where `gnt-cluster init` knows --vg-name
    if accepts_vg_name and gc.vg_name:
        from ganeti import bootstrap
        templates = [constants.DT_PLAIN, constants.DT_DRBD8,
                     *(t for t in bootstrap.DEFAULT_DISK_TEMPLATES
                       if t not in (constants.DT_PLAIN, constants.DT_DRBD8))]
        argv += ["--vg-name", gc.vg_name, "--enabled-disk-templates", ",".join(templates)]
    return argv + [gc.cluster_name]


def init_accepts_vg_name() -> bool:
    from ganeti.client import gnt_cluster
    options = gnt_cluster.commands["init"][2]
    return any("--vg-name" in getattr(opt, "flags", ()) for opt in options)


def wrapper_script(gc: GuestCluster, tool: str) -> str:
    """``DIR/bin/<tool>``: runs ``tool`` on the current master over SSH (``env``)."""
    return ("#!/bin/sh\n"
            f"# {tool} on the guest cluster {gc.directory} (tools/vcluster env)\n"
            f"PYTHONPATH={shlex.quote(gc.repo)} exec {shlex.quote(gc.python)}"
            f" -m tools.harness.guestcluster gnt {shlex.quote(gc.directory)}"
            f" {shlex.quote(tool)} \"$@\"\n")


def env_lines(gc: GuestCluster, master_ip: str | None = None) -> list[str]:
    """``export`` lines: ``gnt-*`` run on the guest cluster's master; RAPI's address."""
    bindir = os.path.join(gc.directory, "bin")
    lines = [f"export PATH={shlex.quote(bindir)}:\"$PATH\"",
             f"export GANETI_VCLUSTER_DIR={shlex.quote(gc.directory)}",
             f"export {constants.ENV_RAPI_PORT}={constants.DEFAULT_RAPI_PORT}"]
    if master_ip:
        lines.append(f"export {constants.ENV_RAPI_BIND}={master_ip}")
    return lines


# --- SSH ------------------------------------------------------------------------------------

#: seconds for an SSH connection to a guest (its sshd answers slowly under TCG and load)
SSH_CONNECT_TIMEOUT = 30.0


#: one SSH runner per cluster directory and connect timeout in this process: it keeps
#: a connection to each node (an SSH handshake with an emulated guest costs about 1 s)
_RUNNERS: dict[tuple[str, float], ssh.SshRunner] = {}


def _runner(gc: GuestCluster, connect_timeout: float = SSH_CONNECT_TIMEOUT) -> ssh.SshRunner:
    key = (gc.directory, connect_timeout)
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _RUNNERS[key] = ssh.SshRunner(
            gc.key_file, known_hosts_path=os.path.join(gc.directory, "known_hosts"), port=22,
            connect_timeout=connect_timeout, reuse=True)
    return runner


def forget_connections(gc: GuestCluster | None = None) -> None:
    """Close the SSH connections this process keeps to ``gc``'s nodes (all: None)."""
    for key in [k for k in _RUNNERS if gc is None or k[0] == gc.directory]:
        _RUNNERS.pop(key).close()


def run_on(gc: GuestCluster, node: str, command: str | Sequence[str], *,
           timeout: float = 120.0, input_data: str | None = None) -> RunResult:
    """Run ``command`` on ``node`` as root over SSH (its daemons' environment).

    Raises :class:`errors.CommandError` when the node cannot be reached.
    """
    vnode = gc.node(node)
    return _runner(gc).run(vnode.ip, command, timeout=timeout, input_data=input_data)


def _ssconf_master(gc: GuestCluster, node: GuestNode) -> str | None:
    """The master ``node``'s ssconf names (None: no answer)."""
    try:
        res = _runner(gc).run(
            node.ip, ["cat", Paths("/").ssconf_file("master_node")], timeout=20)
    except errors.CommandError:
        return None
    return res.stdout.strip() or None if not res.failed else None


def current_master(gc: GuestCluster) -> GuestNode:
    """The master now: a running node whose own ssconf names itself.

    The master found last time (``DIR/master``) is asked first, so one SSH
    call usually settles it; otherwise each running node is asked in turn
    and the node it names is asked to confirm.  Node1 when none answers.
    """
    last_file = os.path.join(gc.directory, "master")
    try:
        with open(last_file) as fh:
            last = fh.read().strip()
    except OSError:
        last = ""
    candidates = sorted(gc.nodes, key=lambda n: n.name != last)
    running = [n for n in candidates if guestvm.guest_running(gc.spec(n))]
    asked: dict[str, str | None] = {}
    for node in running:
        named = asked.setdefault(node.name, _ssconf_master(gc, node))
        if named is None:
            continue
        try:
            target = gc.node(named)
        except errors.ParameterError:
            continue
        if target.name not in asked and target in running:
            asked[target.name] = _ssconf_master(gc, target)
        if asked.get(target.name) == target.name:
            if target.name != last:
                with open(last_file + ".tmp", "w") as fh:
                    fh.write(target.name + "\n")
                os.replace(last_file + ".tmp", last_file)
            return target
    return gc.nodes[0]


def exec_on(gc: GuestCluster, node: str, command: str | Sequence[str]
            ) -> tuple[Any, Callable[[], None]]:
    """Start ``command`` on ``node`` over the kept SSH connection; its channel (a byte
    stream both ways, ``paramiko.Channel``) and the function that closes it."""
    return _runner(gc).exec_channel(gc.node(node).ip, command)


#: exit status of :func:`master_guarded` commands when the node is not the master
NOT_MASTER_EXIT = 199


def master_guarded(node: GuestNode, command: str) -> str:
    """``command`` for a shell on ``node`` that runs only while its ssconf names it the
    master (else exits :data:`NOT_MASTER_EXIT`)."""
    ssconf = shlex.quote(Paths("/").ssconf_file("master_node"))
    return (f'[ "$(cat {ssconf} 2>/dev/null)" = {shlex.quote(node.name)} ]'
            f" || exit {NOT_MASTER_EXIT}; {command}")


def last_master(gc: GuestCluster) -> GuestNode | None:
    """The master found last time (``DIR/master``) if its guest runs, else None."""
    try:
        with open(os.path.join(gc.directory, "master")) as fh:
            name = fh.read().strip()
        node = gc.node(name)
    except (OSError, errors.ParameterError):
        return None
    return node if guestvm.guest_running(gc.spec(node)) else None


def run_gnt(gc: GuestCluster, argv: Sequence[str], *, node: str | None = None,
            timeout: float = 300.0, check: bool = True) -> RunResult:
    """Run ``gnt-<tool> ...`` on ``node`` (default: the current master) over SSH.

    Without ``node`` the master found last time runs the command in the same
    SSH call that checks it still is the master (its ssconf names itself, as
    :func:`current_master` asks); only when it is not is the master looked up.
    """
    target = gc.node(node) if node else last_master(gc)
    res: RunResult | None = None
    if target is not None and not node:
        guarded = master_guarded(target, f"exec {shlex.join(argv)}")
        # (an unreachable node raises: a command that may have run is never run twice)
        res = run_on(gc, target.name, guarded, timeout=timeout)
        if res.exit_code == NOT_MASTER_EXIT:
            res = None
    if res is None:
        target = gc.node(node) if node else current_master(gc)
        res = run_on(gc, target.name, list(argv), timeout=timeout)
    assert target is not None
    if check and res.failed:
        raise errors.CommandError(f"{' '.join(argv)} on {target.name} failed"
                                  f" ({res.fail_reason}):\n{res.stdout}{res.stderr}")
    return res


# --- boot and readiness ---------------------------------------------------------------------

def boot_count(gc: GuestCluster, node: GuestNode) -> int:
    """How many times the node's console says it finished booting."""
    try:
        with open(gc.spec(node).console_log, errors="replace") as fh:
            text = fh.read()
    except OSError:
        return 0
    return text.count(f"{guestimage.READY_LINE} {node.name} ")


def console_tail(gc: GuestCluster, node: GuestNode, lines: int = 15) -> str:
    """The last ``lines`` lines of the node's console log of this boot ("" if none)."""
    try:
        with open(gc.spec(node).console_log, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return ""


def wait_ready(gc: GuestCluster, nodes: Sequence[GuestNode], *,
               timeout: float = _BOOT_TIMEOUT, boot_retries: int = 1) -> None:
    """Wait until each node's console (of this boot) says ready and it answers SSH.

    A guest whose qemu stops before that (its kernel or ``/init`` gave up: a
    machine that failed to boot, not the cluster's code, which runs later) is
    powered on again up to ``boot_retries`` times; each such stop is reported
    on standard error with the end of its console, which
    :func:`guestvm.start_guest` keeps in ``console.old.log``.
    """
    deadline = time.monotonic() + timeout
    pending = list(nodes)
    retries = {node.name: boot_retries for node in nodes}
    while pending:
        node = pending[0]
        if boot_count(gc, node) > 0:
            try:
                if not run_on(gc, node.name, "true", timeout=30).failed:
                    pending.pop(0)
                    continue
            except errors.CommandError:
                pass
        if not guestvm.guest_running(gc.spec(node)):
            tail = console_tail(gc, node)
            if retries[node.name] <= 0 or boot_count(gc, node) > 0:
                raise errors.CommandError(f"{node.name} stopped while booting; see"
                                          f" {gc.spec(node).console_log}; its end:\n{tail}")
            retries[node.name] -= 1
            sys.stderr.write(f"vcluster: {node.name} stopped while booting; powering it on"
                             f" again. The end of its console:\n{tail}\n")
            guestvm.start_guest(gc.spec(node))
            deadline = max(deadline, time.monotonic() + timeout / 2)
            continue
        if time.monotonic() > deadline:
            raise errors.CommandError(f"{node.name} did not boot within {timeout:.0f}s; see"
                                      f" {gc.spec(node).console_log}; its end:\n"
                                      f"{console_tail(gc, node)}")
        time.sleep(0.2)


def precompile(repo: str, python: str) -> None:
    """Byte-compile the repository's code on the host (``compileall``, stale files only).

    The guests see the repository read-only and cannot write ``__pycache__``;
    under TCG, compiling every module at every start costs more than the rest
    of a daemon's start-up.
    """
    import subprocess
    dirs = [os.path.join(repo, d) for d in ("ganeti", "tools", "daemons")]
    res = subprocess.run([python, "-m", "compileall", "-q", "-j", "0", *dirs],
                         capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        raise errors.CommandError(f"compileall failed: {(res.stdout + res.stderr)[-500:]}")


def _boot(gc: GuestCluster, nodes: Sequence[GuestNode]) -> None:
    """Start the guests of ``nodes`` (their console logs start afresh) and wait for them."""
    precompile(gc.repo, gc.python)
    for node in nodes:
        guestvm.start_guest(gc.spec(node))
    wait_ready(gc, nodes)


# --- create / start / stop / destroy --------------------------------------------------------

def _write_seed(files: dict[str, tuple[int, str]], seed: str) -> None:
    for rel, (mode, text) in files.items():
        path = os.path.join(seed, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        os.chmod(path, mode)
    ssh_dir = os.path.join(seed, "root", "upper", ".ssh")
    if os.path.isdir(ssh_dir):
        os.chmod(ssh_dir, 0o700)


def create(directory: str, nodes: int = 3, *, memory_mib: int = DEFAULT_MEMORY_MIB,
           disk_count: int = DEFAULT_DISK_COUNT, disk_size_gib: int = DEFAULT_DISK_SIZE_GIB,
           vg_name: str = DEFAULT_VG_NAME, accel: str = "auto", master_ssh: bool = False,
           cpus: int = DEFAULT_CPUS, log: Log | None = None) -> GuestCluster:
    """Create and boot a guest cluster of ``nodes`` nodes in ``directory``, then init it.

    The other nodes join as :func:`_init_and_add` says (``master_ssh``: plain
    ``gnt-node add`` on the master, SSH setup included).

    Raises :class:`errors.CommandError` naming the reason when guests cannot
    run here (root, tools; :func:`guestvm.network_support`), and
    :class:`errors.ParameterError` for bad arguments; both before anything
    is made.
    """
    log = log or (lambda msg: None)
    started = time.monotonic()
    directory = os.path.abspath(directory)
    if not 1 <= nodes <= 200:
        raise errors.ParameterError(f"Invalid number of nodes {nodes} (1..200)",
                                    errors.ECODE_INVAL)
    if not 1 <= cpus <= 16:
        raise errors.ParameterError(f"Invalid number of CPUs {cpus} (1..16)",
                                    errors.ECODE_INVAL)
    if memory_mib < 256 or disk_count < 0 or disk_size_gib < 1:
        raise errors.ParameterError("Guests need at least 256 MiB of memory and disks of"
                                    " at least 1 GiB", errors.ECODE_INVAL)
    if disk_count and not vg_name:
        raise errors.ParameterError("A volume group name is needed with data disks",
                                    errors.ECODE_INVAL)
    why = guestvm.network_support()
    if why:
        raise errors.CommandError(why)
    if is_guest_cluster(directory) or os.path.exists(os.path.join(directory, "vcluster.json")):
        raise errors.ConfigurationError(f"{directory} already holds a virtual cluster;"
                                        " destroy it first")
    image = guestimage.build(log=log)
    chosen = guestvm.choose_accel(image, accel, log=log)
    log(f"Guests boot with {chosen.upper()}" + (" (KVM does not boot the guest kernel here)"
                                                if chosen == "tcg" and accel == "auto" else ""))
    os.makedirs(directory, exist_ok=True)
    bridge = guestvm.bridge_name(directory)
    taps = [guestvm.tap_name(bridge, k) for k in range(1, nodes + 1)]
    subnet = guestvm.create_network(bridge, taps, directory)
    gnodes = [GuestNode(name=f"node{k}.{DOMAIN}", index=k,
                        ip=guestvm.node_address(subnet, k), tap=taps[k - 1],
                        mac=guestvm.mac_address(directory, k)) for k in range(1, nodes + 1)]
    gc = GuestCluster(directory=directory, bridge=bridge, subnet=str(subnet),
                      image_dir=image.directory, accel=chosen, python=sys.executable,
                      repo=_REPO_ROOT, memory_mib=memory_mib, cpus=cpus, disk_count=disk_count,
                      disk_size_gib=disk_size_gib, vg_name=vg_name, nodes=gnodes)
    gc.save()
    log(f"Network {bridge}: {subnet}, the host at {gc.host_ip}")
    pub = ssh.generate_cluster_key(gc.key_file, comment="ganeti@vcluster-guests")
    with open(gc.key_file) as fh:
        private = fh.read()
    _write_wrappers(gc)
    guestoob.start_server(directory, gc.host_ip, gc.python)
    for node in gnodes:
        ndir = gc.node_dir(node)
        os.makedirs(ndir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".seed-", dir=directory) as seed:
            _write_seed(seed_files(gc, node, pub, private if node.index == 1 else None), seed)
            guestvm.make_state_disk(os.path.join(ndir, "state.img"), seed,
                                    DEFAULT_STATE_DISK_MIB)
        guestvm.make_data_disks(ndir, disk_count, disk_size_gib)
    log(f"Booting {nodes} guests ({memory_mib} MiB and {cpus} CPU{'s' * (cpus > 1)} each)")
    _boot(gc, gnodes)
    log(f"Guests up after {time.monotonic() - started:.1f}s; initialising {gc.cluster_name}")
    _init_and_add(gc, log, master_ssh=master_ssh)
    gc.create_seconds = round(time.monotonic() - started, 1)
    gc.save()
    return gc


def _init_and_add(gc: GuestCluster, log: Log, *, master_ssh: bool) -> None:
    """``gnt-cluster init`` on node1, then every other node added, side by side.

    ``master_ssh``: plain ``gnt-node add NODE`` on the master once ``init``
    is done; its client prepares the node over SSH.  Otherwise the host
    runs that same remote step (``python3 -m ganeti.bootstrap join``, the
    master's join data on stdin) on every new node over its own SSH, then
    the master runs ``gnt-node add --no-node-setup NODE``: the same end
    state, without the master's SSH client (paramiko takes ~10 s to import
    under TCG, twice at once on the master's CPUs).  The joins need only
    the cluster certificate, so they begin as soon as ``init`` has written
    it, while its daemons are still starting.
    """
    from concurrent.futures import ThreadPoolExecutor

    master, others = gc.nodes[0], gc.nodes[1:]
    argv = init_argv(gc, accepts_vg_name=init_accepts_vg_name())
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(others))) + 1) as pool:
        init = pool.submit(run_gnt, gc, argv, node=master.name)
        joins = []
        if others and not master_ssh:
            payload = _join_payload(gc, _cluster_cert(gc, master, init))
            joins = [pool.submit(_join, gc, node, payload, log) for node in others]
        init.result()
        for joined in joins:
            joined.result()
        option = [] if master_ssh else ["--no-node-setup"]
        adds = [pool.submit(run_gnt, gc, ["gnt-node", "add", *option, node.name],
                            node=master.name) for node in others]
        for added in adds:
            added.result()


def _cluster_cert(gc: GuestCluster, master: GuestNode, init: Any) -> str:
    """The cluster certificate on ``master`` as soon as ``init`` (a future) has written it."""
    path = Paths("/").server_pem
    while True:
        done = init.done()
        res = run_on(gc, master.name, f"cat {shlex.quote(path)} 2>/dev/null || true")
        if not res.failed and "END CERTIFICATE" in res.stdout:  # written whole (renamed)
            return res.stdout
        if done:
            init.result()       # init failed: its error
            raise errors.CommandError(f"No cluster certificate on {master.name} after init")
        time.sleep(1.0)


def _join_payload(gc: GuestCluster, server_pem: str) -> dict[str, object]:
    with open(gc.key_file) as fh:
        key = fh.read()
    with open(gc.key_file + ".pub") as fh:
        pub = fh.read()
    return {"server_pem": server_pem, "ssh_key": key, "ssh_pub": pub,
            "port": constants.DEFAULT_NODED_PORT}


def _join(gc: GuestCluster, node: GuestNode, payload: dict[str, object], log: Log) -> None:
    log(f"Adding {node.name}")
    res = run_on(gc, node.name, "python3 -m ganeti.bootstrap join", timeout=300,
                 input_data=json.dumps({**payload, "bind": node.ip}))
    if res.failed:
        raise errors.CommandError(f"Joining {node.name} failed ({res.fail_reason}):"
                                  f" {res.stderr.strip()}")


def _write_wrappers(gc: GuestCluster) -> None:
    bindir = os.path.join(gc.directory, "bin")
    os.makedirs(bindir, exist_ok=True)
    for tool in sorted(os.listdir(os.path.join(gc.repo, "scripts"))):
        if not tool.startswith("gnt-"):
            continue
        path = os.path.join(bindir, tool)
        with open(path, "w") as fh:
            fh.write(wrapper_script(gc, tool))
        os.chmod(path, 0o755)


def start(gc: GuestCluster, node: str | None = None) -> None:
    """Boot the guests of every node (or ``node``) that is not running; wait until ready.
    The power server (tools/harness/guestoob.py) is started first if it does not run."""
    targets = [gc.node(node)] if node else gc.nodes
    guestoob.ensure_server(gc.directory, gc.host_ip, gc.python)
    _boot(gc, [n for n in targets if not guestvm.guest_running(gc.spec(n))])


def stop(gc: GuestCluster, node: str | None = None) -> None:
    """Power off every node (or ``node``) at once, as a crash would (qemu is killed)."""
    for vnode in [gc.node(node)] if node else gc.nodes:
        guestvm.kill_guest(gc.spec(vnode))


def _stragglers(directory: str) -> list[int]:
    """Pids of the qemu and virtiofsd processes whose command line names a file below
    ``directory``."""
    marker = (directory.rstrip("/") + "/").encode()
    return procscan.pids_whose("cmdline", lambda cmdline: marker in cmdline and (
        b"qemu" in cmdline or b"virtiofsd" in cmdline))


def destroy(directory: str, *, log: Log | None = None) -> None:
    """Power off every guest, remove taps, bridge and ``directory``: nothing is left."""
    log = log or (lambda msg: None)
    directory = os.path.abspath(directory)
    try:
        gc: GuestCluster | None = load(directory)
    except errors.ConfigurationError as exc:
        log(f"Warning: {exc}")
        gc = None
    guestoob.stop_server(directory)
    if gc is not None:
        stop(gc)
    for pid in _stragglers(directory):
        log(f"Killing leftover process {pid}")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    bridge = guestvm.bridge_name(directory)
    taps = [n.tap for n in gc.nodes] if gc else []
    guestvm.destroy_network(bridge, taps)
    shutil.rmtree(directory, ignore_errors=True)


# --- the watcher ----------------------------------------------------------------------------

def run_watcher(gc: GuestCluster, node: str | None = None,
                args: Sequence[str] = ("--wait-children",)) -> list[tuple[str, int, list[str]]]:
    """One watcher pass on every running node (or ``node``), the master last.

    Returns ``(node, exit status, output lines)`` per node.
    """
    master = current_master(gc).name
    if node:
        targets = [gc.node(node)]
    else:
        targets = sorted((n for n in gc.nodes if guestvm.guest_running(gc.spec(n))),
                         key=lambda n: n.name == master)
    watcher = os.path.join(gc.repo, "daemons", constants.WATCHER)
    results = []
    for vnode in targets:
        res = run_on(gc, vnode.name, ["python3", watcher, *args], timeout=600)
        lines = (res.stdout + res.stderr).splitlines()
        results.append((vnode.name, res.exit_code if res.exit_code is not None else 1, lines))
    return results


# --- command line (called by tools.harness.vcluster.main) -----------------------------------

def _gnt_main(argv: Sequence[str]) -> int:
    """``gnt DIR gnt-<tool> ARGS...``: the ``DIR/bin`` wrappers' body."""
    if len(argv) < 2:
        sys.stderr.write("usage: python -m tools.harness.guestcluster gnt DIR TOOL [ARGS]\n")
        return 2
    try:
        gc = load(argv[0])
        res = run_gnt(gc, list(argv[1:]), check=False)
    except errors.GanetiError as exc:
        sys.stderr.write(f"{argv[1]}: {exc}\n")
        return 1
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.exit_code if res.exit_code is not None else 1


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) > 1 and sys.argv[1] == "gnt":
        sys.exit(_gnt_main(sys.argv[2:]))
    sys.stderr.write("usage: python -m tools.harness.guestcluster gnt DIR TOOL [ARGS]\n")
    sys.exit(2)
