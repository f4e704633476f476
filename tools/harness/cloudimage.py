"""Build a small Debian disk image with cloud-init, for image-based installs (doc/images.md, "The test image").

The image is made here from Debian's packages, never downloaded ready
made: ``mmdebstrap --variant=minbase`` of this machine's release from the
archive of its apt sources (:func:`tools.harness.debootstrap.host_mirror`;
apt resolves the packages, where debootstrap's perl re-reads the archive's
index in each round: about 60 % of the CPU, :data:`BUILDERS`)
with the cloud kernel, ``cloud-init``, ``openssh-server``, systemd, udev
and ifupdown (:data:`PACKAGES`), then a raw image whose whole disk is one
ext4 file system labelled ``root`` (made with ``mke2fs -d`` from the tree),
with extlinux as its boot loader: it boots under the kvm hypervisor with no
hypervisor parameter.  It is made to be booted under TCG by tests, so it
holds what they need only:

* cloud-init looks for its NoCloud data source only (then none), so a
  ``cidata`` seed (doc/images.md) configures the guest; it runs the
  modules of :data:`CLOUD_INIT_MODULES` only, and makes one SSH host key
  type (ed25519); its locale module is off (``locale: false``);
* no SSH host key and an empty ``/etc/machine-id``: each instance makes
  its own at first boot;
* the kernel logs to ``ttyS0`` (``quiet``) and root is logged in there
  automatically (a test image: the serial console is how tests look inside);
* no documentation, manual pages, translations or apt indexes; an
  initramfs with the disk drivers only (:func:`build_files`); the
  periodic maintenance units masked (:data:`MASKED_UNITS`).

A build lives in ``<cache>/<key>/`` (``debian-cloud.raw``,
``image.json``: suite, packages, kernel, size, SHA-256), the key made of
the suite, the packages and the builder's format; builds are serialized by
a lock file and published by an atomic rename, so concurrent first uses
are safe.  :func:`qcow2` adds a compressed qcow2 copy beside the raw image
(``debian-cloud.qcow2``, zstd clusters, ``qcow2.json`` with its SHA-256)
on first use.  The cache directory is ``$GANETI_CLOUDIMAGE_CACHE``, by
default ``.cache/cloudimage`` in the source tree.  Building needs root
(the builder's chroot, a loop mount for extlinux).

Pure pieces: :func:`cache_key`, :func:`guest_files`, :func:`build_files`,
:func:`builder_argv`.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import IO

from tools.harness import debootstrap, guestimage

__all__ = ["CloudImage", "CACHE_ENV", "PACKAGES", "VARIANT", "BUILDERS", "IMAGE_NAME",
           "KERNEL_ARGS", "MASKED_UNITS", "CLOUD_INIT_MODULES", "META_DATA_COMMAND",
           "default_cache_dir", "cache_key", "guest_files", "build_files", "builder_argv",
           "build", "find_built", "qcow2", "problem", "main"]

CACHE_ENV = "GANETI_CLOUDIMAGE_CACHE"
#: what the builder adds to its ``minbase`` variant (essential packages and apt):
#: the kernel, cloud-init, the SSH server, an init, udev and the network tools
#: cloud-init's ifupdown configuration needs; python3-cffi-backend is named
#: because debootstrap does not resolve the virtual packages
#: (python3-cffi-backend-api-*) python3-cryptography, of cloud-init, needs
PACKAGES = ("linux-image-cloud-amd64", "cloud-init", "openssh-server", "python3-cffi-backend",
            "systemd-sysv", "udev", "ifupdown", "iproute2", "netbase")
#: mmdebstrap's hooks that make /bin, /lib, ... links into /usr before the first
#: package, as debootstrap does, and install usr-is-merged: without them apt takes
#: the first of init-system-helpers' ``usrmerge | usr-is-merged``, and usrmerge
#: brings perl (50 MiB more)
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
#: the builder's variant: required packages and apt only (not the "important" ones:
#: cron, logrotate, editors, ...)
VARIANT = "minbase"
#: the programs that make the image's tree, the default first: ``mmdebstrap``
#: (apt resolves the packages; the whole build 30-35 CPU seconds and 30-34 s) or
#: ``debootstrap`` (53 CPU seconds and 64 s: its perl re-reads the archive's index
#: about 30 times, a third of its processes' CPU); doc/images.md, "The test image"
BUILDERS = ("mmdebstrap", "debootstrap")
IMAGE_NAME = "debian-cloud.raw"
QCOW2_NAME = "debian-cloud.qcow2"
QCOW2_META = "qcow2.json"
META_NAME = "image.json"
#: the raw image's size (sparse; cloud-init grows the file system to the disk's size)
IMAGE_MIB = 1024
LABEL = "root"
#: bump when the image's layout or configuration changes in a way that matters
FORMAT = 5
#: the kernel's command line: the serial console last (``/dev/console``, where
#: cloud-init and systemd write); ``quiet``: few kernel messages on the emulated
#: serial port; :data:`guestimage.TCG_KERNEL_ARGS` so that cloud-init's three Python
#: starts share their translated code (doc/images.md, "The test image")
KERNEL_ARGS = (f"root=LABEL={LABEL} ro console=tty0 console=ttyS0,115200n8 quiet "
               f"{guestimage.TCG_KERNEL_ARGS}")
#: systemd units masked in the image: periodic maintenance no test guest lives long
#: enough to need (and e2scrub_reap's pass at every boot), and cloud-init's config
#: stage, whose modules run in the final stage instead (:data:`CLOUD_INIT_MODULES`):
#: one start of cloud-init (Python, under TCG: seconds of CPU) fewer per boot
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
                "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
                "cloud-config.service")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Log = Callable[[str], None]


@dataclass(frozen=True)
class CloudImage:
    """A built image and what it was built from."""

    path: str
    suite: str
    packages: tuple[str, ...]
    kernel_version: str
    size: int
    sha256: str


def default_cache_dir(environ: dict[str, str] | None = None) -> str:
    """``$GANETI_CLOUDIMAGE_CACHE`` or ``<source tree>/.cache/cloudimage``."""
    env = os.environ if environ is None else environ
    return env.get(CACHE_ENV) or os.path.join(_REPO_ROOT, ".cache", "cloudimage")


def cache_key(suite: str, packages: Sequence[str], fmt: int = FORMAT) -> str:
    """The cache entry's name: the suite, the sorted packages and the format."""
    text = json.dumps({"suite": suite, "packages": sorted(packages), "format": fmt})
    return f"{suite}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


