"""The CLI's start-up budget: which modules a ``gnt-*`` verb may import.

Shared by ``test/cli/test_startup_budget.py`` (the guard) and
``tools/bench/bench_cli_startup.py`` (the figures); doc/cli-startup.md
explains the budget.  A verb's imports are read from the interpreter's own
``-X importtime`` report, minus what a bare interpreter started the same
way imports (``site``, ``sitecustomize`` and what they pull in).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

__all__ = ["VERBS", "ALLOWED", "FLOOR_ARGV", "imported_modules", "verb_argv"]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: read-only verbs of every tool that run against a one-node cluster with no
#: instance; each must stay within :data:`ALLOWED`
VERBS: tuple[tuple[str, ...], ...] = (
    ("gnt-cluster", "info"), ("gnt-cluster", "getmaster"), ("gnt-cluster", "version"),
    ("gnt-cluster", "verify"), ("gnt-cluster", "master-ping"), ("gnt-cluster", "list-tags"),
    ("gnt-cluster", "queue", "info"), ("gnt-cluster", "watcher", "info"),
    ("gnt-node", "list"), ("gnt-node", "info"), ("gnt-node", "list-fields"),
    ("gnt-node", "list-storage"),
    ("gnt-instance", "list"), ("gnt-instance", "list-fields"),
    ("gnt-group", "list"), ("gnt-group", "info"),
    ("gnt-job", "list"),
    ("gnt-os", "list"), ("gnt-os", "diagnose"),
    ("gnt-filter", "list"), ("gnt-filter", "info"),
    ("gnt-network", "list"), ("gnt-network", "info"),
    ("gnt-backup", "list"),
    ("gnt-debug", "delay", "0"),
)

#: the project's modules a verb above may import; anything else (the
#: configuration, bootstrap, RPC, TLS, ...) is a start-up regression
ALLOWED_GANETI = frozenset({
    "ganeti", "ganeti.constants", "ganeti.errors", "ganeti.luxi", "ganeti.private",
    "ganeti.luxi_table",   # (the generated LUXI table: imports wiretypes only)
    "ganeti.serializer", "ganeti.wiretypes", "ganeti.pathutils", "ganeti.ssconfstore",
    "ganeti.query",
    "ganeti.opcodes", "ganeti.opcodes.wire",   # and its generated parts:
    "ganeti.opcodes.wire_base", "ganeti.opcodes.wire_instance", "ganeti.opcodes.wire_node",
    "ganeti.opcodes.wire_cluster",
    "ganeti.utils", "ganeti.utils.bounded", "ganeti.utils.units", "ganeti.utils.pidfile",
    "ganeti.utils.unixsock",
    "ganeti.cli", "ganeti.cli.argparse_lite", "ganeti.cli.failure", "ganeti.cli.ipolicy_opts",
    "ganeti.cli.jobs", "ganeti.cli.main", "ganeti.cli.options", "ganeti.cli.output",
    "ganeti.cli.verbs", "ganeti.cli.info",
    "ganeti.client", "ganeti.client.cluster_common", "ganeti.client.gnt_backup",
    "ganeti.client.gnt_cluster", "ganeti.client.gnt_cluster_crypto",
    "ganeti.client.gnt_cluster_maint", "ganeti.client.gnt_cluster_master", "ganeti.client.gnt_debug",
    "ganeti.client.gnt_group",
    "ganeti.client.gnt_instance", "ganeti.client.gnt_job", "ganeti.client.gnt_node",
    "ganeti.client.gnt_os", "ganeti.client.gnt_filter", "ganeti.client.gnt_network",
    "ganeti.client.relocation", "ganeti.client.tags_common",
    "ganeti.client.node_oob", "ganeti.client.cluster_epo",     # their verbs' rows (light)
})

#: the standard library modules a verb may import beyond the bare interpreter's
#: (no re, typing, dataclasses, logging, json, socket, ssl, subprocess, threading)
ALLOWED_STDLIB = frozenset({
    "__future__", "_json", "_socket", "_signal", "collections", "functools", "itertools",
    "keyword", "operator", "reprlib", "time", "types", "_collections", "_functools",
    "_operator", "_stat", "stat", "posixpath", "genericpath", "warnings", "_io", "io",
    "importlib",
})

ALLOWED = ALLOWED_GANETI | ALLOWED_STDLIB

#: the interpreter floor: the same interpreter and flags, running nothing
FLOOR_ARGV = ("-c", "pass")


def verb_argv(verb: Sequence[str]) -> list[str]:
    """The arguments after the interpreter that run ``verb`` (``("gnt-node", "list")``)."""
    return [os.path.join(REPO, "scripts", verb[0]), *verb[1:]]


def imported_modules(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, set[str]]:
    """``(exit code, modules imported)`` of ``python -X importtime ARGV`` in ``env``."""
    res = subprocess.run([sys.executable, "-X", "importtime", *argv], env=dict(env),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=120, check=False)
    names = set()
    for line in res.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "package":
                names.add(name)
    return res.returncode, names
