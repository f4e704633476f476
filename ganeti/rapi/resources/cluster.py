"""RAPI rows of the cluster: roots, version, metrics, info, features,
operating systems and the OS image store, cluster changes and cluster tags (pure)."""

from __future__ import annotations

from typing import Any

from ganeti import constants, query
from ganeti.opcodes import wire
from ganeti.rapi.openapi import OBJ, STR, STRS, Doc, Param, opbody
from ganeti.rapi.resources.base import (FEATURES, RAPI_VERSION, Ctx, RawBody, Route, op_row,
                                        query_rows, tags_routes)

__all__ = ["IMAGE_ROUTES", "ROOTS", "ROUTES"]


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


def _image_names(ctx: Ctx) -> list[str]:
    """``?names=a,b``: the store images to list (none: all)."""
    return [n for n in (ctx.qstr("names") or "").split(",") if n]


#: the OS image store (doc/images.md, "The image store"): each request is a job, as
#: ``gnt-os image``'s; the list too (it reads the master's store in a job, so it needs
#: write access, as a node's storage units do)
IMAGE_ROUTES: list[Route] = [
    Route("/2/os/images", "GET", opcode=wire.OP_OS_IMAGE_LIST, access="write",
          build=lambda c: [wire.os_image_list(names=_image_names(c))],
          doc=Doc("The OS image store's entries (a job; its result: one object per image with"
                  " name, format, size, virtual_size, sha256, source and added)",
                  (Param("names", "str", "comma-separated image names (default: all)"),))),
    op_row("/2/os/images", "POST", wire.OP_OS_IMAGE_ADD, Doc(
        "Add an image to the OS image store: a file on the master or an http(s) URL,"
        " checked against ``checksum`` (sha256:HEX) when given",
        body=opbody(wire.OP_OS_IMAGE_ADD, ["name", "source"], name=STR, source=STR,
                    checksum=STR))),
    Route("/2/os/images/{image}", "DELETE", opcode=wire.OP_OS_IMAGE_REMOVE,
          build=lambda c: [wire.os_image_remove(name=c.args["image"])],
          doc=Doc("Remove an image from the OS image store (refused while an install from it"
                  " runs)")),
]

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
    *IMAGE_ROUTES,
    Route("/2/redistribute-config", "PUT", build=lambda c: [wire.cluster_redist_conf()],
          opcode=wire.OP_CLUSTER_REDIST_CONF,
          doc=Doc("Redistribute the configuration to all nodes")),
    op_row("/2/modify", "PUT", wire.OP_CLUSTER_SET_PARAMS,
           Doc("Change cluster parameters", body=opbody(wire.OP_CLUSTER_SET_PARAMS))),
    *tags_routes("/2/tags", constants.TAG_CLUSTER, None, "cluster"),
]