#: a command printing, inside a booted guest, the meta-data cloud-init read (JSON, from
#: its instance data): what ``cloud-init query ds.meta_data`` prints, without starting
#: cloud-init's own modules (seconds of CPU under TCG)
META_DATA_COMMAND = ("python3 -c \"import json; print(json.dumps(json.load(open("
                     "'/run/cloud-init/instance-data.json'))['ds']['meta_data']))\"")
#: the modules cloud-init runs in each stage (Debian's lists less those for other clouds,
#: distributions or services the image lacks): the host name, users and SSH keys, the
#: file system grown to the disk, and what a user-data document commonly asks
#: (commands, files, scripts, packages, passwords, power state); the network
#: configuration is no module (cloud-init's local stage writes it).  The config
#: stage's two run first in the final stage (its service is masked: :data:`MASKED_UNITS`)
CLOUD_INIT_MODULES = {
    "cloud_init_modules": ("bootcmd", "write-files", "growpart", "resizefs", "set_hostname",
                           "update_hostname", "update_etc_hosts", "users-groups", "ssh"),
    "cloud_config_modules": (),
    "cloud_final_modules": ("set-passwords", "runcmd", "package-update-upgrade-install",
                            "write-files-deferred",
                            "scripts-per-once", "scripts-per-boot", "scripts-per-instance",
                            "scripts-user", "final-message", "power-state-change"),
}


