"""The ``extstorage`` query resource and OP_EXT_STORAGE_DIAGNOSE (``gnt-storage``).

``extstorage_diagnose`` runs on every online vm_capable node (one RPC
fan-out; a node whose answer failed is left out, so a down node daemon
does not make every provider invalid).  Per provider:

* ``node_status``: ``{node name: [[path, status, diagnose, parameters], ...]}``
  for every node that answered (an empty list where the provider is
  missing; the first row is the one in effect);
* ``nodegroup_status``: ``{group name: bool}``, True when the provider is
  valid on every answering node of the group (a group with none is True);
* ``parameters``: ``[[name, doc], ...]`` found on every node where the
  provider is valid, in the order of the first such node's
  ``parameters.list``.

The remapping and the two summaries are pure functions
(:func:`by_provider`, :func:`nodegroup_status`, :func:`common_parameters`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ganeti import constants, errors, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.context import MasterContext
from ganeti.opcodes.os import OpExtStorageDiagnose

__all__ = ["EXTSTORAGE_FIELDS", "by_provider", "nodegroup_status", "common_parameters",
           "diagnose_extstorage", "collect_extstorage", "LUExtStorageDiagnose"]

#: ``{node: [[path, status, diagnose, parameters], ...]}`` of one provider
NodeStatus = Mapping[str, Sequence[Sequence[Any]]]


def by_provider(answers: Mapping[str, Sequence[Sequence[Any]]]) -> dict[str, dict[str, list[Any]]]:
    """Per-node rows ``[name, path, status, diagnose, parameters]`` -> per provider
    ``{node: [[path, status, diagnose, parameters], ...]}``.

    ``answers`` holds the nodes that answered; every provider gets an entry
    (maybe empty) for each of them, in their order.
    """
    result: dict[str, dict[str, list[Any]]] = {}
    for node, rows in answers.items():
        for name, path, status, diag, params in rows:
            per_node = result.setdefault(name, {n: [] for n in answers})
            per_node[node].append([path, bool(status), diag, [list(p) for p in params]])
    return result


def _valid(rows: Sequence[Sequence[Any]]) -> bool:
    return bool(rows) and bool(rows[0][1])


def nodegroup_status(node_status: NodeStatus,
                     groups: Mapping[str, Sequence[str]]) -> dict[str, bool]:
    """``{group: valid}`` from one provider's ``node_status`` and ``{group: member names}``.

    A group is valid when the provider is valid on each of its members
    that answered (members absent from ``node_status`` do not count).
    """
    return {group: all(_valid(node_status[n]) for n in members if n in node_status)
            for group, members in groups.items()}


def common_parameters(node_status: NodeStatus) -> list[list[str]]:
    """The ``[name, doc]`` pairs of the provider on every node where it is valid."""
    lists = [[list(p) for p in rows[0][3]] for rows in node_status.values() if _valid(rows)]
    if not lists:
        return []
    return [p for p in lists[0] if all(p in other for other in lists[1:])]


def diagnose_extstorage(context: MasterContext) -> list[dict[str, Any]]:
    """One dict per provider found on some node: name, node_status,
    nodegroup_status, parameters (see the module docstring).

    Raises :class:`errors.OpExecError` when the master has no node RPC.
    """
    cfg = context.committed_cfg()
    nodes = [n for n in cfg.get_all_nodes_info().values() if not n.offline and n.vm_capable]
    names = sorted((n.name for n in nodes), key=query.nice_sort_key)
    if context.rpc is None:
        raise errors.OpExecError("Node RPC is not available on this master")
    results = context.rpc.call_extstorage_diagnose(names) if names else {}
    answers = {node: res.payload for node, res in results.items()
               if not res.failed and isinstance(res.payload, list)}
    by_uuid = {n.uuid: n.name for n in cfg.get_all_nodes_info().values()}
    groups = {g.name: [by_uuid[u] for u in g.members if u in by_uuid]
              for g in cfg.get_all_nodegroups_info().values()}
    return [{"name": name, "node_status": status,
             "nodegroup_status": nodegroup_status(status, groups),
             "parameters": common_parameters(status)}
            for name, status in sorted(by_provider(answers).items())]


_T, _O = constants.QFT_TEXT, constants.QFT_OTHER

EXTSTORAGE_FIELDS = query.make_table([
    query.dict_field("name", "Name", _T, "ExtStorage provider name", "name"),
    query.dict_field("node_status", "NodeStatus", _O, "Status from node", "node_status"),
    query.dict_field("nodegroup_status", "NodegroupStatus", _O, "Overall Nodegroup status",
                     "nodegroup_status"),
    query.dict_field("parameters", "Parameters", _O, "ExtStorage provider parameters",
                     "parameters"),
])


def collect_extstorage(context: MasterContext, qfilter: Any,
                       needs: set[str]) -> tuple[list[Any], Any]:
    """Items of the ``extstorage`` resource.

    Raises :class:`errors.OpPrereqError` (``ECODE_NOENT``) when a name
    filter names a provider no node has.
    """
    items = diagnose_extstorage(context)
    names = query.requested_names(qfilter, "name")
    if names:
        known = {i["name"] for i in items}
        missing = [n for n in names if n not in known]
        if missing:
            raise errors.OpPrereqError(
                f"ExtStorage provider(s) {', '.join(map(str, missing))} not known",
                errors.ECODE_NOENT)
    return items, None


class LUExtStorageDiagnose(NoHooksLU[OpExtStorageDiagnose]):
    """Legacy ExtStorage query: rows of the requested ``output_fields`` (no locks)."""

    REQ_BGL = False

    def CheckArguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in EXTSTORAGE_FIELDS]
        if unknown:
            raise errors.OpPrereqError(f"Unknown output fields selected: {', '.join(unknown)}",
                                       errors.ECODE_INVAL)

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        qfilter = query.make_simple_filter("name", self.op.names) if self.op.names else None
        items, ctx = collect_extstorage(self.context, qfilter, set())
        res = query.query(EXTSTORAGE_FIELDS, items, ctx, self.op.output_fields, qfilter)
        return query.old_style_rows(res)
