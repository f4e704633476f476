"""Shared fixture: a NodeContext over a temporary node root."""

from __future__ import annotations

import pytest

from ganeti.backend.context import NodeContext
from ganeti.pathutils import Paths


@pytest.fixture
def ctx(tmp_path) -> NodeContext:
    paths = Paths(root=str(tmp_path / "node"))
    for d in (paths.data_dir, paths.queue_dir, paths.conf_dir, paths.run_dir):
        import os
        os.makedirs(d, exist_ok=True)
    return NodeContext(paths=paths, hostname="node1.example.com", noded_port=1811,
                       clock=lambda: 1234.5, sleep=lambda s: None)