def guest_files(kernel: str, initrd: str) -> dict[str, str]:
    """The files written into the tree (path relative to its root -> content).

    ``kernel`` and ``initrd`` are the file names in ``/boot``.
    """
    modules = "".join(f"{stage}: [{' ' + ', '.join(names) if names else ''} ]\n"
                      for stage, names in CLOUD_INIT_MODULES.items())
    return {
        # no fsck at boot (a guest's file system is new with each install; ext4's
        # journal is replayed on mount all the same)
        "etc/fstab": f"LABEL={LABEL} / ext4 defaults 0 0\n",
        "etc/hostname": "localhost\n",
        "etc/machine-id": "",
        "etc/cloud/cloud.cfg.d/90_ganeti.cfg":
            "# the seed of an image-based instance (doc/images.md)\n"
            "datasource_list: [ NoCloud, None ]\n"
            "# no locales package in the image: its locale module would fail\n"
            "locale: false\n"
            "# a test image, booted under TCG: the modules its users need only\n"
            f"{modules}"
            "# one host key type each boot makes (RSA keys take seconds under TCG)\n"
            "ssh_genkeytypes: [ ed25519 ]\n",
        "etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf":
            "[Service]\nExecStart=\n"
            "ExecStart=-/sbin/agetty --autologin root --keep-baud 115200,38400,9600 %I $TERM\n",
        "boot/extlinux/extlinux.conf":
            "DEFAULT linux\nPROMPT 0\nTIMEOUT 0\nLABEL linux\n"
            f"  LINUX /boot/{kernel}\n  INITRD /boot/{initrd}\n"
            f"  APPEND {KERNEL_ARGS}\n",
    }


#: the initramfs hook naming the disk drivers (:func:`build_files`)
INITRAMFS_HOOK = "etc/initramfs-tools/hooks/ganeti-disks"


def build_files() -> dict[str, str]:
    """The files placed in the tree before the packages (path -> content), read while
    they are installed: dpkg leaves out documentation, manual pages and
    translations (copyright files stay), and the initramfs holds the drivers of
    the kvm hypervisor's disk types only (virtio, SCSI, IDE; ``MODULES=list`` and
    the hook :data:`INITRAMFS_HOOK`) instead of most of the kernel's: smaller,
    sooner read and unpacked at each boot."""
    return {
        "etc/dpkg/dpkg.cfg.d/90ganeti-image":
            "# a test image (doc/images.md): no documentation\n"
            "path-exclude=/usr/share/doc/*\n"
            "path-include=/usr/share/doc/*/copyright\n"
            "path-exclude=/usr/share/man/*\n"
            "path-exclude=/usr/share/info/*\n"
            "path-exclude=/usr/share/locale/*\n"
            "path-include=/usr/share/locale/locale.alias\n"
            "path-exclude=/usr/share/lintian/*\n",
        "etc/initramfs-tools/conf.d/90-ganeti.conf":
            "# only the disk drivers the hook ganeti-disks names (doc/images.md)\n"
            "MODULES=list\n",
        INITRAMFS_HOOK:
            "#!/bin/sh\n"
            "# the drivers of the kvm hypervisor's disk types (doc/images.md)\n"
            "PREREQ=\"\"\n"
            "prereqs() { echo \"$PREREQ\"; }\n"
            "case \"$1\" in prereqs) prereqs; exit 0 ;; esac\n"
            ". /usr/share/initramfs-tools/hook-functions\n"
            "manual_add_modules virtio_pci virtio_blk virtio_scsi sd_mod ata_piix ata_generic\n",
    }


