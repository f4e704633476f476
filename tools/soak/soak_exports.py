"""Soak scenario ``exports``: tampered exports imported again and again, none accepted.

One 2-node virtual cluster (``test/integration/vcluster_harness.py``).  An
instance with a 1 MiB file disk of random data is exported once (the
pristine export).  Then ``--export-imports`` times (default 200), at most
``--export-time-limit`` seconds: a seeded random tamper kind is applied to
a fresh copy of the pristine export on the export node, and the copy is
imported with ``gnt-backup import`` (doc/exports.md, "Trusting an import").

Every tampered import must be refused (else *silently_accepted*), leave
no instance and no disk file (else *leftovers*), show no node's local
path and none of the raw bytes written into a bad ``config.ini`` (else
*leaks*); one import in ten is of an untouched copy, which must import
with the pristine data (else *control_failed*).
"""

from __future__ import annotations

import glob
import hashlib
import os
import random
import shutil
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from instance_helpers import NOCHECK, disk_files
from vcluster_harness import VirtualCluster

from ganeti.impexp import info as exportinfo

__all__ = ["ExportFigures", "run_exports", "TAMPERS"]

N1, N2 = "node1.vcluster", "node2.vcluster"
SRC = "soaksrc.example.com"
MIB = 1 << 20


@dataclass
class ExportFigures:
    """What the tampered-exports soak saw."""

    requested: int
    imports: int = 0
    controls: int = 0
    controls_ok: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    tried: Counter[str] = field(default_factory=Counter)
    silently_accepted: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    stopped_early: bool = False

    def failed(self) -> bool:
        return bool(self.silently_accepted or self.leftovers or self.leaks
                    or self.controls_ok != self.controls)

    def line(self) -> str:
        kinds = ",".join(f"{k}:{self.refused[k]}/{self.tried[k]}" for k in sorted(self.tried))
        return (f"exports: imports={self.imports}/{self.requested}"
                f" tampered={sum(self.tried.values())} refused={sum(self.refused.values())}"
                f" silently_accepted={len(self.silently_accepted)}"
                f" leftovers={len(self.leftovers)} leaks={len(self.leaks)}"
                f" controls_ok={self.controls_ok}/{self.controls} kinds={kinds}"
                + (" stopped_early" if self.stopped_early else ""))


# --- tampering (an export directory, its parsed config.ini, the rng) -> raw bytes put into
# config.ini (that no answer may echo), or b"" ----------------------------------------------

Tamper = Callable[[str, exportinfo.ExportInfo, random.Random], bytes]


def _image(directory: str, info: exportinfo.ExportInfo) -> str:
    return os.path.join(directory, str(info.disks[0].dump))


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _rewrite(directory: str, change: Callable[[bytes], bytes]) -> None:
    conf = os.path.join(directory, "config.ini")
    with open(conf, "rb") as fh:
        data = fh.read()
    with open(conf, "wb") as fh:
        fh.write(change(data))


def _set_key(directory: str, key: str, value: bytes | None) -> None:
    """Set (None: drop) ``key`` of ``[instance]`` in config.ini."""
    def change(data: bytes) -> bytes:
        lines = [ln for ln in data.split(b"\n") if not ln.startswith(key.encode() + b" =")]
        if value is not None:
            lines.insert(lines.index(b"[instance]") + 1, key.encode() + b" = " + value)
        return b"\n".join(lines)
    _rewrite(directory, change)


