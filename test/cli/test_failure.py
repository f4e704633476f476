"""Error texts of the gnt-* tools (ganeti.cli.failure): a non-master names the master."""

from __future__ import annotations

import os

from ganeti import constants, errors
from ganeti.cli import failure
from ganeti.pathutils import Paths


def _setup(tmp_path, monkeypatch, me: str, master: str) -> None:
    monkeypatch.setenv(constants.ENV_ROOTDIR, str(tmp_path))
    monkeypatch.setenv(constants.ENV_HOSTNAME, me)
    path = Paths(root=str(tmp_path)).ssconf_file("master_node")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(master + "\n")


def test_no_master_daemon_on_a_non_master_names_the_master(tmp_path, monkeypatch):
    _setup(tmp_path, monkeypatch, "node1", "node2")
    code, text = failure.format_error(errors.NoMasterError("Cannot communicate"))
    assert code == failure.EXIT_FAILURE
    assert text.endswith("This node (node1) is not the master; the master is node2:"
                         " run the command there")


def test_no_master_daemon_on_the_master_says_only_that(tmp_path, monkeypatch):
    _setup(tmp_path, monkeypatch, "node2", "node2")
    assert failure.format_error(errors.NoMasterError("Cannot communicate"))[1] == \
        "Cannot communicate"
