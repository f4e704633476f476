"""``tools/vcluster`` actions on guest clusters (``create --guests`` and the rest).

:func:`tools.harness.vcluster.main` parses the command line and hands a
guest cluster's actions here (doc/vcluster.md, "Guest clusters").
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable

from ganeti import errors
from tools.harness import guestcluster as gcl
from tools.harness import guestvm

__all__ = ["is_guest_cluster", "main"]

is_guest_cluster = gcl.is_guest_cluster

Log = Callable[[str], None]


def _create(opts: argparse.Namespace, log: Log) -> int:
    started = time.monotonic()
    gc = gcl.create(opts.directory, opts.nodes,
                    memory_mib=opts.memory or gcl.DEFAULT_MEMORY_MIB,
                    cpus=opts.cpus or gcl.DEFAULT_CPUS,
                    disk_count=gcl.DEFAULT_DISK_COUNT if opts.disks is None else opts.disks,
                    disk_size_gib=opts.disk_size or gcl.DEFAULT_DISK_SIZE_GIB,
                    vg_name=gcl.DEFAULT_VG_NAME if opts.vg_name is None else opts.vg_name,
                    accel=opts.guest_accel, master_ssh=opts.master_ssh, log=log)
    log(f"Guest cluster with {len(gc.nodes)} nodes ({gc.accel.upper()}) ready in"
        f" {time.monotonic() - started:.1f}s; use it with:")
    log(f"  eval \"$(tools/vcluster env {gc.directory})\"")
    return 0


def _list(gc: gcl.GuestCluster) -> None:
    master = gcl.current_master(gc).name
    for node in gc.nodes:
        state = "running" if guestvm.guest_running(gc.spec(node)) else "stopped"
        role = "master" if node.name == master else ""
        print(f"{node.name}\t{node.ip}\t{gc.node_dir(node)}\t{state}\t{role}".rstrip())


def _watcher(gc: gcl.GuestCluster, opts: argparse.Namespace) -> int:
    failed = 0
    for name, code, lines in gcl.run_watcher(gc, opts.node,
                                             ["--wait-children", *opts.watcher_arg]):
        print(f"{name}: exit {code}")
        for line in lines:
            print("  " + line)
        failed += code != 0
    return 1 if failed else 0


def _ssh(gc: gcl.GuestCluster, opts: argparse.Namespace) -> int:
    command = list(opts.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise errors.ParameterError("No command given (tools/vcluster ssh DIR NODE -- CMD)",
                                    errors.ECODE_INVAL)
    res = gcl.run_on(gc, opts.node, command[0] if len(command) == 1 else shlex.join(command),
                     timeout=3600)
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.exit_code if res.exit_code is not None else 1


def main(opts: argparse.Namespace, log: Log) -> int:
    """Run ``opts.action`` on the guest cluster in ``opts.directory``; the exit status."""
    try:
        if opts.action == "create":
            return _create(opts, log)
        if opts.action == "destroy":
            gcl.destroy(opts.directory, log=log)
            return 0
        gc = gcl.load(opts.directory)
        if opts.action == "env":
            print("\n".join(gcl.env_lines(gc, gcl.current_master(gc).ip)))
        elif opts.action == "start":
            gcl.start(gc, opts.node)
        elif opts.action == "stop":
            gcl.stop(gc, opts.node)
        elif opts.action == "list":
            _list(gc)
        elif opts.action == "watcher":
            return _watcher(gc, opts)
        elif opts.action == "ssh":
            return _ssh(gc, opts)
        else:
            raise errors.ParameterError(f"'{opts.action}' does not apply to guest clusters"
                                        " (each node is a machine of its own)",
                                        errors.ECODE_INVAL)
    except (errors.GanetiError, OSError) as exc:
        log(f"vcluster {opts.action}: {exc}")
        return 1
    return 0
