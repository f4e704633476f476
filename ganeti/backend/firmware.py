"""A kvm instance's UEFI NVRAM and TPM state on this node, moved by the master.

The state directory (:mod:`ganeti.hypervisor.kvm.firmware`, keyed by the
instance's UUID) travels as a base64'd gzip'd tar archive: the master reads
it from the node the instance leaves and writes it to the node it goes to
(failover, migration, move: doc/kvm.md, "UEFI and TPM").
"""

from __future__ import annotations

import base64
import binascii

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, NORMAL, procedure
from ganeti.hypervisor.kvm import firmware

__all__ = ["instance_firmware_get", "instance_firmware_put", "instance_firmware_remove"]


def _state_dir(ctx: NodeContext, instance_uuid: str) -> str:
    try:
        return firmware.state_dir(ctx.paths.kvm_firmware_dir, instance_uuid)
    except errors.ProgrammerError as exc:
        raise errors.HypervisorError(str(exc)) from exc


@procedure(NORMAL)
def instance_firmware_get(ctx: NodeContext, instance_uuid: str) -> str | None:
    """The instance's UEFI NVRAM and TPM state on the node (base64 tar.gz), or None.

    The instance's firmware state here, base64 (None: it has none on this node).
    """
    data = firmware.pack(_state_dir(ctx, instance_uuid))
    return None if data is None else base64.b64encode(data).decode("ascii")


@procedure(NORMAL)
def instance_firmware_put(ctx: NodeContext, instance_uuid: str, data: str) -> None:
    """Replace the instance's UEFI NVRAM and TPM state by data (instance_firmware_get's). ->
    None

    Replace the instance's firmware state here by ``data`` (from
    :func:`instance_firmware_get`); no qemu of the instance may run here."""
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise errors.HypervisorError(f"Bad firmware state data: {exc}") from exc
    firmware.unpack(raw, _state_dir(ctx, instance_uuid))


@procedure(FAST)
def instance_firmware_remove(ctx: NodeContext, instance_uuid: str) -> None:
    """Remove the instance's UEFI NVRAM and TPM state, if any. -> None

    Remove the instance's firmware state here (nothing when there is none).
    """
    firmware.remove_state(_state_dir(ctx, instance_uuid))
