"""ganeti.hypervisor: the registry imports an implementation when it is asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ganeti import constants, errors, hypervisor
from ganeti.hypervisor.fake import FakeHypervisor
from ganeti.hypervisor.kvm.hypervisor import KvmHypervisor


@pytest.mark.parametrize("name, cls", [(constants.HT_FAKE, FakeHypervisor),
                                       (constants.HT_KVM, KvmHypervisor)], ids=["fake", "kvm"])
def test_every_registered_name_gives_its_class(name: str, cls: type) -> None:
    assert hypervisor.get_hypervisor_class(name) is cls


def test_unknown_name_is_refused() -> None:
    with pytest.raises(errors.HypervisorError, match="Unknown or unsupported hypervisor 'xen'"):
        hypervisor.get_hypervisor_class("xen")


def test_importing_the_package_loads_no_implementation() -> None:
    code = ("import sys, ganeti.hypervisor; "
            "print(sorted(m for m in sys.modules if m.startswith('ganeti.hypervisor.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "['ganeti.hypervisor.base']"


def test_import_all_gives_every_class() -> None:
    assert hypervisor.import_all() == {constants.HT_FAKE: FakeHypervisor,
                                       constants.HT_KVM: KvmHypervisor}


def test_the_node_backend_loads_every_implementation() -> None:
    """The node daemon's children find the hypervisors imported by their parent."""
    code = ("import sys; from ganeti import backend; backend.all_functions(); "
            "print('ganeti.hypervisor.kvm.hypervisor' in sys.modules, "
            "'ganeti.hypervisor.fake' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.split() == ["True", "True"]
