"""The boot files of a guest-cluster node: Debian's kernel and a busybox initramfs.

A guest cluster (``tools/vcluster create DIR --guests``, doc/vcluster.md,
"Guest clusters") boots every node as a qemu guest whose root file system
is the host's, shared read-only over virtiofs.  This module builds the two
files qemu boots: the kernel of Debian's ``linux-image-<abi>-cloud-amd64``
(fetched and unpacked like the tinylinux guest's, by
:mod:`tools.harness.tinylinux`) and an initramfs holding busybox, the
kernel modules a node needs (virtio, virtiofs, overlay, device-mapper,
DRBD, loop, tun, bridge, veth, 8021q; with their dependencies) and ``/init``
(:func:`init_script`).

``/init`` loads the modules, mounts the host's root read-only, mounts the
node's state disk (the first virtio disk, ext4) and puts an overlay on
``/etc``, ``/var``, ``/root`` and ``/srv`` whose upper layers live there,
mounts tmpfs on ``/run`` and ``/tmp``, brings up ``lo`` and ``eth0`` with
the node's address, sets the host name, and hands over to the real root:
``<python> -m tools.harness.guestinit`` runs as PID 1 from the repository
(visible at the same path through the host's root).  The host's root stays
visible, unchanged, at ``/run/hostroot``; a repository or Python
environment below ``/tmp`` or ``/run`` (a fresh clone in ``/tmp``, say),
which the guest's own tmpfs would hide, is bind-mounted from there.  Everything comes from
the kernel command line (``vcg.*`` words, :func:`kernel_cmdline`), so one
build serves every node and every cluster.

With ``vcg.probe=1`` on the command line ``/init`` only prints
:data:`PROBE_LINE` and powers off: :mod:`tools.harness.guestvm` boots that
once per build to find out whether KVM boots this kernel here.

Builds are cached in ``$GANETI_GUEST_IMAGE_CACHE`` (default
``.cache/guestimage`` in the source tree) under a key made of the package
versions and this builder's format; concurrent first uses are serialized by
a lock file and published by an atomic rename.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ganeti import errors
from tools.harness import guestinit, tinylinux

__all__ = ["Image", "CACHE_ENV", "WANTED_MODULES", "PROBE_LINE", "READY_LINE", "STATE_LABEL",
           "OVERLAY_DIRS", "TCG_KERNEL_ARGS", "default_cache_dir", "init_script", "kernel_cmdline",
           "initramfs_entries", "build"]

CACHE_ENV = "GANETI_GUEST_IMAGE_CACHE"
#: kernel arguments of every test guest booted under TCG (the node guests here, the
#: cloud-init test image of tools/harness/cloudimage.py): ``norandmaps`` has every
#: process map its binary and libraries at the same addresses, so TCG's code
#: translated for one process (by virtual address) serves the next instead of being
#: made again for each Python start, ``lvs`` or ``socat``
#: (doc/vcluster.md, "Where a guest cluster's CPU goes"); test machines, not a
#: security boundary
TCG_KERNEL_ARGS = "norandmaps"
#: modules loaded at boot, dependencies first (absent ones are built in)
WANTED_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "fuse", "virtiofs", "overlay",
                  "dm_mod", "dm_snapshot", "dm_mirror", "dm_thin_pool", "drbd", "loop",
                  "tun", "bridge", "veth", "8021q", "button", "evdev")
#: what ``/init`` prints when probing (``vcg.probe=1``) before powering off
PROBE_LINE = "vcluster-guest: probe ok"
#: what the guest's PID 1 prints once its daemons are started
READY_LINE = guestinit.READY_LINE
#: the label of the state disk's ext4 file system
STATE_LABEL = "vcstate"
#: host directories that get a writable overlay kept on the state disk
OVERLAY_DIRS = ("etc", "var", "root", "srv")
#: bump when the initramfs layout or /init changes in a way that matters
FORMAT = 1
IMAGE_FILES = ("vmlinuz", "initrd.img", "image.json")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Log = Callable[[str], None]


@dataclass(frozen=True)
class Image(tinylinux.KernelBuild):
    """One build: the kernel, the initramfs and where they came from."""

    modules: tuple[str, ...]


def default_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$GANETI_GUEST_IMAGE_CACHE`` or ``<source tree>/.cache/guestimage``."""
    env = os.environ if environ is None else environ
    return env.get(CACHE_ENV) or os.path.join(_REPO_ROOT, ".cache", "guestimage")


