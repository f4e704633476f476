"""OS definition procedures: diagnose, validate, install (create) and rename.

The scripts run through :mod:`ganeti.osapi` with the documented
environment; each run writes a log under the node's ``var/log/ganeti/os``
and a failure's message carries the log's last lines.  Instance dicts are
as described in :mod:`ganeti.backend.instance`; the disks the scripts work
on come from ``instance["disks_info"]`` and are assembled first.
"""

from __future__ import annotations

import logging
from typing import Any

from ganeti import constants, errors, osapi
from ganeti.backend import blockdev
from ganeti.backend import instance as binstance
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, SLOW, procedure

__all__ = ["os_diagnose", "os_validate", "instance_os_add", "instance_run_rename"]

logger = logging.getLogger(__name__)

OS_VALIDATE_PARAMETERS = "parameters"
OS_VALIDATE_CHECKS = frozenset([OS_VALIDATE_PARAMETERS])


@procedure(FAST)
def os_diagnose(ctx: NodeContext) -> list[list[Any]]:
    """[[name, path, status, diagnose, variants, parameters, api_versions, trusted], ...] in
    search order.

    Every OS directory of the search path, in search order.

    Rows are Ganeti's ``[name, path, status, diagnose, variants, parameters,
    api_versions, trusted]``: ``path`` canonical, ``status`` True when the
    definition is valid, ``diagnose`` the reason when it is not (else ""),
    ``parameters`` ``[[name, doc], ...]``, ``trusted`` always True.  A name
    may appear more than once; the first row is the one in effect.
    """
    rows = []
    for diag in osapi.diagnose_os(ctx.paths):
        rows.append([diag.name, blockdev.wire_path(ctx, diag.path), diag.valid, diag.status,
                     list(diag.variants), [list(p) for p in diag.parameters],
                     list(diag.api_versions), True])
    return rows


@procedure(NORMAL)
def os_validate(ctx: NodeContext, required: bool, osname: str, checks: list,
                osparams: dict, osparams_private: dict) -> bool:
    """Check the OS (and with checks ['parameters'] its params, osparams_private: the private
    and secret ones, scrubbed from the answer and the logs). -> True, or False when absent and
    not required

    Check OS ``osname`` (``name+variant`` allowed) and its parameters.

    ``checks`` may contain ``"parameters"`` (names known to the OS, then its
    ``verify parameters`` script, given ``osparams`` and ``osparams_private``
    together; the private values are scrubbed from the script's log and the
    error, the node daemon scrubs them from its own log).  Returns False when the OS is not on this
    node and ``required`` is false; True when everything checked out.
    Raises :class:`errors.InvalidOS` / :class:`errors.ParameterError`.
    """
    unknown = sorted(set(checks) - OS_VALIDATE_CHECKS)
    if unknown:
        raise errors.OpExecError(f"Unknown OS validation checks: {', '.join(map(str, unknown))}")
    try:
        os_def = osapi.find_os(ctx.paths, osname)
    except errors.InvalidOS:
        if not required:
            return False
        raise
    _, variant = osapi.split_os_name(osname)
    if os_def.api_version >= constants.OS_API_V15:
        osapi.select_variant(os_def, variant)
    elif variant:
        raise errors.InvalidOS(f"OS {os_def.name} does not support variants")
    if OS_VALIDATE_PARAMETERS in checks:
        osapi.verify_os_params(ctx.paths, osname, {**osparams, **osparams_private},
                               clock=ctx.clock, secrets=list(osparams_private.values()))
    return True


def _os_disk(ctx: NodeContext, data: Any, instance_name: str, idx: int) -> osapi.OSDisk:
    template, path = blockdev.assemble_disk(ctx, data, instance_name, idx)
    _, spec = blockdev.parse_disk(data, instance_name, idx)
    if template in constants.DTS_FILEBASED:
        driver = spec.logical_id[0] if spec.logical_id else "loop"
        backend_type = f"file:{driver}"
    else:
        backend_type = "block"
    return osapi.OSDisk(path=path, size=spec.size, access=spec.mode, uuid=spec.uuid,
                        name=spec.name, backend_type=backend_type)


def os_instance(ctx: NodeContext, instance: dict) -> osapi.OSInstance:
    """The OS API view of an instance dict; assembles its ``disks_info``."""
    inst = binstance.parse_instance(instance)
    if not inst.os:
        raise errors.InvalidOS(f"Instance {inst.name} has no OS")
    disks = tuple(_os_disk(ctx, d, inst.name, idx)
                  for idx, d in enumerate(binstance.instance_disks_info(instance)))
    nics = []
    netinfo = instance.get("nics_netinfo") or []
    for idx, nic in enumerate(inst.nics):
        params = nic.nicparams or {}
        net = netinfo[idx] if idx < len(netinfo) and isinstance(netinfo[idx], dict) else {}
        nics.append(osapi.OSNic(mac=nic.mac, ip=nic.ip,
                                mode=params.get("mode", constants.NIC_MODE_BRIDGED),
                                link=str(params.get("link", "")), uuid=nic.uuid, name=nic.name,
                                network_env=tuple(sorted((str(k), str(v))
                                                         for k, v in net.items()))))
    private = inst.osparams_private or {}
    osparams = {**(inst.osparams or {}), **private}
    return osapi.OSInstance(name=inst.name, os=inst.os, hypervisor=inst.hypervisor,
                            uuid=inst.uuid, hvparams=dict(inst.hvparams),
                            beparams=dict(inst.beparams), osparams=osparams,
                            disks=disks, nics=tuple(nics), secrets=tuple(private.values()))


@procedure(SLOW)
def instance_os_add(ctx: NodeContext, instance: dict, reinstall: bool, debug: int) -> str:
    """Assemble instance['disks_info'] and run the OS create script. -> log path

    Install the instance's OS: run ``create`` on its assembled disks.

    Returns the canonical path of the script's log.  Raises
    :class:`errors.InvalidOS` for a missing/broken OS or bad variant and
    :class:`errors.OpExecError` (with the log tail) when the script fails.
    """
    os_inst = os_instance(ctx, instance)
    log = osapi.create_os(ctx.paths, os_inst, reinstall=reinstall, debug_level=debug,
                          clock=ctx.clock)
    return blockdev.wire_path(ctx, log)


@procedure(SLOW)
def instance_run_rename(ctx: NodeContext, instance: dict, old_name: str, debug: int) -> str:
    """Run the OS rename script (instance['name'] is the new name). -> log path

    Run the OS ``rename`` script (``instance["name"]`` is the new name).

    Returns the canonical path of the log; failures as for instance_os_add.
    """
    os_inst = os_instance(ctx, instance)
    log = osapi.rename_os(ctx.paths, os_inst, old_name, debug_level=debug, clock=ctx.clock)
    return blockdev.wire_path(ctx, log)