def _write_files(tree: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(tree, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        if rel == INITRAMFS_HOOK:
            os.chmod(path, 0o755)


def builder_argv(builder: str, suite: str, tree: str, mirror: str, packages: Sequence[str],
                 files: str) -> list[str]:
    """The command that makes the image's ``tree`` with ``builder`` (one of
    :data:`BUILDERS`; ``tree`` must not exist yet).

    The files of :func:`build_files` must be in the tree before the first
    package is installed: mmdebstrap copies them in from the directory
    ``files`` (its setup hook, before the essential packages); debootstrap
    finds them in ``tree``, where the caller wrote them (``files`` unused).
    """
    include = f"--include={','.join(packages)}"
    if builder == "mmdebstrap":
        return ["mmdebstrap", "--mode=root", f"--variant={VARIANT}", include,
                f"--hook-dir={MERGED_USR_HOOKS}",
                f'--setup-hook=cp -a {shlex.quote(files)}/. "$1"/', suite, tree, mirror]
    if builder == "debootstrap":
        return ["debootstrap", f"--variant={VARIANT}", include, suite, tree, mirror]
    raise ValueError(f"Unknown image builder {builder!r} (one of {', '.join(BUILDERS)})")


def problem(builder: str = BUILDERS[0]) -> str:
    """Why an image cannot be built here with ``builder`` ("" when it can)."""
    if os.geteuid() != 0:
        return f"building the cloud image needs root ({builder}, a loop mount)"
    missing = [tool for tool in (builder, "mke2fs", "extlinux", "losetup", "mount")
               if not _which(tool)]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    suite = debootstrap.host_codename()
    if not suite or not debootstrap.host_mirror(suite):
        return "no Debian archive for this machine's release in its apt sources"
    return ""


def _which(tool: str) -> bool:
    return any(os.access(os.path.join(d, tool), os.X_OK)
               for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"))


def _load(directory: str) -> CloudImage | None:
    try:
        with open(os.path.join(directory, META_NAME), encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None
    path = os.path.join(directory, IMAGE_NAME)
    if not os.path.isfile(path):
        return None
    return CloudImage(path=path, suite=meta["suite"], packages=tuple(meta["packages"]),
                      kernel_version=meta["kernel_version"], size=int(meta["size"]),
                      sha256=meta["sha256"])


def find_built(cache_dir: str | None = None, suite: str = "",
               packages: Sequence[str] = PACKAGES) -> CloudImage | None:
    """The cached image for ``suite`` (default: this machine's) and ``packages``, or None."""
    cache_dir = cache_dir or default_cache_dir()
    suite = suite or debootstrap.host_codename()
    return _load(os.path.join(cache_dir, cache_key(suite, packages)))


def _run(argv: Sequence[str], log_fh: IO[str]) -> None:
    subprocess.run(list(argv), check=True, stdin=subprocess.DEVNULL, stdout=log_fh,
                   stderr=subprocess.STDOUT)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _configure(tree: str) -> str:
    """Write the image's own files into ``tree``; the kernel version."""
    kernels = sorted(glob.glob(os.path.join(tree, "boot", "vmlinuz-*")))
    if not kernels:
        raise RuntimeError("debootstrap left no kernel in /boot")
    kernel = os.path.basename(kernels[-1])
    version = kernel[len("vmlinuz-"):]
    initrd = f"initrd.img-{version}"
    if not os.path.exists(os.path.join(tree, "boot", initrd)):
        raise RuntimeError(f"no initramfs for kernel {version}")
    _write_files(tree, guest_files(kernel, initrd))
    for unit in MASKED_UNITS:
        link = os.path.join(tree, "etc", "systemd", "system", unit)
        if not os.path.lexists(link):
            os.symlink("/dev/null", link)
    for key in glob.glob(os.path.join(tree, "etc", "ssh", "ssh_host_*")):
        os.unlink(key)
    # the packages and the archive's indexes (apt-get update fetches them again)
    for junk in (glob.glob(os.path.join(tree, "var", "cache", "apt", "archives", "*.deb"))
                 + glob.glob(os.path.join(tree, "var", "cache", "apt", "*.bin"))
                 + glob.glob(os.path.join(tree, "var", "lib", "apt", "lists", "*_*"))):
        os.unlink(junk)
    _prune_docs(tree)
    return version


def _prune_docs(tree: str) -> None:
    """What the essential packages brought before dpkg's exclusions applied
    (:func:`build_files`; the builder unpacks them itself): documentation but
    copyright files, manual pages, info, translations but ``locale.alias``."""
    usr_share = os.path.join(tree, "usr", "share")
    for sub in ("man", "info", "lintian"):
        shutil.rmtree(os.path.join(usr_share, sub), ignore_errors=True)
    locale = os.path.join(usr_share, "locale")
    for name in (os.listdir(locale) if os.path.isdir(locale) else []):
        path = os.path.join(locale, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif name != "locale.alias":
            os.unlink(path)
    for top, _dirs, names in os.walk(os.path.join(usr_share, "doc"), topdown=False):
        for name in names:
            if name != "copyright":
                os.unlink(os.path.join(top, name))
        if top != os.path.join(usr_share, "doc") and not os.listdir(top):
            os.rmdir(top)


def _builder_errors(tree: str, build_log: str, limit: int = 20) -> str:
    """The last error lines of the builder: debootstrap's own log in ``tree``,
    else the build's log (mmdebstrap's output; dpkg's and apt's complaints)."""
    lines: list[str] = []
    for log in (os.path.join(tree, "debootstrap", "debootstrap.log"), build_log):
        try:
            with open(log, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
            break
        except OSError:
            continue
    if not lines:
        return "(no builder log)"
    wanted = [line for line in lines
              if line.startswith(("dpkg:", "E:", "W:")) or "depends on" in line
              or "not installed" in line]
    return "\n".join((wanted or lines)[-limit:])


def _make_image(tree: str, image: str, log_fh: IO[str]) -> None:
    """A whole-disk ext4 file system from ``tree``, with extlinux's boot sector."""
    with open(image, "wb") as fh:
        fh.truncate(IMAGE_MIB * 1024 * 1024)
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", LABEL, "-d", tree, image], log_fh)
    mnt = tempfile.mkdtemp(prefix=".mnt-", dir=os.path.dirname(image))
    loop = subprocess.run(["losetup", "--show", "-f", image], check=True, capture_output=True,
                          text=True).stdout.strip()
    try:
        _run(["mount", loop, mnt], log_fh)
        try:
            _run(["extlinux", "--install", os.path.join(mnt, "boot", "extlinux")], log_fh)
        finally:
            _run(["umount", mnt], log_fh)
    finally:
        subprocess.run(["losetup", "-d", loop], check=False)
        os.rmdir(mnt)


def _mounts_below(path: str) -> list[str]:
    """Mount points strictly below ``path``, deepest first."""
    prefix = os.path.realpath(path) + "/"
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as fh:
        for line in fh:
            point = line.split()[1].replace("\\040", " ")
            if point.startswith(prefix):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def _remove_tree(path: str) -> None:
    """Remove a build directory, never through a mount left in it (debootstrap's
    /proc, /sys or a bind of /dev after a failure): those are unmounted
    first, and the directory is kept when one stays."""
    for point in _mounts_below(path):
        subprocess.run(["umount", "-l", point], check=False)
    if _mounts_below(path):
        raise RuntimeError(f"mounts left below {path}: not removed")
    shutil.rmtree(path, ignore_errors=True)


def build(cache_dir: str | None = None, *, suite: str = "", mirror: str = "",
          packages: Sequence[str] = PACKAGES, log: Log | None = None,
          builder: str = BUILDERS[0]) -> CloudImage:
    """The image in the cache, built first when missing (see the module docstring);
    ``builder`` (:data:`BUILDERS`) makes its tree."""
    cache_dir = cache_dir or default_cache_dir()
    log = log or (lambda _msg: None)
    suite = suite or debootstrap.host_codename()
    mirror = mirror or debootstrap.host_mirror(suite)
    if not suite or not mirror:
        raise RuntimeError("no Debian archive for this machine's release in its apt sources")
    target = os.path.join(cache_dir, cache_key(suite, packages))
    found = _load(target)
    if found:
        return found
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _load(target)      # built by someone else while we waited
        if found:
            return found
        work = tempfile.mkdtemp(prefix=".build-", dir=cache_dir)
        try:
            tree = os.path.join(work, "tree")
            staged = os.path.join(work, "out")
            os.makedirs(staged)
            build_log = os.path.join(work, "build.log")
            with open(build_log, "w") as log_fh:
                log(f"{builder} {suite} from {mirror} (log {build_log})")
                files = os.path.join(work, "tree" if builder == "debootstrap" else "files")
                _write_files(files, build_files())
                argv = builder_argv(builder, suite, tree, mirror, packages, files)
                try:
                    _run(argv, log_fh)
                except subprocess.CalledProcessError as exc:
                    log_fh.flush()
                    raise RuntimeError(f"{builder} failed ({exc.returncode}):\n"
                                       f"{_builder_errors(tree, build_log)}") from exc
                version = _configure(tree)
                image = os.path.join(staged, IMAGE_NAME)
                log(f"writing {image}")
                _make_image(tree, image, log_fh)
            meta = {"suite": suite, "packages": list(packages), "kernel_version": version,
                    "size": os.path.getsize(image), "sha256": _sha256(image), "format": FORMAT}
            with open(os.path.join(staged, META_NAME), "w", encoding="utf-8") as fh:
                json.dump(meta, fh, indent=1)
            os.rename(staged, target)
        finally:
            _remove_tree(work)
    log(f"Built the cloud image in {target}")
    built = _load(target)
    assert built is not None
    return built


def qcow2(image: CloudImage) -> tuple[str, str]:
    """A compressed qcow2 copy of ``image`` beside it (made once): its path and SHA-256.

    About a third of the raw image's data, so it reaches a node sooner.
    """
    directory = os.path.dirname(image.path)
    path = os.path.join(directory, QCOW2_NAME)
    meta = os.path.join(directory, QCOW2_META)
    with open(os.path.join(directory, ".qcow2.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (os.path.isfile(path) and os.path.isfile(meta)):
            tmp = f"{path}.tmp-{os.getpid()}"
            try:
                subprocess.run(["qemu-img", "convert", "-c", "-o", "compression_type=zstd",
                                "-f", "raw", "-O", "qcow2", image.path, tmp],
                               check=True, capture_output=True)
                with open(f"{meta}.tmp", "w", encoding="utf-8") as fh:
                    json.dump({"sha256": _sha256(tmp), "raw_sha256": image.sha256}, fh)
                os.rename(tmp, path)
                os.rename(f"{meta}.tmp", meta)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    with open(meta, encoding="utf-8") as fh:
        return path, str(json.load(fh)["sha256"])


def main(argv: Sequence[str] | None = None) -> int:
    """``build [--cache DIR] [--builder PROGRAM]``: build (or find) the image and
    print it as JSON."""
    parser = argparse.ArgumentParser(prog="cloudimage", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the image unless cached; print it")
    b.add_argument("--cache", default=None, help="cache directory (default: %(default)s)")
    b.add_argument("--builder", choices=BUILDERS, default=BUILDERS[0],
                   help="the program that makes the image's tree (default: %(default)s)")
    args = parser.parse_args(argv)
    why = problem(args.builder)
    if why:
        parser.error(why)
    image = build(args.cache, log=lambda msg: print(msg, flush=True), builder=args.builder)
    print(json.dumps(asdict(image), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