# --- pure pieces ---------------------------------------------------------------------------

def kernel_cmdline(*, hostname: str, address: str, prefix: int, python: str, repo: str,
                   probe: bool = False) -> str:
    """The kernel command line of a node guest (the ``vcg.*`` words ``/init`` reads).

    Raises :class:`errors.ParameterError` for a value with white space (the
    kernel splits its command line on it).
    """
    words = {"vcg.host": hostname, "vcg.ip": address, "vcg.prefix": str(prefix),
             "vcg.python": python, "vcg.repo": repo}
    for key, value in words.items():
        if not value or any(c.isspace() for c in value):
            raise errors.ParameterError(f"Invalid {key} {value!r} for a kernel command line",
                                        errors.ECODE_INVAL)
    line = (f"console=ttyS0 panic=-1 loglevel=4 {TCG_KERNEL_ARGS} "
            + " ".join(f"{k}={v}" for k, v in words.items()))
    return line + (" vcg.probe=1" if probe else "")


def init_script() -> str:
    """The initramfs's ``/init`` (busybox shell, PID 1 until ``switch_root``)."""
    overlays = " ".join(OVERLAY_DIRS)
    return f"""#!/bin/busybox sh
# guest-cluster node /init (tools/harness/guestimage.py; doc/vcluster.md, "Guest clusters")
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /newroot /state
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /etc/modules); do insmod /lib/modules/$m.ko 2>/dev/null; done
fail() {{ echo "vcluster-guest: $*"; poweroff -f; }}
for word in $(cat /proc/cmdline); do
  case "$word" in
    vcg.host=*) vcg_host="${{word#*=}}" ;;
    vcg.ip=*) vcg_ip="${{word#*=}}" ;;
    vcg.prefix=*) vcg_prefix="${{word#*=}}" ;;
    vcg.python=*) vcg_python="${{word#*=}}" ;;
    vcg.repo=*) vcg_repo="${{word#*=}}" ;;
    vcg.probe=*) vcg_probe="${{word#*=}}" ;;
  esac
done
if [ -n "$vcg_probe" ]; then echo "{PROBE_LINE}"; poweroff -f; fi
mount -t virtiofs -o ro hostroot /newroot || fail "cannot mount the host's root (virtiofs)"
mkdir -p /hostview
mount --bind /newroot /hostview
mount -t ext4 /dev/vda /state || fail "cannot mount the state disk /dev/vda"
for d in {overlays}; do
  mkdir -p /state/$d/upper /state/$d/work
  mount -t overlay overlay -o lowerdir=/newroot/$d,upperdir=/state/$d/upper,workdir=/state/$d/work /newroot/$d || fail "cannot mount the overlay on /$d"
done
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mkdir -p /newroot/run/lock /newroot/run/lvm /newroot/run/hostroot
mount --move /hostview /newroot/run/hostroot
# the repository and Python's environment where the guest's own /tmp or /run hide them
for p in "$vcg_repo" "${{vcg_python%/bin/*}}"; do
  case "$p" in
    /tmp/?*|/run/?*) mkdir -p "/newroot$p" && mount --bind "/newroot/run/hostroot$p" "/newroot$p" || fail "cannot show $p" ;;
  esac
done
hostname "$vcg_host"
ip link set lo up
ip addr add "$vcg_ip/$vcg_prefix" dev eth0 || fail "cannot configure eth0"
ip link set eth0 up
echo "vcluster-guest: [$(cut -d' ' -f1 /proc/uptime)] root ready $vcg_host"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/run/state
mount --move /state /newroot/run/state
exec switch_root /newroot /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \\
  PYTHONPATH="$vcg_repo" DM_DISABLE_UDEV=1 HOME=/root \\
  "$vcg_python" -m tools.harness.guestinit
"""


