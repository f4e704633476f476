"""The host side of a guest-cluster node: its network, disks, virtiofsd and qemu.

Pure parts (names, the subnet pick, the command lines) are separate from the
few functions that run ``ip``, ``mkfs.ext4``, ``virtiofsd`` and qemu, so
they are tested without root (doc/vcluster.md, "Guest clusters").

Network: one Linux bridge per cluster, named from the cluster directory
(:func:`bridge_name`), holding the host's address (``.254``) in a private
/24 picked from :data:`SUBNET_POOL` so that no address of this machine is in
it (:func:`pick_subnet`; picks are serialized by a lock file so clusters
created side by side never clash), and one tap device per node enslaved to
it.  Nothing routes or forwards it: the host reaches every guest directly
and the guests reach each other, nothing leaves the machine.  Making
bridges and taps needs root (CAP_NET_ADMIN); :func:`network_support` says
why it cannot work here.

A node's qemu boots :mod:`tools.harness.guestimage`'s kernel and
initramfs with the host's ``/`` shared by a ``virtiofsd`` of its own
(``-o sandbox=chroot``; the guest mounts it read-only), its state disk
(``/dev/vda``, ext4) and its data disks (``/dev/vdb`` ...), daemonized,
with its serial console in ``console.log`` (earlier boots' in
``console.old.log``) and QMP on ``qmp.sock``.
Powering a node off kills qemu at once, as a crash would.
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ganeti import errors
from ganeti.utils import io
from tools.harness import guestimage

__all__ = ["GuestSpec", "SUBNET_POOL", "HOST_SUFFIX", "QEMU", "VIRTIOFSD", "bridge_name",
           "tap_name", "mac_address", "pick_subnet", "node_address", "host_address",
           "qemu_argv", "virtiofsd_argv", "network_support", "used_networks",
           "create_network", "destroy_network", "make_state_disk", "make_data_disks",
           "start_guest", "kill_guest", "guest_running", "choose_accel", "probe_verdict",
           "NETWORK_LOCK",
           "read_pid", "process_alive"]

#: the /16 the clusters' /24 subnets come from
SUBNET_POOL = ipaddress.IPv4Network("10.213.0.0/16")
#: the host's address in a cluster's subnet (nodes are .1 ... .N)
HOST_SUFFIX = 254
QEMU = "qemu-system-x86_64"
VIRTIOFSD = "/usr/lib/qemu/virtiofsd"
#: serializes subnet picks and bridge creation of concurrent ``create`` calls
NETWORK_LOCK = "/run/lock/ganeti-vcluster-guests.lock"
_PROBE_TIMEOUT = 20.0
#: the probe's qemu gives up once it used this much CPU without the probe line: with
#: KVM that works the kernel and ``/init`` print it after well under a second of CPU;
#: where nested KVM hangs (in the option ROM, printing nothing) qemu spins a whole CPU
#: until the timeout, which this cuts to a quarter (CPU, not wall time: a busy host
#: stretches a good boot's wall time, not its CPU time)
_PROBE_CPU_BUDGET = 5.0

Log = Callable[[str], None]


@dataclass(frozen=True)
class GuestSpec:
    """Everything qemu needs to boot one node guest."""

    name: str
    directory: str
    kernel: str
    initrd: str
    cmdline: str
    tap: str
    mac: str
    memory_mib: int
    accel: str
    data_disks: tuple[str, ...]
    #: virtual CPUs (under TCG one host thread each: a guest running two
    #: commands at once, as the master does during ``create``, uses both cores)
    cpus: int = 1

    @property
    def state_disk(self) -> str:
        return os.path.join(self.directory, "state.img")

    @property
    def console_log(self) -> str:
        return os.path.join(self.directory, "console.log")

    @property
    def qmp_socket(self) -> str:
        return os.path.join(self.directory, "qmp.sock")

    @property
    def vfs_socket(self) -> str:
        return os.path.join(self.directory, "vfs.sock")

    @property
    def qemu_pidfile(self) -> str:
        return os.path.join(self.directory, "qemu.pid")

    @property
    def virtiofsd_pidfile(self) -> str:
        return os.path.join(self.directory, "virtiofsd.pid")


# --- pure: names and addresses ------------------------------------------------------------

def _digest(directory: str) -> str:
    return hashlib.sha1(os.path.abspath(directory).encode()).hexdigest()


def bridge_name(directory: str) -> str:
    """The cluster's bridge: ``vcg`` + 8 hex digits of its directory (11 characters)."""
    return "vcg" + _digest(directory)[:8]


