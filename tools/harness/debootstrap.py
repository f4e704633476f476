"""Debian's ``ganeti-instance-debootstrap`` on a virtual cluster's nodes (doc/os.md).

The package's OS definition (``/usr/share/ganeti/os/debootstrap``) runs
unchanged; what a test or a demo needs around it is configuration, the way
an operator would write it:

* a **variant** of the package (``<VARIANTS_DIR>/<name>.conf``, sourced by
  its scripts after ``/etc/default/ganeti-instance-debootstrap``), written
  in the virtual node's own root (:func:`node_conf_dir`: the package's
  ``/etc/ganeti/instance-debootstrap`` layout below it, never the
  machine's), naming
  the Debian suite and mirror of this machine's own apt configuration
  (:func:`host_mirror`, never a fixed host name), a kernel in the guest
  (``EXTRA_PKGS``), an unpartitioned disk (``PARTITION_STYLE=none``: the
  package maps partitions with ``kpartx``, which needs device-mapper) and
  a customization directory holding the project's ``extlinux`` hook
  (``tools/os/debootstrap-hooks/``), which makes the disk boot by itself
  under the kvm hypervisor (:func:`setup_variant`);
* in each virtual node's root, the definition at
  ``usr/share/ganeti/os/debootstrap`` (the last directory of the OS search
  path): symbolic links to the package's files, a ``variants.list``
  naming the package's variants and this one, and a ``common.sh`` that
  sets ``VARIANTS_DIR`` to the node's variants directory, then sources the
  package's own (the package takes ``VARIANTS_DIR`` from its environment
  when set, ``: ${VARIANTS_DIR:=...}``; the node daemon gives the scripts a
  clean environment, so the variable is set there) (:func:`install_on_node`).
  Nothing is written under the machine's ``/etc``; the virtual cluster's
  directory holds it all and goes with it.

The package keeps its own cache of the debootstrap result
(``/var/cache/ganeti-instance-debootstrap/cache-<suite>-<arch>.tar``): the
first install downloads the packages, later ones unpack the tarball.

Pure pieces: :func:`parse_apt_sources`, :func:`variant_config`, :func:`common_shim`.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterable

from ganeti.pathutils import Paths

__all__ = ["OS_DIR", "CONF_DIR", "VARIANT", "HOOK", "parse_apt_sources", "host_codename",
           "host_mirror", "variant_config", "common_shim", "node_conf_dir", "setup_variant",
           "install_on_node", "problem"]

#: where the package installs its OS definition
OS_DIR = "/usr/share/ganeti/os/debootstrap"
#: the package's configuration directory (variants and their files); the
#: harness writes its layout below each virtual node's root, never here
CONF_DIR = "/etc/ganeti/instance-debootstrap"
#: the variant the tests and the demo use
VARIANT = "ganeti-kvm"
#: the project's customization hook, copied into the variant's hooks directory
HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "os", "debootstrap-hooks", "extlinux")
#: the kernel the guest gets (small, with virtio drivers)
GUEST_KERNEL = "linux-image-cloud-amd64"
_TOOLS = ("debootstrap", "losetup", "mke2fs", "extlinux", "debugfs")


# --- pure pieces ------------------------------------------------------------

def _deb822_stanzas(text: str) -> Iterable[dict[str, str]]:
    stanza: dict[str, str] = {}
    key = ""
    for raw in text.splitlines() + [""]:
        line = raw.rstrip()
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                yield stanza
            stanza, key = {}, ""
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            stanza[key] = value.strip()


def parse_apt_sources(files: Iterable[tuple[str, str]], suite: str) -> list[str]:
    """The archive URIs serving ``suite`` (``main``), in order, from apt source files.

    ``files`` are ``(file name, text)``: ``*.sources`` in deb822 form
    (stanzas with ``Types``, ``URIs``, ``Suites``, ``Components``,
    ``Enabled``), anything else one-line ``deb [options] URI suite
    components...`` form.  Only ``deb`` entries with an ``http``/``https``
    URI count; trailing slashes are removed.
    """
    found: list[str] = []

    def add(uri: str) -> None:
        uri = uri.rstrip("/")
        if uri.split(":", 1)[0] in ("http", "https") and uri not in found:
            found.append(uri)

    for name, text in files:
        if name.endswith(".sources"):
            for st in _deb822_stanzas(text):
                if st.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in st.get("types", "").split():
                    continue
                if suite not in st.get("suites", "").split():
                    continue
                if "main" not in st.get("components", "").split():
                    continue
                for uri in st.get("uris", "").split():
                    add(uri)
            continue
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            if words and words[0].startswith("["):
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if len(words) >= 3 and words[1] == suite and "main" in words[2:]:
                add(words[0])
    return found


def variant_config(suite: str, mirror: str, hooks_dir: str) -> str:
    """The text of the variant's ``.conf`` (shell assignments the package's scripts source)."""
    return ("# ganeti-instance-debootstrap variant written by tools/harness/debootstrap.py\n"
            "# (doc/os.md): a Debian guest that boots from its disk under kvm\n"
            f'SUITE="{suite}"\n'
            f'MIRROR="{mirror}"\n'
            f'EXTRA_PKGS="{GUEST_KERNEL}"\n'
            'PARTITION_STYLE="none"\n'
            f'CUSTOMIZE_DIR="{hooks_dir}"\n')


def common_shim(variants_dir: str, os_dir: str = OS_DIR) -> str:
    """The text of a node's ``common.sh``: the package's, with ``variants_dir``."""
    return ("# written by tools/harness/debootstrap.py (doc/os.md): the package's common.sh,\n"
            "# with this node's variants directory instead of the machine's\n"
            f"VARIANTS_DIR={shlex.quote(variants_dir)}\n"
            f". {shlex.quote(os.path.join(os_dir, 'common.sh'))}\n")


def node_conf_dir(paths: Paths) -> str:
    """The package's configuration directory as a virtual node has it (below its root)."""
    return os.path.join(paths.root, CONF_DIR.lstrip("/"))


