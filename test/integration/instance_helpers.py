"""Helpers shared by the instance integration tests (test_instances*.py).

They inspect the virtual cluster from outside: the master's ``config.data``
bytes, the disk image files and fake-hypervisor state files under the node
roots, and query results of ``gnt-instance list``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

from ganeti.hypervisor import base as hvbase
from ganeti.hypervisor.fake import FakeHypervisor

__all__ = ["NOCHECK", "rows", "status_of", "field", "config_bytes", "node_files", "snapshot",
           "fail_unchanged", "fake_hv", "disk_files", "read_marker", "install_os",
           "start_behind_masters_back"]

SEP = "|"
#: the made-up instance names do not resolve: skip the name and IP checks
NOCHECK = ("--no-name-check", "--no-ip-check")


def rows(vc: Any, fields: str, *names: str, filt: str | None = None) -> list[list[str]]:
    """``gnt-instance list -o FIELDS`` as a list of rows (split cells)."""
    argv = ["gnt-instance", "list", "--no-headers", f"--separator={SEP}", "-o", fields]
    if filt is not None:
        argv += ["--filter", filt]
    out = vc.ok(*argv, *names)
    return [line.split(SEP) for line in out.splitlines() if line.strip()]


def field(vc: Any, name: str, fname: str) -> str:
    """One field of one instance."""
    (row,) = rows(vc, fname, name)
    return row[0]


def status_of(vc: Any, name: str) -> str:
    """The runtime status of ``name``."""
    return field(vc, name, "status")


def config_bytes(vc: Any) -> bytes:
    """The master's config.data as bytes."""
    with open(vc.paths(vc.names[0]).config_file, "rb") as fh:
        return fh.read()


_FAKE_HV_CACHES = (".states-cache", ".memory-cache")


def node_files(vc: Any) -> dict[str, tuple[int, str]]:
    """Every disk image and fake-hypervisor state file of every node.

    ``{path: (size, sha1 of the first 64 KiB)}``, which is enough to see that
    nothing was created, removed, grown or rewritten.  The fake hypervisor's
    caches (``.states-cache``, ``.memory-cache``) are left out: a read (the
    memory a node reports) may refresh them, and they hold nothing but what
    the state files say.
    """
    found: dict[str, tuple[int, str]] = {}
    tops = []
    for name in vc.names:
        paths = vc.paths(name)
        tops += [paths.hypervisor_state_dir, os.path.join(paths.root, "srv"),
                 os.path.join(paths.root, "tmp")]
    for top in tops:
        for dirpath, _dirs, files in os.walk(top):
            if "/os/" in dirpath + "/" and "/srv/ganeti/os" in dirpath:
                continue
            for fname in files:
                if fname in _FAKE_HV_CACHES and os.path.basename(dirpath) == "fake-hypervisor":
                    continue
                path = os.path.join(dirpath, fname)
                try:
                    st = os.stat(path)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    with open(path, "rb") as fh:
                        digest = hashlib.sha1(fh.read(65536)).hexdigest()
                except OSError:
                    continue
                found[path] = (st.st_size, digest)
    return found


def snapshot(vc: Any) -> tuple[bytes, dict[str, tuple[int, str]]]:
    """``(config.data bytes, node files)``."""
    return config_bytes(vc), node_files(vc)


def fail_unchanged(vc: Any, *argv: str, expect: str = "") -> str:
    """Run a command that must fail and change nothing; returns its output."""
    before = snapshot(vc)
    res = vc.run(*argv)
    out = res.stdout + res.stderr
    assert res.returncode != 0, f"{argv} unexpectedly succeeded:\n{out}"
    assert out.strip(), f"{argv} failed without a message"
    if expect:
        assert expect.lower() in out.lower(), f"{expect!r} not in output of {argv}:\n{out}"
    assert "Traceback" not in out, out
    after = snapshot(vc)
    assert after[0] == before[0], f"{argv} changed config.data"
    changed = sorted(path for path in set(before[1]) | set(after[1])
                     if before[1].get(path) != after[1].get(path))
    assert not changed, f"{argv} changed disk/state files: {changed}"
    return out


def fake_hv(vc: Any, node: str) -> FakeHypervisor:
    """The fake hypervisor of ``node``, acting on the node's root."""
    return FakeHypervisor(vc.paths(node))


def interrupt_migration(vc: Any, name: str, src: str, dst: str, *, resumed: bool) -> None:
    """Leave a migration of ``name`` from ``src`` to ``dst`` as a master that died
    mid-way would, on the nodes' fake hypervisors (the config is not told): the
    source fully sent (``migrating``), the target ``incoming``, or already running
    with ``resumed`` (only the config switch was missing)."""
    info = fake_hv(vc, src).migration_info(name)
    spec = hvbase.InstanceSpec(name=name, memory=int(info["state"].get("memory", 128)))
    fake_hv(vc, dst).accept_instance(spec, info, dst)
    fake_hv(vc, src).migrate_instance(name, dst, dst, live=True)
    if resumed:
        fake_hv(vc, dst).finalize_migration_dst(spec, info, success=True)


def disk_files(vc: Any, node: str, instance: str) -> list[str]:
    """The disk image files of ``instance`` below ``node``'s root (sorted)."""
    found = []
    for dirpath, _dirs, files in os.walk(os.path.join(vc.paths(node).root, "srv")):
        if os.path.basename(dirpath) == instance:
            found += [os.path.join(dirpath, f) for f in files if ".file.disk" in f]
    return sorted(found)


def read_marker(path: str) -> str:
    """The tinyos text marker (sector 8) of a disk image."""
    with open(path, "rb") as fh:
        fh.seek(8 * 512)
        return fh.read(512).rstrip(b"\0").decode()


def install_os(vc: Any, name: str, scripts: dict[str, str], *, nodes: list[str] | None = None,
               api: str = "20", variants: list[str] | None = None) -> None:
    """Install an OS definition with the given script bodies in node roots."""
    for node in nodes or vc.names:
        dest = os.path.join(vc.paths(node).os_search_path[0], name)
        os.makedirs(dest, exist_ok=True)
        with open(os.path.join(dest, "ganeti_api_version"), "w") as fh:
            fh.write(api + "\n")
        with open(os.path.join(dest, "parameters.list"), "w") as fh:
            fh.write("")
        if variants:
            with open(os.path.join(dest, "variants.list"), "w") as fh:
                fh.write("\n".join(variants) + "\n")
        for script in ("create", "export", "import", "rename", "verify"):
            body = scripts.get(script, "#!/bin/sh\nexit 0\n")
            path = os.path.join(dest, script)
            with open(path, "w") as fh:
                fh.write(body)
            os.chmod(path, 0o755)


def start_behind_masters_back(vc: Any, node: str, name: str, memory: int = 128) -> None:
    """Start ``name`` on ``node``'s fake hypervisor without telling the master."""
    fake_hv(vc, node).start_instance(hvbase.InstanceSpec(name=name, memory=memory), [])
