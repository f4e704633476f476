"""``--version`` of every daemon: Ganeti's version line, exit 0, nothing started.

Upstream's QA (``qa_env.TestGanetiCommands``) runs ``ganeti-noded --version``
and the like on every node; each daemon prints what ``gnt-cluster
--version`` prints for itself (``constants.VERSION_LINE``).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from ganeti import constants

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
DAEMONS = ["ganeti-noded", "ganeti-rapi", "ganeti-masterd", "ganeti-watcher"]


@pytest.mark.parametrize("name", DAEMONS)
def test_version_prints_the_line_and_starts_nothing(name: str, tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, GANETI_ROOTDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, str(ROOT / "daemons" / name), "--version"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{name} (ganeti) {constants.RELEASE_VERSION}\n"
    assert list(tmp_path.iterdir()) == []    # no pid file, log or run directory


def test_gnt_tools_print_the_same_line(capsys: pytest.CaptureFixture[str]) -> None:
    from ganeti.cli.main import generic_main
    assert generic_main({}, ["--version"], prog="gnt-cluster") == 0
    assert capsys.readouterr().out == f"gnt-cluster (ganeti) {constants.RELEASE_VERSION}\n"
