"""The ``ssconf_*`` files: a few config values every node can read cheaply.

The master computes the values from the config
(:func:`compute_ssconf_values`) and every node stores them as
``<data_dir>/ssconf_<key>`` (:func:`write_ssconf_files`).  Values are plain
text: one value, or one entry per line (``name``, ``name ip`` or
``name=value``), without a trailing newline, as Ganeti writes them.
:class:`SimpleStore` (from :mod:`ganeti.ssconfstore`, light enough for the
CLI) reads them back with typed getters.

Files are written atomically with mode 0644 (Ganeti uses 0444; the
difference does not matter for us as every writer replaces the file by
rename, and 0644 lets tests and operators edit them).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from operator import attrgetter

from ganeti import constants, errors, parameters
from ganeti.objects import ConfigData
from ganeti.pathutils import Paths
from ganeti.ssconfstore import MAX_SIZE as _MAX_SIZE
from ganeti.ssconfstore import SSCONF_KEYS, SimpleStore
from ganeti.utils import io

__all__ = ["SSCONF_KEYS", "compute_ssconf_values", "SsconfValues", "write_ssconf_files",
           "SimpleStore"]

logger = logging.getLogger(__name__)

_SSCONF_MODE = 0o644
_KEY_RE = re.compile(r"^[a-z0-9_.+-]+$")


def _lines(items: list[str]) -> str:
    return "\n".join(items)


def _format_uid_pool(pool: list[list[int]]) -> str:
    parts = []
    for entry in pool:
        lo, hi = (entry[0], entry[-1]) if entry else (0, 0)
        parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
    return _lines(parts)


def compute_ssconf_values(config_data: ConfigData, *,
                          instance_list: str | None = None) -> dict[str, str]:
    """All ssconf values of ``config_data`` (``key -> text``).

    Includes ``hvparams_<hv>`` (the cluster-level filled parameters, as
    ``key=value`` lines) for every hypervisor we know parameters of and
    every enabled one.  ``instance_list``, when given, is the value of
    that key, already computed from the same instances
    (:class:`SsconfValues`).
    """
    d = config_data
    cluster = d.cluster
    nodes = sorted(d.nodes.values(), key=lambda n: n.name)
    groups = {u: g for u, g in d.nodegroups.items()}
    master = d.nodes.get(cluster.master_node)
    candidates = [n for n in nodes if n.master_candidate]
    values = {
        "cluster_name": cluster.cluster_name,
        "cluster_tags": _lines(sorted(cluster.tags)),
        "enabled_user_shutdown": str(cluster.enabled_user_shutdown),
        "file_storage_dir": cluster.file_storage_dir,
        "shared_file_storage_dir": cluster.shared_file_storage_dir,
        "gluster_storage_dir": cluster.gluster_storage_dir,
        "hypervisor_list": _lines(cluster.enabled_hypervisors),
        "instance_list": (instance_list if instance_list is not None
                          else _lines(sorted(i.name for i in d.instances.values()))),
        "maintain_node_health": str(cluster.maintain_node_health),
        "master_candidates": _lines([n.name for n in candidates]),
        "master_candidates_certs": _lines(
            [f"{u}={c}" for u, c in sorted(cluster.candidate_certs.items())]),
        "master_candidates_ips": _lines([n.primary_ip for n in candidates]),
        "master_ip": cluster.master_ip,
        "master_netdev": cluster.master_netdev,
        "master_netmask": str(cluster.master_netmask),
        "master_node": master.name if master else "",
        "node_list": _lines([n.name for n in nodes]),
        "node_primary_ips": _lines([f"{n.name} {n.primary_ip}" for n in nodes]),
        "node_secondary_ips": _lines([f"{n.name} {n.secondary_ip or n.primary_ip}" for n in nodes]),
        "node_vm_capable": _lines([f"{n.name}={n.vm_capable}" for n in nodes]),
        "nodegroups": _lines([f"{u} {g.name}" for u, g in sorted(groups.items(),
                                                                  key=lambda x: x[1].name)]),
        "networks": _lines([f"{u} {n.name}" for u, n in sorted(d.networks.items(),
                                                                key=lambda x: x[1].name)]),
        "offline_nodes": _lines([n.name for n in nodes if n.offline]),
        "online_nodes": _lines([n.name for n in nodes if not n.offline]),
        "primary_ip_family": str(cluster.primary_ip_family),
        "release_version": constants.RELEASE_VERSION,
        "ssh_ports": _lines([
            f"{n.name}={parameters.fill_ndparams(cluster, groups.get(n.group), n)['ssh_port']}"
            for n in nodes]),
        "uid_pool": _format_uid_pool(cluster.uid_pool),
    }
    hvs = set(parameters.HV_PARAMETERS) | set(cluster.enabled_hypervisors)
    for hv in sorted(hvs):
        filled = parameters.fill_hvparams(cluster, hv)
        values[f"hvparams_{hv}"] = _lines([f"{k}={v}" for k, v in sorted(filled.items())])
    return values


class SsconfValues:
    """:func:`compute_ssconf_values` for one config after another (the master's pushes).

    Sorting 10,000 instance names costs about 2.5 ms; most changes
    (an instance started or stopped) keep every name, so the sorted
    ``instance_list`` of the previous call is reused while the names, in
    store order, are equal (one list comparison, run in C).  Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: list[str] | None = None
        self._instance_list = ""

    def __call__(self, config_data: ConfigData) -> dict[str, str]:
        """The ssconf values of ``config_data``, as :func:`compute_ssconf_values`."""
        names = list(map(attrgetter("name"), config_data.instances.values()))
        with self._lock:
            if names != self._names:
                self._names = names
                self._instance_list = _lines(sorted(names))
            instance_list = self._instance_list
        return compute_ssconf_values(config_data, instance_list=instance_list)


def write_ssconf_files(paths: Paths, values: dict[str, str]) -> None:
    """Write every ``ssconf_<key>`` atomically and remove stale ones.

    Raises :class:`errors.ProgrammerError` for a key that cannot be a file
    name and :class:`OSError` when writing fails.
    """
    for key in values:
        if not _KEY_RE.match(key):
            raise errors.ProgrammerError(f"Invalid ssconf key {key!r}")
    os.makedirs(paths.data_dir, exist_ok=True)
    for key, value in values.items():
        target = paths.ssconf_file(key)
        try:
            if io.read_file(target, max_size=_MAX_SIZE) == value.encode("utf-8"):
                continue
        except (OSError, errors.GanetiError):
            pass
        io.write_file_atomic(target, value, mode=_SSCONF_MODE)
    for name in os.listdir(paths.data_dir):
        if name.startswith("ssconf_") and name[len("ssconf_"):] not in values:
            logger.debug("Removing stale ssconf file %s", name)
            io.remove_file(os.path.join(paths.data_dir, name))
