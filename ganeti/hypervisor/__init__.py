"""Hypervisor plug-ins: a registry and a factory.

``HYPERVISORS`` maps a hypervisor name (``constants.HT_*``) to its class;
:func:`get_hypervisor` builds one for a node's paths.  The fake (``fake.py``)
and kvm (``ganeti.hypervisor.kvm``, doc/kvm.md) are implemented.
"""

from __future__ import annotations

from typing import Any

from ganeti import constants, errors, pathutils
from ganeti.hypervisor.base import BaseHypervisor, InstanceSpec, NicSpec
from ganeti.hypervisor.fake import FakeHypervisor
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor

__all__ = ["HYPERVISORS", "get_hypervisor", "get_hypervisor_class",
           "BaseHypervisor", "InstanceSpec", "NicSpec"]

HYPERVISORS: dict[str, type[BaseHypervisor]] = {
    constants.HT_FAKE: FakeHypervisor,
    constants.HT_KVM: KvmHypervisor,
}


def get_hypervisor_class(name: str) -> type[BaseHypervisor]:
    """The class registered for ``name``; raises HypervisorError if none."""
    try:
        return HYPERVISORS[name]
    except KeyError:
        raise errors.HypervisorError(f"Unknown or unsupported hypervisor '{name}'") from None


def get_hypervisor(name: str, paths: pathutils.Paths, **kwargs: Any) -> BaseHypervisor:
    """A new hypervisor object of type ``name`` working below ``paths``.

    Extra keyword arguments go to the class (e.g. ``node_memory`` for the
    fake).  Raises :class:`errors.HypervisorError` for unknown names.
    """
    return get_hypervisor_class(name)(paths, **kwargs)