def initramfs_entries(busybox: bytes, modules: list[tuple[str, bytes]]
                      ) -> list[tuple[str, int, bytes]]:
    """The initramfs's ``(name, mode, data)`` entries (:func:`tinylinux.newc_archive`)."""
    entries: list[tuple[str, int, bytes]] = [
        (d, stat.S_IFDIR | 0o755, b"")
        for d in ("bin", "dev", "etc", "lib", "lib/modules", "newroot", "proc", "state", "sys")]
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, busybox))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox"))
    for name, data in modules:
        entries.append((f"lib/modules/{name}.ko", stat.S_IFREG | 0o644, data))
    entries.append(("etc/modules", stat.S_IFREG | 0o644,
                    "".join(f"{name}\n" for name, _ in modules).encode()))
    entries.append(("init", stat.S_IFREG | 0o755, init_script().encode()))
    return entries


# --- the build -----------------------------------------------------------------------------

def _key(kernel_package: str, kernel_version: str) -> str:
    digest = hashlib.sha256(f"{FORMAT}\0{kernel_package}\0{kernel_version}\0{WANTED_MODULES}"
                            f"\0{init_script()}".encode()).hexdigest()[:12]
    safe = kernel_version.replace(":", "_").replace("~", "_")
    return f"{kernel_package}_{safe}_{digest}"


def _load(directory: str) -> Image:
    with open(os.path.join(directory, "image.json")) as fh:
        data = json.load(fh)
    return Image(directory=directory, kernel_package=data["kernel_package"],
                 kernel_version=data["kernel_version"], kernel_release=data["kernel_release"],
                 modules=tuple(data["modules"]))


def _complete(directory: str) -> bool:
    return all(os.path.exists(os.path.join(directory, name)) for name in IMAGE_FILES)


def _busybox() -> bytes:
    if not os.path.exists("/bin/busybox"):
        raise errors.CommandError("Guest clusters need /bin/busybox (Debian package"
                                  " busybox-static or busybox)")
    with open("/bin/busybox", "rb") as fh:
        return fh.read()


def _build_into(target: str, work: str, kernel_package: str, kernel_version: str,
                log: Log) -> None:
    tree = os.path.join(work, "kernel")
    log(f"Fetching {kernel_package} {kernel_version} (apt-get download, dpkg -x)")
    tinylinux.unpack_package(kernel_package, kernel_version, work, tree)
    releases = os.listdir(os.path.join(tree, "lib", "modules"))
    if len(releases) != 1:
        raise errors.CommandError(f"{kernel_package} holds modules for {releases}")
    release = releases[0]
    available = tinylinux.kernel_modules(tree, release)
    order = tinylinux.module_load_order({n: d for n, (_, d) in available.items()},
                                        WANTED_MODULES)
    modules = []
    for name in order:
        with open(available[name][0], "rb") as fh:
            modules.append((name, fh.read()))
    os.makedirs(target)
    shutil.copyfile(os.path.join(tree, "boot", f"vmlinuz-{release}"),
                    os.path.join(target, "vmlinuz"))
    archive = tinylinux.newc_archive(initramfs_entries(_busybox(), modules))
    with open(os.path.join(target, "initrd.img"), "wb") as fh:
        fh.write(gzip.compress(archive, compresslevel=6, mtime=0))
    with open(os.path.join(target, "image.json"), "w") as fh:
        json.dump({"kernel_package": kernel_package, "kernel_version": kernel_version,
                   "kernel_release": release, "modules": order}, fh, indent=1, sort_keys=True)


def build(cache_dir: str | None = None, *, log: Log | None = None) -> Image:
    """The image in the cache, built first when missing (see the module docstring).

    Raises :class:`errors.CommandError` when apt/dpkg fail (no network and
    nothing cached for the current package versions) or busybox is missing.
    """
    log = log or (lambda msg: None)
    cache_dir = os.path.abspath(cache_dir or default_cache_dir())
    kernel_package = tinylinux.versioned_kernel_package(tinylinux.KERNEL_META_PACKAGE)
    kernel_version = tinylinux.candidate_version(kernel_package)
    target = os.path.join(cache_dir, _key(kernel_package, kernel_version))
    if _complete(target):
        return _load(target)
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target):
            return _load(target)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=cache_dir) as work:
            staged = os.path.join(work, "image")
            _build_into(staged, work, kernel_package, kernel_version, log)
            if os.path.exists(target):
                shutil.rmtree(target)
            os.rename(staged, target)
    log(f"Built the guest-cluster node image in {target}")
    return _load(target)
