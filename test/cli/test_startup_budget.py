"""The CLI's start-up budget (doc/cli-startup.md): every read-only verb of every
``gnt-*`` tool imports only modules of its allowed set, run against a real
one-node virtual cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))

from cli_startup import ALLOWED, FLOOR_ARGV, VERBS, imported_modules, verb_argv  # noqa: E402
from vcluster_harness import VirtualCluster  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def vc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtualCluster]:
    with VirtualCluster(tmp_path_factory.mktemp("vc"), nodes=1, use_ssh=False) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def floor(vc: VirtualCluster) -> set[str]:
    code, names = imported_modules(FLOOR_ARGV, vc.env())
    assert code == 0 and "site" in names
    return names


@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v) for v in VERBS])
def test_verb_imports_only_its_allowed_set(vc: VirtualCluster, floor: set[str],
                                           verb: tuple[str, ...]) -> None:
    code, names = imported_modules(verb_argv(verb), vc.env())
    assert code == 0, f"{' '.join(verb)} failed (exit {code})"
    assert f"ganeti.client.{verb[0].replace('-', '_')}" in names   # the verb really ran
    extra = sorted(names - floor - ALLOWED)
    assert not extra, f"{' '.join(verb)} imports modules outside its start-up set: {extra}"


def test_the_guard_sees_a_heavy_import(vc: VirtualCluster, floor: set[str]) -> None:
    """A verb that imported the configuration code would be caught."""
    code, names = imported_modules(["-c", "import ganeti.bootstrap"], vc.env())
    assert code == 0
    assert {"ganeti.bootstrap", "ganeti.config", "ganeti.crypto", "subprocess"} <= names - floor - ALLOWED


def test_init_without_ssh_never_imports_paramiko(vc: VirtualCluster) -> None:
    """``gnt-cluster init --no-ssh-init`` (how the virtual cluster makes a cluster
    without SSH) connects to no SSH server, so paramiko (~0.07 s of CPU per init) is
    never imported.  Runs last: it destroys this module's cluster and makes it again."""
    from tools.harness import vcluster
    vc.ok("gnt-cluster", "destroy", "--yes-do-it")
    code, names = imported_modules(
        verb_argv(("gnt-cluster", "init", "--enabled-hypervisors", "fake", "--no-ssh-init",
                   vcluster.CLUSTER_NAME)), vc.env())
    assert code == 0, "gnt-cluster init --no-ssh-init failed"
    assert "ganeti.bootstrap" in names   # the init really ran
    assert not sorted(n for n in names if n.split(".")[0] == "paramiko")
    assert vc.ok("gnt-cluster", "getmaster").strip() == vc.cluster.master_node.name
