"""Every opcode has a logical unit, and a way in from the command line.

"A way in" is a ``gnt-*`` module (``ganeti/client``) that builds the opcode
(its :mod:`ganeti.opcodes.wire` function or constant, or its class), or an
entry of :data:`OTHER_PATHS` saying who submits it instead; such an entry
is checked too, so the table cannot go stale in either direction.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from ganeti import cmdlib
from ganeti.opcodes import OP_REGISTRY

ROOT = pathlib.Path(__file__).resolve().parents[2] / "ganeti"

#: opcode -> (the module that submits it, why no gnt-* verb builds it)
OTHER_PATHS = {
    "OP_CLUSTER_VERIFY_CONFIG": ("cmdlib/verify.py", "gnt-cluster verify's job submits it"),
    "OP_CLUSTER_VERIFY_GROUP": ("cmdlib/verify.py", "gnt-cluster verify's job submits it"),
    "OP_GROUP_VERIFY_DISKS": ("cmdlib/verify.py", "gnt-cluster verify-disks's job submits it"
                              " (and the watcher, once per group)"),
    "OP_BACKUP_PREPARE": ("rapi/resources/instances.py", "PUT /2/instances/[name]/"
                                                         "prepare-export; upstream's gnt-backup has"
                                                         " no verb for it"),
    "OP_CLUSTER_QUERY": (None, "the CLI asks QueryClusterInfo over LUXI; for RAPI and"
                               " gnt-job submit"),
    "OP_OS_DIAGNOSE": (None, "gnt-os queries the os resource over LUXI; for RAPI and"
                             " gnt-job submit"),
    "OP_NODE_HA_FENCE": ("server/harecovery.py", "node loss recovery's fence job (doc/ha.md);"
                                                 " no operator verb"),
    "OP_NODE_HA_REPORT": ("server/harecovery.py", "node loss recovery's report and recovery"
                                                  " jobs (doc/ha.md); no operator verb"),
    "OP_QUERY": (None, "the CLI calls the Query LUXI method; for RAPI and gnt-job submit"),
    "OP_QUERY_FIELDS": (None, "the CLI calls the QueryFields LUXI method; for RAPI and"
                              " gnt-job submit"),
}


def _sources(directory: str) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / directory).rglob("*.py")}


def _builds(source: str, op_id: str) -> bool:
    """Whether ``source`` builds ``op_id``: its wire function (``wire.node_add``), its
    ``wire.OP_*`` constant (a row keyed by it), or its class."""
    cls = OP_REGISTRY[op_id]
    return (re.search(rf"\bwire\.(?:{op_id[3:].lower()}|{op_id})\b", source) is not None
            or re.search(rf"\b{cls.__name__}\b", source) is not None)


CLIENT = _sources("client")


@pytest.mark.parametrize("op_id", sorted(OP_REGISTRY))
def test_every_opcode_has_a_logical_unit(op_id: str) -> None:
    lu = cmdlib.LU_REGISTRY.get(op_id)
    assert lu is not None, f"{op_id} has no LU"
    assert lu.__name__ == "LU" + OP_REGISTRY[op_id].__name__[2:]


@pytest.mark.parametrize("op_id", sorted(OP_REGISTRY))
def test_every_opcode_has_a_way_in(op_id: str) -> None:
    users = sorted(name for name, text in CLIENT.items() if _builds(text, op_id))
    if op_id in OTHER_PATHS:
        module, why = OTHER_PATHS[op_id]
        assert not users, f"{op_id} is built by {users}: drop its OTHER_PATHS entry ({why})"
        if module is not None:
            assert _builds((ROOT / module).read_text(), op_id), f"{module} does not submit {op_id}"
    else:
        assert users, f"no gnt-* command builds {op_id} (add a verb, or an OTHER_PATHS entry)"


def test_other_paths_name_real_opcodes() -> None:
    assert set(OTHER_PATHS) <= set(OP_REGISTRY)


def test_the_check_can_fail() -> None:
    # an opcode nobody builds is found missing, a built one is found
    assert not any(_builds(text, "OP_QUERY") for text in CLIENT.values())
    assert _builds("cli.submit_or_send(wire.node_powercycle(node_name=n))", "OP_NODE_POWERCYCLE")
    assert _builds("Route(path, opcode=wire.OP_NODE_POWERCYCLE)", "OP_NODE_POWERCYCLE")
    assert not _builds("wire.node_powercycle_x(n)", "OP_NODE_POWERCYCLE")
    assert not _builds("wire.OP_NODE_POWERCYCLE_X", "OP_NODE_POWERCYCLE")
    assert _builds("opcodes.OpNodePowercycle(node_name=n)", "OP_NODE_POWERCYCLE")
    assert not _builds("OpNodePowercycleX", "OP_NODE_POWERCYCLE")