# --- this machine -------------------------------------------------------------

def host_codename(os_release: str = "/etc/os-release") -> str:
    """This machine's Debian codename (``VERSION_CODENAME``); "" when unknown."""
    try:
        with open(os_release, encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.strip().partition("=")
                if key == "VERSION_CODENAME":
                    return value.strip().strip('"')
    except OSError:
        pass
    return ""


def host_mirror(suite: str, apt_dir: str = "/etc/apt") -> str:
    """The first archive of this machine's apt configuration serving ``suite``; "" if none."""
    names = [os.path.join(apt_dir, "sources.list")]
    names += sorted(glob.glob(os.path.join(apt_dir, "sources.list.d", "*.list")))
    names += sorted(glob.glob(os.path.join(apt_dir, "sources.list.d", "*.sources")))
    files = []
    for name in names:
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                files.append((name, fh.read()))
        except OSError:
            continue
    uris = parse_apt_sources(files, suite)
    return uris[0] if uris else ""


def problem() -> str:
    """Why the package cannot install a guest here ("" when it can)."""
    if os.geteuid() != 0:
        return "ganeti-instance-debootstrap needs root (losetup, mount, chroot)"
    if not os.path.isfile(os.path.join(OS_DIR, "create")):
        return f"ganeti-instance-debootstrap is not installed ({OS_DIR} missing)"
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control missing)"
    suite = host_codename()
    if not suite or not host_mirror(suite):
        return "no Debian archive for this machine's release in its apt sources"
    return ""


def _write_atomic(path: str, text: str, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def setup_variant(name: str, conf_dir: str, *, suite: str = "", mirror: str = "") -> str:
    """Write variant ``name`` (its ``.conf`` and hooks directory) under ``conf_dir``.

    ``suite`` and ``mirror`` default to this machine's (:func:`host_codename`,
    :func:`host_mirror`).  The same content every time on a machine
    (written atomically, so concurrent runs are safe).  Returns the
    ``.conf`` path.
    """
    suite = suite or host_codename()
    mirror = mirror or host_mirror(suite)
    if not suite or not mirror:
        raise RuntimeError("no Debian archive for this machine's release in its apt sources")
    hooks = os.path.join(conf_dir, f"{name}-hooks")
    os.makedirs(hooks, exist_ok=True)
    with open(HOOK, encoding="utf-8") as fh:
        _write_atomic(os.path.join(hooks, os.path.basename(HOOK)), fh.read(), 0o755)
    variants = os.path.join(conf_dir, "variants")
    os.makedirs(variants, exist_ok=True)
    conf = os.path.join(variants, f"{name}.conf")
    _write_atomic(conf, variant_config(suite, mirror, hooks), 0o644)
    return conf


def install_on_node(paths: Paths, variant: str = VARIANT, os_dir: str = OS_DIR, *,
                    suite: str = "", mirror: str = "") -> str:
    """Make a virtual node see the package's OS with ``variant``; its directory.

    ``variant`` is written below the node's root (:func:`setup_variant` in
    :func:`node_conf_dir`; ``suite`` and ``mirror`` as there).  The node's
    ``usr/share/ganeti/os/debootstrap`` holds symbolic links to every file
    of ``os_dir`` but ``variants.list``, which is the package's list plus
    ``variant``, and ``common.sh``, which points the package's at the
    node's variants (:func:`common_shim`).
    """
    conf_dir = node_conf_dir(paths)
    setup_variant(variant, conf_dir, suite=suite, mirror=mirror)
    dest = os.path.join(paths.os_search_path[-1], os.path.basename(os_dir))
    os.makedirs(dest, exist_ok=True)
    listed: list[str] = []
    for entry in sorted(os.listdir(os_dir)):
        src = os.path.join(os_dir, entry)
        if entry == "variants.list":
            with open(src, encoding="utf-8") as fh:
                listed = [line.strip() for line in fh if line.strip()]
            continue
        if entry == "common.sh":
            continue
        link = os.path.join(dest, entry)
        if not os.path.lexists(link):
            os.symlink(src, link)
    if variant not in listed:
        listed.append(variant)
    _write_atomic(os.path.join(dest, "variants.list"), "\n".join(listed) + "\n", 0o644)
    _write_atomic(os.path.join(dest, "common.sh"),
                  common_shim(os.path.join(conf_dir, "variants"), os_dir), 0o644)
    return dest
