"""The ``os`` query resource and OP_OS_DIAGNOSE.

``os_diagnose`` runs on every online vm_capable node (one RPC fan-out);
an OS is *valid* only when it is valid on all of them with the same API
versions, variants and parameters.  ``node_status`` keeps the per-node
rows, so an OS missing or different on some nodes is visible.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, query
from ganeti.aliases import FeedbackFn
from ganeti.cmdlib.base import NoHooksLU
from ganeti.context import MasterContext
from ganeti.opcodes.os import OpOsDiagnose

__all__ = ["OS_FIELDS", "collect_os", "diagnose_os", "LUOsDiagnose"]


def diagnose_os(context: MasterContext) -> list[dict[str, Any]]:
    """One dict per OS name: name, valid, variants, parameters, api_versions,
    node_status ``{node: [[path, status, diagnose, variants, params, api, trusted], ...]}``
    (Ganeti 3.0's seven fields, doc/compat.md "Results"), hidden, blacklisted."""
    cfg = context.committed_cfg()
    cluster = cfg.get_cluster_info()
    nodes = [n for n in cfg.get_all_nodes_info().values() if not n.offline and n.vm_capable]
    names = sorted(n.name for n in nodes)
    per_os: dict[str, dict[str, list[Any]]] = {}
    if context.rpc is None:
        raise errors.OpExecError("Node RPC is not available on this master")
    results = context.rpc.call_os_diagnose(names) if names else {}
    good_nodes = []
    for node in names:
        res = results.get(node)
        if res is None or res.failed or not isinstance(res.payload, list):
            continue
        good_nodes.append(node)
        for row in res.payload:
            name, path, status, diag, row_variants, row_params, row_api = row[:7]
            trusted = bool(row[7]) if len(row) > 7 else True
            per_os.setdefault(name, {}).setdefault(node, []).append(
                [path, bool(status), diag, list(row_variants), [list(p) for p in row_params],
                 list(row_api), trusted])
    result = []
    for name in sorted(per_os):
        node_status = {n: per_os[name].get(n, []) for n in good_nodes}
        firsts = [rows[0] if rows else None for rows in node_status.values()]
        valid = bool(firsts) and all(f is not None and f[1] for f in firsts)
        variants: set[str] | None = None
        params: set[tuple[str, str]] | None = None
        api: set[int] | None = None
        for f in firsts:
            if f is None:
                continue
            v, p, a = set(f[3]), {tuple(x) for x in f[4]}, set(f[5])
            variants = v if variants is None else variants & v
            params = p if params is None else params & p
            api = a if api is None else api & a
        if valid and len({(tuple(sorted(f[3])), tuple(sorted(f[5])))
                          for f in firsts if f is not None}) > 1:
            valid = False
        result.append({
            "name": name, "valid": valid, "variants": sorted(variants or []),
            "parameters": sorted(list(p) for p in (params or [])),
            "api_versions": sorted(api or []), "node_status": node_status,
            "hidden": name in cluster.hidden_os, "blacklisted": name in cluster.blacklisted_os,
        })
    return result


def _k(key: str) -> Any:
    return lambda ctx, item: item[key]


_T, _B, _O = constants.QFT_TEXT, constants.QFT_BOOL, constants.QFT_OTHER

OS_FIELDS = query.make_table([
    query.FieldDef("name", "Name", _T, "Operating system name", _k("name")),
    query.FieldDef("valid", "Valid", _B, "Whether the OS is valid on all nodes", _k("valid")),
    query.FieldDef("hidden", "Hidden", _B, "Whether the OS is hidden", _k("hidden")),
    query.FieldDef("blacklisted", "Blacklisted", _B, "Whether the OS is blacklisted",
                   _k("blacklisted")),
    query.FieldDef("variants", "Variants", _O, "Variants supported on all nodes",
                   _k("variants")),
    query.FieldDef("api_versions", "ApiVersions", _O, "API versions supported on all nodes",
                   _k("api_versions")),
    query.FieldDef("parameters", "Parameters", _O, "Parameters supported on all nodes",
                   _k("parameters")),
    query.FieldDef("node_status", "NodeStatus", _O, "Per-node status of the OS",
                   _k("node_status")),
    query.FieldDef("os_hvp", "OsHypervisorParams", _O, "OS-specific hypervisor parameters",
                   lambda ctx, item: ctx.os_hvp.get(item["name"], {})),
    query.FieldDef("osparams", "OsParameters", _O, "OS-specific cluster parameters",
                   lambda ctx, item: ctx.osparams.get(item["name"], {})),
])


def collect_os(context: MasterContext, qfilter: Any, needs: set[str]) -> tuple[list[Any], Any]:
    """Items and context of the ``os`` resource."""
    items = diagnose_os(context)
    names = query.requested_names(qfilter, "name")
    if names:
        known = {i["name"] for i in items}
        missing = [n for n in names if n not in known]
        if missing:
            raise errors.OpPrereqError(f"OS(es) {', '.join(map(str, missing))} not known",
                                       errors.ECODE_NOENT)
    return items, context.committed_cfg().get_cluster_info()


class LUOsDiagnose(NoHooksLU[OpOsDiagnose]):
    """Legacy OS query: rows of the requested ``output_fields``."""

    REQ_BGL = False

    def ExpandNames(self) -> None:
        self.needed_locks = {}

    def Exec(self, feedback_fn: FeedbackFn) -> Any:
        qfilter = query.legacy_os_filter(list(self.op.output_fields), self.op.names)
        items, ctx = collect_os(self.context, qfilter, set())
        res = query.query(OS_FIELDS, items, ctx, self.op.output_fields, qfilter)
        return query.old_style_rows(res)
