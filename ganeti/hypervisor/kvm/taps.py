"""The node side of kvm NICs: tap names, and running the steps of
:mod:`ganeti.hypervisor.kvm.nicmodes` (doc/kvm.md, "NIC modes")."""

from __future__ import annotations

import logging
import socket
from typing import Any

from ganeti import constants, errors
from ganeti.hypervisor import base
from ganeti.hypervisor.kvm import hotplug, nicmodes
from ganeti.utils import process

__all__ = ["free_name", "run_steps", "attach", "detach_all"]

logger = logging.getLogger(__name__)


def free_name(instance: str, idx: int) -> str:
    """The tap name of NIC ``idx``: the instance's usual one, or its alternative while
    the usual one exists (a migration between two nodes of one host)."""
    usual = hotplug.tap_name(instance, str(idx))
    return hotplug.tap_name(instance, f"{idx}b") if _exists(usual) else usual


def _exists(ifname: str) -> bool:
    """Whether this network namespace has a device ``ifname`` (asked of the kernel:
    ``/sys`` shows the namespace it was mounted in)."""
    try:
        socket.if_nametoindex(ifname)
    except OSError:
        return False
    return True


def run_steps(name: str, ifname: str, steps: list[nicmodes.Step]) -> None:
    """Run ``steps`` for the tap ``ifname`` of instance ``name``; raises
    :class:`errors.HypervisorError` naming the step that failed."""
    for step in steps:
        if step[0] == nicmodes.WRITE:
            try:
                with open(step[1], "w", encoding="ascii") as fh:
                    fh.write(step[2])
            except OSError as exc:
                raise errors.HypervisorError(f"Instance {name}: cannot set {step[1]} for"
                                             f" {ifname}: {exc.strerror or exc}") from exc
            continue
        try:
            result = process.run_command(list(step), timeout=30)
        except errors.CommandError as exc:   # not installed, not executable
            raise errors.HypervisorError(f"Instance {name}: cannot run {step[0]} for"
                                         f" {ifname}: {exc}") from exc
        if result.failed:
            raise errors.HypervisorError(
                f"Instance {name}: {' '.join(step)} failed for {ifname}:"
                f" {result.fail_reason} {result.stderr.strip()}")


def attach(name: str, ifname: str, nic: base.NicSpec) -> None:
    """Put the tap ``ifname`` on the NIC's network (its mode's steps).

    A bridged NIC with a VLAN needs a bridge that filters VLANs (else the
    guest would silently not be isolated): refused otherwise, naming it.
    The bridge's settings are asked of the kernel of this network namespace
    (``ip -details -json link show``; ``/sys`` shows the namespace it was
    mounted in).
    """
    pvid = 1
    if nic.mode == constants.NIC_MODE_BRIDGED and not nicmodes.parse_vlan(nic.vlan).empty:
        try:
            shown = process.run_command(["ip", "-details", "-json", "link", "show", "dev",
                                         nic.link], timeout=30)
        except errors.CommandError as exc:
            raise errors.HypervisorError(f"Instance {name}: cannot run ip: {exc}") from exc
        if shown.failed:
            raise errors.HypervisorError(f"Instance {name}: no bridge {nic.link} for"
                                         f" {ifname}: {shown.stderr.strip()}")
        try:
            pvid = nicmodes.bridge_vlan_pvid(nic.link, shown.stdout)
        except errors.HypervisorError as exc:
            raise errors.HypervisorError(f"Instance {name}: {exc}") from None
    run_steps(name, ifname, nicmodes.plan_up(
        nic.mode, nic.link, nic.vlan, ifname, nic.ip, default_pvid=pvid,
        communication=nicmodes.is_communication(nic.name, nic.mode)))


def detach_all(name: str, runtime: dict[str, Any] | None) -> None:
    """Undo what removing the taps of a stopped instance does not (an Open vSwitch
    port); logged, never raised: the instance is stopped already."""
    if not runtime:
        return
    nics = (runtime.get("spec") or {}).get("nics") or []
    try:
        devices = hotplug.devices_of(runtime).nics
    except errors.GanetiError as exc:
        logger.warning("Instance %s: cannot read its devices: %s", name, exc)
        return
    for nic, dev in zip(nics, devices):
        if not dev.ifname:
            continue
        steps = nicmodes.plan_down(str(nic.get("mode") or ""), str(nic.get("link") or ""),
                                   dev.ifname)
        try:
            run_steps(name, dev.ifname, steps)
        except errors.GanetiError as exc:
            logger.warning("%s", exc)