def flip(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    with open(_image(directory, info), "r+b") as fh:
        offset = rng.randrange(MIB)
        fh.seek(offset)
        byte = fh.read(1)[0]
        fh.seek(offset)
        fh.write(bytes([byte ^ (1 << rng.randrange(8))]))
    return b""


def truncate(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    os.truncate(_image(directory, info), rng.randrange(MIB))
    return b""


def append(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    with open(_image(directory, info), "ab") as fh:
        fh.write(rng.randbytes(rng.randint(1, 64 * 1024)))
    return b""


def append_fixed_sum(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    append(directory, info, rng)
    _set_key(directory, "disk0_sha256", _sha(_image(directory, info)).encode())
    return b""


def oversize_no_sum(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    with open(_image(directory, info), "ab") as fh:
        fh.write(rng.randbytes(rng.randint(1, 8) * MIB))
    _set_key(directory, "disk0_sha256", None)
    return b""


def other_export(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    name = rng.choice([f"../{SRC}/{info.disks[0].dump}", f"/srv/ganeti/export/{SRC}/x",
                       f"sub/../../{SRC}/{info.disks[0].dump}", "..", ".hidden"])
    _set_key(directory, "disk0_dump", name.encode())
    return b""


def symlink(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    image = _image(directory, info)
    os.unlink(image)
    target = os.path.join(os.path.dirname(directory), SRC, str(info.disks[0].dump))
    os.symlink(rng.choice([target, "/dev/zero", "/etc/hostname"]), image)
    return b""


def special(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    image = _image(directory, info)
    os.unlink(image)
    kind = rng.choice(["fifo", "directory", "socket"])
    if kind == "fifo":
        os.mkfifo(image)
    elif kind == "directory":
        os.mkdir(image)
    else:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(image)
        except OSError:        # a path too long for AF_UNIX: a FIFO then
            os.mkfifo(image)
        finally:
            sock.close()
    return b""


def bad_config(directory: str, info: exportinfo.ExportInfo, rng: random.Random) -> bytes:
    junk = bytes(rng.choice([0x07, 0x1b, 0x9b, 0xff, 0xfe, 0x00, 0xc3]) for _ in range(12))
    key = rng.choice(["disk0_size", "disk0_sha256", "disk_count", "version", "timestamp"])
    if key in ("version", "timestamp"):
        _rewrite(directory, lambda d: d.replace(f"{key} = ".encode(), f"{key} = ".encode()
                                                + junk, 1))
    else:
        _set_key(directory, key, junk)
    return junk


TAMPERS: dict[str, Tamper] = {
    "flip": flip, "truncate": truncate, "append": append, "append_fixed_sum": append_fixed_sum,
    "oversize_no_sum": oversize_no_sum, "other_export": other_export, "symlink": symlink,
    "special": special, "bad_config": bad_config,
}


# --- the loop ---------------------------------------------------------------------------

def _instances(vc: VirtualCluster) -> list[str]:
    return vc.ok("gnt-instance", "list", "--no-headers", "-o", "name").split()


def _leftover(vc: VirtualCluster, name: str) -> str | None:
    if name in _instances(vc):
        return "instance"
    if disk_files(vc, N1, name):
        return "disk files"
    for path in glob.glob(os.path.join(vc.paths(N1).root, "srv", "**", "*.file.disk*"),
                          recursive=True):
        if os.path.getsize(path) > MIB:
            return f"a disk file of {os.path.getsize(path)} bytes"
    return None


def _leak(vc: VirtualCluster, out: str, junk: bytes) -> str | None:
    for node in (N1, N2):
        if vc.paths(node).root in out:
            return "a local path"
    raw = junk.decode("latin-1")
    if any(c in out for c in raw if not " " <= c <= "~" and c != "\n"):
        return "raw bytes of config.ini"
    return None


def run_exports(workdir: str, *, imports: int, rng: random.Random, time_limit: float,
                log: Callable[[str], None]) -> ExportFigures:
    """Import ``imports`` tampered (or, one in ten, untouched) exports; the figures."""
    figures = ExportFigures(requested=imports)
    deadline = time.monotonic() + time_limit
    with VirtualCluster(os.path.join(workdir, "vc"), nodes=2) as vc:
        vc.ok("gnt-instance", "add", "-t", "file", "--disk", "0:size=1M", "-o", "tinyos",
              "-n", N1, *NOCHECK, SRC)
        (disk,) = disk_files(vc, N1, SRC)
        with open(disk, "r+b") as fh:
            fh.write(rng.randbytes(MIB))
        pristine = _sha(disk)
        vc.ok("gnt-backup", "export", "-n", N2, SRC)
        vc.ok("gnt-instance", "remove", "-f", SRC)
        base = vc.paths(N2).export_dir
        kinds = sorted(TAMPERS)
        for i in range(imports):
            if time.monotonic() > deadline:
                figures.stopped_early = True
                break
            export, name = f"soak{i}", f"soak{i}.example.com"
            directory = os.path.join(base, export)
            shutil.copytree(os.path.join(base, SRC), directory)
            with open(os.path.join(directory, "config.ini")) as fh:
                info = exportinfo.parse(fh.read())
            kind = "control" if i % 10 == 0 else rng.choice(kinds)
            junk = b"" if kind == "control" else TAMPERS[kind](directory, info, rng)
            res = vc.run("gnt-backup", "import", "-n", N1, "--src-node", N2, "--src-dir",
                         export, *NOCHECK, name, timeout=180)
            out = res.stdout + res.stderr
            figures.imports += 1
            if kind == "control":
                figures.controls += 1
                files = disk_files(vc, N1, name)
                if res.returncode == 0 and len(files) == 1 and _sha(files[0]) == pristine:
                    figures.controls_ok += 1
                else:
                    log(f"exports: control import {i} failed: {out[-300:]}")
            else:
                figures.tried[kind] += 1
                if res.returncode == 0:
                    figures.silently_accepted.append(f"{i}:{kind}")
                    log(f"exports: ACCEPTED tampered export {i} ({kind})")
                else:
                    figures.refused[kind] += 1
                    if (left := _leftover(vc, name)) is not None:
                        figures.leftovers.append(f"{i}:{kind}: {left}")
                        log(f"exports: import {i} ({kind}) left {left}")
                    if (leak := _leak(vc, out, junk)) is not None:
                        figures.leaks.append(f"{i}:{kind}: {leak}")
                        log(f"exports: import {i} ({kind}) showed {leak}: {out[-300:]!r}")
            if name in _instances(vc):
                vc.ok("gnt-instance", "remove", "-f", name)
            shutil.rmtree(directory, ignore_errors=True)
            if figures.imports % 20 == 0:
                log(f"exports: {figures.imports} imports,"
                    f" {len(figures.silently_accepted)} accepted")
    return figures
