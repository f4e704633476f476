"""Every test in test/integration starts real daemons: mark it ``integration``.

``pytest -m "not integration"`` is then the fast run (no daemon starts);
tests elsewhere that start one carry the marker themselves.
"""

from __future__ import annotations

import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the items collected from this directory (the hook sees them all)."""
    for item in items:
        if HERE in pathlib.Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)
