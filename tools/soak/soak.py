#!/usr/bin/env python3
"""Soak the real daemons on loopback for longer than CI does; print the figures.

Scenarios (tools/soak/README.md describes each and its figure line):

* ``kill9``: submit jobs continuously, kill -9 masterd at a random moment,
  restart it, check that no acknowledged job is lost, no id reused and no
  finished job changed (``--cycles`` times, default 100);
* ``fulldisk``: masterd with its queue on a small tmpfs that fills up and
  is freed again (root only; skipped with the reason otherwise);
* ``luxi``: many idle LUXI connections while normal clients query;
* ``noded``: many TCP connections without a TLS ClientHello while the
  master calls ``version``;
* ``rapi``: a long fuzz loop of malformed requests over TLS against a real
  ganeti-rapi (``--rapi-requests``, default 50,000);
* ``rapi-memory``: rounds of parallel anonymous 9.9 MB bodies and dense
  anonymous queries against ganeti-rapi; its peak and retained memory;
* ``rapi-smuggle``: every write row of RAPI tried with foreign opcodes
  (``OP_ID``) and unknown keys; how many were accepted (must be none);
* ``failover``: seeded random histories of jobs, kills, partitions (root)
  and master failovers on a 3-node virtual cluster, checking after every
  step that no job id is acknowledged by two masters and no config serial
  is written twice (``--failover-scenarios``, default 200);
* ``exports``: seeded tampered exports (flipped, truncated, appended,
  oversized, foreign or special image files, bad config.ini bytes)
  imported on a 2-node virtual cluster; none may be accepted
  (``--export-imports``, default 200);
* ``master``: seeded rounds of the master-role fault injection (clients
  submitting while failovers are killed at named fault points, raced,
  and the master killed, paused, cut off or restarted), checking that no
  acknowledged job is lost, changed or duplicated, no id reused, never two
  masters, and a master back within the stated time
  (``--master-rounds``, default 1,000).

Everything runs in a temporary directory that is removed at the end
(``--keep`` keeps it), also when the soak is stopped with SIGTERM or ^C
(the running scenario's daemons are stopped first).  Exit status 1 when
kill9 or fulldisk saw the queue break a promise, rapi got a bad answer,
rapi-memory saw an anonymous large body read, rapi-smuggle saw a hostile
body accepted, failover saw the invariant broken, exports saw a tampered
import accepted or leaving something behind, master found any violation,
or a scenario crashed; the DoS figures are only reported.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_VENV_PY = os.path.join(_REPO, ".venv", "bin", "python")
if (__name__ == "__main__" and os.path.exists(_VENV_PY)
        and os.path.dirname(sys.executable) != os.path.dirname(_VENV_PY)):
    os.execv(_VENV_PY, [_VENV_PY, os.path.abspath(__file__), *sys.argv[1:]])
for _path in (_REPO, os.path.join(_REPO, "test", "integration"), _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import soak_dos  # noqa: E402
import soak_exports  # noqa: E402
import soak_failover  # noqa: E402
import soak_master  # noqa: E402
import soak_queue  # noqa: E402
import soak_rapi  # noqa: E402
import soak_rapi_abuse  # noqa: E402

SCENARIOS = ("kill9", "fulldisk", "luxi", "noded", "rapi", "rapi-memory", "rapi-smuggle",
             "failover", "exports", "master")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=SCENARIOS,
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--cycles", type=int, default=100, help="kill -9 cycles (default 100)")
    parser.add_argument("--max-up", type=float, default=1.0,
                        help="longest random time masterd runs in a cycle, seconds (default 1)")
    parser.add_argument("--kill9-time-limit", type=float, default=1800.0,
                        help="stop the kill -9 loop after this many seconds (default 1800)")
    parser.add_argument("--full-seconds", type=float, default=5.0,
                        help="seconds of submitting while the queue disk is full (default 5)")
    parser.add_argument("--idle", type=int, default=1000,
                        help="idle LUXI connections during the attack (default 1000)")
    parser.add_argument("--noded-conns", type=int, default=500,
                        help="silent TCP connections to noded (default 500)")
    parser.add_argument("--clients", type=int, default=10,
                        help="concurrent normal LUXI clients during the attack (default 10)")
    parser.add_argument("--calls", type=int, default=10,
                        help="calls per normal client / version RPCs during an attack (default 10)")
    parser.add_argument("--probe-timeout", type=float, default=5.0,
                        help="timeout of one normal call, seconds (default 5)")
    parser.add_argument("--open-limit", type=float, default=soak_dos.OPEN_LIMIT,
                        help="seconds for opening an attack's connections (default 30)")
    parser.add_argument("--rapi-requests", type=int, default=50000,
                        help="malformed RAPI requests to send (default 50000)")
    parser.add_argument("--rapi-time-limit", type=float, default=1800.0,
                        help="stop the RAPI fuzz loop after this many seconds (default 1800)")
    parser.add_argument("--rapi-memory-rounds", type=int, default=3,
                        help="rounds of parallel anonymous large bodies (default 3)")
    parser.add_argument("--rapi-memory-clients", type=int, default=6,
                        help="parallel anonymous clients per round and kind (default 6)")
    parser.add_argument("--failover-scenarios", type=int, default=200,
                        help="seeded failover histories (default 200)")
    parser.add_argument("--failover-time-limit", type=float, default=1800.0,
                        help="stop the failover histories after this many seconds"
                             " (default 1800)")
    parser.add_argument("--export-imports", type=int, default=200,
                        help="imports of tampered exports (default 200)")
    parser.add_argument("--export-time-limit", type=float, default=1800.0,
                        help="stop the tampered imports after this many seconds (default 1800)")
    parser.add_argument("--master-rounds", type=int, default=1000,
                        help="seeded master-role fault rounds (default 1000)")
    parser.add_argument("--master-time-limit", type=float, default=43200.0,
                        help="stop the master-role rounds after this many seconds"
                             " (default 43200)")
    parser.add_argument("--master-first-seed", type=int, default=None,
                        help="seed of the first master-role round, the next ones count up"
                             " (default: from --seed)")
    parser.add_argument("--master-plan", choices=sorted(soak_master.PLANS), default=None,
                        help="use only this fault plan (default: each round's seed picks one)")
    parser.add_argument("--master-rounds-per-cluster", type=int, default=25,
                        help="rounds on one virtual cluster before a fresh one (default 25)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from time)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    opts = parser.parse_args(argv)
    for name in ("cycles", "idle", "noded_conns", "clients", "calls", "rapi_requests",
                 "rapi_memory_rounds", "rapi_memory_clients", "failover_scenarios",
                 "export_imports", "master_rounds"):
        if getattr(opts, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    return opts


def raise_nofile(needed: int) -> int:
    """Raise RLIMIT_NOFILE (inherited by the daemons started later) to ``needed``; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))   # root may raise both
            return needed
        except (ValueError, OSError):
            needed = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def _run(name: str, base: str, body: Callable[[str], Any]) -> tuple[str, bool]:
    """Run one scenario in ``base/name``; its figure line and whether it failed."""
    workdir = os.path.join(base, name)
    os.makedirs(workdir)
    started = time.monotonic()
    print(f"== {name}", flush=True)
    try:
        figures = body(workdir)
    except Exception as exc:  # report it, let the other scenarios run
        traceback.print_exc()
        return f"{name}: crashed ({type(exc).__name__}: {exc})", True
    failed = bool(getattr(figures, "failed", lambda: False)())
    line = f"{figures.line()} elapsed={time.monotonic() - started:.1f}s"
    print(line, flush=True)
    return line, failed


