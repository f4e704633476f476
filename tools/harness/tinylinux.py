"""Build the tinylinux guest: a Debian kernel and a busybox initramfs (doc/kvm.md, "The tinylinux guest").

The kvm tests and the demo boot a real, tiny Linux guest.  Its pieces come
from Debian packages fetched at first use and kept in a cache directory:

* the kernel of ``linux-image-cloud-amd64``'s versioned dependency
  (``linux-image-<abi>-cloud-amd64``: small, with virtio drivers), fetched
  with ``apt-get download`` and unpacked with ``dpkg -x`` into the cache --
  never installed as the host's kernel;
* ``/bin/busybox`` of ``busybox-static`` (the installed one when the
  package is installed, else downloaded and unpacked the same way).

The initramfs (a gzip'd cpio "newc" archive written here) holds busybox, the
few kernel modules the guest needs (virtio, the ACPI power button, evdev,
efivarfs; found with their dependencies from the modules' ``.modinfo``) and
an ``/init`` that mounts proc/sys/dev (and efivarfs when booted through
UEFI), loads the modules, prints
``tinylinux: booted <hostname>`` on the serial console, then
``tinylinux: uptime <seconds>`` every two seconds, powers off at once on an
ACPI power-button press (QMP ``system_powerdown``) and runs a shell on the
console.

A build lives in ``<cache>/<key>/`` (``vmlinuz``, ``initrd.img``,
``guest.json``), the key made of the package versions and the builder's
format; builds are serialized by a lock file and published by an atomic
rename, so concurrent first uses are safe.  The cache directory is
``$GANETI_TINYLINUX_CACHE``, by default ``.cache/tinylinux`` in the
source tree.

The OS definition ``tools/os/tinylinux`` installs a build onto an
instance's disk; :func:`install` copies one into such a directory.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

from ganeti import errors

__all__ = ["KernelBuild", "Guest", "CACHE_ENV", "KERNEL_META_PACKAGE", "BOOT_LINE",
           "UPTIME_LINE",
           "default_cache_dir", "build", "install", "find_installed", "newc_archive",
           "module_info", "module_load_order", "init_script", "main", "versioned_kernel_package",
           "candidate_version", "unpack_package", "kernel_modules"]

CACHE_ENV = "GANETI_TINYLINUX_CACHE"
KERNEL_META_PACKAGE = "linux-image-cloud-amd64"
BUSYBOX_PACKAGE = "busybox-static"
#: what the guest prints once booted (followed by its hostname)
BOOT_LINE = "tinylinux: booted"
#: what the guest prints every two seconds (followed by /proc/uptime's first figure)
UPTIME_LINE = "tinylinux: uptime"
#: modules the guest loads (with their dependencies) when they are not built in
#: (the power button first: a press while the others load is not lost)
WANTED_MODULES = ("button", "evdev", "virtio_pci", "virtio_blk", "virtio_net", "virtio_scsi",
                  "virtio_balloon", "sd_mod", "efivarfs")
#: bump when the initramfs layout or /init changes in a way that matters
FORMAT = 1
GUEST_FILES = ("vmlinuz", "initrd.img", "guest.json")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Log = Callable[[str], None]


@dataclass(frozen=True)
class KernelBuild:
    """A directory holding a Debian kernel (``vmlinuz``) and an initramfs
    (``initrd.img``) built for it, and the kernel package they came from."""

    directory: str
    kernel_package: str
    kernel_version: str
    kernel_release: str

    @property
    def kernel(self) -> str:
        """Path of the kernel image."""
        return os.path.join(self.directory, "vmlinuz")

    @property
    def initrd(self) -> str:
        """Path of the initramfs."""
        return os.path.join(self.directory, "initrd.img")


@dataclass(frozen=True)
class Guest(KernelBuild):
    """One build of the guest: its files and what it was made from."""

    busybox_version: str
    modules: tuple[str, ...]


def default_cache_dir(environ: dict[str, str] | None = None) -> str:
    """The cache directory: ``$GANETI_TINYLINUX_CACHE`` or ``<source tree>/.cache/tinylinux``."""
    env = os.environ if environ is None else environ
    return env.get(CACHE_ENV) or os.path.join(_REPO_ROOT, ".cache", "tinylinux")


# --- pure pieces: the cpio archive, module metadata, /init -------------------------------

def _newc_header(ino: int, mode: int, nlink: int, size: int, namesize: int) -> bytes:
    fields = (ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, namesize, 0)
    return b"070701" + b"".join(b"%08X" % f for f in fields)


def _pad4(length: int) -> bytes:
    return b"\0" * (-length % 4)


def newc_archive(entries: Iterable[tuple[str, int, bytes]]) -> bytes:
    """A cpio "newc" archive of ``(name, mode, data)`` entries (owner root, mtime 0).

    ``mode`` carries the file type (``stat.S_IFDIR``, ``S_IFREG``,
    ``S_IFLNK`` with the target as data).  Directories must come before
    their contents, as the kernel's unpacker creates them in order.
    """
    out = bytearray()
    ino = 0
    for name, mode, data in [*entries, ("TRAILER!!!", 0, b"")]:
        ino += 1
        raw = name.encode() + b"\0"
        nlink = 2 if stat.S_ISDIR(mode) else 1
        header = _newc_header(ino if name != "TRAILER!!!" else 0, mode, nlink, len(data),
                              len(raw))
        out += header + raw
        out += _pad4(len(header) + len(raw))
        out += data + _pad4(len(data))
    return bytes(out)


def module_info(image: bytes) -> dict[str, str]:
    """The ``.modinfo`` section of a kernel module (an ELF64 little-endian file)."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise errors.ProgrammerError("not an ELF64 little-endian kernel module")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)

    def section(index: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", image,
                                                         shoff + index * shentsize)
        return name, offset, size

    _, str_off, _ = section(shstrndx)
    for index in range(shnum):
        name_off, offset, size = section(index)
        end = image.index(b"\0", str_off + name_off)
        if image[str_off + name_off:end] == b".modinfo":
            info: dict[str, str] = {}
            for item in image[offset:offset + size].split(b"\0"):
                key, sep, value = item.decode(errors="replace").partition("=")
                if sep:
                    info.setdefault(key, value)
            return info
    return {}


