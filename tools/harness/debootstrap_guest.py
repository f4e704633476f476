"""Debian's ``ganeti-instance-debootstrap`` on a guest cluster's nodes (doc/os.md).

A guest node (doc/vcluster.md, "Guest clusters") runs on this machine's
root file system, read-only, with writable overlays on ``/etc``, ``/var``,
``/root`` and ``/srv``.  So it already has what the machine has installed:
the package's definition in ``/usr/share/ganeti/os/debootstrap`` (the last
directory of the node daemon's OS search path), its ``debootstrap``,
``mke2fs``, ``extlinux``..., and the package's cache tarball in
``/var/cache/ganeti-instance-debootstrap``.  What it needs is the
configuration an operator writes on a real node, in the node's own
``/etc`` (its overlay: the machine's ``/etc`` is never written):

* the variant's ``.conf`` in ``/etc/ganeti/instance-debootstrap/variants``
  and its hooks directory (:func:`tools.harness.debootstrap.variant_config`,
  the project's extlinux hook),
* ``/etc/ganeti/instance-debootstrap/variants.list`` naming it (the
  package's ``variants.list`` is a link to that file).

No shim is needed there: the package's own ``common.sh`` reads the
node's ``/etc``.  :func:`config_files` says what to write,
:func:`writer_script` how (one shell command run through the node's
shell), :func:`install_on_guest` does it.

Guest nodes have no route to a Debian archive: ``create`` there unpacks
the cache tarball, which :func:`ensure_cache` makes on this machine first
when it is missing or about to expire (the package's own ``create``, run
on a scratch image file, as the first install on a node would).
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable

from ganeti.utils.process import RunResult
from tools.harness import debootstrap

__all__ = ["CACHE_DIR", "config_files", "writer_script", "install_on_guest", "cache_file",
           "cache_problem", "ensure_cache", "main"]

#: the package's fixed cache directory (its ``common.sh``)
CACHE_DIR = "/var/cache/ganeti-instance-debootstrap"
#: a tarball older than this many days is renewed (the package's ``CLEAN_CACHE``
#: default removes it after 14)
_CACHE_DAYS = 12
#: the scratch image :func:`ensure_cache` installs on (the package wants >= 512 MiB)
_SCRATCH_BYTES = 1 << 30


# --- pure pieces ------------------------------------------------------------

def config_files(variant: str, suite: str, mirror: str, hook_text: str,
                 listed: list[str], conf_dir: str = debootstrap.CONF_DIR
                 ) -> dict[str, tuple[int, str]]:
    """What a node needs for ``variant``: absolute path -> (mode, text).

    ``listed`` is the package's ``variants.list`` (``variant`` is added
    unless there), ``hook_text`` the extlinux hook copied into the
    variant's hooks directory.
    """
    hooks = os.path.join(conf_dir, f"{variant}-hooks")
    names = listed + ([variant] if variant not in listed else [])
    return {
        os.path.join(conf_dir, "variants", f"{variant}.conf"):
            (0o644, debootstrap.variant_config(suite, mirror, hooks)),
        os.path.join(hooks, os.path.basename(debootstrap.HOOK)): (0o755, hook_text),
        os.path.join(conf_dir, "variants.list"): (0o644, "\n".join(names) + "\n"),
    }


def writer_script(files: dict[str, tuple[int, str]]) -> str:
    """One ``sh`` command writing ``files`` (each atomically: a temporary file, then mv)."""
    steps = ["set -e"]
    for path, (mode, text) in sorted(files.items()):
        tmp = shlex.quote(f"{path}.tmp")
        steps += [f"mkdir -p {shlex.quote(os.path.dirname(path))}",
                  f"printf %s {shlex.quote(text)} > {tmp}",
                  f"chmod {mode:o} {tmp}",
                  f"mv -f {tmp} {shlex.quote(path)}"]
    return "\n".join(steps) + "\n"


def cache_file(suite: str, arch: str, cache_dir: str = CACHE_DIR) -> str:
    """The package's cache tarball of ``suite`` on ``arch`` (its ``create``'s name)."""
    return os.path.join(cache_dir, f"cache-{suite}-{arch}.tar")


# --- guest nodes ------------------------------------------------------------

def _package_variants(os_dir: str = debootstrap.OS_DIR) -> list[str]:
    """The package's variants (its ``variants.list``, as installed on this machine)."""
    try:
        with open(os.path.join(os_dir, "variants.list"), encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except OSError:
        return ["default"]


def install_on_guest(run: Callable[[str], RunResult], variant: str = debootstrap.VARIANT,
                     *, suite: str = "", mirror: str = "") -> dict[str, tuple[int, str]]:
    """Write ``variant``'s configuration on a guest node; the files written.

    ``run`` runs a shell command on the node (e.g. ``GuestClusterFixture.ssh``
    with the node bound); ``suite`` and ``mirror`` default to this machine's.
    Raises RuntimeError when the command fails.
    """
    suite = suite or debootstrap.host_codename()
    mirror = mirror or debootstrap.host_mirror(suite)
    if not suite or not mirror:
        raise RuntimeError("no Debian archive for this machine's release in its apt sources")
    with open(debootstrap.HOOK, encoding="utf-8") as fh:
        hook = fh.read()
    files = config_files(variant, suite, mirror, hook, _package_variants())
    res = run(writer_script(files))
    if res.failed:
        raise RuntimeError(f"writing the {variant} variant failed: {res.fail_reason}"
                           f" {res.stderr}")
    return files


# --- the cache tarball on this machine ---------------------------------------

def _arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def cache_problem(suite: str = "", now: float | None = None, *, arch: str = "",
                  cache_dir: str = CACHE_DIR) -> str:
    """Why the cache tarball of ``suite`` is not usable ("" when it is).

    ``suite`` and ``arch`` default to this machine's; ``now`` to the time.
    """
    suite = suite or debootstrap.host_codename()
    path = cache_file(suite, arch or _arch(), cache_dir)
    try:
        age = (time.time() if now is None else now) - os.stat(path).st_mtime
    except OSError:
        return f"{path} is missing"
    if age > _CACHE_DAYS * 86400:
        return f"{path} is older than {_CACHE_DAYS} days"
    return ""


def ensure_cache(variant: str = debootstrap.VARIANT, *, timeout: float = 1200.0) -> str:
    """Make the cache tarball of this machine's suite unless usable; its path.

    Runs the package's ``create`` (API 20 environment, ``variant`` written
    to a temporary variants directory given in ``VARIANTS_DIR``) on a
    scratch image file: debootstrap from this machine's archive, which
    also writes the tarball.  Needs root; raises RuntimeError on failure.
    """
    suite = debootstrap.host_codename()
    path = cache_file(suite, _arch())
    if not cache_problem(suite):
        return path
    if os.path.exists(path):
        os.unlink(path)          # expired: create would unpack it, not renew it
    with tempfile.TemporaryDirectory(prefix="debcache-") as tmp:
        conf = debootstrap.setup_variant(variant, tmp)
        image = os.path.join(tmp, "scratch.img")
        with open(image, "wb") as fh:
            fh.truncate(_SCRATCH_BYTES)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "OS_API_VERSION": "20",
               "INSTANCE_NAME": "cache.invalid", "HYPERVISOR": "kvm", "DISK_COUNT": "1",
               "DISK_0_PATH": image, "NIC_COUNT": "0", "OS_VARIANT": variant,
               "VARIANTS_DIR": os.path.dirname(conf), "OSP_FILESYSTEM": "ext4"}
        res = subprocess.run([os.path.join(debootstrap.OS_DIR, "create")],
                             cwd=debootstrap.OS_DIR, env=env, capture_output=True, text=True,
                             timeout=timeout, check=False)
    if res.returncode != 0 or not os.path.isfile(path):
        raise RuntimeError(f"the package's create did not make {path}:"
                           f" {res.stdout[-2000:]}{res.stderr[-2000:]}")
    return path


# --- command line -------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """``python -m tools.harness.debootstrap_guest DIR [VARIANT]``: the package's
    variant on every node of the guest cluster in DIR (its cache tarball first)."""
    import argparse

    from tools.harness import guestcluster

    parser = argparse.ArgumentParser(prog="python -m tools.harness.debootstrap_guest",
                                     description=main.__doc__)
    parser.add_argument("directory", help="the guest cluster (tools/vcluster create --guests)")
    parser.add_argument("variant", nargs="?", default=debootstrap.VARIANT)
    args = parser.parse_args(argv)
    why = debootstrap.problem()
    if why:
        print(f"cannot: {why}")
        return 1
    print(f"cache tarball: {ensure_cache(args.variant)}")
    gc = guestcluster.load(os.path.abspath(args.directory))
    for node in gc.nodes:
        install_on_guest(functools.partial(guestcluster.run_on, gc, node.name), args.variant)
        print(f"{node.name}: debootstrap+{args.variant}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