def tap_name(bridge: str, index: int) -> str:
    """Node ``index``'s tap device (at most 15 characters, the kernel's limit)."""
    name = f"{bridge}t{index}"
    if len(name) > 15:
        raise errors.ParameterError(f"Tap name {name} is too long", errors.ECODE_INVAL)
    return name


def mac_address(directory: str, index: int) -> str:
    """A locally administered MAC for node ``index`` of the cluster in ``directory``."""
    digest = _digest(directory)
    return f"52:54:{digest[:2]}:{digest[2:4]}:{index // 256:02x}:{index % 256:02x}"


def pick_subnet(used: Iterable[ipaddress.IPv4Network], seed: str,
                pool: ipaddress.IPv4Network = SUBNET_POOL) -> ipaddress.IPv4Network:
    """A /24 of ``pool`` that overlaps none of ``used``, the search starting at ``seed``'s hash.

    Raises :class:`errors.CommandError` when every /24 of the pool is taken.
    """
    subnets = list(pool.subnets(new_prefix=24))
    start = int(hashlib.sha1(seed.encode()).hexdigest(), 16) % len(subnets)
    taken = list(used)
    for step in range(len(subnets)):
        candidate = subnets[(start + step) % len(subnets)]
        if not any(candidate.overlaps(net) for net in taken):
            return candidate
    raise errors.CommandError(f"No free /24 left in {pool} for a guest cluster")


def node_address(subnet: ipaddress.IPv4Network, index: int) -> str:
    """Node ``index``'s address (1-based) in ``subnet``."""
    if not 1 <= index < HOST_SUFFIX:
        raise errors.ParameterError(f"Invalid node index {index}", errors.ECODE_INVAL)
    return str(subnet.network_address + index)


def host_address(subnet: ipaddress.IPv4Network) -> str:
    """The host's address on the cluster's bridge."""
    return str(subnet.network_address + HOST_SUFFIX)


def qemu_argv(spec: GuestSpec, *, qemu: str = QEMU) -> list[str]:
    """qemu's command line for a node guest (daemonized; see the module docstring)."""
    cpu = "host" if spec.accel == "kvm" else "max"
    argv = [qemu, "-name", spec.name, "-machine", f"q35,accel={spec.accel}", "-cpu", cpu,
            "-smp", str(spec.cpus), "-m", f"{spec.memory_mib}M",
            "-object", f"memory-backend-memfd,id=mem,size={spec.memory_mib}M,share=on",
            "-numa", "node,memdev=mem",
            "-kernel", spec.kernel, "-initrd", spec.initrd, "-append", spec.cmdline,
            "-chardev", f"socket,id=vfs,path={spec.vfs_socket}",
            "-device", "vhost-user-fs-pci,chardev=vfs,tag=hostroot",
            "-drive", f"file={spec.state_disk},if=virtio,format=raw"]
    for disk in spec.data_disks:
        argv += ["-drive", f"file={disk},if=virtio,format=raw,cache=none,aio=threads"]
    argv += ["-netdev", f"tap,id=net0,ifname={spec.tap},script=no,downscript=no",
             "-device", f"virtio-net-pci,netdev=net0,mac={spec.mac}",
             "-display", "none", "-vga", "none", "-monitor", "none", "-no-reboot",
             "-serial", f"file:{spec.console_log}",
             "-qmp", f"unix:{spec.qmp_socket},server=on,wait=off",
             "-pidfile", spec.qemu_pidfile, "-daemonize"]
    return argv


def virtiofsd_argv(socket_path: str, *, source: str = "/", binary: str = VIRTIOFSD
                   ) -> list[str]:
    """virtiofsd sharing ``source`` on ``socket_path`` (the guest mounts it read-only)."""
    return [binary, f"--socket-path={socket_path}", "-o", f"source={source}",
            "-o", "cache=always", "-o", "sandbox=chroot"]


# --- network ------------------------------------------------------------------------------

def network_support() -> str | None:
    """Why guest clusters cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "guest clusters need root (bridges and tap devices need CAP_NET_ADMIN)"
    for tool in ("ip", QEMU, "mkfs.ext4"):
        if shutil.which(tool) is None:
            return f"guest clusters need the {tool} command"
    if not os.path.exists(VIRTIOFSD):
        return f"guest clusters need {VIRTIOFSD} (Debian package qemu-system-common)"
    if not os.path.exists("/dev/net/tun"):
        return "guest clusters need /dev/net/tun (tap devices)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                         check=False)
    if check and res.returncode != 0:
        raise errors.CommandError(f"ip {' '.join(args)} failed: {res.stderr.strip()}")
    return res


def used_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of every address and route on this machine."""
    nets = []
    for line in _ip("-4", "-o", "addr", "show").stdout.splitlines():
        words = line.split()
        if "inet" in words:
            nets.append(ipaddress.IPv4Interface(words[words.index("inet") + 1]).network)
    for line in _ip("-4", "route", "show", "table", "all").stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        if word and word[0].isdigit():
            try:
                nets.append(ipaddress.IPv4Network(word, strict=False))
            except ValueError:
                continue
    return [n for n in nets if n.prefixlen > 0]


