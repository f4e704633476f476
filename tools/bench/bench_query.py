#!/usr/bin/env python3
"""Micro-benchmark of the query2 engine (prints figures, asserts nothing).

Runs an instance-like resource with the default ``gnt-instance list``
columns over 1,000 and 10,000 items: the query with and without a filter,
and the full CLI path (parse --filter text, query, format the table).

    .venv/bin/python tools/bench/bench_query.py
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from ganeti import constants  # noqa: E402
from ganeti import query as q  # noqa: E402


@dataclass
class Inst:
    name: str
    hypervisor: str
    os: str
    pnode: str
    maxmem: int
    admin_up: bool
    tags: list[str] = field(default_factory=list)


def _status(ctx: dict, inst: Inst) -> object:
    live = ctx["live"]
    if inst.pnode in ctx["offline"]:
        return q.OFFLINE
    if inst.name in live:
        return "running"
    return "ADMIN_down" if not inst.admin_up else "ERROR_down"


def _oper_ram(ctx: dict, inst: Inst) -> object:
    if inst.pnode in ctx["offline"]:
        return q.OFFLINE
    return ctx["live"].get(inst.name, q.UNAVAIL)


FIELDS = q.make_table([
    q.simple_field("name", "Instance", constants.QFT_TEXT, "Instance name", "name"),
    q.simple_field("hypervisor", "Hypervisor", constants.QFT_TEXT, "Hypervisor", "hypervisor"),
    q.simple_field("os", "OS", constants.QFT_TEXT, "Operating system", "os"),
    q.simple_field("pnode", "Primary_node", constants.QFT_TEXT, "Primary node", "pnode"),
    q.FieldDef("status", "Status", constants.QFT_TEXT, "Status", _status, frozenset(["live"])),
    q.FieldDef("oper_ram", "Memory", constants.QFT_UNIT, "Memory", _oper_ram, frozenset(["live"])),
    q.simple_field("be/maxmem", "ConfigMaxMem", constants.QFT_UNIT, "Max memory", "maxmem"),
    q.simple_field("admin_up", "Autostart", constants.QFT_BOOL, "Admin up", "admin_up"),
    q.tags_field(),
])
DEFAULT = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]
FILTER_TEXT = 'pnode =~ /node[1-3]$/ and (admin_up or "web" in tags) and be/maxmem >= 256'


def _make(count: int) -> tuple[list[Inst], dict]:
    items = [Inst(f"inst{i}.example.com", "fake", "debootstrap", f"node{i % 10}",
                  128 * (1 + i % 8), i % 3 != 0, ["web"] if i % 2 else [])
             for i in range(count)]
    ctx = {"live": {it.name: it.maxmem for it in items if it.admin_up}, "offline": {"node9"}}
    return items, ctx


def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    flt = q.parse_filter_text(FILTER_TEXT)
    for count in (1000, 10000):
        items, ctx = _make(count)
        repeat = 20 if count <= 1000 else 5
        rows = len(q.query(FIELDS, items, ctx, DEFAULT, flt)["data"])
        plain = _best(lambda: q.query(FIELDS, items, ctx, DEFAULT), repeat)
        filtered = _best(lambda: q.query(FIELDS, items, ctx, DEFAULT, flt), repeat)

        def cli() -> list[str]:
            result = q.query(FIELDS, items, ctx, DEFAULT, q.parse_filter_text(FILTER_TEXT))
            return q.format_table(result["fields"], result["data"])
        full = _best(cli, repeat)

        def cli_all() -> list[str]:
            result = q.query(FIELDS, items, ctx, DEFAULT)
            return q.format_table(result["fields"], result["data"])
        full_all = _best(cli_all, repeat)
        print(f"{count:6d} items: query {plain * 1e3:7.2f} ms ({count / plain:10,.0f} rows/s); "
              f"filtered ({rows} rows) {filtered * 1e3:7.2f} ms ({count / filtered:10,.0f} items/s); "
              f"parse+query+format: filtered {full * 1e3:7.2f} ms, all {full_all * 1e3:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
