"""RAPI rows of the cluster: roots, version, metrics, info, features,
operating systems, cluster changes and cluster tags (pure)."""

from __future__ import annotations

from typing import Any

from ganeti import constants, query
from ganeti.opcodes import wire
from ganeti.rapi.openapi import OBJ, STR, STRS, Doc, opbody
from ganeti.rapi.resources.base import (FEATURES, RAPI_VERSION, Ctx, RawBody, Route, op_row,
                                        query_rows, tags_routes)

__all__ = ["ROOTS", "ROUTES"]


def _metrics(ctx: Ctx) -> RawBody:
    """``GET /metrics``: the master's figures in the OpenMetrics text format."""
    from ganeti import metrics
    return RawBody(metrics.OPENMETRICS_CONTENT_TYPE,
                   metrics.render_openmetrics(ctx.client.QueryMetrics()))


def _os_list(ctx: Ctx) -> list[str]:
    names: list[str] = []
    fields = ["name", "variants"]       # valid, not hidden, not blacklisted: as in Ganeti
    for row in query_rows(ctx, constants.QR_OS, fields, query.legacy_os_filter(fields)):
        variants = row.get("variants") or []
        names.extend([f"{row['name']}+{v}" for v in variants] if variants else [row["name"]])
    return names


#: keys of the cluster information given again under the name ``/2/modify`` takes
#: (Ganeti's ``GET_ALIASES`` of ``/2/info``), so a GET's answer can be PUT back
INFO_ALIASES: dict[str, str] = {
    "volume_group_name": "vg_name",
    "drbd_usermode_helper": "drbd_helper",
}


def _info(ctx: Ctx) -> dict[str, Any]:
    """``GET /2/info``: QueryClusterInfo with the keys of ``INFO_ALIASES`` also under
    their alias."""
    info = dict(ctx.client.QueryClusterInfo())
    for key, alias in INFO_ALIASES.items():
        if key in info:
            info[alias] = info[key]
    return info


#: the roots and what describes the server (the table puts ``GET /2/openapi.json`` after them)
ROOTS: list[Route] = [
    Route("/", "GET", read=lambda c: None,
          doc=Doc("Root (no content)", result={"nullable": True})),
    Route("/version", "GET", read=lambda c: RAPI_VERSION,
          doc=Doc("The RAPI version (2)", result={"type": "integer"})),
    Route("/metrics", "GET", read=_metrics, doc=Doc(
        "The master daemon's figures in the OpenMetrics text format (doc/metrics.md)",
        result={**STR, "description": "OpenMetrics 1.0 text exposition"},
        media_type="application/openmetrics-text; version=1.0.0; charset=utf-8")),
    Route("/2", "GET", read=lambda c: None,
          doc=Doc("Version 2 root (no content)", result={"nullable": True})),
    Route("/2/info", "GET", read=_info,
          doc=Doc("Cluster information", result=OBJ)),
    Route("/2/features", "GET", read=lambda c: list(FEATURES),
          doc=Doc("Optional features this server implements", result=STRS)),
]

#: the cluster's own resources
ROUTES: list[Route] = [
    Route("/2/os", "GET", read=_os_list,
          doc=Doc("Operating systems (with variants as os+variant)", result=STRS)),
    Route("/2/redistribute-config", "PUT", build=lambda c: [wire.cluster_redist_conf()],
          opcode=wire.OP_CLUSTER_REDIST_CONF,
          doc=Doc("Redistribute the configuration to all nodes")),
    op_row("/2/modify", "PUT", wire.OP_CLUSTER_SET_PARAMS,
           Doc("Change cluster parameters", body=opbody(wire.OP_CLUSTER_SET_PARAMS))),
    *tags_routes("/2/tags", constants.TAG_CLUSTER, None, "cluster"),
]
