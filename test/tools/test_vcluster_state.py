"""tools.vcluster: the state file DIR/vcluster.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganeti import errors
from tools.harness import vcluster


def test_state_file_round_trips_indented(tmp_path: Path) -> None:
    vc = vcluster.VCluster(directory=str(tmp_path), cluster_name="c.example.com",
                           noded_port=1811, ssh_port=None, master="node1.vcluster",
                           masterd_args=["--workers", "2"],
                           nodes=[vcluster.VNode(name="node1.vcluster", ip="127.0.1.1",
                                                 root=str(tmp_path / "node1"))])
    vc.save()
    text = (tmp_path / vcluster.DATA_FILE).read_text()
    assert text.startswith('{\n  "cluster_name"')   # indented and sorted: people read it
    assert vcluster.load(str(tmp_path)) == vc


def test_unreadable_state_file_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / vcluster.DATA_FILE).write_text("{not json")
    with pytest.raises(errors.ConfigurationError, match="not a virtual cluster"):
        vcluster.load(str(tmp_path))
