"""Hypervisor plug-ins: a registry and a factory.

``HYPERVISORS`` maps a hypervisor name (``constants.HT_*``) to the module
and class that implement it; :func:`get_hypervisor` builds one for a
node's paths.  The fake (``fake.py``) and kvm (``ganeti.hypervisor.kvm``,
doc/kvm.md) are implemented.  An implementation is imported the first
time it is asked for, so that importing the package for its interface or
its pure checks (as the master does) does not load every hypervisor; the
node side loads them all at once (:func:`import_all`).
"""

from __future__ import annotations

import importlib
from typing import Any

from ganeti import constants, errors, pathutils
from ganeti.hypervisor.base import BaseHypervisor, InstanceSpec, NicSpec

__all__ = ["HYPERVISORS", "get_hypervisor", "get_hypervisor_class", "import_all",
           "BaseHypervisor", "InstanceSpec", "NicSpec"]

#: hypervisor name -> (module, class name) of its implementation
HYPERVISORS: dict[str, tuple[str, str]] = {
    constants.HT_FAKE: ("ganeti.hypervisor.fake", "FakeHypervisor"),
    constants.HT_KVM: ("ganeti.hypervisor.kvm.hypervisor", "KvmHypervisor"),
}


def get_hypervisor_class(name: str) -> type[BaseHypervisor]:
    """The class registered for ``name``; raises HypervisorError if none."""
    try:
        module, cls_name = HYPERVISORS[name]
    except KeyError:
        raise errors.HypervisorError(f"Unknown or unsupported hypervisor '{name}'") from None
    cls: type[BaseHypervisor] = getattr(importlib.import_module(module), cls_name)
    return cls


def import_all() -> dict[str, type[BaseHypervisor]]:
    """Import every registered implementation; name -> class.

    The node side calls it once when its backend is loaded: the node
    daemon forks a child per request, and a child should not import a
    hypervisor again (each would pay for it).
    """
    return {name: get_hypervisor_class(name) for name in HYPERVISORS}


def get_hypervisor(name: str, paths: pathutils.Paths, **kwargs: Any) -> BaseHypervisor:
    """A new hypervisor object of type ``name`` working below ``paths``.

    Extra keyword arguments go to the class (e.g. ``node_memory`` for the
    fake).  Raises :class:`errors.HypervisorError` for unknown names.
    """
    return get_hypervisor_class(name)(paths, **kwargs)