def _link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")


def create_network(bridge: str, taps: Sequence[str], seed: str) -> ipaddress.IPv4Network:
    """Make the bridge (with the host's address in a free /24) and the taps; the subnet.

    Raises :class:`errors.CommandError` when the bridge exists already or ``ip`` fails
    (whatever was made is removed again).
    """
    if _link_exists(bridge):
        raise errors.CommandError(f"Network device {bridge} exists already (a guest"
                                  " cluster in the same directory?); destroy it first")
    os.makedirs(os.path.dirname(NETWORK_LOCK), exist_ok=True)
    with open(NETWORK_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subnet = pick_subnet(used_networks(), seed)
        try:
            _ip("link", "add", bridge, "type", "bridge")
            _ip("addr", "add", f"{host_address(subnet)}/24", "dev", bridge)
            _ip("link", "set", bridge, "up")
            for tap in taps:
                _ip("tuntap", "add", tap, "mode", "tap")
                _ip("link", "set", tap, "master", bridge)
                _ip("link", "set", tap, "up")
        except errors.CommandError:
            destroy_network(bridge, taps)
            raise
    return subnet


def destroy_network(bridge: str, taps: Iterable[str]) -> None:
    """Remove the taps and the bridge (those that exist)."""
    for name in [*taps, bridge]:
        if _link_exists(name):
            _ip("link", "del", name, check=False)


# --- disks --------------------------------------------------------------------------------

def make_state_disk(path: str, seed_dir: str, size_mib: int) -> None:
    """A sparse ext4 image holding ``seed_dir``'s tree (``mkfs.ext4 -d``)."""
    res = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", guestimage.STATE_LABEL, "-d", seed_dir,
                          path, f"{size_mib}M"], capture_output=True, text=True, timeout=120,
                         check=False)
    if res.returncode != 0:
        raise errors.CommandError(f"mkfs.ext4 {path} failed: {res.stderr.strip()}")


def make_data_disks(directory: str, count: int, size_gib: int) -> tuple[str, ...]:
    """``count`` sparse files of ``size_gib`` GiB: the node's LVM disks."""
    paths = []
    for k in range(count):
        path = os.path.join(directory, f"disk{k}.img")
        with open(path, "wb") as fh:
            fh.truncate(size_gib << 30)
        paths.append(path)
    return tuple(paths)


# --- processes ----------------------------------------------------------------------------

def read_pid(path: str) -> int | None:
    """The pid in a pid file (None: no file or no number)."""
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def process_alive(pid: int | None) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    if pid is None:
        return False
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (the state first);
    empty once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def guest_running(spec: GuestSpec) -> bool:
    """Whether the node's qemu runs."""
    return process_alive(read_pid(spec.qemu_pidfile))