def module_load_order(available: dict[str, list[str]], wanted: Sequence[str]) -> list[str]:
    """Module names to load, dependencies first, for ``wanted`` (absent names skipped).

    ``available`` maps a module name to the names it depends on; a wanted
    module that is not there is built into the kernel (or missing) and left
    out, as are its dependencies unless something else needs them.
    """
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in available:
            return
        seen.add(name)
        for dep in available[name]:
            visit(dep)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


def init_script() -> str:
    """The guest's ``/init`` (a busybox shell script, PID 1)."""
    return f"""#!/bin/busybox sh
# tinylinux /init (built by tools/harness/tinylinux.py; see doc/kvm.md)
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root PS1='tinylinux# '
mkdir -p /proc /sys /dev /tmp /root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /etc/modules); do insmod /lib/modules/$m.ko 2>/dev/null; done
# booted through UEFI (hvparam firmware=uefi): the EFI variables as files
[ -d /sys/firmware/efi/efivars ] && mount -t efivarfs efivarfs /sys/firmware/efi/efivars
host=tinylinux
for word in $(cat /proc/cmdline); do
  case "$word" in tinylinux.hostname=?*) host="${{word#*=}}" ;; esac
done
hostname "$host"
# ACPI powerdown: the first event of a "Power Button" input device powers off
for ev in /sys/class/input/event*; do
  [ "$(cat "$ev/device/name" 2>/dev/null)" = "Power Button" ] || continue
  (dd if="/dev/input/${{ev##*/}}" bs=24 count=1 of=/dev/null 2>/dev/null &&
   echo "tinylinux: power button" && poweroff -f) &
done
echo "{BOOT_LINE} $host"
(while :; do read up rest < /proc/uptime; echo "{UPTIME_LINE} $up"; sleep 2; done) &
stty cols 160 rows 50 2>/dev/null
while :; do setsid cttyhack sh; sleep 1; done
"""


# --- Debian packages ----------------------------------------------------------------------

def _run(argv: Sequence[str], *, cwd: str | None = None) -> str:
    try:
        proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, check=False,
                              timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise errors.CommandError(f"{argv[0]} failed: {exc}") from exc
    if proc.returncode != 0:
        raise errors.CommandError(f"{' '.join(argv)} failed ({proc.returncode}):"
                                  f" {proc.stderr.strip()[-500:]}")
    return proc.stdout


#: what ``apt-cache`` answered in this process: (argv, :func:`_apt_state`) -> its output
_APT_ANSWERS: dict[tuple[tuple[str, ...], tuple[int, ...]], str] = {}
#: the files whose change can change ``apt-cache``'s answers (``apt-get update``
#: replaces the lists, a package install rewrites dpkg's status)
_APT_STATE_FILES = ("/var/lib/apt/lists", "/var/lib/dpkg/status", "/etc/apt/sources.list",
                    "/etc/apt/sources.list.d")