def _stop_on_term(signum: int, _frame: object) -> None:
    """SIGTERM: leave through the ``finally`` blocks (SystemExit is not an
    ``Exception``, so no scenario takes it for its own failure)."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    seed = opts.seed if opts.seed is not None else int(time.time())
    rng = random.Random(seed)
    chosen = opts.only or list(SCENARIOS)
    limit = raise_nofile(max(opts.idle, opts.noded_conns) + 512)
    print(f"soak: seed={seed} scenarios={','.join(chosen)} nofile={limit}", flush=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    bodies: dict[str, Callable[[str], Any]] = {
        "kill9": lambda d: soak_queue.run_kill9(d, cycles=opts.cycles, rng=rng, max_up=opts.max_up,
                                                time_limit=opts.kill9_time_limit, log=log),
        "fulldisk": lambda d: soak_queue.run_full_disk(d, full_seconds=opts.full_seconds, log=log),
        "luxi": lambda d: soak_dos.run_luxi_dos(d, idle=opts.idle, clients=opts.clients,
                                                calls=opts.calls, timeout=opts.probe_timeout,
                                                open_limit=opts.open_limit, log=log),
        "noded": lambda d: soak_dos.run_noded_dos(d, conns=opts.noded_conns, calls=opts.calls,
                                                  timeout=opts.probe_timeout,
                                                  open_limit=opts.open_limit, log=log),
        "rapi": lambda d: soak_rapi.run_rapi_fuzz(d, requests=opts.rapi_requests, rng=rng,
                                                  time_limit=opts.rapi_time_limit, log=log),
        "rapi-memory": lambda d: soak_rapi_abuse.run_rapi_memory(
            d, rounds=opts.rapi_memory_rounds, clients=opts.rapi_memory_clients, log=log),
        "rapi-smuggle": lambda d: soak_rapi_abuse.run_rapi_smuggle(d, log=log),
        "failover": lambda d: soak_failover.run_failover(
            d, scenarios=opts.failover_scenarios, rng=rng,
            time_limit=opts.failover_time_limit, log=log),
        "exports": lambda d: soak_exports.run_exports(
            d, imports=opts.export_imports, rng=rng, time_limit=opts.export_time_limit,
            log=log),
        "master": lambda d: soak_master.run_master(
            d, rounds=opts.master_rounds, rng=rng, time_limit=opts.master_time_limit, log=log,
            first_seed=opts.master_first_seed, plan=opts.master_plan,
            rounds_per_cluster=max(1, opts.master_rounds_per_cluster)),
    }
    # a soak stopped with SIGTERM (kill, timeout) unwinds like one stopped
    # with ^C: each scenario's virtual cluster is destroyed and the
    # temporary directory removed, no daemon left behind
    signal.signal(signal.SIGTERM, _stop_on_term)
    base = tempfile.mkdtemp(prefix="ganeti-soak-")
    lines: list[str] = []
    failed = False
    try:
        for name in SCENARIOS:
            if name in chosen:
                line, bad = _run(name, base, bodies[name])
                lines.append(line)
                failed = failed or bad
    finally:
        if opts.keep:
            print(f"soak: kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print("== figures")
    for line in lines:
        print(line)
    print(f"soak: {'FAILED' if failed else 'ok'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