def start_guest(spec: GuestSpec, *, timeout: float = 30.0) -> None:
    """Start the node's virtiofsd, then its qemu (returns once qemu daemonized).

    Raises :class:`errors.CommandError` when either fails (qemu's message
    included); a virtiofsd left without its qemu is killed.
    """
    if guest_running(spec):
        return
    kill_guest(spec)
    _keep_old_console(spec)
    for path in (spec.vfs_socket, spec.qmp_socket):
        if os.path.lexists(path):
            os.unlink(path)
    with open(os.path.join(spec.directory, "virtiofsd.log"), "ab") as log:
        vfs = subprocess.Popen(virtiofsd_argv(spec.vfs_socket), stdin=subprocess.DEVNULL,
                               stdout=log, stderr=log, start_new_session=True)
    with open(spec.virtiofsd_pidfile, "w") as fh:
        fh.write(f"{vfs.pid}\n")
    deadline = time.monotonic() + timeout
    while not os.path.exists(spec.vfs_socket):
        if vfs.poll() is not None or time.monotonic() > deadline:
            kill_guest(spec)
            raise errors.CommandError(f"virtiofsd for {spec.name} did not start (see"
                                      f" {spec.directory}/virtiofsd.log)")
        time.sleep(0.05)
    res = subprocess.run(qemu_argv(spec), stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        kill_guest(spec)
        raise errors.CommandError(f"qemu of {spec.name} failed ({res.returncode}):"
                                  f" {res.stderr.strip()[-500:]}")


def _keep_old_console(spec: GuestSpec) -> None:
    """Move the last boot's console output to ``console.old.log`` (qemu truncates the file)."""
    if not os.path.exists(spec.console_log):
        return
    with open(spec.console_log, "rb") as src, \
            open(os.path.join(spec.directory, "console.old.log"), "ab") as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(spec.console_log)


def kill_guest(spec: GuestSpec, *, timeout: float = 10.0) -> None:
    """Power the node off at once (SIGKILL to qemu, as a crash), and stop its virtiofsd."""
    pids = [p for p in (read_pid(spec.qemu_pidfile), read_pid(spec.virtiofsd_pidfile))
            if p is not None and process_alive(p)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
        _reap(pids)
        time.sleep(0.05)
    _reap(pids)
    for path in (spec.qemu_pidfile, spec.virtiofsd_pidfile):
        if os.path.exists(path):
            os.unlink(path)


def _reap(pids: Iterable[int]) -> None:
    """Collect our own exited children among ``pids`` (virtiofsd is started by us)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


# --- acceleration -------------------------------------------------------------------------

def _kvm_usable() -> bool:
    return os.access("/dev/kvm", os.R_OK | os.W_OK)


def probe_verdict(console: str, cpu_seconds: float, elapsed: float, exited: bool,
                  *, cpu_budget: float = _PROBE_CPU_BUDGET,
                  timeout: float = _PROBE_TIMEOUT) -> bool | None:
    """Whether KVM boots the image, from the probe's state so far; None: not known yet.

    ``console`` is what the guest printed, ``cpu_seconds`` the CPU qemu used,
    ``elapsed`` the wall time since it started and ``exited`` whether it has.
    Yes once the probe line is there; no when qemu ended without it, used
    ``cpu_budget`` of CPU or ran ``timeout`` seconds.
    """
    if guestimage.PROBE_LINE in console:
        return True
    if exited or cpu_seconds >= cpu_budget or elapsed >= timeout:
        return False
    return None


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (0 once it is gone)."""
    fields = _stat_fields(pid)
    if len(fields) < 13:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _probe_kvm(image: guestimage.Image, workdir: str) -> bool:
    """Boot the image with KVM once, asking ``/init`` only to print the probe line;
    decided by :func:`probe_verdict` (qemu is stopped as soon as it is)."""
    cmdline = guestimage.kernel_cmdline(hostname="probe", address="10.0.0.1", prefix=24,
                                        python="/bin/false", repo="/", probe=True)
    log = os.path.join(workdir, "probe.log")
    argv = [QEMU, "-machine", "q35,accel=kvm", "-cpu", "host", "-m", "256M",
            "-kernel", image.kernel, "-initrd", image.initrd, "-append", cmdline,
            "-display", "none", "-vga", "none", "-monitor", "none", "-no-reboot",
            "-nic", "none", "-serial", f"file:{log}"]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return False
    try:
        while True:
            exited = proc.poll() is not None
            verdict = probe_verdict(_read_text(log), _cpu_seconds(proc.pid),
                                    time.monotonic() - started, exited,
                                    cpu_budget=_PROBE_CPU_BUDGET, timeout=_PROBE_TIMEOUT)
            if verdict is not None:
                return verdict
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def choose_accel(image: guestimage.Image, requested: str = "auto", *,
                 log: Log | None = None) -> str:
    """``kvm`` or ``tcg``: ``requested``, or for ``auto`` KVM where it boots the image.

    The probe (a boot of at most 5 CPU seconds or 20 s, :func:`probe_verdict`)
    runs once per image build; its answer is kept in the build's ``accel.json``.
    """
    log = log or (lambda msg: None)
    if requested in ("kvm", "tcg"):
        return requested
    if requested != "auto":
        raise errors.ParameterError(f"Invalid acceleration {requested!r} (auto, kvm, tcg)",
                                    errors.ECODE_INVAL)
    if not _kvm_usable():
        return "tcg"
    cache = os.path.join(image.directory, "accel.json")
    # two test workers may start a guest cluster at once: one probes, the other waits
    with open(os.path.join(image.directory, ".accel.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(cache) as fh:
                return "kvm" if json.load(fh)["kvm_boots"] else "tcg"
        except (OSError, ValueError, KeyError):
            pass
        log("Probing whether KVM boots the guest kernel here (once per build)")
        tmp = os.path.join(image.directory, f".probe-{os.getpid()}")
        os.makedirs(tmp, exist_ok=True)
        try:
            boots = _probe_kvm(image, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        io.write_file_atomic(cache, json.dumps({"kvm_boots": boots}), fsync=False)
    return "kvm" if boots else "tcg"
