"""A small instance-like resource shared by the query tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ganeti import constants
from ganeti import query as q


@dataclass
class Inst:
    name: str
    pnode: str
    mem: int
    vcpus: int
    up: bool
    tags: list[str] = field(default_factory=list)
    uuid: str = "u"
    serial_no: int = 1
    ctime: float | None = 1000.0
    mtime: float | None = None
    note: Any = None


def _status(ctx: dict[str, Any], item: Inst) -> Any:
    live = ctx.get("live")
    if live is None:
        return q.NODATA
    if item.pnode in ctx.get("offline", ()):
        return q.OFFLINE
    if item.pnode in ctx.get("down", ()):
        return q.UNAVAIL
    return live.get(item.name, "ADMIN_down")


def make_fields() -> q.FieldTable:
    return q.make_table([
        q.simple_field("name", "Instance", constants.QFT_TEXT, "Instance name", "name"),
        q.simple_field("pnode", "Primary_node", constants.QFT_TEXT, "Primary node", "pnode"),
        q.simple_field("be/memory", "ConfigMaxMem", constants.QFT_UNIT, "Memory", "mem"),
        q.simple_field("vcpus", "VCPUs", constants.QFT_NUMBER, "CPUs", "vcpus"),
        q.simple_field("admin_up", "Autostart", constants.QFT_BOOL, "Admin up", "up"),
        q.simple_field("note", "Note", constants.QFT_OTHER, "Anything", "note"),
        q.FieldDef("status", "Status", constants.QFT_TEXT, "Runtime status", _status,
                   needs=frozenset(["live"])),
        q.tags_field(), q.uuid_field("Instance"), q.serial_no_field("Instance"),
        *q.timestamp_fields("Instance"),
    ])


FIELDS = make_fields()

ITEMS = [
    Inst("web10", "node1", 512, 1, True, ["prod", "web"], note=[1, 2]),
    Inst("web2", "node2", 2048, 2, False, ["web"], note="x"),
    Inst("db1", "node1", 4096, 4, True, ["prod", "db"], note=None),
    Inst("Mail", "node3", 128, 1, False, [], ctime=None),
]

CTX = {"live": {"web10": "running", "db1": "running"}, "offline": {"node3"}, "down": {"node2"}}


@pytest.fixture
def fields() -> q.FieldTable:
    return FIELDS


@pytest.fixture
def items() -> list[Inst]:
    return list(ITEMS)


@pytest.fixture
def ctx() -> dict[str, Any]:
    return CTX