def _apt_state() -> tuple[int, ...]:
    """The modification times of :data:`_APT_STATE_FILES` (0 for a missing one)."""
    stamps = []
    for path in _APT_STATE_FILES:
        try:
            stamps.append(os.stat(path).st_mtime_ns)
        except OSError:
            stamps.append(0)
    return tuple(stamps)


def _apt_cache(*args: str) -> str:
    """``apt-cache ARGS``'s output, asked once per process while apt's lists and dpkg's
    status stay the same: every build of the guests asks which kernel to take, and
    a test worker builds (or finds) them for many tests (about 0.6 CPU seconds a
    question: apt reads its whole package cache)."""
    key = (args, _apt_state())
    answer = _APT_ANSWERS.get(key)
    if answer is None:
        answer = _APT_ANSWERS[key] = _run(["apt-cache", *args])
    return answer


def versioned_kernel_package(meta: str) -> str:
    """The versioned ``linux-image-*`` package the meta package depends on."""
    for line in _apt_cache("depends", meta).splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key in ("Depends", "|Depends") and value.startswith("linux-image-"):
            return value
    raise errors.CommandError(f"{meta} depends on no linux-image package (apt-cache depends)")


def candidate_version(package: str) -> str:
    for line in _apt_cache("policy", package).splitlines():
        key, _, value = line.strip().partition(":")
        if key == "Candidate" and value.strip() not in ("", "(none)"):
            return value.strip()
    raise errors.CommandError(f"no installable version of {package} (apt-cache policy)")


def _installed_version(package: str) -> str | None:
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f", "${Status} ${Version}", package],
                              capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = proc.stdout.split()
    if proc.returncode == 0 and words[:3] == ["install", "ok", "installed"] and len(words) > 3:
        return words[3]
    return None


def unpack_package(package: str, version: str, workdir: str, dest: str) -> None:
    """``apt-get download`` one package version and ``dpkg -x`` it into ``dest``."""
    _run(["apt-get", "download", "-q", f"{package}={version}"], cwd=workdir)
    debs = [n for n in os.listdir(workdir) if n.startswith(package + "_") and n.endswith(".deb")]
    if len(debs) != 1:
        raise errors.CommandError(f"apt-get download {package} left {debs or 'no .deb'}")
    deb = os.path.join(workdir, debs[0])
    _run(["dpkg", "-x", deb, dest])
    os.unlink(deb)


# --- the build ----------------------------------------------------------------------------

def _key(kernel_package: str, kernel_version: str, busybox_version: str) -> str:
    digest = hashlib.sha256(
        f"{FORMAT}\0{kernel_package}\0{kernel_version}\0{busybox_version}\0{WANTED_MODULES}"
        f"\0{init_script()}".encode()).hexdigest()[:12]
    safe = kernel_version.replace(":", "_").replace("~", "_")
    return f"{kernel_package}_{safe}_{digest}"


def _load(directory: str) -> Guest:
    with open(os.path.join(directory, "guest.json")) as fh:
        data = json.load(fh)
    data["directory"] = directory
    data["modules"] = tuple(data["modules"])
    return Guest(**data)


def _complete(directory: str) -> bool:
    return all(os.path.exists(os.path.join(directory, name)) for name in GUEST_FILES)


def find_installed(directory: str) -> Guest | None:
    """The build in ``directory`` (a cache entry or an installed copy), or None."""
    return _load(directory) if _complete(directory) else None


