"""gnt-cluster verify's warning about the master's RAPI daemon (ganeti/client/gnt_cluster.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ganeti import constants, pathutils
from ganeti.client import gnt_cluster


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> pathutils.Paths:
    """A node root whose ssconf names node1 the master; this node is node1."""
    monkeypatch.setenv(constants.ENV_ROOTDIR, str(tmp_path))
    monkeypatch.setenv(constants.ENV_HOSTNAME, "node1.example.com")
    paths = pathutils.get_paths()
    os.makedirs(paths.data_dir, exist_ok=True)
    os.makedirs(paths.run_dir, exist_ok=True)
    with open(paths.ssconf_file("master_node"), "w") as fh:
        fh.write("node1.example.com\n")
    return paths


def test_the_master_without_rapi_is_warned(root: pathutils.Paths, capsys: Any) -> None:
    gnt_cluster._warn_rapi_not_running()
    assert "the RAPI daemon (ganeti-rapi) is not running" in capsys.readouterr().err


def test_the_master_with_rapi_running_is_not_warned(root: pathutils.Paths, capsys: Any
                                                    ) -> None:
    with open(root.pid_file(constants.RAPI), "w") as fh:
        fh.write(f"{os.getpid()}\n")
    gnt_cluster._warn_rapi_not_running()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("elsewhere", ["node2.example.com", None])
def test_off_the_master_nothing_is_said(root: pathutils.Paths, capsys: Any,
                                        monkeypatch: pytest.MonkeyPatch,
                                        elsewhere: str | None) -> None:
    """On another node, or on a host without ssconf (it reaches LUXI only), the
    master's processes cannot be seen: no warning either way."""
    if elsewhere:
        monkeypatch.setenv(constants.ENV_HOSTNAME, elsewhere)
    else:
        os.unlink(root.ssconf_file("master_node"))
    gnt_cluster._warn_rapi_not_running()
    assert capsys.readouterr().err == ""
