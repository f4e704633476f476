#!/usr/bin/env python3
"""CPU and wall time of the cloud image: its build and a boot to cloud-init's end (doc/images.md).

``build``: the image of tools/harness/cloudimage.py built from an empty
cache directory (``--cache``, removed first), each command the builder runs
timed (user+system CPU of its whole process tree, from ``getrusage`` of the
children, and wall time): the tree's builder (``--builder``, mmdebstrap by
default: one step; debootstrap as its two stages, ``--foreign``: download
and extraction; ``--second-stage`` in the tree: installation and
configuration, the initramfs included), then the image writing (``mke2fs
-d``, extlinux); the builder's own CPU (the SHA-256) and the qcow2 copy are
printed too, and (debootstrap) the initramfs builds its log shows.

``boot``: the cached image (built when missing) on a 2 GiB copy, with a
NoCloud seed made like the node's (the project's own meta-data,
network-config with a static address, user-data with an SSH key), booted by
qemu under TCG with the kvm hypervisor's devices (virtio disk and NIC, the
seed an IDE cdrom, 512 MiB, one vCPU) until cloud-init's final message on
the serial console: the wall time and qemu's CPU seconds then.  With
``--inspect`` the guest's ``systemd-analyze`` and ``cloud-init analyze
blame`` are printed afterwards.  Figures only.

Run as root: ``.venv/bin/python tools/bench/bench_cloudimage.py boot [--cache DIR]``
or ``build --cache DIR [--builder debootstrap]`` (1 to 4 minutes, downloads); without arguments a
boot (skipped with a message when the image cannot be had or qemu cannot run).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import IO, Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import guest_helpers  # noqa: E402
import host_helpers  # noqa: E402
from benchlib import process_cpu  # noqa: E402
from ganeti.backend import osimage  # noqa: E402
from ganeti.impexp import cloudinit  # noqa: E402
from tools.harness import cloudimage  # noqa: E402

NAME = "bench1.example.com"
MAC = "52:54:00:6a:20:09"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGJlbmNoY2xvdWRpbWFnZWtleWZvcmJvb3R0ZXN0cw bench@ganeti"
FINAL = "finished at"


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _self_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


class _Timed:
    """Replaces the builder's ``_run``: each command timed; debootstrap as its two stages."""
    # (mmdebstrap, one command, is timed as one step)

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []
        self.log_text: list[str] = []
        self._orig = cloudimage._run

    def _one(self, label: str, argv: Sequence[str], log_fh: IO[str]) -> None:
        cpu, wall = _children_cpu(), time.monotonic()
        try:
            self._orig(argv, log_fh)
        finally:
            self.rows.append((label, _children_cpu() - cpu, time.monotonic() - wall))

    def __call__(self, argv: Sequence[str], log_fh: IO[str]) -> None:
        if argv[0] != "debootstrap":
            label = "mmdebstrap (download, install, configure)" if argv[0] == "mmdebstrap" \
                else os.path.basename(argv[0])
            self._one(label, argv, log_fh)
            return
        tree = argv[-2]
        self._one("debootstrap --foreign (download, extract)",
                  [argv[0], "--foreign", *argv[1:]], log_fh)
        self._one("debootstrap --second-stage (install, configure)",
                  ["chroot", tree, "/debootstrap/debootstrap", "--second-stage"], log_fh)
        log_fh.flush()
        with open(log_fh.name, encoding="utf-8", errors="replace") as fh:
            self.log_text.append(fh.read())


def bench_build(cache: str, builder: str) -> None:
    """Build into an emptied ``cache`` with ``builder``; print the table."""
    shutil.rmtree(cache, ignore_errors=True)
    timed = _Timed()
    cloudimage._run = timed
    cpu0, self0, wall0 = _children_cpu(), _self_cpu(), time.monotonic()
    try:
        image = cloudimage.build(cache, log=lambda m: print("  " + m, flush=True),
                                 builder=builder)
    finally:
        cloudimage._run = timed._orig
    total_wall = time.monotonic() - wall0
    own = _self_cpu() - self0
    others = _children_cpu() - cpu0 - sum(row[1] for row in timed.rows)
    cpu1, wall1 = _children_cpu(), time.monotonic()
    cloudimage.qcow2(image)
    qcow_cpu, qcow_wall = _children_cpu() - cpu1, time.monotonic() - wall1
    print(f"\n{'step':52} {'CPU s':>7} {'wall s':>7}")
    for label, cpu, wall in timed.rows:
        print(f"{label:52} {cpu:7.1f} {wall:7.1f}")
    print(f"{'other commands (losetup, ...)':52} {others:7.1f}")
    print(f"{'the builder itself (SHA-256, ...)':52} {own:7.1f}")
    print(f"{'whole build':52} {_children_cpu() - cpu0 - qcow_cpu + own:7.1f} {total_wall:7.1f}")
    print(f"{'qcow2 copy (qemu-img convert -c)':52} {qcow_cpu:7.1f} {qcow_wall:7.1f}")
    text = "".join(timed.log_text)
    if builder == "debootstrap":     # (mmdebstrap does not show the maintainer scripts' output)
        print(f"initramfs builds in the log:"
              f" {len(re.findall(r'update-initramfs: Generating', text))}")
    qcow = os.path.join(os.path.dirname(image.path), cloudimage.QCOW2_NAME)
    print(f"raw data {_allocated(image.path) / 2**20:.0f} MiB, qcow2"
          f" {os.path.getsize(qcow) / 2**20:.0f} MiB")


def _allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