def kernel_modules(tree: str, release: str) -> dict[str, tuple[str, list[str]]]:
    """Module name -> (path, dependencies) of an unpacked kernel tree."""
    found: dict[str, tuple[str, list[str]]] = {}
    base = os.path.join(tree, "lib", "modules", release)
    for dirpath, _, files in os.walk(base):
        for name in files:
            if not name.endswith(".ko"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                info = module_info(fh.read())
            deps = [d.replace("-", "_") for d in info.get("depends", "").split(",") if d]
            found[info.get("name", name[:-3]).replace("-", "_")] = (path, deps)
    return found


def _initramfs(busybox: str, modules: list[tuple[str, str]]) -> bytes:
    entries: list[tuple[str, int, bytes]] = [
        (d, stat.S_IFDIR | 0o755, b"")
        for d in ("bin", "dev", "etc", "lib", "lib/modules", "proc", "root", "sys", "tmp")]
    with open(busybox, "rb") as fh:
        entries.append(("bin/busybox", stat.S_IFREG | 0o755, fh.read()))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox"))
    for name, path in modules:
        with open(path, "rb") as fh:
            entries.append((f"lib/modules/{name}.ko", stat.S_IFREG | 0o644, fh.read()))
    entries.append(("etc/modules", stat.S_IFREG | 0o644,
                    "".join(f"{name}\n" for name, _ in modules).encode()))
    entries.append(("init", stat.S_IFREG | 0o755, init_script().encode()))
    return gzip.compress(newc_archive(entries), compresslevel=6, mtime=0)


def _build_into(target: str, work: str, kernel_package: str, kernel_version: str,
                busybox_version: str, busybox_installed: bool, log: Log) -> None:
    tree = os.path.join(work, "kernel")
    log(f"Fetching {kernel_package} {kernel_version} (apt-get download, dpkg -x)")
    unpack_package(kernel_package, kernel_version, work, tree)
    releases = os.listdir(os.path.join(tree, "lib", "modules"))
    if len(releases) != 1:
        raise errors.CommandError(f"{kernel_package} holds modules for {releases}")
    release = releases[0]
    if busybox_installed:
        busybox = "/bin/busybox"
    else:
        log(f"Fetching {BUSYBOX_PACKAGE} {busybox_version}")
        bb_tree = os.path.join(work, "busybox")
        unpack_package(BUSYBOX_PACKAGE, busybox_version, work, bb_tree)
        busybox = os.path.join(bb_tree, "bin", "busybox")
    available = kernel_modules(tree, release)
    order = module_load_order({n: deps for n, (_, deps) in available.items()}, WANTED_MODULES)
    os.makedirs(target)
    shutil.copyfile(os.path.join(tree, "boot", f"vmlinuz-{release}"),
                    os.path.join(target, "vmlinuz"))
    with open(os.path.join(target, "initrd.img"), "wb") as fh:
        fh.write(_initramfs(busybox, [(n, available[n][0]) for n in order]))
    meta = {"kernel_package": kernel_package, "kernel_version": kernel_version,
            "kernel_release": release, "busybox_version": busybox_version,
            "modules": order}
    with open(os.path.join(target, "guest.json"), "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)


def build(cache_dir: str | None = None, *, meta_package: str = KERNEL_META_PACKAGE,
          log: Log | None = None) -> Guest:
    """The guest in the cache, built first when missing (see the module docstring).

    Raises :class:`errors.CommandError` when apt/dpkg fail (no network and
    nothing cached for the current package versions).
    """
    log = log or (lambda msg: None)
    cache_dir = os.path.abspath(cache_dir or default_cache_dir())
    kernel_package = versioned_kernel_package(meta_package)
    kernel_version = candidate_version(kernel_package)
    busybox_version = _installed_version(BUSYBOX_PACKAGE)
    busybox_installed = busybox_version is not None and os.path.exists("/bin/busybox")
    if not busybox_installed:
        busybox_version = candidate_version(BUSYBOX_PACKAGE)
    assert busybox_version is not None
    target = os.path.join(cache_dir, _key(kernel_package, kernel_version, busybox_version))
    if _complete(target):
        return _load(target)
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(target):  # built by someone else while we waited
            return _load(target)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=cache_dir) as work:
            staged = os.path.join(work, "guest")
            _build_into(staged, work, kernel_package, kernel_version, busybox_version,
                        busybox_installed, log)
            if os.path.exists(target):  # an incomplete leftover
                shutil.rmtree(target)
            os.rename(staged, target)
    log(f"Built the tinylinux guest in {target}")
    return _load(target)


def install(guest: Guest, dest: str) -> Guest:
    """Copy a build's files into ``dest`` (hard links when possible); the copy."""
    os.makedirs(dest, exist_ok=True)
    for name in GUEST_FILES:
        src, dst = os.path.join(guest.directory, name), os.path.join(dest, name)
        tmp = dst + ".tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    return _load(dest)


def main(argv: Sequence[str] | None = None) -> int:
    """``build [--cache DIR] [--install DIR]``: build (or find) the guest, print its directory."""
    parser = argparse.ArgumentParser(prog="tinylinux-build", description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=None,
                        help=f"cache directory (default ${CACHE_ENV} or .cache/tinylinux)")
    parser.add_argument("--install", metavar="DIR", default=None,
                        help="also copy the guest's files into DIR (e.g. an OS definition's guest/)")
    parser.add_argument("-q", "--quiet", action="store_true")
    opts = parser.parse_args(argv)
    log: Log = (lambda msg: None) if opts.quiet else (lambda msg: print(msg, flush=True))
    try:
        guest = build(opts.cache, log=log)
        if opts.install:
            guest = install(guest, opts.install)
    except errors.GanetiError as exc:
        print(f"tinylinux: {exc}")
        return 1
    print(guest.directory)
    if not opts.quiet:
        print(json.dumps(asdict(guest), indent=1, sort_keys=True))
    return 0
