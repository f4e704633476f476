#!/usr/bin/env python3
"""Benchmark the CLI's start-up budget: each verb's own CPU time above the
interpreter floor (doc/cli-startup.md).

Starts a one-node virtual cluster, byte-compiles the tree into a private
cache (an installed Ganeti is byte-compiled), then runs every verb of
``test/integration/cli_startup.py``'s ``VERBS`` and a bare interpreter
(``python -c pass``, the floor) in turn, ``--runs`` times each.  A run's CPU
time is the child's user + system time from ``wait4``; the figure per verb
is the median, minus the floor's median, and as a ratio to the floor (a
ratio holds on a noisy machine).  The target is at most 30 ms of a verb's
own work above the floor; verbs over it are marked.  Takes about a minute.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

from benchlib import use_bytecode_cache  # noqa: E402
from cli_startup import FLOOR_ARGV, VERBS, verb_argv  # noqa: E402

from tools.harness import vcluster  # noqa: E402

#: a verb's own CPU time above the floor that counts as over budget (seconds)
TARGET = 0.030


def _cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of ``python ARGV``."""
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode()}")
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    """Run the benchmark and print one line per verb."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs of each command (9)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-startup-") as tmp:
        use_bytecode_cache(os.path.join(tmp, "pycache"))
        vc = vcluster.create(os.path.join(tmp, "vc"), 1, use_ssh=False)
        try:
            env = {**os.environ, **vcluster.node_env(vc, vc.master_node)}
            commands = [("(interpreter floor)", list(FLOOR_ARGV))]
            commands += [(" ".join(v), verb_argv(v)) for v in VERBS]
            for _, argv in commands:          # warm-up: caches, bytecode
                _cpu_seconds(argv, env)
            samples: dict[str, list[float]] = {name: [] for name, _ in commands}
            for _ in range(args.runs):        # interleaved: drift hits every command alike
                for name, argv in commands:
                    samples[name].append(_cpu_seconds(argv, env))
        finally:
            vcluster.destroy(vc.directory)
    floor = statistics.median(samples["(interpreter floor)"])
    print(f"interpreter floor: {floor * 1000:.1f} ms CPU (median of {args.runs})")
    over = 0
    for name, _ in commands[1:]:
        med = statistics.median(samples[name])
        own = med - floor
        mark = "" if own <= TARGET else f"  OVER the {TARGET * 1000:.0f} ms budget"
        over += bool(mark)
        print(f"{name:32s} own CPU {own * 1000:6.1f} ms  ({med / floor:.2f}x the floor){mark}")
    print(f"{len(commands) - 1 - over} of {len(commands) - 1} verbs within"
          f" {TARGET * 1000:.0f} ms of their own work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