def _seed(directory: str) -> str:
    nic = cloudinit.SeedNic(mac=MAC, address="10.62.0.9/24", gateway="10.62.0.1")
    docs = {"meta-data": cloudinit.meta_data("5b0e1c4e-bench", NAME),
            "network-config": cloudinit.network_config([nic]),
            "user-data": cloudinit.user_data({"ssh_authorized_keys": KEY})}
    out = os.path.join(directory, "seed.iso")
    osimage.write_seed_iso(docs, out)           # as the node writes an instance's seed
    return out


def bench_boot(cache: str | None, inspect: bool, append: str) -> None:
    """Boot the cached image (built when missing) to cloud-init's end; print the figures."""
    image = cloudimage.build(cache, log=lambda m: print("  " + m, flush=True))
    with tempfile.TemporaryDirectory(prefix="bench-cloud-") as tmp:
        disk = os.path.join(tmp, "disk.raw")
        subprocess.run(["cp", "--sparse=always", image.path, disk], check=True)
        os.truncate(disk, 2 << 30)
        seed = _seed(tmp)
        log, sock = os.path.join(tmp, "serial.log"), os.path.join(tmp, "serial.sock")
        argv = ["qemu-system-x86_64", "-name", NAME, "-nodefaults", "-accel", "tcg",
                "-m", "512", "-smp", "1", "-display", "none",
                "-chardev", f"socket,id=serial0,path={sock},server=on,wait=off,logfile={log}",
                "-serial", "chardev:serial0", "-no-shutdown",
                "-drive", f"file={disk},format=raw,if=virtio,id=disk0",
                "-drive", f"file={seed},format=raw,media=cdrom,if=ide,readonly=on,id=cidata",
                "-netdev", "user,id=net0", "-device", f"virtio-net-pci,netdev=net0,mac={MAC}",
                "-device", "virtio-balloon-pci,id=balloon0"]
        if append:      # the image's own kernel and initramfs, another command line
            for name in (f"vmlinuz-{image.kernel_version}", f"initrd.img-{image.kernel_version}"):
                subprocess.run(["debugfs", "-R", f"dump /boot/{name} {tmp}/{name}", image.path],
                               check=True, capture_output=True)
            argv += ["-kernel", f"{tmp}/vmlinuz-{image.kernel_version}",
                     "-initrd", f"{tmp}/initrd.img-{image.kernel_version}", "-append", append]
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        try:
            short = NAME.split(".")[0]
            guest_helpers.wait_for_line(log, f"root@{short}:", timeout=900)
            prompt, prompt_cpu = time.monotonic() - started, process_cpu(proc.pid)
            guest_helpers.wait_for(lambda: FINAL in guest_helpers.read_log(log),
                                   "cloud-init's final message", timeout=900, poll=0.5)
            done, done_cpu = time.monotonic() - started, process_cpu(proc.pid)
            print(f"root prompt: {prompt:6.1f} s wall, qemu {prompt_cpu:6.1f} s CPU")
            print(f"cloud-init finished: {done:6.1f} s wall, qemu {done_cpu:6.1f} s CPU")
            with guest_helpers.SerialConsole(sock, timeout=120) as con:
                con.run("dmesg -n 1")
                cpu0, wall0 = process_cpu(proc.pid), time.monotonic()
                status = con.run("cloud-init status --wait --long", timeout=600)
                print(f"`cloud-init status --long`: {time.monotonic() - wall0:.1f} s wall,"
                      f" {process_cpu(proc.pid) - cpu0:.1f} s CPU; {status.splitlines()[:3]}")
                if inspect:
                    for command in ("cloud-init query ds.meta_data",
                                    cloudimage.META_DATA_COMMAND,
                                    "systemd-analyze --no-pager",
                                    "systemd-analyze blame --no-pager | head -n 25",
                                    "cloud-init analyze blame | head -n 40",
                                    "dmesg | grep -i -E 'crng|random|clocksource'",
                                    "hostname; ip -4 -o address show scope global;"
                                    " cat /home/debian/.ssh/authorized_keys; df -k /"):
                        cpu0 = process_cpu(proc.pid)
                        out = con.run(command, timeout=300)
                        print(f"$ {command}  ({process_cpu(proc.pid) - cpu0:.1f} s CPU)\n{out}",
                              flush=True)
        finally:
            proc.kill()
            proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """``build --cache DIR [--builder PROGRAM]`` or ``boot [--cache DIR] [--inspect]
    [--append ARGS]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    b = sub.add_parser("build", help="build from an emptied cache directory")
    b.add_argument("--cache", required=True)
    b.add_argument("--builder", choices=cloudimage.BUILDERS, default=cloudimage.BUILDERS[0])
    t = sub.add_parser("boot", help="boot the cached image to cloud-init's end")
    t.add_argument("--cache", default=None)
    t.add_argument("--inspect", action="store_true")
    t.add_argument("--append", default="", help="boot the image's kernel directly with this"
                   " command line (to compare command lines)")
    args: Any = parser.parse_args(argv)
    why = cloudimage.problem(getattr(args, "builder", cloudimage.BUILDERS[0])) \
        or host_helpers.qemu_reason()
    if why and (args.command == "build" or cloudimage.find_built(getattr(args, "cache", None))
                is None or host_helpers.qemu_reason()):
        print(f"skipped: {why}")
        return 0
    if args.command == "build":
        bench_build(args.cache, args.builder)
    else:
        bench_boot(getattr(args, "cache", None), getattr(args, "inspect", False),
                   getattr(args, "append", ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
